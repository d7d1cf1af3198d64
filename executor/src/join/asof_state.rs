//! One side of an ASOF join, in a state table: rows grouped by join key and ordered within it
//! by their **place**, `time ++ stream key` (the time as order-preserving bytes), so that a
//! chunk reads only the keys it touches and a best match is one step in a range.
//!
//! A side whose rows leave by time (an event-time temporal join's waiting left rows and its
//! right versions) also indexes them by auxiliary rows `time ++ join key ++ stream key`, so a
//! watermark reads only the rows it passed. Tables written before state tables have the same
//! rows under the same keys; they keep no group markers (a miss reads its key's range).

use std::collections::BTreeMap;
use std::ops::Bound;

use datafusion::arrow::datatypes::DataType;
use eddy_planner::JoinSideInfo;
use eddy_storage::{EpochBatch, KeyRange, RowCodec, StorageError, TableId};

use super::state::side_codecs;
use crate::state_table::{
    KeyedStateTable, StateContext, StateRow, StateTableStats, StateValue, AUX_PREFIX,
};
use crate::Result;

/// An encoded key (a join key, a stream key or a place).
pub(super) type Bytes = Box<[u8]>;

/// A side's row as the table keeps it: the stored value is the join key's length, then the row
/// (the layout the side had before state tables).
pub(super) struct AsofRow(pub Bytes);

impl StateValue for AsofRow {
    fn memory(&self) -> usize {
        self.0.len()
    }

    fn stored_len(&self) -> usize {
        4 + self.0.len()
    }
}

impl StateRow for AsofRow {
    fn encode(&self, group: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(&(group.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.0);
    }

    fn decode(_group: &[u8], stored: &[u8]) -> Result<Self> {
        let row = stored
            .get(4..)
            .ok_or_else(|| StorageError::Corrupt("ASOF join state row".into()))?;
        Ok(Self(row.into()))
    }
}

/// The side's figures, kept with the table's counters.
#[derive(Default)]
struct Figures {
    distinct_keys: u64,
    max_rows_per_key: u64,
    rows_evicted: u64,
}

impl Figures {
    fn encode(&self) -> Vec<u8> {
        [self.distinct_keys, self.max_rows_per_key, self.rows_evicted]
            .iter()
            .flat_map(|n| n.to_le_bytes())
            .collect()
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let number = |i: usize| Some(u64::from_le_bytes(bytes.get(i..i + 8)?.try_into().ok()?));
        Some(Self {
            distinct_keys: number(0)?,
            max_rows_per_key: number(8)?,
            rows_evicted: number(16)?,
        })
    }
}

pub(super) struct AsofSide {
    table: KeyedStateTable<AsofRow>,
    pub row_codec: RowCodec,
    pub key_codec: RowCodec,
    pub stream_key_codec: RowCodec,
    /// Bytes of a stored order value (8 or 16).
    pub width: usize,
    /// Whether rows are indexed by time.
    timed: bool,
    figures: Figures,
}

impl AsofSide {
    pub fn open(
        table: TableId,
        role: &'static str,
        side: &JoinSideInfo,
        key_types: &[DataType],
        width: usize,
        timed: bool,
        state: &StateContext,
    ) -> Result<Self> {
        let [row_codec, key_codec, stream_key_codec] =
            side_codecs(&side.schema, &side.key_fields, key_types)?;
        let table = state.open(table, role)?;
        let figures = Figures::decode(table.extra()).unwrap_or_default();
        let mut side = Self {
            table,
            row_codec,
            key_codec,
            stream_key_codec,
            width,
            timed,
            figures,
        };
        if side.table.is_legacy() {
            side.adopt_legacy()?;
        }
        Ok(side)
    }

    /// A table written before state tables: its rows are in place already; the figures (and
    /// for a timed side, the time index) are built from them once.
    fn adopt_legacy(&mut self) -> Result<()> {
        let corrupt = || StorageError::Corrupt("ASOF join state row".into());
        let mut keys = hashbrown::HashMap::<Vec<u8>, u64>::new();
        for (key, value) in self.table.store().scan_table(self.table.table())? {
            if key.starts_with(&[0xFF]) {
                continue;
            }
            let key_len = (value.get(..4))
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes)
                .ok_or_else(corrupt)? as usize;
            let rest = key.get(2..).filter(|r| r.len() >= key_len + self.width);
            let (join_key, place) = rest.ok_or_else(corrupt)?.split_at(key_len);
            *keys.entry(join_key.to_vec()).or_default() += 1;
            if self.timed {
                self.index(join_key, place);
            }
        }
        self.figures.distinct_keys = keys.len() as u64;
        self.figures.max_rows_per_key = keys.values().copied().max().unwrap_or(0);
        self.table.set_extra(self.figures.encode());
        Ok(())
    }

    /// The index row of a row at `place` of `join_key`: `time ++ join key ++ stream key`.
    fn index_key(&self, join_key: &[u8], place: &[u8]) -> Vec<u8> {
        let (time, stream_key) = place.split_at(self.width);
        let mut key = Vec::with_capacity(2 + place.len() + join_key.len());
        key.extend_from_slice(&AUX_PREFIX);
        key.extend_from_slice(time);
        key.extend_from_slice(join_key);
        key.extend_from_slice(stream_key);
        key
    }

    /// Puts the row at `place` of `join_key` in the time index (the value: the join key's
    /// length, to split the index row's key).
    fn index(&mut self, join_key: &[u8], place: &[u8]) {
        let aux = self.index_key(join_key, place);
        let len = (join_key.len() as u32).to_le_bytes().to_vec();
        self.table.write_aux(aux, Some(len));
    }

    /// Starts a chunk (see [`KeyedStateTable::begin_chunk`]).
    pub fn begin_chunk(&mut self) {
        self.table.begin_chunk();
    }

    /// Caches the rows of `keys`.
    pub fn load<'a>(&mut self, keys: impl IntoIterator<Item = &'a [u8]>) -> Result<()> {
        self.table.load(keys)
    }

    /// The rows of `join_key` (loaded) by place.
    pub fn rows(&self, join_key: &[u8]) -> Option<&BTreeMap<Bytes, AsofRow>> {
        self.table.group(join_key).filter(|rows| !rows.is_empty())
    }

    pub fn row(&self, join_key: &[u8], place: &[u8]) -> Option<&[u8]> {
        self.rows(join_key)?.get(place).map(|row| &row.0[..])
    }

    /// Puts a row at `place` of `join_key` (loaded).
    pub fn insert(&mut self, join_key: &[u8], place: &[u8], row: Bytes) -> Result<()> {
        let new_key = self.rows(join_key).is_none();
        let replaced = self.table.insert(join_key, place, AsofRow(row))?;
        if replaced.is_none() {
            self.figures.distinct_keys += u64::from(new_key);
            let rows = self.rows(join_key).map_or(0, |rows| rows.len() as u64);
            self.figures.max_rows_per_key = self.figures.max_rows_per_key.max(rows);
            if self.timed {
                self.index(join_key, place);
            }
        }
        Ok(())
    }

    /// Removes the row at `place` of `join_key` (loaded); returns it.
    pub fn remove(&mut self, join_key: &[u8], place: &[u8]) -> Result<Option<Bytes>> {
        let Some(row) = self.table.remove(join_key, place)? else {
            return Ok(None);
        };
        if self.rows(join_key).is_none() {
            self.figures.distinct_keys -= 1;
        }
        if self.timed {
            self.unindex(join_key, place);
        }
        Ok(Some(row.0))
    }

    /// Removes a row that left by time (counted as evicted).
    pub fn evict(&mut self, join_key: &[u8], place: &[u8]) -> Result<Option<Bytes>> {
        let row = self.remove(join_key, place)?;
        self.figures.rows_evicted += u64::from(row.is_some());
        Ok(row)
    }

    /// Takes the row at `place` out of the time index (it stays in the side).
    pub fn unindex(&mut self, join_key: &[u8], place: &[u8]) {
        let aux = self.index_key(join_key, place);
        self.table.write_aux(aux, None);
    }

    /// The indexed rows with times in `..end`, as (join key, place), in time order.
    pub fn indexed_before(&mut self, end: Bound<i128>) -> Result<Vec<(Bytes, Bytes)>> {
        let end = match end {
            Bound::Included(t) => t
                .checked_add(1)
                .map_or(Some(Bound::Unbounded), |t| before(t, self.width)),
            Bound::Excluded(t) => before(t, self.width),
            Bound::Unbounded => Some(Bound::Unbounded),
        };
        let Some(end) = end else {
            return Ok(Vec::new());
        };
        let range = KeyRange {
            start: Bound::Included(AUX_PREFIX.to_vec()),
            end: match end {
                Bound::Excluded(time) => Bound::Excluded([&AUX_PREFIX[..], &time].concat()),
                _ => KeyRange::prefix(&AUX_PREFIX).end,
            },
        };
        let corrupt = || StorageError::Corrupt("ASOF join time index row".into());
        let mut rows = Vec::new();
        for (key, value) in self.table.read_aux(&range)? {
            let key_len = (value.get(..4))
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes)
                .ok_or_else(corrupt)? as usize;
            let rest = key.get(2 + self.width..).filter(|r| r.len() >= key_len);
            let (join_key, stream_key) = rest.ok_or_else(corrupt)?.split_at(key_len);
            let mut place = key[2..2 + self.width].to_vec();
            place.extend_from_slice(stream_key);
            rows.push((join_key.into(), place.into()));
        }
        Ok(rows)
    }

    pub fn persist(&mut self, epoch: &mut EpochBatch) -> Result<()> {
        self.table.set_extra(self.figures.encode());
        self.table.persist(epoch)
    }

    pub fn rows_count(&self) -> u64 {
        self.table.rows()
    }

    pub fn stored_bytes(&self) -> u64 {
        self.table.stats().bytes
    }

    pub fn cache_bytes(&self) -> usize {
        self.table.cache_bytes()
    }

    pub fn distinct_keys(&self) -> u64 {
        self.figures.distinct_keys
    }

    pub fn max_rows_per_key(&self) -> u64 {
        self.figures.max_rows_per_key
    }

    pub fn rows_evicted(&self) -> u64 {
        self.figures.rows_evicted
    }

    pub fn stats(&self) -> StateTableStats {
        self.table.stats()
    }
}

/// A place's time.
pub(super) fn place_time(place: &[u8], width: usize) -> i128 {
    time_from_bytes(&place[..width]).unwrap_or(i128::MIN)
}

/// A row's place: its time, then its stream key.
pub(super) fn place(time: i128, stream_key: &[u8], width: usize) -> Bytes {
    let mut place = time_bytes(time, width);
    place.extend_from_slice(stream_key);
    place.into()
}

/// Places at or after `time` start at the returned bound; None when no time is that late.
pub(super) fn at_or_after(time: i128, width: usize) -> Option<Bound<Vec<u8>>> {
    let (min, max) = time_range(width);
    if time <= min {
        Some(Bound::Unbounded)
    } else if time > max {
        None
    } else {
        Some(Bound::Included(time_bytes(time, width)))
    }
}

/// Places before `time` end at the returned bound; None when no time is that early.
pub(super) fn before(time: i128, width: usize) -> Option<Bound<Vec<u8>>> {
    let (min, max) = time_range(width);
    if time <= min {
        None
    } else if time > max {
        Some(Bound::Unbounded)
    } else {
        Some(Bound::Excluded(time_bytes(time, width)))
    }
}

fn time_range(width: usize) -> (i128, i128) {
    if width == 8 {
        (i64::MIN.into(), i64::MAX.into())
    } else {
        (i128::MIN, i128::MAX)
    }
}

/// An order value as `width` (8 or 16) bytes that sort like the number.
fn time_bytes(time: i128, width: usize) -> Vec<u8> {
    if width == 8 {
        ((time as i64 as u64) ^ (1 << 63)).to_be_bytes().to_vec()
    } else {
        ((time as u128) ^ (1 << 127)).to_be_bytes().to_vec()
    }
}

fn time_from_bytes(bytes: &[u8]) -> Option<i128> {
    Some(match bytes.len() {
        8 => (u64::from_be_bytes(bytes.try_into().ok()?) ^ (1 << 63)) as i64 as i128,
        16 => (u128::from_be_bytes(bytes.try_into().ok()?) ^ (1 << 127)) as i128,
        _ => return None,
    })
}

#[cfg(test)]
#[path = "asof_state_tests.rs"]
mod tests;
