//! The node's state cache budget: how much memory the state tables' cached groups may hold
//! together (`--state-cache-mib`), and what every table has cached, read and written.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The default cache when none is configured: 1 GiB.
pub const DEFAULT_CACHE_BYTES: usize = 1 << 30;

/// Shared by every state table of the node. A table evicts its own clean groups, least
/// recently used first, when the total is over the limit.
#[derive(Debug)]
pub struct StateCache {
    limit: AtomicUsize,
    used: AtomicUsize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl Default for StateCache {
    fn default() -> Self {
        Self::new(DEFAULT_CACHE_BYTES)
    }
}

impl StateCache {
    pub fn new(limit: usize) -> Self {
        Self {
            limit: AtomicUsize::new(limit),
            used: AtomicUsize::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Bytes all tables' cached groups hold, estimated.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    pub fn over_limit(&self) -> bool {
        self.used() > self.limit()
    }

    /// Where eviction stops once it started: a little under the limit, so that it does not
    /// run again at the next chunk.
    pub(super) fn low_mark(&self) -> usize {
        self.limit() / 10 * 9
    }

    pub(super) fn grow(&self, bytes: usize) {
        self.used.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(super) fn shrink(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }

    pub(super) fn count(&self, hits: u64, misses: u64) {
        self.hits.fetch_add(hits, Ordering::Relaxed);
        self.misses.fetch_add(misses, Ordering::Relaxed);
    }

    /// Group lookups that found the group cached, and those that read it from the store,
    /// since the node started.
    pub fn lookups(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }
}

/// The node's state cache, for the metrics endpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StateCacheStats {
    pub limit_bytes: u64,
    pub used_bytes: u64,
    pub hits: u64,
    pub misses: u64,
}

impl StateCache {
    pub fn stats(&self) -> StateCacheStats {
        let (hits, misses) = self.lookups();
        StateCacheStats {
            limit_bytes: self.limit() as u64,
            used_bytes: self.used() as u64,
            hits,
            misses,
        }
    }
}

/// One state table's figures, for `eddy_catalog.state_tables` and the metrics endpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StateTableStats {
    /// What the table holds ("join left", "aggregate", ...).
    pub role: &'static str,
    pub table: u32,
    /// Rows and bytes (keys and values as stored) in the store.
    pub rows: u64,
    pub bytes: u64,
    /// Groups cached and the memory they hold, estimated.
    pub cached_groups: u64,
    pub cache_bytes: u64,
    /// Group lookups served from the cache, and read from the store, since the view started.
    pub hits: u64,
    pub misses: u64,
    /// Rows read from the store since the view started.
    pub rows_read: u64,
    /// Rows written (puts and deletes) at the last barrier, and since the view started.
    pub writes_last_epoch: u64,
    pub writes: u64,
    /// Groups evicted from the cache since the view started.
    pub evictions: u64,
}
