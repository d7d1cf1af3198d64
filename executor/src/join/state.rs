//! One side of a join: its rows by join key, in memory, and in the store.
//!
//! A row is kept as its Arrow row encoding (visible columns then stream key), with its degree
//! (how many rows of the other side it matches, counting the residual predicate; kept for the
//! sides an outer, semi, anti or mark join needs it for). In the store a row's key is
//! `partition (u16) ++ join key ++ row key`: the partition, a hash of the join key, leaves
//! room to split a join's state across threads by key hash later. Its value is the degree,
//! the join key's length, then the row.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use eddy_storage::{EpochBatch, RowCodec, StorageError, Store, TableId};
use hashbrown::{HashMap, HashSet};

use crate::Result;

/// A stored row of one side.
pub(super) struct Entry {
    /// Visible columns then stream key, in Arrow's row format.
    pub row: Box<[u8]>,
    pub degree: u64,
    /// The value of the side's eviction column (micros), when the side has one.
    pub time: Option<i64>,
}

/// A stored row's place: (join key, row key).
type RowId = (Box<[u8]>, Box<[u8]>);

/// The rows of one join key, by row key.
pub(super) type Bucket = BTreeMap<Box<[u8]>, Entry>;

pub(super) struct SideState {
    table: TableId,
    /// Visible columns then stream key.
    pub row_codec: RowCodec,
    /// The join key's types.
    pub key_codec: RowCodec,
    /// The stream key's fields.
    pub stream_key_codec: RowCodec,
    pub buckets: HashMap<Box<[u8]>, Bucket>,
    /// Rows changed since the last barrier.
    dirty: HashSet<RowId>,
    /// With an eviction rule: the column it reads, and the rows by that column's value.
    pub evict_column: Option<usize>,
    by_time: BTreeSet<(i64, RowId)>,
    /// The bound below which rows were evicted last (micros).
    pub retention: Option<i64>,
    pub rows: u64,
    pub bytes: u64,
    pub max_rows_per_key: u64,
    pub max_fan_out: u64,
    pub rows_evicted: u64,
}

pub(super) use crate::partition::partition;

fn nullable(fields: impl IntoIterator<Item = Field>) -> Arc<Schema> {
    Arc::new(Schema::new(
        fields
            .into_iter()
            .map(|f| f.with_nullable(true))
            .collect::<Vec<_>>(),
    ))
}

impl SideState {
    /// Memory the side holds, estimated: its rows, each row's map entries (bucket, index by
    /// time when it evicts), and one map entry per join key.
    pub fn memory_bytes(&self) -> usize {
        use crate::state_size::ENTRY_OVERHEAD;
        let per_row = ENTRY_OVERHEAD * if self.evict_column.is_some() { 2 } else { 1 };
        self.bytes as usize + self.rows as usize * per_row + self.buckets.len() * ENTRY_OVERHEAD
    }

    /// Opens one side and loads its rows from the last committed epoch.
    pub fn open(
        table: TableId,
        visible: &Schema,
        key_fields: &[Field],
        key_types: &[DataType],
        evict_column: Option<usize>,
        store: &dyn Store,
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
        let mut side = Self {
            table,
            row_codec: RowCodec::new(nullable(row_fields))?,
            key_codec: RowCodec::new(nullable(key_types))?,
            stream_key_codec: RowCodec::new(nullable(key_fields.iter().cloned()))?,
            buckets: HashMap::new(),
            dirty: HashSet::new(),
            evict_column,
            by_time: BTreeSet::new(),
            retention: None,
            rows: 0,
            bytes: 0,
            max_rows_per_key: 0,
            max_fan_out: 0,
            rows_evicted: 0,
        };
        let mut loaded = Vec::new();
        for (key, value) in store.scan_table(table)? {
            let corrupt = || StorageError::Corrupt(format!("join state row in table {table}"));
            if value.len() < 12 || key.len() < 2 {
                return Err(corrupt().into());
            }
            let degree = u64::from_le_bytes(value[..8].try_into().map_err(|_| corrupt())?);
            let key_len =
                u32::from_le_bytes(value[8..12].try_into().map_err(|_| corrupt())?) as usize;
            let rest = &key[2..];
            if rest.len() < key_len {
                return Err(corrupt().into());
            }
            let (join_key, row_key) = rest.split_at(key_len);
            loaded.push((
                join_key.to_vec(),
                row_key.to_vec(),
                value[12..].to_vec(),
                degree,
            ));
        }
        // The eviction column's values, decoded a batch of rows at a time.
        for rows in loaded.chunks(4096) {
            let times = match evict_column {
                Some(column) => {
                    let batch = side.row_codec.decode(rows.iter().map(|r| r.2.as_slice()))?;
                    Some(eddy_planner::window::to_micros(batch.column(column))?)
                }
                None => None,
            };
            for (i, (join_key, row_key, row, degree)) in rows.iter().enumerate() {
                let time = times.as_ref().and_then(|t| {
                    datafusion::arrow::array::Array::is_valid(t, i).then(|| t.value(i))
                });
                side.insert(
                    join_key,
                    row_key,
                    row.as_slice().into(),
                    *degree,
                    time,
                    false,
                );
            }
        }
        Ok(side)
    }

    /// Adds a row (`time`: its eviction column's value); `dirty` when it must be written at the
    /// next barrier.
    pub fn insert(
        &mut self,
        join_key: &[u8],
        row_key: &[u8],
        row: Box<[u8]>,
        degree: u64,
        time: Option<i64>,
        dirty: bool,
    ) {
        self.bytes += row.len() as u64;
        let bucket = self.buckets.entry_ref(join_key).or_default();
        if let Some(old) = bucket.insert(row_key.into(), Entry { row, degree, time }) {
            self.bytes -= old.row.len() as u64;
            if let Some(old_time) = old.time {
                self.by_time
                    .remove(&(old_time, (join_key.into(), row_key.into())));
            }
        } else {
            self.rows += 1;
        }
        self.max_rows_per_key = self.max_rows_per_key.max(bucket.len() as u64);
        if let Some(time) = time {
            self.by_time
                .insert((time, (join_key.into(), row_key.into())));
        }
        if dirty {
            self.dirty.insert((join_key.into(), row_key.into()));
        }
    }

    /// Removes a row; false when it was not there.
    pub fn remove(&mut self, join_key: &[u8], row_key: &[u8]) -> bool {
        let Some(bucket) = self.buckets.get_mut(join_key) else {
            return false;
        };
        let Some(old) = bucket.remove(row_key) else {
            return false;
        };
        if bucket.is_empty() {
            self.buckets.remove(join_key);
        }
        self.rows -= 1;
        self.bytes -= old.row.len() as u64;
        if let Some(time) = old.time {
            self.by_time
                .remove(&(time, (join_key.into(), row_key.into())));
        }
        self.dirty.insert((join_key.into(), row_key.into()));
        true
    }

    /// Evicts the rows whose eviction column is below `bound`: they leave the state (and the
    /// store) without any output. Returns them, oldest first.
    pub fn evict_below(&mut self, bound: i64) -> Vec<Entry> {
        self.retention = Some(self.retention.map_or(bound, |r| r.max(bound)));
        let mut evicted = Vec::new();
        while let Some((time, _)) = self.by_time.first() {
            if *time >= bound {
                break;
            }
            let Some((_, (join_key, row_key))) = self.by_time.pop_first() else {
                break;
            };
            let Some(bucket) = self.buckets.get_mut(&join_key) else {
                continue;
            };
            let Some(entry) = bucket.remove(&row_key) else {
                continue;
            };
            if bucket.is_empty() {
                self.buckets.remove(&join_key);
            }
            self.rows -= 1;
            self.bytes -= entry.row.len() as u64;
            self.rows_evicted += 1;
            self.dirty.insert((join_key, row_key));
            evicted.push(entry);
        }
        evicted
    }

    /// Changes a stored row's degree by `delta`; returns (old, new), or None when the row is
    /// not there.
    pub fn add_degree(
        &mut self,
        join_key: &[u8],
        row_key: &[u8],
        delta: i64,
    ) -> Option<(u64, u64)> {
        let entry = self.buckets.get_mut(join_key)?.get_mut(row_key)?;
        let old = entry.degree;
        entry.degree = old.saturating_add_signed(delta);
        self.dirty.insert((join_key.into(), row_key.into()));
        Some((old, entry.degree))
    }

    /// Writes the rows changed since the last barrier into the epoch.
    pub fn persist(&mut self, epoch: &mut EpochBatch) {
        for (join_key, row_key) in self.dirty.drain() {
            let mut key = Vec::with_capacity(2 + join_key.len() + row_key.len());
            key.extend_from_slice(&partition(&join_key).to_be_bytes());
            key.extend_from_slice(&join_key);
            key.extend_from_slice(&row_key);
            match self.buckets.get(&join_key).and_then(|b| b.get(&row_key)) {
                Some(entry) => {
                    let mut value = Vec::with_capacity(12 + entry.row.len());
                    value.extend_from_slice(&entry.degree.to_le_bytes());
                    value.extend_from_slice(&(join_key.len() as u32).to_le_bytes());
                    value.extend_from_slice(&entry.row);
                    epoch.put(self.table, &key, value);
                }
                None => epoch.delete(self.table, &key),
            }
        }
    }
}
