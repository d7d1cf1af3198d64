//! A Debezium change event as the changes a table keyed by its primary key applies
//! (`FORMAT DEBEZIUM ENCODE JSON`).
//!
//! `c` (create) and `r` (a snapshot read) upsert `after`; `u` upserts `after`, and first
//! deletes `before`'s key when the update changed the key; `d` deletes `before`'s key; a
//! tombstone (no value) is ignored (it only tells a compacted topic to forget the key); `t`
//! (truncate) is refused, so that it shows in the dead letters rather than being applied
//! silently or not at all.
//!
//! Values are rewritten into the forms the JSON decoder reads, by the column's type and, when
//! the event carries its Kafka Connect schema, the field's logical type:
//! - timestamps as integers: `io.debezium.time.Timestamp` and Connect's `Timestamp` are
//!   milliseconds, `MicroTimestamp` microseconds, `NanoTimestamp` nanoseconds; without a
//!   schema the magnitude decides (below 10^14 milliseconds, below 10^17 microseconds, else
//!   nanoseconds: each reading covers 1973 to 5138). Strings (`ZonedTimestamp`) stay as they
//!   are;
//! - dates as integers are days since 1970 (`io.debezium.time.Date`);
//! - times as integers: `io.debezium.time.Time` and Connect's `Time` are milliseconds,
//!   `NanoTime` nanoseconds, anything else microseconds (`MicroTime`, PostgreSQL's default);
//! - decimals: numbers and numeric strings as they are; other strings are base64 big-endian
//!   two's-complement bytes (Connect's `Decimal`), scaled by the schema's `scale` or else the
//!   column's; `{"scale": s, "value": base64}` (`VariableScaleDecimal`) likewise.

use std::collections::HashMap;

use base64::Engine as _;
use datafusion::arrow::datatypes::{DataType, Schema};
use serde_json::{Map, Value};

use super::debezium::{read_envelope, ConnectType, DebeziumOp};
use super::time_text::{write_date, write_time_of_day};

/// One change to apply: a row as a JSON object, and whether it deletes (only its key counts).
#[derive(Debug, Clone, PartialEq)]
pub struct RowChange {
    pub row: Vec<u8>,
    pub delete: bool,
}

/// The changes one message makes to a table with `columns` keyed by `key_columns`; an error
/// says why the message cannot be applied (it becomes a dead letter).
pub fn event_changes(
    value: Option<&[u8]>,
    columns: &Schema,
    key_columns: &[usize],
) -> Result<Vec<RowChange>, String> {
    let Some(event) = read_envelope(value).map_err(|e| e.to_string())? else {
        return Ok(Vec::new());
    };
    let row = |side: Option<Value>, name: &str| -> Result<Map<String, Value>, String> {
        match side {
            Some(Value::Object(fields)) => normalize(fields, columns, &event.field_types),
            Some(_) => Err(format!("\"{name}\" is not a JSON object")),
            None => Err(format!(
                "an op \"{}\" event without \"{name}\"",
                event.op.code()
            )),
        }
    };
    let change = |fields: Map<String, Value>, delete: bool| RowChange {
        row: Value::Object(fields).to_string().into_bytes(),
        delete,
    };
    match event.op {
        DebeziumOp::Create | DebeziumOp::Read => {
            Ok(vec![change(row(event.after.clone(), "after")?, false)])
        }
        DebeziumOp::Update => {
            let after = row(event.after.clone(), "after")?;
            let mut changes = Vec::with_capacity(2);
            if event.before.is_some() {
                let before = row(event.before.clone(), "before")?;
                let key_changed = key_columns.iter().any(|&c| {
                    let name = columns.field(c).name();
                    before
                        .get(name)
                        .is_some_and(|old| Some(old) != after.get(name))
                });
                if key_changed {
                    changes.push(change(before, true));
                }
            }
            changes.push(change(after, false));
            Ok(changes)
        }
        DebeziumOp::Delete => Ok(vec![change(row(event.before.clone(), "before")?, true)]),
        DebeziumOp::Truncate => {
            Err("op \"t\" (truncate) is not applied: its rows stay until deleted".into())
        }
    }
}

/// Rewrites the fields that are columns into the forms the JSON decoder reads.
fn normalize(
    mut fields: Map<String, Value>,
    columns: &Schema,
    types: &HashMap<String, ConnectType>,
) -> Result<Map<String, Value>, String> {
    for column in columns.fields() {
        let Some(value) = fields.get_mut(column.name()) else {
            continue;
        };
        if value.is_null() {
            continue;
        }
        let logical = types.get(column.name());
        let logical_name = logical.and_then(|t| t.name.as_deref()).unwrap_or("");
        let rewritten = match column.data_type() {
            DataType::Timestamp(_, _) => value
                .as_i64()
                .map(|n| Value::String(timestamp_text(timestamp_micros(n, logical_name)))),
            DataType::Date32 | DataType::Date64 => value.as_i64().map(|days| {
                let mut text = String::new();
                write_date(days, &mut text);
                Value::String(text)
            }),
            DataType::Time64(_) | DataType::Time32(_) => value.as_i64().map(|n| {
                let mut text = String::new();
                write_time_of_day(time_micros(n, logical_name), &mut text);
                Value::String(text)
            }),
            DataType::Decimal128(_, scale) | DataType::Decimal256(_, scale) => {
                let scale = logical.and_then(|t| t.scale).unwrap_or(*scale);
                decimal_value(value, scale)
                    .map_err(|why| format!("column {}: {why}", column.name()))?
            }
            _ => None,
        };
        if let Some(rewritten) = rewritten {
            *value = rewritten;
        }
    }
    Ok(fields)
}

fn timestamp_micros(value: i64, logical: &str) -> i64 {
    match logical {
        "io.debezium.time.Timestamp" | "org.apache.kafka.connect.data.Timestamp" => {
            value.saturating_mul(1_000)
        }
        "io.debezium.time.MicroTimestamp" => value,
        "io.debezium.time.NanoTimestamp" => value.div_euclid(1_000),
        _ => match value.unsigned_abs() {
            n if n < 100_000_000_000_000 => value.saturating_mul(1_000),
            n if n < 100_000_000_000_000_000 => value,
            _ => value.div_euclid(1_000),
        },
    }
}

fn time_micros(value: i64, logical: &str) -> i64 {
    match logical {
        "io.debezium.time.Time" | "org.apache.kafka.connect.data.Time" => {
            value.saturating_mul(1_000)
        }
        "io.debezium.time.NanoTime" => value / 1_000,
        _ => value,
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.ffffff]Z`.
fn timestamp_text(micros: i64) -> String {
    let mut text = String::with_capacity(27);
    write_date(micros.div_euclid(86_400_000_000), &mut text);
    text.push('T');
    write_time_of_day(micros.rem_euclid(86_400_000_000), &mut text);
    text.push('Z');
    text
}

/// A decimal in base64 (bare or as `{"scale", "value"}`) as its digits; `None` when the value
/// is already a number or numeric text.
fn decimal_value(value: &Value, scale: i8) -> Result<Option<Value>, String> {
    let (encoded, scale) = match value {
        Value::String(text) if text.trim().parse::<f64>().is_ok() => return Ok(None),
        Value::String(text) => (text.as_str(), scale),
        Value::Object(parts) => {
            let encoded = parts
                .get("value")
                .and_then(Value::as_str)
                .ok_or("a variable-scale decimal without \"value\"")?;
            let scale = parts
                .get("scale")
                .and_then(Value::as_i64)
                .and_then(|s| i8::try_from(s).ok())
                .ok_or("a variable-scale decimal without \"scale\"")?;
            (encoded, scale)
        }
        _ => return Ok(None),
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| format!("{encoded:?} is neither a number nor base64 decimal bytes"))?;
    if bytes.is_empty() || bytes.len() > 16 {
        return Err(format!("a decimal of {} bytes", bytes.len()));
    }
    // Big-endian two's complement: sign-extend from the first byte.
    let mut unscaled: i128 = if bytes[0] & 0x80 != 0 { -1 } else { 0 };
    for byte in bytes {
        unscaled = (unscaled << 8) | i128::from(byte);
    }
    Ok(Some(Value::String(decimal_text(unscaled, scale))))
}

fn decimal_text(unscaled: i128, scale: i8) -> String {
    if scale <= 0 {
        let zeros = "0".repeat(scale.unsigned_abs() as usize);
        return format!("{unscaled}{zeros}");
    }
    let digits = format!(
        "{:0>width$}",
        unscaled.unsigned_abs(),
        width = scale as usize + 1
    );
    let (whole, fraction) = digits.split_at(digits.len() - scale as usize);
    let sign = if unscaled < 0 { "-" } else { "" };
    format!("{sign}{whole}.{fraction}")
}

#[cfg(test)]
#[path = "debezium_rows_tests.rs"]
mod tests;
