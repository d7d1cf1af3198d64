//! Decoding message payloads (JSON objects or CSV rows) into Arrow, in batches.
//!
//! A batch of messages is decoded in one go; only when that fails is it decoded message by
//! message, so one bad message becomes a dead letter and the rest go on. Timestamp columns are
//! read as text first and then parsed as RFC 3339, `YYYY-MM-DD HH:MM:SS[.ffffff]` or epoch
//! milliseconds (all digits), vectorized.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, StringArray,
};
use datafusion::arrow::compute::{
    cast_with_options, concat_batches, filter_record_batch, CastOptions,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::error::ArrowError;

use super::Encode;

pub struct Decoder {
    /// The declared payload schema.
    schema: SchemaRef,
    /// The same, with timestamp columns as text.
    text_schema: SchemaRef,
    encode: Encode,
}

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
        Self {
            schema,
            text_schema,
            encode,
        }
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    pub fn decode(&self, messages: &[&[u8]]) -> Decoded {
        let (text_rows, good, mut bad) = match self.decode_text(messages) {
            Ok(rows) => (rows, (0..messages.len()).collect(), Vec::new()),
            Err(_) => self.decode_one_by_one(messages),
        };
        match self.parse_timestamps(&text_rows) {
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

    fn decode_text(&self, messages: &[&[u8]]) -> Result<RecordBatch, ArrowError> {
        match &self.encode {
            Encode::Json => {
                let mut decoder =
                    datafusion::arrow::json::ReaderBuilder::new(self.text_schema.clone())
                        .with_strict_mode(false)
                        .with_coerce_primitive(true)
                        .with_batch_size(messages.len().max(1))
                        .build_decoder()?;
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
                    let mut owned = line.to_vec();
                    owned.push(b'\n');
                    let mut rest: &[u8] = &owned;
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

    /// Parses the text timestamp columns; returns the rows in the declared schema and the
    /// rows whose timestamps could not be parsed.
    fn parse_timestamps(
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

fn looks_like_object(message: &[u8]) -> bool {
    message.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

fn describe(error: &ArrowError) -> String {
    match error {
        ArrowError::JsonError(m) | ArrowError::CsvError(m) | ArrowError::ParseError(m) => m.clone(),
        other => other.to_string(),
    }
}

/// Text → timestamp: all digits (optionally signed) are epoch milliseconds, anything else is
/// parsed as a date-time; unparseable values become NULL (the caller reports them).
fn parse_timestamp_column(
    strings: &StringArray,
    unit: &TimeUnit,
    zone: Option<Arc<str>>,
) -> Result<ArrayRef, ArrowError> {
    let is_millis = |s: &str| {
        let digits = s.strip_prefix('-').unwrap_or(s);
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    };
    let target = DataType::Timestamp(*unit, zone.clone());
    let safe = CastOptions {
        safe: true,
        ..Default::default()
    };
    if strings.iter().flatten().any(is_millis) {
        // Per-row choice between two parsers: build the millis column, cast the rest.
        let millis: Int64Array = strings
            .iter()
            .map(|s| {
                s.filter(|s| is_millis(s))
                    .and_then(|s| s.parse::<i64>().ok())
            })
            .collect();
        let texts: StringArray = strings
            .iter()
            .map(|s| s.filter(|s| !is_millis(s)))
            .collect();
        let from_millis = cast_with_options(
            &cast_with_options(
                &millis,
                &DataType::Timestamp(TimeUnit::Millisecond, zone),
                &safe,
            )?,
            &target,
            &safe,
        )?;
        let from_text = cast_with_options(&texts, &target, &safe)?;
        let choose_millis: BooleanArray = strings
            .iter()
            .map(|s| Some(s.is_some_and(is_millis)))
            .collect();
        return datafusion::arrow::compute::kernels::zip::zip(
            &choose_millis,
            &from_millis,
            &from_text,
        );
    }
    cast_with_options(strings, &target, &safe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::TimestampMicrosecondType;

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
}
