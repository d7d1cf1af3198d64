//! Arrow values as JSON text, the way PostgreSQL's `to_json` writes them, for sinks' messages.
//!
//! The encoding, per type (documented for users in the README's sinks section):
//!
//! - NULL: `null` (the field is always present).
//! - booleans: `true` / `false`; integers: JSON numbers, all digits (also past 2^53).
//! - `real` / `double precision`: the shortest text that reads back as the same value
//!   (`0.1`, `1e100`); `NaN`, `Infinity` and `-Infinity` as strings, as Postgres writes them.
//! - `numeric(p, s)`: a JSON number with exactly the column's scale (`12.50`): no rounding
//!   through a binary float on Eddy's side.
//! - `text`, `varchar`, `uuid`: strings; `json` / `jsonb` columns: their JSON as it is, not as a
//!   string; `bytea`: a string `"\\x0a0b"` (Postgres' hex form).
//! - `date`: `"2026-03-01"`; `time`: `"12:00:05.5"`; `timestamp`: `"2026-03-01T12:00:05.5"`
//!   (ISO 8601, no zone, fraction only when non-zero, at most microseconds);
//!   `timestamptz`: the same in UTC with `+00:00`.
//! - `interval`: an ISO 8601 duration string, `"P1Y2M3DT4H5M6.5S"` (Postgres' `iso_8601`
//!   interval style; `"PT0S"` for zero).
//! - arrays: JSON arrays; rows (structs): JSON objects.
//!
//! An encoder is built once per column and batch (the type is matched once, not per value);
//! rows are then written one after the other into the message buffers.

use std::fmt::Write as _;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Date64Type, Decimal128Type, Decimal256Type, Field, Float16Type,
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, Time32MillisecondType,
    Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimeUnit, UInt16Type,
    UInt32Type, UInt64Type, UInt8Type,
};

use crate::formats::time_text::{
    duration_micros, interval_parts, timestamp_micros, write_date, write_iso_duration,
    write_time_of_day,
};

use crate::{ExecError, Result};

/// The Postgres type a string column holds, when its field is marked (see
/// `eddy_planner::pg_types`).
fn holds_json(field: &Field) -> bool {
    matches!(
        field
            .metadata()
            .get(eddy_planner::pg_types::PG_TYPE_KEY)
            .map(String::as_str),
        Some("json" | "jsonb")
    )
}

/// Whether `data_type` (of `field`) can be written as JSON; an error naming the column if not.
pub fn check_type(field: &Field) -> Result<()> {
    fn supported(data_type: &DataType) -> bool {
        match data_type {
            DataType::Null
            | DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Float16
            | DataType::Float32
            | DataType::Float64
            | DataType::Decimal128(_, _)
            | DataType::Decimal256(_, _)
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_)
            | DataType::Date32
            | DataType::Date64
            | DataType::Time32(_)
            | DataType::Time64(_)
            | DataType::Timestamp(_, _)
            | DataType::Interval(_)
            | DataType::Duration(_) => true,
            DataType::List(item) | DataType::LargeList(item) | DataType::FixedSizeList(item, _) => {
                supported(item.data_type())
            }
            DataType::Struct(fields) => fields.iter().all(|f| supported(f.data_type())),
            DataType::Dictionary(_, value) => supported(value),
            _ => false,
        }
    }
    if supported(field.data_type()) {
        Ok(())
    } else {
        Err(ExecError::NotSupported(format!(
            "column \"{}\" of type {} cannot be written as JSON",
            field.name(),
            field.data_type()
        )))
    }
}

/// Writes one column's values as JSON: built once per column of a batch.
pub struct JsonColumn<'a> {
    array: &'a dyn Array,
    kind: Kind<'a>,
}

/// Writes one row's number (the column's type matched once, when it was built).
type WriteNumber<'a> = Box<dyn Fn(usize, &mut String) + 'a>;

enum Kind<'a> {
    Null,
    Boolean,
    /// Integers, floats: written by the closure.
    Number(WriteNumber<'a>),
    Decimal {
        scale: i8,
    },
    Decimal256 {
        scale: i8,
    },
    Text {
        raw_json: bool,
    },
    Binary,
    Date,
    Time,
    Timestamp {
        zoned: bool,
    },
    Interval,
    Duration,
    List(Box<JsonColumn<'a>>),
    Struct(Vec<(String, JsonColumn<'a>)>),
    /// Dictionary-encoded values: each row's index into the values' column.
    Dictionary(Vec<usize>, Box<JsonColumn<'a>>),
}

impl<'a> JsonColumn<'a> {
    pub fn new(array: &'a dyn Array, field: &Field) -> Result<Self> {
        check_type(field)?;
        Ok(Self::of(array, holds_json(field)))
    }

    fn of(array: &'a dyn Array, raw_json: bool) -> Self {
        macro_rules! number {
            ($t:ty) => {{
                let values = array.as_primitive::<$t>();
                Kind::Number(Box::new(move |row, out: &mut String| {
                    let _ = write!(out, "{}", values.value(row));
                }))
            }};
        }
        macro_rules! float {
            ($t:ty) => {{
                let values = array.as_primitive::<$t>();
                Kind::Number(Box::new(move |row, out: &mut String| {
                    write_float(f64::from(values.value(row)), out)
                }))
            }};
        }
        let kind = match array.data_type() {
            DataType::Null => Kind::Null,
            DataType::Boolean => Kind::Boolean,
            DataType::Int8 => number!(Int8Type),
            DataType::Int16 => number!(Int16Type),
            DataType::Int32 => number!(Int32Type),
            DataType::Int64 => number!(Int64Type),
            DataType::UInt8 => number!(UInt8Type),
            DataType::UInt16 => number!(UInt16Type),
            DataType::UInt32 => number!(UInt32Type),
            DataType::UInt64 => number!(UInt64Type),
            DataType::Float16 => {
                let values = array.as_primitive::<Float16Type>();
                Kind::Number(Box::new(move |row, out: &mut String| {
                    write_float(f64::from(values.value(row).to_f32()), out)
                }))
            }
            DataType::Float32 => {
                // Shortest text of the f32 itself (0.1f32 is "0.1", not 0.10000000149011612).
                let values = array.as_primitive::<Float32Type>();
                Kind::Number(Box::new(move |row, out: &mut String| {
                    let value = values.value(row);
                    match value.is_finite() {
                        true => {
                            let _ = write!(out, "{value:?}");
                        }
                        false => write_float(f64::from(value), out),
                    }
                }))
            }
            DataType::Float64 => float!(Float64Type),
            DataType::Decimal128(_, scale) => Kind::Decimal { scale: *scale },
            DataType::Decimal256(_, scale) => Kind::Decimal256 { scale: *scale },
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Kind::Text { raw_json },
            DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_) => Kind::Binary,
            DataType::Date32 | DataType::Date64 => Kind::Date,
            DataType::Time32(_) | DataType::Time64(_) => Kind::Time,
            DataType::Timestamp(_, zone) => Kind::Timestamp {
                zoned: zone.is_some(),
            },
            DataType::Interval(_) => Kind::Interval,
            DataType::Duration(_) => Kind::Duration,
            DataType::List(_) => Kind::List(Box::new(Self::of(
                array.as_list::<i32>().values().as_ref(),
                false,
            ))),
            DataType::LargeList(_) => Kind::List(Box::new(Self::of(
                array.as_list::<i64>().values().as_ref(),
                false,
            ))),
            DataType::FixedSizeList(_, _) => Kind::List(Box::new(Self::of(
                array.as_fixed_size_list().values().as_ref(),
                false,
            ))),
            DataType::Struct(fields) => {
                let columns = array.as_struct().columns();
                Kind::Struct(
                    fields
                        .iter()
                        .zip(columns)
                        .map(|(f, c)| (f.name().clone(), Self::of(c.as_ref(), holds_json(f))))
                        .collect(),
                )
            }
            DataType::Dictionary(_, _) => {
                let dictionary = array.as_any_dictionary();
                Kind::Dictionary(
                    dictionary.normalized_keys(),
                    Box::new(Self::of(dictionary.values().as_ref(), raw_json)),
                )
            }
            // `check_type` refused every other type before an encoder is built.
            _ => Kind::Null,
        };
        Self { array, kind }
    }

    /// Appends row `row`'s value as JSON to `out`.
    pub fn write(&self, row: usize, out: &mut String) {
        if self.array.is_null(row) {
            out.push_str("null");
            return;
        }
        let array = self.array;
        match &self.kind {
            Kind::Null => out.push_str("null"),
            Kind::Boolean => out.push_str(match array.as_boolean().value(row) {
                true => "true",
                false => "false",
            }),
            Kind::Number(write) => write(row, out),
            Kind::Decimal { scale } => {
                let value = array.as_primitive::<Decimal128Type>().value(row);
                write_decimal(&value.to_string(), *scale, out)
            }
            Kind::Decimal256 { scale } => {
                let value = array.as_primitive::<Decimal256Type>().value(row);
                write_decimal(&value.to_string(), *scale, out)
            }
            Kind::Text { raw_json } => {
                let text = text_value(array, row);
                match raw_json {
                    true => out.push_str(text),
                    false => write_string(text, out),
                }
            }
            Kind::Binary => {
                let bytes = binary_value(array, row);
                out.push_str("\"\\\\x");
                for byte in bytes {
                    let _ = write!(out, "{byte:02x}");
                }
                out.push('"');
            }
            Kind::Date => {
                let days = match array.data_type() {
                    DataType::Date32 => i64::from(array.as_primitive::<Date32Type>().value(row)),
                    _ => array.as_primitive::<Date64Type>().value(row) / 86_400_000,
                };
                out.push('"');
                write_date(days, out);
                out.push('"');
            }
            Kind::Time => {
                let micros = match array.data_type() {
                    DataType::Time32(TimeUnit::Second) => {
                        i64::from(array.as_primitive::<Time32SecondType>().value(row)) * 1_000_000
                    }
                    DataType::Time32(_) => {
                        i64::from(array.as_primitive::<Time32MillisecondType>().value(row)) * 1_000
                    }
                    DataType::Time64(TimeUnit::Nanosecond) => {
                        array.as_primitive::<Time64NanosecondType>().value(row) / 1_000
                    }
                    _ => array.as_primitive::<Time64MicrosecondType>().value(row),
                };
                out.push('"');
                write_time_of_day(micros, out);
                out.push('"');
            }
            Kind::Timestamp { zoned } => {
                let micros = timestamp_micros(array, row);
                out.push('"');
                let days = micros.div_euclid(86_400_000_000);
                write_date(days, out);
                out.push('T');
                write_time_of_day(micros.rem_euclid(86_400_000_000), out);
                if *zoned {
                    out.push_str("+00:00");
                }
                out.push('"');
            }
            Kind::Interval => {
                let (months, days, nanos) = interval_parts(array, row);
                out.push('"');
                write_iso_duration(months, days, nanos / 1_000, out);
                out.push('"');
            }
            Kind::Duration => {
                let micros = duration_micros(array, row);
                out.push('"');
                write_iso_duration(0, 0, micros, out);
                out.push('"');
            }
            Kind::List(items) => {
                let (start, end) = list_bounds(array, row);
                out.push('[');
                for (n, item) in (start..end).enumerate() {
                    if n > 0 {
                        out.push(',');
                    }
                    items.write(item, out);
                }
                out.push(']');
            }
            Kind::Struct(fields) => {
                out.push('{');
                for (n, (name, column)) in fields.iter().enumerate() {
                    if n > 0 {
                        out.push(',');
                    }
                    write_string(name, out);
                    out.push(':');
                    column.write(row, out);
                }
                out.push('}');
            }
            Kind::Dictionary(keys, values) => values.write(keys[row], out),
        }
    }
}

/// A JSON object of some columns of a batch: `{"a":1,"b":"x"}`, one row at a time.
pub struct JsonObject<'a> {
    /// Each field's name, already written as a JSON string with its colon.
    columns: Vec<(String, JsonColumn<'a>)>,
}

impl<'a> JsonObject<'a> {
    /// The object of `columns` (arrays with their fields) of one batch.
    pub fn new(columns: impl IntoIterator<Item = (&'a dyn Array, &'a Field)>) -> Result<Self> {
        let columns = columns
            .into_iter()
            .map(|(array, field)| {
                let mut name = String::with_capacity(field.name().len() + 3);
                write_string(field.name(), &mut name);
                name.push(':');
                Ok((name, JsonColumn::new(array, field)?))
            })
            .collect::<Result<_>>()?;
        Ok(Self { columns })
    }

    /// Appends row `row` as a JSON object to `out`.
    pub fn write(&self, row: usize, out: &mut String) {
        out.push('{');
        for (n, (name, column)) in self.columns.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(name);
            column.write(row, out);
        }
        out.push('}');
    }

    /// Row `row` as a JSON object.
    pub fn to_string(&self, row: usize) -> String {
        let mut out = String::with_capacity(16 * self.columns.len() + 2);
        self.write(row, &mut out);
        out
    }
}

/// Appends `text` as a JSON string (quoted, escaped).
pub fn write_string(text: &str, out: &mut String) {
    out.push('"');
    let mut start = 0;
    for (i, byte) in text.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[start..i]);
        match escape {
            "" => {
                let _ = write!(out, "\\u{byte:04x}");
            }
            escape => out.push_str(escape),
        }
        start = i + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

fn write_float(value: f64, out: &mut String) {
    if value.is_nan() {
        out.push_str("\"NaN\"");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        });
    } else {
        // Debug is the shortest text that reads back as the same value, in a form JSON takes
        // (`1e100`, `0.1`, `3.0`).
        let _ = write!(out, "{value:?}");
    }
}

/// The unscaled integer `digits` (with its sign) written with `scale` digits after the point.
fn write_decimal(digits: &str, scale: i8, out: &mut String) {
    let (negative, digits) = match digits.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, digits),
    };
    if negative {
        out.push('-');
    }
    if scale <= 0 {
        out.push_str(digits);
        if digits != "0" {
            out.extend(std::iter::repeat_n('0', scale.unsigned_abs() as usize));
        }
        return;
    }
    let scale = scale as usize;
    if digits.len() > scale {
        let (whole, fraction) = digits.split_at(digits.len() - scale);
        out.push_str(whole);
        out.push('.');
        out.push_str(fraction);
    } else {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', scale - digits.len()));
        out.push_str(digits);
    }
}

fn text_value(array: &dyn Array, row: usize) -> &str {
    match array.data_type() {
        DataType::LargeUtf8 => array.as_string::<i64>().value(row),
        DataType::Utf8View => array.as_string_view().value(row),
        _ => array.as_string::<i32>().value(row),
    }
}

fn binary_value(array: &dyn Array, row: usize) -> &[u8] {
    match array.data_type() {
        DataType::LargeBinary => array.as_binary::<i64>().value(row),
        DataType::BinaryView => array.as_binary_view().value(row),
        DataType::FixedSizeBinary(_) => array.as_fixed_size_binary().value(row),
        _ => array.as_binary::<i32>().value(row),
    }
}

fn list_bounds(array: &dyn Array, row: usize) -> (usize, usize) {
    match array.data_type() {
        DataType::LargeList(_) => {
            let offsets = array.as_list::<i64>().value_offsets();
            (offsets[row] as usize, offsets[row + 1] as usize)
        }
        DataType::FixedSizeList(_, size) => {
            let size = *size as usize;
            let offset = array.as_fixed_size_list().offset();
            ((offset + row) * size, (offset + row + 1) * size)
        }
        _ => {
            let offsets = array.as_list::<i32>().value_offsets();
            (offsets[row] as usize, offsets[row + 1] as usize)
        }
    }
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
