//! The recovery test's answers: what the views must hold for some rows, and what the server
//! holds.

use std::collections::BTreeMap;
use std::fmt::{self, Debug};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, ensure, Context, Result};
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Row as PgRow};

use super::{Row, WINDOW_MS};

/// Keys below this have a row in `labels`.
const LABELED: i32 = 4;

/// Contents of the table and the views, in comparable form.
#[derive(PartialEq, Eq)]
pub(crate) struct Answer {
    /// `win`: (k, window_start ms) → (count, sum, max).
    windows: BTreeMap<(i32, i64), (i64, i64, i64)>,
    /// `totals`: k → (count, sum).
    totals: BTreeMap<i32, (i64, i64)>,
    /// `events`, sorted.
    table: Vec<Row>,
    /// `joined`: each event with its label (NULL for unlabeled keys), sorted.
    joined: Vec<(Row, Option<String>)>,
}

impl Answer {
    /// The batch answer over `rows`.
    pub(crate) fn of(rows: &[Row]) -> Self {
        let mut windows = BTreeMap::new();
        let mut totals = BTreeMap::new();
        for row in rows {
            let start = row.ts_ms.div_euclid(WINDOW_MS) * WINDOW_MS;
            let (n, s, m) = windows.entry((row.k, start)).or_insert((0, 0, i64::MIN));
            *n += 1;
            *s += row.v;
            *m = (*m).max(row.v);
            let (n, s) = totals.entry(row.k).or_insert((0, 0));
            *n += 1;
            *s += row.v;
        }
        let mut table = rows.to_vec();
        table.sort();
        let joined = table
            .iter()
            .map(|row| (*row, (row.k < LABELED).then(|| format!("k{}", row.k))))
            .collect();
        Self {
            windows,
            totals,
            table,
            joined,
        }
    }

    /// What the server holds now.
    pub(crate) async fn read(client: &Client) -> Result<Self> {
        let mut windows = BTreeMap::new();
        let query = "SELECT k, window_start, window_end, n, s, m FROM win";
        for row in client.query(query, &[]).await.context(query)? {
            let start = timestamp_ms(&row, 1)?;
            let end = timestamp_ms(&row, 2)?;
            ensure!(
                end - start == WINDOW_MS,
                "win: window [{start}, {end}) ms is not {WINDOW_MS} ms long"
            );
            let key = (int(&row, 0)? as i32, start);
            let value = (int(&row, 3)?, int(&row, 4)?, int(&row, 5)?);
            ensure!(
                windows.insert(key, value).is_none(),
                "win: duplicate row for {key:?}"
            );
        }
        let mut totals = BTreeMap::new();
        let query = "SELECT k, n, s FROM totals";
        for row in client.query(query, &[]).await.context(query)? {
            let key = int(&row, 0)? as i32;
            ensure!(
                totals.insert(key, (int(&row, 1)?, int(&row, 2)?)).is_none(),
                "totals: duplicate row for k={key}"
            );
        }
        let mut table = Vec::new();
        let query = "SELECT k, v, ts FROM events";
        for row in client.query(query, &[]).await.context(query)? {
            table.push(Row {
                k: int(&row, 0)? as i32,
                v: int(&row, 1)?,
                ts_ms: timestamp_ms(&row, 2)?,
            });
        }
        table.sort();
        let mut joined = Vec::new();
        let query = "SELECT k, v, ts, label FROM joined";
        for row in client.query(query, &[]).await.context(query)? {
            let event = Row {
                k: int(&row, 0)? as i32,
                v: int(&row, 1)?,
                ts_ms: timestamp_ms(&row, 2)?,
            };
            joined.push((event, row.try_get::<_, Option<String>>(3)?));
        }
        joined.sort();
        Ok(Self {
            windows,
            totals,
            table,
            joined,
        })
    }

    /// A readable account of how `self` (actual) differs from `expected`.
    pub(crate) fn diff(&self, expected: &Self) -> String {
        let mut out = String::new();
        diff_maps("win", &self.windows, &expected.windows, &mut out);
        diff_maps("totals", &self.totals, &expected.totals, &mut out);
        if self.table != expected.table {
            out.push_str(&format!(
                "  events: {} rows, expected {}\n",
                self.table.len(),
                expected.table.len()
            ));
            let missing = expected
                .table
                .iter()
                .filter(|row| !self.table.contains(row));
            for row in missing.take(5) {
                out.push_str(&format!("  events: missing {row:?}\n"));
            }
            let extra = self
                .table
                .iter()
                .filter(|row| !expected.table.contains(row));
            for row in extra.take(5) {
                out.push_str(&format!("  events: unexpected {row:?}\n"));
            }
        }
        if self.joined != expected.joined {
            let missing = expected.joined.iter().filter(|r| !self.joined.contains(r));
            let extra = self.joined.iter().filter(|r| !expected.joined.contains(r));
            out.push_str(&format!(
                "  joined: {} rows, expected {}; missing {:?}; unexpected {:?}\n",
                self.joined.len(),
                expected.joined.len(),
                missing.take(3).collect::<Vec<_>>(),
                extra.take(3).collect::<Vec<_>>()
            ));
        }
        if out.is_empty() {
            out.push_str("  (no difference)\n");
        }
        out
    }
}

impl Debug for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Answer {{ {} windows, {} keys, {} rows }}",
            self.windows.len(),
            self.totals.len(),
            self.table.len()
        )
    }
}

/// Appends up to 10 differences between two maps to `out`.
fn diff_maps<K: Ord + Debug, V: PartialEq + Debug>(
    name: &str,
    actual: &BTreeMap<K, V>,
    expected: &BTreeMap<K, V>,
    out: &mut String,
) {
    let mut lines = Vec::new();
    for (key, want) in expected {
        match actual.get(key) {
            None => lines.push(format!("  {name}: missing {key:?} => {want:?}")),
            Some(got) if got != want => {
                lines.push(format!("  {name}: {key:?} => {got:?}, expected {want:?}"));
            }
            Some(_) => {}
        }
    }
    for (key, got) in actual {
        if !expected.contains_key(key) {
            lines.push(format!("  {name}: unexpected {key:?} => {got:?}"));
        }
    }
    if !lines.is_empty() {
        out.push_str(&format!(
            "  {name}: {} rows, expected {}; {} differences\n",
            actual.len(),
            expected.len(),
            lines.len()
        ));
    }
    for line in lines.into_iter().take(10) {
        out.push_str(&line);
        out.push('\n');
    }
}

/// An integer column of any width.
fn int(row: &PgRow, idx: usize) -> Result<i64> {
    let column = &row.columns()[idx];
    let value = match *column.type_() {
        Type::INT2 => row.try_get::<_, Option<i16>>(idx)?.map(i64::from),
        Type::INT4 => row.try_get::<_, Option<i32>>(idx)?.map(i64::from),
        Type::INT8 => row.try_get::<_, Option<i64>>(idx)?,
        ref other => bail!(
            "column {} has type {other}, expected an integer",
            column.name()
        ),
    };
    value.with_context(|| format!("column {} is NULL", column.name()))
}

/// A TIMESTAMP column, in milliseconds since the Unix epoch.
fn timestamp_ms(row: &PgRow, idx: usize) -> Result<i64> {
    let name = row.columns()[idx].name().to_string();
    let time: SystemTime = row
        .try_get(idx)
        .with_context(|| format!("column {name} as TIMESTAMP"))?;
    let since_epoch = time
        .duration_since(UNIX_EPOCH)
        .with_context(|| format!("column {name} is before 1970"))?;
    Ok(i64::try_from(since_epoch.as_millis())?)
}
