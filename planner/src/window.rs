//! Time windows: `TUMBLE(table, time_col, size [, offset])`,
//! `HOP(table, time_col, slide, size [, offset])`, `CUMULATE(table, time_col, step, size [, offset])`
//! and `SESSION(table, time_col, gap)`.
//!
//! All are DataFusion table functions that add `window_start` and `window_end` to the rows of a
//! table, so a plain `SELECT` over them works in batch, and the stream planner recognises their
//! provider and turns it into a window operator. TUMBLE, HOP and CUMULATE assign each row on
//! its own (one kernel); SESSION depends on the rows around it: in batch the provider groups the
//! whole table, per partition (the query's GROUP BY keys, see [`crate::session`]); in a view the
//! session aggregate operator does it incrementally.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, UInt32Array};
use datafusion::arrow::compute::{cast, concat_batches, take};
use datafusion::arrow::datatypes::{
    DataType, Field, Schema, SchemaRef, TimeUnit, TimestampMicrosecondType,
};
use datafusion::catalog::TableFunctionArgs;
use datafusion::catalog::{Session, TableFunctionImpl, TableProvider};
use datafusion::common::{plan_err, Result as DfResult, ScalarValue};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::{collect, ExecutionPlan};

use crate::PlanError;

/// The shape of a window; all durations in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    Tumble {
        size: i64,
    },
    Hop {
        slide: i64,
        size: i64,
    },
    /// Windows `[start, start + k * step)` for k = 1..=size/step, `start` aligned to `size`.
    Cumulate {
        step: i64,
        size: i64,
    },
    /// Rows closer than `gap` form one session `[first, last + gap)`; a row alone is
    /// `[t, t + gap)`, which is what the per-row kernel assigns.
    Session {
        gap: i64,
    },
}

/// Which window column tells a row's windows apart when a row is in several.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VaryingColumn {
    Start,
    End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSpec {
    pub kind: WindowKind,
    /// Shifts window boundaries away from the epoch, in microseconds.
    pub offset: i64,
}

impl WindowSpec {
    /// The longest window (a session's gap: the window of a row alone).
    pub fn size(&self) -> i64 {
        match self.kind {
            WindowKind::Tumble { size }
            | WindowKind::Hop { size, .. }
            | WindowKind::Cumulate { size, .. } => size,
            WindowKind::Session { gap } => gap,
        }
    }

    /// Windows per row: 1 for TUMBLE and SESSION, ceil(size / slide) for HOP, size / step
    /// for CUMULATE (at most).
    pub fn windows_per_row(&self) -> u64 {
        // Both are positive: checked when the window is planned.
        let (size, step) = match self.kind {
            WindowKind::Tumble { .. } | WindowKind::Session { .. } => return 1,
            WindowKind::Hop { slide, size } => (size, slide),
            WindowKind::Cumulate { step, size } => (size, step),
        };
        (size.unsigned_abs()).div_ceil(step.unsigned_abs().max(1))
    }

    /// The window column that must join the stream key, when a row is in several windows.
    pub fn varying_column(&self) -> Option<VaryingColumn> {
        match self.kind {
            WindowKind::Hop { .. } => Some(VaryingColumn::Start),
            WindowKind::Cumulate { .. } => Some(VaryingColumn::End),
            WindowKind::Tumble { .. } | WindowKind::Session { .. } => None,
        }
    }

    /// How far below the row's time its window starts can lie (None: unbounded, a session).
    pub fn start_lag(&self) -> Option<i64> {
        match self.kind {
            WindowKind::Session { .. } => None,
            _ => Some(self.size()),
        }
    }

    pub fn is_session(&self) -> bool {
        matches!(self.kind, WindowKind::Session { .. })
    }
}

impl fmt::Display for WindowSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            WindowKind::Tumble { size } => write!(f, "tumble(size={size}us")?,
            WindowKind::Hop { slide, size } => write!(f, "hop(slide={slide}us, size={size}us")?,
            WindowKind::Cumulate { step, size } => {
                write!(f, "cumulate(step={step}us, size={size}us")?
            }
            WindowKind::Session { gap } => write!(f, "session(gap={gap}us")?,
        }
        if self.offset != 0 {
            write!(f, ", offset={}us", self.offset)?;
        }
        write!(f, ")")
    }
}

/// The most windows a row may fall in (HOP's size ÷ slide, CUMULATE's size ÷ step): each is a
/// copy of the row, so beyond this one row would hold more memory than a query or a view may
/// (and a larger count is almost always a slide or a step given in the wrong unit).
pub const MAX_WINDOWS_PER_ROW: u64 = 10_000;

/// Set in a session's config while a view created before is planned again (at a restart): its
/// windows are taken as they were accepted then, so that a limit added since never keeps the
/// server from starting.
#[derive(Debug)]
pub struct AcceptedBefore;

/// Refuses a window that puts a row in more than [`MAX_WINDOWS_PER_ROW`] windows (54000):
/// `size` over `step` (HOP's slide, CUMULATE's step), both positive, in microseconds.
fn check_windows_per_row(
    function: &str,
    size: i128,
    step: i128,
    step_name: &str,
) -> Result<(), PlanError> {
    let count = (size + step - 1) / step.max(1);
    if count <= i128::from(MAX_WINDOWS_PER_ROW) {
        return Ok(());
    }
    Err(PlanError::LimitExceeded(format!(
        "{function}: each row would fall in {count} windows (a size of {size} µs over a \
         {step_name} of {step} µs); the limit is {MAX_WINDOWS_PER_ROW} windows per row: use a \
         longer {step_name} or a shorter size"
    )))
}

/// The windows each row of `times` falls in: for every output row, the index of its input row
/// and its window's start and end (microseconds). Rows with a NULL time belong to no window.
pub fn assign_windows(
    times: &ArrayRef,
    spec: &WindowSpec,
) -> DfResult<(UInt32Array, Int64Array, Int64Array)> {
    let micros = to_micros(times)?;
    let expected = micros.len() - micros.null_count();
    let capacity = expected.saturating_mul(usize::try_from(spec.windows_per_row()).unwrap_or(1));
    let mut indices = Vec::with_capacity(capacity);
    let mut starts = Vec::with_capacity(capacity);
    let mut ends = Vec::with_capacity(capacity);
    // One pass over a primitive column: the expansion itself is inherently per row.
    for (row, ts) in micros.iter().enumerate() {
        let Some(ts) = ts else { continue };
        let row = row as u32;
        let out_of_range = || {
            DataFusionError::External(Box::new(PlanError::OutOfRange(format!(
                "timestamp out of range: the windows of {spec} of a row at {ts} µs since the \
                 epoch lie beyond the range of a timestamp"
            ))))
        };
        // Bounds near the ends of the timestamp range overflow: an error, never a wrap.
        let add = |a: i64, b: i64| a.checked_add(b).ok_or_else(out_of_range);
        let sub = |a: i64, b: i64| a.checked_sub(b).ok_or_else(out_of_range);
        // The start of the window of length `length` (aligned to the offset) holding `ts`.
        let aligned =
            |length: i64| -> DfResult<i64> { sub(ts, sub(ts, spec.offset)?.rem_euclid(length)) };
        match spec.kind {
            WindowKind::Tumble { size } => {
                let start = aligned(size)?;
                indices.push(row);
                starts.push(start);
                ends.push(add(start, size)?);
            }
            WindowKind::Hop { slide, size } => {
                let mut start = aligned(slide)?;
                loop {
                    let end = add(start, size)?;
                    if end <= ts {
                        break;
                    }
                    indices.push(row);
                    starts.push(start);
                    ends.push(end);
                    start = sub(start, slide)?;
                }
            }
            WindowKind::Cumulate { step, size } => {
                let start = aligned(size)?;
                let last_end = add(start, size)?;
                // The first end past the row, then every later step up to the full window.
                let mut end = add(ts, step - (ts - start).rem_euclid(step))?;
                while end <= last_end {
                    indices.push(row);
                    starts.push(start);
                    ends.push(end);
                    end = add(end, step)?;
                }
            }
            WindowKind::Session { gap } => {
                indices.push(row);
                starts.push(ts);
                ends.push(add(ts, gap)?);
            }
        }
    }
    Ok((
        UInt32Array::from(indices),
        Int64Array::from(starts),
        Int64Array::from(ends),
    ))
}

/// Microseconds since the epoch (UTC) of a timestamp column, whatever its unit and zone.
pub fn to_micros(times: &ArrayRef) -> DfResult<Int64Array> {
    // Changing only the unit keeps the zone, so the instants stay the same.
    let zone = match times.data_type() {
        DataType::Timestamp(_, zone) => zone.clone(),
        other => return plan_err!("expected a TIMESTAMP column, found {other}"),
    };
    let micros = cast(times, &DataType::Timestamp(TimeUnit::Microsecond, zone))?;
    Ok(micros
        .as_primitive::<TimestampMicrosecondType>()
        .reinterpret_cast::<datafusion::arrow::datatypes::Int64Type>())
}

/// Turns microseconds since the epoch back into the time column's own type.
pub fn from_micros(micros: &Int64Array, time_type: &DataType) -> DfResult<ArrayRef> {
    let zone = match time_type {
        DataType::Timestamp(_, zone) => zone.clone(),
        other => return plan_err!("expected a TIMESTAMP type, found {other}"),
    };
    let as_ts = micros
        .reinterpret_cast::<TimestampMicrosecondType>()
        .with_timezone_opt(zone);
    Ok(cast(&as_ts, time_type)?)
}

/// Expands `columns` (a batch's visible columns) by the window assignment, appending
/// `window_start` and `window_end`. Returns the take indices too, so callers can expand
/// any further (hidden) columns the same way.
pub fn apply_windows(
    columns: &[ArrayRef],
    time_column: usize,
    spec: &WindowSpec,
) -> DfResult<(Vec<ArrayRef>, UInt32Array)> {
    let times = &columns[time_column];
    let time_type = times.data_type().clone();
    let (indices, starts, ends) = assign_windows(times, spec)?;
    let mut out = columns
        .iter()
        .map(|c| take(c.as_ref(), &indices, None))
        .collect::<Result<Vec<_>, _>>()?;
    out.push(from_micros(&starts, &time_type)?);
    out.push(from_micros(&ends, &time_type)?);
    Ok((out, indices))
}

/// The schema of a windowed table: its columns, then `window_start` and `window_end`.
pub fn windowed_schema(inner: &Schema, time_column: usize) -> SchemaRef {
    let time_type = inner.field(time_column).data_type().clone();
    let mut fields: Vec<Field> = inner.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("window_start", time_type.clone(), true));
    fields.push(Field::new("window_end", time_type, true));
    Arc::new(Schema::new(fields))
}

/// Looks up a table by name for the window functions (Eddy's own catalog).
pub type TableLookup = Arc<RwLock<HashMap<String, Arc<dyn TableProvider>>>>;

/// Which window function a [`WindowTableFunction`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowFunction {
    Tumble,
    Hop,
    Cumulate,
    Session,
}

impl WindowFunction {
    pub const ALL: [WindowFunction; 4] = [Self::Tumble, Self::Hop, Self::Cumulate, Self::Session];

    pub fn name(self) -> &'static str {
        match self {
            Self::Tumble => "TUMBLE",
            Self::Hop => "HOP",
            Self::Cumulate => "CUMULATE",
            Self::Session => "SESSION",
        }
    }

    fn usage(self) -> &'static str {
        match self {
            Self::Tumble => "TUMBLE(table, time_column, size [, offset])",
            Self::Hop => "HOP(table, time_column, slide, size [, offset])",
            Self::Cumulate => "CUMULATE(table, time_column, step, size [, offset])",
            Self::Session => "SESSION(table, time_column, gap)",
        }
    }

    /// How many interval arguments follow the table and time column, and whether an offset
    /// may follow them.
    fn intervals(self) -> (usize, bool) {
        match self {
            Self::Tumble => (1, true),
            Self::Hop | Self::Cumulate => (2, true),
            Self::Session => (1, false),
        }
    }
}

/// A window function as a DataFusion table function.
#[derive(Debug)]
pub struct WindowTableFunction {
    function: WindowFunction,
    tables: TableLookup,
}

impl WindowTableFunction {
    pub fn new(function: WindowFunction, tables: TableLookup) -> Self {
        Self { function, tables }
    }
}

/// An interval literal, in microseconds (months are refused: they have no fixed length; so is
/// one too long for microseconds to count).
pub fn interval_micros(value: &ScalarValue) -> Option<i64> {
    i64::try_from(interval_micros_wide(value)?).ok()
}

/// [`interval_micros`] without the bound: an interval's days times a day's microseconds can
/// pass an `i64`.
fn interval_micros_wide(value: &ScalarValue) -> Option<i128> {
    let (days, micros) = match value {
        ScalarValue::IntervalMonthDayNano(Some(v)) if v.months == 0 => {
            (v.days, v.nanoseconds / 1_000)
        }
        ScalarValue::IntervalDayTime(Some(v)) => (v.days, i64::from(v.milliseconds) * 1_000),
        _ => return None,
    };
    Some(i128::from(days) * 86_400_000_000 + i128::from(micros))
}

/// A window's interval argument in microseconds, positive (an offset may be zero).
fn interval_arg(name: &str, what: &str, expr: &Expr) -> DfResult<i128> {
    let value = match expr {
        Expr::Literal(value, _) => interval_micros_wide(value),
        _ => None,
    };
    match value {
        Some(v) if v > 0 || (what == "offset" && v >= 0) => Ok(v),
        _ => plan_err!("{name}: the {what} must be a positive INTERVAL of fixed length (no months), got {expr}"),
    }
}

/// An interval argument as the `i64` microseconds windows are computed in.
fn fitted(name: &str, what: &str, micros: i128) -> DfResult<i64> {
    i64::try_from(micros).or_else(|_| {
        plan_err!("{name}: the {what} ({micros} µs) is longer than the range of a timestamp")
    })
}

impl TableFunctionImpl for WindowTableFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let name = self.function.name();
        let exprs = args.exprs();
        let (intervals, offset) = self.function.intervals();
        let min = 2 + intervals;
        let max = min + usize::from(offset);
        if exprs.len() < min || exprs.len() > max {
            return plan_err!("{name} takes {}", self.function.usage());
        }
        // Inside a correlated subquery DataFusion resolves the arguments against the outer
        // query first, so a name the outer query also has arrives as an outer reference: the
        // arguments name the TVF's own table and its column either way.
        let (Expr::Column(table) | Expr::OuterReferenceColumn(_, table)) = &exprs[0] else {
            return plan_err!(
                "{name}: the first argument must be a table name, got {}",
                exprs[0]
            );
        };
        // `public.t` and `dev.public.t` name the table `t`; DataFusion folded the parts.
        let mut parts: Vec<String> = table
            .relation
            .as_ref()
            .map(|r| r.to_vec())
            .unwrap_or_default();
        parts.push(table.name.clone());
        let table_name = crate::names::resolve_parts(&parts)
            .map_err(|e| datafusion::error::DataFusionError::Plan(format!("{name}: {e}")))?;
        let inner = self
            .tables
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&table_name)
            .cloned();
        let Some(inner) = inner else {
            return plan_err!("{name}: table \"{table_name}\" does not exist");
        };
        let (Expr::Column(time) | Expr::OuterReferenceColumn(_, time)) = &exprs[1] else {
            return plan_err!(
                "{name}: the second argument must be a column, got {}",
                exprs[1]
            );
        };
        let schema = inner.schema();
        let Ok(time_column) = schema.index_of(&time.name) else {
            return plan_err!(
                "{name}: column \"{}\" does not exist in \"{table_name}\"",
                time.name
            );
        };
        if !matches!(
            schema.field(time_column).data_type(),
            DataType::Timestamp(_, _)
        ) {
            return plan_err!(
                "{name}: column \"{}\" is {}, a window needs a TIMESTAMP column",
                time.name,
                schema.field(time_column).data_type()
            );
        }
        for column in ["window_start", "window_end"] {
            if schema.index_of(column).is_ok() {
                return plan_err!(
                    "{name}: \"{table_name}\" already has a column named {column}; rename it there (e.g. `window_start AS minute_start`)"
                );
            }
        }
        let interval = |i: usize, what: &str| interval_arg(name, what, &exprs[2 + i]);
        // The count of windows a row falls in is checked before anything is computed with it.
        let accepted_before = args
            .session()
            .config()
            .get_extension::<AcceptedBefore>()
            .is_some();
        let many = |size: i128, step: i128, step_name: &str| {
            if accepted_before {
                return Ok(());
            }
            check_windows_per_row(name, size, step, step_name)
                .map_err(|e| DataFusionError::External(Box::new(e)))
        };
        let kind = match self.function {
            WindowFunction::Tumble => WindowKind::Tumble {
                size: fitted(name, "size", interval(0, "size")?)?,
            },
            WindowFunction::Hop => {
                let (slide, size) = (interval(0, "slide")?, interval(1, "size")?);
                if size < slide {
                    return plan_err!("HOP: the size must be at least the slide");
                }
                many(size, slide, "slide")?;
                WindowKind::Hop {
                    slide: fitted(name, "slide", slide)?,
                    size: fitted(name, "size", size)?,
                }
            }
            WindowFunction::Cumulate => {
                let (step, size) = (interval(0, "step")?, interval(1, "size")?);
                if size % step != 0 {
                    return plan_err!("CUMULATE: the size must be a whole multiple of the step");
                }
                many(size, step, "step")?;
                WindowKind::Cumulate {
                    step: fitted(name, "step", step)?,
                    size: fitted(name, "size", size)?,
                }
            }
            WindowFunction::Session => WindowKind::Session {
                gap: fitted(name, "gap", interval(0, "gap")?)?,
            },
        };
        let offset = match exprs.get(2 + intervals) {
            Some(e) => fitted(name, "offset", interval_arg(name, "offset", e)?)?,
            None => 0,
        };
        let spec = WindowSpec { kind, offset };
        Ok(Arc::new(WindowTableProvider {
            schema: windowed_schema(&schema, time_column),
            inner,
            table_name,
            time_column,
            spec,
            partition: Vec::new(),
        }))
    }
}

/// A table with its rows assigned to windows.
#[derive(Debug)]
pub struct WindowTableProvider {
    pub inner: Arc<dyn TableProvider>,
    pub table_name: String,
    pub time_column: usize,
    pub spec: WindowSpec,
    /// SESSION only: the columns (of `inner`) whose values keep sessions apart.
    pub partition: Vec<usize>,
    schema: SchemaRef,
}

impl WindowTableProvider {
    /// The same window with sessions kept apart by `partition`.
    pub fn with_partition(&self, partition: Vec<usize>) -> Self {
        Self {
            inner: self.inner.clone(),
            table_name: self.table_name.clone(),
            time_column: self.time_column,
            spec: self.spec,
            partition,
            schema: self.schema.clone(),
        }
    }
}

#[async_trait::async_trait]
impl TableProvider for WindowTableProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(vec![
            TableProviderFilterPushDown::Unsupported;
            filters.len()
        ])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let plan = self.inner.scan(state, None, &[], None).await?;
        if !self.spec.is_session() {
            // Each row on its own: assigned as the rows stream.
            return Ok(Arc::new(crate::window_exec::WindowExec::try_new(
                plan,
                self.time_column,
                self.spec,
                self.schema.clone(),
                projection.cloned(),
            )?));
        }
        // A session depends on the rows around it: the whole table at once.
        let batches = collect(plan, state.task_ctx()).await?;
        let all = concat_batches(&self.inner.schema(), &batches)?;
        let columns = crate::session::sessions_in_batch(
            all.columns(),
            self.time_column,
            &self.partition,
            self.spec.size(),
        )?;
        let windowed = vec![RecordBatch::try_new(self.schema.clone(), columns)?];
        Ok(MemorySourceConfig::try_new_exec(
            &[windowed],
            self.schema.clone(),
            projection.cloned(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::TimestampMicrosecondArray;

    fn times(values: &[i64]) -> ArrayRef {
        Arc::new(TimestampMicrosecondArray::from(values.to_vec()))
    }

    #[test]
    fn tumble_puts_a_boundary_event_in_the_next_window() {
        let spec = WindowSpec {
            kind: WindowKind::Tumble { size: 10 },
            offset: 0,
        };
        let (idx, starts, _) = assign_windows(&times(&[0, 9, 10, -1]), &spec).unwrap();
        assert_eq!(idx.values().to_vec(), vec![0, 1, 2, 3]);
        assert_eq!(starts.values().to_vec(), vec![0, 0, 10, -10]);
    }

    /// A view created before the limit on windows per row was added plans again at a restart.
    #[test]
    fn a_window_accepted_before_is_planned_again_whatever_the_limit() {
        use datafusion::datasource::MemTable;
        use datafusion::execution::SessionStateBuilder;
        use datafusion::prelude::{SessionConfig, SessionContext};
        let schema = Arc::new(Schema::new(vec![Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            true,
        )]));
        let table: Arc<dyn TableProvider> =
            Arc::new(MemTable::try_new(schema, vec![vec![]]).unwrap());
        let tables: TableLookup = Arc::default();
        tables.write().unwrap().insert("t".into(), table);
        let sql = "SELECT * FROM hop(t, ts, INTERVAL '1' SECOND, INTERVAL '1' DAY)";
        let plan = |config: SessionConfig| {
            let state = SessionStateBuilder::new()
                .with_config(config)
                .with_default_features()
                .build();
            let ctx = SessionContext::new_with_state(state);
            ctx.register_udtf(
                "hop",
                Arc::new(WindowTableFunction::new(
                    WindowFunction::Hop,
                    tables.clone(),
                )),
            );
            futures::executor::block_on(ctx.sql(sql)).map(|_| ())
        };
        let refused = plan(SessionConfig::new()).unwrap_err();
        assert!(refused.to_string().contains("86400 windows"), "{refused}");
        let again = SessionConfig::new().with_extension(Arc::new(AcceptedBefore));
        plan(again).unwrap();
    }

    #[test]
    fn hop_assigns_every_overlapping_window() {
        let spec = WindowSpec {
            kind: WindowKind::Hop { slide: 5, size: 10 },
            offset: 0,
        };
        let (idx, starts, _) = assign_windows(&times(&[12, 15]), &spec).unwrap();
        assert_eq!(idx.values().to_vec(), vec![0, 0, 1, 1]);
        assert_eq!(starts.values().to_vec(), vec![10, 5, 15, 10]);
    }

    #[test]
    fn offset_shifts_boundaries() {
        let spec = WindowSpec {
            kind: WindowKind::Tumble { size: 10 },
            offset: 3,
        };
        let (_, starts, _) = assign_windows(&times(&[2, 3, 12, 13]), &spec).unwrap();
        assert_eq!(starts.values().to_vec(), vec![-7, 3, 3, 13]);
    }

    #[test]
    fn cumulate_assigns_every_growing_window_that_holds_the_row() {
        let spec = WindowSpec {
            kind: WindowKind::Cumulate { step: 5, size: 15 },
            offset: 0,
        };
        let (idx, starts, ends) = assign_windows(&times(&[0, 4, 5, 14, 15]), &spec).unwrap();
        assert_eq!(
            idx.values().to_vec(),
            vec![0, 0, 0, 1, 1, 1, 2, 2, 3, 4, 4, 4]
        );
        assert_eq!(
            starts.values().to_vec(),
            vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15]
        );
        assert_eq!(
            ends.values().to_vec(),
            vec![5, 10, 15, 5, 10, 15, 10, 15, 15, 20, 25, 30]
        );
    }
}
