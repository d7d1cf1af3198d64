//! The batch side: each view's query, written without Eddy's window functions (windows as
//! arithmetic on microseconds, sessions with LAG and a running SUM), run by DataFusion over
//! exactly the rows that were not late.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, AsArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;

use crate::case::{Case, Row, View, ViewShape, Window};

/// The rows of one table that were not late, replaying the table's watermark statement by
/// statement: a statement's rows are late when their time is below the watermark as it stood
/// when the statement began (the largest time of the rows kept before it minus the delay);
/// then the statement's largest time moves it. Returns the final watermark in microseconds.
pub fn not_late(statements: &[&[Row]], delay_ms: i64) -> (Vec<Row>, Option<i64>) {
    let mut watermark: Option<i64> = None;
    let mut kept = Vec::new();
    for rows in statements {
        let started = watermark;
        for row in rows.iter() {
            let micros = row.ts_ms * 1000;
            if started.is_some_and(|w| micros < w) {
                continue;
            }
            let candidate = micros - delay_ms * 1000;
            watermark = Some(watermark.map_or(candidate, |w| w.max(candidate)));
            kept.push(row.clone());
        }
    }
    (kept, watermark)
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("k1", DataType::Int32, true),
        Field::new("k2", DataType::Utf8, true),
        Field::new("v", DataType::Int64, false),
        Field::new("d", DataType::Float64, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            false,
        ),
    ]))
}

fn batch(rows: &[Row]) -> anyhow::Result<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from_iter(rows.iter().map(|r| r.k1))),
        Arc::new(StringArray::from_iter(rows.iter().map(|r| r.k2.clone()))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.v))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.d))),
        Arc::new(TimestampMicrosecondArray::from_iter_values(
            rows.iter().map(|r| r.ts_ms * 1000),
        )),
    ];
    Ok(RecordBatch::try_new(schema(), columns)?)
}

/// A DataFusion context holding each table's rows that were not late; returns the tables'
/// final watermarks too.
pub fn context(case: &Case) -> anyhow::Result<(SessionContext, Vec<Option<i64>>)> {
    let ctx = SessionContext::new();
    let mut watermarks = Vec::new();
    for (index, table) in case.tables.iter().enumerate() {
        let arrived: Vec<&[Row]> = case
            .steps
            .iter()
            .filter_map(|s| match s {
                crate::case::Step::Insert { table, rows } if *table == index => {
                    Some(rows.as_slice())
                }
                _ => None,
            })
            .collect();
        let (kept, watermark) = not_late(&arrived, table.delay_ms);
        let provider = MemTable::try_new(schema(), vec![vec![batch(&kept)?]])?;
        ctx.register_table(table.name.as_str(), Arc::new(provider))?;
        watermarks.push(watermark);
    }
    Ok((ctx, watermarks))
}

const MICROS: i64 = 1_000_000;

/// Rows with `window_start` and `window_end` added, as SQL over `table`.
pub(crate) fn windowed(table: &str, window: Window, keys: &[&str]) -> String {
    let base = format!("(SELECT *, CAST(ts AS BIGINT) AS m FROM {table}) x");
    let offsets = |range: std::ops::RangeInclusive<i64>| {
        let values: Vec<String> = range.map(|k| format!("({k})")).collect();
        format!("(VALUES {}) AS o(k)", values.join(", "))
    };
    match window {
        Window::Tumble { size_s } => {
            let size = size_s * MICROS;
            format!(
                "SELECT x.*, to_timestamp_micros(m - m % {size}) AS window_start,
                        to_timestamp_micros(m - m % {size} + {size}) AS window_end FROM {base}"
            )
        }
        Window::Hop { slide_s, size_s } => {
            let (slide, size) = (slide_s * MICROS, size_s * MICROS);
            let start = format!("(m - m % {slide} - o.k * {slide})");
            format!(
                "SELECT x.*, to_timestamp_micros({start}) AS window_start,
                        to_timestamp_micros({start} + {size}) AS window_end
                 FROM {base} CROSS JOIN {} WHERE {start} + {size} > m",
                offsets(0..=(size_s / slide_s))
            )
        }
        Window::Cumulate { step_s, size_s } => {
            let (step, size) = (step_s * MICROS, size_s * MICROS);
            let end = format!("(m - m % {size} + o.k * {step})");
            format!(
                "SELECT x.*, to_timestamp_micros(m - m % {size}) AS window_start,
                        to_timestamp_micros({end}) AS window_end
                 FROM {base} CROSS JOIN {} WHERE {end} > m",
                offsets(1..=(size_s / step_s))
            )
        }
        Window::Session { gap_s } => {
            let gap = gap_s * MICROS;
            let partition = if keys.is_empty() {
                String::new()
            } else {
                format!("PARTITION BY {}", keys.join(", "))
            };
            let session_partition = if keys.is_empty() {
                "PARTITION BY sid".to_string()
            } else {
                format!("PARTITION BY {}, sid", keys.join(", "))
            };
            format!(
                "SELECT z.*, to_timestamp_micros(min(m) OVER ({session_partition})) AS window_start,
                        to_timestamp_micros(max(m) OVER ({session_partition}) + {gap}) AS window_end
                 FROM (SELECT y.*, sum(new_session) OVER ({partition} ORDER BY m
                                      ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS sid
                       FROM (SELECT x.*, CASE WHEN m - lag(m) OVER ({partition} ORDER BY m) < {gap}
                                              THEN 0 ELSE 1 END AS new_session
                             FROM {base}) y) z"
            )
        }
    }
}

/// The view's query in batch, over the rows that were not late; for EMIT ON WINDOW CLOSE only
/// the windows the final watermark closed.
pub fn query(view: &View, case: &Case, watermarks: &[Option<i64>]) -> String {
    let table = &case.tables[view.table].name;
    let filter = view
        .filter
        .map(|f| format!(" WHERE {f}"))
        .unwrap_or_default();
    match &view.shape {
        ViewShape::Projection => format!("SELECT k1, k2, v + 1 AS v1, ts FROM {table}{filter}"),
        ViewShape::OverView { upstream, keys } => {
            let inner = query(&case.views[*upstream], case, watermarks);
            crate::case::over_view_sql(&format!("({inner}) up"), keys)
        }
        ViewShape::Aggregate {
            window,
            keys,
            aggregates,
            emit_on_window_close,
        } => {
            let source = match window {
                Some(window) => format!("({}) w", windowed(table, *window, keys)),
                None => table.clone(),
            };
            let (select, group_by) =
                crate::case::select_and_group_by(keys, window.is_some(), aggregates);
            let closed = match (emit_on_window_close, watermarks[view.table]) {
                (true, Some(w)) => format!(" HAVING window_end <= to_timestamp_micros({w})"),
                (true, None) => " HAVING false".into(),
                (false, _) => String::new(),
            };
            format!("SELECT {select} FROM {source}{filter}{group_by}{closed}")
        }
    }
}

/// Every column of `query`'s result as text (floats rounded), rows sorted.
pub fn normalized(columns: &[(String, bool)], query: &str) -> String {
    let list: Vec<String> = columns
        .iter()
        .map(|(name, float)| {
            if *float {
                // An exact (numeric) mean in Eddy, a float in batch: compared as floats.
                format!("CAST(round(CAST(\"{name}\" AS DOUBLE), 6) AS VARCHAR)")
            } else {
                format!("CAST(\"{name}\" AS VARCHAR)")
            }
        })
        .collect();
    format!("SELECT {} FROM ({query}) q", list.join(", "))
}

/// Runs `sql` and returns its rows as text.
pub async fn rows(ctx: &SessionContext, sql: &str) -> anyhow::Result<Vec<Vec<Option<String>>>> {
    let batches = ctx.sql(sql).await?.collect().await?;
    let mut out = Vec::new();
    for batch in batches {
        let columns = batch
            .columns()
            .iter()
            .map(|c| cast(c, &DataType::Utf8))
            .collect::<Result<Vec<_>, _>>()?;
        for row in 0..batch.num_rows() {
            out.push(
                columns
                    .iter()
                    .map(|c| {
                        let strings = c.as_string::<i32>();
                        (!c.is_null(row)).then(|| crate::text::canonical(strings.value(row)))
                    })
                    .collect(),
            );
        }
    }
    out.sort();
    Ok(out)
}
