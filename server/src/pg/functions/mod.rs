//! Postgres' function families that DataFusion lacks or computes differently, a family per
//! file, each registered from [`crate::context`].

pub mod at_time_zone;
pub mod caps;
pub mod date;
pub mod extract;
pub mod interval_arithmetic;
pub mod json;
pub mod json_agg;
pub mod json_build;
pub mod json_operators;
pub mod json_sets;
pub mod numeric_average;
pub mod numeric_division;
pub mod ordered_set_aggregates;
pub mod scalar;
pub mod text;
pub mod to_char;
pub mod to_timestamp;
pub mod type_of;
