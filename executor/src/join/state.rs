//! One side of a join: its rows by join key, in a state table.
//!
//! A row is kept as its Arrow row encoding (visible columns then stream key), with its degree
//! (how many rows of the other side it matches, counting the residual predicate; kept for the
//! sides an outer, semi, anti or mark join needs it for). Its group is the join key and its row
//! key the stream key; its stored value is the degree, the join key's length, then the row.
//!
//! A side with an eviction rule (both inputs append-only, a watermark bounding what can match)
//! also keeps its rows' times in memory, so that the rows a watermark passes are found without
//! reading the store; opening such a side reads its rows' keys and times once. Its state is
//! bounded by the watermark, and so is that read.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use eddy_storage::{EpochBatch, RowCodec, StorageError};

use super::rows_by_time::RowsByTime;
use crate::state_table::{KeyedStateTable, StateContext, StateRow, StateTableStats, StateValue};
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
    /// With an eviction rule: the column it reads, and the rows by its value.
    pub evict_column: Option<usize>,
    by_time: RowsByTime,
    /// With an eviction rule: the rows of each join key that has any. Its rows are all read at
    /// open anyway (for their times), so the side knows which keys have rows and its table
    /// keeps no group markers (a put and a delete for every key a short-lived row brings).
    rows_by_key: Option<hashbrown::HashMap<Box<[u8]>, u64>>,
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

/// A schema of `fields`, each nullable (rows are encoded with NULLs allowed everywhere).
pub(super) fn nullable(fields: impl IntoIterator<Item = Field>) -> Arc<Schema> {
    Arc::new(Schema::new(
        fields
            .into_iter()
            .map(|f| f.with_nullable(true))
            .collect::<Vec<_>>(),
    ))
}

/// A join side's codecs: its rows (visible columns, then its stream key), its join keys (of
/// `key_types`) and its stream keys.
pub(super) fn side_codecs(
    visible: &Schema,
    key_fields: &[Field],
    key_types: &[DataType],
) -> Result<[RowCodec; 3]> {
    let row_fields = (visible.fields().iter())
        .map(|f| f.as_ref().clone())
        .chain(key_fields.iter().cloned());
    let join_key_fields =
        (key_types.iter().enumerate()).map(|(i, t)| Field::new(format!("k{i}"), t.clone(), true));
    Ok([
        RowCodec::new(nullable(row_fields))?,
        RowCodec::new(nullable(join_key_fields))?,
        RowCodec::new(nullable(key_fields.iter().cloned()))?,
    ])
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
        let [row_codec, key_codec, stream_key_codec] = side_codecs(visible, key_fields, key_types)?;
        let table = state.open(table, role)?;
        let figures = Figures::decode(table.extra()).unwrap_or_default();
        let mut side = Self {
            table,
            row_codec,
            key_codec,
            stream_key_codec,
            evict_column,
            by_time: RowsByTime::default(),
            rows_by_key: None,
            figures,
        };
        if evict_column.is_some() {
            side.table.without_markers();
            side.rows_by_key = Some(Default::default());
        }
        if side.table.is_legacy() || evict_column.is_some() {
            side.scan_rows()?;
        }
        Ok(side)
    }

    /// Reads the side's rows once: their times, for a side with an eviction rule, and the
    /// figures of a side written before state tables kept them.
    fn scan_rows(&mut self) -> Result<()> {
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
        if let Some(rows_by_key) = &mut self.rows_by_key {
            rows_by_key.extend(keys.iter().map(|(k, n)| (k.as_slice().into(), *n)));
        }
        if self.table.is_legacy() {
            self.figures.distinct_keys = keys.len() as u64;
            self.figures.max_rows_per_key = keys.values().copied().max().unwrap_or(0);
        }
        if let Some(column) = self.evict_column {
            for part in rows.chunks(4096) {
                let batch = self.row_codec.decode(part.iter().map(|r| r.2))?;
                let times = eddy_planner::window::to_micros(batch.column(column))?;
                for (i, (join_key, row_key, _)) in part.iter().enumerate() {
                    if datafusion::arrow::array::Array::is_valid(&times, i) {
                        self.by_time.insert(times.value(i), join_key, row_key);
                    }
                }
            }
        }
        Ok(())
    }

    /// Memory the side's cached rows hold, estimated.
    pub fn memory_bytes(&self) -> usize {
        let keys = self.rows_by_key.as_ref().map_or(0, |k| k.len());
        self.table.cache_bytes() + (self.by_time.len() + keys) * crate::state_size::ENTRY_OVERHEAD
    }

    /// Makes the groups of `keys` cached (reading only those known to have rows, when the side
    /// knows).
    pub fn load<'a>(&mut self, keys: impl IntoIterator<Item = &'a [u8]>) -> Result<()> {
        match &self.rows_by_key {
            Some(rows_by_key) => self
                .table
                .load_known(keys, |key| rows_by_key.contains_key(key)),
            None => self.table.load(keys),
        }
    }

    /// Counts a row of `join_key` in or out of `rows_by_key`.
    fn count_row(&mut self, join_key: &[u8], added: bool) {
        let Some(rows_by_key) = &mut self.rows_by_key else {
            return;
        };
        if added {
            *rows_by_key.entry_ref(join_key).or_default() += 1;
        } else if let Some(rows) = rows_by_key.get_mut(join_key) {
            *rows -= 1;
            if *rows == 0 {
                rows_by_key.remove(join_key);
            }
        }
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
        let replaced = self
            .table
            .insert(join_key, row_key, Entry { row, degree })?;
        if replaced.is_none() {
            self.count_row(join_key, true);
        }
        if was_empty {
            self.figures.distinct_keys += 1;
        }
        let rows = self.table.group(join_key).map_or(0, |g| g.len() as u64);
        self.figures.max_rows_per_key = self.figures.max_rows_per_key.max(rows);
        if let (Some(time), Some(_)) = (time, self.evict_column) {
            self.by_time.insert(time, join_key, row_key);
        }
        Ok(())
    }

    /// Removes a row (`time`: its eviction column's value); false when it was not there.
    pub fn remove(&mut self, join_key: &[u8], row_key: &[u8], time: Option<i64>) -> Result<bool> {
        let removed = self.table.remove(join_key, row_key)?.is_some();
        if removed {
            self.count_row(join_key, false);
        }
        if removed && self.table.group(join_key).is_some_and(|g| g.is_empty()) {
            self.figures.distinct_keys -= 1;
        }
        // A side that retracts may insert the same row key again with another time.
        if let (true, Some(time), Some(_)) = (removed, time, self.evict_column) {
            self.by_time.remove(time, join_key, row_key);
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
            self.remove(join_key, &row_key, None)?;
        }
        Ok(())
    }

    /// Evicts the rows whose eviction column is below `bound`: they leave the state (and the
    /// store) without any output. Returns them, oldest first.
    pub fn evict_below(&mut self, bound: i64) -> Result<Vec<Entry>> {
        self.figures.retention = Some(self.figures.retention.map_or(bound, |r| r.max(bound)));
        let places = self.by_time.take_below(bound);
        if places.is_empty() {
            return Ok(Vec::new());
        }
        self.load(places.iter().map(|(join_key, _)| &join_key[..]))?;
        let mut evicted = Vec::new();
        for (join_key, row_key) in places {
            // Gone already when a row of the other side's fixed keys took it out.
            if let Some(entry) = self.table.remove(&join_key, &row_key)? {
                self.count_row(&join_key, false);
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
