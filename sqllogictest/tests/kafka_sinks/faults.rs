//! Faults: Eddy killed while its sink sends, the broker away and back, a sink log past its
//! bound. Every acknowledged row reaches the topic exactly once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eddy_sqllogictest::kafka::{unique_topic, KafkaBroker, Record};
use eddy_sqllogictest::EddyProcess;

use crate::support::{ids, wait_delivered, DELIVERY_TIMEOUT};

/// `INSERT` of rows `from..=to` into `t (id, pad)`.
fn insert(from: i64, to: i64) -> String {
    format!("INSERT INTO t SELECT value, repeat('p', 200) FROM generate_series({from}, {to})")
}

/// Asserts `ids` holds each of `expected` exactly once and nothing else but `maybe` (rows
/// whose INSERT was never acknowledged), at most once each.
fn assert_exactly_once(ids: &[i64], expected: &[i64], maybe: &[i64]) {
    let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
    for id in ids {
        *counts.entry(*id).or_default() += 1;
    }
    let doubled: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubled.is_empty(), "rows written twice: {doubled:?}");
    let missing: Vec<_> = expected
        .iter()
        .filter(|id| !counts.contains_key(id))
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged rows missing: {} of them, first {:?}",
        missing.len(),
        missing.first()
    );
    let strange: Vec<_> = counts
        .keys()
        .filter(|id| !expected.contains(id) && !maybe.contains(id))
        .collect();
    assert!(strange.is_empty(), "rows never inserted: {strange:?}");
}

#[tokio::test]
async fn kill9_while_sending_delivers_every_acknowledged_row_once() {
    let broker = KafkaBroker::from_env().expect("the test script starts a broker");
    let topic = unique_topic("sink_kill9");
    broker.create_topic(&topic, 4).await.unwrap();
    let mut eddy = EddyProcess::start_fresh_with(|c| c.checkpoint_interval = Some("100ms".into()))
        .await
        .unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE t (id BIGINT, pad VARCHAR) APPEND ONLY;
             CREATE SINK out FROM t WITH (connector = 'kafka', topic = '{topic}',
               properties.bootstrap.server = '{}') FORMAT PLAIN ENCODE JSON;",
            broker.bootstrap()
        ))
        .await
        .unwrap();
    // Statements of 200 rows, one after the other, until the server dies under them (a few
    // thousand rows in all: reading a long partition back from Tansu is slow).
    let acked = Arc::new(Mutex::new(Vec::<i64>::new()));
    let tried = Arc::new(Mutex::new(Vec::<i64>::new()));
    let writer = {
        let (acked, tried) = (acked.clone(), tried.clone());
        tokio::spawn(async move {
            for batch in 0i64.. {
                let (from, to) = (batch * 200 + 1, batch * 200 + 200);
                tried.lock().unwrap().extend(from..=to);
                if client.batch_execute(&insert(from, to)).await.is_err() {
                    return;
                }
                acked.lock().unwrap().extend(from..=to);
            }
        })
    };
    // Let the sink send a while, then kill the server in the middle of it.
    let started = Instant::now();
    while acked.lock().unwrap().len() < 4_000 && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eddy.kill9().unwrap();
    writer.await.unwrap();
    let before_kill = acked.lock().unwrap().clone();
    assert!(
        before_kill.len() >= 1_000,
        "only {} rows acknowledged",
        before_kill.len()
    );

    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    // More after the restart, through the same sink.
    let next = *tried.lock().unwrap().iter().max().unwrap() + 1;
    client
        .batch_execute(&insert(next, next + 499))
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    wait_delivered(&client, "out").await;
    let mut expected = before_kill;
    expected.extend(next..=next + 499);
    let maybe: Vec<i64> = tried.lock().unwrap().clone();
    assert_exactly_once(&ids(&broker.read_all(&topic).unwrap()), &expected, &maybe);
}

#[tokio::test]
async fn the_broker_away_keeps_acknowledgements_fast_and_the_sink_catches_up() {
    let mut broker = KafkaBroker::start_own().await.expect("a private broker");
    let topic = unique_topic("sink_outage");
    broker.create_topic(&topic, 2).await.unwrap();
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE t (id BIGINT, pad VARCHAR) APPEND ONLY;
             CREATE SINK out FROM t WITH (connector = 'kafka', topic = '{topic}',
               properties.bootstrap.server = '{}', properties.reconnect.backoff.max.ms = '200')
             FORMAT PLAIN ENCODE JSON;
             {};",
            broker.bootstrap(),
            insert(1, 100)
        ))
        .await
        .unwrap();
    wait_delivered(&client, "out").await;

    broker.stop().await.unwrap();
    let mut slowest = Duration::ZERO;
    for batch in 1..=20 {
        let started = Instant::now();
        client
            .batch_execute(&insert(batch * 100 + 1, batch * 100 + 100))
            .await
            .unwrap();
        slowest = slowest.max(started.elapsed());
    }
    assert!(
        slowest < Duration::from_secs(2),
        "an INSERT took {slowest:?} while the broker was away"
    );
    // The catalog says the sink is behind and why.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let row = client
            .query_one(
                "SELECT state, epochs_behind, last_error FROM eddy_catalog.sinks WHERE name = 'out'",
                &[],
            )
            .await
            .unwrap();
        let (state, behind): (String, i64) = (row.get(0), row.get(1));
        assert!(behind > 0, "nothing behind while the broker is away");
        if state == "retrying" {
            assert!(row.get::<_, Option<String>>(2).is_some());
            break;
        }
        assert!(
            Instant::now() < deadline,
            "state {state} while the broker is away"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    broker.start().await.unwrap();
    wait_delivered(&client, "out").await;
    let expected: Vec<i64> = (1..=2100).collect();
    assert_exactly_once(&ids(&broker.read_all(&topic).unwrap()), &expected, &[]);
    let state: String = client
        .query_one(
            "SELECT state FROM eddy_catalog.sinks WHERE name = 'out'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(state, "running");
}

#[tokio::test]
async fn a_full_sink_log_holds_its_input_back_and_says_why() {
    let mut broker = KafkaBroker::start_own().await.expect("a private broker");
    let topic = unique_topic("sink_backpressure");
    broker.create_topic(&topic, 1).await.unwrap();
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE t (id BIGINT, pad VARCHAR) APPEND ONLY;
             CREATE TABLE other (id BIGINT) APPEND ONLY;
             CREATE SINK out FROM t WITH (connector = 'kafka', topic = '{topic}',
               properties.bootstrap.server = '{}', sink.log.max.bytes = '20000',
               properties.reconnect.backoff.max.ms = '200')
             FORMAT PLAIN ENCODE JSON;",
            broker.bootstrap()
        ))
        .await
        .unwrap();
    broker.stop().await.unwrap();
    // 200 rows of about 240 bytes: past the bound in one statement.
    client.batch_execute(&insert(1, 200)).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let row = client
            .query_one(
                "SELECT state, backpressure, bytes_behind FROM eddy_catalog.sinks WHERE name = 'out'",
                &[],
            )
            .await
            .unwrap();
        let state: String = row.get(0);
        if state == "backpressured" {
            let why: String = row.get(1);
            assert!(why.contains("sink.log.max.bytes"), "{why}");
            assert!(row.get::<_, i64>(2) > 20_000);
            break;
        }
        assert!(Instant::now() < deadline, "not backpressured: {state}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The sink's input waits; another table does not.
    let (waiting_client, _waiting_driver) = eddy.connect().await.unwrap();
    let waiting = tokio::spawn(async move {
        waiting_client
            .batch_execute(&insert(201, 210))
            .await
            .map(|()| Instant::now())
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    if waiting.is_finished() {
        panic!(
            "an INSERT into the held table was not held: {:?}",
            waiting.await.unwrap()
        );
    }
    let started = Instant::now();
    client
        .batch_execute("INSERT INTO other VALUES (1)")
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));

    let restarted = Instant::now();
    broker.start().await.unwrap();
    let done = tokio::time::timeout(DELIVERY_TIMEOUT, waiting)
        .await
        .expect("the held INSERT ends once the broker is back")
        .unwrap()
        .unwrap();
    assert!(done > restarted);
    client.batch_execute("FLUSH").await.unwrap();
    wait_delivered(&client, "out").await;
    let expected: Vec<i64> = (1..=210).collect();
    assert_exactly_once(&ids(&broker.read_all(&topic).unwrap()), &expected, &[]);
}

#[tokio::test]
async fn a_full_sink_log_pauses_the_kafka_source_feeding_it() {
    // The source's topic on the shared broker, the sink's on a private one that goes away.
    let source_broker = KafkaBroker::from_env().expect("the test script starts a broker");
    let mut sink_broker = KafkaBroker::start_own().await.expect("a private broker");
    let (source_topic, sink_topic) = (unique_topic("held_source"), unique_topic("held_sink"));
    source_broker.create_topic(&source_topic, 1).await.unwrap();
    sink_broker.create_topic(&sink_topic, 1).await.unwrap();
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE SOURCE events (id BIGINT, pad VARCHAR)
               WITH (connector = 'kafka', topic = '{source_topic}', properties.bootstrap.server = '{}')
               FORMAT PLAIN ENCODE JSON;
             CREATE MATERIALIZED VIEW kept AS SELECT id, pad FROM events;
             CREATE SINK out FROM kept WITH (connector = 'kafka', topic = '{sink_topic}',
               properties.bootstrap.server = '{}', sink.log.max.bytes = '20000',
               properties.reconnect.backoff.max.ms = '200')
             FORMAT PLAIN ENCODE JSON;",
            source_broker.bootstrap(),
            sink_broker.bootstrap()
        ))
        .await
        .unwrap();
    sink_broker.stop().await.unwrap();
    // In waves: the bound holds the input back from the first epoch past it (one epoch's
    // changes may pass it).
    for wave in 0..20 {
        let records: Vec<Record> = (wave * 100 + 1..=wave * 100 + 100)
            .map(|i| Record::payload(format!(r#"{{"id": {i}, "pad": "{}"}}"#, "p".repeat(200))))
            .collect();
        source_broker
            .produce_batch(&source_topic, &records)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The view stops taking the source's messages once the sink's log is full.
    let mut last = -1;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let row = client
            .query_one(
                "SELECT committed_offset, last_error FROM eddy_catalog.source_progress WHERE source = 'events'",
                &[],
            )
            .await
            .unwrap();
        let offset: i64 = row.get(0);
        if offset == last && offset < 2000 {
            let why: Option<String> = row.get(1);
            assert!(
                why.is_some_and(|w| w.contains("sink")),
                "the reader does not say why"
            );
            break;
        }
        assert!(
            offset < 2000,
            "the source was read to its end while the sink was full"
        );
        assert!(
            Instant::now() < deadline,
            "the source kept moving: {offset}"
        );
        last = offset;
    }
    let state: String = client
        .query_one(
            "SELECT state FROM eddy_catalog.sinks WHERE name = 'out'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(state, "backpressured");

    sink_broker.start().await.unwrap();
    let deadline = Instant::now() + DELIVERY_TIMEOUT;
    loop {
        let n: i64 = client
            .query_one("SELECT count(*) FROM kept", &[])
            .await
            .unwrap()
            .get(0);
        if n == 2000 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the source did not resume: {n} rows"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    client.batch_execute("FLUSH").await.unwrap();
    wait_delivered(&client, "out").await;
    let expected: Vec<i64> = (1..=2000).collect();
    assert_exactly_once(
        &ids(&sink_broker.read_all(&sink_topic).unwrap()),
        &expected,
        &[],
    );
}
