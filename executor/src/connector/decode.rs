//! Decoding message payloads (JSON objects or CSV rows) into Arrow, in batches.
//!
//! A batch of messages is decoded in one go; only when that fails is it decoded message by
//! message, so one bad message becomes a dead letter and the rest go on. Timestamp columns are
//! read as text first and then parsed as RFC 3339, `YYYY-MM-DD HH:MM:SS[.ffffff]` or epoch
//! milliseconds (all digits), vectorized. A `uuid` column's values are made canonical (lower
//! case, hyphenated), and a message with one that is not a uuid is a dead letter.

use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, PrimitiveArray, RecordBatch, StringArray,
};
use datafusion::arrow::compute::{
    cast_with_options, concat_batches, filter_record_batch, CastOptions,
};
use datafusion::arrow::datatypes::{
    ArrowTimestampType, DataType, Field, Schema, SchemaRef, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::json::reader::Decoder as JsonDecoder;

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
        Self {
            schema,
            text_schema,
            encode,
            json: Mutex::new(None),
        }
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    pub fn decode(&self, messages: &[&[u8]]) -> Decoded {
        let batch = match self.encode {
            Encode::Json => self.decode_json_batch(messages),
            Encode::Csv { .. } => self.decode_text(messages),
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
    if let Some(parsed) = parse_plain_timestamps(strings, unit, &zone) {
        return Ok(parsed);
    }
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

/// The common case without chrono: every value a plain date-time that [`plain_timestamp`]
/// reads. `None` when any value is not (epoch millis, other forms, bad values): the caller
/// then takes the general path for the whole column, so results never depend on which path
/// ran.
fn parse_plain_timestamps(
    strings: &StringArray,
    unit: &TimeUnit,
    zone: &Option<Arc<str>>,
) -> Option<ArrayRef> {
    // A value without an offset is in the column's zone; read it here only when that is UTC.
    let naive_is_utc = match zone.as_deref() {
        None => true,
        Some(zone) => matches!(zone, "+00:00" | "UTC"),
    };
    match unit {
        TimeUnit::Second => plain_column::<TimestampSecondType>(strings, naive_is_utc, zone),
        TimeUnit::Millisecond => {
            plain_column::<TimestampMillisecondType>(strings, naive_is_utc, zone)
        }
        TimeUnit::Microsecond => {
            plain_column::<TimestampMicrosecondType>(strings, naive_is_utc, zone)
        }
        TimeUnit::Nanosecond => {
            plain_column::<TimestampNanosecondType>(strings, naive_is_utc, zone)
        }
    }
}

fn plain_column<T: ArrowTimestampType>(
    strings: &StringArray,
    naive_is_utc: bool,
    zone: &Option<Arc<str>>,
) -> Option<ArrayRef> {
    let per_second: i64 = match T::UNIT {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    };
    let mut values = Vec::with_capacity(strings.len());
    let mut last_minute = None;
    for row in 0..strings.len() {
        if strings.is_null(row) {
            values.push(0);
            continue;
        }
        let text = strings.value(row).as_bytes();
        let (seconds, nanos) = plain_timestamp(text, naive_is_utc, &mut last_minute)?;
        let sub = i64::from(nanos) / (1_000_000_000 / per_second);
        values.push(seconds.checked_mul(per_second)?.checked_add(sub)?);
    }
    let array = PrimitiveArray::<T>::new(values.into(), strings.nulls().cloned());
    Some(Arc::new(array.with_timezone_opt(zone.clone())))
}

/// A minute read before: `YYYY-MM-DD?HH:MM` and its seconds since the epoch. Consecutive
/// values mostly share it, and then only the seconds need reading.
struct Minute {
    text: [u8; 16],
    seconds: i64,
}

/// Reads `YYYY-MM-DD[T| ]HH:MM:SS[.f{1,9}][Z|±HH:MM]` as seconds since the epoch (UTC) and
/// nanoseconds, the way arrow's parser does; `None` for anything else or anything arrow might
/// read differently (leap seconds, odd offsets, a value without offset when `naive_is_utc` is
/// false), which the general path then handles.
fn plain_timestamp(
    s: &[u8],
    naive_is_utc: bool,
    last_minute: &mut Option<Minute>,
) -> Option<(i64, u32)> {
    fn digits(s: &[u8]) -> Option<u32> {
        s.iter().try_fold(0u32, |n, &b| {
            b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0'))
        })
    }
    if s.len() < 19 || s[16] != b':' {
        return None;
    }
    let minute = match last_minute {
        Some(minute) if minute.text == s[..16] => minute.seconds,
        _ => {
            if s[4] != b'-' || s[7] != b'-' || !matches!(s[10], b'T' | b't' | b' ') || s[13] != b':'
            {
                return None;
            }
            let year = digits(&s[0..4])?;
            let month = digits(&s[5..7])?;
            let day = digits(&s[8..10])?;
            let hour = digits(&s[11..13])?;
            let minute = digits(&s[14..16])?;
            if !(1..=12).contains(&month)
                || day == 0
                || day > days_in_month(year, month)
                || hour > 23
                || minute > 59
            {
                return None;
            }
            let seconds =
                days_since_epoch(year, month, day) * 86_400 + i64::from(hour * 3600 + minute * 60);
            let text = s[..16].try_into().ok()?;
            *last_minute = Some(Minute { text, seconds });
            seconds
        }
    };
    let second = digits(&s[17..19])?;
    if second > 59 {
        return None;
    }
    let mut rest = &s[19..];
    let mut nanos = 0;
    if let Some(fraction) = rest.strip_prefix(b".") {
        let count = fraction.iter().take_while(|b| b.is_ascii_digit()).count();
        if count == 0 || count > 9 {
            return None;
        }
        nanos = digits(&fraction[..count])? * 10u32.pow(9 - count as u32);
        rest = &fraction[count..];
    }
    let offset = match rest {
        [] if naive_is_utc => 0,
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let hours = digits(&[*h1, *h2])?;
            let minutes = digits(&[*m1, *m2])?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            let offset = i64::from(hours * 3600 + minutes * 60);
            if *sign == b'+' {
                offset
            } else {
                -offset
            }
        }
        _ => return None,
    };
    Some((minute + i64::from(second) - offset, nanos))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a (valid, proleptic Gregorian) date.
fn days_since_epoch(year: u32, month: u32, day: u32) -> i64 {
    // Years counted from March, so that February (and its leap day) ends the year.
    let (year, month) = if month <= 2 {
        (i64::from(year) - 1, i64::from(month) + 9)
    } else {
        (i64::from(year), i64::from(month) - 3)
    };
    let leap_days = year.div_euclid(4) - year.div_euclid(100) + year.div_euclid(400);
    // Days before each month from March: 31, 30, 31, 30, 31 repeating, which (153m + 2) / 5
    // gives.
    let before_month = (153 * month + 2) / 5;
    // 719_468: days from 0000-03-01 to 1970-01-01.
    year * 365 + leap_days + before_month + i64::from(day) - 1 - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Int64Type;

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

    fn numbers(timestamps: &ArrayRef) -> Int64Array {
        let numbers = cast_with_options(timestamps, &DataType::Int64, &CastOptions::default());
        numbers.unwrap().as_primitive::<Int64Type>().clone()
    }

    #[test]
    fn the_plain_timestamp_path_agrees_with_arrow() {
        let mut texts = Vec::new();
        for year in [
            "0000", "0001", "0004", "1600", "1899", "1900", "1969", "1970", "2000", "2024", "2100",
            "2262", "9999",
        ] {
            for month in ["00", "01", "02", "03", "04", "12", "13"] {
                for day in ["00", "01", "28", "29", "30", "31", "32"] {
                    for time in ["00:00:00", "23:59:59", "12:34:56", "24:00:00", "23:59:60"] {
                        for separator in ["T", "t", " ", "x"] {
                            for fraction in ["", ".5", ".123", ".123456", ".123456789", "."] {
                                for suffix in
                                    ["", "Z", "z", "+05:30", "-08:00", "+23:59", "+0530", " Z"]
                                {
                                    texts.push(format!(
                                        "{year}-{month}-{day}{separator}{time}{fraction}{suffix}"
                                    ));
                                }
                            }
                        }
                    }
                }
            }
        }
        texts.extend(
            [
                "2024-01-01",
                "2024-01-01T00:00:00.1234567891Z",
                "2024-01-01T00:00:00+24:00",
                "2024-01-01T00:00:00-00:60",
                "2024-01-01T000000",
                " 2024-01-01T00:00:00",
                "+024-01-01T00:00:00",
                "1704067200000",
            ]
            .map(String::from),
        );
        let strings = StringArray::from_iter_values(&texts);
        let safe = CastOptions {
            safe: true,
            ..Default::default()
        };
        let mut quick = 0;
        for unit in [
            TimeUnit::Second,
            TimeUnit::Millisecond,
            TimeUnit::Microsecond,
            TimeUnit::Nanosecond,
        ] {
            for zone in [None, Some(Arc::<str>::from("+00:00"))] {
                let target = DataType::Timestamp(unit, zone.clone());
                let arrow = numbers(&cast_with_options(&strings, &target, &safe).unwrap());
                let mut accepted = Vec::new();
                for (row, text) in texts.iter().enumerate() {
                    let one = StringArray::from(vec![text.as_str()]);
                    let Some(ours) = parse_plain_timestamps(&one, &unit, &zone) else {
                        continue;
                    };
                    assert_eq!(ours.data_type(), &target);
                    let ours = numbers(&ours);
                    assert!(arrow.is_valid(row), "{text} ({unit:?}): arrow refuses it");
                    assert_eq!(ours.value(0), arrow.value(row), "{text} ({unit:?})");
                    accepted.push((text.as_str(), arrow.value(row)));
                }
                // The same values in one column, where neighbours share their minute.
                let column = StringArray::from_iter_values(accepted.iter().map(|(t, _)| t));
                let ours = numbers(&parse_plain_timestamps(&column, &unit, &zone).unwrap());
                for (row, (text, value)) in accepted.iter().enumerate() {
                    assert_eq!(ours.value(row), *value, "{text} ({unit:?}) in a column");
                }
                quick += accepted.len();
            }
        }
        // Most well-formed values take the quick path (so this test compares something).
        assert!(quick > 100_000, "{quick}");
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
