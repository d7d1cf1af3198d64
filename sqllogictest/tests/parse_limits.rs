//! Parsing is bounded in time and depth for any text: a malformed nested CASE took 13 s at 24
//! levels (doubling with each) and held up every other client; now it is refused at once with
//! 54001, honours statement_timeout (57014), and never keeps another connection's `SELECT 1`
//! waiting. Nesting is refused by its depth with the documented limit (1,000 levels), and a
//! well-formed CASE nested deeper than sqlparser's own default (about 48) works.

use std::time::{Duration, Instant};

use eddy_sqllogictest::EddyProcess;

/// `SELECT CASE WHEN true THEN` × n, then `CASE true THEN 1 END` × (n + 1): never valid.
fn malformed_case(n: usize) -> String {
    format!(
        "SELECT {}{}",
        "CASE WHEN true THEN ".repeat(n),
        "CASE true THEN 1 END ".repeat(n + 1)
    )
}

fn nested_case(n: usize) -> String {
    format!(
        "SELECT {}1{}",
        "CASE WHEN true THEN ".repeat(n),
        " END".repeat(n)
    )
}

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

#[tokio::test]
async fn malformed_nesting_is_refused_at_once_without_holding_anyone_up() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    let (other, _other_driver) = eddy.connect().await.unwrap();
    // 3,000 nested CASEs with one token replaced: over 15 minutes before.
    let replaced = nested_case(3_000).replacen("THEN", "ELSE", 1);
    for (what, sql) in [
        ("24 malformed levels", malformed_case(24)),
        ("40 malformed levels", malformed_case(40)),
        ("3,000 levels, one token replaced", replaced),
    ] {
        let started = Instant::now();
        let (refused, probe) = tokio::join!(code_of(&client, &sql), async {
            // Another client meanwhile.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let asked = Instant::now();
            other.simple_query("SELECT 1").await.unwrap();
            asked.elapsed()
        });
        let took = started.elapsed();
        assert_eq!(refused.as_deref(), Some("54001"), "{what}");
        assert!(
            took < Duration::from_secs(2),
            "{what}: refused after {took:?}"
        );
        assert!(
            probe < Duration::from_secs(1),
            "{what}: another client's SELECT 1 waited {probe:?}"
        );
    }
}

#[tokio::test]
async fn nesting_is_refused_by_depth_with_the_documented_limit() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    // Within the limit: answered, where 48 levels used to be a misleading 42601.
    for depth in [48, 200] {
        let row = client
            .query_one(
                &format!("SELECT ({})::BIGINT", &nested_case(depth)[7..]),
                &[],
            )
            .await
            .unwrap_or_else(|e| panic!("{depth} nested CASEs: {e}"));
        assert_eq!(row.get::<_, i64>(0), 1);
    }
    let parens = format!("SELECT {}1{}::BIGINT", "(".repeat(900), ")".repeat(900));
    let row = client.query_one(&parens, &[]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), 1);
    // Past it: 54001, saying it is the nesting and what the limit is.
    for sql in [
        nested_case(1_001),
        format!("SELECT {}1{}", "(".repeat(1_001), ")".repeat(1_001)),
    ] {
        let error = client.simple_query(&sql).await.unwrap_err();
        let db = error.as_db_error().expect("a server error");
        assert_eq!(db.code().code(), "54001", "{}", db.message());
        assert!(
            db.message().contains("nest") && db.message().contains("limit is 1000"),
            "{}",
            db.message()
        );
    }
}

#[tokio::test]
async fn statement_timeout_stops_a_long_parse() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    // Many plain tokens first give the parse a large budget; the malformed nesting after
    // them would spend all of it, for seconds.
    let padding = vec!["1"; 100_000].join(",");
    let sql = format!(
        "SELECT {padding}, {}",
        &malformed_case(60)["SELECT ".len()..]
    );
    client
        .batch_execute("SET statement_timeout = '300ms'")
        .await
        .unwrap();
    let started = Instant::now();
    let error = client.simple_query(&sql).await.unwrap_err();
    let took = started.elapsed();
    let db = error.as_db_error().expect("a server error");
    assert_eq!(db.code().code(), "57014", "{}", db.message());
    assert!(took < Duration::from_secs(3), "stopped after {took:?}");
    client
        .batch_execute("RESET statement_timeout")
        .await
        .unwrap();
    let row = client
        .query_one("SELECT 41::BIGINT + 1", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 42);
}

/// Statements nested in statements (`CASE ... THEN <statement>`, found by the fuzz soak) are
/// parsed by sqlparser one frame of tens of kilobytes per level: 850 of them overflowed a
/// worker's stack and killed the server. Now a refusal, and the server goes on.
#[tokio::test]
async fn deeply_nested_statements_are_refused_not_fatal() {
    let mut eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    for depth in [850, 990] {
        let sql = format!(
            "{}SELECT 1{}",
            "CASE 1 WHEN 1 THEN ".repeat(depth),
            " ELSE 0 END".repeat(depth - 1)
        );
        let refused = code_of(&client, &sql).await;
        assert!(
            refused
                .as_deref()
                .is_some_and(|c| c.starts_with("42") || c == "54001"),
            "{depth} nested statements: {refused:?}"
        );
        let row = client
            .query_one("SELECT 41::BIGINT + 1", &[])
            .await
            .unwrap();
        assert_eq!(row.get::<_, i64>(0), 42);
    }
    assert!(eddy.is_running(), "{}", eddy.log_tail(10));
}

/// Queries as deep as the limits allow are planned; deeper ones are refused, never fatal and
/// never minutes of planning: 1,000 `UNION ALL`s killed the server (a stack overflow in
/// planning), derived tables nested 600 deep too, and scalar subqueries nested 20 deep took
/// more than a minute to plan (each level doubles it).
#[tokio::test]
async fn deep_queries_are_planned_or_refused() {
    let mut eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    let unions = |n: usize| vec!["SELECT 1::BIGINT AS one"; n].join(" UNION ALL ");
    let rows = client.query(&unions(1_000), &[]).await.unwrap();
    assert_eq!(rows.len(), 1_000);
    let mut derived = "SELECT 1::BIGINT AS a".to_string();
    for i in 0..990 {
        derived = format!("SELECT a FROM ({derived}) t{i}");
    }
    let row = client.query_one(&derived, &[]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), 1);
    let scalar = |n: usize| format!("SELECT {}1::BIGINT{}", "(SELECT ".repeat(n), ")".repeat(n));
    let row = client.query_one(&scalar(10), &[]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), 1);
    for (what, sql) in [
        ("1,002 UNION ALLs", unions(1_002)),
        ("11 nested scalar subqueries", scalar(11)),
        ("20 nested scalar subqueries", scalar(20)),
    ] {
        let started = Instant::now();
        assert_eq!(
            code_of(&client, &sql).await.as_deref(),
            Some("54001"),
            "{what}"
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{what}");
    }
    assert!(eddy.is_running(), "{}", eddy.log_tail(10));
}
