//! `ENCODE AVRO`: binary Avro datums into Arrow, with the `arrow-avro` decoder (Arrow's own
//! Avro reader: it builds the columns directly, with Avro's logical types and schema
//! resolution).
//!
//! A message is a bare datum, or one in Confluent's wire format (a zero byte and a 4-byte
//! schema id before the datum): the id is not looked up (there is no registry), the datum is
//! read with the source's schema. The decoder is fed one framed message at a time and must
//! consume each exactly; anything else (a bad datum, bytes left over) sends the batch down
//! the slow path, message by message, where the bad ones become dead letters.
//!
//! Schema changes: the source's schema is the reader schema. A datum written before fields
//! with defaults were appended to the record is read by resolving it from the schema without
//! those fields (each such shorter schema is tried), so adding fields with defaults at the
//! end, or dropping optional ones from it, keeps the older messages decoding.

use std::sync::Arc;

use arrow_avro::reader::ReaderBuilder;
use arrow_avro::schema::{AvroSchema, Fingerprint, FingerprintAlgorithm, SchemaStore};
use datafusion::arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, RecordBatch, StringArray,
};
use datafusion::arrow::compute::{can_cast_types, cast, concat_batches};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde_json::Value;

use super::decode::Decoded;
use crate::formats::json::JsonColumn;
use crate::{ExecError, Result};

/// Reads a source's messages with its Avro schema into its declared columns.
pub struct AvroDecoder {
    /// The schema, then the shorter writer schemas older messages may have been written with.
    versions: Vec<AvroSchema>,
    /// The columns as Avro's types map to Arrow.
    decoded: SchemaRef,
    /// The declared columns.
    target: SchemaRef,
}

impl AvroDecoder {
    pub fn new(schema_text: &str, target: SchemaRef) -> Result<Self> {
        let decoded = Arc::new(avro_arrow_schema(schema_text)?);
        let mut versions = vec![AvroSchema::new(schema_text.to_string())];
        versions.extend(
            shorter_writers(schema_text)
                .into_iter()
                .map(AvroSchema::new),
        );
        Ok(Self {
            versions,
            decoded,
            target,
        })
    }

    pub fn decode(&self, messages: &[&[u8]]) -> Decoded {
        // Bare datums may start with a zero byte too: then the whole batch is tried as bare.
        let batch = self
            .decode_all(messages, 0, false)
            .or_else(|_| self.decode_all(messages, 0, true))
            .ok();
        let (batch, good, bad) = match batch {
            Some(batch) => (batch, (0..messages.len()).collect(), Vec::new()),
            None => self.decode_one_by_one(messages),
        };
        match self.to_target(&batch) {
            Ok(rows) => Decoded { rows, good, bad },
            Err(error) => Decoded {
                rows: RecordBatch::new_empty(self.target.clone()),
                good: Vec::new(),
                bad: (0..messages.len())
                    .map(|i| (i, error.to_string()))
                    .collect(),
            },
        }
    }

    /// Every message with writer schema `version`, or an error if any is not exactly one
    /// datum of it. A message that starts with a zero byte is taken to have Confluent's
    /// header, unless `bare`.
    fn decode_all(&self, messages: &[&[u8]], version: usize, bare: bool) -> Result<RecordBatch> {
        let mut store = SchemaStore::new_with_type(FingerprintAlgorithm::Id);
        store
            .set(Fingerprint::Id(0), self.versions[version].clone())
            .map_err(avro_error)?;
        let mut builder = ReaderBuilder::new()
            .with_writer_schema_store(store)
            .with_batch_size(messages.len().max(1));
        if version > 0 {
            builder = builder.with_reader_schema(self.versions[0].clone());
        }
        let mut decoder = builder.build_decoder().map_err(avro_error)?;
        let mut frame = Vec::new();
        for message in messages {
            frame.clear();
            // Our own frame: id 0 of the store, then the datum (a Confluent header dropped).
            frame.extend_from_slice(&[0, 0, 0, 0, 0]);
            frame.extend_from_slice(if bare { message } else { datum(message) });
            let used = decoder.decode(&frame).map_err(avro_error)?;
            if used != frame.len() {
                return Err(ExecError::Internal(
                    "the message is not one datum of the schema".into(),
                ));
            }
        }
        let batch = decoder.flush().map_err(avro_error)?;
        let batch = batch.unwrap_or_else(|| RecordBatch::new_empty(self.decoded.clone()));
        // A message that was only a header (or empty) gave no row.
        if batch.num_rows() != messages.len() {
            return Err(ExecError::Internal(
                "the message holds no complete datum".into(),
            ));
        }
        Ok(batch)
    }

    /// The slow path: each message on its own, with each writer schema in turn.
    fn decode_one_by_one(
        &self,
        messages: &[&[u8]],
    ) -> (RecordBatch, Vec<usize>, Vec<(usize, String)>) {
        let mut batches = Vec::new();
        let mut good = Vec::new();
        let mut bad = Vec::new();
        for (i, message) in messages.iter().enumerate() {
            let one = std::slice::from_ref(message);
            let mut first_error = None;
            let attempts = (0..self.versions.len()).flat_map(|v| [(v, false), (v, true)]);
            let decoded = attempts.into_iter().find_map(|(version, bare)| {
                match self.decode_all(one, version, bare) {
                    Ok(batch) => Some(batch),
                    Err(error) => {
                        first_error.get_or_insert(error);
                        None
                    }
                }
            });
            match decoded {
                Some(batch) => {
                    batches.push(batch);
                    good.push(i);
                }
                None => bad.push((
                    i,
                    format!(
                        "not an Avro datum of the source's schema: {}",
                        first_error.map(|e| e.to_string()).unwrap_or_default()
                    ),
                )),
            }
        }
        let rows = concat_batches(&self.decoded, &batches)
            .unwrap_or_else(|_| RecordBatch::new_empty(self.decoded.clone()));
        (rows, good, bad)
    }

    /// The decoded columns as the declared ones, by name; a declared column the schema lacks
    /// is NULL.
    fn to_target(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let rows = batch.num_rows();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.target.fields().len());
        for field in self.target.fields() {
            let column = match batch.schema().index_of(field.name()) {
                Ok(i) => convert(batch.column(i), batch.schema().field(i), field)?,
                Err(_) => new_null_array(field.data_type(), rows),
            };
            columns.push(column);
        }
        let nullable = Arc::new(Schema::new(
            self.target
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        Ok(RecordBatch::try_new(nullable, columns)?)
    }
}

/// The datum of a message: after Confluent's header when it seems to have one.
fn datum(message: &[u8]) -> &[u8] {
    match message {
        [0, _, _, _, _, rest @ ..] => rest,
        other => other,
    }
}

/// A decoded column as a declared one: as it is, cast, or (nested values into a `jsonb`
/// column) as JSON text.
fn convert(column: &ArrayRef, from: &Field, to: &Field) -> Result<ArrayRef> {
    if column.data_type() == to.data_type() {
        return Ok(column.clone());
    }
    if let DataType::FixedSizeBinary(16) = column.data_type() {
        if eddy_planner::pg_types::is_uuid(to) {
            let bytes = column.as_fixed_size_binary();
            let texts: StringArray = (0..bytes.len())
                .map(|row| {
                    bytes.is_valid(row).then(|| {
                        let value: [u8; 16] = bytes.value(row).try_into().unwrap_or([0; 16]);
                        eddy_planner::pg_types::uuid_text(&value)
                    })
                })
                .collect();
            return Ok(Arc::new(texts));
        }
    }
    let nested = matches!(
        column.data_type(),
        DataType::Struct(_) | DataType::List(_) | DataType::Map(_, _)
    );
    if nested && to.data_type() == &DataType::Utf8 {
        let encoder = JsonColumn::new(column.as_ref(), from)?;
        let texts: StringArray = (0..column.len())
            .map(|row| {
                column.is_valid(row).then(|| {
                    let mut text = String::new();
                    encoder.write(row, &mut text);
                    text
                })
            })
            .collect();
        return Ok(Arc::new(texts));
    }
    Ok(cast(column, to.data_type())?)
}

/// Whether a column of the Avro schema can be read into a declared column.
pub fn convertible(from: &DataType, to: &DataType) -> bool {
    let nested = matches!(
        from,
        DataType::Struct(_)
            | DataType::List(_)
            | DataType::Map(_, _)
            | DataType::FixedSizeBinary(16)
    );
    from == to || (nested && to == &DataType::Utf8) || can_cast_types(from, to)
}

/// The Arrow columns an Avro record schema decodes to.
pub fn avro_arrow_schema(schema_text: &str) -> Result<Schema> {
    let mut store = SchemaStore::new_with_type(FingerprintAlgorithm::Id);
    store
        .set(Fingerprint::Id(0), AvroSchema::new(schema_text.to_string()))
        .map_err(avro_error)?;
    let decoder = ReaderBuilder::new()
        .with_writer_schema_store(store)
        .build_decoder()
        .map_err(avro_error)?;
    let schema = decoder.schema();
    Ok(Schema::new(schema.fields().clone()))
}

/// The record schema without its last fields, for each run of trailing fields that all
/// have defaults (the schemas older messages were written with before those were added).
fn shorter_writers(schema_text: &str) -> Vec<String> {
    let Ok(Value::Object(record)) = serde_json::from_str::<Value>(schema_text) else {
        return Vec::new();
    };
    let Some(Value::Array(fields)) = record.get("fields") else {
        return Vec::new();
    };
    let mut writers = Vec::new();
    let mut keep = fields.len();
    while keep > 1 && fields[keep - 1].get("default").is_some() {
        keep -= 1;
        let mut shorter = record.clone();
        shorter.insert("fields".into(), Value::Array(fields[..keep].to_vec()));
        writers.push(Value::Object(shorter).to_string());
    }
    writers
}

fn avro_error(error: impl std::fmt::Display) -> ExecError {
    ExecError::InvalidOption(format!("Avro: {error}"))
}

#[cfg(test)]
#[path = "avro_tests.rs"]
mod tests;
