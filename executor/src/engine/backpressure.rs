//! Holding back inputs: those of a sink whose log passed its bound (`sink.log.max.bytes`), and
//! every source while the store's write buffer is over its bound.
//!
//! The sink's input and everything upstream of it stop taking changes: the engine stops
//! reading the feeds that reach it (their connectors then block on their bounded channels,
//! so a Kafka source stops consuming), and INSERT, UPDATE and DELETE on a table that reaches
//! it wait, in order, until the log is back under its bound. Nothing else waits: other views
//! and tables go on committing. A held feed's splits keep their idle state, so that waiting
//! never moves a watermark.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Command, Engine};

/// How often the sinks' logs are measured against their bounds.
const CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// What is held back, and the statements waiting for it.
#[derive(Default)]
pub(super) struct HeldBack {
    /// Feeds (by the table or view they feed) whose batches are not taken.
    pub(super) feeds: BTreeSet<String>,
    /// Tables whose INSERT, UPDATE and DELETE wait.
    pub(super) tables: BTreeSet<String>,
    /// Statements waiting, in arrival order.
    pub(super) waiting: VecDeque<Command>,
    checked: Option<Instant>,
    /// Feeds held for watermark alignment (see `alignment`), each with why.
    pub(super) aligned: BTreeMap<String, super::alignment::Ahead>,
    /// The bound on the store's write buffer, and how long sources were held for it.
    pub(super) write_buffer: Arc<WriteBufferBound>,
    /// While every feed is held because the write buffer is over its bound: since when that
    /// hold was last counted.
    write_buffer_full_since: Option<Instant>,
}

/// The store keeps what it has not yet written to table files in memory (its write buffer),
/// and flushes on one thread. A heavy view can hand it epochs faster than that thread writes
/// them out, so past this bound the engine stops reading sources until flushes catch up (the
/// connectors then block on their bounded channels: a Kafka source stops consuming). Statements
/// go on: their writes are small, and they must not wait for a view's backlog.
pub const DEFAULT_WRITE_BUFFER_MIB: u64 = 256;

/// Shared by the engine and its handle: the bound (settable) and what holding cost.
#[derive(Debug)]
pub struct WriteBufferBound {
    limit_bytes: AtomicU64,
    held_micros: AtomicU64,
    holding: AtomicBool,
}

impl Default for WriteBufferBound {
    fn default() -> Self {
        Self {
            limit_bytes: AtomicU64::new(DEFAULT_WRITE_BUFFER_MIB << 20),
            held_micros: AtomicU64::new(0),
            holding: AtomicBool::new(false),
        }
    }
}

impl WriteBufferBound {
    /// Sets the bound in bytes (0: no bound).
    pub fn set_limit(&self, bytes: u64) {
        self.limit_bytes.store(bytes, Ordering::Relaxed);
    }

    pub fn stats(&self) -> WriteBufferHoldStats {
        WriteBufferHoldStats {
            limit_bytes: self.limit_bytes.load(Ordering::Relaxed),
            held_seconds: self.held_micros.load(Ordering::Relaxed) as f64 / 1e6,
            holding: self.holding.load(Ordering::Relaxed),
        }
    }
}

/// How sources were held back for the store's write buffer.
#[derive(Debug, Clone, Default)]
pub struct WriteBufferHoldStats {
    pub limit_bytes: u64,
    /// Time every source was held, in total since the start.
    pub held_seconds: f64,
    /// Whether they are held now.
    pub holding: bool,
}

impl Engine {
    /// Measures the sinks' logs (at most every [`CHECK_INTERVAL`]: a log shrinks as its
    /// sender delivers) and recomputes what is held.
    pub(super) fn update_held_back(&mut self) {
        if self
            .held
            .checked
            .is_none_or(|at| at.elapsed() >= CHECK_INTERVAL)
        {
            self.update_held_back_now();
        }
    }

    /// Whether the feed of `name` is not to be read now (a sink's full log downstream, the
    /// store's full write buffer, or its watermark ahead of the view's other sources).
    pub(super) fn feed_held(&self, name: &str) -> bool {
        self.held.write_buffer_full_since.is_some()
            || self.held.feeds.contains(name)
            || self.held.aligned.contains_key(name)
    }

    /// Why the feed of `name` is not read, if it is not.
    pub(super) fn feed_held_reason(&self, name: &str) -> Option<String> {
        if self.held.feeds.contains(name) {
            Some("not read: a sink downstream has a full log (see eddy_catalog.sinks)".into())
        } else if self.held.write_buffer_full_since.is_some() {
            Some(
                "not read: the store's write buffer is full, waiting for it to be written to disk"
                    .into(),
            )
        } else {
            self.held
                .aligned
                .get(name)
                .map(super::alignment::Ahead::reason)
        }
    }

    /// Measures the store's write buffer against its bound (cheap: at every round of the
    /// loop); returns whether the feeds are held for it.
    pub(super) fn update_write_buffer_hold(&mut self) -> bool {
        let limit = self.held.write_buffer.limit_bytes.load(Ordering::Relaxed);
        let full = limit > 0 && self.store.write_buffer_bytes() > limit;
        let bound = &self.held.write_buffer;
        if let Some(since) = self.held.write_buffer_full_since.take() {
            // Counted as it goes, so that /metrics shows a hold still under way.
            bound
                .held_micros
                .fetch_add(since.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
        if full != bound.holding.swap(full, Ordering::Relaxed) {
            tracing::debug!(
                full,
                limit,
                "the store's write buffer: sources wait while full"
            );
        }
        self.held.write_buffer_full_since = full.then(Instant::now);
        full
    }

    /// Measures the sinks' logs now (after a commit, which grows them).
    pub(super) fn update_held_back_now(&mut self) {
        self.held.checked = Some(Instant::now());
        let mut feeds = BTreeSet::new();
        let mut tables = BTreeSet::new();
        let full: Vec<String> = self
            .sinks
            .values()
            .filter(|sink| sink.shared.behind().1 > sink.spec.log_max_bytes)
            .map(|sink| sink.spec.input.clone())
            .collect();
        let mut visited = BTreeSet::new();
        let mut next = full;
        while let Some(name) = next.pop() {
            if !visited.insert(name.clone()) {
                continue;
            }
            if self.tables.contains_key(&name) {
                if self.feeds.contains_key(&name) {
                    feeds.insert(name.clone());
                }
                tables.insert(name);
            } else if let Some(view) = self.views.get(&name) {
                feeds.extend(view.readers.iter().map(|r| r.feed.clone()));
                next.extend(view.plan.input_names().into_iter().map(String::from));
            }
        }
        if feeds != self.held.feeds || tables != self.held.tables {
            tracing::info!(
                ?feeds,
                ?tables,
                "sink back-pressure changed what is held back"
            );
        }
        self.held.feeds = feeds;
        self.held.tables = tables;
    }

    /// Whether `command` must wait for a sink's log to drain.
    pub(super) fn must_wait(&self, command: &Command) -> bool {
        let table = match command {
            Command::Insert { table, .. }
            | Command::Delete { table, .. }
            | Command::Update { table, .. } => table,
            _ => return false,
        };
        self.held.tables.contains(table)
    }

    /// Runs the statements that waited, once nothing holds them any more (in order; those
    /// whose client stopped waiting are dropped).
    pub(super) fn run_waiting(&mut self) {
        while let Some(command) = self.held.waiting.front() {
            if self.must_wait(command) {
                return;
            }
            if let Some(command) = self.held.waiting.pop_front() {
                if !command.abandoned() {
                    self.handle(command);
                }
            }
        }
    }
}

impl Command {
    /// Whether the client no longer waits for the answer (it was cancelled or disconnected).
    fn abandoned(&self) -> bool {
        match self {
            Command::Insert { reply, .. } => reply.is_closed(),
            Command::Delete { reply, .. } | Command::Update { reply, .. } => reply.is_closed(),
            _ => false,
        }
    }
}
