//! The `eddy` server: Postgres wire protocol in front of Eddy's planner, executor and storage.
//!
//! Modules in data-flow order:
//!
//! - [`handler`]: pgwire handlers (simple and extended query protocol).
//! - [`database`]: statement dispatch — DDL and DML to the engine, queries to DataFusion.
//! - [`sources`]: CREATE SOURCE and connector-fed tables.
//! - [`provider`]: committed rows as DataFusion tables.
//! - [`system_tables`]: the `eddy_catalog` schema.
//! - [`error`]: errors with SQLSTATE codes.
//! - [`demo`]: `eddy --demo`, a live Nexmark view.

pub mod database;
pub mod demo;
pub mod error;
pub mod handler;
pub mod provider;
pub mod sources;
pub mod system_tables;
