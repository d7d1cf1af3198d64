use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{
    Date32Type, Decimal128Type, Field, Int64Type, Time64MicrosecondType, TimeUnit,
    TimestampMicrosecondType,
};

use super::*;
use crate::connector::decode::Decoder;
use crate::connector::Encode;

fn columns() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("day", DataType::Date32, true),
        Field::new("at", DataType::Time64(TimeUnit::Microsecond), true),
        Field::new("price", DataType::Decimal128(10, 2), true),
    ])
}

fn changes(event: &str) -> Result<Vec<(Value, bool)>, String> {
    Ok(event_changes(Some(event.as_bytes()), &columns(), &[0])?
        .into_iter()
        .map(|c| (serde_json::from_slice(&c.row).unwrap(), c.delete))
        .collect())
}

#[test]
fn each_op_gives_its_changes() {
    let created = changes(r#"{"before": null, "after": {"id": 1, "name": "a"}, "op": "c"}"#);
    assert_eq!(
        created.unwrap(),
        vec![(serde_json::json!({"id": 1, "name": "a"}), false)]
    );
    let read = changes(r#"{"after": {"id": 2}, "op": "r"}"#).unwrap();
    assert_eq!(read, vec![(serde_json::json!({"id": 2}), false)]);
    // An update that keeps the key is one upsert, also when `before` is absent.
    for before in ["null", r#"{"id": 1, "name": "a"}"#] {
        let event =
            format!(r#"{{"before": {before}, "after": {{"id": 1, "name": "b"}}, "op": "u"}}"#);
        assert_eq!(
            changes(&event).unwrap(),
            vec![(serde_json::json!({"id": 1, "name": "b"}), false)]
        );
    }
    // A key change deletes the old key first.
    let moved = changes(r#"{"before": {"id": 1}, "after": {"id": 7, "name": "b"}, "op": "u"}"#);
    assert_eq!(
        moved.unwrap(),
        vec![
            (serde_json::json!({"id": 1}), true),
            (serde_json::json!({"id": 7, "name": "b"}), false)
        ]
    );
    let deleted = changes(r#"{"before": {"id": 7, "name": "b"}, "after": null, "op": "d"}"#);
    assert_eq!(
        deleted.unwrap(),
        vec![(serde_json::json!({"id": 7, "name": "b"}), true)]
    );
    // A tombstone changes nothing.
    assert_eq!(event_changes(None, &columns(), &[0]).unwrap(), vec![]);
}

#[test]
fn events_that_cannot_be_applied_say_why() {
    for (event, why) in [
        (
            r#"{"before": null, "after": null, "op": "c"}"#,
            "without \"after\"",
        ),
        (
            r#"{"before": null, "after": null, "op": "d"}"#,
            "without \"before\"",
        ),
        (r#"{"after": [1], "op": "r"}"#, "not a JSON object"),
        (r#"{"op": "t"}"#, "truncate"),
        (r#"{"after": {"id": 1}}"#, "no \"op\""),
        (r#"{"after": {"id": 1}, "op": "x"}"#, "unknown op"),
        (
            r#"{"after": {"id": 1, "price": "%%"}, "op": "c"}"#,
            "neither a number",
        ),
        ("{oops", "not a Debezium event"),
    ] {
        let error = changes(event).unwrap_err();
        assert!(error.contains(why), "{event}: {error}");
    }
}

#[test]
fn debezium_encodings_by_schema_and_by_column_type() {
    // 2024-01-02T03:04:05.123456Z; 19724 = 2024-01-02; 12:00:00.5; 1234.56 as base64 bytes
    // (0x01E240 = 123456).
    let wrapped = r#"{
        "schema": {"type": "struct", "fields": [
            {"type": "struct", "field": "before", "fields": []},
            {"type": "struct", "field": "after", "fields": [
                {"type": "int64", "field": "id"},
                {"type": "int64", "field": "ts", "name": "io.debezium.time.MicroTimestamp"},
                {"type": "int32", "field": "day", "name": "io.debezium.time.Date"},
                {"type": "int64", "field": "at", "name": "io.debezium.time.MicroTime"},
                {"type": "bytes", "field": "price", "name": "org.apache.kafka.connect.data.Decimal",
                 "parameters": {"scale": "2"}}
            ]}
        ]},
        "payload": {"before": null, "after": {"id": 1, "ts": 1704164645123456, "day": 19724,
                    "at": 43200500000, "price": "AeJA"}, "op": "c", "ts_ms": 1}
    }"#;
    let bare_millis = r#"{"after": {"id": 2, "ts": 1704164645123, "day": "2024-01-02",
        "at": 43200500000, "price": "1234.56"}, "op": "r"}"#;
    let nanos_and_variable_scale = r#"{"after": {"id": 3, "ts": 1704164645123456789,
        "price": {"scale": 1, "value": "/zI="}}, "op": "c"}"#;
    let rows: Vec<Vec<u8>> = [wrapped, bare_millis, nanos_and_variable_scale]
        .iter()
        .map(|e| {
            let changes = event_changes(Some(e.as_bytes()), &columns(), &[0]).unwrap();
            changes.into_iter().next().unwrap().row
        })
        .collect();
    let decoder = Decoder::new(Arc::new(columns()), Encode::Json);
    let messages: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
    let decoded = decoder.decode(&messages);
    assert!(decoded.bad.is_empty(), "{:?} from {rows:?}", decoded.bad);
    let batch = decoded.rows;
    let ids = batch.column(0).as_primitive::<Int64Type>();
    assert_eq!((ids.value(0), ids.value(2)), (1, 3));
    let ts = batch.column(2).as_primitive::<TimestampMicrosecondType>();
    assert_eq!(ts.value(0), 1_704_164_645_123_456);
    assert_eq!(ts.value(1), 1_704_164_645_123_000);
    assert_eq!(ts.value(2), 1_704_164_645_123_456);
    let days = batch.column(3).as_primitive::<Date32Type>();
    assert_eq!((days.value(0), days.value(1)), (19_724, 19_724));
    let times = batch.column(4).as_primitive::<Time64MicrosecondType>();
    assert_eq!(times.value(0), 43_200_500_000);
    let prices = batch.column(5).as_primitive::<Decimal128Type>();
    assert_eq!((prices.value(0), prices.value(1)), (123_456, 123_456));
    // 0xFF32 = -206 at scale 1: -20.6, i.e. -2060 at the column's scale 2.
    assert_eq!(prices.value(2), -2_060);
    assert!(batch.column(3).is_null(2));
}

#[test]
fn decimal_text_of_every_scale() {
    assert_eq!(decimal_text(123_456, 2), "1234.56");
    assert_eq!(decimal_text(-5, 3), "-0.005");
    assert_eq!(decimal_text(0, 2), "0.00");
    assert_eq!(decimal_text(12, -2), "1200");
    assert_eq!(decimal_text(7, 0), "7");
}
