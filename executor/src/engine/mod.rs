//! The epoch loop.
//!
//! One thread owns every table and view graph. Commands (DDL, DML, FLUSH) arrive on a
//! channel; after draining what is queued, the engine runs a barrier through every graph
//! and commits the epoch — table rows, operator state, view rows, watermarks, late rows and
//! catalog changes — as one atomic batch, and only then acknowledges the statements in it
//! (group commit: an acknowledged statement is durable). The batch is written by the
//! [`committer`] thread while the engine goes on with the next epoch. A barrier also runs
//! every checkpoint interval while anything is uncommitted.
//!
//! Here: the [`EngineHandle`] the server holds and the commands it sends. The engine thread
//! itself: [`run_loop`] (start, loop, commands), [`data_flow`] (rows into tables and through
//! views), [`commit`] (the epoch's one write, then acknowledgements), [`stats_publish`]; and
//! per kind of object: [`catalog`], [`sources`], [`sinks`] (with [`backpressure`]),
//! [`indexes`], [`plain_views`], [`subscriptions`], with [`view_failure`] for a view that
//! failed alone; [`scope`] for epochs that commit only the views a statement reaches.

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
use crate::state_table::{StateCache, StateContext};
use crate::stats::{CommitObserver, CommitReport, EngineStats, TableStats, ViewStats};
use crate::table::TableRuntime;
mod alignment;
mod backpressure;
mod catalog;
mod commit;
mod committer;
mod data_flow;
mod indexes;
mod panic_note;
mod plain_views;
mod run_loop;
mod scope;
mod sinks;
mod sources;
mod stats_publish;
mod subscriptions;
mod unrestored;
mod view_failure;

pub use backpressure::{WriteBufferHoldStats, DEFAULT_WRITE_BUFFER_MIB};
pub use catalog::unplanned_plan;
pub use sinks::SinkMeta;
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
    /// A materialized view whose query no longer plans: restored failed, with the planner's
    /// error (its rows stay until it is dropped).
    Unplanned {
        sqlstate: String,
        message: String,
    },
    /// A plain view: only its catalog entry (the server plans its query).
    PlainView,
    /// A sink, checked against its input by the server.
    Sink(crate::sink::SinkSpec),
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
    CreateSink {
        spec: crate::sink::SinkSpec,
        meta: SinkMeta,
        sql: String,
        reply: Reply<()>,
    },
    Restore {
        entry: Box<CatalogEntry>,
        object: Box<Restore>,
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
    /// A subscription to a table's or view's changes, from the next commit (after `as_of`
    /// when given, else with the store as of that commit for its snapshot).
    Subscribe {
        relation: String,
        as_of: Option<u64>,
        reply: Reply<crate::subscribe::Subscription>,
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
    state_cache: Arc<StateCache>,
    /// The threads views' keyed operators run on.
    workers: Arc<crate::workers::Workers>,
    subscriptions: Arc<crate::subscribe::SubscriptionRegistry>,
    /// The store's figures are read when asked for, not by the engine: they take locks that
    /// the store's compactions hold for a while.
    store: Arc<dyn Store>,
    /// The bound on the store's write buffer past which sources wait.
    write_buffer: Arc<backpressure::WriteBufferBound>,
}

impl EngineHandle {
    /// Starts the engine thread over `store`, with a barrier at least every `interval`.
    pub fn start(store: Arc<dyn Store>, interval: Duration) -> Result<Self> {
        panic_note::install();
        let (tx, rx) = unbounded();
        let stats = Arc::new(RwLock::new(EngineStats::default()));
        let commit_observer = Arc::new(OnceLock::new());
        let mut engine = Engine::new(store.clone(), stats.clone())?;
        engine.commit_observer = commit_observer.clone();
        let state_budget = engine.state_budget.clone();
        let state_cache = engine.state_cache.clone();
        let workers = engine.workers.clone();
        let subscriptions = engine.subscriptions.registry.clone();
        let write_buffer = engine.held.write_buffer.clone();
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
            state_cache,
            workers,
            subscriptions,
            store,
            write_buffer,
        })
    }

    /// Sets how much the store may hold in memory, not yet written to table files, before
    /// sources wait for it (bytes; 0: no bound).
    pub fn set_store_write_buffer_limit(&self, bytes: u64) {
        self.write_buffer.set_limit(bytes);
    }

    /// Sets what a subscription's client may leave unread before it ends (bytes), and the
    /// recent changes kept per subscribed relation for `AS OF` (bytes).
    pub fn set_subscribe_limits(&self, buffer_bytes: usize, history_bytes: usize) {
        self.subscriptions.set_limits(buffer_bytes, history_bytes);
    }

    /// The subscriptions running.
    pub fn subscriptions(&self) -> Vec<crate::subscribe::SubscriptionStats> {
        self.subscriptions.stats()
    }

    /// Subscribes to the committed changes of table or materialized view `relation`: from
    /// the next commit, with the store as of it for the snapshot; or, `as_of`, every change
    /// after that epoch (while the relation's history holds them).
    pub async fn subscribe(
        &self,
        relation: String,
        as_of: Option<u64>,
    ) -> Result<crate::subscribe::Subscription> {
        self.request(|reply| Command::Subscribe {
            relation,
            as_of,
            reply,
        })
        .await
    }

    /// Sets how many workers new views' keyed operators run on (before any view is restored).
    pub fn set_workers(&self, workers: usize) {
        self.workers.set(workers);
    }

    /// Sets how much memory the operators' state caches may hold together (bytes).
    pub fn set_state_cache(&self, bytes: usize) {
        self.state_cache.set_limit(bytes);
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

    /// Creates a sink; `meta` from [`SinkMeta::prepare`] (which reaches its target).
    pub async fn create_sink(
        &self,
        spec: crate::sink::SinkSpec,
        meta: SinkMeta,
        sql: String,
    ) -> Result<()> {
        self.request(|reply| Command::CreateSink {
            spec,
            meta,
            sql,
            reply,
        })
        .await
    }

    pub async fn restore(&self, entry: CatalogEntry, object: Restore) -> Result<()> {
        self.request(|reply| Command::Restore {
            entry: Box::new(entry),
            object: Box::new(object),
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
        let mut stats = self.stats.read().unwrap_or_else(|e| e.into_inner()).clone();
        stats.store = self.store.stats();
        stats.write_buffer_hold = self.write_buffer.stats();
        stats
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
    sinks: BTreeMap<String, sinks::SinkRuntime>,
    /// What sinks whose logs passed their bounds hold back.
    held: backpressure::HeldBack,
    /// Running connectors, by the table or view they feed.
    feeds: BTreeMap<String, Feed>,
    /// Writes of the current epoch that no operator owns (catalog changes, dropped ranges).
    epoch_writes: EpochBatch,
    /// Whether anything changed since the last commit.
    dirty: bool,
    /// Replies to send once the current epoch is committed.
    acks: Vec<committer::Ack>,
    /// What those replies' statements changed (how far their epoch must reach).
    reach: scope::Reach,
    /// When the first of them came (for the epoch log).
    statements_since: Option<Instant>,
    /// Writes epochs on its own thread; `store` reads through it.
    committer: Arc<committer::PipelinedStore>,
    /// The epoch being written while the next one is processed.
    in_flight: Option<commit::InFlight>,
    /// FLUSHes waiting for feeds to catch up with their sources.
    flushes: Vec<PendingFlush>,
    /// Raised while statements are being made: connectors send smaller batches.
    interactive: Arc<std::sync::atomic::AtomicBool>,
    commit_observer: Arc<OnceLock<CommitObserver>>,
    state_budget: Arc<StateBudget>,
    /// The node's cache of operator state (shared by every state table).
    state_cache: Arc<StateCache>,
    /// The threads views' keyed operators run on.
    workers: Arc<crate::workers::Workers>,
    /// Objects a reload could not restore yet (see `unrestored`).
    unrestored: Vec<(CatalogEntry, Restore)>,
    subscriptions: subscriptions::Subscriptions,
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
