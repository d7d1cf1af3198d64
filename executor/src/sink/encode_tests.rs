use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde_json::Value;

use super::*;
use crate::sink::{SinkEncode, SinkSpec};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]))
}

fn spec(format: SinkFormat, key_columns: Vec<usize>) -> SinkSpec {
    SinkSpec {
        name: "s".into(),
        input: "v".into(),
        connector: "kafka".into(),
        format,
        encode: SinkEncode::Json,
        options: BTreeMap::new(),
        schema: schema(),
        key_columns,
        force_append_only: false,
        snapshot: true,
        log_max_bytes: 1 << 20,
    }
}

/// `rows`: (op, id, name).
fn chunk(rows: &[(Op, i64, &str)]) -> StreamChunk {
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1)));
    let names: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2)));
    StreamChunk::new(
        rows.iter().map(|r| r.0).collect(),
        &schema(),
        vec![ids.clone(), names],
        vec![ids],
    )
    .unwrap()
}

fn encode(
    spec: &SinkSpec,
    chunk: &StreamChunk,
    snapshot: bool,
) -> Vec<(Option<String>, Option<String>)> {
    let mut out = Vec::new();
    SinkEncoder::new(spec)
        .encode(chunk, snapshot, 5, 1_000, &mut out)
        .unwrap();
    out.into_iter()
        .map(|m| {
            (
                m.key.map(|k| String::from_utf8(k).unwrap()),
                m.value.map(|v| String::from_utf8(v).unwrap()),
            )
        })
        .collect()
}

fn some(text: &str) -> Option<String> {
    Some(text.to_string())
}

#[test]
fn upsert_writes_rows_and_tombstones() {
    let changes = chunk(&[
        (Op::Insert, 1, "a"),
        (Op::UpdateDelete, 1, "a"),
        (Op::UpdateInsert, 1, "b"),
        (Op::Delete, 2, "x"),
        // An update that moves the key: the old key is deleted.
        (Op::UpdateDelete, 3, "c"),
        (Op::UpdateInsert, 4, "c"),
    ]);
    assert_eq!(
        encode(&spec(SinkFormat::Upsert, vec![0]), &changes, false),
        [
            (some(r#"{"id":1}"#), some(r#"{"id":1,"name":"a"}"#)),
            (some(r#"{"id":1}"#), some(r#"{"id":1,"name":"b"}"#)),
            (some(r#"{"id":2}"#), None),
            (some(r#"{"id":3}"#), None),
            (some(r#"{"id":4}"#), some(r#"{"id":4,"name":"c"}"#)),
        ]
    );
}

#[test]
fn plain_writes_new_rows_only() {
    let changes = chunk(&[
        (Op::Insert, 1, "a"),
        (Op::UpdateDelete, 1, "a"),
        (Op::UpdateInsert, 1, "b"),
        (Op::Delete, 1, "b"),
    ]);
    assert_eq!(
        encode(&spec(SinkFormat::Plain, vec![]), &changes, false),
        [
            (None, some(r#"{"id":1,"name":"a"}"#)),
            (None, some(r#"{"id":1,"name":"b"}"#)),
        ]
    );
}

#[test]
fn debezium_envelopes_with_snapshot_reads_and_tombstones() {
    let spec = spec(SinkFormat::Debezium, vec![0]);
    let snapshot = encode(&spec, &chunk(&[(Op::Insert, 1, "a")]), true);
    let event: Value = serde_json::from_str(snapshot[0].1.as_deref().unwrap()).unwrap();
    assert_eq!(event["op"], "r");
    assert_eq!(event["before"], Value::Null);
    assert_eq!(event["after"]["name"], "a");
    assert_eq!(event["ts_ms"], 1_000);
    assert_eq!(event["source"]["snapshot"], "true");
    assert_eq!(event["source"]["table"], "v");

    let changes = chunk(&[
        (Op::Insert, 2, "b"),
        (Op::UpdateDelete, 2, "b"),
        (Op::UpdateInsert, 2, "c"),
        (Op::Delete, 2, "c"),
        (Op::UpdateDelete, 3, "x"),
        (Op::UpdateInsert, 4, "x"),
    ]);
    let messages = encode(&spec, &changes, false);
    let ops: Vec<(Option<String>, Option<String>)> = messages
        .iter()
        .map(|(key, value)| {
            let op = value.as_deref().map(|v| {
                let event: Value = serde_json::from_str(v).unwrap();
                event["op"].as_str().unwrap().to_string()
            });
            (key.clone(), op)
        })
        .collect();
    assert_eq!(
        ops,
        [
            (some(r#"{"id":2}"#), some("c")),
            (some(r#"{"id":2}"#), some("u")),
            (some(r#"{"id":2}"#), some("d")),
            (some(r#"{"id":2}"#), None),
            (some(r#"{"id":3}"#), some("d")),
            (some(r#"{"id":3}"#), None),
            (some(r#"{"id":4}"#), some("c")),
        ]
    );
    let update: Value = serde_json::from_str(messages[1].1.as_deref().unwrap()).unwrap();
    assert_eq!(update["before"]["name"], "b");
    assert_eq!(update["after"]["name"], "c");
    let delete: Value = serde_json::from_str(messages[2].1.as_deref().unwrap()).unwrap();
    assert_eq!(delete["before"]["name"], "c");
    assert_eq!(delete["after"], Value::Null);
}
