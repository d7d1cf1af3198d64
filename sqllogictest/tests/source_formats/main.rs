//! Source formats against the real broker (Tansu), with messages made by each format's
//! reference library: Debezium change events applied to a keyed table ([`debezium`]), Avro
//! datums from fastavro ([`avro`]) and Protobuf messages from Google's library with a
//! descriptor set from protoc ([`protobuf`]).

mod avro;
#[path = "../common/mod.rs"]
mod common;
mod debezium;
mod protobuf;
mod support;
