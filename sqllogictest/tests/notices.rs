//! NOTICEs: creating a view whose state grows forever succeeds and says so, and how to bound
//! it; a bounded view gets no notice. Both protocols.

use std::future::poll_fn;

use eddy_sqllogictest::EddyProcess;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, NoTls};

/// A client whose notices arrive on the returned channel.
async fn connect_with_notices(
    eddy: &EddyProcess,
) -> (tokio_postgres::Client, mpsc::UnboundedReceiver<String>) {
    let (client, mut connection) = eddy.pg_config().connect(NoTls).await.unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(message) = poll_fn(|cx| connection.poll_message(cx)).await {
            match message {
                Ok(AsyncMessage::Notice(notice)) => {
                    let _ = tx.send(notice.message().to_string());
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    });
    (client, rx)
}

fn drain(rx: &mut mpsc::UnboundedReceiver<String>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(message) = rx.try_recv() {
        out.push(message);
    }
    out
}

#[tokio::test]
async fn unbounded_state_is_announced_bounded_is_not() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, mut notices) = connect_with_notices(&eddy).await;
    client
        .batch_execute(
            "CREATE TABLE clicks (user_id INT, ts TIMESTAMP,
               WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY;
             CREATE TABLE plain (user_id INT, ts TIMESTAMP) APPEND ONLY;
             CREATE TABLE accounts (id INT PRIMARY KEY, region VARCHAR)",
        )
        .await
        .unwrap();
    assert_eq!(drain(&mut notices), Vec::<String>::new());

    // Simple protocol: a non-windowed GROUP BY over an append-only table.
    client
        .batch_execute("CREATE MATERIALIZED VIEW per_user AS SELECT user_id, count(*) FROM clicks GROUP BY user_id")
        .await
        .unwrap();
    let got = drain(&mut notices);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].contains("\"per_user\" has unbounded state"),
        "{got:?}"
    );
    assert!(got[0].contains("(user_id)"), "{got:?}");
    assert!(got[0].contains("TUMBLE"), "{got:?}");

    // Extended protocol: DISTINCT, and a window over a column without a watermark.
    client
        .execute(
            "CREATE MATERIALIZED VIEW users AS SELECT DISTINCT user_id FROM clicks",
            &[],
        )
        .await
        .unwrap();
    client
        .execute(
            "CREATE MATERIALIZED VIEW per_second AS SELECT window_start, count(*) AS n
             FROM TUMBLE(plain, ts, INTERVAL '1' SECOND) GROUP BY window_start",
            &[],
        )
        .await
        .unwrap();
    let got = drain(&mut notices);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].contains("\"users\""), "{got:?}");
    assert!(got[1].contains("WATERMARK FOR"), "{got:?}");

    // Bounded: windows a watermark closes, a global aggregate, a view over a table with
    // deletes (its state follows the table's rows).
    client
        .batch_execute(
            "CREATE MATERIALIZED VIEW per_user_second AS SELECT user_id, window_start, count(*)
               FROM TUMBLE(clicks, ts, INTERVAL '1' SECOND) GROUP BY user_id, window_start;
             CREATE MATERIALIZED VIEW total AS SELECT count(*) FROM clicks;
             CREATE MATERIALIZED VIEW per_region AS SELECT region, count(*) FROM accounts GROUP BY region",
        )
        .await
        .unwrap();
    assert_eq!(drain(&mut notices), Vec::<String>::new());

    let unbounded: Vec<(String, bool)> = client
        .query(
            "SELECT name, unbounded_state FROM eddy_catalog.materialized_views ORDER BY name",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let expected = [
        ("per_region", false),
        ("per_second", true),
        ("per_user", true),
        ("per_user_second", false),
        ("total", false),
        ("users", true),
    ];
    assert_eq!(
        unbounded,
        expected.map(|(n, u)| (n.to_string(), u)).to_vec()
    );
}

#[tokio::test]
async fn join_state_that_grows_forever_is_announced_per_side() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, mut notices) = connect_with_notices(&eddy).await;
    client
        .batch_execute(
            "CREATE TABLE clicks (user_id INT, ts TIMESTAMP) APPEND ONLY;
             CREATE TABLE views (user_id INT, ts TIMESTAMP) APPEND ONLY;
             CREATE TABLE users (id INT PRIMARY KEY, name VARCHAR)",
        )
        .await
        .unwrap();
    drain(&mut notices);

    // A stream enriched with a table: only the stream's side grows forever.
    client
        .execute(
            "CREATE MATERIALIZED VIEW named_clicks AS
             SELECT c.ts, u.name FROM clicks c JOIN users u ON c.user_id = u.id",
            &[],
        )
        .await
        .unwrap();
    let got = drain(&mut notices);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].contains("\"named_clicks\" has unbounded state"),
        "{got:?}"
    );
    assert!(got[0].contains("its left input (\"clicks\")"), "{got:?}");
    assert!(!got[0].contains("right input"), "{got:?}");
    assert!(got[0].contains("BETWEEN"), "{got:?}");

    // Two streams: both sides, in one notice.
    client
        .batch_execute(
            "CREATE MATERIALIZED VIEW click_views AS
             SELECT c.ts AS click_ts, v.ts AS view_ts FROM clicks c JOIN views v ON c.user_id = v.user_id",
        )
        .await
        .unwrap();
    let got = drain(&mut notices);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].contains("left input (\"clicks\")"), "{got:?}");
    assert!(got[0].contains("right input (\"views\")"), "{got:?}");

    // A stream enriched with an append-only table keyed by the join key: a click is kept only
    // until its account arrives (it is never probed again then); each account stays.
    client
        .batch_execute(
            "CREATE TABLE accounts (id INT PRIMARY KEY, name VARCHAR) APPEND ONLY;
             CREATE MATERIALIZED VIEW account_clicks AS
             SELECT c.ts, a.name FROM clicks c JOIN accounts a ON c.user_id = a.id",
        )
        .await
        .unwrap();
    let got = drain(&mut notices);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].contains(
            "each row of its left input (\"clicks\") until its key arrives on the right side (\"accounts\""
        ),
        "{got:?}"
    );
    assert!(
        got[0].contains("every row of its right input (\"accounts\") forever"),
        "{got:?}"
    );
    let plan: Vec<String> = client
        .query(
            "EXPLAIN CREATE MATERIALIZED VIEW x AS
             SELECT c.ts, a.name FROM clicks c JOIN accounts a ON c.user_id = a.id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        plan.iter().any(|line| line.contains(
            "left state: table 2 (rows of \"clicks\" by join key; keeps a row until its key arrives on the right side, which holds one row per key: UNBOUNDED)"
        )),
        "{plan:#?}"
    );

    // Two tables with deletes: state follows their rows, no notice.
    client
        .batch_execute(
            "CREATE TABLE names (id INT PRIMARY KEY, alias VARCHAR);
             CREATE MATERIALIZED VIEW aliases AS SELECT u.id, n.alias FROM users u JOIN names n ON u.id = n.id",
        )
        .await
        .unwrap();
    assert_eq!(drain(&mut notices), Vec::<String>::new());
}

#[tokio::test]
async fn a_top_n_whose_partitions_never_close_is_announced() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, mut notices) = connect_with_notices(&eddy).await;
    client
        .batch_execute(
            "CREATE TABLE bids (auction INT, price BIGINT, ts TIMESTAMP,
               WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY;
             CREATE TABLE items (id INT PRIMARY KEY, price BIGINT)",
        )
        .await
        .unwrap();
    drain(&mut notices);
    // Per auction, over an append-only stream: a top for every auction ever seen.
    client
        .batch_execute(
            "CREATE MATERIALIZED VIEW top_bids AS SELECT auction, price FROM (
               SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bids
             ) t WHERE rn <= 3",
        )
        .await
        .unwrap();
    let got = drain(&mut notices);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].contains("\"top_bids\" has unbounded state"),
        "{got:?}"
    );
    assert!(got[0].contains("window_start"), "{got:?}");
    // Bounded: one global top over the stream, a top per window, a top over a table.
    client
        .batch_execute(
            "CREATE MATERIALIZED VIEW top_overall AS SELECT auction, price FROM bids ORDER BY price DESC LIMIT 5;
             CREATE MATERIALIZED VIEW top_per_window AS SELECT window_start, price FROM (
               SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start ORDER BY price DESC) AS rn
               FROM TUMBLE(bids, ts, INTERVAL '10' SECOND)
             ) t WHERE rn <= 3;
             CREATE MATERIALIZED VIEW cheapest_items AS SELECT id FROM items ORDER BY price LIMIT 3",
        )
        .await
        .unwrap();
    assert_eq!(drain(&mut notices), Vec::<String>::new());
    // LIMIT without ORDER BY: which rows is unspecified in SQL; the NOTICE says which.
    client
        .execute(
            "CREATE MATERIALIZED VIEW any_items AS SELECT price FROM items LIMIT 2",
            &[],
        )
        .await
        .unwrap();
    let got = drain(&mut notices);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].contains("\"any_items\": LIMIT 2 without ORDER BY keeps the rows with the smallest stream keys (id)"),
        "{got:?}"
    );
}

#[tokio::test]
async fn the_wall_clock_in_a_view_is_announced_as_not_replayable() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, mut notices) = connect_with_notices(&eddy).await;
    client
        .batch_execute(
            "CREATE TABLE readings (sensor INT, ts TIMESTAMP) APPEND ONLY;
             CREATE VIEW timed AS SELECT *, PROCTIME() AS p_time FROM readings",
        )
        .await
        .unwrap();
    drain(&mut notices);
    client
        .batch_execute(
            "CREATE MATERIALIZED VIEW last_minute AS
             SELECT sensor FROM readings WHERE ts > now() - INTERVAL '1' MINUTE",
        )
        .await
        .unwrap();
    let got = drain(&mut notices);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].contains("\"last_minute\" is not replayable") && got[0].contains("now()"),
        "{got:?}"
    );
    client
        .batch_execute(
            "CREATE MATERIALIZED VIEW per_second AS
             SELECT sensor, count(*) AS n, window_start, window_end
             FROM TUMBLE(timed, p_time, INTERVAL '1' SECOND)
             GROUP BY sensor, window_start, window_end",
        )
        .await
        .unwrap();
    let got = drain(&mut notices);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].contains("\"per_second\" is not replayable") && got[0].contains("PROCTIME()"),
        "{got:?}"
    );
    // Event time only: no notice.
    client
        .batch_execute(
            "CREATE MATERIALIZED VIEW old AS SELECT sensor FROM readings WHERE ts > '2024-01-01'",
        )
        .await
        .unwrap();
    assert_eq!(drain(&mut notices), Vec::<String>::new());
}
