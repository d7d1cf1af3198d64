//! `pg_stat_activity` and `pg_cancel_backend` over real connections: one connection runs a
//! statement that would take minutes, another finds it (active, with its query) and cancels it;
//! the first gets SQLSTATE 57014 and stays usable.

use std::time::{Duration, Instant};

use eddy_sqllogictest::EddyProcess;

const ENDLESS: &str =
    "SELECT count(*) FROM generate_series(1, 100000000000) AS t(x) WHERE x % 7 = 3";

#[tokio::test]
async fn a_running_statement_is_listed_and_cancelled() {
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (runner, _a) = eddy.connect().await.expect("connect the runner");
    let (watcher, _b) = eddy.connect().await.expect("connect the watcher");

    let running = tokio::spawn(async move {
        let result = runner.simple_query(ENDLESS).await;
        (runner, result)
    });
    // Wait until the statement shows as active in the other connection's view.
    let started = Instant::now();
    let pid: i32 = loop {
        let rows = watcher
            .query(
                "SELECT pid, state, query FROM pg_stat_activity WHERE query LIKE '%generate_series%' AND state = 'active' AND query NOT LIKE '%pg_stat_activity%'",
                &[],
            )
            .await
            .expect("read pg_stat_activity");
        if let Some(row) = rows.first() {
            assert_eq!(row.get::<_, String>("query"), ENDLESS);
            break row.get("pid");
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "never listed as active"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mine: i32 = watcher
        .query_one(
            "SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT pid FROM pg_stat_activity%'",
            &[],
        )
        .await
        .expect("the watcher lists itself")
        .get(0);
    assert_ne!(mine, pid);

    let cancelled: bool = watcher
        .query_one("SELECT pg_cancel_backend($1::int)", &[&pid])
        .await
        .expect("pg_cancel_backend")
        .get(0);
    assert!(cancelled);
    let (runner, result) = tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("the statement stops once cancelled")
        .expect("join");
    let error = result.expect_err("a cancelled statement fails");
    assert_eq!(error.code().map(|c| c.code()), Some("57014"), "{error}");

    // The cancelled connection goes on, idle with its last query.
    let one: i64 = runner
        .query_one("SELECT CAST(1 AS BIGINT)", &[])
        .await
        .expect("usable after the cancel")
        .get(0);
    assert_eq!(one, 1);
    let state: String = watcher
        .query_one("SELECT state FROM pg_stat_activity WHERE pid = $1", &[&pid])
        .await
        .expect("state after")
        .get(0);
    assert_eq!(state, "idle");
}
