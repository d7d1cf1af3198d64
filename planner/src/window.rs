//! Time windows: `TUMBLE(table, time_col, size [, offset])` and
//! `HOP(table, time_col, slide, size [, offset])`.
//!
//! Both are DataFusion table functions that add `window_start` and `window_end` to the rows of a
//! table, so a plain `SELECT` over them works in batch, and the stream planner recognises their
//! provider and turns it into a window operator. The assignment kernel is shared by both.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, UInt32Array};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{
    DataType, Field, Schema, SchemaRef, TimeUnit, TimestampMicrosecondType,
};
use datafusion::catalog::TableFunctionArgs;
use datafusion::catalog::{Session, TableFunctionImpl, TableProvider};
use datafusion::common::{plan_err, Result as DfResult, ScalarValue};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::{collect, ExecutionPlan};

/// The shape of a window; all durations in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    Tumble { size: i64 },
    Hop { slide: i64, size: i64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSpec {
    pub kind: WindowKind,
    /// Shifts window boundaries away from the epoch, in microseconds.
    pub offset: i64,
}

impl WindowSpec {
    pub fn size(&self) -> i64 {
        match self.kind {
            WindowKind::Tumble { size } | WindowKind::Hop { size, .. } => size,
        }
    }

    /// Windows per row: 1 for TUMBLE, ceil(size / slide) for HOP.
    pub fn windows_per_row(&self) -> usize {
        match self.kind {
            WindowKind::Tumble { .. } => 1,
            WindowKind::Hop { slide, size } => ((size + slide - 1) / slide) as usize,
        }
    }
}

impl fmt::Display for WindowSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            WindowKind::Tumble { size } => write!(f, "tumble(size={size}us")?,
            WindowKind::Hop { slide, size } => write!(f, "hop(slide={slide}us, size={size}us")?,
        }
        if self.offset != 0 {
            write!(f, ", offset={}us", self.offset)?;
        }
        write!(f, ")")
    }
}

/// The windows each row of `times` falls in: for every output row, the index of its input row
/// and its window start (microseconds). Rows with a NULL time belong to no window.
pub fn assign_windows(times: &ArrayRef, spec: &WindowSpec) -> DfResult<(UInt32Array, Int64Array)> {
    let micros = to_micros(times)?;
    let per_row = spec.windows_per_row();
    let mut indices = Vec::with_capacity(micros.len() * per_row);
    let mut starts = Vec::with_capacity(micros.len() * per_row);
    // One pass over a primitive column: the expansion itself is inherently per row.
    for (row, ts) in micros.iter().enumerate() {
        let Some(ts) = ts else { continue };
        match spec.kind {
            WindowKind::Tumble { size } => {
                indices.push(row as u32);
                starts.push(ts - (ts - spec.offset).rem_euclid(size));
            }
            WindowKind::Hop { slide, size } => {
                let last = ts - (ts - spec.offset).rem_euclid(slide);
                let mut start = last;
                while start + size > ts {
                    indices.push(row as u32);
                    starts.push(start);
                    start -= slide;
                }
            }
        }
    }
    Ok((UInt32Array::from(indices), Int64Array::from(starts)))
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
    let (indices, starts) = assign_windows(times, spec)?;
    let ends: Int64Array = starts.unary(|s| s + spec.size());
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

/// `TUMBLE` or `HOP` as a DataFusion table function.
#[derive(Debug)]
pub struct WindowTableFunction {
    hop: bool,
    tables: TableLookup,
}

impl WindowTableFunction {
    pub fn tumble(tables: TableLookup) -> Self {
        Self { hop: false, tables }
    }

    pub fn hop(tables: TableLookup) -> Self {
        Self { hop: true, tables }
    }

    fn name(&self) -> &'static str {
        if self.hop {
            "HOP"
        } else {
            "TUMBLE"
        }
    }
}

/// An interval literal, in microseconds (months are refused: they have no fixed length).
pub fn interval_micros(value: &ScalarValue) -> Option<i64> {
    match value {
        ScalarValue::IntervalMonthDayNano(Some(v)) if v.months == 0 => {
            Some(v.days as i64 * 86_400_000_000 + v.nanoseconds / 1_000)
        }
        ScalarValue::IntervalDayTime(Some(v)) => {
            Some(v.days as i64 * 86_400_000_000 + v.milliseconds as i64 * 1_000)
        }
        _ => None,
    }
}

fn interval_arg(name: &str, what: &str, expr: &Expr) -> DfResult<i64> {
    let value = match expr {
        Expr::Literal(value, _) => interval_micros(value),
        _ => None,
    };
    match value {
        Some(v) if v > 0 || (what == "offset" && v >= 0) => Ok(v),
        _ => plan_err!("{name}: the {what} must be a positive INTERVAL of fixed length (no months), got {expr}"),
    }
}

impl TableFunctionImpl for WindowTableFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let name = self.name();
        let exprs = args.exprs();
        let (min, max) = if self.hop { (4, 5) } else { (3, 4) };
        if exprs.len() < min || exprs.len() > max {
            let usage = if self.hop {
                "HOP(table, time_column, slide, size [, offset])"
            } else {
                "TUMBLE(table, time_column, size [, offset])"
            };
            return plan_err!("{name} takes {usage}");
        }
        let Expr::Column(table) = &exprs[0] else {
            return plan_err!(
                "{name}: the first argument must be a table name, got {}",
                exprs[0]
            );
        };
        let table_name = table.flat_name().to_lowercase();
        let inner = self
            .tables
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&table_name)
            .cloned();
        let Some(inner) = inner else {
            return plan_err!("{name}: table \"{table_name}\" does not exist");
        };
        let Expr::Column(time) = &exprs[1] else {
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
        let kind = if self.hop {
            let slide = interval_arg(name, "slide", &exprs[2])?;
            let size = interval_arg(name, "size", &exprs[3])?;
            if size < slide {
                return plan_err!("HOP: the size must be at least the slide");
            }
            WindowKind::Hop { slide, size }
        } else {
            WindowKind::Tumble {
                size: interval_arg(name, "size", &exprs[2])?,
            }
        };
        let offset = match exprs.get(if self.hop { 4 } else { 3 }) {
            Some(e) => interval_arg(name, "offset", e)?,
            None => 0,
        };
        Ok(Arc::new(WindowTableProvider {
            schema: windowed_schema(&schema, time_column),
            inner,
            table_name,
            time_column,
            spec: WindowSpec { kind, offset },
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
    schema: SchemaRef,
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
        let batches = collect(plan, state.task_ctx()).await?;
        let mut windowed = Vec::with_capacity(batches.len());
        for batch in batches {
            let (columns, _) = apply_windows(batch.columns(), self.time_column, &self.spec)?;
            windowed.push(RecordBatch::try_new(self.schema.clone(), columns)?);
        }
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
        let (idx, starts) = assign_windows(&times(&[0, 9, 10, -1]), &spec).unwrap();
        assert_eq!(idx.values().to_vec(), vec![0, 1, 2, 3]);
        assert_eq!(starts.values().to_vec(), vec![0, 0, 10, -10]);
    }

    #[test]
    fn hop_assigns_every_overlapping_window() {
        let spec = WindowSpec {
            kind: WindowKind::Hop { slide: 5, size: 10 },
            offset: 0,
        };
        let (idx, starts) = assign_windows(&times(&[12, 15]), &spec).unwrap();
        assert_eq!(idx.values().to_vec(), vec![0, 0, 1, 1]);
        assert_eq!(starts.values().to_vec(), vec![10, 5, 15, 10]);
    }

    #[test]
    fn offset_shifts_boundaries() {
        let spec = WindowSpec {
            kind: WindowKind::Tumble { size: 10 },
            offset: 3,
        };
        let (_, starts) = assign_windows(&times(&[2, 3, 12, 13]), &spec).unwrap();
        assert_eq!(starts.values().to_vec(), vec![-7, 3, 3, 13]);
    }
}
