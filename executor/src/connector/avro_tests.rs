use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{Int64Type, TimeUnit, TimestampMicrosecondType};

use super::*;

const SCHEMA: &str = r#"{"type": "record", "name": "Reading", "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": ["null", "string"], "default": null},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "tags", "type": {"type": "record", "name": "Tags", "fields": [
        {"name": "a", "type": "int"}]}},
    {"name": "unit", "type": "string", "default": "C"}
]}"#;

fn long(value: i64, out: &mut Vec<u8>) {
    let mut n = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn string(text: &str, out: &mut Vec<u8>) {
    long(text.len() as i64, out);
    out.extend_from_slice(text.as_bytes());
}

/// A datum of SCHEMA, or (without `unit`) of the schema before `unit` was added.
fn datum(id: i64, name: Option<&str>, ts: i64, a: i32, unit: Option<&str>) -> Vec<u8> {
    let mut out = Vec::new();
    long(id, &mut out);
    match name {
        None => long(0, &mut out),
        Some(name) => {
            long(1, &mut out);
            string(name, &mut out);
        }
    }
    long(ts, &mut out);
    long(i64::from(a), &mut out);
    if let Some(unit) = unit {
        string(unit, &mut out);
    }
    out
}

fn target() -> SchemaRef {
    let jsonb = std::collections::HashMap::from([(
        eddy_planner::pg_types::PG_TYPE_KEY.to_string(),
        "jsonb".to_string(),
    )]);
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("tags", DataType::Utf8, true).with_metadata(jsonb),
        Field::new("unit", DataType::Utf8, true),
        Field::new("missing", DataType::Int64, true),
    ]))
}

#[test]
fn bare_and_framed_datums_bad_ones_and_older_writers() {
    let decoder = AvroDecoder::new(SCHEMA, target()).unwrap();
    let mut framed = vec![0, 0, 0, 0, 42];
    framed.extend(datum(2, None, 2_000_000, 7, Some("F")));
    let messages: Vec<Vec<u8>> = vec![
        datum(1, Some("ann"), 1_000_000, 5, Some("K")),
        framed,
        b"\x02garbage that is not a datum".to_vec(),
        // Written before `unit` was added: read with its default.
        datum(4, Some("di"), 4_000_000, 9, None),
    ];
    let slices: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
    let decoded = decoder.decode(&slices);
    assert_eq!(decoded.good, vec![0, 1, 3]);
    assert_eq!(decoded.bad.len(), 1, "{:?}", decoded.bad);
    assert!(decoded.bad[0].1.contains("Avro"), "{:?}", decoded.bad);
    let rows = decoded.rows;
    let ids = rows.column(0).as_primitive::<Int64Type>();
    assert_eq!((ids.value(0), ids.value(1), ids.value(2)), (1, 2, 4));
    let names = rows.column(1).as_string::<i32>();
    assert_eq!(names.value(0), "ann");
    assert!(names.is_null(1));
    let ts = rows.column(2).as_primitive::<TimestampMicrosecondType>();
    assert_eq!(ts.value(1), 2_000_000);
    let tags = rows.column(3).as_string::<i32>();
    assert_eq!(tags.value(0), r#"{"a":5}"#);
    let units = rows.column(4).as_string::<i32>();
    assert_eq!(
        (units.value(0), units.value(1), units.value(2)),
        ("K", "F", "C")
    );
    assert_eq!(rows.column(5).null_count(), 3);
}

#[test]
fn a_whole_good_batch_takes_the_quick_path() {
    let decoder = AvroDecoder::new(SCHEMA, target()).unwrap();
    let messages: Vec<Vec<u8>> = (0..1000)
        .map(|i| datum(i, Some("x"), i * 10, 1, Some("C")))
        .collect();
    let slices: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
    let decoded = decoder.decode(&slices);
    assert!(decoded.bad.is_empty());
    assert_eq!(decoded.rows.num_rows(), 1000);
    let ids = decoded.rows.column(0).as_primitive::<Int64Type>();
    assert_eq!(ids.value(999), 999);
}

#[test]
fn the_schema_gives_arrow_columns_and_bad_schemas_are_refused() {
    let schema = avro_arrow_schema(SCHEMA).unwrap();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["id", "name", "ts", "tags", "unit"]);
    assert!(schema.field(1).is_nullable());
    assert!(matches!(
        schema.field(2).data_type(),
        DataType::Timestamp(TimeUnit::Microsecond, _)
    ));
    assert!(avro_arrow_schema("{not json").is_err());
    assert!(avro_arrow_schema(
        r#"{"type": "record", "name": "x", "fields": [{"name": "a", "type": "nope"}]}"#
    )
    .is_err());
}

#[test]
fn uuids_become_uuid_text() {
    let schema = r#"{"type": "record", "name": "R", "fields": [
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}}]}"#;
    let arrow = avro_arrow_schema(schema).unwrap();
    assert_eq!(arrow.field(0).data_type(), &DataType::FixedSizeBinary(16));
    let uuid = std::collections::HashMap::from([(
        eddy_planner::pg_types::PG_TYPE_KEY.to_string(),
        "uuid".to_string(),
    )]);
    let target = Arc::new(Schema::new(vec![
        Field::new("ref", DataType::Utf8, true).with_metadata(uuid)
    ]));
    let decoder = AvroDecoder::new(schema, target).unwrap();
    let mut message = Vec::new();
    string("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", &mut message);
    let decoded = decoder.decode(&[message.as_slice()]);
    assert!(decoded.bad.is_empty(), "{:?}", decoded.bad);
    assert_eq!(
        decoded.rows.column(0).as_string::<i32>().value(0),
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    );
}

#[test]
fn arbitrary_bytes_never_panic_and_every_message_is_accounted_for() {
    let decoder = AvroDecoder::new(SCHEMA, target()).unwrap();
    let mut seed = 7u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    // A length claiming far more bytes than the message has, and random messages.
    let mut messages: Vec<Vec<u8>> = vec![
        vec![
            0x02, 0x02, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, b'a',
        ],
        vec![0x02, 0x00, 0x02, 0x02, 0xfe, 0xff, 0xff, 0xff, 0x0f],
    ];
    for _ in 0..2000 {
        let len = (next() % 40) as usize;
        messages.push((0..len).map(|_| next() as u8).collect());
    }
    let slices: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
    for batch in slices.chunks(100) {
        let decoded = decoder.decode(batch);
        assert_eq!(decoded.good.len() + decoded.bad.len(), batch.len());
        assert_eq!(decoded.rows.num_rows(), decoded.good.len());
    }
}
