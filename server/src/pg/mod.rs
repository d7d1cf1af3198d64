//! Postgres' semantics where DataFusion's differ, in the order a statement meets them:
//! [`ast`] (the SQL text rewritten before planning), [`plan`] (rules over the logical plan),
//! [`functions`] (the function families Postgres has), [`types`] (values, their text forms
//! and casts), and Postgres' fixed facts ([`catalog_oids`], [`empty_catalogs`], the parameters'
//! defaults in [`settings`]).

pub mod ast;
pub mod catalog_oids;
pub mod empty_catalogs;
pub mod functions;
pub mod plan;
pub mod settings;
pub mod types;
