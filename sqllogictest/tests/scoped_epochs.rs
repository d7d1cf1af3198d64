//! Scoped epochs: an INSERT into a table that no busy view reads is committed in an epoch of
//! its own scope (`eddy_epochs_scoped_total` grows), without a barrier through the view a
//! followed file keeps busy; and nothing is lost or counted twice when the server is killed
//! (-9) in the middle: after a restart the busy view equals its answer over every line of the
//! file (its state and its reader's position were committed together, in epochs of their
//! own), the small table's view holds the acknowledged rows, and a view joining the busy
//! source with a table that statements change (one component: their epochs reach it) equals
//! its answer too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy_sqllogictest::rows::text_rows;
use eddy_sqllogictest::{free_port, EddyProcess};
use tokio_postgres::Client;

/// Keys of the file's lines (line `i` has key `i % KEYS` and value `i`).
const KEYS: u64 = 97;
/// Keys the dimension table labels (statements insert more while the file is read).
const FIRST_LABELS: u64 = 10;

/// Appends lines `from..to` to the file, whole lines at a time.
fn append_lines(path: &Path, from: u64, to: u64) {
    let mut text = String::new();
    for i in from..to {
        text.push_str(&format!("{{\"k\": {}, \"v\": {i}}}\n", i % KEYS));
    }
    eddy_sqllogictest::files::append(path, &text);
}

/// Keeps appending lines until told to stop; answers how many the file has.
fn keep_appending(path: PathBuf, mut lines: u64, stop: Arc<AtomicBool>) -> u64 {
    while !stop.load(Ordering::Relaxed) {
        append_lines(&path, lines, lines + 5_000);
        lines += 5_000;
        std::thread::sleep(Duration::from_millis(25));
    }
    lines
}

async fn scrape(metrics_port: u16, name: &str) -> f64 {
    let url = format!("http://127.0.0.1:{metrics_port}/metrics");
    let body = tokio::task::spawn_blocking(move || {
        ureq::get(&url)
            .call()
            .expect("scrape")
            .body_mut()
            .read_to_string()
            .unwrap()
    })
    .await
    .unwrap();
    body.lines()
        .find(|line| line.starts_with(name))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in\n{body}"))
}

/// Inserts rows `from..` into `small` one statement at a time (and a label every tenth)
/// until an INSERT fails: the ids acknowledged and the one in flight.
async fn insert_until_error(client: Client, from: i64) -> (Vec<i64>, Option<i64>) {
    let mut acked = Vec::new();
    for id in from.. {
        let mut sql = format!("INSERT INTO small VALUES ({id}, {});", id * 3);
        if id % 10 == 0 {
            let label = FIRST_LABELS as i64 + id / 10;
            sql.push_str(&format!("INSERT INTO labels VALUES ({label}, 'k{label}');"));
        }
        // One Query message, one implicit block: both rows or neither.
        if client.batch_execute(&sql).await.is_err() {
            return (acked, Some(id));
        }
        acked.push(id);
    }
    unreachable!()
}

/// The busy view's answer over lines `0..lines`: count and sum of values per key.
fn per_key(lines: u64) -> Vec<Vec<String>> {
    let mut sums: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for i in 0..lines {
        let entry = sums.entry(i % KEYS).or_default();
        entry.0 += 1;
        entry.1 += i;
    }
    let mut rows: Vec<Vec<String>> = sums
        .into_iter()
        .map(|(k, (n, s))| vec![k.to_string(), n.to_string(), s.to_string()])
        .collect();
    rows.sort();
    rows
}

async fn sorted(client: &Client, sql: &str) -> Vec<Vec<String>> {
    let mut rows = text_rows(client, sql).await;
    rows.sort();
    rows
}

#[tokio::test(flavor = "multi_thread")]
async fn statements_beside_a_busy_source_commit_alone_and_survive_kill9() {
    let metrics_port = free_port().unwrap();
    let mut eddy = EddyProcess::start_fresh_with(|config| {
        config.extra_args = vec![
            "--metrics-listen".into(),
            format!("127.0.0.1:{metrics_port}"),
        ];
    })
    .await
    .unwrap();
    let path = eddy.data_dir().parent().unwrap().join("events.jsonl");
    append_lines(&path, 0, 50_000);
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE SOURCE events (k BIGINT, v BIGINT)
               WITH (connector = 'file', path = '{}', follow = 'true') FORMAT PLAIN ENCODE JSON;
             CREATE MATERIALIZED VIEW per_key AS
               SELECT k, count(*) AS n, sum(v) AS s FROM events GROUP BY k;
             CREATE TABLE labels (k BIGINT PRIMARY KEY, label VARCHAR);
             INSERT INTO labels SELECT k, 'k' || k FROM generate_series(0, {}) AS g(k);
             CREATE MATERIALIZED VIEW labelled AS
               SELECT l.label, count(*) AS n FROM events e JOIN labels l ON e.k = l.k
               GROUP BY l.label;
             CREATE TABLE small (id BIGINT PRIMARY KEY, v BIGINT);
             CREATE MATERIALIZED VIEW small_total AS
               SELECT count(*) AS n, sum(v) AS s FROM small;",
            path.display(),
            FIRST_LABELS - 1
        ))
        .await
        .unwrap();

    // The file grows while statements come: the source's views always have work.
    let stop = Arc::new(AtomicBool::new(false));
    let appender = std::thread::spawn({
        let (path, stop) = (path.clone(), stop.clone());
        move || keep_appending(path, 50_000, stop)
    });
    let scoped_before = scrape(metrics_port, "eddy_epochs_scoped_total").await;
    let inserter = tokio::spawn(insert_until_error(client, 1));
    let deadline = Instant::now() + Duration::from_secs(60);
    while scrape(metrics_port, "eddy_epochs_scoped_total").await < scoped_before + 20.0 {
        assert!(
            Instant::now() < deadline,
            "no epochs scoped to the statements in a minute\n{}",
            eddy.log_tail(20)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eddy.kill9().unwrap();
    let (acked, in_flight) = inserter.await.unwrap();
    stop.store(true, Ordering::Relaxed);
    let lines = appender.join().unwrap();
    assert!(!acked.is_empty());

    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        sorted(&client, "SELECT k, n, s FROM per_key").await,
        per_key(lines),
        "the busy view over {lines} lines"
    );
    // The INSERT in flight at the kill is wholly in or wholly out.
    let ids = sorted(&client, "SELECT id FROM small").await.len() as i64;
    let expected = |ids: &[i64]| {
        let sum: i64 = ids.iter().map(|id| id * 3).sum();
        vec![vec![ids.len().to_string(), sum.to_string()]]
    };
    let mut with = acked.clone();
    with.extend(in_flight);
    let total = sorted(&client, "SELECT n, s FROM small_total").await;
    assert!(
        total == expected(&acked) || total == expected(&with),
        "small_total {total:?} with {ids} rows; {} acknowledged",
        acked.len()
    );
    // The view over the busy source and a changed table, against its query over what is
    // stored: the labels the table has, and the file's lines per key.
    let labels: Vec<u64> = text_rows(&client, "SELECT k FROM labels")
        .await
        .into_iter()
        .map(|row| row[0].parse().unwrap())
        .collect();
    let counts: BTreeMap<String, String> = per_key(lines)
        .into_iter()
        .map(|row| (row[0].clone(), row[1].clone()))
        .collect();
    let mut expected_labelled: Vec<Vec<String>> = labels
        .iter()
        .filter_map(|k| Some(vec![format!("k{k}"), counts.get(&k.to_string())?.clone()]))
        .collect();
    expected_labelled.sort();
    assert_eq!(
        sorted(&client, "SELECT label, n FROM labelled").await,
        expected_labelled
    );
}
