//! Statements that used to take the server down — huge allocations by a function's arguments,
//! a NUMERIC the wire encoding cannot carry, megabytes of `1+1+...`, queries over their memory
//! — now get a clear error (54000, 54001, 53200, 22003) and the server goes on; results stream
//! to the client instead of being built whole first.

use std::time::Duration;

use eddy_sqllogictest::EddyProcess;
use tokio_postgres::error::SqlState;

/// Runs `sql` and returns the SQLSTATE it failed with (`None`: it succeeded).
async fn code_of(client: &tokio_postgres::Client, sql: &str) -> Option<String> {
    match client.simple_query(sql).await {
        Ok(_) => None,
        Err(error) => Some(
            error
                .code()
                .map(|c| c.code().to_string())
                .unwrap_or_else(|| format!("no SQLSTATE: {error}")),
        ),
    }
}

async fn still_answers(client: &tokio_postgres::Client) {
    let row = client
        .query_one("SELECT 41::BIGINT + 1", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 42);
}

fn assert_no_panic(eddy: &EddyProcess) {
    let log = std::fs::read_to_string(eddy.log_file()).unwrap_or_default();
    assert!(!log.contains("panicked"), "{}", eddy.log_tail(40));
}

#[tokio::test]
async fn functions_that_allocate_by_their_arguments_are_capped() {
    let mut eddy = EddyProcess::start_fresh_with(|config| {
        config.extra_args = vec!["--query-memory-limit".into(), "128MiB".into()];
    })
    .await
    .unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    for sql in [
        "SELECT array_repeat(1, 1000000000)",
        "SELECT length(repeat('x', 1000000000))",
        "SELECT length(lpad('x', 1000000000))",
        "SELECT length(rpad('x', 1000000000, 'yz'))",
        "SELECT cardinality(range(0, 10000000000))",
        "SELECT cardinality(generate_series(1, 10000000000))",
        "SELECT array_resize([1], 1000000000)",
        "SELECT length(repeat('x', 50000000) || repeat('y', 50000000) || repeat('z', 50000000))",
        "SELECT length(concat(repeat('x', 50000000), repeat('y', 50000000), repeat('z', 50000000)))",
        // An IN list's constant items are evaluated for no rows: still one value each.
        "SELECT 1 IN (cardinality(array_repeat(1, 1000000000)), 5)",
        "SELECT 1 WHERE 'a' IN (repeat('x', 1000000000))",
        // Each row's text is a few times its template: the template is bounded.
        "SELECT to_char(TIMESTAMP '2026-01-01 00:00:00', repeat('Month', 1000))",
    ] {
        assert_eq!(code_of(&client, sql).await.as_deref(), Some("54000"), "{sql}");
        still_answers(&client).await;
    }
    // The engine evaluates an UPDATE's or DELETE's WHERE itself: capped there too.
    client
        .batch_execute("CREATE TABLE capped (x BIGINT); INSERT INTO capped VALUES (1)")
        .await
        .unwrap();
    for sql in [
        "UPDATE capped SET x = 2 WHERE x IN (cardinality(array_repeat(1, 1000000000)), 5)",
        "DELETE FROM capped WHERE x = cardinality(array_repeat(1, 1000000000))",
    ] {
        assert_eq!(
            code_of(&client, sql).await.as_deref(),
            Some("54000"),
            "{sql}"
        );
        still_answers(&client).await;
    }
    // Below the limit they work as before, `||` with its NULL.
    let rows = client
        .query(
            "SELECT length(repeat('ab', 1000)), cardinality(array_repeat(0, 10))::BIGINT, \
             'a' || 'b', NULL || 'x', cardinality(range(0, 100))::BIGINT",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows[0].get::<_, i32>(0), 2000);
    assert_eq!(rows[0].get::<_, i64>(1), 10);
    assert_eq!(rows[0].get::<_, &str>(2), "ab");
    assert_eq!(rows[0].get::<_, Option<&str>>(3), None);
    assert_eq!(rows[0].get::<_, i64>(4), 100);
    assert!(eddy.is_running());
    assert_no_panic(&eddy);
}

#[tokio::test]
async fn a_query_over_its_memory_gets_53200() {
    let mut eddy = EddyProcess::start_fresh_with(|config| {
        config.extra_args = vec!["--query-memory-limit".into(), "32MiB".into()];
    })
    .await
    .unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    // A hash join's build side cannot spill.
    let join = "SELECT count(*) FROM generate_series(1, 5000000) a \
                JOIN generate_series(1, 5000000) b ON a = b";
    assert_eq!(code_of(&client, join).await.as_deref(), Some("53200"));
    still_answers(&client).await;
    // Neither can the rows an INSERT ... SELECT collects.
    client
        .batch_execute("CREATE TABLE t (x BIGINT)")
        .await
        .unwrap();
    let insert = "INSERT INTO t SELECT value FROM generate_series(1, 20000000)";
    assert_eq!(code_of(&client, insert).await.as_deref(), Some("53200"));
    let rows = client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .unwrap();
    assert_eq!(rows.get::<_, i64>(0), 0);
    // A sort spills instead.
    let sorted = client
        .query_one(
            "SELECT count(*) FROM (SELECT value FROM generate_series(1, 3000000) ORDER BY value DESC)",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(sorted.get::<_, i64>(0), 3_000_000);
    // A SCROLL cursor keeps the rows it reads: past the limit, 53200, and the cursor's
    // connection goes on; a count past any position is the end, not an overflow.
    client.batch_execute("BEGIN").await.unwrap();
    client
        .batch_execute(
            "DECLARE big SCROLL CURSOR FOR SELECT value FROM generate_series(1, 20000000)",
        )
        .await
        .unwrap();
    assert_eq!(
        code_of(&client, "FETCH LAST FROM big").await.as_deref(),
        Some("53200")
    );
    client.batch_execute("ROLLBACK").await.unwrap();
    client.batch_execute("BEGIN").await.unwrap();
    client
        .batch_execute(
            "DECLARE small SCROLL CURSOR FOR SELECT value FROM generate_series(1, 3); \
             FETCH 2 FROM small",
        )
        .await
        .unwrap();
    let past = client
        .simple_query("FETCH RELATIVE 9223372036854775807 FROM small")
        .await
        .unwrap();
    assert!(!past
        .iter()
        .any(|m| matches!(m, tokio_postgres::SimpleQueryMessage::Row(_))));
    client.batch_execute("ROLLBACK").await.unwrap();
    still_answers(&client).await;
    assert!(eddy.is_running());
    assert_no_panic(&eddy);
}

#[tokio::test]
async fn statements_too_long_or_too_deep_get_54001() {
    let mut eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    let one_mib_sum = format!("SELECT 1{}", "+1".repeat(512 << 10));
    let nested = format!("SELECT {}1{}", "(".repeat(100_000), ")".repeat(100_000));
    let sixty_four_mib = format!("SELECT 1{}", "+1".repeat(32 << 20));
    for (what, sql) in [
        ("1 MiB of 1+1+...", one_mib_sum),
        ("100,000 nested parentheses", nested),
        ("64 MiB of 1+1+...", sixty_four_mib),
    ] {
        let error = client.simple_query(&sql).await.expect_err(what);
        assert_eq!(
            error.code(),
            Some(&SqlState::STATEMENT_TOO_COMPLEX),
            "{what}: {error}"
        );
        still_answers(&client).await;
    }
    // Deep but within the limit still works, in a query and in a view.
    let deep = format!("1{}", "+1".repeat(900));
    let row = client
        .query_one(&format!("SELECT ({deep})::BIGINT"), &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 901);
    // Not foldable: the view evaluates all 900 additions on every batch.
    let chain = format!("x{}", " + x".repeat(899));
    client
        .batch_execute(&format!(
            "CREATE TABLE n (x BIGINT); CREATE MATERIALIZED VIEW deep AS SELECT {chain} AS y FROM n;
             INSERT INTO n VALUES (1); FLUSH;"
        ))
        .await
        .unwrap();
    let row = client.query_one("SELECT y FROM deep", &[]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), 900);
    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute("INSERT INTO n VALUES (2); FLUSH")
        .await
        .unwrap();
    let rows = client
        .query("SELECT y FROM deep ORDER BY y", &[])
        .await
        .unwrap();
    let values: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(values, [900, 1800]);
    assert_no_panic(&eddy);
}

#[tokio::test]
async fn a_numeric_the_wire_cannot_carry_is_an_error_not_a_crash() {
    let mut eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    // Either the value or 22003: never a server that allocates until it dies.
    let outcome = client.simple_query("SELECT CAST(8e18 AS NUMERIC)").await;
    if let Err(error) = &outcome {
        assert_eq!(
            error.code(),
            Some(&SqlState::NUMERIC_VALUE_OUT_OF_RANGE),
            "{error}"
        );
    }
    still_answers(&client).await;
    client
        .batch_execute(
            "CREATE TABLE big (x NUMERIC); INSERT INTO big VALUES (CAST(8e18 AS NUMERIC))",
        )
        .await
        .unwrap();
    // Stored, then read after a restart: the same answer, and the server lives on.
    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    let outcome = client.simple_query("SELECT x FROM big").await;
    if let Err(error) = &outcome {
        assert_eq!(
            error.code(),
            Some(&SqlState::NUMERIC_VALUE_OUT_OF_RANGE),
            "{error}"
        );
    }
    still_answers(&client).await;
    let count = client
        .query_one("SELECT count(*) FROM big", &[])
        .await
        .unwrap();
    assert_eq!(count.get::<_, i64>(0), 1);
    assert!(eddy.is_running());
    assert_no_panic(&eddy);
}

/// The server's peak resident memory so far, in KiB.
fn peak_rss_kib(eddy: &EddyProcess) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", eddy.pid().unwrap())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn a_large_result_streams_to_the_client() {
    use futures::StreamExt;
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    still_answers(&client).await;
    let before = peak_rss_kib(&eddy);
    // 4 million rows of about 60 bytes: ~250 MB as Postgres text, more as encoded rows.
    let sql = "SELECT value, repeat('x', 50) AS pad FROM generate_series(1, 4000000)";
    let rows = client.query_raw(sql, Vec::<i64>::new()).await.unwrap();
    let mut rows = std::pin::pin!(rows);
    let mut count = 0u64;
    while let Some(row) = rows.next().await {
        row.unwrap();
        count += 1;
    }
    assert_eq!(count, 4_000_000);
    let growth_mib = peak_rss_kib(&eddy).saturating_sub(before) / 1024;
    assert!(
        growth_mib < 120,
        "the server's peak memory grew by {growth_mib} MiB for a streamed result"
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
}
