//! Watermark alignment: a view reading two sources stops reading the one whose watermark runs
//! more than its `watermark.alignment.max.drift` ahead of the other's, says so in
//! `eddy_catalog.source_progress`, and reads on once the other catches up; a view reading the
//! fast source alone is not held, nor one whose other source never has a row (past its idle
//! timeout). A bad drift is refused at CREATE SOURCE.

use std::path::Path;
use std::time::{Duration, Instant};

use eddy_sqllogictest::rows::text_rows;
use eddy_sqllogictest::EddyProcess;
use tokio_postgres::Client;

/// Lines `from..to` of one row every 100 ms of event time from midnight.
fn append_lines(path: &Path, from: u64, to: u64) {
    let mut text = String::new();
    for i in from..to {
        let (seconds, tenths) = (i / 10, i % 10);
        text.push_str(&format!(
            "{{\"k\": {i}, \"ts\": \"2026-01-01 {:02}:{:02}:{:02}.{tenths}\"}}\n",
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60
        ));
    }
    eddy_sqllogictest::files::append(path, &text);
}

/// A source following the file at `path` (rows `k`, `ts` with a 1 s watermark delay), with
/// one more option.
fn followed_source(name: &str, path: &Path, option: &str) -> String {
    format!(
        "CREATE SOURCE {name} (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
           WITH (connector = 'file', path = '{}', follow = 'true', {option})
           FORMAT PLAIN ENCODE JSON;",
        path.display()
    )
}

async fn rows_of(client: &Client, view: &str) -> i64 {
    let rows = text_rows(client, &format!("SELECT count(*) FROM {view}")).await;
    rows[0][0].parse().unwrap()
}

/// Polls `check` every 50 ms for up to 30 s.
async fn until<F: std::future::Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Lines of the fast source: 100,000 rows over about 2 h 47 min of event time.
const FAST_LINES: u64 = 100_000;

#[tokio::test]
async fn a_source_ahead_of_the_other_by_more_than_its_drift_waits_for_it() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (fast, slow) = (dir.path().join("fast.jsonl"), dir.path().join("slow.jsonl"));
    append_lines(&fast, 0, FAST_LINES);
    // The slow source: 10 s of event time, then nothing until the test writes more.
    append_lines(&slow, 0, 100);
    let (client, _driver) = eddy.connect().await.unwrap();

    let bad = client
        .batch_execute(&format!(
            "CREATE SOURCE wrong (k BIGINT, ts TIMESTAMP) WITH (connector = 'file', path = '{}',
               watermark.alignment.max.drift = 'a while') FORMAT PLAIN ENCODE JSON",
            fast.display()
        ))
        .await
        .unwrap_err();
    let bad = bad.as_db_error().expect("a server error");
    assert_eq!(bad.code().code(), "22023", "{bad:?}");
    assert!(
        bad.message()
            .contains("watermark.alignment.max.drift = 'a while' is not a duration"),
        "{bad:?}"
    );

    client
        .batch_execute(&format!(
            "{}{}
             CREATE MATERIALIZED VIEW fast_alone AS SELECT k, ts FROM fast;
             CREATE MATERIALIZED VIEW both_sources AS
               SELECT 'fast' AS source, k, ts FROM fast UNION ALL SELECT 'slow', k, ts FROM slow;",
            followed_source("fast", &fast, "watermark.alignment.max.drift = '30s'"),
            followed_source("slow", &slow, "watermark.idle.timeout = '1h'")
        ))
        .await
        .unwrap();

    // The view reading the fast source alone reads all of it.
    until("fast_alone to read its file", || async {
        rows_of(&client, "fast_alone").await == FAST_LINES as i64
    })
    .await;
    // The view reading both holds the fast source once it is 30 s ahead of the slow one.
    let held = "SELECT last_error FROM eddy_catalog.source_progress \
                WHERE target = 'both_sources/fast' AND last_error LIKE 'not read: its watermark%'";
    until("the fast source to be held", || async {
        !text_rows(&client, held).await.is_empty()
    })
    .await;
    let reason = text_rows(&client, held).await.remove(0).remove(0);
    assert!(
        reason.contains("ahead of source \"slow\"'s")
            && reason.contains("watermark.alignment.max.drift = 30.0 s"),
        "{reason}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let read = text_rows(
        &client,
        "SELECT count(*), max(ts) FROM both_sources WHERE source = 'fast'",
    )
    .await;
    let count: i64 = read[0][0].parse().unwrap();
    assert!(
        count < FAST_LINES as i64 / 2,
        "the held source was read on: {read:?}"
    );
    // Rows taken before the hold came in whole batches, but none far past the drift.
    assert!(read[0][1].as_str() < "2026-01-01 00:20:00", "{read:?}");

    // A source with no row at all holds the fast one back only for its idle timeout.
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    client
        .batch_execute(&format!(
            "{}
             CREATE MATERIALIZED VIEW with_empty AS
               SELECT k, ts FROM fast UNION ALL SELECT k, ts FROM empty;",
            followed_source("empty", &empty, "watermark.idle.timeout = '1s'")
        ))
        .await
        .unwrap();
    until("with_empty to read the fast file", || async {
        rows_of(&client, "with_empty").await == FAST_LINES as i64
    })
    .await;

    // The slow source catches up: the fast one is read to its end.
    append_lines(&slow, 100, FAST_LINES);
    until("both_sources to read both files", || async {
        rows_of(&client, "both_sources").await == 2 * FAST_LINES as i64
    })
    .await;
    assert!(text_rows(&client, held).await.is_empty());
}
