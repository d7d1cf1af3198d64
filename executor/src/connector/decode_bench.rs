//! Decoding speed per format, on the same generated Nexmark-like bids (auction, bidder, price,
//! channel, url, date_time, extra): messages per CPU-second of the decoding thread.
//!
//! `cargo test --release -p eddy-executor decode_speed_per_format -- --ignored --nocapture`
//! (`EDDY_DECODE_MESSAGES` sets the count; 1,000,000 by default).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use prost_reflect::prost::Message as _;
use prost_reflect::prost_types::field_descriptor_proto::{Label, Type};
use prost_reflect::prost_types::{
    DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet,
};
use prost_reflect::{DescriptorPool, DynamicMessage, Value};

use super::decode::Decoder;
use super::Encode;
use crate::formats::debezium_rows::event_changes;

const AVRO_BID: &str = r#"{"type": "record", "name": "Bid", "fields": [
    {"name": "auction", "type": "long"}, {"name": "bidder", "type": "long"},
    {"name": "price", "type": "long"}, {"name": "channel", "type": "string"},
    {"name": "url", "type": "string"},
    {"name": "date_time", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "extra", "type": "string"}]}"#;

struct Bid {
    auction: i64,
    bidder: i64,
    price: i64,
    channel: &'static str,
    url: String,
    micros: i64,
    extra: String,
}

fn bids(count: usize) -> Vec<Bid> {
    (0..count as i64)
        .map(|i| Bid {
            auction: 1000 + i % 997,
            bidder: 2000 + i % 10_007,
            price: 100 + i * 7 % 100_000,
            channel: ["Google", "Facebook", "Baidu", "Apple"][(i % 4) as usize],
            url: format!(
                "https://www.nexmark.com/item.htm?query=1&channel_id={}",
                i % 1000
            ),
            micros: 1_700_000_000_000_000 + i * 1000,
            extra: "x".repeat((i % 20) as usize),
        })
        .collect()
}

fn schema() -> SchemaRef {
    let number = |name| Field::new(name, DataType::Int64, true);
    let text = |name| Field::new(name, DataType::Utf8, true);
    Arc::new(Schema::new(vec![
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
    ]))
}

fn json(bid: &Bid) -> String {
    let seconds = bid.micros / 1_000_000;
    format!(
        r#"{{"auction": {}, "bidder": {}, "price": {}, "channel": "{}", "url": "{}", "date_time": "{}", "extra": "{}"}}"#,
        bid.auction,
        bid.bidder,
        bid.price,
        bid.channel,
        bid.url,
        // Seconds and microseconds as the text Nexmark writes.
        format_args!(
            "2023-11-14 {:02}:{:02}:{:02}.{:06}",
            seconds / 3600 % 24,
            seconds / 60 % 60,
            seconds % 60,
            bid.micros % 1_000_000
        ),
        bid.extra
    )
}

fn avro(bid: &Bid) -> Vec<u8> {
    fn long(value: i64, out: &mut Vec<u8>) {
        let mut n = ((value << 1) ^ (value >> 63)) as u64;
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }
    fn string(text: &str, out: &mut Vec<u8>) {
        long(text.len() as i64, out);
        out.extend_from_slice(text.as_bytes());
    }
    let mut out = Vec::with_capacity(128);
    long(bid.auction, &mut out);
    long(bid.bidder, &mut out);
    long(bid.price, &mut out);
    string(bid.channel, &mut out);
    string(&bid.url, &mut out);
    long(bid.micros, &mut out);
    string(&bid.extra, &mut out);
    out
}

/// A descriptor set with `bench.Bid` (the timestamp as int64 microseconds, so that no import
/// of the well-known types is needed).
pub(super) fn protobuf_descriptors() -> Vec<u8> {
    let field = |name: &str, number: i32, kind: Type| FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        label: Some(Label::Optional as i32),
        r#type: Some(kind as i32),
        ..Default::default()
    };
    let message = DescriptorProto {
        name: Some("Bid".into()),
        field: vec![
            field("auction", 1, Type::Int64),
            field("bidder", 2, Type::Int64),
            field("price", 3, Type::Int64),
            field("channel", 4, Type::String),
            field("url", 5, Type::String),
            field("date_time", 6, Type::Int64),
            field("extra", 7, Type::String),
        ],
        ..Default::default()
    };
    FileDescriptorSet {
        file: vec![FileDescriptorProto {
            name: Some("bench.proto".into()),
            package: Some("bench".into()),
            message_type: vec![message],
            syntax: Some("proto3".into()),
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

fn protobuf(bid: &Bid, pool: &DescriptorPool) -> Vec<u8> {
    let mut message = DynamicMessage::new(pool.get_message_by_name("bench.Bid").unwrap());
    message.set_field_by_name("auction", Value::I64(bid.auction));
    message.set_field_by_name("bidder", Value::I64(bid.bidder));
    message.set_field_by_name("price", Value::I64(bid.price));
    message.set_field_by_name("channel", Value::String(bid.channel.into()));
    message.set_field_by_name("url", Value::String(bid.url.clone()));
    message.set_field_by_name("date_time", Value::I64(bid.micros / 1000));
    message.set_field_by_name("extra", Value::String(bid.extra.clone()));
    message.encode_to_vec()
}

/// This thread's time on a CPU, in nanoseconds.
fn cpu_nanos() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    stat.split(' ').next().unwrap().parse().unwrap()
}

/// Decodes `messages` in batches of 4096 three times; prints the best rate.
fn measure(format: &str, messages: &[Vec<u8>], decode: impl Fn(&[&[u8]]) -> usize) {
    let slices: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
    let mut best = 0.0f64;
    for _ in 0..3 {
        let start = cpu_nanos();
        let rows: usize = slices.chunks(4096).map(&decode).sum();
        let seconds = (cpu_nanos() - start) as f64 / 1e9;
        assert_eq!(rows, messages.len(), "{format}: every message decodes");
        best = best.max(rows as f64 / seconds);
    }
    println!(
        "{format:>9}: {:>10.0} messages per CPU-second ({} messages)",
        best,
        messages.len()
    );
}

#[test]
#[ignore]
fn decode_speed_per_format() {
    let count = std::env::var("EDDY_DECODE_MESSAGES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let bids = bids(count);

    let json_messages: Vec<Vec<u8>> = bids.iter().map(|b| json(b).into_bytes()).collect();
    let decoder = Decoder::new(schema(), Encode::Json);
    measure("JSON", &json_messages, |batch| {
        decoder.decode(batch).rows.num_rows()
    });

    let debezium: Vec<Vec<u8>> = json_messages
        .iter()
        .map(|row| {
            let row = String::from_utf8_lossy(row);
            format!(r#"{{"before": null, "after": {row}, "op": "c", "ts_ms": 1700000000000, "source": {{"connector": "postgresql", "table": "bid"}}}}"#).into_bytes()
        })
        .collect();
    measure("Debezium", &debezium, |batch| {
        let rows: Vec<Vec<u8>> = batch
            .iter()
            .flat_map(|m| event_changes(Some(m), &schema(), &[0]).unwrap())
            .map(|change| change.row)
            .collect();
        let slices: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
        decoder.decode(&slices).rows.num_rows()
    });
    drop(debezium);

    let avro_messages: Vec<Vec<u8>> = bids.iter().map(avro).collect();
    let decoder = Decoder::new(
        schema(),
        Encode::Avro {
            schema: AVRO_BID.into(),
        },
    );
    measure("Avro", &avro_messages, |batch| {
        decoder.decode(batch).rows.num_rows()
    });

    let descriptors = protobuf_descriptors();
    let pool = DescriptorPool::decode(descriptors.as_slice()).unwrap();
    let proto_messages: Vec<Vec<u8>> = bids.iter().map(|b| protobuf(b, &pool)).collect();
    // The timestamp travels as milliseconds (an int64 field), read as epoch milliseconds.
    let decoder = Decoder::new(
        schema(),
        Encode::Protobuf {
            descriptors,
            message: "bench.Bid".into(),
        },
    );
    measure("Protobuf", &proto_messages, |batch| {
        decoder.decode(batch).rows.num_rows()
    });
}
