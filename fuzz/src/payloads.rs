//! Malformed JSON and CSV messages through the source decoder (in process): valid messages of
//! a few schemas, then truncated, with bytes flipped, wrong types, huge numbers, deep nesting,
//! invalid UTF-8. Every message must come out either as a row or as a dead letter with its
//! error; the decoder must never panic.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use eddy_executor::connector::decode::Decoder;
use eddy_executor::connector::Encode;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::Report;

/// The schemas messages are made for.
pub fn schemas() -> Vec<SchemaRef> {
    let field = |name: &str, data_type: DataType| Field::new(name, data_type, true);
    vec![
        Arc::new(Schema::new(vec![
            field("auction", DataType::Int64),
            field("price", DataType::Int64),
            field("channel", DataType::Utf8),
            field(
                "date_time",
                DataType::Timestamp(TimeUnit::Microsecond, None),
            ),
        ])),
        Arc::new(Schema::new(vec![
            field("id", DataType::Int32),
            field("ok", DataType::Boolean),
            field("score", DataType::Float64),
            field("amount", DataType::Decimal128(38, 10)),
            field(
                "at",
                DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
            ),
            field("day", DataType::Date32),
        ])),
    ]
}

const VALUES: &[&str] = &[
    "1",
    "-1",
    "0",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "1e308",
    "1e400",
    "-0.0",
    "3.14",
    "\"12\"",
    "\"x\"",
    "\"\"",
    "true",
    "null",
    "[]",
    "{}",
    "[1, [2, [3]]]",
    "\"2015-07-15T00:00:01.234Z\"",
    "\"2015-07-15 00:00:01\"",
    "\"9999-12-31T23:59:59.999999Z\"",
    "\"0000-00-00\"",
    "\"2015-13-45T99:99:99Z\"",
    "1437004801234",
    "-62135596800000",
    "99999999999999999999",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "12345678901234567890123456789012345678901",
];

/// The stack of a source's connector thread (a thread's default): decoding runs on one as
/// small, so that a decoder recursing too deep overflows here as it would in the server.
const SOURCE_THREAD_STACK: usize = 2 << 20;

/// Decodes `payloads` messages in batches, counting failures, on a thread with a source
/// thread's stack.
pub fn run(seed: u64, payloads: u64) -> Report {
    let decoding = std::thread::Builder::new()
        .name("fuzz-payloads".into())
        .stack_size(SOURCE_THREAD_STACK)
        .spawn(move || run_here(seed, payloads));
    match decoding.map(|thread| thread.join()) {
        Ok(Ok(report)) => report,
        Ok(Err(_)) | Err(_) => {
            let mut report = Report::new("payloads", seed);
            report.fail(format!("payloads seed {seed}: the decoding thread failed"));
            report
        }
    }
}

fn run_here(seed: u64, payloads: u64) -> Report {
    let mut report = Report::new("payloads", seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let schemas = schemas();
    while report.cases < payloads {
        let case: u64 = rng.random();
        let mut case_rng = StdRng::seed_from_u64(case);
        let schema = schemas[case_rng.random_range(0..schemas.len())].clone();
        let encode = match case_rng.random_range(0..3) {
            0 | 1 => Encode::Json,
            _ => Encode::Csv {
                delimiter: [b',', b';', b'|'][case_rng.random_range(0..3)],
                header: false,
            },
        };
        let messages: Vec<Vec<u8>> = (0..case_rng.random_range(1..64))
            .map(|_| message(&mut case_rng, &schema, &encode))
            .collect();
        report.cases += messages.len() as u64;
        let refs: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
        let decoder = Decoder::new(schema, encode);
        match catch_unwind(AssertUnwindSafe(|| decoder.decode(&refs))) {
            Ok(decoded) => {
                let accounted = decoded.good.len() + decoded.bad.len();
                if accounted != refs.len() || decoded.rows.num_rows() != decoded.good.len() {
                    report.fail(format!(
                        "payloads case {case}: {} messages gave {} rows, {} good, {} bad",
                        refs.len(),
                        decoded.rows.num_rows(),
                        decoded.good.len(),
                        decoded.bad.len()
                    ));
                }
                for _ in &decoded.good {
                    report.code("row", "", String::new);
                }
                for _ in &decoded.bad {
                    report.code("dead letter", "", String::new);
                }
            }
            Err(panic) => {
                let what = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                report.fail(format!(
                    "payloads case {case}: the decoder panicked: {what}"
                ));
            }
        }
    }
    report
}

/// A value that fits `data_type` (JSON text).
fn fitting(rng: &mut StdRng, data_type: &DataType) -> String {
    match data_type {
        DataType::Int32 | DataType::Int64 => rng.random_range(-1000..1000).to_string(),
        DataType::Float64 => format!("{:.3}", rng.random_range(-1e6..1e6)),
        DataType::Boolean => rng.random_bool(0.5).to_string(),
        DataType::Decimal128(_, _) => format!(
            "{}.{}",
            rng.random_range(0..1_000_000),
            rng.random_range(0..100)
        ),
        DataType::Date32 => format!(
            "\"2024-0{}-1{}\"",
            rng.random_range(1..10),
            rng.random_range(0..10)
        ),
        DataType::Timestamp(_, _) => format!(
            "\"2015-07-15T0{}:{}{}:00.{}Z\"",
            rng.random_range(0..10),
            rng.random_range(0..6),
            rng.random_range(0..10),
            rng.random_range(0..1000)
        ),
        _ => format!("\"s{}\"", rng.random_range(0..100)),
    }
}

/// One message of `schema`: valid, or broken in one of many ways.
pub fn message(rng: &mut StdRng, schema: &Schema, encode: &Encode) -> Vec<u8> {
    let broken = rng.random_bool(0.5);
    let value = |rng: &mut StdRng, data_type: &DataType| {
        if broken && rng.random_bool(0.3) {
            VALUES[rng.random_range(0..VALUES.len())].to_string()
        } else {
            fitting(rng, data_type)
        }
    };
    let mut text = match encode {
        Encode::Json => {
            let mut fields = Vec::new();
            for field in schema.fields() {
                if rng.random_bool(0.9) {
                    fields.push(format!(
                        "\"{}\": {}",
                        field.name(),
                        value(rng, field.data_type())
                    ));
                }
            }
            if rng.random_bool(0.1) {
                fields.push(format!("\"extra\": {}", value(rng, &DataType::Utf8)));
            }
            if rng.random_bool(0.05) {
                // Up to far past what a decoder that recurses survives (100,000 killed one).
                let depth = if rng.random_bool(0.8) {
                    rng.random_range(100..3_000)
                } else {
                    rng.random_range(20_000..200_000)
                };
                let (open, close) = if rng.random_bool(0.5) {
                    ("[", "]")
                } else {
                    ("{\"a\":", "}")
                };
                // Closed, or left open at some depth (malformed deep inside).
                let closed = if rng.random_bool(0.7) {
                    depth
                } else {
                    rng.random_range(0..depth)
                };
                fields.push(format!(
                    "\"deep\": {}1{}",
                    open.repeat(depth),
                    close.repeat(closed)
                ));
            }
            format!("{{{}}}", fields.join(", ")).into_bytes()
        }
        Encode::Csv { delimiter, .. } => {
            let mut cells = Vec::new();
            for field in schema.fields() {
                cells.push(value(rng, field.data_type()).trim_matches('"').to_string());
            }
            if broken && rng.random_bool(0.2) {
                cells.push("extra".into());
            }
            cells.join(&(*delimiter as char).to_string()).into_bytes()
        }
        // Binary formats: arbitrary bytes (the schema-driven decoders must refuse them).
        Encode::Avro { .. } | Encode::Protobuf { .. } => {
            (0..rng.random_range(0..64)).map(|_| rng.random()).collect()
        }
    };
    if !broken {
        return text;
    }
    match rng.random_range(0..10) {
        0 if !text.is_empty() => {
            let keep = rng.random_range(0..text.len());
            text.truncate(keep);
        }
        1 => {
            for _ in 0..rng.random_range(1..4) {
                if !text.is_empty() {
                    let at = rng.random_range(0..text.len());
                    text[at] = rng.random();
                }
            }
        }
        2 => text = (0..rng.random_range(0..64)).map(|_| rng.random()).collect(),
        3 => text.extend_from_slice(b"\n{\"second\": 1}"),
        4 => text = b"   ".to_vec(),
        5 => text.insert(0, 0xff),
        // JSON a lenient reader takes: a trailing comma, a missing one, two values.
        6 if text.ends_with(b"}") => {
            text.pop();
            text.extend_from_slice(b",}");
        }
        7 => {
            if let Some(at) = text.iter().position(|&b| b == b',') {
                text.remove(at);
            }
        }
        _ => {}
    }
    text
}
