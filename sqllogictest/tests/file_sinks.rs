//! File sinks read back by a real reader (pyarrow): Parquet and JSON lines files equal what
//! was inserted, each row once, also across a kill -9 while files are written.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eddy_sqllogictest::EddyProcess;
use serde_json::Value;
use tokio_postgres::Client;

/// The rows of the files in `dir` (`parquet` or `jsonl`), read with pyarrow; `None` when
/// the Python clients are not installed (and not required).
fn read_files(dir: &Path, kind: &str) -> Option<Value> {
    let python = common::require(
        "the Python clients (pyarrow)",
        Some(common::clients_dir().join("python/bin/python")),
    )?;
    let output = Command::new(python)
        .arg(common::scripts_dir().join("read_sink_files.py"))
        .arg(dir)
        .arg(kind)
        .output()
        .expect("running python");
    assert!(
        output.status.success(),
        "reading {} with pyarrow: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    Some(serde_json::from_slice(&output.stdout).unwrap())
}

/// The ids of the rows read back, counted.
fn id_counts(read: &Value) -> BTreeMap<i64, usize> {
    let mut counts = BTreeMap::new();
    for row in read["rows"].as_array().unwrap() {
        *counts.entry(row["id"].as_i64().unwrap()).or_default() += 1;
    }
    counts
}

async fn wait_delivered(client: &Client, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let behind: i64 = client
            .query_one(
                "SELECT epochs_behind FROM eddy_catalog.sinks WHERE name = $1",
                &[&name],
            )
            .await
            .unwrap()
            .get(0);
        if behind == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "sink {name} still {behind} epochs behind"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn parquet_and_json_files_hold_each_row_once() {
    let files = tempfile::tempdir().unwrap();
    let (parquet_dir, json_dir) = (files.path().join("pq"), files.path().join("js"));
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE t (id BIGINT, name VARCHAR, amount NUMERIC(10,2), at TIMESTAMP) APPEND ONLY;
             INSERT INTO t VALUES (1, 'a', 1.50, '2026-03-01 12:00:00'), (2, NULL, NULL, NULL);
             CREATE SINK pq FROM t WITH (connector = 'file', path = '{}', file.interval = '0s')
               FORMAT PLAIN ENCODE PARQUET;
             CREATE SINK js FROM t WITH (connector = 'file', path = '{}', file.interval = '0s')
               FORMAT PLAIN ENCODE JSON;
             INSERT INTO t SELECT value, 'n' || value, value * 0.25, NULL FROM generate_series(3, 500);
             INSERT INTO t VALUES (501, 'last', 9.99, '2026-03-02 00:00:00.5');
             FLUSH;",
            parquet_dir.display(),
            json_dir.display()
        ))
        .await
        .unwrap();
    wait_delivered(&client, "pq").await;
    wait_delivered(&client, "js").await;
    let expected: BTreeMap<i64, usize> = (1..=501).map(|id| (id, 1)).collect();
    let Some(parquet) = read_files(&parquet_dir, "parquet") else {
        return;
    };
    assert_eq!(id_counts(&parquet), expected);
    assert_eq!(parquet["temporary"], 0);
    let rows = parquet["rows"].as_array().unwrap();
    let first = rows.iter().find(|r| r["id"] == 1).unwrap();
    assert_eq!(first["name"], "a");
    assert_eq!(first["amount"], "1.50");
    assert_eq!(first["at"], "2026-03-01 12:00:00");
    let json = read_files(&json_dir, "jsonl").unwrap();
    assert_eq!(id_counts(&json), expected);
    let last = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == 501)
        .unwrap();
    // pyarrow reads the ISO text as a timestamp, or keeps it as text: either way, the value.
    let at = last["at"].as_str().unwrap().replace('T', " ");
    assert!(at.starts_with("2026-03-02 00:00:00.5"), "{at}");

    for (sql, code) in [
        ("CREATE SINK u FROM t WITH (connector = 'file', path = '/tmp/x') FORMAT UPSERT ENCODE JSON", "0A000"),
        ("CREATE SINK u FROM t WITH (connector = 'file') FORMAT PLAIN ENCODE PARQUET", "22023"),
        ("CREATE SINK u FROM t WITH (connector = 'file', path = '/tmp/x', file.interval = 'soon') FORMAT PLAIN ENCODE PARQUET", "22023"),
        ("CREATE SINK u FROM t WITH (connector = 'kafka', topic = 'x', properties.bootstrap.server = 'h:1') FORMAT PLAIN ENCODE PARQUET", "0A000"),
    ] {
        let error = client.batch_execute(sql).await.unwrap_err();
        assert_eq!(error.code().unwrap().code(), code, "{sql}: {error}");
    }
}

#[tokio::test]
async fn kill9_while_writing_files_duplicates_no_row() {
    let files = tempfile::tempdir().unwrap();
    let dir = files.path().join("out");
    let mut eddy = EddyProcess::start_fresh_with(|c| c.checkpoint_interval = Some("100ms".into()))
        .await
        .unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE t (id BIGINT, pad VARCHAR) APPEND ONLY;
             CREATE SINK out FROM t WITH (connector = 'file', path = '{}', file.interval = '0s')
               FORMAT PLAIN ENCODE PARQUET;",
            dir.display()
        ))
        .await
        .unwrap();
    let acked = Arc::new(Mutex::new(Vec::<i64>::new()));
    let writer = {
        let acked = acked.clone();
        tokio::spawn(async move {
            for batch in 0i64.. {
                let (from, to) = (batch * 300 + 1, batch * 300 + 300);
                let sql = format!(
                    "INSERT INTO t SELECT value, repeat('p', 100) FROM generate_series({from}, {to})"
                );
                if client.batch_execute(&sql).await.is_err() {
                    return;
                }
                acked.lock().unwrap().extend(from..=to);
            }
        })
    };
    let started = Instant::now();
    while acked.lock().unwrap().len() < 15_000 && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eddy.kill9().unwrap();
    writer.await.unwrap();
    let acked = acked.lock().unwrap().clone();
    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    wait_delivered(&client, "out").await;
    let Some(read) = read_files(&dir, "parquet") else {
        return;
    };
    let counts = id_counts(&read);
    let doubled: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubled.is_empty(), "rows written twice: {doubled:?}");
    let missing: Vec<_> = acked.iter().filter(|id| !counts.contains_key(id)).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged rows missing",
        missing.len()
    );
    assert!(read["files"].as_u64().unwrap() > 1);
}
