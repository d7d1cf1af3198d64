//! Polled messages into a batch of rows, by the source's format: each message a row (PLAIN),
//! an upsert or a deletion by key (UPSERT), or the changes of a Debezium event (DEBEZIUM).
//! A message that cannot be read becomes a dead letter; the others go on.

use datafusion::arrow::array::{Array, BooleanArray, RecordBatch};
use datafusion::arrow::compute::{filter_record_batch, interleave};

use super::{KafkaConnector, PendingMessage};
use crate::connector::decode::{decode_in_parts, Decoded};
use crate::connector::{with_includes, DeadLetter, MessageMeta, SourceBatch, SourceFormat};
use crate::formats::debezium_rows::event_changes;
use crate::Result;

/// What to decode: one text per change, the message it came from, whether it deletes, and
/// whether it is a tombstone's key (read by the key decoder).
#[derive(Default)]
struct Changes<'a> {
    texts: Vec<Vec<u8>>,
    messages: Vec<&'a PendingMessage>,
    deletes: Vec<bool>,
    keys: Vec<bool>,
}

impl<'a> Changes<'a> {
    fn push(&mut self, message: &'a PendingMessage, text: Vec<u8>, delete: bool) {
        self.texts.push(text);
        self.messages.push(message);
        self.deletes.push(delete);
        self.keys.push(false);
    }

    fn push_key(&mut self, message: &'a PendingMessage, key: Vec<u8>) {
        self.push(message, key, true);
        *self.keys.last_mut().expect("just pushed") = true;
    }
}

impl KafkaConnector {
    pub(super) fn decode(
        &self,
        partition: i32,
        messages: Vec<PendingMessage>,
    ) -> Result<SourceBatch> {
        let split = partition.to_string();
        let letter = |message: &PendingMessage, error: String, payload: Vec<u8>| DeadLetter {
            split: split.clone(),
            position: message.offset,
            error,
            payload,
            reader: String::new(),
        };
        let mut dead_letters = Vec::new();
        let mut changes = Changes::default();
        for message in &messages {
            match (&message.payload, self.spec.format) {
                (Some(payload), SourceFormat::Debezium) => {
                    match event_changes(
                        Some(payload),
                        &self.spec.payload_schema,
                        &self.spec.key_columns,
                    ) {
                        Ok(rows) => {
                            for row in rows {
                                changes.push(message, row.row, row.delete);
                            }
                        }
                        Err(error) => dead_letters.push(letter(message, error, payload.clone())),
                    }
                }
                (Some(payload), _) => changes.push(message, payload.clone(), false),
                // A Debezium tombstone only tells a compacted topic to forget the key.
                (None, SourceFormat::Debezium) => {}
                (None, SourceFormat::Upsert) => {
                    let key = match (&self.spec.key_encode, message.key.as_deref()) {
                        (Some(_), Some(key)) => Some(key.to_vec()),
                        (_, key) => key.and_then(|k| self.key_as_json(k)),
                    };
                    match key {
                        Some(key) => changes.push_key(message, key),
                        None => dead_letters.push(letter(
                            message,
                            "a tombstone whose key does not give the primary key".into(),
                            message.key.clone().unwrap_or_default(),
                        )),
                    }
                }
                (None, SourceFormat::Plain) => dead_letters.push(letter(
                    message,
                    "a message with no value (a tombstone) in a FORMAT PLAIN source".into(),
                    Vec::new(),
                )),
            }
        }
        let payloads: Vec<&[u8]> = changes.texts.iter().map(|t| t.as_slice()).collect();
        let decoded = self.decode_changes(&payloads, &changes.keys)?;
        for (i, error) in decoded.bad {
            dead_letters.push(letter(changes.messages[i], error, payloads[i].to_vec()));
        }
        let mut good = decoded.good;
        let mut rows = decoded.rows;
        if self.spec.format.keyed() {
            // A row without its whole primary key cannot be placed: a dead letter.
            let complete: Vec<bool> = (0..rows.num_rows())
                .map(|r| {
                    self.spec
                        .key_columns
                        .iter()
                        .all(|&c| rows.column(c).is_valid(r))
                })
                .collect();
            if complete.iter().any(|c| !c) {
                for (r, &ok) in complete.iter().enumerate() {
                    if !ok {
                        let i = good[r];
                        let error = "the primary key is missing".into();
                        dead_letters.push(letter(changes.messages[i], error, payloads[i].to_vec()));
                    }
                }
                rows = filter_record_batch(&rows, &BooleanArray::from(complete.clone()))?;
                good = good
                    .into_iter()
                    .zip(&complete)
                    .filter(|(_, ok)| **ok)
                    .map(|(g, _)| g)
                    .collect();
            }
        }
        dead_letters.sort_by_key(|d| d.position);
        let kept: Vec<&PendingMessage> = good.iter().map(|&i| changes.messages[i]).collect();
        let meta = MessageMeta {
            partition: Some(partition),
            offsets: kept.iter().map(|m| m.offset).collect(),
            keys: kept.iter().map(|m| m.key.clone()).collect(),
            timestamps: kept.iter().map(|m| m.timestamp).collect(),
        };
        let rows = with_includes(&self.spec, rows, &meta)?;
        let deletes = self
            .spec
            .format
            .keyed()
            .then(|| good.iter().map(|&i| changes.deletes[i]).collect());
        Ok(SourceBatch {
            split,
            rows,
            next_position: messages.last().map_or(0, |m| m.offset + 1),
            dead_letters,
            deletes,
        })
    }

    /// Values with the source's decoder and tombstones' keys with the key decoder, the rows
    /// back in message order.
    fn decode_changes(&self, payloads: &[&[u8]], keys: &[bool]) -> Result<Decoded> {
        if !keys.contains(&true) {
            return Ok(decode_in_parts(&self.decoders, payloads));
        }
        let (value_at, key_at): (Vec<usize>, Vec<usize>) =
            (0..payloads.len()).partition(|&i| !keys[i]);
        let pick = |at: &[usize]| at.iter().map(|&i| payloads[i]).collect::<Vec<_>>();
        let values = decode_in_parts(&self.decoders, &pick(&value_at));
        let tombstones = self.key_decoder.decode(&pick(&key_at));
        // (change index, which batch, row) for every good row, in change order.
        let mut rows: Vec<(usize, usize, usize)> = values
            .good
            .iter()
            .enumerate()
            .map(|(row, &i)| (value_at[i], 0, row))
            .chain(
                tombstones
                    .good
                    .iter()
                    .enumerate()
                    .map(|(row, &i)| (key_at[i], 1, row)),
            )
            .collect();
        rows.sort_unstable();
        let indices: Vec<(usize, usize)> = rows.iter().map(|&(_, b, r)| (b, r)).collect();
        let columns = (0..values.rows.num_columns())
            .map(|c| {
                let sides = [
                    values.rows.column(c).as_ref(),
                    tombstones.rows.column(c).as_ref(),
                ];
                Ok(interleave(&sides, &indices)?)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut bad: Vec<(usize, String)> = values
            .bad
            .into_iter()
            .map(|(i, e)| (value_at[i], e))
            .chain(tombstones.bad.into_iter().map(|(i, e)| (key_at[i], e)))
            .collect();
        bad.sort_by_key(|(i, _)| *i);
        Ok(Decoded {
            rows: RecordBatch::try_new(values.rows.schema(), columns)?,
            good: rows.iter().map(|&(i, _, _)| i).collect(),
            bad,
        })
    }

    /// A tombstone's key as a JSON object of the primary key: the key itself when it is a
    /// JSON object, else (a single-column key) the key as that column's value.
    fn key_as_json(&self, key: &[u8]) -> Option<Vec<u8>> {
        let text = std::str::from_utf8(key).ok()?.trim();
        if text.starts_with('{') {
            return Some(text.as_bytes().to_vec());
        }
        let [column] = self.spec.key_columns.as_slice() else {
            return None;
        };
        let name = self.spec.payload_schema.field(*column).name();
        let value = serde_json::to_string(text).ok()?;
        let numeric = text.parse::<f64>().is_ok();
        let value = if numeric { text.to_string() } else { value };
        Some(format!("{{{}: {value}}}", serde_json::to_string(name).ok()?).into_bytes())
    }
}
