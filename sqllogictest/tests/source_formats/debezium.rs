//! `FORMAT DEBEZIUM ENCODE JSON`: a Debezium-shaped change stream (snapshot reads, creates,
//! updates, a key change, deletes with their tombstones, events with and without Kafka
//! Connect's schema wrapper) applied to a table with a primary key.

use eddy_sqllogictest::kafka::{unique_topic, Record};

use crate::support::{setup, sqlstate, text_rows};

/// A bare event (`value.converter.schemas.enable=false`).
fn event(op: &str, before: &str, after: &str) -> Record {
    Record::payload(format!(
        r#"{{"before": {before}, "after": {after}, "op": "{op}", "ts_ms": 1700000000000,
            "source": {{"connector": "postgresql", "db": "shop", "table": "customers"}}}}"#
    ))
}

/// A wrapped event whose schema says how the timestamp and the decimal are encoded
/// (microseconds; base64 bytes with scale 2).
fn wrapped(op: &str, before: &str, after: &str) -> Record {
    let row = r#"{"type": "struct", "optional": true, "fields": [
        {"type": "int32", "optional": false, "field": "id"},
        {"type": "string", "optional": true, "field": "name"},
        {"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal",
         "version": 1, "parameters": {"scale": "2"}, "field": "balance"},
        {"type": "int64", "optional": true, "name": "io.debezium.time.MicroTimestamp",
         "version": 1, "field": "updated"}]"#;
    Record::payload(format!(
        r#"{{"schema": {{"type": "struct", "fields": [{row}, "field": "before"}}, {row}, "field": "after"}},
              {{"type": "string", "field": "op"}}]}},
            "payload": {{"before": {before}, "after": {after}, "op": "{op}", "ts_ms": 1700000000000}}}}"#
    ))
}

#[tokio::test]
async fn change_events_become_upserts_and_deletes_by_key() {
    let setup = setup().await;
    let (broker, client) = (&setup.broker, &setup.client);
    let topic = unique_topic("debezium");
    broker.create_topic(&topic, 1).await.unwrap();
    // 2023-11-14 22:13:20 UTC = 1700000000000 ms.
    let mut records = vec![
        event(
            "r",
            "null",
            r#"{"id": 1, "name": "ann", "balance": "10.50", "updated": 1700000000000}"#,
        ),
        event(
            "r",
            "null",
            r#"{"id": 2, "name": "bob", "balance": 20, "updated": 1700000000000}"#,
        ),
        event(
            "r",
            "null",
            r#"{"id": 3, "name": "cy", "balance": "30.00", "updated": null}"#,
        ),
        event(
            "r",
            "null",
            r#"{"id": 4, "name": "di", "balance": "40.00", "updated": null}"#,
        ),
        // 1700000001000000 microseconds; "AfQ=" = 0x01F4 = 500 at scale 2 = 5.00.
        wrapped(
            "c",
            "null",
            r#"{"id": 5, "name": "ed", "balance": "AfQ=", "updated": 1700000001000000}"#,
        ),
        event(
            "u",
            r#"{"id": 2, "name": "bob", "balance": 20, "updated": 1700000000000}"#,
            r#"{"id": 2, "name": "bobby", "balance": 21, "updated": 1700000002000}"#,
        ),
        // The key changes: 3 goes, 30 comes.
        event(
            "u",
            r#"{"id": 3, "name": "cy", "balance": "30.00", "updated": null}"#,
            r#"{"id": 30, "name": "cy", "balance": "30.00", "updated": null}"#,
        ),
        event(
            "d",
            r#"{"id": 4, "name": "di", "balance": "40.00", "updated": null}"#,
            "null",
        ),
        Record {
            key: Some(br#"{"id": 4}"#.to_vec()),
            ..Record::default()
        },
        // Three events that cannot be applied: dead letters with their reasons.
        Record::payload("{not json"),
        event("t", "null", "null"),
        event("c", "null", "null"),
        // A delete keyed by `before` alone (REPLICA IDENTITY DEFAULT sends only the key).
        wrapped("d", r#"{"id": 5}"#, "null"),
    ];
    for record in &mut records {
        record.key.get_or_insert_with(|| b"{}".to_vec());
    }
    broker.produce_batch(&topic, &records).await.unwrap();

    let bootstrap = broker.bootstrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR, balance DECIMAL(10, 2),
                                     updated TIMESTAMP)
             WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{bootstrap}',
                   scan.startup.mode = 'earliest')
             FORMAT DEBEZIUM ENCODE JSON;
             CREATE MATERIALIZED VIEW totals AS
               SELECT count(*) AS n, sum(balance) AS total FROM customers;
             FLUSH;"
        ))
        .await
        .unwrap();
    assert_eq!(
        text_rows(
            client,
            "SELECT id, name, balance, updated FROM customers ORDER BY id"
        )
        .await,
        vec![
            "1|ann|10.50|2023-11-14 22:13:20",
            "2|bobby|21.00|2023-11-14 22:13:22",
            "30|cy|30.00|NULL",
        ]
    );
    assert_eq!(
        text_rows(client, "SELECT n, total FROM totals").await,
        vec!["3|61.50"]
    );
    let errors = text_rows(
        client,
        "SELECT \"offset\", error FROM eddy_catalog.source_errors ORDER BY \"offset\"",
    )
    .await;
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors[0].starts_with("9|") && errors[0].contains("not a Debezium event"),
        "{errors:?}"
    );
    assert!(
        errors[1].starts_with("10|") && errors[1].contains("truncate"),
        "{errors:?}"
    );
    assert!(
        errors[2].starts_with("11|") && errors[2].contains("without \"after\""),
        "{errors:?}"
    );

    // Changes after the view exists arrive as retractions and insertions.
    broker
        .produce_batch(
            &topic,
            &[
                event("d", r#"{"id": 30}"#, "null").with_key("{}"),
                event(
                    "u",
                    "null",
                    r#"{"id": 1, "name": "ann", "balance": "11.50", "updated": null}"#,
                )
                .with_key("{}"),
                wrapped(
                    "c",
                    "null",
                    r#"{"id": 6, "name": "flo", "balance": "/zg=", "updated": 0}"#,
                )
                .with_key("{}"),
            ],
        )
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    // "/zg=" = 0xFF38 = -200 at scale 2.
    assert_eq!(
        text_rows(
            client,
            "SELECT id, name, balance, updated FROM customers ORDER BY id"
        )
        .await,
        vec![
            "1|ann|11.50|NULL",
            "2|bobby|21.00|2023-11-14 22:13:22",
            "6|flo|-2.00|1970-01-01 00:00:00",
        ]
    );
    assert_eq!(
        text_rows(client, "SELECT n, total FROM totals").await,
        vec!["3|30.50"]
    );
}

#[tokio::test]
async fn debezium_statements_that_cannot_work_say_why() {
    let setup = setup().await;
    let client = &setup.client;
    let topic = unique_topic("debezium_refused");
    setup.broker.create_topic(&topic, 1).await.unwrap();
    let with = format!(
        "WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{}')",
        setup.broker.bootstrap()
    );
    // Without a primary key there is nothing to apply a change to.
    assert_eq!(
        sqlstate(
            client,
            &format!("CREATE TABLE t (id INT, v INT) {with} FORMAT DEBEZIUM ENCODE JSON")
        )
        .await,
        "42P16"
    );
    // A source keeps no rows for a later change to replace.
    assert_eq!(
        sqlstate(
            client,
            &format!(
                "CREATE SOURCE s (id INT PRIMARY KEY, v INT) {with} FORMAT DEBEZIUM ENCODE JSON"
            )
        )
        .await,
        "0A000"
    );
    assert_eq!(
        sqlstate(
            client,
            &format!(
                "CREATE TABLE t (id INT PRIMARY KEY, v INT) {with} FORMAT DEBEZIUM ENCODE CSV"
            )
        )
        .await,
        "0A000"
    );
    assert_eq!(
        sqlstate(
            client,
            &format!(
                "CREATE TABLE t (id INT PRIMARY KEY, v INT) {with} FORMAT DEBEZIUMS ENCODE JSON"
            )
        )
        .await,
        "0A000"
    );
}
