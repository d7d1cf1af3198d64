//! The epoch loop.
//!
//! One thread owns every table and view graph. Commands (DDL, DML, FLUSH) arrive on a
//! channel; after draining what is queued, the engine runs a barrier through every graph
//! and commits the epoch — table rows, operator state, view rows, watermarks, late rows and
//! catalog changes — as one atomic batch, and only then acknowledges the statements in it
//! (group commit: an acknowledged statement is durable). A barrier also runs every
//! checkpoint interval while anything is uncommitted.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Select, Sender};
use datafusion::arrow::array::RecordBatch;
use datafusion::physical_expr::PhysicalExpr;
use eddy_planner::StreamPlan;
use eddy_storage::keys::{meta_key, FIRST_USER_TABLE};
use eddy_storage::{CatalogEntry, EpochBatch, ObjectKind, Store, TableId};
use tokio::sync::oneshot;

use crate::connector::{SourceEvent, SourceSpec};
use crate::feed::Feed;
use crate::graph::Graph;
use crate::stats::{CommitObserver, CommitReport, EngineStats, TableStats, ViewStats};
use crate::table::TableRuntime;
mod catalog;
mod indexes;
mod panic_note;
mod plain_views;
mod sources;
mod unrestored;
mod view_failure;

pub use sources::StoredDeadLetter;
pub use view_failure::StateBudget;

pub use crate::table::{TableDef, TableKey};
use crate::{Barrier, ExecError, Message, Result};

type Reply<T> = oneshot::Sender<Result<T>>;

/// A table, source or view to bring back from the catalog, already planned.
#[derive(Clone)]
pub enum Restore {
    /// A table; with a connector spec when a connector feeds it.
    Table(TableDef, Option<SourceSpec>),
    Source(SourceDefinition),
    View(StreamPlan),
    /// A plain view: only its catalog entry (the server plans its query).
    PlainView,
    /// An index of `relation` on these columns, including those.
    Index {
        relation: String,
        columns: Vec<usize>,
        include: Vec<usize>,
    },
}

/// A `CREATE SOURCE`: what its connector reads, and the shape of its rows as a table. Each
/// view over a source gets its own reader, with that table's lateness and keys.
#[derive(Debug, Clone)]
pub struct SourceDefinition {
    pub spec: SourceSpec,
    pub table: TableDef,
}

enum Command {
    CreateTable {
        def: TableDef,
        feed: Option<SourceSpec>,
        sql: String,
        reply: Reply<TableId>,
    },
    CreateSource {
        def: SourceDefinition,
        sql: String,
        reply: Reply<()>,
    },
    CreateView {
        name: String,
        sql: String,
        plan: StreamPlan,
        reply: Reply<TableId>,
    },
    Restore {
        entry: CatalogEntry,
        object: Restore,
        reply: Reply<()>,
    },
    Drop {
        kind: ObjectKind,
        name: String,
        reply: Reply<()>,
    },
    PutPlainView {
        name: String,
        sql: String,
        replace: bool,
        reply: Reply<()>,
    },
    CreateIndex {
        name: String,
        sql: String,
        relation: String,
        columns: Vec<usize>,
        include: Vec<usize>,
        reply: Reply<TableId>,
    },
    /// The catalog entry of a table or view (with the statement that created it).
    CatalogEntry {
        name: String,
        reply: Reply<Option<CatalogEntry>>,
    },
    Rename {
        old: String,
        new: String,
        rewrites: Vec<(String, String)>,
        reply: Reply<()>,
    },
    Insert {
        table: String,
        batches: Vec<RecordBatch>,
        reply: Reply<u64>,
    },
    Delete {
        table: String,
        predicate: Option<Arc<dyn PhysicalExpr>>,
        reply: Reply<u64>,
    },
    Update {
        table: String,
        predicate: Option<Arc<dyn PhysicalExpr>>,
        assignments: Vec<Arc<dyn PhysicalExpr>>,
        reply: Reply<u64>,
    },
    Flush {
        reply: Reply<u64>,
    },
    Recover {
        reply: Reply<()>,
    },
    Shutdown {
        reply: Reply<()>,
    },
}

/// The server's handle on the engine thread.
/// The engine thread's name (panics on it are noted for the interrupted statement).
const ENGINE_THREAD: &str = "eddy-engine";

#[derive(Clone)]
pub struct EngineHandle {
    tx: Sender<Command>,
    stats: Arc<RwLock<EngineStats>>,
    commit_observer: Arc<OnceLock<CommitObserver>>,
    state_budget: Arc<StateBudget>,
}

impl EngineHandle {
    /// Starts the engine thread over `store`, with a barrier at least every `interval`.
    pub fn start(store: Arc<dyn Store>, interval: Duration) -> Result<Self> {
        panic_note::install();
        let (tx, rx) = unbounded();
        let stats = Arc::new(RwLock::new(EngineStats::default()));
        let commit_observer = Arc::new(OnceLock::new());
        let mut engine = Engine::new(store, stats.clone())?;
        engine.commit_observer = commit_observer.clone();
        let state_budget = engine.state_budget.clone();
        engine.publish_stats();
        // Evaluating an expression as deep as the server's depth limit allows recurses once
        // per level: the default 2 MiB stack is too small for that in a debug build.
        std::thread::Builder::new()
            .name(ENGINE_THREAD.into())
            .stack_size(16 << 20)
            .spawn(move || engine.run(rx, interval))
            .map_err(|e| ExecError::DataFusion(e.into()))?;
        Ok(Self {
            tx,
            stats,
            commit_observer,
            state_budget,
        })
    }

    /// Sets the memory views' state may hold, per view and all together (bytes, estimated);
    /// past either a view fails (see `eddy_catalog.materialized_views`).
    pub fn set_state_budget(&self, per_view: usize, total: usize) {
        self.state_budget.set(per_view, total);
    }

    /// Why view `name` failed, if it did.
    pub fn view_failure(&self, name: &str) -> Option<eddy_storage::ViewFailure> {
        let stats = self.stats.read().unwrap_or_else(|e| e.into_inner());
        stats
            .views
            .iter()
            .find(|v| v.name == name)
            .and_then(|v| v.failed.clone())
    }

    /// Has `observer` told of every epoch committed from now on (one observer per engine;
    /// a second call is ignored).
    pub fn observe_commits(&self, observer: CommitObserver) {
        let _ = self.commit_observer.set(observer);
    }

    async fn request<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(make(reply)).map_err(|_| ExecError::Stopped)?;
        rx.await.map_err(|_| match panic_note::take() {
            Some(what) => ExecError::Internal(what),
            None => ExecError::Stopped,
        })?
    }

    pub async fn create_table(
        &self,
        def: TableDef,
        feed: Option<SourceSpec>,
        sql: String,
    ) -> Result<TableId> {
        self.request(|reply| Command::CreateTable {
            def,
            feed,
            sql,
            reply,
        })
        .await
    }

    pub async fn create_source(&self, def: SourceDefinition, sql: String) -> Result<()> {
        self.request(|reply| Command::CreateSource { def, sql, reply })
            .await
    }

    pub async fn create_view(
        &self,
        name: String,
        sql: String,
        plan: StreamPlan,
    ) -> Result<TableId> {
        self.request(|reply| Command::CreateView {
            name,
            sql,
            plan,
            reply,
        })
        .await
    }

    pub async fn restore(&self, entry: CatalogEntry, object: Restore) -> Result<()> {
        self.request(|reply| Command::Restore {
            entry,
            object,
            reply,
        })
        .await
    }

    pub async fn drop_object(&self, kind: ObjectKind, name: String) -> Result<()> {
        self.request(|reply| Command::Drop { kind, name, reply })
            .await
    }

    /// Stores a plain view's definition (`replace`: over the one of that name, keeping its
    /// place in the catalog's order).
    /// Creates index `name` on `relation`'s `columns` (positions in its rows), including
    /// `include`; answers the table id its entries are kept in.
    pub async fn create_index(
        &self,
        name: String,
        sql: String,
        relation: String,
        columns: Vec<usize>,
        include: Vec<usize>,
    ) -> Result<TableId> {
        self.request(|reply| Command::CreateIndex {
            name,
            sql,
            relation,
            columns,
            include,
            reply,
        })
        .await
    }

    pub async fn put_plain_view(&self, name: String, sql: String, replace: bool) -> Result<()> {
        self.request(|reply| Command::PutPlainView {
            name,
            sql,
            replace,
            reply,
        })
        .await
    }

    /// Renames a table, source or view; `rewrites` are the plain views that read it, with
    /// their definitions naming the new name, changed in the same epoch.
    pub async fn rename(
        &self,
        old: String,
        new: String,
        rewrites: Vec<(String, String)>,
    ) -> Result<()> {
        self.request(|reply| Command::Rename {
            old,
            new,
            rewrites,
            reply,
        })
        .await
    }

    /// The catalog entry of table or view `name` (`None` for no such table or view).
    pub async fn catalog_entry(&self, name: String) -> Result<Option<CatalogEntry>> {
        self.request(|reply| Command::CatalogEntry { name, reply })
            .await
    }

    pub async fn insert(&self, table: String, batches: Vec<RecordBatch>) -> Result<u64> {
        self.request(|reply| Command::Insert {
            table,
            batches,
            reply,
        })
        .await
    }

    pub async fn delete(
        &self,
        table: String,
        predicate: Option<Arc<dyn PhysicalExpr>>,
    ) -> Result<u64> {
        self.request(|reply| Command::Delete {
            table,
            predicate,
            reply,
        })
        .await
    }

    pub async fn update(
        &self,
        table: String,
        predicate: Option<Arc<dyn PhysicalExpr>>,
        assignments: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<u64> {
        self.request(|reply| Command::Update {
            table,
            predicate,
            assignments,
            reply,
        })
        .await
    }

    /// Commits everything received so far; returns the committed epoch.
    pub async fn flush(&self) -> Result<u64> {
        self.request(|reply| Command::Flush { reply }).await
    }

    /// Drops everything in memory and reloads the last committed epoch, as a restart would.
    pub async fn recover(&self) -> Result<()> {
        self.request(|reply| Command::Recover { reply }).await
    }

    /// Commits the current epoch and stops the engine.
    pub async fn shutdown(&self) -> Result<()> {
        self.request(|reply| Command::Shutdown { reply }).await
    }

    /// The last committed epoch (as of the engine's start, until it commits again).
    pub fn committed_epoch(&self) -> u64 {
        self.stats.read().unwrap_or_else(|e| e.into_inner()).epoch
    }

    pub fn stats(&self) -> EngineStats {
        self.stats.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

struct ViewRuntime {
    entry: CatalogEntry,
    plan: StreamPlan,
    /// None once the view failed (`entry.failed` says why).
    graph: Option<Graph>,
    /// One reader per source the view reads: a table of its own (rows not stored) that the
    /// reader's feed fills.
    readers: Vec<Reader>,
}

/// A view's private reader of a source.
struct Reader {
    source: String,
    /// The feed's name: the view's, or `view/source` when the view reads several sources.
    feed: String,
    table: TableRuntime,
}

impl ViewRuntime {
    fn reader(&self, feed: &str) -> Option<&Reader> {
        self.readers.iter().find(|r| r.feed == feed)
    }

    fn reader_mut(&mut self, feed: &str) -> Option<&mut Reader> {
        self.readers.iter_mut().find(|r| r.feed == feed)
    }
}

/// Counters kept in the meta table.
#[derive(Debug, Default, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Counters {
    epoch: u64,
    next_table_id: TableId,
    next_catalog_seq: u64,
    late_seq: u64,
    #[serde(default)]
    error_seq: u64,
    #[serde(default)]
    view_error_seq: u64,
}

const COUNTERS: &str = "counters";

struct Engine {
    store: Arc<dyn Store>,
    stats: Arc<RwLock<EngineStats>>,
    counters: Counters,
    tables: BTreeMap<String, (CatalogEntry, TableRuntime)>,
    views: BTreeMap<String, ViewRuntime>,
    sources: BTreeMap<String, (CatalogEntry, SourceDefinition)>,
    /// Plain views' catalog entries.
    plain_views: BTreeMap<String, CatalogEntry>,
    indexes: BTreeMap<String, indexes::IndexRuntime>,
    /// Running connectors, by the table or view they feed.
    feeds: BTreeMap<String, Feed>,
    /// Writes of the current epoch that no operator owns (catalog changes, dropped ranges).
    epoch_writes: EpochBatch,
    /// Whether anything changed since the last commit.
    dirty: bool,
    /// Replies to send once the current epoch is committed.
    acks: Vec<Box<dyn FnOnce(Result<()>) + Send>>,
    /// FLUSHes waiting for feeds to catch up with their sources.
    flushes: Vec<PendingFlush>,
    commit_observer: Arc<OnceLock<CommitObserver>>,
    state_budget: Arc<StateBudget>,
    /// Objects a reload could not restore yet (see `unrestored`).
    unrestored: Vec<(CatalogEntry, Restore)>,
}

/// A FLUSH over running feeds: done when each feed reaches what its source held then.
struct PendingFlush {
    reply: Reply<u64>,
    targets: BTreeMap<String, FlushWait>,
    since: Instant,
}

enum FlushWait {
    /// Waiting for the connector to report its split ends (this generation).
    Refresh(u64),
    Target(crate::feed::FlushTarget),
}

/// How long a FLUSH waits for sources before it reports which one is behind.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(120);

impl Engine {
    fn new(store: Arc<dyn Store>, stats: Arc<RwLock<EngineStats>>) -> Result<Self> {
        let counters = Self::load_counters(store.as_ref())?;
        Ok(Self {
            store,
            stats,
            counters,
            tables: BTreeMap::new(),
            views: BTreeMap::new(),
            sources: BTreeMap::new(),
            plain_views: BTreeMap::new(),
            indexes: BTreeMap::new(),
            feeds: BTreeMap::new(),
            epoch_writes: EpochBatch::default(),
            dirty: false,
            acks: Vec::new(),
            flushes: Vec::new(),
            commit_observer: Arc::new(OnceLock::new()),
            state_budget: Arc::new(StateBudget::default()),
            unrestored: Vec::new(),
        })
    }

    fn load_counters(store: &dyn Store) -> Result<Counters> {
        Ok(match store.get(&meta_key(COUNTERS))? {
            Some(bytes) => {
                serde_json::from_slice(&bytes).map_err(eddy_storage::StorageError::from)?
            }
            None => Counters {
                next_table_id: FIRST_USER_TABLE,
                ..Counters::default()
            },
        })
    }

    fn run(&mut self, rx: Receiver<Command>, interval: Duration) {
        let mut last_commit = Instant::now();
        let mut last_tick = Instant::now();
        loop {
            // An index build goes on epoch after epoch, a chunk each, with no idle wait.
            let building = self.building_indexes();
            let wait = if building {
                Duration::ZERO
            } else {
                interval
                    .saturating_sub(last_commit.elapsed())
                    .min(Duration::from_millis(200))
            };
            // Wait for a command or a batch from any feed, whichever comes first.
            let feeds: Vec<(String, Receiver<SourceEvent>)> = self
                .feeds
                .iter()
                .map(|(name, feed)| (name.clone(), feed.events.clone()))
                .collect();
            let mut select = Select::new();
            let commands = select.recv(&rx);
            for (_, events) in &feeds {
                select.recv(events);
            }
            let mut stop = None;
            match select.select_timeout(wait) {
                Ok(operation) if operation.index() == commands => match operation.recv(&rx) {
                    Ok(Command::Shutdown { reply }) => stop = Some(reply),
                    Ok(command) => self.guarded(|engine| engine.handle(command)),
                    Err(_) => {
                        let _ = self.commit();
                        return;
                    }
                },
                Ok(operation) => {
                    let (name, events) = &feeds[operation.index() - 1];
                    match operation.recv(events) {
                        Ok(event) => self.guarded(|engine| engine.on_source_event(name, event)),
                        // Its connector ended and all it sent is taken: a disconnected channel
                        // is always ready, so waiting on it again would spin.
                        Err(_) => self.stop_waiting_on(name, events),
                    }
                }
                Err(_) => {}
            }
            // Group commit: take everything already queued into this epoch.
            while stop.is_none() {
                match rx.try_recv() {
                    Ok(Command::Shutdown { reply }) => stop = Some(reply),
                    Ok(command) => self.guarded(|engine| engine.handle(command)),
                    Err(_) => break,
                }
            }
            // Bounded work per round, so commands and commits are never starved.
            for (name, events) in &feeds {
                for _ in 0..crate::connector::CHANNEL_BATCHES {
                    match events.try_recv() {
                        Ok(event) => self.guarded(|engine| engine.on_source_event(name, event)),
                        Err(_) => break,
                    }
                }
            }
            self.check_flushes();
            if last_tick.elapsed() >= Duration::from_millis(200) {
                self.tick_feeds();
                last_tick = Instant::now();
            }
            let due = last_commit.elapsed() >= interval;
            // Views on the wall clock change with no row arriving: a barrier every interval.
            let clocked = self
                .views
                .values()
                .any(|v| v.graph.is_some() && v.plan.uses_wall_clock());
            if !self.acks.is_empty()
                || building
                || ((self.dirty || clocked) && due)
                || stop.is_some()
            {
                self.guarded(|engine| engine.commit_and_ack());
                last_commit = Instant::now();
            } else if due {
                self.publish_stats();
                last_commit = Instant::now();
            }
            if let Some(reply) = stop {
                self.feeds.clear();
                let _ = reply.send(Ok(()));
                return;
            }
        }
    }

    /// Runs `work`, turning a panic (a bug, here or in a library) into an abandoned epoch:
    /// the statements in it fail, state reloads from the last commit, and the engine lives on.
    fn guarded(&mut self, work: impl FnOnce(&mut Self)) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(self)));
        if let Err(panic) = outcome {
            let what = panic_message(panic.as_ref());
            tracing::error!(%what, "internal error in the engine; reloading the last committed epoch");
            self.fail_pending(&what);
            if let Err(error) = self.reload() {
                tracing::error!(%error, "reloading after an internal error failed");
            }
        }
    }

    /// Runs a command. Its reply waits for the commit when it changed anything.
    fn handle(&mut self, command: Command) {
        if let Err(error) = self.restore_unrestored() {
            command.fail(error);
            return;
        }
        match command {
            Command::CreateTable {
                def,
                feed,
                sql,
                reply,
            } => {
                let result = self.create_table(def, feed, sql);
                self.ack_after_commit(reply, result);
            }
            Command::CreateSource { def, sql, reply } => {
                let result = self.create_source(def, sql);
                self.ack_after_commit(reply, result);
            }
            Command::CreateView {
                name,
                sql,
                plan,
                reply,
            } => {
                let result = self.create_view(name, sql, plan);
                self.ack_after_commit(reply, result);
            }
            Command::Restore {
                entry,
                object,
                reply,
            } => {
                let _ = reply.send(self.restore(entry, object));
            }
            Command::Drop { kind, name, reply } => {
                let result = self.drop_object(kind, &name);
                self.ack_after_commit(reply, result);
            }
            Command::PutPlainView {
                name,
                sql,
                replace,
                reply,
            } => {
                let result = self.put_plain_view(name, sql, replace);
                self.ack_after_commit(reply, result);
            }
            Command::CreateIndex {
                name,
                sql,
                relation,
                columns,
                include,
                reply,
            } => {
                self.create_index(name, sql, relation, columns, include, reply);
            }
            Command::CatalogEntry { name, reply } => {
                let entry = self
                    .tables
                    .get(&name)
                    .map(|(entry, _)| entry)
                    .or_else(|| self.views.get(&name).map(|view| &view.entry))
                    .or_else(|| self.plain_views.get(&name));
                let _ = reply.send(Ok(entry.cloned()));
            }
            Command::Rename {
                old,
                new,
                rewrites,
                reply,
            } => {
                let result = self.rename(&old, &new, rewrites);
                self.ack_after_commit(reply, result);
            }
            Command::Insert {
                table,
                batches,
                reply,
            } => {
                let result = self.insert(&table, batches);
                self.ack_after_commit(reply, result);
            }
            Command::Delete {
                table,
                predicate,
                reply,
            } => {
                let result =
                    self.change(&table, |t, store| t.delete_where(predicate.as_ref(), store));
                self.ack_after_commit(reply, result);
            }
            Command::Update {
                table,
                predicate,
                assignments,
                reply,
            } => {
                let result = self.change(&table, |t, store| {
                    t.update_where(predicate.as_ref(), &assignments, store)
                });
                self.ack_after_commit(reply, result);
            }
            Command::Flush { reply } => {
                self.dirty = true;
                if self.feeds.is_empty() {
                    let epoch = self.counters.epoch + 1;
                    self.ack_after_commit(reply, Ok(epoch));
                } else {
                    // Wait until every feed has taken in what its source held at this moment
                    // (for Kafka, once the connector has reported the current ends).
                    let targets = self
                        .feeds
                        .iter()
                        .map(|(name, feed)| {
                            let target = match feed.request_refresh() {
                                Some(generation) => FlushWait::Refresh(generation),
                                None => FlushWait::Target(feed.flush_target()),
                            };
                            (name.clone(), target)
                        })
                        .collect();
                    self.flushes.push(PendingFlush {
                        reply,
                        targets,
                        since: Instant::now(),
                    });
                }
            }
            Command::Recover { reply } => {
                self.fail_pending("the epoch was abandoned by RECOVER");
                let _ = reply.send(self.reload());
            }
            Command::Shutdown { .. } => unreachable!("handled by the loop"),
        }
    }

    /// Replies now on error; on success, once the epoch holding the change is committed.
    /// An error after state was touched abandons the epoch (state reloads from the store).
    fn ack_after_commit<T: Send + 'static>(&mut self, reply: Reply<T>, result: Result<T>) {
        match result {
            Ok(value) => {
                self.dirty = true;
                self.acks.push(Box::new(move |committed: Result<()>| {
                    let _ = reply.send(committed.map(|()| value));
                }));
            }
            Err(error) => {
                let _ = reply.send(Err(error));
            }
        }
    }

    /// Moves FLUSHes whose feeds have caught up into this epoch's acknowledgements.
    fn check_flushes(&mut self) {
        if self.flushes.is_empty() {
            return;
        }
        let mut waiting = Vec::new();
        for mut flush in std::mem::take(&mut self.flushes) {
            for (name, wait) in flush.targets.iter_mut() {
                if let (FlushWait::Refresh(generation), Some(feed)) = (&*wait, self.feeds.get(name))
                {
                    if feed.reported_generation >= *generation {
                        *wait = FlushWait::Target(feed.flush_target());
                    }
                }
            }
            let behind = flush.targets.iter().find(|(name, wait)| {
                self.feeds.get(*name).is_some_and(|feed| match wait {
                    FlushWait::Refresh(_) => true,
                    FlushWait::Target(target) => !feed.reached(target),
                })
            });
            match behind {
                None => {
                    let epoch = self.counters.epoch + 1;
                    self.ack_after_commit(flush.reply, Ok(epoch));
                }
                Some((name, _)) if flush.since.elapsed() >= FLUSH_TIMEOUT => {
                    let error = self.feeds.get(name).and_then(|f| f.last_error.clone());
                    let _ = flush.reply.send(Err(ExecError::NotSupported(format!(
                        "FLUSH gave up after {}s waiting for the source feeding \"{name}\"{}",
                        FLUSH_TIMEOUT.as_secs(),
                        error.map_or(String::new(), |e| format!(" (last error: {e})"))
                    ))));
                }
                Some(_) => waiting.push(flush),
            }
        }
        self.flushes = waiting;
    }

    fn fail_pending(&mut self, why: &str) {
        for ack in self.acks.drain(..) {
            ack(Err(ExecError::Internal(why.to_string())));
        }
    }

    fn commit_and_ack(&mut self) {
        let result = self.commit();
        let acks = std::mem::take(&mut self.acks);
        match result {
            Ok(()) => acks.into_iter().for_each(|ack| ack(Ok(()))),
            Err(error) => {
                tracing::error!(%error, "epoch commit failed; reloading the last committed epoch");
                // A storage fault reaches each statement as itself (53100 for a full disk);
                // nothing of the epoch was committed.
                let fault = match &error {
                    ExecError::Storage(storage) => storage.fault().cloned(),
                    _ => None,
                };
                let too_long = match &error {
                    ExecError::Storage(eddy_storage::StorageError::KeyTooLong { table, bytes }) => {
                        Some((*table, *bytes))
                    }
                    _ => None,
                };
                let message = error.to_string();
                for ack in acks {
                    ack(Err(match (&fault, too_long) {
                        (Some(fault), _) => eddy_storage::StorageError::Fault(fault.clone()).into(),
                        (None, Some((table, bytes))) => {
                            eddy_storage::StorageError::KeyTooLong { table, bytes }.into()
                        }
                        (None, None) => ExecError::Internal(format!(
                            "the epoch could not be committed: {message}"
                        )),
                    }));
                }
                if let Err(error) = self.reload() {
                    tracing::error!(%error, "reloading after a failed commit failed");
                }
            }
        }
    }

    /// Runs a barrier through every pipeline and commits the epoch atomically: rows, state,
    /// watermarks, late rows, source positions and dead letters together.
    fn commit(&mut self) -> Result<()> {
        self.restore_unrestored()?;
        let started = Instant::now();
        let epoch = self.counters.epoch + 1;
        let barrier = Barrier { epoch };
        let mut batch = std::mem::take(&mut self.epoch_writes);
        for (_, table) in self.tables.values_mut() {
            table.commit(&mut batch, &mut self.counters.late_seq)?;
        }
        // Upstream views first (creation order), so that what a view emits at its barrier
        // reaches the views reading it before their own barrier.
        let mut order: Vec<(u64, String)> = self
            .views
            .values()
            .map(|v| (v.entry.seq, v.entry.name.clone()))
            .collect();
        order.sort_unstable();
        for (_, name) in order {
            let Some(view) = self.views.get_mut(&name) else {
                continue;
            };
            for reader in &mut view.readers {
                reader
                    .table
                    .commit(&mut batch, &mut self.counters.late_seq)?;
            }
            let Some((changes, failed_rows)) = self.barrier_view(&name, barrier, &mut batch)?
            else {
                continue;
            };
            for failed in failed_rows {
                crate::view_errors::write(
                    &mut batch,
                    &mut self.counters.view_error_seq,
                    &name,
                    failed,
                )?;
            }
            self.deliver(&name, changes)?;
        }
        // Views measured at this barrier past the budget fail in this epoch; with those that
        // failed at their barrier, their catalog entries and dropped state commit now too.
        self.enforce_state_budget()?;
        batch.append(std::mem::take(&mut self.epoch_writes));
        for feed in self.feeds.values_mut() {
            feed.commit(&mut batch)?;
            for letter in std::mem::take(&mut feed.dead_letters) {
                sources::write_dead_letter(
                    &mut batch,
                    &mut self.counters.error_seq,
                    &feed.spec.name,
                    letter,
                )?;
            }
        }
        let mut counters = self.counters;
        counters.epoch = epoch;
        batch.put_meta(
            COUNTERS,
            serde_json::to_vec(&counters).map_err(eddy_storage::StorageError::from)?,
        );
        self.step_index_builds(&mut batch)?;
        self.maintain_indexes(&mut batch)?;
        let (bytes, writes) = (batch.bytes() as u64, batch.len() as u64);
        self.store.commit(batch)?;
        self.counters = counters;
        self.dirty = false;
        if let Some(observer) = self.commit_observer.get() {
            observer(&CommitReport {
                epoch,
                duration: started.elapsed(),
                bytes,
                writes,
            });
        }
        self.publish_stats();
        Ok(())
    }

    fn insert(&mut self, name: &str, batches: Vec<RecordBatch>) -> Result<u64> {
        let (_, table) = self.tables.get_mut(name).ok_or_else(|| {
            ExecError::UndefinedObject(format!("table \"{name}\" does not exist"))
        })?;
        let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        let late_before = table.rows_late();
        // DML is one split of its own; the statement's rows are judged together.
        let outcome = table.insert_statement(batches, "", self.store.as_ref());
        let (chunks, watermark) = self.abandon_on_error(outcome)?;
        let late = self.tables[name].1.rows_late() - late_before;
        for chunk in chunks {
            self.fan_out(name, (Some(chunk), None))?;
        }
        self.fan_out(name, (None, watermark))?;
        Ok(rows - late)
    }

    fn change(
        &mut self,
        name: &str,
        apply: impl FnOnce(&mut TableRuntime, &dyn Store) -> Result<Option<crate::StreamChunk>>,
    ) -> Result<u64> {
        let (_, table) = self.tables.get_mut(name).ok_or_else(|| {
            ExecError::UndefinedObject(format!("table \"{name}\" does not exist"))
        })?;
        let chunk = apply(table, self.store.as_ref());
        let chunk = self.abandon_on_error(chunk)?;
        let rows = chunk.as_ref().map_or(0, |c| {
            c.ops
                .iter()
                .filter(|op| !matches!(op, crate::Op::UpdateDelete))
                .count() as u64
        });
        self.fan_out(name, (chunk, None))?;
        Ok(rows)
    }

    /// Pushes a table's changes (and its new watermark) through every view reading it.
    fn fan_out(
        &mut self,
        table: &str,
        (chunk, watermark): (Option<crate::StreamChunk>, Option<crate::Watermark>),
    ) -> Result<()> {
        let messages = chunk
            .map(Message::Chunk)
            .into_iter()
            .chain(watermark.map(Message::Watermark))
            .collect();
        let result = self.deliver(table, messages);
        self.abandon_on_error(result)
    }

    /// Pushes the changes of `upstream` (a table, or a view's own changelog) through every view
    /// reading it, and theirs on to the views reading them.
    fn deliver(&mut self, upstream: &str, messages: Vec<Message>) -> Result<()> {
        if messages.is_empty() {
            return Ok(());
        }
        let readers: Vec<String> = self
            .views
            .values()
            .filter(|v| v.plan.reads(upstream))
            .map(|v| v.entry.name.clone())
            .collect();
        for reader in readers {
            let changes = self.push_into_view(&reader, upstream, &messages)?;
            self.deliver(&reader, changes)?;
        }
        Ok(())
    }

    /// The watermarks a table or view's changelog has reached (a view: each of its clocks).
    fn watermarks_of(&self, name: &str) -> Vec<crate::Watermark> {
        if let Some((_, table)) = self.tables.get(name) {
            return table.watermark().into_iter().collect();
        }
        self.views
            .get(name)
            .and_then(|view| view.graph.as_ref())
            .map_or_else(Vec::new, Graph::watermarks)
    }

    /// On an error after state may have changed, abandons the epoch: every statement in it
    /// fails and everything reloads from the last commit.
    fn abandon_on_error<T>(&mut self, result: Result<T>) -> Result<T> {
        if let Err(error) = &result {
            let message = error.to_string();
            self.fail_pending(&format!(
                "the epoch was abandoned after an error in another statement: {message}"
            ));
            if let Err(reload) = self.reload() {
                tracing::error!(%reload, "reloading the last committed epoch failed");
            }
        }
        result
    }

    fn publish_stats(&self) {
        let table_stats = |name: &str, table: &TableRuntime| TableStats {
            name: name.to_string(),
            rows_in: table.rows_in(),
            rows_late: table.rows_late(),
            watermark: table.watermark().map(|w| w.value),
        };
        let stats = EngineStats {
            epoch: self.counters.epoch,
            tables: self
                .tables
                .values()
                .map(|(entry, table)| table_stats(&entry.name, table))
                .chain(self.views.values().flat_map(|v| {
                    v.readers
                        .iter()
                        .map(|r| table_stats(&v.entry.name, &r.table))
                }))
                .collect(),
            views: self
                .views
                .values()
                .map(|view| {
                    let graph = view.graph.as_ref();
                    // Lateness is judged where rows enter: the view's own readers of sources,
                    // or the stored tables it reads.
                    let (rows_in, rows_late) = view
                        .readers
                        .iter()
                        .map(|r| &r.table)
                        .chain(
                            self.tables
                                .iter()
                                .filter(|(name, _)| view.plan.reads(name))
                                .map(|(_, (_, table))| table),
                        )
                        .fold((0, 0), |(rows_in, late), t| {
                            (rows_in + t.rows_in(), late + t.rows_late())
                        });
                    ViewStats {
                        name: view.entry.name.clone(),
                        rows_in,
                        rows_late,
                        source: view.plan.input_names().join(", "),
                        sql: view.entry.sql.clone(),
                        emit_on_window_close: view.plan.emit_on_window_close,
                        state_rows: graph.map_or(0, |g| g.state_rows() as u64),
                        open_windows: graph.map_or(0, |g| g.open_windows() as u64),
                        unbounded_state: view.plan.has_unbounded_state(),
                        joins: graph.map_or_else(Vec::new, Graph::join_state),
                        rows_failed: graph.map_or(0, Graph::rows_failed),
                        state_bytes: graph.map_or(0, |g| g.state_bytes() as u64),
                        failed: view.entry.failed.clone(),
                    }
                })
                .collect(),
            sources: self
                .sources
                .values()
                .map(|(entry, def)| crate::stats::SourceStats {
                    name: entry.name.clone(),
                    connector: def.spec.connector.clone(),
                    sql: entry.sql.clone(),
                })
                .collect(),
            progress: self.source_progress(),
            store: self.store.stats(),
        };
        *self.stats.write().unwrap_or_else(|e| e.into_inner()) = stats;
    }
}

/// What a caught panic said.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}
