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
        // `a` is in the row's key, which every entry holds: no row is read.
        (
            "SELECT a FROM t WHERE v BETWEEN 10 AND 20",
            "ranges=1, decode=included",
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

/// Full scans take turns (`--max-concurrent-scans 1`) while narrowed reads pass freely: point
/// lookups answer quickly while several scans of the whole table run, and every scan that
/// waited for its turn still answers in full.
#[tokio::test]
async fn lookups_answer_while_full_scans_take_turns() {
    use std::time::{Duration, Instant};
    const ROWS: i64 = 100_000;
    const SCANNERS: usize = 4;
    let eddy = EddyProcess::start_fresh_with(|config| {
        config
            .extra_args
            .extend(["--max-concurrent-scans".to_string(), "1".to_string()]);
    })
    .await
    .unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE t (k BIGINT PRIMARY KEY, pad VARCHAR);
             INSERT INTO t SELECT value, repeat('x', 200) FROM generate_series(1, {ROWS});"
        ))
        .await
        .unwrap();
    let mut scans = Vec::new();
    for _ in 0..SCANNERS {
        let (scanner, driver) = eddy.connect().await.unwrap();
        scans.push(tokio::spawn(async move {
            let _driver = driver;
            let row = scanner
                .query_one("SELECT count(*), sum(length(pad)) FROM t", &[])
                .await
                .unwrap();
            (row.get::<_, i64>(0), row.get::<_, i64>(1))
        }));
    }
    let lookup = client
        .prepare("SELECT pad FROM t WHERE k = $1")
        .await
        .unwrap();
    let (mut lookups, mut slowest) = (0i64, Duration::ZERO);
    while scans.iter().any(|scan| !scan.is_finished()) && lookups < 200 {
        let started = Instant::now();
        let key = lookups * 7919 % ROWS + 1;
        let row = client.query_one(&lookup, &[&key]).await.unwrap();
        slowest = slowest.max(started.elapsed());
        assert_eq!(row.get::<_, &str>(0).len(), 200, "key {key}");
        lookups += 1;
    }
    let scans_running = scans.iter().any(|scan| !scan.is_finished());
    for scan in scans {
        assert_eq!(scan.await.unwrap(), (ROWS, 200 * ROWS));
    }
    assert!(
        lookups >= 3,
        "only {lookups} lookups ran while the scans did"
    );
    // Generous for a loaded debug build; without turns, four scans share the cores with the
    // lookups.
    assert!(
        slowest < Duration::from_secs(1),
        "the slowest of {lookups} lookups took {slowest:?} (scans still running: {scans_running})"
    );
}

/// The engine's last committed epoch (shown with every materialized view).
async fn committed_epoch(client: &tokio_postgres::Client) -> i64 {
    client
        .query_one(
            "SELECT max(committed_epoch) FROM eddy_catalog.materialized_views",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// CREATE INDEX over more rows than one build step backfills: the build spans several epochs
/// (its memory is one chunk, not the index), writes commit while it goes on, and the finished
/// index agrees with the table, rows changed during the build included.
#[tokio::test]
async fn an_index_builds_over_several_epochs_while_writes_go_on() {
    const ROWS: i64 = 150_000;
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT);
             CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n FROM t;
             INSERT INTO t SELECT value, value + 0 AS v FROM generate_series(0, {} - 1);",
            ROWS
        ))
        .await
        .unwrap();
    // Alone: one epoch per chunk of 65,536 rows (a single epoch before).
    let before = committed_epoch(&client).await;
    client
        .batch_execute("CREATE INDEX t_by_k_again ON t (k)")
        .await
        .unwrap();
    let epochs = committed_epoch(&client).await - before;
    assert!(
        epochs >= 3,
        "the build of {ROWS} rows took {epochs} epoch(s)"
    );

    // With a writer replacing rows (their indexed `v` changes) and deleting some, all over
    // the key range, before and after each row's chunk is backfilled.
    let stop = Arc::new(AtomicBool::new(false));
    let (writer, _writer_driver) = eddy.connect().await.unwrap();
    let writing = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut round = 0i64;
            while !stop.load(Ordering::Relaxed) {
                round += 1;
                let rows: Vec<String> = (0..50)
                    .map(|j| {
                        let k = (round * 7919 + j * 2999) % ROWS;
                        format!("({k}, {})", -k - round * ROWS)
                    })
                    .collect();
                writer
                    .batch_execute(&format!("INSERT INTO t VALUES {}", rows.join(", ")))
                    .await
                    .unwrap();
                if round % 5 == 0 {
                    writer
                        .batch_execute(&format!(
                            "DELETE FROM t WHERE k = {}",
                            (round * 104_729) % ROWS
                        ))
                        .await
                        .unwrap();
                }
            }
            round
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    client
        .batch_execute("CREATE INDEX t_by_v ON t (v)")
        .await
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    let rounds = writing.await.unwrap();
    assert!(rounds >= 2, "only {rounds} writes ran alongside the build");

    let line = scan_line(&client, "SELECT count(*) FROM t WHERE v <= 0").await;
    assert!(line.contains("index="), "{line}");
    // Every row has one entry with its current `v`: counts and sums through the index match
    // those of the rows, for the changed rows (v <= 0) and the others.
    for filter in ["v <= 0", "v > 0", "v BETWEEN -1000000000 AND 1000000000"] {
        let query = format!(
            "SELECT (SELECT count(*) FROM t WHERE {filter}) AS a, (SELECT sum(v) FROM t WHERE {filter}) AS b,
                    (SELECT count(*) FROM t WHERE {unindexed}) AS c, (SELECT sum(v) FROM t WHERE {unindexed}) AS d",
            unindexed = filter.replace('v', "(v + 0)")
        );
        let row = client.query_one(&query, &[]).await.unwrap();
        let indexed: (i64, Option<i64>) = (row.get(0), row.get(1));
        let scanned: (i64, Option<i64>) = (row.get(2), row.get(3));
        assert_eq!(indexed, scanned, "{filter}");
    }
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM t WHERE v <= 0) AS changed, (SELECT n FROM total) AS total",
            &[],
        )
        .await
        .unwrap();
    let (changed, total): (i64, i64) = (row.get(0), row.get(1));
    assert!(
        changed > 0 && total < ROWS,
        "{changed} rows changed, {total} rows left"
    );
}
