//! Sinks to Kafka against the real broker (Tansu), read back with librdkafka.
//!
//! - [`formats`]: each format equals its input after inserts, updates and deletes; mistakes
//!   get their SQLSTATEs; an oversized message goes to the error table.
//! - [`faults`]: kill -9 while sending, the broker away and back, a full sink log holding its
//!   input back: every acknowledged change arrives exactly once.

mod faults;
mod formats;
mod support;
