//! Source formats against the real broker (Tansu): Debezium change events applied to a keyed
//! table, with views over it seeing updates and deletes as retractions.

mod avro;
#[path = "../common/mod.rs"]
mod common;
mod debezium;
mod support;
