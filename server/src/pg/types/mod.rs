//! Postgres' types and their value forms where Arrow's differ: the declared types kept as
//! field markings ([`column_types`]), `uuid`, text output and input (timestamps, intervals),
//! casts, and the session's time zone.

pub mod bytea_input;
pub mod column_types;
pub mod interval_input;
pub mod names;
pub mod numeric_average;
pub mod numeric_division;
pub mod session_time_zone;
pub mod text;
pub mod text_cast;
pub mod timestamp_input;
pub mod uuid;
