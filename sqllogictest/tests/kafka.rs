//! Views over Kafka topics, against a real Kafka-protocol broker (Tansu) started by the test
//! script (`EDDY_KAFKA_BOOTSTRAP`), or a private one for the broker-fault test.

use std::time::Duration;

use eddy_sqllogictest::kafka::{unique_topic, KafkaBroker, Record};
use eddy_sqllogictest::EddyProcess;
use tokio_postgres::Client;

/// 2024-01-01T00:00:00Z in milliseconds.
const T0: i64 = 1_704_067_200_000;

fn json(sensor: i64, value: i64, millis: i64) -> Vec<u8> {
    format!(r#"{{"sensor": {sensor}, "value": {value}, "ts": {millis}}}"#).into_bytes()
}

async fn query_i64(client: &Client, sql: &str) -> Vec<Vec<Option<i64>>> {
    let rows = client
        .query(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.iter()
        .map(|row| {
            (0..row.len())
                .map(|i| row.get::<_, Option<i64>>(i))
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn json_source_with_includes_dead_letters_and_lag() {
    let broker = KafkaBroker::from_env().expect("the test script starts a broker");
    let topic = unique_topic("json");
    broker.create_topic(&topic, 2).await.unwrap();
    let mut records = Vec::new();
    for i in 0..200 {
        let partition = (i % 2) as i32;
        records.push(
            Record::payload(json(i % 5, i, T0 + i * 100))
                .with_partition(partition)
                .with_key(format!("k{i}"))
                .with_timestamp(T0 + i),
        );
    }
    records.push(Record::payload("{broken").with_partition(1));
    broker.produce_batch(&topic, &records).await.unwrap();

    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _conn) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE SOURCE readings (sensor BIGINT, value BIGINT, ts TIMESTAMP,
               WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
             INCLUDE partition AS p INCLUDE offset AS o INCLUDE key AS k INCLUDE timestamp AS kafka_ts
             WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{}',
                   scan.startup.mode = 'earliest')
             FORMAT PLAIN ENCODE JSON;
             CREATE MATERIALIZED VIEW per_partition AS
               SELECT p, count(*) AS n, sum(value) AS total, max(o) AS last_offset,
                      count(DISTINCT k) AS keys, min(kafka_ts) AS first_ts
               FROM readings GROUP BY p;
             CREATE MATERIALIZED VIEW per_window AS
               SELECT window_start, count(*) AS n FROM TUMBLE(readings, ts, INTERVAL '10' SECOND)
               GROUP BY window_start;",
            broker.bootstrap()
        ))
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();

    let rows = query_i64(
        &client,
        "SELECT p::BIGINT AS part, n, total, last_offset, keys FROM per_partition ORDER BY part",
    )
    .await;
    let even: i64 = (0..200).filter(|i| i % 2 == 0).sum();
    let odd: i64 = (0..200).filter(|i| i % 2 == 1).sum();
    assert_eq!(
        rows,
        vec![
            vec![Some(0), Some(100), Some(even), Some(99), Some(100)],
            vec![Some(1), Some(100), Some(odd), Some(99), Some(100)],
        ]
    );
    let first: String = client
        .query_one(
            "SELECT first_ts::VARCHAR FROM per_partition WHERE p = 0",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        first.starts_with("2024-01-01 00:00:00"),
        "message timestamp column: {first}"
    );
    // 200 events 100 ms apart: two 10-second windows, all rows counted.
    let windows = query_i64(&client, "SELECT n FROM per_window ORDER BY window_start").await;
    assert_eq!(windows, vec![vec![Some(100)], vec![Some(100)]]);

    let errors = client
        .query(
            "SELECT source, split, \"offset\", payload, views FROM eddy_catalog.source_errors",
            &[],
        )
        .await
        .unwrap();
    // Each view has its own reader and each met the broken message: one row names both.
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].get::<_, String>(1), "1");
    assert_eq!(errors[0].get::<_, i64>(2), 100);
    assert_eq!(errors[0].get::<_, String>(3), "{broken");
    let mut views: Vec<String> = errors[0].get(4);
    views.sort();
    assert_eq!(views, ["per_partition", "per_window"]);

    let progress = query_i64(
        &client,
        "SELECT committed_offset, high_watermark, lag_messages FROM eddy_catalog.source_progress \
         WHERE target = 'per_partition' ORDER BY split",
    )
    .await;
    assert_eq!(
        progress,
        vec![
            vec![Some(100), Some(100), Some(0)],
            vec![Some(101), Some(101), Some(0)]
        ]
    );

    // More messages: the views move on from where they were.
    let more: Vec<Record> = (200..210)
        .map(|i| Record::payload(json(1, i, T0 + i * 100)).with_partition(0))
        .collect();
    broker.produce_batch(&topic, &more).await.unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    let rows = query_i64(&client, "SELECT n FROM per_partition WHERE p = 0").await;
    assert_eq!(rows, vec![vec![Some(110)]]);
}

#[tokio::test]
async fn csv_source_and_startup_modes() {
    let broker = KafkaBroker::from_env().expect("the test script starts a broker");
    let topic = unique_topic("csv");
    broker.create_topic(&topic, 1).await.unwrap();
    let early: Vec<Record> = (0..5)
        .map(|i| Record::payload(format!("{i};2024-01-01 00:00:0{i}")).with_timestamp(T0 + i))
        .collect();
    broker.produce_batch(&topic, &early).await.unwrap();

    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _conn) = eddy.connect().await.unwrap();
    let source = |name: &str, mode: &str| {
        format!(
            "CREATE SOURCE {name} (v BIGINT, ts TIMESTAMP)
             WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{}', {mode})
             FORMAT PLAIN ENCODE CSV (delimiter = ';', without_header = 'true');
             CREATE MATERIALIZED VIEW {name}_sum AS SELECT count(*) AS n, sum(v) AS total FROM {name};",
            broker.bootstrap()
        )
    };
    client
        .batch_execute(&source("from_start", "scan.startup.mode = 'earliest'"))
        .await
        .unwrap();
    client
        .batch_execute(&source("from_now", "scan.startup.mode = 'latest'"))
        .await
        .unwrap();
    client
        .batch_execute(&source(
            "from_time",
            &format!(
                "scan.startup.mode = 'timestamp', scan.startup.timestamp.millis = '{}'",
                T0 + 3
            ),
        ))
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    // Offsets 5..=8: two good rows around two that cannot be decoded (a number that is not
    // one, a timestamp that is not one); each reader sets the bad ones aside and goes on.
    let late = vec![
        Record::payload("5;2024-01-01 00:00:05").with_timestamp(T0 + 5),
        Record::payload("five;2024-01-01 00:00:05").with_timestamp(T0 + 5),
        Record::payload("7;yesterday").with_timestamp(T0 + 5),
        Record::payload("6;2024-01-01 00:00:06").with_timestamp(T0 + 6),
    ];
    broker.produce_batch(&topic, &late).await.unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    let errors = client
        .query(
            "SELECT source, \"offset\", payload, error FROM eddy_catalog.source_errors
             WHERE source = 'from_start' ORDER BY \"offset\"",
            &[],
        )
        .await
        .unwrap();
    let bad: Vec<(i64, String)> = errors.iter().map(|r| (r.get(1), r.get(2))).collect();
    assert_eq!(
        bad,
        vec![
            (6, "five;2024-01-01 00:00:05".into()),
            (7, "7;yesterday".into())
        ]
    );
    assert!(errors.iter().all(|r| !r.get::<_, String>(3).is_empty()));
    // Every reader that read past them (all three) recorded both.
    assert_eq!(
        query_i64(&client, "SELECT count(*) FROM eddy_catalog.source_errors").await,
        vec![vec![Some(6)]]
    );
    assert_eq!(
        query_i64(&client, "SELECT n, total FROM from_start_sum").await,
        vec![vec![Some(7), Some(21)]]
    );
    assert_eq!(
        query_i64(&client, "SELECT n, total FROM from_now_sum").await,
        vec![vec![Some(2), Some(11)]]
    );
    assert_eq!(
        query_i64(&client, "SELECT n, total FROM from_time_sum").await,
        vec![vec![Some(4), Some(18)]]
    );
}

#[tokio::test]
async fn slow_partition_holds_the_watermark_until_idle() {
    let broker = KafkaBroker::from_env().expect("the test script starts a broker");
    let topic = unique_topic("idle");
    broker.create_topic(&topic, 2).await.unwrap();
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _conn) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE SOURCE s (sensor BIGINT, value BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
             WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{}',
                   watermark.idle.timeout = '2s')
             FORMAT PLAIN ENCODE JSON;
             CREATE MATERIALIZED VIEW closed AS SELECT window_start, count(*) AS n
               FROM TUMBLE(s, ts, INTERVAL '10' SECOND) GROUP BY window_start EMIT ON WINDOW CLOSE;",
            broker.bootstrap()
        ))
        .await
        .unwrap();
    // Partition 0 runs a minute ahead; partition 1 has one early row.
    broker
        .produce_batch(
            &topic,
            &[
                Record::payload(json(1, 1, T0 + 1_000)).with_partition(1),
                Record::payload(json(0, 1, T0 + 2_000)).with_partition(0),
                Record::payload(json(0, 1, T0 + 60_000)).with_partition(0),
            ],
        )
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    // Partition 1 (at 00:00:01) holds the watermark at 00:00:00: nothing closed yet, and a
    // row of partition 1 at 00:00:03 is not late although partition 0 is far ahead.
    broker
        .produce_batch(
            &topic,
            &[Record::payload(json(1, 1, T0 + 3_000)).with_partition(1)],
        )
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        query_i64(&client, "SELECT count(*) FROM closed").await,
        vec![vec![Some(0)]]
    );
    assert_eq!(
        query_i64(&client, "SELECT count(*) FROM eddy_catalog.late_rows").await,
        vec![vec![Some(0)]]
    );
    // Once partition 1 is idle, partition 0 alone moves the watermark to 00:00:59.
    tokio::time::sleep(Duration::from_secs(4)).await;
    client.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        query_i64(&client, "SELECT n FROM closed ORDER BY window_start").await,
        vec![vec![Some(3)]]
    );
    let idle: bool = client
        .query_one(
            "SELECT idle FROM eddy_catalog.source_progress WHERE split = '1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(idle, "partition 1 is reported idle");
    // It rejoins with a row below the watermark: late, counted and kept.
    broker
        .produce_batch(
            &topic,
            &[Record::payload(json(1, 1, T0 + 5_000)).with_partition(1)],
        )
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        query_i64(&client, "SELECT count(*) FROM eddy_catalog.late_rows").await,
        vec![vec![Some(1)]]
    );
}

#[tokio::test]
async fn an_idle_source_does_not_hold_a_join_back() {
    let broker = KafkaBroker::from_env().expect("the test script starts a broker");
    let clicks = unique_topic("idle-clicks");
    let buys = unique_topic("idle-buys");
    broker.create_topic(&clicks, 1).await.unwrap();
    broker.create_topic(&buys, 1).await.unwrap();
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _conn) = eddy.connect().await.unwrap();
    let source = |name: &str, topic: &str| {
        format!(
            "CREATE SOURCE {name} (sensor BIGINT, value BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
             WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{}',
                   watermark.idle.timeout = '2s')
             FORMAT PLAIN ENCODE JSON;",
            broker.bootstrap()
        )
    };
    client
        .batch_execute(&format!(
            "{}{}
             CREATE MATERIALIZED VIEW bought AS
               SELECT c.sensor, c.ts, b.value FROM clicks c JOIN buys b ON c.sensor = b.sensor
               AND b.ts BETWEEN c.ts AND c.ts + INTERVAL '5' SECOND;
             CREATE MATERIALIZED VIEW bought_per_window AS SELECT window_start, count(*) AS n
               FROM TUMBLE(bought, ts, INTERVAL '10' SECOND) GROUP BY window_start EMIT ON WINDOW CLOSE;",
            source("clicks", &clicks),
            source("buys", &buys)
        ))
        .await
        .unwrap();
    broker
        .produce_batch(&clicks, &[Record::payload(json(1, 0, T0 + 1_000))])
        .await
        .unwrap();
    broker
        .produce_batch(&buys, &[Record::payload(json(1, 7, T0 + 2_000))])
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        query_i64(&client, "SELECT sensor, value FROM bought").await,
        vec![vec![Some(1), Some(7)]]
    );
    // Clicks move a minute on; buys say nothing. While buys is active its watermark
    // (00:00:01) holds the join's clock, so the first window stays open.
    broker
        .produce_batch(&clicks, &[Record::payload(json(2, 0, T0 + 60_000))])
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        query_i64(&client, "SELECT n FROM bought_per_window").await,
        Vec::<Vec<Option<i64>>>::new()
    );
    // Once buys is idle, clicks alone move the join's clock: the window closes.
    let started = std::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        client.batch_execute("FLUSH").await.unwrap();
        let rows = query_i64(&client, "SELECT n FROM bought_per_window").await;
        if rows == vec![vec![Some(1)]] {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the window never closed: {rows:?}"
        );
    }
}

#[tokio::test]
async fn kill9_mid_stream_counts_every_message_once() {
    let broker = KafkaBroker::from_env().expect("the test script starts a broker");
    let topic = unique_topic("kill");
    broker.create_topic(&topic, 2).await.unwrap();
    let total = 40_000i64;
    let records: Vec<Record> = (0..total)
        .map(|i| Record::payload(json(i % 7, i, T0 + i)).with_partition((i % 2) as i32))
        .collect();
    broker.produce_batch(&topic, &records).await.unwrap();

    let mut eddy = EddyProcess::start_fresh().await.unwrap();
    {
        let (client, _conn) = eddy.connect().await.unwrap();
        client
            .batch_execute(&format!(
                "CREATE SOURCE s (sensor BIGINT, value BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
                 WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{}')
                 FORMAT PLAIN ENCODE JSON;
                 CREATE MATERIALIZED VIEW totals AS SELECT sensor, count(*) AS n, sum(value) AS s FROM s GROUP BY sensor;",
                broker.bootstrap()
            ))
            .await
            .unwrap();
        // Kill while it is still reading.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let seen =
            query_i64(&client, "SELECT coalesce(sum(n), 0) FROM totals").await[0][0].unwrap_or(0);
        assert!(seen < total, "killed mid-stream ({seen} of {total} read)");
    }
    eddy.kill9().unwrap();
    eddy.restart().await.unwrap();
    let (client, _conn) = eddy.connect().await.unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    let rows = query_i64(&client, "SELECT sensor, n, s FROM totals ORDER BY sensor").await;
    let expected: Vec<Vec<Option<i64>>> = (0..7)
        .map(|k| {
            let values: Vec<i64> = (0..total).filter(|i| i % 7 == k).collect();
            vec![
                Some(k),
                Some(values.len() as i64),
                Some(values.iter().sum()),
            ]
        })
        .collect();
    assert_eq!(rows, expected);
}

#[tokio::test]
async fn broker_outage_loses_and_doubles_nothing() {
    let mut broker = KafkaBroker::start_own().await.expect("a private broker");
    let topic = unique_topic("outage");
    broker.create_topic(&topic, 1).await.unwrap();
    let batch = |from: i64, to: i64| -> Vec<Record> {
        (from..to)
            .map(|i| Record::payload(json(0, i, T0 + i)))
            .collect()
    };
    broker.produce_batch(&topic, &batch(0, 1000)).await.unwrap();
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _conn) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE SOURCE s (sensor BIGINT, value BIGINT, ts TIMESTAMP)
             WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{}')
             FORMAT PLAIN ENCODE JSON;
             CREATE MATERIALIZED VIEW totals AS SELECT count(*) AS n, sum(value) AS s FROM s;",
            broker.bootstrap()
        ))
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        query_i64(&client, "SELECT n, s FROM totals").await,
        vec![vec![Some(1000), Some(499_500)]]
    );

    broker.stop().await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Queries keep answering from committed data while the broker is away.
    assert_eq!(
        query_i64(&client, "SELECT n FROM totals").await,
        vec![vec![Some(1000)]]
    );
    let error: Option<String> = client
        .query_one("SELECT last_error FROM eddy_catalog.source_progress", &[])
        .await
        .unwrap()
        .get(0);
    assert!(error.is_some(), "the outage shows in source_progress");

    broker.start().await.unwrap();
    broker
        .produce_batch(&topic, &batch(1000, 2000))
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        query_i64(&client, "SELECT n, s FROM totals").await,
        vec![vec![Some(2000), Some(1_999_000)]]
    );
}

#[tokio::test]
async fn unreachable_broker_or_missing_topic_is_a_clear_error() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _conn) = eddy.connect().await.unwrap();
    let err = client
        .batch_execute(
            "CREATE SOURCE s (a BIGINT) WITH (connector = 'kafka', topic = 't',
               properties.bootstrap.server = '127.0.0.1:1') FORMAT PLAIN ENCODE JSON",
        )
        .await
        .expect_err("nothing listens on port 1");
    let message = err
        .as_db_error()
        .map(|e| e.message().to_string())
        .unwrap_or_default();
    assert!(message.contains("127.0.0.1:1"), "{message}");

    let broker = KafkaBroker::from_env().expect("the test script starts a broker");
    let err = client
        .batch_execute(&format!(
            "CREATE SOURCE s (a BIGINT) WITH (connector = 'kafka', topic = '{}',
               properties.bootstrap.server = '{}') FORMAT PLAIN ENCODE JSON",
            unique_topic("missing"),
            broker.bootstrap()
        ))
        .await
        .expect_err("no such topic");
    let message = err
        .as_db_error()
        .map(|e| e.message().to_string())
        .unwrap_or_default();
    assert!(message.contains("does not exist"), "{message}");
}

#[tokio::test]
async fn upsert_table_with_tombstones_retracts() {
    let broker = KafkaBroker::from_env().expect("the test script starts a broker");
    let topic = unique_topic("upsert");
    broker.create_topic(&topic, 1).await.unwrap();
    let value = |id: i64, v: i64| {
        format!(r#"{{"id": {id}, "region": "r{}", "v": {v}}}"#, id % 2).into_bytes()
    };
    let tombstone = |key: &str| Record {
        key: Some(key.as_bytes().to_vec()),
        ..Record::default()
    };
    broker
        .produce_batch(
            &topic,
            &[
                Record::payload(value(1, 10)).with_key("1"),
                Record::payload(value(2, 20)).with_key("2"),
                Record::payload(value(3, 30)).with_key("3"),
                Record::payload(value(1, 15)).with_key("1"),
                tombstone("2"),
                tombstone(r#"{"id": 3}"#),
                tombstone("99"),
                Record::payload(r#"{"region": "r0", "v": 1}"#).with_key("4"),
            ],
        )
        .await
        .unwrap();
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _conn) = eddy.connect().await.unwrap();
    let err = client
        .batch_execute(&format!(
            "CREATE SOURCE u (id BIGINT PRIMARY KEY, v BIGINT)
             WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{}')
             FORMAT UPSERT ENCODE JSON",
            broker.bootstrap()
        ))
        .await
        .expect_err("an upsert source must keep its rows");
    assert!(format!("{err:?}").contains("CREATE TABLE"), "{err:?}");
    client
        .batch_execute(&format!(
            "CREATE TABLE accounts (id BIGINT PRIMARY KEY, region VARCHAR, v BIGINT)
             WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{}')
             FORMAT UPSERT ENCODE JSON;
             CREATE MATERIALIZED VIEW per_region AS SELECT region, count(*) AS n, sum(v) AS total, max(v) AS top
               FROM accounts GROUP BY region;",
            broker.bootstrap()
        ))
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    // The table holds the latest value per key; deleted keys are gone.
    assert_eq!(
        query_i64(&client, "SELECT id, v FROM accounts ORDER BY id").await,
        vec![vec![Some(1), Some(15)]]
    );
    let rows = client
        .query("SELECT region, n, total, top FROM per_region", &[])
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, String>(0), "r1");
    assert_eq!(
        (
            rows[0].get::<_, i64>(1),
            rows[0].get::<_, i64>(2),
            rows[0].get::<_, i64>(3)
        ),
        (1, 15, 15)
    );
    // The message without its primary key is a dead letter.
    assert_eq!(
        query_i64(
            &client,
            "SELECT count(*) FROM eddy_catalog.source_errors WHERE error LIKE '%primary key%'"
        )
        .await,
        vec![vec![Some(1)]]
    );
    // A later value for a deleted key brings it back.
    broker
        .produce_batch(&topic, &[Record::payload(value(2, 7)).with_key("2")])
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        query_i64(
            &client,
            "SELECT n, total FROM per_region WHERE region = 'r0'"
        )
        .await,
        vec![vec![Some(1), Some(7)]]
    );
}
