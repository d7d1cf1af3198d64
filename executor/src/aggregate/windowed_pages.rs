//! The windowed aggregate's state table: a window's groups as pages of [`PAGE_GROUPS`] groups
//! (rows of group columns then accumulator states, in Arrow's row format), grouped by the
//! window's end and keyed by page number; only pages holding a changed group are rewritten at
//! a barrier. Open windows are indexed by auxiliary rows (`end` → group count), read at open;
//! a window's pages are read only when a chunk or the watermark first reaches it. A page's
//! bytes leave memory once stored: the window holds its groups decoded.

use datafusion::arrow::array::{ArrayRef, RecordBatch};
use eddy_storage::{EpochBatch, KeyRange, StorageError};

use super::{WindowGroups, WindowedAggregateOperator};
use crate::state_table::{StateRow, StateValue, AUX_PREFIX};
use crate::{ExecError, Result};

/// Groups per persisted state page: an epoch rewrites only the pages holding a changed group,
/// so small pages keep each epoch's state writes close to what changed.
pub(super) const PAGE_GROUPS: usize = 64;
/// First byte of a page's key in tables written before state tables.
const LEGACY_PAGE_TAG: u8 = b'W';

/// A page of the older layout: its number and bytes.
type LegacyPage = ([u8; 4], Vec<u8>);

/// One stored page; its bytes are dropped once written (see the module's note).
pub(super) struct Page {
    bytes: Vec<u8>,
    stored: usize,
}

impl StateValue for Page {
    fn memory(&self) -> usize {
        self.bytes.capacity()
    }

    fn stored_len(&self) -> usize {
        self.stored
    }

    fn stored_as(&mut self, len: usize) {
        self.stored = len;
        self.bytes = Vec::new();
    }
}

impl StateRow for Page {
    fn encode(&self, _group: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(&self.bytes);
    }

    fn decode(_group: &[u8], stored: &[u8]) -> Result<Self> {
        Ok(Self {
            bytes: stored.to_vec(),
            stored: stored.len(),
        })
    }
}

/// A window's group in the table: its end, big-endian with the sign bit flipped (ends sort).
pub(super) fn window_group(end: i64) -> [u8; 8] {
    ((end as u64) ^ (1 << 63)).to_be_bytes()
}

fn end_of(group: &[u8]) -> Option<i64> {
    Some((u64::from_be_bytes(group.try_into().ok()?) ^ (1 << 63)) as i64)
}

fn index_key(end: i64) -> Vec<u8> {
    [&AUX_PREFIX[..], &window_group(end)].concat()
}

fn corrupt(what: &str) -> ExecError {
    ExecError::Storage(StorageError::Corrupt(format!("windowed aggregate {what}")))
}

/// The rows of a page: each is its length (`u32`, little-endian) and its bytes.
fn page_rows(mut page: &[u8]) -> Result<Vec<&[u8]>> {
    let mut rows = Vec::new();
    while !page.is_empty() {
        let (length, rest) = (page.split_first_chunk::<4>()).ok_or_else(|| corrupt("page"))?;
        let length = u32::from_le_bytes(*length) as usize;
        if rest.len() < length {
            return Err(corrupt("page"));
        }
        let (row, rest) = rest.split_at(length);
        rows.push(row);
        page = rest;
    }
    Ok(rows)
}

impl WindowedAggregateOperator {
    /// The open windows as the index has them: end → group count.
    pub(super) fn read_index(&mut self) -> Result<Vec<(i64, u64)>> {
        let rows = self.table.read_aux(&KeyRange::prefix(&AUX_PREFIX))?;
        rows.into_iter()
            .map(|(key, value)| {
                let end = key.get(2..).and_then(end_of);
                let count = value.try_into().ok().map(u64::from_le_bytes);
                end.zip(count).ok_or_else(|| corrupt("window index row"))
            })
            .collect()
    }

    /// Reads the stored windows of `ends` into memory (their pages, decoded).
    pub(super) fn restore(&mut self, ends: impl IntoIterator<Item = i64>) -> Result<()> {
        let ends: Vec<i64> = (ends.into_iter())
            .filter(|end| self.stored.contains_key(end))
            .collect();
        if ends.is_empty() {
            return Ok(());
        }
        let groups: Vec<[u8; 8]> = ends.iter().map(|&end| window_group(end)).collect();
        self.table
            .load_known(groups.iter().map(|g| &g[..]), |_| true)?;
        for (end, group) in ends.into_iter().zip(&groups) {
            self.stored.remove(&end);
            let mut batches = Vec::new();
            for page in self.table.group(group).into_iter().flat_map(|g| g.values()) {
                if page.bytes.is_empty() && page.stored > 0 {
                    return Err(crate::aggregate::internal(
                        "a window page read after it was dropped",
                    ));
                }
                batches.push(self.page_codec.decode(page_rows(&page.bytes)?)?);
            }
            let mut window = self.window_from(batches)?;
            window.indexed = window.group_values.len();
            self.windows.insert(end, window);
            self.drop_page_bytes(group);
        }
        Ok(())
    }

    /// Frees the cached bytes of a window's pages (the window holds them decoded).
    fn drop_page_bytes(&mut self, group: &[u8]) {
        self.table.complete(group, |pages| {
            pages.values_mut().for_each(|page| page.bytes = Vec::new())
        });
    }

    /// Removes a closed window's pages and index row (its pages read if not cached).
    pub(super) fn remove_window(&mut self, end: i64, stored: bool) -> Result<()> {
        if !stored {
            return Ok(());
        }
        let group = window_group(end);
        self.table.load_known([&group[..]], |_| true)?;
        let pages: Vec<Box<[u8]>> = (self.table.group(&group).into_iter())
            .flat_map(|g| g.keys().cloned())
            .collect();
        for page in pages {
            self.table.remove(&group, &page)?;
        }
        self.table.write_aux(index_key(end), None);
        Ok(())
    }

    /// Writes the window's pages that hold a changed group, and its index row when its group
    /// count changed.
    pub(super) fn persist(
        &mut self,
        end: i64,
        window: &mut WindowGroups,
        states: &[Vec<ArrayRef>],
        groups: usize,
    ) -> Result<()> {
        let mut columns = window.keys.clone();
        columns.extend(states.iter().flatten().cloned());
        let batch = RecordBatch::try_new(self.page_schema.clone(), columns)?;
        let group = window_group(end);
        self.table
            .load_known([&group[..]], |_| window.indexed > 0)?;
        for page in 0..groups.div_ceil(PAGE_GROUPS) {
            let first = page * PAGE_GROUPS;
            let len = PAGE_GROUPS.min(groups - first);
            if !window.dirty[first..first + len].iter().any(|d| *d) {
                continue;
            }
            let rows = (self.page_codec).encode(batch.slice(first, len).columns(), len)?;
            let mut bytes = Vec::with_capacity(rows.size());
            for row in rows.iter() {
                let row = row.as_ref();
                bytes.extend_from_slice(&(row.len() as u32).to_le_bytes());
                bytes.extend_from_slice(row);
            }
            let stored = bytes.len();
            let page_key = (page as u32).to_be_bytes();
            self.table
                .insert(&group, &page_key, Page { bytes, stored })?;
        }
        if window.indexed != groups {
            let count = (groups as u64).to_le_bytes().to_vec();
            self.table.write_aux(index_key(end), Some(count));
            window.indexed = groups;
        }
        Ok(())
    }

    /// Writes the barrier's pages, then frees their bytes.
    pub(super) fn persist_table(&mut self, epoch: &mut EpochBatch, ends: &[i64]) -> Result<()> {
        self.table.persist(epoch)?;
        for &end in ends {
            self.drop_page_bytes(&window_group(end));
        }
        Ok(())
    }

    /// A table written before state tables (pages under `W ++ end ++ page number`): its
    /// windows are read into memory and their pages move to their places in this epoch.
    pub(super) fn upgrade(&mut self) -> Result<()> {
        let store = self.table.store().clone();
        // Window end → its pages (number, bytes).
        let mut moved: std::collections::BTreeMap<i64, Vec<LegacyPage>> = Default::default();
        for (key, value) in store.scan_table(self.table.table())? {
            if key.len() != 13 || key[0] != LEGACY_PAGE_TAG {
                return Err(corrupt("state of an unknown layout"));
            }
            let end = end_of(&key[1..9]).ok_or_else(|| corrupt("page key"))?;
            let page: [u8; 4] = key[9..13].try_into().map_err(|_| corrupt("page key"))?;
            self.table.write_raw(key, None);
            moved.entry(end).or_default().push((page, value));
        }
        self.table.rewrite_begin();
        self.table.begin_chunk();
        let groups: Vec<[u8; 8]> = moved.keys().map(|&end| window_group(end)).collect();
        self.table
            .load_known(groups.iter().map(|g| &g[..]), |_| false)?;
        for (end, mut pages) in moved {
            pages.sort();
            let batches = (pages.iter())
                .map(|(_, bytes)| Ok(self.page_codec.decode(page_rows(bytes)?)?))
                .collect::<Result<Vec<_>>>()?;
            let mut window = self.window_from(batches)?;
            window.indexed = window.group_values.len();
            let count = (window.indexed as u64).to_le_bytes().to_vec();
            self.table.write_aux(index_key(end), Some(count));
            for (page, bytes) in pages {
                let stored = bytes.len();
                (self.table).insert(&window_group(end), &page, Page { bytes, stored })?;
            }
            self.windows.insert(end, window);
        }
        self.table.rewritten();
        Ok(())
    }
}
