//! An epoch's changes to a sink's input, as the messages its format writes.
//!
//! - PLAIN: each inserted row (and each update's new row, when forced append-only) is a
//!   message; deletes write nothing.
//! - UPSERT: an inserted or updated row is its key and the row; a delete is its key and no
//!   value (a tombstone, never the text `null`). An update that changes the key deletes the old
//!   key.
//! - DEBEZIUM: `c` for an insert (`r` for a row of the initial snapshot), `u` for an update of
//!   one key, `d` for a delete followed by a tombstone; an update that changes the key is a `d`
//!   of the old key (and its tombstone) and a `c` of the new one.
//!
//! Keys and rows are JSON objects ([`crate::formats::json`]).

use datafusion::arrow::datatypes::SchemaRef;

use crate::formats::debezium::{eddy_source, write_envelope, DebeziumOp};
use crate::formats::json::JsonObject;
use crate::sink::{SinkFormat, SinkSpec};
use crate::{ExecError, Op, Result, StreamChunk};

/// One message: its key and value bytes (`None`: no key / a tombstone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkMessage {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

/// Turns changelog chunks into a sink's messages.
#[derive(Debug, Clone)]
pub struct SinkEncoder {
    format: SinkFormat,
    /// Parquet files: each chunk's new rows as one message of Arrow IPC.
    rows: bool,
    schema: SchemaRef,
    key_columns: Vec<usize>,
    sink: String,
    relation: String,
}

/// A row's key and value text, encoded once.
struct Row {
    op: Op,
    key: Option<String>,
    value: String,
}

impl SinkEncoder {
    pub fn new(spec: &SinkSpec) -> Self {
        Self {
            format: spec.format,
            rows: spec.encode == crate::sink::SinkEncode::Parquet,
            schema: spec.schema.clone(),
            key_columns: spec.key_columns.clone(),
            sink: spec.name.clone(),
            relation: spec.input.clone(),
        }
    }

    /// Appends the messages of `chunk` (changes of epoch `epoch`, committed at `ts_ms`) to
    /// `out`; `snapshot`: the rows the input held when the sink was created.
    pub fn encode(
        &self,
        chunk: &StreamChunk,
        snapshot: bool,
        epoch: u64,
        ts_ms: i64,
        out: &mut Vec<SinkMessage>,
    ) -> Result<()> {
        if chunk.visible_len() != self.schema.fields().len() {
            return Err(ExecError::Internal(format!(
                "sink \"{}\" got rows of {} columns, its input has {}",
                self.sink,
                chunk.visible_len(),
                self.schema.fields().len()
            )));
        }
        if self.rows {
            return self.encode_rows(chunk, out);
        }
        let columns = chunk.visible_columns();
        let fields = self.schema.fields();
        // Only the rows a format writes are encoded (PLAIN skips deletes).
        let wanted = |op: Op| self.format != SinkFormat::Plain || op.is_insert();
        let value = JsonObject::new(
            columns
                .iter()
                .zip(fields.iter())
                .map(|(c, f)| (c.as_ref(), f.as_ref())),
        )?;
        let key = match self.key_columns.is_empty() {
            true => None,
            false => Some(JsonObject::new(
                self.key_columns
                    .iter()
                    .map(|&i| (columns[i].as_ref(), fields[i].as_ref())),
            )?),
        };
        let rows: Vec<Option<Row>> = chunk
            .ops
            .iter()
            .enumerate()
            .map(|(i, &op)| {
                wanted(op).then(|| Row {
                    op,
                    key: key.as_ref().map(|k| k.to_string(i)),
                    value: value.to_string(i),
                })
            })
            .collect();
        let source = (self.format == SinkFormat::Debezium)
            .then(|| eddy_source(&self.sink, &self.relation, epoch, ts_ms, snapshot));
        let mut i = 0;
        while i < rows.len() {
            let Some(row) = &rows[i] else {
                i += 1;
                continue;
            };
            // An update's old row directly precedes its new one.
            let next = match row.op {
                Op::UpdateDelete => rows
                    .get(i + 1)
                    .and_then(Option::as_ref)
                    .filter(|next| next.op == Op::UpdateInsert),
                _ => None,
            };
            match self.format {
                SinkFormat::Plain => out.push(message(row.key.as_deref(), Some(&row.value))),
                SinkFormat::Upsert => match row.op {
                    Op::Insert | Op::UpdateInsert => {
                        out.push(message(row.key.as_deref(), Some(&row.value)))
                    }
                    Op::Delete | Op::UpdateDelete => {
                        // The update's new row (next round) replaces a key it keeps.
                        if next.is_none_or(|next| next.key != row.key) {
                            out.push(message(row.key.as_deref(), None));
                        }
                    }
                },
                SinkFormat::Debezium => {
                    let source = source.as_deref().unwrap_or("{}");
                    let mut event = String::new();
                    let mut write = |before: Option<&str>,
                                     after: Option<&str>,
                                     op,
                                     out: &mut Vec<SinkMessage>,
                                     key: Option<&str>| {
                        event.clear();
                        write_envelope(before, after, op, ts_ms, source, &mut event);
                        out.push(message(key, Some(&event)));
                        if op == DebeziumOp::Delete {
                            out.push(message(key, None));
                        }
                    };
                    match (row.op, next) {
                        (Op::UpdateDelete, Some(next)) if next.key == row.key => {
                            write(
                                Some(&row.value),
                                Some(&next.value),
                                DebeziumOp::Update,
                                out,
                                row.key.as_deref(),
                            );
                            i += 1;
                        }
                        (Op::Delete | Op::UpdateDelete, _) => write(
                            Some(&row.value),
                            None,
                            DebeziumOp::Delete,
                            out,
                            row.key.as_deref(),
                        ),
                        (Op::Insert | Op::UpdateInsert, _) => {
                            let op = match snapshot {
                                true => DebeziumOp::Read,
                                false => DebeziumOp::Create,
                            };
                            write(None, Some(&row.value), op, out, row.key.as_deref())
                        }
                    }
                }
            }
            i += 1;
        }
        Ok(())
    }
}

impl SinkEncoder {
    /// The chunk's new rows (inserts, and updates' new rows) as one message of Arrow IPC.
    fn encode_rows(&self, chunk: &StreamChunk, out: &mut Vec<SinkMessage>) -> Result<()> {
        let keep: datafusion::arrow::array::BooleanArray =
            chunk.ops.iter().map(|op| Some(op.is_insert())).collect();
        let batch = datafusion::arrow::array::RecordBatch::try_new(
            self.schema.clone(),
            chunk.visible_columns().to_vec(),
        )?;
        let batch = datafusion::arrow::compute::filter_record_batch(&batch, &keep)?;
        if batch.num_rows() > 0 {
            out.push(SinkMessage {
                key: None,
                value: Some(crate::sink::file::encode_rows(&batch)?),
            });
        }
        Ok(())
    }
}

fn message(key: Option<&str>, value: Option<&str>) -> SinkMessage {
    SinkMessage {
        key: key.map(|k| k.as_bytes().to_vec()),
        value: value.map(|v| v.as_bytes().to_vec()),
    }
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
