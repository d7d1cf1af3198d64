//! `ENCODE AVRO`: datums written by fastavro (Avro's reference Python library), bare and in
//! Confluent's wire format, read into columns inferred from the schema file; a bad message is
//! a dead letter; appending a field with a default keeps the older messages readable.

use eddy_sqllogictest::kafka::{unique_topic, Record};

use crate::support::{column_types, earliest_from, encode_messages, setup, sqlstate, text_rows};

const ORDER_V1: &str = r#"{"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": ["null", "string"], "default": null},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "items", "type": {"type": "array", "items": "string"}},
    {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
        {"name": "city", "type": "string"}]}}
]}"#;

/// Version 2 appends a field with a default.
fn order_v2() -> String {
    ORDER_V1.replacen(
        "\n]}",
        r#", {"name": "coupon", "type": ["null", "string"], "default": null}
]}"#,
        1,
    )
}

fn order(id: i64, customer: Option<&str>, coupon: Option<Option<&str>>) -> String {
    let customer = customer.map_or("null".to_string(), |c| format!("\"{c}\""));
    let coupon = match coupon {
        None => String::new(),
        Some(None) => r#", "coupon": null"#.to_string(),
        Some(Some(c)) => format!(r#", "coupon": "{c}""#),
    };
    // 1700000000 s = 2023-11-14 22:13:20 UTC; day 19675 = 2023-11-14.
    format!(
        r#"{{"id": {id}, "customer": {customer}, "amount": "{id}.25", "placed": {}, "day": 19675,
            "status": "PAID", "items": ["a", "b{id}"], "address": {{"city": "c{id}"}}{coupon}}}"#,
        1_700_000_000_000_000i64 + id * 1_000_000
    )
    .replace('\n', " ")
}

#[tokio::test]
async fn avro_datums_into_inferred_columns_and_a_schema_change() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = dir.path().join("order_v1.avsc");
    std::fs::write(&v1, ORDER_V1).unwrap();
    let v2 = dir.path().join("order_v2.avsc");
    std::fs::write(&v2, order_v2()).unwrap();
    let Some(bare) = encode_messages(
        &["avro", v1.to_str().unwrap()],
        &[order(1, Some("ann"), None), order(2, None, None)],
    ) else {
        return;
    };
    let framed = encode_messages(
        &["avro", v1.to_str().unwrap(), "--confluent-id", "7"],
        &[order(3, Some("cy"), None)],
    )
    .unwrap();
    let newer = encode_messages(
        &["avro", v2.to_str().unwrap()],
        &[
            order(4, Some("di"), Some(Some("SAVE10"))),
            order(5, None, Some(None)),
        ],
    )
    .unwrap();

    let setup = setup().await;
    let (broker, client) = (&setup.broker, &setup.client);
    let topic = unique_topic("avro");
    broker.create_topic(&topic, 1).await.unwrap();
    let mut records: Vec<Record> = bare
        .into_iter()
        .chain(framed)
        .map(Record::payload)
        .collect();
    records.push(Record::payload(b"\x02\xff\xff not avro".to_vec()));
    broker.produce_batch(&topic, &records).await.unwrap();

    let with = earliest_from(broker, &topic);
    client
        .batch_execute(&format!(
            "CREATE SOURCE orders {with} FORMAT PLAIN ENCODE AVRO (schema.location = 'file://{}');
             CREATE MATERIALIZED VIEW all_orders AS SELECT * FROM orders;
             FLUSH;",
            v1.display()
        ))
        .await
        .unwrap();
    assert_eq!(
        column_types(client, "orders").await,
        vec![
            "id|bigint",
            "customer|character varying",
            "amount|numeric",
            "placed|timestamp with time zone",
            "day|date",
            "status|character varying",
            "items|ARRAY",
            "address|jsonb",
        ]
    );
    assert_eq!(
        text_rows(client, "SELECT * FROM all_orders ORDER BY id").await,
        vec![
            r#"1|ann|1.25|2023-11-14 22:13:21+00|2023-11-14|PAID|{a,b1}|{"city": "c1"}"#,
            r#"2|NULL|2.25|2023-11-14 22:13:22+00|2023-11-14|PAID|{a,b2}|{"city": "c2"}"#,
            r#"3|cy|3.25|2023-11-14 22:13:23+00|2023-11-14|PAID|{a,b3}|{"city": "c3"}"#,
        ]
    );
    let errors = text_rows(
        client,
        "SELECT \"offset\", error FROM eddy_catalog.source_errors",
    )
    .await;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("3|") && errors[0].contains("Avro"),
        "{errors:?}"
    );

    // The writer moves to version 2; the source is re-created with it and reads both.
    broker
        .produce_batch(
            &topic,
            &newer.into_iter().map(Record::payload).collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    client
        .batch_execute(&format!(
            "DROP MATERIALIZED VIEW all_orders; DROP SOURCE orders;
             CREATE SOURCE orders {with} FORMAT PLAIN ENCODE AVRO (schema.location = 'file://{}');
             CREATE MATERIALIZED VIEW coupons AS SELECT id, customer, coupon FROM orders;
             FLUSH;",
            v2.display()
        ))
        .await
        .unwrap();
    assert_eq!(
        text_rows(client, "SELECT * FROM coupons ORDER BY id").await,
        vec![
            "1|ann|NULL",
            "2|NULL|NULL",
            "3|cy|NULL",
            "4|di|SAVE10",
            "5|NULL|NULL"
        ]
    );
    // The schema is kept with the source: a restart does not read the file again.
    std::fs::write(&v2, "{no longer a schema").unwrap();
    let mut eddy = setup._eddy;
    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    assert_eq!(
        text_rows(&client, "SELECT count(*) FROM coupons").await,
        vec!["5"]
    );
    // A schema that cannot be read, a missing file, a registry, no column list for JSON.
    assert_eq!(
        sqlstate(
            &client,
            &format!(
            "CREATE SOURCE broken {with} FORMAT PLAIN ENCODE AVRO (schema.location = 'file://{}')",
            v2.display()
        )
        )
        .await,
        "22023"
    );
    assert_eq!(
        sqlstate(&client, &format!(
            "CREATE SOURCE broken {with} FORMAT PLAIN ENCODE AVRO (schema.location = 'file:///nowhere.avsc')"
        ))
        .await,
        "58P01"
    );
    assert_eq!(
        sqlstate(&client, &format!(
            "CREATE SOURCE broken {with} FORMAT PLAIN ENCODE AVRO (schema.location = 'http://registry:8081')"
        ))
        .await,
        "0A000"
    );
    assert_eq!(
        sqlstate(
            &client,
            &format!("CREATE SOURCE broken {with} FORMAT PLAIN ENCODE JSON")
        )
        .await,
        "42601"
    );
    // A declared column the schema's type cannot become.
    assert_eq!(
        sqlstate(
            &client,
            &format!(
                "CREATE SOURCE broken (id BIGINT, placed BOOLEAN) {with}
             FORMAT PLAIN ENCODE AVRO (schema.location = 'file://{}')",
                v1.display()
            )
        )
        .await,
        "42804"
    );
}

const ACCOUNT: &str = r#"{"type": "record", "name": "Account", "fields": [
    {"name": "id", "type": "long"}, {"name": "owner", "type": "string"},
    {"name": "balance", "type": "long"}]}"#;
const ACCOUNT_KEY: &str =
    r#"{"type": "record", "name": "AccountKey", "fields": [{"name": "id", "type": "long"}]}"#;

#[tokio::test]
async fn upsert_avro_with_a_key_schema() {
    let dir = tempfile::tempdir().unwrap();
    let value_schema = dir.path().join("account.avsc");
    std::fs::write(&value_schema, ACCOUNT).unwrap();
    let key_schema = dir.path().join("account_key.avsc");
    std::fs::write(&key_schema, ACCOUNT_KEY).unwrap();
    let account = |id: i64, owner: &str, balance: i64| {
        format!(r#"{{"id": {id}, "owner": "{owner}", "balance": {balance}}}"#)
    };
    let Some(values) = encode_messages(
        &["avro", value_schema.to_str().unwrap()],
        &[
            account(1, "ann", 10),
            account(2, "bob", 20),
            account(3, "cy", 30),
            account(2, "bob", 25),
        ],
    ) else {
        return;
    };
    let keys = encode_messages(
        &["avro", key_schema.to_str().unwrap()],
        &[r#"{"id": 1}"#.to_string(), r#"{"id": 2}"#.to_string()],
    )
    .unwrap();
    let framed_key = encode_messages(
        &["avro", key_schema.to_str().unwrap(), "--confluent-id", "3"],
        &[r#"{"id": 3}"#.to_string()],
    )
    .unwrap();
    let setup = setup().await;
    let (broker, client) = (&setup.broker, &setup.client);
    let topic = unique_topic("avro_upsert");
    broker.create_topic(&topic, 1).await.unwrap();
    let tombstone = |key: &[u8]| Record {
        key: Some(key.to_vec()),
        ..Record::default()
    };
    let mut records: Vec<Record> = values.into_iter().map(Record::payload).collect();
    // Delete 1, then 3 (its key in Confluent's framing), then 2 comes back after its delete.
    records.push(tombstone(&keys[0]));
    records.push(tombstone(&framed_key[0]));
    records.push(tombstone(&keys[1]));
    let again = encode_messages(
        &["avro", value_schema.to_str().unwrap()],
        &[account(2, "bob", 7)],
    )
    .unwrap();
    records.push(Record::payload(again[0].clone()));
    broker.produce_batch(&topic, &records).await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE accounts (PRIMARY KEY (id))
             WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{}',
                   scan.startup.mode = 'earliest')
             FORMAT UPSERT ENCODE AVRO (schema.location = 'file://{}',
                                        key.schema.location = 'file://{}');
             CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n, sum(balance) AS balance FROM accounts;
             FLUSH;",
            broker.bootstrap(),
            value_schema.display(),
            key_schema.display()
        ))
        .await
        .unwrap();
    assert_eq!(
        text_rows(
            client,
            "SELECT id, owner, balance FROM accounts ORDER BY id"
        )
        .await,
        vec!["2|bob|7"]
    );
    assert_eq!(
        text_rows(client, "SELECT n, balance FROM total").await,
        vec!["1|7"]
    );
    assert_eq!(
        text_rows(client, "SELECT count(*) FROM eddy_catalog.source_errors").await,
        vec!["0"]
    );
}
