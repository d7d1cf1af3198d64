//! Each format equals its input after inserts, updates and deletes; statements' mistakes get
//! their SQLSTATEs; a message over the size limit goes to the error table.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use eddy_sqllogictest::kafka::{unique_topic, KafkaBroker};
use eddy_sqllogictest::EddyProcess;
use serde_json::{json, Value};

use crate::support::{json_of, upsert_state, wait_delivered};

#[tokio::test]
async fn each_format_equals_its_input_after_inserts_updates_and_deletes() {
    let broker = KafkaBroker::from_env().expect("the test script starts a broker");
    let (upsert_topic, debezium_topic, plain_topic) = (
        unique_topic("sink_upsert"),
        unique_topic("sink_debezium"),
        unique_topic("sink_plain"),
    );
    broker.create_topic(&upsert_topic, 3).await.unwrap();
    broker.create_topic(&debezium_topic, 2).await.unwrap();
    broker.create_topic(&plain_topic, 1).await.unwrap();
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    let kafka = format!(
        "connector = 'kafka', properties.bootstrap.server = '{}'",
        broker.bootstrap()
    );
    client
        .batch_execute(&format!(
            "CREATE TABLE accounts (id BIGINT PRIMARY KEY, owner VARCHAR, balance NUMERIC(10,2), opened TIMESTAMP);
             CREATE TABLE events (id BIGINT, kind VARCHAR) APPEND ONLY;
             CREATE MATERIALIZED VIEW by_owner AS
               SELECT owner, count(*) AS n, sum(balance) AS total FROM accounts GROUP BY owner;
             INSERT INTO accounts VALUES (1, 'ann', 10.50, '2026-03-01 12:00:05.5'), (2, 'bob', 3.00, NULL);
             INSERT INTO events VALUES (1, 'open'), (2, 'open');
             CREATE SINK owners FROM by_owner WITH ({kafka}, topic = '{upsert_topic}') FORMAT UPSERT ENCODE JSON;
             CREATE SINK account_changes FROM accounts WITH ({kafka}, topic = '{debezium_topic}') FORMAT DEBEZIUM ENCODE JSON;
             CREATE SINK event_log FROM events WITH ({kafka}, topic = '{plain_topic}') FORMAT PLAIN ENCODE JSON;
             INSERT INTO accounts VALUES (3, 'ann', 1.25, NULL), (4, 'cy', 7.00, NULL);
             FLUSH;"
        ))
        .await
        .unwrap();
    // Later epochs: cy's group must exist in one epoch before it goes in another.
    client
        .batch_execute(
            "UPDATE accounts SET balance = 20.00 WHERE id = 1;
             UPDATE accounts SET owner = 'dee' WHERE id = 2;
             DELETE FROM accounts WHERE id = 4;
             INSERT INTO events VALUES (3, 'close');
             FLUSH;",
        )
        .await
        .unwrap();
    for sink in ["owners", "account_changes", "event_log"] {
        wait_delivered(&client, sink).await;
    }

    // UPSERT: the last value of each key, tombstones applied, is the view.
    let messages = broker.read_all(&upsert_topic).unwrap();
    let mut expected = BTreeMap::new();
    for row in client
        .query("SELECT owner, n, total::VARCHAR FROM by_owner", &[])
        .await
        .unwrap()
    {
        let owner: String = row.get(0);
        let n: i64 = row.get(1);
        let total: String = row.get(2);
        expected.insert(
            json!({ "owner": owner }).to_string(),
            json!({ "owner": owner, "n": n, "total": json_of(&total) }),
        );
    }
    assert_eq!(upsert_state(&messages), expected);
    // cy's only account went: a tombstone (no value at all), never the text "null".
    let cy = messages
        .iter()
        .rfind(|m| m.key.as_deref() == Some(br#"{"owner":"cy"}"#.as_slice()))
        .expect("cy's messages");
    assert_eq!(cy.payload, None);
    // A key stays on one partition; numerics keep their scale in the JSON text.
    let ann: Vec<_> = messages
        .iter()
        .filter(|m| m.key.as_deref() == Some(br#"{"owner":"ann"}"#.as_slice()))
        .collect();
    assert!(ann.iter().all(|m| m.partition == ann[0].partition));
    let last = String::from_utf8(ann.last().unwrap().payload.clone().unwrap()).unwrap();
    assert_eq!(last, r#"{"owner":"ann","n":2,"total":21.25}"#);

    // DEBEZIUM: the snapshot as reads, then the changes; replayed, the table.
    let messages = broker.read_all(&debezium_topic).unwrap();
    let events: Vec<Value> = messages
        .iter()
        .filter_map(|m| m.payload.as_ref())
        .map(|p| serde_json::from_slice(p).unwrap())
        .collect();
    let mut ops: Vec<&str> = events.iter().map(|e| e["op"].as_str().unwrap()).collect();
    ops.sort_unstable();
    assert_eq!(ops, ["c", "c", "d", "r", "r", "u", "u"]);
    let mut state = BTreeMap::new();
    for event in &events {
        let after = &event["after"];
        let before = &event["before"];
        match event["op"].as_str().unwrap() {
            "c" | "r" | "u" => state.insert(after["id"].as_i64().unwrap(), after.clone()),
            "d" => state.remove(&before["id"].as_i64().unwrap()),
            other => panic!("op {other}"),
        };
    }
    let expected: BTreeMap<i64, Value> = [
        (
            1,
            json!({"id": 1, "owner": "ann", "balance": 20.00, "opened": "2026-03-01T12:00:05.5"}),
        ),
        (
            2,
            json!({"id": 2, "owner": "dee", "balance": 3.00, "opened": null}),
        ),
        (
            3,
            json!({"id": 3, "owner": "ann", "balance": 1.25, "opened": null}),
        ),
    ]
    .into();
    assert_eq!(state, expected);
    // Every delete is followed by a tombstone of its key.
    let delete = messages
        .iter()
        .position(|m| {
            m.payload
                .as_ref()
                .is_some_and(|p| serde_json::from_slice::<Value>(p).unwrap()["op"] == "d")
        })
        .unwrap();
    assert_eq!(messages[delete + 1].payload, None);
    assert_eq!(messages[delete + 1].key, messages[delete].key);
    let update = events.iter().find(|e| e["op"] == "u").unwrap();
    assert_eq!(update["source"]["connector"], "eddy");
    assert_eq!(update["source"]["table"], "accounts");
    assert!(update["ts_ms"].as_i64().unwrap() > 1_700_000_000_000);

    // PLAIN: each row once, no key.
    let messages = broker.read_all(&plain_topic).unwrap();
    let rows: BTreeSet<String> = messages
        .iter()
        .map(|m| String::from_utf8(m.payload.clone().unwrap()).unwrap())
        .collect();
    assert_eq!(messages.len(), 3);
    assert!(messages.iter().all(|m| m.key.is_none()));
    assert_eq!(
        rows,
        BTreeSet::from([
            r#"{"id":1,"kind":"open"}"#.to_string(),
            r#"{"id":2,"kind":"open"}"#.to_string(),
            r#"{"id":3,"kind":"close"}"#.to_string(),
        ])
    );
    // Each message names its sink, epoch and place in the epoch.
    for message in &messages {
        assert!(message
            .header("eddy.sink")
            .unwrap()
            .starts_with("event_log."));
        message
            .header("eddy.epoch")
            .unwrap()
            .parse::<u64>()
            .unwrap();
        message.header("eddy.seq").unwrap().parse::<u32>().unwrap();
    }

    let row = client
        .query_one(
            "SELECT state, epochs_behind, bytes_behind, lag_seconds, messages_sent, format, key, target
             FROM eddy_catalog.sinks WHERE name = 'owners'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "running");
    assert_eq!(row.get::<_, i64>(1), 0);
    assert_eq!(row.get::<_, i64>(2), 0);
    assert_eq!(row.get::<_, f64>(3), 0.0);
    assert!(row.get::<_, i64>(4) >= 5);
    assert_eq!(row.get::<_, String>(5), "UPSERT JSON");
    assert_eq!(row.get::<_, String>(6), "owner");
    assert!(row.get::<_, String>(7).contains(&upsert_topic));
}

#[tokio::test]
async fn sink_statements_answer_their_sqlstates() {
    let broker = KafkaBroker::from_env().expect("the test script starts a broker");
    let topic = unique_topic("sink_errors");
    broker.create_topic(&topic, 1).await.unwrap();
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR);
             CREATE TABLE log (v VARCHAR) APPEND ONLY;
             CREATE MATERIALIZED VIEW counts AS SELECT v, count(*) AS n FROM t GROUP BY v;",
        )
        .await
        .unwrap();
    let bootstrap = broker.bootstrap();
    let kafka = format!(
        "connector = 'kafka', properties.bootstrap.server = '{bootstrap}', topic = '{topic}'"
    );
    let code = |sql: String| {
        let client = &client;
        async move {
            match client.batch_execute(&sql).await {
                Ok(()) => panic!("{sql}: succeeded"),
                Err(e) => (
                    e.code().map(|c| c.code().to_string()).unwrap_or_default(),
                    e.as_db_error()
                        .map(|d| d.message().to_string())
                        .unwrap_or_default(),
                ),
            }
        }
    };
    for (sql, expected) in [
        (format!("CREATE SINK s FROM nope WITH ({kafka}) FORMAT UPSERT ENCODE JSON"), "42P01"),
        (format!("CREATE SINK s FROM t WITH ({kafka}) FORMAT CANONICAL ENCODE JSON"), "0A000"),
        (format!("CREATE SINK s FROM t WITH ({kafka}) FORMAT UPSERT ENCODE AVRO"), "0A000"),
        (format!("CREATE SINK s FROM t WITH ({kafka}, topik = 'x') FORMAT UPSERT ENCODE JSON"), "22023"),
        (format!("CREATE SINK s FROM counts WITH ({kafka}) FORMAT PLAIN ENCODE JSON"), "0A000"),
        (format!("CREATE SINK s FROM log WITH ({kafka}) FORMAT UPSERT ENCODE JSON"), "42P16"),
        (format!("CREATE SINK s FROM t WITH ({kafka}, primary_key = 'nope') FORMAT UPSERT ENCODE JSON"), "42703"),
        ("CREATE SINK s FROM t WITH (connector = 'kafka', topic = 'x') FORMAT UPSERT ENCODE JSON".to_string(), "22023"),
        (format!("CREATE SINK s FROM t WITH (connector = 'kafka', properties.bootstrap.server = '{bootstrap}', topic = 'no_such_topic_{topic}') FORMAT UPSERT ENCODE JSON"), "42704"),
        ("CREATE SINK s FROM t WITH (connector = 'kafka', properties.bootstrap.server = '127.0.0.1:1', topic = 'x') FORMAT UPSERT ENCODE JSON".to_string(), "08001"),
        ("CREATE SINK s FROM t WITH (connector = 'kafka') FORMAT UPSERT".to_string(), "42601"),
        ("DROP SINK nope".to_string(), "42704"),
        ("DROP SINK t".to_string(), "42809"),
    ] {
        let (code, message) = code(sql.clone()).await;
        assert_eq!(code, expected, "{sql}: {message}");
    }
    client
        .batch_execute(&format!(
            "CREATE SINK s FROM counts WITH ({kafka}) FORMAT UPSERT ENCODE JSON;
             DROP SINK IF EXISTS nope;"
        ))
        .await
        .unwrap();
    let (code_of, message) = code(format!(
        "CREATE SINK s FROM t WITH ({kafka}) FORMAT UPSERT ENCODE JSON"
    ))
    .await;
    assert_eq!(code_of, "42P07", "{message}");
    let (code_of, message) = code("DROP MATERIALIZED VIEW counts".into()).await;
    assert_eq!(code_of, "2BP01", "{message}");
    assert!(message.contains("sink \"s\""), "{message}");
    let (code_of, message) = code("DROP TABLE s".into()).await;
    assert_eq!(code_of, "42809", "{message}");
    let (code_of, message) = code("SELECT * FROM s".into()).await;
    assert_eq!(code_of, "0A000", "{message}");
    assert!(message.contains("is a sink"), "{message}");
    let (code_of, message) = code("INSERT INTO s VALUES ('a', 1)".into()).await;
    assert_eq!(code_of, "42809", "{message}");

    let names: Vec<String> = client
        .query("SHOW SINKS", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(names, ["s"]);
    // Listed as psql's \d lists relations: a foreign table, with its connector as its server
    // (pg_class read first, as psql does: it numbers the relations the others refer to).
    let relkind: String = client
        .query_one(
            "SELECT relkind::VARCHAR FROM pg_catalog.pg_class WHERE relname = 's'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(relkind, "f");
    let row = client
        .query_one(
            "SELECT c.relkind::VARCHAR, s.srvname FROM pg_catalog.pg_class c
             JOIN pg_catalog.pg_foreign_table f ON f.ftrelid = c.oid
             JOIN pg_catalog.pg_foreign_server s ON s.oid = f.ftserver
             WHERE c.relname = 's'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "f");
    assert_eq!(row.get::<_, String>(1), "kafka");
    let plan: Vec<String> = client
        .query(
            &format!(
                "EXPLAIN CREATE SINK s2 FROM counts WITH ({kafka}) FORMAT DEBEZIUM ENCODE JSON"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(plan[0].starts_with("Sink s2 (kafka topic"), "{plan:?}");
    assert!(
        plan.iter().any(|l| l.contains("message key: v")),
        "{plan:?}"
    );
    assert!(
        plan.iter().any(|l| l.contains("materialized view counts")),
        "{plan:?}"
    );

    // CASCADE takes the sink with the view; then the topic's name is free for another.
    client
        .batch_execute("DROP MATERIALIZED VIEW counts CASCADE")
        .await
        .unwrap();
    assert!(client.query("SHOW SINKS", &[]).await.unwrap().is_empty());
    let count: i64 = client
        .query_one("SELECT count(*) FROM eddy_catalog.sinks", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 0);
}

#[tokio::test]
async fn an_oversized_message_goes_to_the_error_table_and_the_rest_is_sent() {
    let broker = KafkaBroker::from_env().expect("the test script starts a broker");
    let topic = unique_topic("sink_oversize");
    broker.create_topic(&topic, 1).await.unwrap();
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE notes (id BIGINT, body VARCHAR) APPEND ONLY;
             CREATE SINK out FROM notes WITH (connector = 'kafka', topic = '{topic}',
               properties.bootstrap.server = '{}', properties.message.max.bytes = '2000')
             FORMAT PLAIN ENCODE JSON;
             INSERT INTO notes VALUES (1, 'small');
             INSERT INTO notes VALUES (2, repeat('x', 5000));
             INSERT INTO notes VALUES (3, 'small too');
             FLUSH;",
            broker.bootstrap()
        ))
        .await
        .unwrap();
    wait_delivered(&client, "out").await;
    let ids: Vec<i64> = broker
        .read_all(&topic)
        .unwrap()
        .iter()
        .map(|m| {
            serde_json::from_slice::<Value>(m.payload.as_ref().unwrap()).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(ids, [1, 3]);
    // The refused message is written into the error table by the next commit.
    let row = loop {
        let rows = client
            .query(
                "SELECT sink, error, value_bytes, value_start FROM eddy_catalog.sink_errors",
                &[],
            )
            .await
            .unwrap();
        if let Some(row) = rows.into_iter().next() {
            break row;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(row.get::<_, String>(0), "out");
    let error: String = row.get(1);
    assert!(
        error.to_lowercase().contains("size") || error.to_lowercase().contains("large"),
        "{error}"
    );
    assert!(row.get::<_, i64>(2) > 5000);
    assert!(row
        .get::<_, String>(3)
        .starts_with(r#"{"id":2,"body":"xxx"#));
    let row = client
        .query_one(
            "SELECT state, messages_refused, last_error FROM eddy_catalog.sinks WHERE name = 'out'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "running");
    assert_eq!(row.get::<_, i64>(1), 1);
    assert!(row.get::<_, String>(2).contains("sink_errors"));
}

#[tokio::test]
async fn recover_and_a_graceful_restart_resume_without_doubling_and_metrics_show_the_sink() {
    let broker = KafkaBroker::from_env().expect("the test script starts a broker");
    let topic = unique_topic("sink_restarts");
    broker.create_topic(&topic, 2).await.unwrap();
    let metrics_port = eddy_sqllogictest::free_port().unwrap();
    let mut eddy = EddyProcess::start_fresh_with(|config| {
        config.extra_args = vec![
            "--metrics-listen".into(),
            format!("127.0.0.1:{metrics_port}"),
        ];
    })
    .await
    .unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT);
             CREATE SINK out FROM t WITH (connector = 'kafka', topic = '{topic}',
               properties.bootstrap.server = '{}') FORMAT UPSERT ENCODE JSON;
             INSERT INTO t SELECT value, value FROM generate_series(1, 100);
             RECOVER;
             UPDATE t SET v = v + 1 WHERE id <= 50;
             FLUSH;",
            broker.bootstrap()
        ))
        .await
        .unwrap();
    wait_delivered(&client, "out").await;
    let scraped = ureq::get(&format!("http://127.0.0.1:{metrics_port}/metrics"))
        .call()
        .expect("scrape")
        .body_mut()
        .read_to_string()
        .unwrap();
    let sent = scraped
        .lines()
        .find(|l| l.starts_with("eddy_sink_messages_sent_total{") && l.contains(r#"sink="out""#))
        .unwrap_or_else(|| panic!("no sink metrics in\n{scraped}"));
    assert!(sent.ends_with(" 150"), "{sent}");
    assert!(scraped.contains(r#"eddy_sink_bytes_behind{input="t",sink="out"} 0"#));

    eddy.terminate(Duration::from_secs(30)).await.unwrap();
    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute("DELETE FROM t WHERE id > 90; FLUSH;")
        .await
        .unwrap();
    wait_delivered(&client, "out").await;
    let messages = broker.read_all(&topic).unwrap();
    // 100 inserts, 50 updates, 10 deletes: each once, across RECOVER and the restart.
    assert_eq!(messages.len(), 160);
    let state = upsert_state(&messages);
    assert_eq!(state.len(), 90);
    assert_eq!(
        state[&json!({"id": 7}).to_string()],
        json!({"id": 7, "v": 8})
    );
    assert_eq!(
        state[&json!({"id": 70}).to_string()],
        json!({"id": 70, "v": 70})
    );
}
