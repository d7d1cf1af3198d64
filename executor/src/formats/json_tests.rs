use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array,
    Int64Array, IntervalMonthDayNanoArray, ListArray, StringArray, StructArray,
    Time64MicrosecondArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{
    DataType, Field, Int64Type, IntervalMonthDayNano, IntervalUnit, TimeUnit,
};

use super::*;

fn one(array: ArrayRef, field: Field) -> Vec<String> {
    let column = JsonColumn::new(array.as_ref(), &field).unwrap();
    (0..array.len())
        .map(|row| {
            let mut out = String::new();
            column.write(row, &mut out);
            out
        })
        .collect()
}

fn field(data_type: DataType) -> Field {
    Field::new("c", data_type, true)
}

#[test]
fn numbers_and_nulls() {
    let ints = Arc::new(Int64Array::from(vec![Some(1), None, Some(i64::MIN)]));
    assert_eq!(
        one(ints, field(DataType::Int64)),
        ["1", "null", "-9223372036854775808"]
    );
    let floats = Arc::new(Float64Array::from(vec![
        0.1,
        3.0,
        1e100,
        -2.5e-7,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ]));
    assert_eq!(
        one(floats, field(DataType::Float64)),
        [
            "0.1",
            "3.0",
            "1e100",
            "-2.5e-7",
            "\"NaN\"",
            "\"Infinity\"",
            "\"-Infinity\""
        ]
    );
    let reals = Arc::new(Float32Array::from(vec![0.1f32]));
    assert_eq!(one(reals, field(DataType::Float32)), ["0.1"]);
    let bools = Arc::new(BooleanArray::from(vec![Some(true), Some(false), None]));
    assert_eq!(
        one(bools, field(DataType::Boolean)),
        ["true", "false", "null"]
    );
}

#[test]
fn decimals_keep_their_scale_exactly() {
    let decimals = Decimal128Array::from(vec![1250, -5, 0, 123456789012345678901234567890i128])
        .with_precision_and_scale(38, 2)
        .unwrap();
    assert_eq!(
        one(Arc::new(decimals), field(DataType::Decimal128(38, 2))),
        ["12.50", "-0.05", "0.00", "1234567890123456789012345678.90"]
    );
    let whole = Decimal128Array::from(vec![7])
        .with_precision_and_scale(10, 0)
        .unwrap();
    assert_eq!(
        one(Arc::new(whole), field(DataType::Decimal128(10, 0))),
        ["7"]
    );
}

#[test]
fn strings_are_escaped_and_json_columns_embedded() {
    let text = Arc::new(StringArray::from(vec![
        "plain",
        "quote \" back \\ nl \n tab \t \u{1}é",
    ]));
    assert_eq!(
        one(text.clone(), field(DataType::Utf8)),
        [
            "\"plain\"",
            "\"quote \\\" back \\\\ nl \\n tab \\t \\u0001é\""
        ]
    );
    // Every escaped string reads back as the original.
    let back: String = serde_json::from_str(&one(text, field(DataType::Utf8))[1]).unwrap();
    assert_eq!(back, "quote \" back \\ nl \n tab \t \u{1}é");
    let json = Arc::new(StringArray::from(vec![r#"{"a": [1, 2]}"#]));
    let marked = field(DataType::Utf8).with_metadata(HashMap::from([(
        eddy_planner::pg_types::PG_TYPE_KEY.to_string(),
        "jsonb".to_string(),
    )]));
    assert_eq!(one(json, marked), [r#"{"a": [1, 2]}"#]);
    let bytes = Arc::new(BinaryArray::from(vec![&[0x0a_u8, 0xff][..]]));
    assert_eq!(one(bytes, field(DataType::Binary)), [r#""\\x0aff""#]);
}

#[test]
fn times_as_postgres_writes_them_in_json() {
    // 2026-03-01 12:00:05.5 and a date before 1970.
    let micros = 1_772_366_405_500_000;
    let naive = Arc::new(TimestampMicrosecondArray::from(vec![micros, -1]));
    assert_eq!(
        one(
            naive,
            field(DataType::Timestamp(TimeUnit::Microsecond, None))
        ),
        [
            "\"2026-03-01T12:00:05.5\"",
            "\"1969-12-31T23:59:59.999999\""
        ]
    );
    let zoned = Arc::new(TimestampMicrosecondArray::from(vec![micros]).with_timezone("UTC"));
    assert_eq!(
        one(
            zoned,
            field(DataType::Timestamp(
                TimeUnit::Microsecond,
                Some("UTC".into())
            ))
        ),
        ["\"2026-03-01T12:00:05.5+00:00\""]
    );
    let dates = Arc::new(Date32Array::from(vec![0, 20_513, -719_528]));
    assert_eq!(
        one(dates, field(DataType::Date32)),
        ["\"1970-01-01\"", "\"2026-03-01\"", "\"0000-01-01\""]
    );
    let times = Arc::new(Time64MicrosecondArray::from(vec![43_205_000_001]));
    assert_eq!(
        one(times, field(DataType::Time64(TimeUnit::Microsecond))),
        ["\"12:00:05.000001\""]
    );
}

#[test]
fn intervals_as_iso_8601_durations() {
    let nanos = |h: i64, m: i64, s: i64, micros: i64| {
        ((h * 3600 + m * 60 + s) * 1_000_000 + micros) * 1_000
    };
    let intervals = Arc::new(IntervalMonthDayNanoArray::from(vec![
        IntervalMonthDayNano::new(14, 3, nanos(4, 5, 6, 500_000)),
        IntervalMonthDayNano::new(0, 0, 0),
        IntervalMonthDayNano::new(0, -1, -nanos(0, 0, 0, 500_000)),
        IntervalMonthDayNano::new(0, 0, nanos(2, 0, 0, 0)),
    ]));
    assert_eq!(
        one(
            intervals,
            field(DataType::Interval(IntervalUnit::MonthDayNano))
        ),
        [
            "\"P1Y2M3DT4H5M6.5S\"",
            "\"PT0S\"",
            "\"P-1DT-0.5S\"",
            "\"PT2H\""
        ]
    );
}

#[test]
fn lists_and_structs_nest() {
    let list = Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
        Some(vec![Some(1), None]),
        Some(vec![]),
        None,
    ]));
    let list_type = list.data_type().clone();
    assert_eq!(one(list, field(list_type)), ["[1,null]", "[]", "null"]);
    let row = StructArray::from(vec![
        (
            Arc::new(Field::new("x", DataType::Int64, true)),
            Arc::new(Int64Array::from(vec![1])) as ArrayRef,
        ),
        (
            Arc::new(Field::new("y\"", DataType::Utf8, true)),
            Arc::new(StringArray::from(vec!["a"])) as ArrayRef,
        ),
    ]);
    let row_type = row.data_type().clone();
    assert_eq!(
        one(Arc::new(row), field(row_type)),
        [r#"{"x":1,"y\"":"a"}"#]
    );
}

#[test]
fn objects_of_columns() {
    let a: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None]));
    let b: ArrayRef = Arc::new(StringArray::from(vec!["x", "y"]));
    let fields = [
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Utf8, true),
    ];
    let object = JsonObject::new([(a.as_ref(), &fields[0]), (b.as_ref(), &fields[1])]).unwrap();
    assert_eq!(object.to_string(0), r#"{"a":1,"b":"x"}"#);
    assert_eq!(object.to_string(1), r#"{"a":null,"b":"y"}"#);
}

#[test]
fn unsupported_types_are_named() {
    let map = Field::new(
        "m",
        DataType::Map(
            Arc::new(Field::new(
                "entries",
                DataType::Struct(
                    vec![
                        Field::new("k", DataType::Utf8, false),
                        Field::new("v", DataType::Utf8, true),
                    ]
                    .into(),
                ),
                false,
            )),
            false,
        ),
        true,
    );
    let error = check_type(&map).unwrap_err().to_string();
    assert!(error.contains("column \"m\""), "{error}");
}
