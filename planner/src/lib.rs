//! Eddy's planner: from SQL text to catalog changes, batch queries and streaming plans.
//!
//! Modules in data-flow order:
//!
//! - [`limits`]: statements too long or too deeply nested, refused before parsing.
//! - [`parse_budget`]: a parse that ends in bounded time (a budget of steps, a deadline).
//! - [`statement`]: splits SQL text into statements and parses Eddy's extensions
//!   (`WATERMARK FOR`, `APPEND ONLY`, `EMIT ON WINDOW CLOSE`, `FLUSH`, `RECOVER`, `SHOW ...`)
//!   around sqlparser.
//! - [`proctime_column`]: a source's `p_time TIMESTAMPTZ AS PROCTIME()` column.
//! - [`alter_statement`]: `ALTER ... RENAME TO`.
//! - [`cursor_statement`]: `FETCH` and `MOVE` on a cursor.
//! - [`pg_literals`]: Postgres' interval and float literal forms.
//! - [`pg_operators`]: Postgres' prefix operators and `^@` as function calls.
//! - [`pg_types`]: the Postgres types held as another Arrow type; `uuid`'s text form.
//! - [`names`]: `[database.]schema.name` resolved to Eddy's objects.
//! - [`between_symmetric`]: `BETWEEN SYMMETRIC`, marked before parsing.
//! - [`flink_windows`]: Flink's `TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), ...))` forms, rewritten
//!   into Eddy's before parsing.
//! - [`temporal_joins`]: `FOR SYSTEM_TIME AS OF` and `ASOF JOIN`, rewritten into joins whose
//!   condition a marker function wraps.
//! - [`wall_clock`]: `PROCTIME()` and the `now()` marker of temporal filters.
//! - [`window`]: `TUMBLE` / `HOP` / `CUMULATE` / `SESSION` as DataFusion table functions, and
//!   the window-assignment kernel shared by batch queries and the streaming window operator.
//! - [`window_exec`]: a batch query's windows, assigned as its rows stream.
//! - [`session`]: sessions in batch, and the rule that partitions them by the GROUP BY keys.
//! - [`outer_join_subqueries`]: correlated EXISTS / IN over an outer join, made decorrelatable.
//! - [`stream`]: rewrites a DataFusion `LogicalPlan` into a [`StreamPlan`]: a tree of
//!   incremental operators (inputs, projections, windows, aggregates, joins).
//! - [`explain`]: a stream plan as EXPLAIN's text.

pub mod alter_statement;
pub mod between_symmetric;
pub mod cursor_statement;
pub mod distinct_on;
pub mod error;
pub mod explain;
pub mod flink_windows;
pub mod index_statement;
pub mod limits;
pub mod names;
pub mod outer_join_subqueries;
pub mod parse_budget;
pub mod pg_literals;
pub mod pg_operators;
pub mod pg_types;
pub mod proctime_column;
pub mod session;
pub mod statement;
pub mod stream;
pub mod temporal_joins;
pub mod wall_clock;
pub mod window;
pub mod window_exec;

pub use error::{CodedError, PlanError, Result};
pub use session::SessionPartitionRule;
pub use statement::{parse_statements, EddyStatement, WatermarkDef};
pub use stream::{
    padded_sides, AggregatePlan, AsofOrder, AsofPlan, FinalRows, GroupingSetSpec, History,
    JoinClock, JoinOutputKey, JoinPlan, JoinSideInfo, LookupPlan, NodeKind, OverWindowPlan,
    PartitionClose, RankKind, SessionWindow, SourceInfo, StreamCatalog, StreamInput, StreamNode,
    StreamPlan, TemporalFilterPlan, TimeBound, TopNPlan, UnionPlan, WatermarkColumn, WindowBound,
};
pub use window::{
    WindowFunction, WindowKind, WindowSpec, WindowTableFunction, WindowTableProvider,
};
