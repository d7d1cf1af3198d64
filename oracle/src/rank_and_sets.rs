//! View shapes over keyed tables (with updates and deletes) that the join cases also draw:
//! OVER windows in their general form and GROUPING SETS / ROLLUP / CUBE aggregates.
//!
//! Every `ORDER BY` of a window ends with the table's key, so that the batch answer is the one
//! answer (the view breaks ties by the row's key too).

use rand::rngs::StdRng;
use rand::Rng;

/// A view's query over `table` and its output columns (name, whether a float to round).
pub(crate) type Shape = (String, Vec<(String, bool)>);

fn columns(list: &[(&str, bool)]) -> Vec<(String, bool)> {
    list.iter().map(|(c, f)| (c.to_string(), *f)).collect()
}

/// `LAG`, `LEAD`, `ROW_NUMBER`, `FIRST_VALUE` and framed `sum` / `avg` / `count` per partition.
pub(crate) fn over_window(rng: &mut StdRng, table: &str) -> Shape {
    let (o1, o2, float) = match rng.random_range(0..5) {
        0 => (
            "lag(v) OVER (PARTITION BY k ORDER BY id)",
            "lead(v, 2) OVER (PARTITION BY k ORDER BY id)",
            false,
        ),
        1 => (
            "row_number() OVER (PARTITION BY k ORDER BY v DESC, id)",
            "sum(v) OVER (PARTITION BY k ORDER BY v, id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)",
            false,
        ),
        2 => (
            "avg(v) OVER (PARTITION BY k ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING)",
            "count(*) OVER (PARTITION BY k2 ORDER BY v RANGE BETWEEN 5 PRECEDING AND CURRENT ROW)",
            true,
        ),
        3 => (
            "avg(v) OVER (PARTITION BY k, k2)",
            "first_value(v) OVER (PARTITION BY k ORDER BY v DESC, id)",
            true,
        ),
        _ => (
            "sum(v) OVER (ORDER BY id)",
            "lag(id, 1, -1) OVER (PARTITION BY k2 ORDER BY v, id)",
            false,
        ),
    };
    (
        format!("SELECT id AS oid, k AS ok, {o1} AS o1, {o2} AS o2 FROM {table}"),
        columns(&[("oid", false), ("ok", false), ("o1", float), ("o2", false)]),
    )
}

/// An aggregate by ROLLUP, CUBE or GROUPING SETS (some with `GROUPING()`).
pub(crate) fn grouping_sets(rng: &mut StdRng, table: &str) -> Shape {
    let (group_by, x) = match rng.random_range(0..5) {
        0 => ("ROLLUP(k, k2)", "sum(v)"),
        1 => ("CUBE(k, k2)", "GROUPING(k, k2)"),
        2 => ("GROUPING SETS ((k), (k2), (k, k2), ())", "min(v)"),
        3 => ("k, ROLLUP(k2)", "max(v)"),
        _ => ("GROUPING SETS ((k, k2), (k, k2))", "GROUPING(k)"),
    };
    (
        format!(
            "SELECT k AS g1, k2 AS g2, count(*) AS n, {x} AS x FROM {table} GROUP BY {group_by}"
        ),
        columns(&[("g1", false), ("g2", false), ("n", false), ("x", false)]),
    )
}
