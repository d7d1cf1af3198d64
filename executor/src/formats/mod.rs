//! Message formats shared by sinks and sources: Arrow values as JSON ([`json`], with dates,
//! times and intervals as text in [`time_text`]), Debezium's envelope ([`debezium`]) and the
//! changes its events make to a keyed table ([`debezium_rows`]).

pub mod debezium;
pub mod debezium_rows;
pub mod json;
pub mod time_text;
