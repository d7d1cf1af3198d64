//! One side of a join: its rows by join key, in a state table.
//!
//! A row is kept as its Arrow row encoding (visible columns then stream key), with its degree
//! (how many rows of the other side it matches, counting the residual predicate; kept for the
//! sides an outer, semi, anti or mark join needs it for). Its group is the join key and its row
//! key the stream key; its stored value is the degree, the join key's length, then the row.
//!
//! A side with an eviction rule also keeps an index by time as auxiliary rows,
//! `0xFFFF ++ time ++ join key ++ row key` (the time's sign bit flipped so that keys sort like
//! times), so that the rows a watermark passes are one range read away, cached or not.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use eddy_storage::{EpochBatch, KeyRange, RowCodec, StorageError};

use crate::state_table::{
    KeyedStateTable, StateContext, StateRow, StateTableStats, StateValue, AUX_PREFIX,
};
use crate::Result;

/// A stored row of one side.
pub(super) struct Entry {
    /// Visible columns then stream key, in Arrow's row format.
    pub row: Box<[u8]>,
    pub degree: u64,
}

impl StateValue for Entry {
    fn memory(&self) -> usize {
        self.row.len() + 8
    }

    fn stored_len(&self) -> usize {
        12 + self.row.len()
    }
}

impl StateRow for Entry {
    fn encode(&self, group: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(&self.degree.to_le_bytes());
        out.extend_from_slice(&(group.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.row);
    }

    fn decode(_group: &[u8], stored: &[u8]) -> Result<Self> {
        let degree = stored
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .filter(|_| stored.len() >= 12)
            .ok_or_else(|| StorageError::Corrupt("join state row".into()))?;
        Ok(Self {
            row: stored[12..].into(),
            degree,
        })
    }
}

pub(super) struct SideState {
    pub table: KeyedStateTable<Entry>,
    /// Visible columns then stream key.
    pub row_codec: RowCodec,
    /// The join key's types.
    pub key_codec: RowCodec,
    /// The stream key's fields.
    pub stream_key_codec: RowCodec,
    /// With an eviction rule: the column it reads.
    pub evict_column: Option<usize>,
    /// The lowest time of a row added since the last eviction (it may be below `retention`).
    lowest_added: Option<i64>,
    pub figures: Figures,
}

/// A side's figures, kept with its table's counters.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(super) struct Figures {
    pub distinct_keys: u64,
    pub max_rows_per_key: u64,
    pub max_fan_out: u64,
    pub rows_evicted: u64,
    /// The bound below which rows were evicted last (micros).
    pub retention: Option<i64>,
}

impl Figures {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(41);
        for n in [
            self.distinct_keys,
            self.max_rows_per_key,
            self.max_fan_out,
            self.rows_evicted,
        ] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        if let Some(retention) = self.retention {
            out.extend_from_slice(&retention.to_le_bytes());
        }
        out
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let number = |i: usize| {
            Some(u64::from_le_bytes(
                bytes.get(i * 8..i * 8 + 8)?.try_into().ok()?,
            ))
        };
        Some(Self {
            distinct_keys: number(0)?,
            max_rows_per_key: number(1)?,
            max_fan_out: number(2)?,
            rows_evicted: number(3)?,
            retention: number(4).map(|n| n as i64),
        })
    }
}

fn nullable(fields: impl IntoIterator<Item = Field>) -> Arc<Schema> {
    Arc::new(Schema::new(
        fields
            .into_iter()
            .map(|f| f.with_nullable(true))
            .collect::<Vec<_>>(),
    ))
}

/// The auxiliary key of a row in the index by time.
fn time_key(time: i64, join_key: &[u8], row_key: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(10 + join_key.len() + row_key.len());
    key.extend_from_slice(&AUX_PREFIX);
    key.extend_from_slice(&((time as u64) ^ (1 << 63)).to_be_bytes());
    key.extend_from_slice(join_key);
    key.extend_from_slice(row_key);
    key
}

impl SideState {
    /// Opens one side: its counters and figures; rows come from the store as keys need them.
    pub fn open(
        state: &StateContext,
        table: eddy_storage::TableId,
        role: &'static str,
        visible: &Schema,
        key_fields: &[Field],
        key_types: &[DataType],
        evict_column: Option<usize>,
    ) -> Result<Self> {
        let row_fields = visible
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .chain(key_fields.iter().cloned());
        let key_types = key_types
            .iter()
            .enumerate()
            .map(|(i, t)| Field::new(format!("k{i}"), t.clone(), true));
        let table = state.open(table, role)?;
        let figures = Figures::decode(table.extra()).unwrap_or_default();
        let mut side = Self {
            table,
            row_codec: RowCodec::new(nullable(row_fields))?,
            key_codec: RowCodec::new(nullable(key_types))?,
            stream_key_codec: RowCodec::new(nullable(key_fields.iter().cloned()))?,
            evict_column,
            lowest_added: None,
            figures,
        };
        if side.table.is_legacy() {
            side.upgrade()?;
        }
        Ok(side)
    }

    /// A side written before state tables kept figures and an index by time: both are built
    /// once from its rows.
    fn upgrade(&mut self) -> Result<()> {
        let corrupt = || StorageError::Corrupt("join state row".into());
        let stored = self.table.store().scan_table(self.table.table())?;
        let mut rows = Vec::new();
        let mut keys = hashbrown::HashMap::<Vec<u8>, u64>::new();
        for (key, value) in &stored {
            if key.starts_with(&[0xFF]) {
                continue;
            }
            let key_len = value
                .get(8..12)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes)
                .ok_or_else(corrupt)? as usize;
            let rest = key
                .get(2..)
                .filter(|r| r.len() >= key_len)
                .ok_or_else(corrupt)?;
            let (join_key, row_key) = rest.split_at(key_len);
            *keys.entry(join_key.to_vec()).or_default() += 1;
            rows.push((join_key, row_key, &value[12..]));
        }
        self.figures.distinct_keys = keys.len() as u64;
        self.figures.max_rows_per_key = keys.values().copied().max().unwrap_or(0);
        if let Some(column) = self.evict_column {
            for part in rows.chunks(4096) {
                let batch = self.row_codec.decode(part.iter().map(|r| r.2))?;
                let times = eddy_planner::window::to_micros(batch.column(column))?;
                for (i, (join_key, row_key, _)) in part.iter().enumerate() {
                    if datafusion::arrow::array::Array::is_valid(&times, i) {
                        let key = time_key(times.value(i), join_key, row_key);
                        self.table
                            .write_aux(key, Some((join_key.len() as u32).to_le_bytes().to_vec()));
                    }
                }
            }
        }
        Ok(())
    }

    /// Memory the side's cached rows hold, estimated.
    pub fn memory_bytes(&self) -> usize {
        self.table.cache_bytes()
    }

    /// Adds a row (`time`: its eviction column's value). Its group must be loaded.
    pub fn insert(
        &mut self,
        join_key: &[u8],
        row_key: &[u8],
        row: Box<[u8]>,
        degree: u64,
        time: Option<i64>,
    ) -> Result<()> {
        let was_empty = self.table.group(join_key).is_none_or(|g| g.is_empty());
        self.table
            .insert(join_key, row_key, Entry { row, degree })?;
        if was_empty {
            self.figures.distinct_keys += 1;
        }
        let rows = self.table.group(join_key).map_or(0, |g| g.len() as u64);
        self.figures.max_rows_per_key = self.figures.max_rows_per_key.max(rows);
        if let (Some(time), Some(_)) = (time, self.evict_column) {
            self.table.write_aux(
                time_key(time, join_key, row_key),
                Some((join_key.len() as u32).to_le_bytes().to_vec()),
            );
            self.lowest_added = Some(self.lowest_added.map_or(time, |t| t.min(time)));
        }
        Ok(())
    }

    /// Removes a row; false when it was not there.
    pub fn remove(&mut self, join_key: &[u8], row_key: &[u8]) -> Result<bool> {
        let removed = self.table.remove(join_key, row_key)?.is_some();
        if removed && self.table.group(join_key).is_some_and(|g| g.is_empty()) {
            self.figures.distinct_keys -= 1;
        }
        Ok(removed)
    }

    /// Removes every row of `join_key` (no row of the other side will ever meet them again).
    pub fn remove_key(&mut self, join_key: &[u8]) -> Result<()> {
        let row_keys: Vec<Box<[u8]>> = self
            .table
            .group(join_key)
            .map(|g| g.keys().cloned().collect())
            .unwrap_or_default();
        for row_key in row_keys {
            self.remove(join_key, &row_key)?;
        }
        Ok(())
    }

    /// Evicts the rows whose eviction column is below `bound`: they leave the state (and the
    /// store) without any output. Returns them, oldest first.
    pub fn evict_below(&mut self, bound: i64) -> Result<Vec<Entry>> {
        let from = match (self.figures.retention, self.lowest_added) {
            (Some(r), Some(l)) => r.min(l),
            (None, _) => i64::MIN,
            (Some(r), None) => r,
        };
        self.figures.retention = Some(self.figures.retention.map_or(bound, |r| r.max(bound)));
        self.lowest_added = None;
        if from >= bound {
            return Ok(Vec::new());
        }
        let range = KeyRange {
            start: std::ops::Bound::Included(time_key(from, &[], &[])),
            end: std::ops::Bound::Excluded(time_key(bound, &[], &[])),
        };
        // An index row's value is its join key's length, which splits its key again.
        let mut places = Vec::new();
        for (key, value) in self.table.read_aux(&range)? {
            let key_len = value
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes)
                .ok_or_else(|| StorageError::Corrupt("join time index row".into()))?
                as usize;
            let rest = key
                .get(10..)
                .filter(|r| r.len() >= key_len)
                .ok_or_else(|| StorageError::Corrupt("join time index row".into()))?;
            places.push((rest[..key_len].to_vec(), rest[key_len..].to_vec(), key));
        }
        self.table
            .load(places.iter().map(|(join_key, _, _)| join_key.as_slice()))?;
        let mut evicted = Vec::new();
        for (join_key, row_key, index_key) in places {
            self.table.write_aux(index_key, None);
            let removed = self.table.remove(&join_key, &row_key)?;
            if let Some(entry) = removed {
                if self.table.group(&join_key).is_some_and(|g| g.is_empty()) {
                    self.figures.distinct_keys -= 1;
                }
                self.figures.rows_evicted += 1;
                evicted.push(entry);
            }
        }
        Ok(evicted)
    }

    /// Changes a stored row's degree by `delta`; returns (old, new), or None when the row is
    /// not there.
    pub fn add_degree(
        &mut self,
        join_key: &[u8],
        row_key: &[u8],
        delta: i64,
    ) -> Result<Option<(u64, u64)>> {
        self.table.modify(join_key, row_key, |entry| {
            let old = entry.degree;
            entry.degree = old.saturating_add_signed(delta);
            (old, entry.degree)
        })
    }

    /// Writes the rows changed since the last barrier into the epoch, with the side's figures.
    pub fn persist(&mut self, epoch: &mut EpochBatch) -> Result<()> {
        self.table.set_extra(self.figures.encode());
        self.table.persist(epoch)
    }

    pub fn stats(&self) -> StateTableStats {
        self.table.stats()
    }
}
