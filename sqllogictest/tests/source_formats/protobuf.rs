//! `ENCODE PROTOBUF`: messages serialized by Google's protobuf library from a descriptor set
//! compiled by protoc, read into columns inferred from the message type; a newer writer's
//! field is skipped; a bad message is a dead letter.

use eddy_sqllogictest::kafka::{unique_topic, Record};

use crate::support::{
    column_types, earliest_from, encode_messages, protoc, setup, sqlstate, text_rows,
};

const ORDER_PROTO: &str = r#"syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Address { string city = 1; }
message Order {
  enum Status { NEW = 0; PAID = 1; }
  int64 id = 1;
  string customer = 2;
  double amount = 3;
  google.protobuf.Timestamp placed = 4;
  Status status = 5;
  repeated string items = 6;
  Address address = 7;
  google.protobuf.Int64Value coupon = 8;
  NEXT_FIELD
}
"#;

#[tokio::test]
async fn protobuf_messages_into_inferred_columns() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("order.proto"),
        ORDER_PROTO.replace("NEXT_FIELD", ""),
    )
    .unwrap();
    // The writer's newer version adds a field the source's descriptors do not know.
    std::fs::write(
        dir.path().join("order_v2.proto"),
        ORDER_PROTO.replace("NEXT_FIELD", "string note = 9;"),
    )
    .unwrap();
    let Some(v1) = protoc(dir.path(), "order.proto") else {
        return;
    };
    let v2 = protoc(dir.path(), "order_v2.proto").unwrap();
    let messages = encode_messages(
        &["protobuf", v1.to_str().unwrap(), "shop.Order"],
        &[
            r#"{"id": "1", "customer": "ann", "amount": 1.25, "placed": "2023-11-14T22:13:21Z",
                "status": "PAID", "items": ["a", "b1"], "address": {"city": "c1"}, "coupon": "5"}"#
                .replace('\n', " "),
            r#"{"id": "2"}"#.to_string(),
        ],
    )
    .unwrap();
    let newer = encode_messages(
        &["protobuf", v2.to_str().unwrap(), "shop.Order"],
        &[r#"{"id": "3", "customer": "cy", "note": "new field"}"#.to_string()],
    )
    .unwrap();

    let setup = setup().await;
    let (broker, client) = (&setup.broker, &setup.client);
    let topic = unique_topic("protobuf");
    broker.create_topic(&topic, 1).await.unwrap();
    let mut records: Vec<Record> = messages
        .into_iter()
        .chain(newer)
        .map(Record::payload)
        .collect();
    // Field 1 as a length-delimited value of 200 bytes that are not there.
    records.push(Record::payload(vec![0x0a, 0xc8, 0x01, 0x01]));
    broker.produce_batch(&topic, &records).await.unwrap();
    let with = earliest_from(broker, &topic);
    client
        .batch_execute(&format!(
            "CREATE TABLE orders {with}
             FORMAT PLAIN ENCODE PROTOBUF (message = 'shop.Order', schema.location = 'file://{}');
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
            "amount|double precision",
            "placed|timestamp with time zone",
            "status|character varying",
            "items|ARRAY",
            "address|jsonb",
            "coupon|bigint",
        ]
    );
    // Fields a message leaves out take proto3's defaults (unset messages are NULL).
    assert_eq!(
        text_rows(client, "SELECT * FROM orders ORDER BY id").await,
        vec![
            r#"1|ann|1.25|2023-11-14 22:13:21+00|PAID|{a,b1}|{"city": "c1"}|5"#,
            "2||0|NULL|NEW|{}|NULL|NULL",
            "3|cy|0|NULL|NEW|{}|NULL|NULL",
        ]
    );
    let errors = text_rows(
        client,
        "SELECT \"offset\", error FROM eddy_catalog.source_errors",
    )
    .await;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("3|") && errors[0].contains("shop.Order"),
        "{errors:?}"
    );
    assert_eq!(
        sqlstate(
            client,
            &format!(
                "CREATE SOURCE broken {with}
                 FORMAT PLAIN ENCODE PROTOBUF (message = 'Order', schema.location = 'file://{}')",
                v1.display()
            )
        )
        .await,
        "22023"
    );
    assert_eq!(
        sqlstate(
            client,
            &format!("CREATE SOURCE broken {with} FORMAT PLAIN ENCODE PROTOBUF (schema.location = 'file://{}')", v1.display())
        )
        .await,
        "22023"
    );
}
