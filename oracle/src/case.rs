//! A random case: tables with watermarks, a stream of rows for them (out of order within and
//! beyond the watermark delay, duplicates, quiet periods), views from a small grammar, and the
//! order in which rows arrive, views are created and the server restarts.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// 2026-01-01T00:00:00Z in milliseconds.
pub const T0_MS: i64 = 1_767_225_600_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub k1: Option<i32>,
    pub k2: Option<String>,
    pub v: i64,
    pub d: f64,
    pub ts_ms: i64,
}

#[derive(Debug, Clone)]
pub struct Table {
    pub name: String,
    pub delay_ms: i64,
}

#[derive(Debug, Clone, Copy)]
pub enum Window {
    Tumble { size_s: i64 },
    Hop { slide_s: i64, size_s: i64 },
    Cumulate { step_s: i64, size_s: i64 },
    Session { gap_s: i64 },
}

#[derive(Debug, Clone)]
pub enum ViewShape {
    /// `SELECT k1, k2, v + 1 AS v1, ts FROM t [WHERE ...]`.
    Projection,
    /// `SELECT keys, count(*) AS n FROM upstream GROUP BY keys`: a view over an earlier view
    /// (its changes, retractions included), grouped by some of its group columns.
    OverView { upstream: usize, keys: Vec<String> },
    Aggregate {
        window: Option<Window>,
        keys: Vec<&'static str>,
        aggregates: Vec<&'static str>,
        emit_on_window_close: bool,
    },
}

#[derive(Debug, Clone)]
pub struct View {
    pub name: String,
    pub table: usize,
    pub filter: Option<&'static str>,
    pub shape: ViewShape,
}

#[derive(Debug, Clone)]
pub enum Step {
    Insert {
        table: usize,
        rows: Vec<Row>,
    },
    CreateView(usize),
    /// kill -9 and start again on the same data.
    Restart,
}

#[derive(Debug, Clone)]
pub struct Case {
    pub seed: u64,
    pub tables: Vec<Table>,
    pub views: Vec<View>,
    pub steps: Vec<Step>,
}

const FILTERS: [&str; 4] = ["v > 20", "k2 <> 'b'", "d < 10.0", "v % 3 = 0"];
const KEYS: [&str; 2] = ["k1", "k2"];
const AGGREGATES: [&str; 11] = [
    "count(*)",
    "count(k2)",
    "sum(v)",
    "min(v)",
    "max(d)",
    "avg(d)",
    "avg(v)",
    "min(k2)",
    "count(DISTINCT k1)",
    "sum(v) FILTER (WHERE d > 5)",
    "bool_or(v > 50)",
];

fn pick<T: Copy>(rng: &mut StdRng, items: &[T]) -> T {
    items[rng.random_range(0..items.len())]
}

impl Case {
    pub fn generate(seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let tables: Vec<Table> = (0..rng.random_range(1..=2))
            .map(|i| Table {
                name: format!("t{i}"),
                delay_ms: pick(&mut rng, &[500, 1000, 2000]),
            })
            .collect();
        let mut views: Vec<View> = Vec::new();
        for i in 0..rng.random_range(1..=4) {
            let view = match views
                .iter()
                .position(|v| matches!(v.shape, ViewShape::Aggregate { .. }))
            {
                Some(upstream) if rng.random_bool(0.25) => {
                    over_view(&mut rng, i, upstream, &views[upstream])
                }
                _ => random_view(&mut rng, i, tables.len()),
            };
            views.push(view);
        }

        // Rows per table, in arrival order, then cut into INSERTs of 1..15 rows.
        let mut inserts = Vec::new();
        for (table, _) in tables.iter().enumerate() {
            let mut clock = T0_MS;
            let mut rows: Vec<Row> = Vec::new();
            for _ in 0..rng.random_range(40..200) {
                if rng.random_bool(0.05) && !rows.is_empty() {
                    let duplicate = rows[rows.len() - 1].clone();
                    rows.push(duplicate);
                    continue;
                }
                clock += rng.random_range(0..700);
                if rng.random_bool(0.03) {
                    clock += rng.random_range(5_000..20_000); // a quiet period
                }
                let ts_ms = if rng.random_bool(0.25) {
                    clock - rng.random_range(0..3_000) // out of order, sometimes late
                } else {
                    clock
                };
                rows.push(Row {
                    k1: (!rng.random_bool(0.1)).then(|| rng.random_range(0..4)),
                    k2: (!rng.random_bool(0.1)).then(|| pick(&mut rng, &["a", "b", "c"]).into()),
                    v: rng.random_range(0..100),
                    d: f64::from(rng.random_range(0..60)) * 0.25,
                    ts_ms,
                });
            }
            let mut rest = rows.as_slice();
            while !rest.is_empty() {
                let n = rng.random_range(1..=15).min(rest.len());
                inserts.push(Step::Insert {
                    table,
                    rows: rest[..n].to_vec(),
                });
                rest = &rest[n..];
            }
        }
        // Tables' INSERTs interleave in order; views appear at random points (some before any
        // row, some after: those backfill); at most one restart.
        let mut steps = Vec::new();
        let mut by_table: Vec<Vec<Step>> = vec![Vec::new(); tables.len()];
        for step in inserts {
            if let Step::Insert { table, .. } = &step {
                by_table[*table].push(step.clone());
            }
        }
        let mut cursors = vec![0usize; tables.len()];
        loop {
            let open: Vec<usize> = (0..tables.len())
                .filter(|&t| cursors[t] < by_table[t].len())
                .collect();
            if open.is_empty() {
                break;
            }
            let t = pick(&mut rng, &open);
            steps.push(by_table[t][cursors[t]].clone());
            cursors[t] += 1;
        }
        for (view, spec) in views.iter().enumerate() {
            let mut at = rng
                .random_range(0..=steps.len() / 2 + view)
                .min(steps.len());
            if let ViewShape::OverView { upstream, .. } = spec.shape {
                // After its upstream.
                let upstream_at = steps
                    .iter()
                    .position(|s| matches!(s, Step::CreateView(v) if *v == upstream))
                    .unwrap_or(0);
                at = at.max(upstream_at + 1);
            }
            steps.insert(at, Step::CreateView(view));
        }
        if rng.random_bool(0.3) {
            let at = rng.random_range(0..=steps.len());
            steps.insert(at, Step::Restart);
        }
        Case {
            seed,
            tables,
            views,
            steps,
        }
    }

    /// The CREATE TABLE statements.
    pub fn create_tables(&self) -> String {
        self.tables
            .iter()
            .map(|t| {
                format!(
                    "CREATE TABLE {} (k1 INT, k2 VARCHAR, v BIGINT, d DOUBLE, ts TIMESTAMP,
                       WATERMARK FOR ts AS ts - INTERVAL '{} milliseconds') APPEND ONLY;",
                    t.name, t.delay_ms
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn random_view(rng: &mut StdRng, index: usize, tables: usize) -> View {
    let table = rng.random_range(0..tables);
    let filter = rng.random_bool(0.4).then(|| pick(rng, &FILTERS));
    let shape = if rng.random_bool(0.15) {
        ViewShape::Projection
    } else {
        let window = rng.random_bool(0.8).then(|| match rng.random_range(0..4) {
            0 => Window::Tumble {
                size_s: pick(rng, &[1, 2, 5]),
            },
            1 => Window::Hop {
                slide_s: 1,
                size_s: pick(rng, &[2, 3]),
            },
            2 => Window::Cumulate {
                step_s: 1,
                size_s: pick(rng, &[2, 4]),
            },
            _ => Window::Session {
                gap_s: pick(rng, &[1, 2, 4]),
            },
        });
        let mut keys: Vec<&'static str> = KEYS
            .iter()
            .copied()
            .filter(|_| rng.random_bool(0.5))
            .collect();
        if window.is_none() && keys.is_empty() && rng.random_bool(0.5) {
            keys.push("k1");
        }
        let mut aggregates: Vec<&'static str> = Vec::new();
        for _ in 0..rng.random_range(1..=3) {
            let aggregate = pick(rng, &AGGREGATES);
            if !aggregates.contains(&aggregate) {
                aggregates.push(aggregate);
            }
        }
        // Alone, count(DISTINCT) is rewritten into an aggregate of aggregates, which a
        // SESSION window cannot sit under (Eddy refuses it with a message): keep it company.
        if aggregates == ["count(DISTINCT k1)"] {
            aggregates.push("count(*)");
        }
        let emit_on_window_close = window.is_some() && rng.random_bool(0.4);
        ViewShape::Aggregate {
            window,
            keys,
            aggregates,
            emit_on_window_close,
        }
    };
    View {
        name: format!("v{index}"),
        table,
        filter,
        shape,
    }
}

fn over_view(rng: &mut StdRng, index: usize, upstream: usize, up: &View) -> View {
    let keys = up
        .columns()
        .into_iter()
        .filter(|(name, _)| !name.starts_with('a'))
        .map(|(name, _)| name)
        .filter(|_| rng.random_bool(0.5))
        .collect();
    View {
        name: format!("v{index}"),
        table: up.table,
        filter: None,
        shape: ViewShape::OverView { upstream, keys },
    }
}

fn interval(seconds: i64) -> String {
    format!("INTERVAL '{seconds} seconds'")
}

impl View {
    /// The view's output columns, in order, and whether each is a float (compared rounded).
    pub fn columns(&self) -> Vec<(String, bool)> {
        match &self.shape {
            ViewShape::Projection => ["k1", "k2", "v1", "ts"]
                .iter()
                .map(|c| (c.to_string(), false))
                .collect(),
            ViewShape::OverView { keys, .. } => keys
                .iter()
                .map(|k| (k.clone(), false))
                .chain([("n".to_string(), false)])
                .collect(),
            ViewShape::Aggregate {
                window,
                keys,
                aggregates,
                ..
            } => {
                let mut columns: Vec<(String, bool)> =
                    keys.iter().map(|k| (k.to_string(), false)).collect();
                if window.is_some() {
                    columns.push(("window_start".into(), false));
                    columns.push(("window_end".into(), false));
                }
                for (i, aggregate) in aggregates.iter().enumerate() {
                    columns.push((format!("a{i}"), aggregate.starts_with("avg")));
                }
                columns
            }
        }
    }

    /// The CREATE MATERIALIZED VIEW statement.
    pub fn create_sql(&self, tables: &[Table], views: &[View]) -> String {
        let table = &tables[self.table].name;
        let filter = self
            .filter
            .map(|f| format!(" WHERE {f}"))
            .unwrap_or_default();
        let body = match &self.shape {
            ViewShape::Projection => {
                format!("SELECT k1, k2, v + 1 AS v1, ts FROM {table}{filter}")
            }
            ViewShape::OverView { upstream, keys } => over_view_sql(&views[*upstream].name, keys),
            ViewShape::Aggregate {
                window,
                keys,
                aggregates,
                emit_on_window_close,
            } => {
                let source = match window {
                    None => table.clone(),
                    Some(Window::Tumble { size_s }) => {
                        format!("TUMBLE({table}, ts, {})", interval(*size_s))
                    }
                    Some(Window::Hop { slide_s, size_s }) => format!(
                        "HOP({table}, ts, {}, {})",
                        interval(*slide_s),
                        interval(*size_s)
                    ),
                    Some(Window::Cumulate { step_s, size_s }) => format!(
                        "CUMULATE({table}, ts, {}, {})",
                        interval(*step_s),
                        interval(*size_s)
                    ),
                    Some(Window::Session { gap_s }) => {
                        format!("SESSION({table}, ts, {})", interval(*gap_s))
                    }
                };
                let (select, group_by) = select_and_group_by(keys, window.is_some(), aggregates);
                let emit = if *emit_on_window_close {
                    " EMIT ON WINDOW CLOSE"
                } else {
                    ""
                };
                format!("SELECT {select} FROM {source}{filter}{group_by}{emit}")
            }
        };
        format!("CREATE MATERIALIZED VIEW {} AS {body}", self.name)
    }
}

/// An aggregate view's select list (keys, window bounds, aggregates as a0, a1, ...) and its
/// ` GROUP BY ...` clause (empty without groups): the same in the view and in batch.
pub fn select_and_group_by(keys: &[&str], windowed: bool, aggregates: &[&str]) -> (String, String) {
    let mut select: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    let mut group = select.clone();
    if windowed {
        for column in ["window_start", "window_end"] {
            select.push(column.into());
            group.push(column.into());
        }
    }
    for (i, aggregate) in aggregates.iter().enumerate() {
        select.push(format!("{aggregate} AS a{i}"));
    }
    let group_by = if group.is_empty() {
        String::new()
    } else {
        format!(" GROUP BY {}", group.join(", "))
    };
    (select.join(", "), group_by)
}

/// `SELECT keys, count(*) AS n FROM source GROUP BY keys` (no GROUP BY without keys).
pub fn over_view_sql(source: &str, keys: &[String]) -> String {
    let mut select: Vec<String> = keys.to_vec();
    select.push("count(*) AS n".into());
    let group_by = if keys.is_empty() {
        String::new()
    } else {
        format!(" GROUP BY {}", keys.join(", "))
    };
    format!("SELECT {} FROM {source}{group_by}", select.join(", "))
}

/// `INSERT INTO table VALUES ...` for some rows.
pub fn insert_sql(table: &str, rows: &[Row]) -> String {
    let values: Vec<String> = rows
        .iter()
        .map(|r| {
            let k1 = r.k1.map_or("NULL".to_string(), |k| k.to_string());
            let k2 =
                r.k2.as_ref()
                    .map_or("NULL".to_string(), |k| format!("'{k}'"));
            format!(
                "({k1}, {k2}, {}, {:.2}, {})",
                r.v,
                r.d,
                timestamp_literal(r.ts_ms)
            )
        })
        .collect();
    format!("INSERT INTO {table} VALUES {}", values.join(", "))
}

fn timestamp_literal(ms: i64) -> String {
    let seconds = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "'{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{millis:03}'",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// Days since 1970-01-01 to a calendar date (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_print_as_calendar_dates() {
        assert_eq!(timestamp_literal(T0_MS), "'2026-01-01 00:00:00.000'");
        assert_eq!(
            timestamp_literal(T0_MS + 86_400_000 + 3_723_045),
            "'2026-01-02 01:02:03.045'"
        );
    }

    #[test]
    fn seeds_cover_every_shape_of_the_grammar() {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 1..=200 {
            let case = Case::generate(seed);
            for view in &case.views {
                seen.insert(match &view.shape {
                    ViewShape::Projection => "projection",
                    ViewShape::OverView { .. } => "view over view",
                    ViewShape::Aggregate { window: None, .. } => "group by",
                    ViewShape::Aggregate {
                        emit_on_window_close: true,
                        window: Some(Window::Session { .. }),
                        ..
                    } => "session, on close",
                    ViewShape::Aggregate {
                        window: Some(Window::Tumble { .. }),
                        ..
                    } => "tumble",
                    ViewShape::Aggregate {
                        window: Some(Window::Hop { .. }),
                        ..
                    } => "hop",
                    ViewShape::Aggregate {
                        window: Some(Window::Cumulate { .. }),
                        ..
                    } => "cumulate",
                    ViewShape::Aggregate {
                        window: Some(Window::Session { .. }),
                        ..
                    } => "session",
                });
            }
            if case.steps.iter().any(|s| matches!(s, Step::Restart)) {
                seen.insert("restart");
            }
        }
        assert_eq!(seen.len(), 9, "{seen:?}");
    }

    #[test]
    fn generation_is_deterministic_per_seed() {
        let a = Case::generate(7);
        let b = Case::generate(7);
        assert_eq!(format!("{:?}", a.steps), format!("{:?}", b.steps));
        assert_ne!(
            format!("{:?}", a.steps),
            format!("{:?}", Case::generate(8).steps)
        );
    }
}
