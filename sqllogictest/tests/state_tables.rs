//! Operator state in state tables behind a 4 KiB cache: a join whose state is far larger than
//! the cache answers like the batch query, before and after a kill -9; its state tables show
//! in `eddy_catalog.state_tables` (rows in the store, misses, evictions) and in /metrics; a
//! restart loads no state (no group cached until rows arrive).

use eddy_sqllogictest::rows::text_rows;
use eddy_sqllogictest::{free_port, EddyProcess};
use tokio_postgres::Client;

const VIEW: &str =
    "SELECT o.id, c.name, o.amount FROM orders o JOIN customers c ON o.customer = c.id";

/// The view's rows against its query run in batch over the tables.
async fn check_view(client: &Client) {
    let view = text_rows(client, "SELECT * FROM order_names ORDER BY id").await;
    let batch = text_rows(client, &format!("{VIEW} ORDER BY o.id")).await;
    assert!(!view.is_empty());
    assert_eq!(view, batch);
}

/// `eddy_catalog.state_tables` of the view: operator → (rows, cached groups, misses, evictions).
async fn state_tables(client: &Client) -> Vec<(String, i64, i64, i64, i64)> {
    text_rows(
        client,
        "SELECT operator, rows, cached_groups, misses, evictions FROM eddy_catalog.state_tables \
         WHERE view = 'order_names' ORDER BY operator",
    )
    .await
    .into_iter()
    .map(|r| {
        let n = |i: usize| r[i].parse::<i64>().unwrap();
        (r[0].clone(), n(1), n(2), n(3), n(4))
    })
    .collect()
}

#[tokio::test]
async fn a_join_larger_than_its_cache_answers_like_the_batch_query_across_a_crash() {
    let metrics_port = free_port().unwrap();
    let mut eddy = EddyProcess::start_fresh_with(|config| {
        config.extra_args = vec![
            "--state-cache-mib".into(),
            "0.004".into(),
            "--metrics-listen".into(),
            format!("127.0.0.1:{metrics_port}"),
        ];
    })
    .await
    .unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(
            "CREATE TABLE customers (id INT PRIMARY KEY, name TEXT);
             CREATE TABLE orders (id INT PRIMARY KEY, customer INT, amount INT);
             CREATE MATERIALIZED VIEW order_names AS SELECT o.id, c.name, o.amount \
               FROM orders o JOIN customers c ON o.customer = c.id;
             INSERT INTO customers SELECT n, 'customer ' || n FROM generate_series(1, 200) AS t(n);",
        )
        .await
        .unwrap();
    for batch in 0..5 {
        client
            .batch_execute(&format!(
                "INSERT INTO orders SELECT n, n % 250, n * 3 FROM generate_series({}, {}) AS t(n)",
                batch * 200 + 1,
                batch * 200 + 200
            ))
            .await
            .unwrap();
    }
    // Updates and deletes on both sides reach rows long evicted from the cache.
    client
        .batch_execute(
            "UPDATE customers SET name = 'renamed ' || id WHERE id % 7 = 0;
             DELETE FROM orders WHERE id % 11 = 0;
             DELETE FROM customers WHERE id % 13 = 0;",
        )
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    check_view(&client).await;
    let tables = state_tables(&client).await;
    assert_eq!(tables.len(), 2, "{tables:?}");
    let (left, right) = (&tables[0], &tables[1]);
    assert_eq!((left.0.as_str(), left.1), ("join left", 1000 - 90));
    assert_eq!((right.0.as_str(), right.1), ("join right", 200 - 15));
    assert!(
        left.3 > 0 && left.4 > 0,
        "the tiny cache never missed or evicted: {left:?}"
    );

    let scrape = || {
        let mut response = ureq::get(&format!("http://127.0.0.1:{metrics_port}/metrics"))
            .call()
            .expect("scrape");
        response.body_mut().read_to_string().unwrap()
    };
    let metrics = scrape();
    assert!(
        metrics.contains("eddy_view_state_store_rows{view=\"order_names\"} 1095"),
        "{metrics}"
    );
    assert!(
        metrics.contains("eddy_state_cache_limit_bytes 4194"),
        "{metrics}"
    );

    // A crash: the state comes back as counters only, and rows are read as keys need them.
    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    let tables = state_tables(&client).await;
    assert_eq!(
        tables.iter().map(|t| (t.1, t.2)).collect::<Vec<_>>(),
        [(910, 0), (185, 0)],
        "{tables:?}"
    );
    client
        .batch_execute(
            "UPDATE customers SET name = 'again ' || id WHERE id % 5 = 0;
             INSERT INTO orders SELECT n, n % 250, n + 1 FROM generate_series(1001, 1100) AS t(n);
             FLUSH;",
        )
        .await
        .unwrap();
    check_view(&client).await;
}

/// Eddy with a 4 KiB state cache: every state path misses and evicts.
async fn start_with_tiny_cache() -> EddyProcess {
    EddyProcess::start_fresh_with(|config| {
        config.extra_args = vec!["--state-cache-mib".into(), "0.004".into()];
    })
    .await
    .unwrap()
}

/// The event-time temporal join's view against its batch form over the versions' history:
/// the buys before the last round's (which the rates' watermark has not passed).
async fn check_rates(client: &Client, rounds: i64) {
    let view = text_rows(client, "SELECT id, rate FROM buys_at_rate ORDER BY id").await;
    let batch = text_rows(
        client,
        &format!(
            "SELECT id, rate FROM (SELECT b.id, b.ts, h.rate, ROW_NUMBER() OVER \
               (PARTITION BY b.id ORDER BY h.ts DESC) AS r \
             FROM buys b LEFT JOIN fx_history h ON b.cur = h.cur AND h.ts <= b.ts) t \
             WHERE r = 1 AND ts < TIMESTAMP '2026-01-01 00:00:00' + INTERVAL '1' SECOND * {} \
             ORDER BY id",
            (rounds - 1) * 10
        ),
    )
    .await;
    assert!(!view.is_empty());
    assert_eq!(view, batch);
}

#[tokio::test]
async fn an_event_time_temporal_join_larger_than_its_cache_answers_like_the_batch_query() {
    let mut eddy = start_with_tiny_cache().await;
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(
            "CREATE TABLE fx (cur INT PRIMARY KEY, rate BIGINT, ts TIMESTAMP,
               WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
             CREATE TABLE fx_history (cur INT, rate BIGINT, ts TIMESTAMP) APPEND ONLY;
             CREATE TABLE buys (id INT, cur INT, ts TIMESTAMP,
               WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY;
             CREATE MATERIALIZED VIEW buys_at_rate AS SELECT b.id, f.rate FROM buys b
               LEFT JOIN fx FOR SYSTEM_TIME AS OF b.ts f ON b.cur = f.cur;",
        )
        .await
        .unwrap();
    // Round r: a new version of every third currency at second 10r, then buys of every
    // currency (some with no version yet) spread over the round's next 9 seconds.
    let round = |r: i64| {
        let versions = format!(
            "SELECT n, {r} * 1000 + n, TIMESTAMP '2026-01-01 00:00:00' + INTERVAL '1' SECOND * \
             ({r} * 10) FROM generate_series(0, 59) AS t(n) WHERE (n + {r}) % 3 = 0"
        );
        format!(
            "INSERT INTO fx {versions}; INSERT INTO fx_history {versions};
             INSERT INTO buys SELECT {r} * 1000 + n, n % 70, TIMESTAMP '2026-01-01 00:00:00' + \
               INTERVAL '1' SECOND * ({r} * 10 + n % 9) FROM generate_series(0, 199) AS t(n);"
        )
    };
    for r in 0..8 {
        client.batch_execute(&round(r)).await.unwrap();
    }
    client.batch_execute("FLUSH").await.unwrap();
    check_rates(&client, 8).await;

    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    for r in 8..16 {
        client.batch_execute(&round(r)).await.unwrap();
    }
    client.batch_execute("FLUSH").await.unwrap();
    check_rates(&client, 16).await;
    let evicted = text_rows(
        &client,
        "SELECT side, rows_evicted FROM eddy_catalog.join_state WHERE view = 'buys_at_rate' \
         ORDER BY side",
    )
    .await;
    assert!(
        evicted.iter().all(|r| r[1].parse::<i64>().unwrap() > 0),
        "both sides evict: waiting buys once joined, versions no buy can need: {evicted:?}"
    );
}

/// The lookup view's rows as `(id, rate)` from the rates each buy found: buys `1..=200` saw all
/// of them, later buys none of those deleted before they came. A buy's currency is its id
/// modulo 120 up to id 400, modulo 100 after.
fn expected_lookups(
    rates: &[(i64, i64, bool)],
    buys: std::ops::RangeInclusive<i64>,
) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for id in buys {
        for &(cur, rate, deleted_before_201) in rates {
            let bought = if id <= 400 { id % 120 } else { id % 100 };
            if cur == bought && (id <= 200 || !deleted_before_201) {
                rows.push((id, rate));
            }
        }
    }
    rows.sort();
    rows.into_iter()
        .map(|(id, rate)| vec![id.to_string(), rate.to_string()])
        .collect()
}

#[tokio::test]
async fn a_lookup_joins_index_is_a_state_table_read_as_keys_need_it() {
    let mut eddy = start_with_tiny_cache().await;
    let (client, _driver) = eddy.connect().await.unwrap();
    // No primary key on the rates: the join indexes them by currency.
    client
        .batch_execute(
            "CREATE TABLE rates (cur INT, rate INT);
             INSERT INTO rates SELECT n % 100, n FROM generate_series(1, 300) AS t(n);
             CREATE TABLE buys (id INT, cur INT) APPEND ONLY;
             CREATE MATERIALIZED VIEW buy_rates AS SELECT b.id, r.rate FROM buys b \
               JOIN rates FOR SYSTEM_TIME AS OF PROCTIME() r ON b.cur = r.cur;
             INSERT INTO buys SELECT n, n % 120 FROM generate_series(1, 200) AS t(n);
             DELETE FROM rates WHERE rate % 7 = 0;
             INSERT INTO buys SELECT n, n % 120 FROM generate_series(201, 400) AS t(n);
             FLUSH;",
        )
        .await
        .unwrap();
    let mut rates: Vec<(i64, i64, bool)> = (1..=300).map(|n| (n % 100, n, n % 7 == 0)).collect();
    let view = "SELECT id, rate FROM buy_rates ORDER BY id, rate";
    assert_eq!(
        text_rows(&client, view).await,
        expected_lookups(&rates, 1..=400)
    );
    let index = "SELECT rows, cached_groups, misses FROM eddy_catalog.state_tables \
                 WHERE view = 'buy_rates' AND operator = 'lookup join index'";
    assert_eq!(text_rows(&client, index).await[0][0], "258");

    // A crash: nothing of the index is read back until buys look it up.
    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    assert_eq!(text_rows(&client, index).await, [["258", "0", "0"]]);
    client
        .batch_execute(
            "INSERT INTO rates VALUES (5, 1000);
             DELETE FROM rates WHERE rate = 106;
             INSERT INTO buys SELECT n, n % 100 FROM generate_series(401, 500) AS t(n);
             FLUSH;",
        )
        .await
        .unwrap();
    rates.retain(|&(_, rate, deleted)| rate != 106 && !deleted);
    rates.push((5, 1000, false));
    let mut expected = expected_lookups(
        &(1..=300)
            .map(|n| (n % 100, n, n % 7 == 0))
            .collect::<Vec<_>>(),
        1..=400,
    );
    expected.extend(expected_lookups(&rates, 401..=500));
    expected.sort_by_key(|r| (r[0].parse::<i64>().unwrap(), r[1].parse::<i64>().unwrap()));
    assert_eq!(text_rows(&client, view).await, expected);
    let after = text_rows(&client, index).await;
    assert_eq!(after[0][0], "258", "{after:?}");
    assert!(
        after[0][2] != "0",
        "the index was not read from the store: {after:?}"
    );
}
