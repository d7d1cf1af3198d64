//! Serving reads: each query reads every table and view from one committed epoch while writes
//! go on, and filters on a key become key-range reads (shown by EXPLAIN).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use eddy_sqllogictest::EddyProcess;

/// The line of an EXPLAIN that describes the stored scan.
async fn scan_line(client: &tokio_postgres::Client, query: &str) -> String {
    let rows = client
        .simple_query(&format!("EXPLAIN {query}"))
        .await
        .unwrap();
    let mut text = String::new();
    for message in rows {
        if let tokio_postgres::SimpleQueryMessage::Row(row) = message {
            text.push_str(row.get(1).unwrap_or_default());
            text.push('\n');
        }
    }
    text.lines()
        .find(|line| line.contains("StoredScan"))
        .unwrap_or_else(|| panic!("no StoredScan in the plan of {query}:\n{text}"))
        .trim()
        .to_string()
}

#[tokio::test]
async fn filters_on_the_key_become_key_ranges() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(
            "CREATE TABLE t (a BIGINT, b VARCHAR, v BIGINT, PRIMARY KEY (a, b));
             INSERT INTO t SELECT value / 10, 'k' || (value % 10), value FROM generate_series(0, 999);
             CREATE MATERIALIZED VIEW per_a AS SELECT a, count(*) AS n FROM t GROUP BY a;",
        )
        .await
        .unwrap();
    for (query, expected) in [
        (
            "SELECT v FROM t WHERE a = 5 AND b = 'k1'",
            "ranges=1, decode=rows",
        ),
        (
            "SELECT a, b FROM t WHERE a IN (1, 2, 3)",
            "ranges=3, decode=keys",
        ),
        (
            "SELECT count(*) FROM t WHERE a BETWEEN 1 AND 9",
            "ranges=1, decode=keys",
        ),
        ("SELECT n FROM per_a WHERE a = 7", "ranges=1, decode=rows"),
        // Not the leading key column, or not a plain column: the whole table.
        ("SELECT v FROM t WHERE b = 'k1'", "ranges=all"),
        ("SELECT v FROM t WHERE a + 0 = 5", "ranges=all"),
        ("SELECT count(*) FROM t", "ranges=all, decode=none"),
    ] {
        let line = scan_line(&client, query).await;
        assert!(line.contains(expected), "{query}: {line}");
    }
    // A LIMIT with no filter stops the scan.
    let line = scan_line(&client, "SELECT * FROM t LIMIT 4").await;
    assert!(line.contains("limit=4"), "{line}");
    // An index serves filters on its leading columns that the key cannot.
    client
        .batch_execute("CREATE INDEX t_by_v ON t (v) INCLUDE (b)")
        .await
        .unwrap();
    for (query, expected) in [
        (
            "SELECT a FROM t WHERE v BETWEEN 10 AND 20",
            "ranges=1, decode=rows",
        ),
        ("SELECT b FROM t WHERE v = 7", "ranges=1, decode=included"),
        (
            "SELECT count(*) FROM t WHERE v IN (1, 2)",
            "ranges=2, decode=included",
        ),
    ] {
        let line = scan_line(&client, query).await;
        assert!(
            line.contains("index=") && line.contains(expected),
            "{query}: {line}"
        );
    }
    // The key still wins where it applies.
    let line = scan_line(&client, "SELECT v FROM t WHERE a = 1 AND v = 10").await;
    assert!(!line.contains("index="), "{line}");
    let rows = client
        .query(
            "SELECT a, b FROM t WHERE v BETWEEN 10 AND 12 ORDER BY v",
            &[],
        )
        .await
        .unwrap();
    let got: Vec<(i64, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        got,
        vec![
            (1, "k0".to_string()),
            (1, "k1".to_string()),
            (1, "k2".to_string())
        ]
    );
}

/// A view counting a table's rows commits in the same epoch as the rows: a query reading both
/// must see the same number, however the writes interleave with its two scans.
#[tokio::test]
async fn one_query_reads_one_epoch_of_every_table() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(
            "CREATE TABLE t (id BIGINT, pad VARCHAR);
             CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n FROM t;
             INSERT INTO t SELECT value, repeat('x', 100) FROM generate_series(1, 20000);",
        )
        .await
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (writer, _writer_driver) = eddy.connect().await.unwrap();
    let writing = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut epochs = 0u32;
            while !stop.load(Ordering::Relaxed) {
                writer
                    .batch_execute(
                        "INSERT INTO t SELECT value, repeat('y', 100) FROM generate_series(1, 500)",
                    )
                    .await
                    .unwrap();
                epochs += 1;
            }
            epochs
        })
    };
    let mut checked = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while checked < 150 && std::time::Instant::now() < deadline {
        let row = client
            .query_one(
                "SELECT (SELECT count(*) FROM t) AS rows, (SELECT n FROM total) AS counted",
                &[],
            )
            .await
            .unwrap();
        let (rows, counted): (i64, i64) = (row.get(0), row.get(1));
        assert_eq!(rows, counted, "query {checked} saw two epochs");
        checked += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let epochs = writing.await.unwrap();
    assert!(epochs > 3, "only {epochs} writes ran alongside the reads");
    assert!(checked >= 20, "only {checked} reads ran");
}
