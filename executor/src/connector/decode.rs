//! Decoding message payloads (JSON objects or CSV rows) into Arrow, in batches.
//!
//! A batch of messages is decoded in one go; only when that fails is it decoded message by
//! message, so one bad message becomes a dead letter and the rest go on. Timestamp columns are
//! read as text first and then parsed as RFC 3339, `YYYY-MM-DD HH:MM:SS[.ffffff]` or epoch
//! milliseconds (all digits), vectorized. A `uuid` column's values are made canonical (lower
//! case, hyphenated), and a message with one that is not a uuid is a dead letter. Every
//! message is checked first ([`super::payload_check`]): one nested too deeply or not strictly
//! valid is a dead letter before any decoder reads it.

use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{Array, AsArray, BooleanArray, RecordBatch, StringArray};
use datafusion::arrow::compute::{concat_batches, filter_record_batch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::json::reader::Decoder as JsonDecoder;

use super::avro::AvroDecoder;
use super::payload_check::refusal;
use super::protobuf::ProtobufDecoder;
use super::text_timestamps::parse_timestamp_column;
use super::Encode;

pub struct Decoder {
    /// The declared payload schema.
    schema: SchemaRef,
    /// The same, with timestamp columns as text.
    text_schema: SchemaRef,
    encode: Encode,
    /// A JSON decoder kept between batches so that its buffers are reused, with the most
    /// rows it takes per batch; dropped after any error (its state is then unknown).
    json: Mutex<Option<(usize, JsonDecoder)>>,
    /// `ENCODE AVRO` or `PROTOBUF`: their reader, or why its schema cannot be read (checked
    /// at CREATE, so only a schema that stopped being readable gets here: every message then
    /// says so).
    binary: Option<std::result::Result<BinaryDecoder, String>>,
}

/// A reader of binary messages by their schema.
enum BinaryDecoder {
    Avro(AvroDecoder),
    Protobuf(ProtobufDecoder),
}

impl BinaryDecoder {
    fn new(encode: &Encode, schema: &SchemaRef) -> Option<std::result::Result<Self, String>> {
        let decoder = match encode {
            Encode::Avro { schema: avro } => {
                AvroDecoder::new(avro, schema.clone()).map(BinaryDecoder::Avro)
            }
            Encode::Protobuf {
                descriptors,
                message,
            } => ProtobufDecoder::new(descriptors, message, schema.clone())
                .map(BinaryDecoder::Protobuf),
            Encode::Json | Encode::Csv { .. } => return None,
        };
        Some(decoder.map_err(|e| e.to_string()))
    }

    fn decode(&self, messages: &[&[u8]]) -> Decoded {
        match self {
            BinaryDecoder::Avro(avro) => avro.decode(messages),
            BinaryDecoder::Protobuf(protobuf) => protobuf.decode(messages),
        }
    }
}

/// Messages below which a batch is decoded in one part (splitting costs more than it saves).
const PART_MESSAGES: usize = 1024;

/// The threads sources decode on (one per core, at the sources' priority).
fn decode_pool() -> &'static rayon::ThreadPool {
    static POOL: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("eddy-decode-{i}"))
            .start_handler(|_| crate::thread_priority::lower_for_sources())
            .build()
            .unwrap_or_else(|_| {
                rayon::ThreadPoolBuilder::new()
                    .build()
                    .expect("a thread pool")
            })
    })
}

/// Decodes `messages` in up to `decoders.len()` parts at once, one decoder each, on the
/// decoding threads: a source read by one thread (a file) still decodes on every core.
/// The result is as [`Decoder::decode`] of the whole batch gives it.
pub fn decode_in_parts(decoders: &[Decoder], messages: &[&[u8]]) -> Decoded {
    let parts = decoders.len().min(messages.len() / PART_MESSAGES).max(1);
    if parts == 1 {
        return decoders[0].decode(messages);
    }
    let size = messages.len().div_ceil(parts);
    let chunks: Vec<&[&[u8]]> = messages.chunks(size).collect();
    let mut decoded: Vec<Option<Decoded>> = (0..chunks.len()).map(|_| None).collect();
    decode_pool().scope(|scope| {
        for ((decoder, chunk), out) in decoders.iter().zip(&chunks).zip(decoded.iter_mut()) {
            scope.spawn(move |_| *out = Some(decoder.decode(chunk)));
        }
    });
    let mut whole = Decoded {
        rows: RecordBatch::new_empty(decoders[0].schema.clone()),
        good: Vec::with_capacity(messages.len()),
        bad: Vec::new(),
    };
    let mut batches = Vec::with_capacity(chunks.len());
    for (part, decoded) in decoded.into_iter().enumerate() {
        let decoded = decoded.expect("every part is decoded");
        let offset = part * size;
        whole.good.extend(decoded.good.iter().map(|i| i + offset));
        whole
            .bad
            .extend(decoded.bad.into_iter().map(|(i, e)| (i + offset, e)));
        // A part with no good message has an empty batch of its own (the declared schema).
        if decoded.rows.num_rows() > 0 {
            batches.push(decoded.rows);
        }
    }
    let Some(first) = batches.first() else {
        return whole;
    };
    match concat_batches(&first.schema(), &batches) {
        Ok(rows) => whole.rows = rows,
        Err(error) => {
            // Parts of one schema always concatenate; were they not to, every message says so.
            whole.good.clear();
            whole.bad = (0..messages.len())
                .map(|i| (i, error.to_string()))
                .collect();
        }
    }
    whole
}

/// Rows a kept JSON decoder takes per batch at least (more when a batch needs it).
const JSON_BATCH_ROWS: usize = 8192;

/// Decoded rows, and why the other messages could not be decoded.
pub struct Decoded {
    /// One row per good message, in order.
    pub rows: RecordBatch,
    /// The index of each good message (parallel to `rows`).
    pub good: Vec<usize>,
    /// `(message index, error)` of each bad message.
    pub bad: Vec<(usize, String)>,
}

impl Decoder {
    pub fn new(schema: SchemaRef, encode: Encode) -> Self {
        let text_schema = Arc::new(Schema::new(
            schema
                .fields()
                .iter()
                .map(|f| match f.data_type() {
                    DataType::Timestamp(_, _) => Field::new(f.name(), DataType::Utf8, true),
                    _ => f.as_ref().clone().with_nullable(true),
                })
                .collect::<Vec<_>>(),
        ));
        let binary = BinaryDecoder::new(&encode, &schema);
        Self {
            schema,
            text_schema,
            encode,
            json: Mutex::new(None),
            binary,
        }
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    pub fn decode(&self, messages: &[&[u8]]) -> Decoded {
        match &self.binary {
            Some(Ok(binary)) => return binary.decode(messages),
            Some(Err(error)) => {
                return Decoded {
                    rows: RecordBatch::new_empty(self.schema.clone()),
                    good: Vec::new(),
                    bad: (0..messages.len()).map(|i| (i, error.clone())).collect(),
                }
            }
            None => {}
        }
        let refused: Vec<(usize, String)> = messages
            .iter()
            .enumerate()
            .filter_map(|(i, message)| Some((i, refusal(&self.encode, message)?)))
            .collect();
        if refused.is_empty() {
            return self.decode_checked(messages);
        }
        // The others are decoded without them, then numbered as in `messages` again.
        let mut kept = Vec::with_capacity(messages.len() - refused.len());
        let mut refused_at = refused.iter().map(|(i, _)| *i).peekable();
        for i in 0..messages.len() {
            if refused_at.next_if_eq(&i).is_none() {
                kept.push(i);
            }
        }
        let checked: Vec<&[u8]> = kept.iter().map(|&i| messages[i]).collect();
        let decoded = self.decode_checked(&checked);
        let mut bad: Vec<(usize, String)> = decoded
            .bad
            .into_iter()
            .map(|(i, error)| (kept[i], error))
            .chain(refused)
            .collect();
        bad.sort_by_key(|(i, _)| *i);
        Decoded {
            rows: decoded.rows,
            good: decoded.good.iter().map(|&i| kept[i]).collect(),
            bad,
        }
    }

    /// [`Decoder::decode`] of messages that passed [`refusal`].
    fn decode_checked(&self, messages: &[&[u8]]) -> Decoded {
        let batch = match self.encode {
            Encode::Json => self.decode_json_batch(messages),
            Encode::Csv { .. } | Encode::Avro { .. } | Encode::Protobuf { .. } => {
                self.decode_text(messages)
            }
        };
        let (text_rows, good, mut bad) = match batch {
            Ok(rows) => (rows, (0..messages.len()).collect(), Vec::new()),
            Err(_) => self.decode_one_by_one(messages),
        };
        match self.read_typed_columns(&text_rows) {
            Ok((rows, failures)) if failures.is_empty() => Decoded { rows, good, bad },
            Ok((rows, failures)) => {
                let mut keep = vec![true; rows.num_rows()];
                for (row, error) in failures {
                    keep[row] = false;
                    bad.push((good[row], error));
                }
                bad.sort_by_key(|(i, _)| *i);
                let good = good
                    .iter()
                    .zip(&keep)
                    .filter(|(_, k)| **k)
                    .map(|(g, _)| *g)
                    .collect();
                let rows = filter_record_batch(&rows, &BooleanArray::from(keep)).unwrap_or(rows);
                Decoded { rows, good, bad }
            }
            Err(error) => Decoded {
                rows: RecordBatch::new_empty(self.schema.clone()),
                good: Vec::new(),
                bad: (0..messages.len())
                    .map(|i| (i, error.to_string()))
                    .collect(),
            },
        }
    }

    /// All messages through the kept JSON decoder. Fails unless each message is exactly one
    /// JSON object (the caller then decodes them one by one, which finds the culprits).
    fn decode_json_batch(&self, messages: &[&[u8]]) -> Result<RecordBatch, ArrowError> {
        let mut kept = self
            .json
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut decoder = match kept.take() {
            Some((rows, decoder)) if rows >= messages.len() => (rows, decoder),
            _ => {
                let rows = messages.len().max(JSON_BATCH_ROWS);
                (rows, self.json_decoder(rows)?)
            }
        };
        let batch = fill_json(&mut decoder.1, messages, &self.text_schema)?;
        // Only a decoder that finished cleanly is reused: an error leaves its tape dirty.
        *kept = Some(decoder);
        Ok(batch)
    }

    fn json_decoder(&self, rows: usize) -> Result<JsonDecoder, ArrowError> {
        datafusion::arrow::json::ReaderBuilder::new(self.text_schema.clone())
            .with_strict_mode(false)
            .with_coerce_primitive(true)
            .with_batch_size(rows.max(1))
            .build_decoder()
    }

    fn decode_text(&self, messages: &[&[u8]]) -> Result<RecordBatch, ArrowError> {
        match &self.encode {
            Encode::Json => {
                let mut decoder = self.json_decoder(messages.len())?;
                for message in messages {
                    if !looks_like_object(message) {
                        return Err(ArrowError::JsonError("not a JSON object".into()));
                    }
                    let used = decoder.decode(message)?;
                    if used != message.len() {
                        return Err(ArrowError::JsonError(
                            "trailing bytes after the JSON value".into(),
                        ));
                    }
                }
                let batch = decoder.flush()?;
                let batch =
                    batch.unwrap_or_else(|| RecordBatch::new_empty(self.text_schema.clone()));
                if batch.num_rows() != messages.len() {
                    return Err(ArrowError::JsonError("one JSON object per message".into()));
                }
                Ok(batch)
            }
            // Read by the Avro decoder before any of this.
            Encode::Avro { .. } | Encode::Protobuf { .. } => Err(ArrowError::InvalidArgumentError(
                "Avro and Protobuf messages are not text".into(),
            )),
            Encode::Csv { delimiter, .. } => {
                let mut decoder =
                    datafusion::arrow::csv::ReaderBuilder::new(self.text_schema.clone())
                        .with_header(false)
                        .with_delimiter(*delimiter)
                        .with_batch_size(messages.len().max(1))
                        .build_decoder();
                for message in messages {
                    let line = message.strip_suffix(b"\n").unwrap_or(message);
                    let line = line.strip_suffix(b"\r").unwrap_or(line);
                    if line.contains(&b'\n') {
                        return Err(ArrowError::CsvError("one CSV row per message".into()));
                    }
                    // The decoder needs the row ended by exactly one newline; most messages
                    // (file lines) already are.
                    let owned;
                    let mut rest: &[u8] = if message.len() == line.len() + 1 {
                        message
                    } else {
                        owned = [line, b"\n"].concat();
                        &owned
                    };
                    while !rest.is_empty() {
                        let used = decoder.decode(rest)?;
                        if used == 0 {
                            return Err(ArrowError::CsvError("row did not fit the decoder".into()));
                        }
                        rest = &rest[used..];
                    }
                }
                let batch = decoder.flush()?;
                let batch =
                    batch.unwrap_or_else(|| RecordBatch::new_empty(self.text_schema.clone()));
                if batch.num_rows() != messages.len() {
                    return Err(ArrowError::CsvError("one CSV row per message".into()));
                }
                Ok(batch)
            }
        }
    }

    /// The slow path: each message on its own, so a bad one does not take the batch down.
    fn decode_one_by_one(
        &self,
        messages: &[&[u8]],
    ) -> (RecordBatch, Vec<usize>, Vec<(usize, String)>) {
        let mut batches = Vec::new();
        let mut good = Vec::new();
        let mut bad = Vec::new();
        for (i, message) in messages.iter().enumerate() {
            match self.decode_text(std::slice::from_ref(message)) {
                Ok(batch) => {
                    batches.push(batch);
                    good.push(i);
                }
                Err(error) => bad.push((i, describe(&error))),
            }
        }
        let rows = concat_batches(&self.text_schema, &batches)
            .unwrap_or_else(|_| RecordBatch::new_empty(self.text_schema.clone()));
        (rows, good, bad)
    }

    /// Parses the text timestamp columns and canonicalizes the uuid ones; returns the rows in
    /// the declared schema and the rows whose values could not be read.
    fn read_typed_columns(
        &self,
        text: &RecordBatch,
    ) -> Result<(RecordBatch, Vec<(usize, String)>), ArrowError> {
        let mut columns = Vec::with_capacity(self.schema.fields().len());
        let mut failures = Vec::new();
        for (i, field) in self.schema.fields().iter().enumerate() {
            let column = text.column(i);
            match field.data_type() {
                DataType::Timestamp(unit, zone) => {
                    let strings = column.as_string::<i32>();
                    let parsed = parse_timestamp_column(strings, unit, zone.clone())?;
                    for row in 0..strings.len() {
                        if strings.is_valid(row) && parsed.is_null(row) {
                            failures.push((
                                row,
                                format!(
                                    "bad timestamp {:?} for column {}",
                                    strings.value(row),
                                    field.name()
                                ),
                            ));
                        }
                    }
                    columns.push(parsed);
                }
                DataType::Utf8 if eddy_planner::pg_types::is_uuid(field) => {
                    let strings = column.as_string::<i32>();
                    let mut canonical = Vec::with_capacity(strings.len());
                    for row in 0..strings.len() {
                        if strings.is_null(row) {
                            canonical.push(None);
                            continue;
                        }
                        let value = strings.value(row);
                        match eddy_planner::pg_types::parse_uuid(value) {
                            Some(bytes) => {
                                canonical.push(Some(eddy_planner::pg_types::uuid_text(&bytes)))
                            }
                            None => {
                                canonical.push(None);
                                failures.push((
                                    row,
                                    format!("bad uuid {value:?} for column {}", field.name()),
                                ));
                            }
                        }
                    }
                    columns.push(Arc::new(StringArray::from(canonical)));
                }
                _ => columns.push(column.clone()),
            }
        }
        failures.sort_by_key(|(row, _)| *row);
        failures.dedup_by_key(|(row, _)| *row);
        let nullable = Arc::new(Schema::new(
            self.schema
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        let rows = RecordBatch::try_new(nullable, columns)?;
        Ok((rows, failures))
    }
}

/// Feeds each message to `decoder` on its own and checks that it added exactly one whole
/// object, so a row always belongs to its message (an object split over two messages, or two
/// objects in one, cannot even out).
fn fill_json(
    decoder: &mut JsonDecoder,
    messages: &[&[u8]],
    schema: &SchemaRef,
) -> Result<RecordBatch, ArrowError> {
    for (i, message) in messages.iter().enumerate() {
        if !looks_like_object(message) {
            return Err(ArrowError::JsonError("not a JSON object".into()));
        }
        let used = decoder.decode(message)?;
        if used != message.len() || decoder.has_partial_record() || decoder.len() != i + 1 {
            return Err(ArrowError::JsonError("one JSON object per message".into()));
        }
    }
    Ok(decoder
        .flush()?
        .unwrap_or_else(|| RecordBatch::new_empty(schema.clone())))
}

fn looks_like_object(message: &[u8]) -> bool {
    message.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

fn describe(error: &ArrowError) -> String {
    match error {
        ArrowError::JsonError(m) | ArrowError::CsvError(m) | ArrowError::ParseError(m) => m.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
