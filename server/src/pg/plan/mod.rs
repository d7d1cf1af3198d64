//! Rules over DataFusion's logical plans that give Postgres' answers: checked integer
//! arithmetic, casts, interval order, `SIMILAR TO`, `USING` columns, and the markings (oids,
//! quotients) a result needs to be described as Postgres describes it.

pub mod casts;
pub mod checked_arithmetic;
pub mod expr_rewrites;
pub mod integer_casts;
pub mod interval_order;
pub mod oid_markings;
pub mod operator_types;
pub mod quotient_markings;
pub mod session_calendar;
pub mod similar_to;
pub mod using_joins;
