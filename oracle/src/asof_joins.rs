//! ASOF joins for the join cases, ordered by an integer column (`v BIGINT`): each left row with
//! the right row of its key nearest below (or above) it, ties to the smallest right id. The
//! batch side has no ASOF JOIN: it is the join of every candidate, ranked per left row.

use rand::rngs::StdRng;
use rand::Rng;

/// A random ASOF join of tables `left` and `right`: the view's SQL and its batch form, both
/// with the columns `aid, av, bid, bv`.
pub fn asof_view(rng: &mut StdRng, left: &str, right: &str) -> (String, String) {
    let op = ["<=", "<", ">=", ">"][rng.random_range(0..4)];
    let outer = rng.random_bool(0.5);
    let join = if outer { "ASOF LEFT JOIN" } else { "ASOF JOIN" };
    let columns = "a.id AS aid, a.v AS av, b.id AS bid, b.v AS bv";
    // RisingWave's form (the inequality among the ON conjuncts) or Snowflake's.
    let sql = if rng.random_bool(0.5) {
        format!("SELECT {columns} FROM {left} a {join} {right} b ON a.k = b.k AND a.v {op} b.v")
    } else {
        format!(
            "SELECT {columns} FROM {left} a {join} {right} b MATCH_CONDITION (a.v {op} b.v) ON a.k = b.k"
        )
    };
    // The nearest first: below the left row, the largest.
    let nearest = if op.starts_with('>') {
        "b.v DESC"
    } else {
        "b.v"
    };
    let candidates = if outer { "LEFT JOIN" } else { "JOIN" };
    let batch = format!(
        "SELECT aid, av, bid, bv FROM (SELECT {columns}, ROW_NUMBER() OVER (PARTITION BY a.id ORDER BY {nearest}, b.id) AS r FROM {left} a {candidates} {right} b ON a.k = b.k AND a.v {op} b.v) t WHERE r = 1"
    );
    (sql, batch)
}
