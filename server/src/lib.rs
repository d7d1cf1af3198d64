//! The `eddy` server: Postgres wire protocol in front of Eddy's planner, executor and storage.
//!
//! Rooms in data-flow order, from the client's bytes down to Postgres' own rules; a room
//! imports only the rooms below it (checked by `tests/rooms.rs`):
//!
//! - [`wire`]: the Postgres wire protocol: connections, frames, login, the query handlers,
//!   portals, parameters and result encoding, `COPY`.
//! - [`session`]: the statements a session answers itself: settings, transactions, cursors,
//!   prepared statements, `DISCARD`.
//! - [`context`]: the DataFusion session Eddy plans in, assembled in one place: every
//!   function family, the rules, the catalogs.
//! - [`catalogs`]: what drivers and tools read about the database: `pg_catalog`,
//!   `information_schema`, `eddy_catalog`.
//! - [`database`]: the objects (tables, views, sources, indexes) and one dispatch of DDL and
//!   DML to the engine and queries to DataFusion.
//! - [`query`]: reading stored rows: table providers, scans, key ranges, admission, memory.
//! - [`pg`]: Postgres' semantics where DataFusion's differ: SQL rewrites, plan rules,
//!   functions and value types.
//!
//! Beside them: [`metrics`] (Prometheus, on a listener of its own), [`demo`] (`eddy --demo`),
//! [`restore`] (how long the start took), [`limits`], and [`error`] with [`data_errors`]
//! (SQLSTATEs), which every room uses.

pub(crate) mod catalogs;
pub mod context;
pub(crate) mod data_errors;
pub mod database;
pub mod demo;
pub mod error;
pub mod limits;
pub mod metrics;
pub(crate) mod pg;
pub(crate) mod query;
pub mod restore;
pub(crate) mod session;
pub mod wire;
