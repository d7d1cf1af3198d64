//! Join cases: two or three tables with primary keys (inserts, upserts, updates and deletes,
//! duplicate and NULL join keys) and one append-only table with a watermark (rows out of
//! order, some late), joined by random views — INNER, LEFT, RIGHT, FULL, with or without a
//! residual predicate, chains of three, EXISTS / NOT EXISTS, aggregates over joins and joins
//! over aggregate views — created before and after rows arrive, with a kill -9 restart in
//! some seeds. At the end every view must equal its query run by DataFusion in batch over the
//! tables' final rows (for the append-only table, the rows that were not late).

use std::collections::BTreeMap;
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

use crate::case::{Row as StreamRow, T0_MS};

#[path = "dimension_joins.rs"]
mod dimension;

/// A keyed table's row: `id` is the primary key, `k` and `k2` join keys, `v` a value.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Row {
    id: i32,
    k: Option<i32>,
    k2: Option<i32>,
    v: i64,
}

#[derive(Debug, Clone)]
enum Step {
    /// Rows inserted into keyed table `table` (an existing id is replaced: an upsert).
    Upsert {
        table: usize,
        rows: Vec<Row>,
    },
    Update {
        table: usize,
        id: i32,
        k: Option<i32>,
        v: i64,
    },
    Delete {
        table: usize,
        id: i32,
    },
    /// Rows appended to the stream table `s`.
    Append {
        rows: Vec<StreamRow>,
    },
    /// Rows inserted into the dimension `d` (each key once).
    Dimension {
        rows: Vec<(i32, i64)>,
    },
    CreateView(usize),
    Restart,
}

#[derive(Debug, Clone)]
struct JoinView {
    name: String,
    /// The query, over tables and earlier views by name.
    sql: String,
    /// The views it reads (their queries are inlined for the batch side).
    reads: Vec<usize>,
    /// Output columns, and whether each is a float (rounded to compare).
    columns: Vec<(String, bool)>,
    /// The batch side's query, when DataFusion cannot run `sql` itself (ASOF joins).
    batch: Option<String>,
}

#[derive(Debug, Clone)]
pub struct JoinCase {
    pub seed: u64,
    tables: usize,
    views: Vec<JoinView>,
    steps: Vec<Step>,
    delay_ms: i64,
}

const JOIN_TYPES: [&str; 4] = ["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"];

fn pick<T: Copy>(rng: &mut StdRng, items: &[T]) -> T {
    items[rng.random_range(0..items.len())]
}

fn key(rng: &mut StdRng) -> Option<i32> {
    (!rng.random_bool(0.12)).then(|| rng.random_range(0..5))
}

impl JoinCase {
    pub fn generate(seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x6a6f_696e);
        let tables = rng.random_range(2..=3);
        let mut views: Vec<JoinView> = Vec::new();
        for i in 0..rng.random_range(1..=4) {
            let view = random_view(&mut rng, i, tables, &views);
            views.push(view);
        }
        let mut changes = Vec::new();
        let mut next_id = vec![0i32; tables];
        for _ in 0..rng.random_range(20..60) {
            let table = rng.random_range(0..tables);
            let step = match rng.random_range(0..10) {
                0..=4 => Step::Upsert {
                    table,
                    rows: (0..rng.random_range(1..6))
                        .map(|_| {
                            // Mostly new ids, sometimes an existing one (an upsert).
                            let id = if next_id[table] > 0 && rng.random_bool(0.15) {
                                rng.random_range(0..next_id[table])
                            } else {
                                next_id[table] += 1;
                                next_id[table] - 1
                            };
                            Row {
                                id,
                                k: key(&mut rng),
                                k2: key(&mut rng),
                                v: rng.random_range(0..50),
                            }
                        })
                        .collect(),
                },
                5..=6 if next_id[table] > 0 => Step::Update {
                    table,
                    id: rng.random_range(0..next_id[table]),
                    k: key(&mut rng),
                    v: rng.random_range(0..50),
                },
                7 if next_id[table] > 0 => Step::Delete {
                    table,
                    id: rng.random_range(0..next_id[table]),
                },
                _ => Step::Append {
                    rows: stream_rows(&mut rng),
                },
            };
            changes.push(step);
        }
        let mut steps = changes;
        for (view, spec) in views.iter().enumerate() {
            let earliest = spec
                .reads
                .iter()
                .map(|&r| {
                    steps
                        .iter()
                        .position(|s| matches!(s, Step::CreateView(v) if *v == r))
                        .map_or(0, |p| p + 1)
                })
                .max()
                .unwrap_or(0);
            let at = rng
                .random_range(0..=steps.len() / 2 + view)
                .clamp(earliest, steps.len());
            steps.insert(at, Step::CreateView(view));
        }
        if rng.random_bool(0.3) {
            let at = rng.random_range(0..=steps.len());
            steps.insert(at, Step::Restart);
        }
        dimension::add(seed, tables, &mut steps, &mut views);
        JoinCase {
            seed,
            tables,
            views,
            steps,
            delay_ms: pick(&mut rng, &[500, 1000]),
        }
    }

    fn create_tables(&self) -> String {
        let mut sql: Vec<String> = (0..self.tables)
            .map(|t| format!("CREATE TABLE j{t} (id INT PRIMARY KEY, k INT, k2 INT, v BIGINT);"))
            .collect();
        sql.push(dimension::CREATE.to_string());
        sql.push(format!(
            "CREATE TABLE s (k1 INT, k2 VARCHAR, v BIGINT, d DOUBLE, ts TIMESTAMP,
               WATERMARK FOR ts AS ts - INTERVAL '{} milliseconds') APPEND ONLY;",
            self.delay_ms
        ));
        sql.join("\n")
    }

    /// The dimension's rows.
    fn dimension_rows(&self) -> Vec<(i32, i64)> {
        self.steps
            .iter()
            .flat_map(|s| match s {
                Step::Dimension { rows } => rows.clone(),
                _ => Vec::new(),
            })
            .collect()
    }

    /// Each keyed table's final rows, and the stream table's rows that were not late.
    fn final_rows(&self) -> (Vec<Vec<Row>>, Vec<StreamRow>) {
        let mut tables: Vec<BTreeMap<i32, Row>> = vec![BTreeMap::new(); self.tables];
        let mut stream: Vec<&[StreamRow]> = Vec::new();
        for step in &self.steps {
            match step {
                Step::Upsert { table, rows } => {
                    for row in rows {
                        tables[*table].insert(row.id, *row);
                    }
                }
                Step::Update { table, id, k, v } => {
                    if let Some(row) = tables[*table].get_mut(id) {
                        row.k = *k;
                        row.v = *v;
                    }
                }
                Step::Delete { table, id } => {
                    tables[*table].remove(id);
                }
                Step::Append { rows } => stream.push(rows.as_slice()),
                Step::Dimension { .. } | Step::CreateView(_) | Step::Restart => {}
            }
        }
        let (kept, _) = crate::batch::not_late(&stream, self.delay_ms);
        (
            tables
                .into_iter()
                .map(|t| t.into_values().collect())
                .collect(),
            kept,
        )
    }

    /// The view's query for the batch side: views it reads inlined as derived tables.
    fn batch_sql(&self, view: usize) -> String {
        let own = &self.views[view];
        let mut sql = own.batch.clone().unwrap_or_else(|| own.sql.clone());
        for &read in &self.views[view].reads {
            let name = &self.views[read].name;
            sql = sql.replace(&format!("{name} "), &format!("({}) ", self.batch_sql(read)));
        }
        sql
    }
}

fn stream_rows(rng: &mut StdRng) -> Vec<StreamRow> {
    (0..rng.random_range(1..5))
        .map(|_| StreamRow {
            k1: key(rng),
            k2: None,
            v: rng.random_range(0..50),
            d: 0.0,
            ts_ms: T0_MS + rng.random_range(0..20_000),
        })
        .collect()
}

fn random_view(rng: &mut StdRng, index: usize, tables: usize, earlier: &[JoinView]) -> JoinView {
    let name = format!("jv{index}");
    let t = |rng: &mut StdRng| format!("j{}", rng.random_range(0..tables));
    let residual = |rng: &mut StdRng| {
        if rng.random_bool(0.3) {
            " AND a.v < b.v".to_string()
        } else if rng.random_bool(0.2) {
            " AND a.k2 = b.k2".to_string()
        } else {
            String::new()
        }
    };
    let pairs = "a.id AS aid, a.v AS av, b.id AS bid, b.v AS bv";
    let columns = |list: &[&str]| {
        list.iter()
            .map(|c| (c.to_string(), false))
            .collect::<Vec<_>>()
    };
    let aggregate_view = earlier
        .iter()
        .position(|v| v.columns.first().is_some_and(|(c, _)| c == "gk"));
    match rng.random_range(0..14) {
        13 => {
            let (left, right) = (t(rng), t(rng));
            let (sql, batch) = crate::asof_joins::asof_view(rng, &left, &right);
            JoinView {
                sql,
                name,
                reads: Vec::new(),
                columns: columns(&["aid", "av", "bid", "bv"]),
                batch: Some(batch),
            }
        }
        12 => {
            // Outer joins of single-row inputs (global aggregates: their key has no columns),
            // whose join keys meet and part as the tables change.
            let single = |rng: &mut StdRng, remainder: u32| {
                format!(
                    "(SELECT sum(v) AS s, max(k) AS m FROM {} WHERE id % 3 = {remainder})",
                    t(rng)
                )
            };
            JoinView {
                sql: format!(
                    "SELECT a.s AS ls, a.m AS lm, b.s AS rs, b.m AS rm FROM {} a {} {} b ON a.m = b.m",
                    single(rng, 0),
                    pick(rng, &JOIN_TYPES),
                    single(rng, 1)
                ),
                name,
                reads: Vec::new(),
                batch: None,
                columns: columns(&["ls", "lm", "rs", "rm"]),
            }
        }
        10 | 11 => {
            let table = t(rng);
            let (sql, columns) = if rng.random_bool(0.5) {
                crate::rank_and_sets::over_window(rng, &table)
            } else {
                crate::rank_and_sets::grouping_sets(rng, &table)
            };
            JoinView {
                sql,
                name,
                reads: Vec::new(),
                batch: None,
                columns,
            }
        }
        7 => JoinView {
            // A top-N over a table with updates and deletes (ties broken by the key, so that
            // the batch answer is one answer).
            sql: if rng.random_bool(0.5) {
                format!(
                    "SELECT id AS tid, v AS tv FROM {} ORDER BY v DESC, id LIMIT {}",
                    t(rng),
                    rng.random_range(1..4)
                )
            } else {
                format!(
                    "SELECT id AS tid, v AS tv FROM {} ORDER BY v, id LIMIT 2 OFFSET 1",
                    t(rng)
                )
            },
            name,
            reads: Vec::new(),
            batch: None,
            columns: columns(&["tid", "tv"]),
        },
        8 => {
            // Ranks per partition: ROW_NUMBER (ties by the key), RANK and DENSE_RANK (ties
            // together), dedup with = 1.
            let (function, order, bound) = match rng.random_range(0..4) {
                0 => ("ROW_NUMBER", "v DESC, id", "<= 2"),
                1 => ("RANK", "v", "<= 2"),
                2 => ("DENSE_RANK", "v DESC", "< 3"),
                _ => ("ROW_NUMBER", "id", "= 1"),
            };
            JoinView {
                sql: format!(
                    "SELECT id AS rid, k AS rk, v AS rv, r FROM (SELECT *, {function}() OVER (PARTITION BY k ORDER BY {order}) AS r FROM {}) t WHERE r {bound}",
                    t(rng)
                ),
                name,
                reads: Vec::new(),
                batch: None,
                columns: columns(&["rid", "rk", "rv", "r"]),
            }
        }
        9 => JoinView {
            // UNION ALL of two tables (or a table with itself), and UNION over it.
            sql: if rng.random_bool(0.6) {
                format!(
                    "SELECT id AS uid, v AS uv FROM {} UNION ALL SELECT id AS uid, v AS uv FROM {}",
                    t(rng),
                    t(rng)
                )
            } else {
                format!(
                    "SELECT k AS uid, k2 AS uv FROM {} UNION SELECT k AS uid, k2 AS uv FROM {}",
                    t(rng),
                    t(rng)
                )
            },
            name,
            reads: Vec::new(),
            batch: None,
            columns: columns(&["uid", "uv"]),
        },
        0 | 1 => JoinView {
            sql: format!(
                "SELECT {pairs} FROM {} a {} {} b ON a.k = b.k{}",
                t(rng),
                pick(rng, &JOIN_TYPES),
                t(rng),
                residual(rng)
            ),
            name,
            reads: Vec::new(),
            batch: None,
            columns: columns(&["aid", "av", "bid", "bv"]),
        },
        2 => JoinView {
            sql: format!(
                "SELECT a.id AS aid, b.id AS bid, c.id AS cid, c.v AS cv FROM {} a {} {} b ON a.k = b.k {} {} c ON b.k2 = c.k",
                t(rng),
                pick(rng, &JOIN_TYPES),
                t(rng),
                pick(rng, &JOIN_TYPES),
                t(rng)
            ),
            name,
            reads: Vec::new(),
            batch: None,
            columns: columns(&["aid", "bid", "cid", "cv"]),
        },
        3 => JoinView {
            sql: format!(
                "SELECT a.id AS aid, a.v AS av FROM {} a WHERE {}EXISTS (SELECT 1 FROM {} b WHERE b.k = a.k{})",
                t(rng),
                if rng.random_bool(0.5) { "NOT " } else { "" },
                t(rng),
                if rng.random_bool(0.4) { " AND b.v > a.v" } else { "" }
            ),
            name,
            reads: Vec::new(),
            batch: None,
            columns: columns(&["aid", "av"]),
        },
        4 => JoinView {
            // An aggregate over a join (retracting as the join changes).
            sql: format!(
                "SELECT a.k AS gk, count(*) AS n, sum(b.v) AS total FROM {} a {} {} b ON a.k = b.k GROUP BY a.k",
                t(rng),
                pick(rng, &["JOIN", "LEFT JOIN"]),
                t(rng)
            ),
            name,
            reads: Vec::new(),
            batch: None,
            columns: columns(&["gk", "n", "total"]),
        },
        5 if aggregate_view.is_some() => {
            // A join over an aggregate view.
            let upstream = aggregate_view.unwrap_or_default();
            JoinView {
                sql: format!(
                    "SELECT a.id AS aid, u.n AS n FROM {} a {} {} u ON a.k = u.gk",
                    t(rng),
                    pick(rng, &JOIN_TYPES),
                    earlier[upstream].name
                ),
                name,
                reads: vec![upstream],
                batch: None,
                columns: columns(&["aid", "n"]),
            }
        }
        _ => JoinView {
            // The stream table (append-only, watermarked, some rows late) with a keyed table.
            sql: format!(
                "SELECT s.v AS sv, s.ts AS ts, b.id AS bid FROM s {} {} b ON s.k1 = b.k",
                pick(rng, &["JOIN", "LEFT JOIN"]),
                t(rng)
            ),
            name,
            reads: Vec::new(),
            batch: None,
            columns: columns(&["sv", "ts", "bid"]),
        },
    }
}

fn keyed_batch(rows: &[Row]) -> Result<RecordBatch> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, false),
        Field::new("k", DataType::Int32, true),
        Field::new("k2", DataType::Int32, true),
        Field::new("v", DataType::Int64, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.id))),
        Arc::new(Int32Array::from_iter(rows.iter().map(|r| r.k))),
        Arc::new(Int32Array::from_iter(rows.iter().map(|r| r.k2))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.v))),
    ];
    Ok(RecordBatch::try_new(schema, columns)?)
}

fn stream_batch(rows: &[StreamRow]) -> Result<RecordBatch> {
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

fn upsert_sql(table: usize, rows: &[Row]) -> String {
    let text = |v: Option<i32>| v.map_or("NULL".to_string(), |v| v.to_string());
    let values: Vec<String> = rows
        .iter()
        .map(|r| format!("({}, {}, {}, {})", r.id, text(r.k), text(r.k2), r.v))
        .collect();
    format!("INSERT INTO j{table} VALUES {}", values.join(", "))
}

/// Plays a join case against a fresh eddy and checks every view.
pub async fn run_join_case(seed: u64) -> Result<()> {
    let case = JoinCase::generate(seed);
    let mut eddy = crate::start_eddy().await?;
    let result = play(&case, &mut eddy).await;
    if result.is_err() {
        eprintln!("--- eddy log (join seed {seed}) ---\n{}", eddy.log_tail(30));
    }
    result
}

async fn play(case: &JoinCase, eddy: &mut EddyProcess) -> Result<()> {
    let (mut client, _conn) = eddy.connect().await?;
    client.batch_execute(&case.create_tables()).await?;
    for step in &case.steps {
        let sql = match step {
            Step::Upsert { table, rows } => upsert_sql(*table, rows),
            Step::Update { table, id, k, v } => format!(
                "UPDATE j{table} SET k = {}, v = {v} WHERE id = {id}",
                k.map_or("NULL".to_string(), |k| k.to_string())
            ),
            Step::Delete { table, id } => format!("DELETE FROM j{table} WHERE id = {id}"),
            Step::Append { rows } => crate::case::insert_sql("s", rows),
            Step::Dimension { rows } => dimension::insert_sql(rows),
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
    let (tables, stream) = case.final_rows();
    for (t, rows) in tables.iter().enumerate() {
        let batch = keyed_batch(rows)?;
        ctx.register_table(
            format!("j{t}").as_str(),
            Arc::new(MemTable::try_new(batch.schema(), vec![vec![batch]])?),
        )?;
    }
    let batch = dimension::batch(&case.dimension_rows())?;
    ctx.register_table(
        "d",
        Arc::new(MemTable::try_new(batch.schema(), vec![vec![batch]])?),
    )?;
    let batch = stream_batch(&stream)?;
    ctx.register_table(
        "s",
        Arc::new(MemTable::try_new(batch.schema(), vec![vec![batch]])?),
    )?;
    for (index, view) in case.views.iter().enumerate() {
        let columns = view.columns.clone();
        let expected_sql = crate::batch::normalized(&columns, &case.batch_sql(index));
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
                "join seed {}: view {} differs from the batch query ({} rows vs {} expected)\n  view: {}\n  batch: {}\n  missing (first 5): {missing:?}\n  unexpected (first 5): {extra:?}",
                case.seed,
                view.name,
                actual.len(),
                expected.len(),
                view.sql,
                expected_sql
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_cover_every_join_shape() {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 1..=100 {
            let case = JoinCase::generate(seed);
            for view in &case.views {
                for shape in [
                    "LEFT JOIN",
                    "RIGHT JOIN",
                    "FULL JOIN",
                    "NOT EXISTS",
                    "EXISTS",
                    "GROUP BY",
                    " u ON",
                    "FROM s",
                    "c ON",
                    "a.v < b.v",
                    "LIMIT",
                    "ROW_NUMBER",
                    "UNION ALL",
                    "OVER",
                    "ROLLUP",
                    "CUBE",
                    "GROUPING SETS",
                    "ASOF",
                ] {
                    if view.sql.contains(shape) {
                        seen.insert(shape);
                    }
                }
            }
            if case.steps.iter().any(|s| matches!(s, Step::Restart)) {
                seen.insert("restart");
            }
        }
        assert_eq!(seen.len(), 19, "{seen:?}");
    }

    #[test]
    fn the_model_applies_upserts_updates_and_deletes() {
        let case = JoinCase {
            seed: 0,
            tables: 1,
            views: Vec::new(),
            delay_ms: 500,
            steps: vec![
                Step::Upsert {
                    table: 0,
                    rows: vec![
                        Row {
                            id: 1,
                            k: Some(1),
                            k2: None,
                            v: 1,
                        },
                        Row {
                            id: 2,
                            k: None,
                            k2: None,
                            v: 2,
                        },
                    ],
                },
                Step::Upsert {
                    table: 0,
                    rows: vec![Row {
                        id: 1,
                        k: Some(3),
                        k2: None,
                        v: 9,
                    }],
                },
                Step::Update {
                    table: 0,
                    id: 2,
                    k: Some(4),
                    v: 5,
                },
                Step::Delete { table: 0, id: 1 },
            ],
        };
        let (tables, stream) = case.final_rows();
        assert_eq!(
            tables[0],
            vec![Row {
                id: 2,
                k: Some(4),
                k2: None,
                v: 5
            }]
        );
        assert!(stream.is_empty());
    }
}
