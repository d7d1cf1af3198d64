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

/// A batch decoded in parts at once gives what one decoder gives the whole: the same rows in
/// order, and the bad messages (some parts all bad) numbered as in the batch.
#[test]
fn parts_decoded_at_once_equal_the_whole() {
    let texts: Vec<String> = (0..5000)
        .map(|i| match i {
            i if i % 97 == 5 || (1200..1300).contains(&i) => format!("{{\"id\": {i}, \"ts\": 7"),
            i => format!(r#"{{"id": {i}, "name": "n{i}", "ts": "2024-01-01 00:00:00"}}"#),
        })
        .collect();
    let messages: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes()).collect();
    let whole = Decoder::new(schema(), Encode::Json).decode(&messages);
    for parts in [1, 2, 3, 4] {
        let decoders: Vec<Decoder> = (0..parts)
            .map(|_| Decoder::new(schema(), Encode::Json))
            .collect();
        for range in [0..5000, 1200..1300, 0..1500] {
            let batch = &messages[range.clone()];
            let expected = match range.len() {
                5000 => Decoded {
                    rows: whole.rows.clone(),
                    good: whole.good.clone(),
                    bad: whole.bad.clone(),
                },
                _ => Decoder::new(schema(), Encode::Json).decode(batch),
            };
            let decoded = decode_in_parts(&decoders, batch);
            assert_eq!(decoded.good, expected.good, "{parts} parts of {range:?}");
            assert_eq!(decoded.bad, expected.bad, "{parts} parts of {range:?}");
            assert_eq!(decoded.rows.num_rows(), expected.rows.num_rows());
            if expected.rows.num_rows() > 0 {
                assert_eq!(decoded.rows.columns(), expected.rows.columns());
            }
        }
    }
    assert_eq!(whole.bad.len(), 100 + 51);
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
