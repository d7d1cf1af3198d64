//! `ENCODE PROTOBUF`: messages of one type of a FileDescriptorSet (`protoc
//! --descriptor_set_out --include_imports`), read with `prost-reflect` and handed to the JSON
//! decoder in proto3's JSON mapping (field names as in the .proto file, every field present,
//! 64-bit integers as numbers, enums by name, `Timestamp` as RFC 3339, wrappers as their
//! value). Fields the descriptor does not know (a newer writer) are skipped; fields the
//! message lacks take proto3's defaults; nested messages, maps and repeated messages reach
//! `jsonb` columns as JSON.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use prost_reflect::{DescriptorPool, DynamicMessage, Kind, MessageDescriptor, SerializeOptions};
use serde_json::Value;

use super::decode::{Decoded, Decoder};
use super::Encode;
use crate::{ExecError, Result};

pub struct ProtobufDecoder {
    message: MessageDescriptor,
    /// Columns that take a nested value as JSON text.
    json_columns: Vec<String>,
    json: Box<Decoder>,
}

impl ProtobufDecoder {
    pub fn new(descriptors: &[u8], message: &str, target: SchemaRef) -> Result<Self> {
        let message = message_descriptor(descriptors, message)?;
        let json_columns = target
            .fields()
            .iter()
            .filter(|f| f.data_type() == &DataType::Utf8)
            .map(|f| f.name().clone())
            .collect();
        Ok(Self {
            message,
            json_columns,
            json: Box::new(Decoder::new(target, Encode::Json)),
        })
    }

    pub fn decode(&self, messages: &[&[u8]]) -> Decoded {
        let options = SerializeOptions::new()
            .stringify_64_bit_integers(false)
            .use_proto_field_name(true)
            .skip_default_fields(false);
        let mut texts = Vec::with_capacity(messages.len());
        let mut kept = Vec::with_capacity(messages.len());
        let mut bad = Vec::new();
        for (i, bytes) in messages.iter().enumerate() {
            let decoded = DynamicMessage::decode(self.message.clone(), *bytes)
                .map_err(|e| format!("not a {} message: {e}", self.message.full_name()))
                .and_then(|message| {
                    message
                        .serialize_with_options(serde_json::value::Serializer, &options)
                        .map_err(|e| e.to_string())
                });
            match decoded {
                Ok(mut value) => {
                    self.nested_as_text(&mut value);
                    texts.push(value.to_string().into_bytes());
                    kept.push(i);
                }
                Err(error) => bad.push((i, error)),
            }
        }
        let slices: Vec<&[u8]> = texts.iter().map(Vec::as_slice).collect();
        let decoded = self.json.decode(&slices);
        bad.extend(decoded.bad.into_iter().map(|(i, e)| (kept[i], e)));
        bad.sort_by_key(|(i, _)| *i);
        Decoded {
            rows: decoded.rows,
            good: decoded.good.into_iter().map(|i| kept[i]).collect(),
            bad,
        }
    }

    /// Objects and arrays of text columns become their JSON text (for `jsonb` columns).
    fn nested_as_text(&self, value: &mut Value) {
        let Value::Object(fields) = value else {
            return;
        };
        for name in &self.json_columns {
            if let Some(field) = fields.get_mut(name) {
                if field.is_object() || field.is_array() {
                    *field = Value::String(field.to_string());
                }
            }
        }
    }
}

fn message_descriptor(descriptors: &[u8], message: &str) -> Result<MessageDescriptor> {
    let pool = DescriptorPool::decode(descriptors).map_err(|e| {
        ExecError::InvalidOption(format!(
            "not a FileDescriptorSet (protoc --descriptor_set_out): {e}"
        ))
    })?;
    pool.get_message_by_name(message).ok_or_else(|| {
        ExecError::InvalidOption(format!(
            "message \"{message}\" is not in the descriptor set (give its full name, package included)"
        ))
    })
}

/// The Arrow columns a message type gives (for inferring a source's columns): nested messages
/// and maps as structs (inferred as `jsonb`).
pub fn protobuf_arrow_schema(descriptors: &[u8], message: &str) -> Result<Schema> {
    let message = message_descriptor(descriptors, message)?;
    let fields: Vec<Field> = message
        .fields()
        .map(|field| {
            let data_type = if field.is_map() {
                DataType::Struct(Fields::empty())
            } else if field.is_list() {
                let item = kind_type(&field.kind());
                DataType::List(Arc::new(Field::new("item", item, true)))
            } else {
                kind_type(&field.kind())
            };
            Field::new(field.name(), data_type, true)
        })
        .collect();
    Ok(Schema::new(fields))
}

fn kind_type(kind: &Kind) -> DataType {
    match kind {
        Kind::Bool => DataType::Boolean,
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => DataType::Int32,
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 | Kind::Uint32 | Kind::Fixed32 => {
            DataType::Int64
        }
        Kind::Uint64 | Kind::Fixed64 => DataType::Decimal128(20, 0),
        Kind::Float => DataType::Float32,
        Kind::Double => DataType::Float64,
        // Enums by name; bytes as base64 text (proto3's JSON mapping).
        Kind::String | Kind::Bytes | Kind::Enum(_) => DataType::Utf8,
        Kind::Message(message) => match message.full_name() {
            "google.protobuf.Timestamp" => {
                DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))
            }
            "google.protobuf.Duration" | "google.protobuf.StringValue" => DataType::Utf8,
            "google.protobuf.BytesValue" => DataType::Utf8,
            "google.protobuf.BoolValue" => DataType::Boolean,
            "google.protobuf.Int32Value" => DataType::Int32,
            "google.protobuf.Int64Value" | "google.protobuf.UInt32Value" => DataType::Int64,
            "google.protobuf.UInt64Value" => DataType::Decimal128(20, 0),
            "google.protobuf.FloatValue" => DataType::Float32,
            "google.protobuf.DoubleValue" => DataType::Float64,
            _ => DataType::Struct(Fields::empty()),
        },
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::Int64Type;

    use super::*;
    use crate::connector::decode_bench::protobuf_descriptors;

    fn target() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("auction", DataType::Int64, true),
            Field::new("channel", DataType::Utf8, true),
            Field::new("missing", DataType::Int64, true),
        ]))
    }

    #[test]
    fn messages_defaults_and_arbitrary_bytes() {
        let decoder = ProtobufDecoder::new(&protobuf_descriptors(), "bench.Bid", target()).unwrap();
        // auction = 150 (field 1, varint), channel = "ab" (field 4), then an unknown field 9.
        let good = [0x08, 0x96, 0x01, 0x22, 0x02, b'a', b'b', 0x48, 0x01];
        let empty: [u8; 0] = [];
        let mut seed = 11u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let random: Vec<Vec<u8>> = (0..500)
            .map(|_| (0..next() % 30).map(|_| next() as u8).collect())
            .collect();
        let mut messages: Vec<&[u8]> = vec![&good, &empty];
        messages.extend(random.iter().map(Vec::as_slice));
        let decoded = decoder.decode(&messages);
        assert_eq!(decoded.good.len() + decoded.bad.len(), messages.len());
        assert_eq!(decoded.rows.num_rows(), decoded.good.len());
        assert_eq!(&decoded.good[..2], &[0, 1]);
        let auctions = decoded.rows.column(0).as_primitive::<Int64Type>();
        assert_eq!((auctions.value(0), auctions.value(1)), (150, 0));
        assert_eq!(decoded.rows.column(1).as_string::<i32>().value(0), "ab");
        assert!(decoded.rows.column(2).is_null(0));
        assert!(ProtobufDecoder::new(&protobuf_descriptors(), "Bid", target()).is_err());
        assert!(ProtobufDecoder::new(b"not a descriptor set", "bench.Bid", target()).is_err());
    }
}
