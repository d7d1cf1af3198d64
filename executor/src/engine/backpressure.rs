//! Holding back the inputs of a sink whose log passed its bound (`sink.log.max.bytes`).
//!
//! The sink's input and everything upstream of it stop taking changes: the engine stops
//! reading the feeds that reach it (their connectors then block on their bounded channels,
//! so a Kafka source stops consuming), and INSERT, UPDATE and DELETE on a table that reaches
//! it wait, in order, until the log is back under its bound. Nothing else waits: other views
//! and tables go on committing. A held feed's splits keep their idle state, so that waiting
//! never moves a watermark.

use std::collections::{BTreeSet, VecDeque};
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
