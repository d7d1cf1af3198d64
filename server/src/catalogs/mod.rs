//! What drivers and tools read about the database: [`pg_catalog`] (Postgres' own catalog,
//! with Eddy's objects and the functions tools call on connect), [`information_schema`], and
//! Eddy's own schema, [`eddy_catalog`] (late rows, errors, progress; [`eddy_extension`] shows
//! it as an extension).

pub mod eddy_catalog;
pub mod eddy_extension;
pub mod information_schema;
pub mod pg_catalog;
