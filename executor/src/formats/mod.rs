//! Message formats shared by sinks and sources: Arrow values as JSON ([`json`], with dates,
//! times and intervals as text in [`time_text`]), Debezium's envelope ([`debezium`]).

pub mod debezium;
pub mod json;
pub mod time_text;
