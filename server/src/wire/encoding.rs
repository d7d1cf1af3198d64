//! Rows of a result (or of `COPY ... TO STDOUT`) encoded for the wire: `arrow-pg` encodes
//! every value, except the text of the types [`crate::pg::types::text`] prints as Postgres does,
//! `NUMERIC` in binary (each value with its own scale, any of Arrow's 38 digits), `json`,
//! `jsonb` and `uuid`.

use std::error::Error;
use std::sync::Arc;

use arrow_pg::encoder::{encode_value, Encoder};
use bytes::{BufMut, BytesMut};
use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Decimal128Type};
use pgwire::api::results::{FieldFormat, FieldInfo};
use pgwire::api::Type;
use pgwire::error::PgWireResult;
use pgwire::types::format::FormatOptions;
use pgwire::types::ToSqlText;
use postgres_types::{IsNull, ToSql};

use crate::pg::types::text;

/// How a value rendered as text goes in binary.
#[derive(Debug, Clone, Copy, PartialEq)]
enum BinaryForm {
    /// The text itself (`json`).
    Text,
    /// Postgres' base-10000 `numeric`.
    Numeric,
    /// `jsonb`: a version byte (1), then the text.
    Jsonb,
    /// `uuid`: its 16 bytes.
    Uuid,
}

/// A value already rendered as Postgres text.
#[derive(Debug)]
struct Rendered<'a> {
    text: &'a str,
    binary: BinaryForm,
}

impl ToSqlText for Rendered<'_> {
    fn to_sql_text(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
        _options: &FormatOptions,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.put_slice(self.text.as_bytes());
        Ok(IsNull::No)
    }
}

impl ToSql for Rendered<'_> {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match self.binary {
            BinaryForm::Numeric => numeric_binary(self.text, out)?,
            BinaryForm::Jsonb => {
                out.put_u8(1);
                out.put_slice(self.text.as_bytes());
            }
            BinaryForm::Text => out.put_slice(self.text.as_bytes()),
            BinaryForm::Uuid => {
                let bytes = crate::pg::types::uuid::parse(self.text)
                    .ok_or_else(|| format!("not a uuid: \"{}\"", self.text))?;
                out.put_slice(&bytes);
            }
        }
        Ok(IsNull::No)
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    postgres_types::to_sql_checked!();
}

/// A column as it goes on the wire.
enum Column {
    /// Encoded by arrow-pg.
    Arrow,
    /// Rendered here (the text form, which the binary form is made from).
    Rendered {
        values: Vec<Option<String>>,
        binary: BinaryForm,
    },
}

fn prepare(batch: &RecordBatch, fields: &[FieldInfo], options: &FormatOptions) -> Vec<Column> {
    let schema = batch.schema();
    batch
        .columns()
        .iter()
        .zip(fields)
        .zip(schema.fields())
        .map(|((array, field), arrow_field)| {
            let binary = field.format() == FieldFormat::Binary;
            if let Some(column) = json_column(array, field.datatype()) {
                return column;
            }
            if field.datatype() == &Type::UUID {
                if let Some(column) = as_rendered(array, BinaryForm::Uuid) {
                    return column;
                }
            }
            match (binary, array.data_type()) {
                (false, _) => match text::column_text(array, arrow_field, options) {
                    Some(values) => Column::Rendered {
                        values,
                        binary: BinaryForm::Text,
                    },
                    None => Column::Arrow,
                },
                (true, DataType::Decimal128(precision, scale)) => {
                    let a = array.as_primitive::<Decimal128Type>();
                    let form = text::NumericForm::of(arrow_field);
                    let values = (0..a.len())
                        .map(|i| {
                            (!a.is_null(i))
                                .then(|| text::numeric_text(a.value(i), *precision, *scale, form))
                        })
                        .collect();
                    Column::Rendered {
                        values,
                        binary: BinaryForm::Numeric,
                    }
                }
                _ => Column::Arrow,
            }
        })
        .collect()
}

/// A `json` column as written; a `jsonb` one as jsonb prints it (`{"a": 1}`, keys shortest
/// first), which is also the text of its binary form.
fn json_column(array: &dyn Array, pg_type: &Type) -> Option<Column> {
    let jsonb = match pg_type {
        t if *t == Type::JSONB => true,
        t if *t == Type::JSON => false,
        _ => return None,
    };
    let text = datafusion::arrow::compute::cast(array, &DataType::Utf8).ok()?;
    let text = text.as_string::<i32>();
    let values = (0..text.len())
        .map(|i| {
            text.is_valid(i).then(|| {
                let value = text.value(i);
                match serde_json::from_str::<serde_json::Value>(value) {
                    Ok(parsed) if jsonb => crate::pg::functions::json::jsonb_text(&parsed),
                    _ => value.to_string(),
                }
            })
        })
        .collect();
    Some(Column::Rendered {
        values,
        binary: if jsonb {
            BinaryForm::Jsonb
        } else {
            BinaryForm::Text
        },
    })
}

/// A column of strings rendered as they are, sent in binary as `binary` says.
fn as_rendered(array: &dyn Array, binary: BinaryForm) -> Option<Column> {
    let text = datafusion::arrow::compute::cast(array, &DataType::Utf8).ok()?;
    let text = text.as_string::<i32>();
    let values = (0..text.len())
        .map(|i| text.is_valid(i).then(|| text.value(i).to_string()))
        .collect();
    Some(Column::Rendered { values, binary })
}

/// Encodes every row of a batch with `encoder` (DataRows, or COPY lines).
pub fn encode_rows<E: Encoder>(
    encoder: &mut E,
    batch: &RecordBatch,
    fields: &[FieldInfo],
    options: &FormatOptions,
) -> PgWireResult<Vec<E::Item>> {
    let columns = prepare(batch, fields, options);
    let schema = batch.schema();
    let mut rows = Vec::with_capacity(batch.num_rows());
    for row in 0..batch.num_rows() {
        for (index, column) in columns.iter().enumerate() {
            match column {
                // arrow-pg sends a NULL interval as a zero interval: every NULL is sent here.
                Column::Arrow if batch.column(index).is_null(row) => {
                    encoder.encode_field(&None::<Rendered>, &fields[index])?
                }
                Column::Arrow => encode_value(
                    encoder,
                    batch.column(index),
                    row,
                    schema.field(index),
                    &fields[index],
                )?,
                Column::Rendered { values, binary } => {
                    let value = values[row].as_deref().map(|text| Rendered {
                        text,
                        binary: *binary,
                    });
                    encoder.encode_field(&value, &fields[index])?
                }
            }
        }
        rows.push(encoder.take_row());
    }
    Ok(rows)
}

/// The DataRows of a batch of a query's result.
pub fn data_rows(
    fields: Arc<Vec<FieldInfo>>,
    batch: &RecordBatch,
    options: &FormatOptions,
) -> Vec<PgWireResult<pgwire::messages::data::DataRow>> {
    let mut encoder = pgwire::api::results::DataRowEncoder::new(fields.clone());
    match encode_rows(&mut encoder, batch, &fields, options) {
        Ok(rows) => rows.into_iter().map(Ok).collect(),
        Err(e) => vec![Err(e)],
    }
}

/// Postgres' binary `numeric` of a decimal's text (`-12.3400`): base-10000 digits around the
/// decimal point, the weight of the first, the sign and the number of decimal digits shown.
fn numeric_binary(text: &str, out: &mut BytesMut) -> Result<(), Box<dyn Error + Sync + Send>> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (integer, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    if !integer
        .bytes()
        .chain(fraction.bytes())
        .all(|b| b.is_ascii_digit())
    {
        return Err(format!("not a decimal number: {text}").into());
    }
    let scale = fraction.len();
    // Pad the integer part on the left and the fraction on the right to whole groups of 4.
    let integer_pad = (4 - integer.len() % 4) % 4;
    let fraction_pad = (4 - fraction.len() % 4) % 4;
    let padded: String = "0".repeat(integer_pad) + integer + fraction + &"0".repeat(fraction_pad);
    let integer_groups = (integer.len() + integer_pad) / 4;
    let mut groups: Vec<i16> = padded
        .as_bytes()
        .chunks(4)
        .map(|chunk| {
            chunk
                .iter()
                .fold(0i16, |acc, digit| acc * 10 + (digit - b'0') as i16)
        })
        .collect();
    let mut weight = integer_groups as i32 - 1;
    let leading = groups.iter().take_while(|g| **g == 0).count();
    groups.drain(..leading);
    weight -= leading as i32;
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    out.put_i16(groups.len() as i16);
    out.put_i16(weight as i16);
    out.put_u16(if negative && !groups.is_empty() {
        0x4000
    } else {
        0
    });
    out.put_u16(scale as u16);
    for group in groups {
        out.put_i16(group);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binary(text: &str) -> Vec<u8> {
        let mut out = BytesMut::new();
        numeric_binary(text, &mut out).unwrap();
        out.to_vec()
    }

    #[test]
    fn numeric_in_postgres_binary_form() {
        // What Postgres sends for SELECT '...'::numeric in binary.
        assert_eq!(binary("21"), [0, 1, 0, 0, 0, 0, 0, 0, 0, 21]);
        assert_eq!(binary("1.50"), [0, 2, 0, 0, 0, 0, 0, 2, 0, 1, 0x13, 0x88]);
        assert_eq!(binary("-0.001"), [0, 1, 0xff, 0xff, 0x40, 0, 0, 3, 0, 10]);
        assert_eq!(binary("0"), [0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            binary("123456789012345678.5"),
            [
                0, 6, 0, 4, 0, 0, 0, 1, 0, 12, 0x0d, 0x80, 0x1e, 0xd2, 0x04, 0xd2, 0x16, 0x2e,
                0x13, 0x88
            ]
        );
    }
}
