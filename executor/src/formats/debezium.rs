//! Debezium's change-event envelope in JSON: `{"before", "after", "op", "ts_ms", "source"}`.
//!
//! Written by the Debezium sink format and read by a Debezium source, so both sides agree on
//! field names and operation codes. `op` is `c` (create), `u` (update), `d` (delete), `r` (a
//! row read by a snapshot) or `t` (truncate). A delete is followed by a tombstone (the key with
//! a null value) so that a compacted topic forgets the key, as Debezium does by default.

use std::collections::HashMap;

use serde_json::Value;

use crate::formats::json::write_string;
use crate::{ExecError, Result};

/// What a change event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DebeziumOp {
    Create,
    Update,
    Delete,
    /// A row of the initial snapshot.
    Read,
    Truncate,
}

impl DebeziumOp {
    /// The `op` field's value.
    pub fn code(self) -> &'static str {
        match self {
            DebeziumOp::Create => "c",
            DebeziumOp::Update => "u",
            DebeziumOp::Delete => "d",
            DebeziumOp::Read => "r",
            DebeziumOp::Truncate => "t",
        }
    }

    pub fn from_code(code: &str) -> Option<Self> {
        Some(match code {
            "c" => DebeziumOp::Create,
            "u" => DebeziumOp::Update,
            "d" => DebeziumOp::Delete,
            "r" => DebeziumOp::Read,
            "t" => DebeziumOp::Truncate,
            _ => return None,
        })
    }
}

/// Appends one envelope to `out`. `before` and `after` are JSON objects (or `None` for null),
/// `source` a JSON object describing where the change comes from; `ts_ms` is when it was
/// processed (milliseconds since 1970).
pub fn write_envelope(
    before: Option<&str>,
    after: Option<&str>,
    op: DebeziumOp,
    ts_ms: i64,
    source: &str,
    out: &mut String,
) {
    out.push_str("{\"before\":");
    out.push_str(before.unwrap_or("null"));
    out.push_str(",\"after\":");
    out.push_str(after.unwrap_or("null"));
    out.push_str(",\"op\":\"");
    out.push_str(op.code());
    out.push_str("\",\"ts_ms\":");
    out.push_str(&ts_ms.to_string());
    out.push_str(",\"source\":");
    out.push_str(source);
    out.push('}');
}

/// The `source` block of events Eddy writes: which sink and relation, the epoch, and whether
/// the row comes from the snapshot.
pub fn eddy_source(sink: &str, relation: &str, epoch: u64, ts_ms: i64, snapshot: bool) -> String {
    let mut out = String::from("{\"connector\":\"eddy\",\"name\":");
    write_string(sink, &mut out);
    out.push_str(",\"db\":\"dev\",\"schema\":\"public\",\"table\":");
    write_string(relation, &mut out);
    out.push_str(&format!(
        ",\"epoch\":{epoch},\"ts_ms\":{ts_ms},\"snapshot\":\"{snapshot}\"}}"
    ));
    out
}

/// One change event read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub op: DebeziumOp,
    pub before: Option<Value>,
    pub after: Option<Value>,
    pub ts_ms: Option<i64>,
    /// The row fields' logical types when the event came with its Kafka Connect schema
    /// (`io.debezium.time.MicroTimestamp`, `org.apache.kafka.connect.data.Decimal`, ...).
    pub field_types: HashMap<String, ConnectType>,
}

/// A row field's type as Kafka Connect's schema names it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConnectType {
    /// The logical type's name, if any.
    pub name: Option<String>,
    /// A decimal's scale (the `scale` parameter).
    pub scale: Option<i8>,
}

/// Reads an event, bare or wrapped as Kafka Connect's JsonConverter writes it with
/// `schemas.enable` (`{"schema": ..., "payload": {...}}`). `Ok(None)` for a tombstone (no value).
pub fn read_envelope(value: Option<&[u8]>) -> Result<Option<Envelope>> {
    let Some(bytes) = value else {
        return Ok(None);
    };
    let bad = |why: String| ExecError::InvalidOption(format!("not a Debezium event: {why}"));
    let mut event: Value = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    let mut field_types = HashMap::new();
    if event.get("payload").is_some() && event.get("op").is_none() {
        field_types = row_field_types(&event["schema"]);
        event = event["payload"].take();
    }
    let Value::Object(mut fields) = event else {
        return Err(bad("the event is not a JSON object".into()));
    };
    let op = fields
        .get("op")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no \"op\" field".into()))?;
    let op = DebeziumOp::from_code(op).ok_or_else(|| bad(format!("unknown op \"{op}\"")))?;
    let row = |value: Option<Value>| value.filter(|v| !v.is_null());
    Ok(Some(Envelope {
        op,
        before: row(fields.remove("before")),
        after: row(fields.remove("after")),
        ts_ms: fields.get("ts_ms").and_then(Value::as_i64),
        field_types,
    }))
}

/// The logical types of the row struct's fields (`after`'s, else `before`'s) in a Connect
/// schema: `{"type": "struct", "fields": [{"field": "after", "fields": [...]}, ...]}`.
fn row_field_types(schema: &Value) -> HashMap<String, ConnectType> {
    let envelope_fields = schema.get("fields").and_then(Value::as_array);
    let row = envelope_fields.and_then(|fields| {
        ["after", "before"].iter().find_map(|side| {
            fields
                .iter()
                .find(|f| f.get("field").and_then(Value::as_str) == Some(side))
        })
    });
    let Some(columns) = row.and_then(|r| r.get("fields")).and_then(Value::as_array) else {
        return HashMap::new();
    };
    columns
        .iter()
        .filter_map(|column| {
            let field = column.get("field")?.as_str()?;
            let scale = column
                .get("parameters")
                .and_then(|p| p.get("scale"))
                .and_then(|s| match s {
                    Value::String(s) => s.parse().ok(),
                    other => other.as_i64().and_then(|s| i8::try_from(s).ok()),
                });
            let name = column
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_owned);
            Some((field.to_owned(), ConnectType { name, scale }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_envelopes_read_back() {
        let source = eddy_source("s", "v", 7, 1000, false);
        for (before, after, op) in [
            (None, Some(r#"{"id":1}"#), DebeziumOp::Create),
            (Some(r#"{"id":1}"#), Some(r#"{"id":2}"#), DebeziumOp::Update),
            (Some(r#"{"id":2}"#), None, DebeziumOp::Delete),
            (None, Some(r#"{"id":3}"#), DebeziumOp::Read),
        ] {
            let mut text = String::new();
            write_envelope(before, after, op, 1234, &source, &mut text);
            let event = read_envelope(Some(text.as_bytes())).unwrap().unwrap();
            assert_eq!(event.op, op);
            assert_eq!(
                event.before,
                before.map(|b| serde_json::from_str(b).unwrap())
            );
            assert_eq!(event.after, after.map(|a| serde_json::from_str(a).unwrap()));
            assert_eq!(event.ts_ms, Some(1234));
            let parsed: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(parsed["source"]["epoch"], 7);
            assert_eq!(parsed["source"]["name"], "s");
        }
    }

    #[test]
    fn wrapped_events_tombstones_and_garbage() {
        let wrapped = br#"{"schema": {"type": "struct"}, "payload": {"before": null, "after": {"id": 1}, "op": "r", "ts_ms": 5}}"#;
        let event = read_envelope(Some(wrapped)).unwrap().unwrap();
        assert_eq!(event.op, DebeziumOp::Read);
        assert_eq!(event.before, None);
        assert_eq!(read_envelope(None).unwrap(), None);
        assert!(read_envelope(Some(b"{\"op\": \"x\"}")).is_err());
        assert!(read_envelope(Some(b"[1]")).is_err());
        assert!(read_envelope(Some(b"{broken")).is_err());
    }
}
