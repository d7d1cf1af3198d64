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
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Int64Type;
    use datafusion::arrow::datatypes::{TimeUnit, TimestampMicrosecondType};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        ]))
    }

    #[test]
    fn json_with_every_timestamp_form_and_dead_letters() {
        let decoder = Decoder::new(schema(), Encode::Json);
        let messages: Vec<&[u8]> = vec![
            br#"{"id": 1, "name": "a", "ts": "2024-01-01T00:00:01Z", "unknown": [1]}"#,
            br#"{"id": 2, "ts": "2024-01-01 00:00:02.5"}"#,
            b"not json",
            br#"{"id": 4, "ts": 1704067204000}"#,
            br#"{"id": "five", "ts": "2024-01-01 00:00:05"}"#,
            br#"{"id": 6, "ts": "yesterday"}"#,
        ];
        let decoded = decoder.decode(&messages);
        assert_eq!(decoded.good, vec![0, 1, 3]);
        assert_eq!(
            decoded.bad.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            vec![2, 4, 5]
        );
        assert!(
            decoded.bad[2].1.contains("bad timestamp"),
            "{:?}",
            decoded.bad
        );
        let ts = decoded
            .rows
            .column(2)
            .as_primitive::<TimestampMicrosecondType>();
        assert_eq!(ts.value(0), 1_704_067_201_000_000);
        assert_eq!(ts.value(1), 1_704_067_202_500_000);
        assert_eq!(ts.value(2), 1_704_067_204_000_000);
        // A missing field is NULL.
        assert!(decoded.rows.column(1).is_null(1));
    }

    #[test]
    fn uuid_columns_are_canonical_and_bad_ones_are_dead_letters() {
        let metadata = std::collections::HashMap::from([(
            eddy_planner::pg_types::PG_TYPE_KEY.to_string(),
            "uuid".to_string(),
        )]);
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, true).with_metadata(metadata)
        ]));
        let decoder = Decoder::new(schema, Encode::Json);
        let messages: Vec<&[u8]> = vec![
            br#"{"id": "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"}"#,
            br#"{"id": "not a uuid"}"#,
            br#"{"id": null}"#,
            br#"{"id": "{a0eebc999c0b4ef8bb6d6bb9bd380a12}"}"#,
        ];
        let decoded = decoder.decode(&messages);
        assert_eq!(decoded.good, vec![0, 2, 3]);
        assert_eq!(decoded.bad.len(), 1);
        assert!(decoded.bad[0].1.contains("bad uuid"), "{:?}", decoded.bad);
        let ids = decoded.rows.column(0).as_string::<i32>();
        assert_eq!(ids.value(0), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
        assert!(ids.is_null(1));
        assert_eq!(ids.value(2), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12");
    }

    #[test]
    fn csv_rows() {
        let decoder = Decoder::new(
            schema(),
            Encode::Csv {
                delimiter: b';',
                header: false,
            },
        );
        let messages: Vec<&[u8]> = vec![
            b"1;a;2024-01-01 00:00:01\n",
            b"x;b;2024-01-01 00:00:02",
            b"3;;1704067203000",
        ];
        let decoded = decoder.decode(&messages);
        assert_eq!(decoded.good, vec![0, 2]);
        assert_eq!(decoded.bad.len(), 1);
        let ts = decoded
            .rows
            .column(2)
            .as_primitive::<TimestampMicrosecondType>();
        assert_eq!(ts.value(1), 1_704_067_203_000_000);
    }

    #[test]
    fn a_kept_decoder_across_batches_good_and_bad() {
        let decoder = Decoder::new(schema(), Encode::Json);
        for round in 0..3 {
            let good: Vec<&[u8]> = vec![
                br#"{"id": 1, "ts": "2024-01-01T00:00:01Z"}"#,
                b"\n  {\"id\": 2, \"name\": \"b\"}\n",
            ];
            let decoded = decoder.decode(&good);
            assert_eq!(decoded.good, vec![0, 1], "round {round}");
            assert_eq!(decoded.rows.num_rows(), 2);
            // A failed batch must not leave rows behind in the kept decoder.
            let bad: Vec<&[u8]> = vec![br#"{"id": 3}"#, br#"{"id": "x"}"#, br#"{"id": 5"#];
            let decoded = decoder.decode(&bad);
            assert_eq!(decoded.good, vec![0]);
            assert_eq!(decoded.rows.num_rows(), 1);
            assert_eq!(
                decoded.rows.column(0).as_primitive::<Int64Type>().value(0),
                3
            );
        }
    }

    #[test]
    fn rows_never_shift_between_messages() {
        // Two objects in one message and one object over two messages: as many rows as
        // messages, yet every message is bad on its own.
        let decoder = Decoder::new(schema(), Encode::Json);
        let messages: Vec<&[u8]> = vec![br#"{"id": 1}{"id": 2"#, b"}", br#"{"id": 3}"#];
        let decoded = decoder.decode(&messages);
        assert_eq!(decoded.good, vec![2]);
        assert_eq!(
            decoded.bad.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            vec![0, 1]
        );
        let ids = decoded.rows.column(0).as_primitive::<Int64Type>();
        assert_eq!(ids.value(0), 3);
    }

    #[test]
    fn batches_larger_than_the_kept_decoder() {
        let decoder = Decoder::new(schema(), Encode::Json);
        let texts: Vec<String> = (0..JSON_BATCH_ROWS + 5)
            .map(|i| format!(r#"{{"id": {i}, "ts": "2024-01-01 00:00:00"}}"#))
            .collect();
        let messages: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes()).collect();
        for _ in 0..2 {
            let decoded = decoder.decode(&messages);
            assert!(decoded.bad.is_empty());
            assert_eq!(decoded.rows.num_rows(), messages.len());
            let ids = decoded.rows.column(0).as_primitive::<Int64Type>();
            assert_eq!(ids.value(JSON_BATCH_ROWS + 4), (JSON_BATCH_ROWS + 4) as i64);
        }
        let decoded = decoder.decode(&messages[..3]);
        assert_eq!(decoded.rows.num_rows(), 3);
    }

    #[test]
    fn timestamps_with_and_without_the_plain_path() {
        // A column of plain date-times takes the quick path; one epoch-millis value sends the
        // whole column down the general one. Both give the same values.
        let decoder = Decoder::new(schema(), Encode::Json);
        let plain: Vec<&[u8]> = vec![
            br#"{"ts": "2015-07-15T00:00:00.000Z"}"#,
            br#"{"ts": "2024-02-29 23:59:59.999999"}"#,
            br#"{"ts": null}"#,
            br#"{"ts": "1969-12-31T23:59:59.5-01:30"}"#,
        ];
        let mixed: Vec<&[u8]> = plain.iter().copied().chain([&b"{\"ts\": 0}"[..]]).collect();
        let expected = [
            Some(1_436_918_400_000_000),
            Some(1_709_251_199_999_999),
            None,
            Some(5_399_500_000),
        ];
        for messages in [plain, mixed] {
            let decoded = decoder.decode(&messages);
            assert!(decoded.bad.is_empty(), "{:?}", decoded.bad);
            let ts = decoded
                .rows
                .column(2)
                .as_primitive::<TimestampMicrosecondType>();
            for (row, want) in expected.iter().enumerate() {
                assert_eq!(ts.is_valid(row).then(|| ts.value(row)), *want, "row {row}");
            }
        }
    }

    /// Decoding speed on a file of Nexmark bids:
    /// `EDDY_DECODE_BENCH=bids.jsonl cargo test --release -p eddy-executor decode_throughput
    /// -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn decode_throughput() {
        let Ok(path) = std::env::var("EDDY_DECODE_BENCH") else {
            return;
        };
        let data = std::fs::read(path).unwrap();
        let lines: Vec<&[u8]> = data.split_inclusive(|&b| b == b'\n').collect();
        let text = |name| Field::new(name, DataType::Utf8, true);
        let number = |name| Field::new(name, DataType::Int64, true);
        let schema = Arc::new(Schema::new(vec![
            number("auction"),
            number("bidder"),
            number("price"),
            text("channel"),
            text("url"),
            Field::new(
                "date_time",
                DataType::Timestamp(TimeUnit::Microsecond, None),
                true,
            ),
            text("extra"),
        ]));
        // This thread's time on a CPU (the machine may be busy with other work).
        let cpu_nanos = || -> u64 {
            let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
            stat.split(' ').next().unwrap().parse().unwrap()
        };
        let decoder = Decoder::new(schema, Encode::Json);
        for _ in 0..5 {
            let start = cpu_nanos();
            let mut rows = 0;
            for batch in lines.chunks(8192) {
                rows += decoder.decode(batch).rows.num_rows();
            }
            let cpu = cpu_nanos() - start;
            assert_eq!(rows, lines.len());
            println!(
                "{rows} rows: {:.1} ns of CPU a row",
                cpu as f64 / rows as f64
            );
        }
    }
}
