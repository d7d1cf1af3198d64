//! Time-bounded join cases: two append-only streams with watermarks (rows out of order within
//! and beyond the delay, so some are late), joined by interval joins (`BETWEEN` bounds, inner
//! and outer), window joins (TUMBLE on both sides) and joins of windows carried through
//! aggregates (which retract until the window closes), whose state the watermarks evict. The
//! streaming answer must equal the batch answer over the rows that were not late: eviction
//! may only ever drop rows nothing can match again.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use datafusion::arrow::array::{
    ArrayRef, Int32Array, Int64Array, RecordBatch, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use eddy_sqllogictest::EddyProcess;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::case::{insert_sql, Row, Window, T0_MS};

const STREAMS: [&str; 2] = ["s", "u"];

#[derive(Debug, Clone)]
enum Step {
    Append { stream: usize, rows: Vec<Row> },
    CreateView(usize),
    Restart,
}

#[derive(Debug, Clone)]
struct StreamJoinView {
    name: String,
    /// In Eddy's SQL (window TVFs).
    sql: String,
    /// The same query for the batch side (windows as arithmetic).
    batch: String,
    columns: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct StreamJoinCase {
    pub seed: u64,
    delays_ms: [i64; 2],
    views: Vec<StreamJoinView>,
    steps: Vec<Step>,
}

fn pick<T: Copy>(rng: &mut StdRng, items: &[T]) -> T {
    items[rng.random_range(0..items.len())]
}

impl StreamJoinCase {
    pub fn generate(seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x7374_7265);
        let views = (0..rng.random_range(1..=3))
            .map(|i| random_view(&mut rng, i))
            .collect();
        let delays_ms = [
            pick(&mut rng, &[500, 1000, 2000]),
            pick(&mut rng, &[500, 1000, 2000]),
        ];
        let mut steps = Vec::new();
        let mut clocks = [T0_MS; 2];
        for _ in 0..rng.random_range(20..70) {
            let stream = rng.random_range(0..2);
            let rows = (0..rng.random_range(1..6))
                .map(|_| {
                    clocks[stream] += rng.random_range(0..800);
                    // Out of order, sometimes beyond the delay (late).
                    let ts_ms = if rng.random_bool(0.25) {
                        clocks[stream] - rng.random_range(0..2_500)
                    } else {
                        clocks[stream]
                    };
                    Row {
                        k1: (!rng.random_bool(0.1)).then(|| rng.random_range(0..4)),
                        k2: None,
                        v: rng.random_range(0..100),
                        d: 0.0,
                        ts_ms,
                    }
                })
                .collect();
            steps.push(Step::Append { stream, rows });
        }
        let views: Vec<StreamJoinView> = views;
        for view in 0..views.len() {
            let at = rng
                .random_range(0..=steps.len() / 2 + view)
                .min(steps.len());
            steps.insert(at, Step::CreateView(view));
        }
        if rng.random_bool(0.3) {
            let at = rng.random_range(0..=steps.len());
            steps.insert(at, Step::Restart);
        }
        StreamJoinCase {
            seed,
            delays_ms,
            views,
            steps,
        }
    }

    fn create_tables(&self) -> String {
        STREAMS
            .iter()
            .zip(self.delays_ms)
            .map(|(name, delay)| {
                format!(
                    "CREATE TABLE {name} (k1 INT, k2 VARCHAR, v BIGINT, d DOUBLE, ts TIMESTAMP,
                       WATERMARK FOR ts AS ts - INTERVAL '{delay} milliseconds') APPEND ONLY;"
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Each stream's rows that were not late.
    fn kept(&self, stream: usize) -> Vec<Row> {
        // One INSERT statement per append, judged as a whole against the watermark.
        let arrived: Vec<&[Row]> = self
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Append { stream: st, rows } if *st == stream => Some(rows.as_slice()),
                _ => None,
            })
            .collect();
        crate::batch::not_late(&arrived, self.delays_ms[stream]).0
    }
}

fn random_view(rng: &mut StdRng, index: usize) -> StreamJoinView {
    let name = format!("sj{index}");
    let join = pick(rng, &["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"]);
    if rng.random_bool(0.25) {
        return window_join_through_aggregates(rng, name, join);
    }
    if rng.random_bool(0.6) {
        // An interval join: u.ts within [s.ts - a, s.ts + b].
        let (a, b) = (rng.random_range(0..3), rng.random_range(0..3));
        let sql = format!(
            "SELECT s.v AS sv, s.ts AS sts, u.v AS uv, u.ts AS uts FROM s {join} u
             ON s.k1 = u.k1 AND u.ts BETWEEN s.ts - INTERVAL '{a} seconds' AND s.ts + INTERVAL '{b} seconds'"
        );
        StreamJoinView {
            name,
            batch: sql.clone(),
            sql,
            columns: ["sv", "sts", "uv", "uts"].map(String::from).to_vec(),
        }
    } else {
        // A window join: the rows of one TUMBLE window on both sides, by key.
        let size_s = pick(rng, &[1, 2, 5]);
        let window = |table: &str| format!("TUMBLE({table}, ts, INTERVAL '{size_s} seconds')");
        let batch_window = |table: &str| {
            format!(
                "({})",
                crate::batch::windowed(table, Window::Tumble { size_s }, &[])
            )
        };
        let body = |left: String, right: String| {
            format!(
                "SELECT x.v AS xv, y.v AS yv, x.window_start AS ws FROM {left} x {join} {right} y
                 ON x.k1 = y.k1 AND x.window_start = y.window_start AND x.window_end = y.window_end"
            )
        };
        StreamJoinView {
            name,
            sql: body(window("s"), window("u")),
            batch: body(batch_window("s"), batch_window("u")),
            columns: ["xv", "yv", "ws"].map(String::from).to_vec(),
        }
    }
}

/// Joins of inputs that carry a window through an aggregate, whose output retracts while the
/// window is open: the standard Nexmark q7 (each window's maximum joined back to the rows of
/// that window) and q5 (per-key counts against the maximum count of the window, itself an
/// aggregate over an aggregate).
fn window_join_through_aggregates(rng: &mut StdRng, name: String, join: &str) -> StreamJoinView {
    let size_s = pick(rng, &[1, 2, 5]);
    let window = |table: &str| format!("TUMBLE({table}, ts, INTERVAL '{size_s} seconds')");
    let batch_window = |table: &str| {
        format!(
            "({})",
            crate::batch::windowed(table, Window::Tumble { size_s }, &[])
        )
    };
    if rng.random_bool(0.5) {
        let body = |u: String| {
            format!(
                "SELECT s.v AS sv, s.ts AS sts, m.mv AS mv, m.we AS we FROM s {join}
                   (SELECT k1, max(v) AS mv, window_end AS we FROM {u} GROUP BY k1, window_start, window_end) m
                 ON s.k1 = m.k1 AND s.v <= m.mv
                   AND s.ts >= m.we - INTERVAL '{size_s} seconds' AND s.ts < m.we"
            )
        };
        StreamJoinView {
            name,
            sql: body(window("u")),
            batch: body(batch_window("u")),
            columns: ["sv", "sts", "mv", "we"].map(String::from).to_vec(),
        }
    } else {
        let body = |s: String, u: String| {
            format!(
                "SELECT x.k1 AS xk, x.n AS xn, x.ws AS xws, y.mn AS ymn, y.ws AS yws FROM
                   (SELECT k1, count(*) AS n, window_start AS ws FROM {s} GROUP BY k1, window_start) x
                 {join}
                   (SELECT max(c.n) AS mn, c.ws FROM
                      (SELECT k1, count(*) AS n, window_start AS ws FROM {u} GROUP BY k1, window_start) c
                    GROUP BY c.ws) y
                 ON x.ws = y.ws AND x.n >= y.mn"
            )
        };
        StreamJoinView {
            name,
            sql: body(window("s"), window("u")),
            batch: body(batch_window("s"), batch_window("u")),
            columns: ["xk", "xn", "xws", "ymn", "yws"].map(String::from).to_vec(),
        }
    }
}

fn batch_of(rows: &[Row]) -> Result<RecordBatch> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k1", DataType::Int32, true),
        Field::new("v", DataType::Int64, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            false,
        ),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from_iter(rows.iter().map(|r| r.k1))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.v))),
        Arc::new(TimestampMicrosecondArray::from_iter_values(
            rows.iter().map(|r| r.ts_ms * 1000),
        )),
    ];
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// Plays a time-bounded join case against a fresh eddy and checks every view.
pub async fn run_stream_join_case(seed: u64) -> Result<()> {
    let case = StreamJoinCase::generate(seed);
    let mut eddy = crate::start_eddy().await?;
    let result = play(&case, &mut eddy).await;
    if result.is_err() {
        eprintln!(
            "--- eddy log (stream join seed {seed}) ---\n{}",
            eddy.log_tail(30)
        );
    }
    result
}

async fn play(case: &StreamJoinCase, eddy: &mut EddyProcess) -> Result<()> {
    let (mut client, _conn) = eddy.connect().await?;
    client.batch_execute(&case.create_tables()).await?;
    for step in &case.steps {
        let sql = match step {
            Step::Append { stream, rows } => insert_sql(STREAMS[*stream], rows),
            Step::CreateView(view) => {
                let view = &case.views[*view];
                format!("CREATE MATERIALIZED VIEW {} AS {}", view.name, view.sql)
            }
            Step::Restart => {
                drop(client);
                eddy.restart().await?;
                client = eddy.connect().await?.0;
                continue;
            }
        };
        client.batch_execute(&sql).await.context(sql)?;
    }
    let ctx = SessionContext::new();
    for (stream, name) in STREAMS.iter().enumerate() {
        let batch = batch_of(&case.kept(stream))?;
        ctx.register_table(
            *name,
            Arc::new(MemTable::try_new(batch.schema(), vec![vec![batch]])?),
        )?;
    }
    for view in &case.views {
        let columns: Vec<(String, bool)> =
            view.columns.iter().map(|c| (c.clone(), false)).collect();
        let expected_sql = crate::batch::normalized(&columns, &view.batch);
        let expected = crate::batch::rows(&ctx, &expected_sql)
            .await
            .with_context(|| format!("batch query failed: {expected_sql}"))?;
        let actual_sql =
            crate::batch::normalized(&columns, &format!("SELECT * FROM {}", view.name));
        let actual = crate::eddy_rows(&client, &actual_sql).await?;
        if actual != expected {
            let missing: Vec<_> = expected
                .iter()
                .filter(|r| !actual.contains(r))
                .take(5)
                .collect();
            let extra: Vec<_> = actual
                .iter()
                .filter(|r| !expected.contains(r))
                .take(5)
                .collect();
            bail!(
                "stream join seed {}: view {} differs from the batch query ({} rows vs {} expected)\n  view: {}\n  batch: {}\n  missing (first 5): {missing:?}\n  unexpected (first 5): {extra:?}",
                case.seed,
                view.name,
                actual.len(),
                expected.len(),
                view.sql,
                expected_sql
            );
        }
    }
    // The watermarks must have evicted something in the longer cases (else nothing was tested).
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_cover_interval_window_and_aggregate_joins_of_every_type() {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 1..=100 {
            for view in StreamJoinCase::generate(seed).views {
                let shape = if view.sql.contains("max(") {
                    "through aggregates"
                } else if view.sql.contains("BETWEEN") {
                    "interval"
                } else {
                    "window"
                };
                for join in ["LEFT JOIN", "RIGHT JOIN", "FULL JOIN"] {
                    if view.sql.contains(join) {
                        seen.insert(format!("{shape} {join}"));
                    }
                }
            }
        }
        assert_eq!(seen.len(), 9, "{seen:?}");
    }
}
