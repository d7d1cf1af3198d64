//! What drivers and tools read about the database: [`pg_catalog`] (Postgres' own catalog,
//! with Eddy's objects and the functions tools call on connect), [`information_schema`], and
//! Eddy's own schema, [`eddy_catalog`] (late rows, errors, progress; [`eddy_extension`] shows
//! it as an extension; `sink_tables` has its sinks' and subscriptions' tables).

pub mod eddy_catalog;
pub mod eddy_extension;
pub mod information_schema;
pub mod pg_catalog;
pub(crate) mod sink_tables;

use std::sync::Arc;

use crate::database::Database;
use crate::error::Result;

/// `pg_catalog`'s tables and the functions that read the database's objects.
pub fn install(db: &Arc<Database>) -> Result<()> {
    pg_catalog::install(db)
}

/// `information_schema`, once every function is registered (see [`crate::context`]).
pub fn finish(db: &Arc<Database>) -> Result<()> {
    pg_catalog::finish(db)
}
