//! Joins with a dimension: `d`, an append-only table whose primary key is the join key, so each
//! key's row comes once and never changes. Filters on it move into the join (the other side's
//! rows of its keys are settled at once and not kept): inner joins with a WHERE on `d`, a LEFT
//! JOIN of a filtered subquery of `d`, and IN / NOT EXISTS subqueries on it, against keyed
//! tables with upserts, updates and deletes. Drawn from an RNG of their own, so that the other
//! join cases of a seed stay what they were.

use std::sync::Arc;

use anyhow::Result;
use datafusion::arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{pick, JoinView, Step};

/// The dimension table.
pub(super) const CREATE: &str = "CREATE TABLE d (id INT PRIMARY KEY, v BIGINT) APPEND ONLY;";

/// Keys the dimension takes (the keyed tables' `k` is 0..5 or NULL): one beyond, never met.
const KEYS: i32 = 6;

/// Inserts into `d` (each key once, in a random order, in a few statements) placed among
/// `steps`, and in about half the seeds a view joining it; `tables` keyed tables exist.
pub(super) fn add(seed: u64, tables: usize, steps: &mut Vec<Step>, views: &mut Vec<JoinView>) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6469_6d65);
    let mut keys: Vec<i32> = (0..KEYS).collect();
    for i in (1..keys.len()).rev() {
        keys.swap(i, rng.random_range(0..=i));
    }
    while !keys.is_empty() {
        let take = rng.random_range(1..=keys.len().min(3));
        let rows = keys
            .drain(..take)
            .map(|id| (id, rng.random_range(0..50)))
            .collect();
        let at = rng.random_range(0..=steps.len());
        steps.insert(at, Step::Dimension { rows });
    }
    if rng.random_bool(0.5) {
        let view = views.len();
        views.push(dimension_view(&mut rng, view, tables));
        let at = rng.random_range(0..=steps.len());
        steps.insert(at, Step::CreateView(view));
    }
}

fn dimension_view(rng: &mut StdRng, index: usize, tables: usize) -> JoinView {
    let table = format!("j{}", rng.random_range(0..tables));
    let bound = rng.random_range(10..40);
    let (sql, columns) = match rng.random_range(0..4) {
        0 => (
            format!(
                "SELECT a.id AS aid, a.v AS av, d.id AS did, d.v AS dv FROM {table} a JOIN d ON a.k = d.id WHERE d.v < {bound}"
            ),
            vec!["aid", "av", "did", "dv"],
        ),
        1 => (
            format!(
                "SELECT a.id AS aid, a.v AS av, f.id AS did, f.v AS dv FROM {table} a LEFT JOIN (SELECT * FROM d WHERE v < {bound}) f ON a.k = f.id"
            ),
            vec!["aid", "av", "did", "dv"],
        ),
        2 => (
            format!(
                "SELECT id AS aid, v AS av FROM {table} WHERE k IN (SELECT id FROM d WHERE v {} {bound})",
                pick(rng, &["<", ">="])
            ),
            vec!["aid", "av"],
        ),
        _ => (
            format!(
                "SELECT a.id AS aid, a.v AS av FROM {table} a WHERE NOT EXISTS (SELECT 1 FROM d WHERE d.id = a.k AND d.v < {bound})"
            ),
            vec!["aid", "av"],
        ),
    };
    JoinView {
        name: format!("jv{index}"),
        sql,
        reads: Vec::new(),
        columns: columns
            .into_iter()
            .map(|c| (c.to_string(), false))
            .collect(),
        batch: None,
    }
}

/// `INSERT INTO d` of `rows`.
pub(super) fn insert_sql(rows: &[(i32, i64)]) -> String {
    let values: Vec<String> = rows.iter().map(|(id, v)| format!("({id}, {v})")).collect();
    format!("INSERT INTO d VALUES {}", values.join(", "))
}

/// The dimension's rows for the batch side.
pub(super) fn batch(rows: &[(i32, i64)]) -> Result<RecordBatch> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, false),
        Field::new("v", DataType::Int64, false),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
    ];
    Ok(RecordBatch::try_new(schema, columns)?)
}
