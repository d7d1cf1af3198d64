//! The sink log: each epoch's messages of a sink, written in the epoch's own commit and kept
//! until delivered.
//!
//! A record's key is `epoch (u64) ++ seq (u32)`, big-endian, so the log reads back in the order
//! it was written; `seq` counts the epoch's messages from 0. Its value is the message as it
//! will be sent (already encoded, so a resend after a crash sends the same bytes), with the
//! epoch's commit time: `version (u8) ++ ts_ms (i64) ++ key ++ value`, each of key and value a
//! `u32` length (`u32::MAX` for none) and its bytes.

use std::collections::VecDeque;
use std::ops::Bound;

use eddy_storage::{EpochBatch, KeyRange, Store, TableId};

use crate::sink::SinkMessage;
use crate::{ExecError, Result};

const VERSION: u8 = 1;
const NONE: u32 = u32::MAX;

/// A message's place in the log: its epoch and its number within the epoch.
pub type Position = (u64, u32);

/// One message read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    pub epoch: u64,
    pub seq: u32,
    /// When the epoch committed, in milliseconds since 1970 (the message's timestamp).
    pub ts_ms: i64,
    pub message: SinkMessage,
}

impl LogRecord {
    pub fn position(&self) -> Position {
        (self.epoch, self.seq)
    }

    /// Bytes of the key and value.
    pub fn bytes(&self) -> usize {
        self.message.key.as_ref().map_or(0, Vec::len)
            + self.message.value.as_ref().map_or(0, Vec::len)
    }
}

/// An epoch the log holds: how many messages and bytes, and when it committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggedEpoch {
    pub epoch: u64,
    pub messages: u32,
    pub bytes: u64,
    pub ts_ms: i64,
}

fn row_key((epoch, seq): Position) -> [u8; 12] {
    let mut key = [0; 12];
    key[..8].copy_from_slice(&epoch.to_be_bytes());
    key[8..].copy_from_slice(&seq.to_be_bytes());
    key
}

fn encode(ts_ms: i64, message: &SinkMessage) -> Vec<u8> {
    let part_len = |part: &Option<Vec<u8>>| 4 + part.as_ref().map_or(0, Vec::len);
    let mut value = Vec::with_capacity(9 + part_len(&message.key) + part_len(&message.value));
    value.push(VERSION);
    value.extend_from_slice(&ts_ms.to_be_bytes());
    for part in [&message.key, &message.value] {
        match part {
            Some(bytes) => {
                value.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
                value.extend_from_slice(bytes);
            }
            None => value.extend_from_slice(&NONE.to_be_bytes()),
        }
    }
    value
}

fn decode(key: &[u8], value: &[u8]) -> Result<LogRecord> {
    let corrupt = || ExecError::Internal("a sink log record is corrupt".into());
    let epoch = u64::from_be_bytes(
        key.get(..8)
            .ok_or_else(corrupt)?
            .try_into()
            .map_err(|_| corrupt())?,
    );
    let seq = u32::from_be_bytes(
        key.get(8..12)
            .ok_or_else(corrupt)?
            .try_into()
            .map_err(|_| corrupt())?,
    );
    if value.first() != Some(&VERSION) {
        return Err(corrupt());
    }
    let ts_ms = i64::from_be_bytes(
        value
            .get(1..9)
            .ok_or_else(corrupt)?
            .try_into()
            .map_err(|_| corrupt())?,
    );
    let mut at = 9;
    let mut part = || -> Result<Option<Vec<u8>>> {
        let len = u32::from_be_bytes(
            value
                .get(at..at + 4)
                .ok_or_else(corrupt)?
                .try_into()
                .map_err(|_| corrupt())?,
        );
        at += 4;
        if len == NONE {
            return Ok(None);
        }
        let bytes = value
            .get(at..at + len as usize)
            .ok_or_else(corrupt)?
            .to_vec();
        at += len as usize;
        Ok(Some(bytes))
    };
    let key = part()?;
    let value = part()?;
    Ok(LogRecord {
        epoch,
        seq,
        ts_ms,
        message: SinkMessage { key, value },
    })
}

/// Writes epoch `epoch`'s messages into `batch`; returns what the log then holds of it.
pub fn write_epoch(
    batch: &mut EpochBatch,
    table: TableId,
    epoch: u64,
    ts_ms: i64,
    messages: &[SinkMessage],
) -> Result<LoggedEpoch> {
    let count = u32::try_from(messages.len()).map_err(|_| {
        ExecError::NotSupported(format!(
            "one epoch changed a sink's input by {} messages, more than a sink log takes in one epoch (2^32)",
            messages.len()
        ))
    })?;
    let mut bytes = 0u64;
    for (seq, message) in messages.iter().enumerate() {
        let value = encode(ts_ms, message);
        bytes += value.len() as u64;
        batch.put_owned(table, row_key((epoch, seq as u32)).to_vec(), value);
    }
    Ok(LoggedEpoch {
        epoch,
        messages: count,
        bytes,
        ts_ms,
    })
}

/// Deletes an epoch's records (delivered) from the log, in `batch`.
pub fn trim_epoch(batch: &mut EpochBatch, table: TableId, logged: &LoggedEpoch) {
    for seq in 0..logged.messages {
        batch.delete_owned(table, row_key((logged.epoch, seq)).to_vec());
    }
}

/// Up to `limit` records after `after` (from the start when `None`), as the store holds them
/// now (committed epochs only).
pub fn read_after(
    store: &dyn Store,
    table: TableId,
    after: Option<Position>,
    limit: usize,
) -> Result<Vec<LogRecord>> {
    let snapshot = store.snapshot()?;
    let range = KeyRange {
        start: match after {
            Some(position) => Bound::Excluded(row_key(position).to_vec()),
            None => Bound::Unbounded,
        },
        end: Bound::Unbounded,
    };
    store
        .read_range(&snapshot, table, &range, limit)?
        .iter()
        .map(|(key, value)| decode(key, value))
        .collect()
}

/// The epochs the log holds, oldest first (read at restart, page by page).
pub fn logged_epochs(store: &dyn Store, table: TableId) -> Result<VecDeque<LoggedEpoch>> {
    const PAGE: usize = 4096;
    let mut epochs: VecDeque<LoggedEpoch> = VecDeque::new();
    let mut after = None;
    loop {
        let page = read_after(store, table, after, PAGE)?;
        for record in &page {
            let bytes = (9 + 8 + record.bytes()) as u64;
            match epochs.back_mut() {
                Some(last) if last.epoch == record.epoch => {
                    last.messages = last.messages.max(record.seq + 1);
                    last.bytes += bytes;
                }
                _ => epochs.push_back(LoggedEpoch {
                    epoch: record.epoch,
                    messages: record.seq + 1,
                    bytes,
                    ts_ms: record.ts_ms,
                }),
            }
        }
        match page.last() {
            Some(last) if page.len() == PAGE => after = Some(last.position()),
            _ => return Ok(epochs),
        }
    }
}

#[cfg(test)]
mod tests {
    use eddy_storage::MemStore;

    use super::*;

    fn message(key: Option<&str>, value: Option<&str>) -> SinkMessage {
        SinkMessage {
            key: key.map(|k| k.as_bytes().to_vec()),
            value: value.map(|v| v.as_bytes().to_vec()),
        }
    }

    #[test]
    fn epochs_read_back_in_order_and_trim() {
        let store = MemStore::default();
        let table = 40;
        let mut batch = EpochBatch::default();
        let first = write_epoch(
            &mut batch,
            table,
            7,
            1_000,
            &[message(Some("k"), Some("v")), message(Some("k"), None)],
        )
        .unwrap();
        let second = write_epoch(&mut batch, table, 9, 2_000, &[message(None, Some(""))]).unwrap();
        store.commit(&batch).unwrap();
        let records = read_after(&store, table, None, 10).unwrap();
        let positions: Vec<Position> = records.iter().map(LogRecord::position).collect();
        assert_eq!(positions, [(7, 0), (7, 1), (9, 0)]);
        assert_eq!(records[1].message, message(Some("k"), None));
        assert_eq!(records[2].message, message(None, Some("")));
        assert_eq!(records[2].ts_ms, 2_000);
        assert_eq!(
            read_after(&store, table, Some((7, 0)), 1).unwrap()[0].position(),
            (7, 1)
        );
        assert_eq!(
            logged_epochs(&store, table).unwrap(),
            VecDeque::from([first, second])
        );
        let mut batch = EpochBatch::default();
        trim_epoch(&mut batch, table, &first);
        store.commit(&batch).unwrap();
        assert_eq!(
            logged_epochs(&store, table).unwrap(),
            VecDeque::from([second])
        );
    }
}
