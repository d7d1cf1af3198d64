#!/usr/bin/env python3
"""Encodes records with a format's reference library, for the source-format tests.

    encode_messages.py avro SCHEMA.avsc [--confluent-id N] RECORDS.jsonl
    encode_messages.py protobuf DESCRIPTORS.desc MESSAGE RECORDS.jsonl

Reads one JSON record per line and prints each encoded message as one line of hex. Avro:
binary datums written by fastavro (bare, or in Confluent's wire format with a schema id);
values of decimal fields may be given as strings. Protobuf: messages built from the JSON with
google.protobuf's json_format (the proto3 JSON mapping) and serialized.
"""
import decimal
import io
import json
import struct
import sys


def avro(schema_path, records_path, confluent_id):
    import fastavro

    with open(schema_path) as f:
        schema = fastavro.parse_schema(json.load(f))
    decimals = {
        field["name"]
        for field in schema["fields"]
        if isinstance(field["type"], dict) and field["type"].get("logicalType") == "decimal"
    }
    with open(records_path) as f:
        for line in f:
            record = json.loads(line)
            for name in decimals:
                if isinstance(record.get(name), str):
                    record[name] = decimal.Decimal(record[name])
            out = io.BytesIO()
            if confluent_id is not None:
                out.write(b"\x00" + struct.pack(">I", confluent_id))
            fastavro.schemaless_writer(out, schema, record)
            print(out.getvalue().hex())


def protobuf(descriptor_path, message_name, records_path):
    from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

    with open(descriptor_path, "rb") as f:
        files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    message_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(message_name))
    with open(records_path) as f:
        for line in f:
            message = json_format.Parse(line, message_class())
            print(message.SerializeToString().hex())


def main():
    kind = sys.argv[1]
    if kind == "avro":
        confluent_id = None
        if "--confluent-id" in sys.argv:
            confluent_id = int(sys.argv[sys.argv.index("--confluent-id") + 1])
        avro(sys.argv[2], sys.argv[-1], confluent_id)
    elif kind == "protobuf":
        protobuf(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(f"unknown format {kind}")


if __name__ == "__main__":
    main()
