//! An idle server uses no CPU: sources that reached their end (a file read once, a file followed
//! with nothing new, a generator with a maximum) leave the engine waiting, not polling.

use std::time::Duration;

use eddy_sqllogictest::process_stats::cpu_time;
use eddy_sqllogictest::EddyProcess;

/// CPU the server may use while idle for [`IDLE_WINDOW`]: timers and housekeeping, far below
/// the whole core a spinning loop takes.
const IDLE_CPU_BUDGET: Duration = Duration::from_millis(150);
const IDLE_WINDOW: Duration = Duration::from_secs(3);

#[tokio::test]
async fn finished_sources_leave_the_server_idle() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let once = dir.path().join("once.jsonl");
    let followed = dir.path().join("followed.jsonl");
    std::fs::write(&once, "{\"id\": 1}").unwrap();
    std::fs::write(&followed, "{\"id\": 2}\n").unwrap();
    client
        .batch_execute(&format!(
            "CREATE SOURCE once (id BIGINT) WITH (connector = 'file', path = '{}');
             CREATE MATERIALIZED VIEW once_count AS SELECT count(*) AS n FROM once;
             CREATE SOURCE followed (id BIGINT)
               WITH (connector = 'file', path = '{}', follow = 'true');
             CREATE MATERIALIZED VIEW followed_count AS SELECT count(*) AS n FROM followed;
             CREATE SOURCE bid (auction BIGINT, price BIGINT, date_time TIMESTAMP)
               WITH (connector = 'nexmark', nexmark.table.type = 'bid',
                     nexmark.max.events = '10');
             CREATE MATERIALIZED VIEW bid_count AS SELECT count(*) AS n FROM bid;
             FLUSH;",
            once.display(),
            followed.display()
        ))
        .await
        .unwrap();
    // The generator's 10 events are people, auctions and bids: some bids.
    for (view, rows) in [
        ("once_count", 1..=1),
        ("followed_count", 1..=1),
        ("bid_count", 1..=10),
    ] {
        let row = client
            .query_one(&format!("SELECT n FROM {view}"), &[])
            .await
            .unwrap();
        assert!(rows.contains(&row.get::<_, i64>(0)), "{view}");
    }
    // Let the epoch after the last rows commit, then watch the server do nothing.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pid = eddy.pid().unwrap();
    let before = cpu_time(pid).unwrap();
    tokio::time::sleep(IDLE_WINDOW).await;
    let used = cpu_time(pid).unwrap() - before;
    println!("idle for {IDLE_WINDOW:?}: {used:?} of CPU");
    assert!(
        used <= IDLE_CPU_BUDGET,
        "an idle server used {used:?} of CPU in {IDLE_WINDOW:?}"
    );
}
