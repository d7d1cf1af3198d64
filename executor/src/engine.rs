//! The epoch loop.
//!
//! One thread owns every table and view pipeline. Commands (DDL, DML, FLUSH) arrive on a
//! channel; after draining what is queued, the engine runs a barrier through every pipeline
//! and commits the epoch — table rows, operator state, view rows, watermarks, late rows and
//! catalog changes — as one atomic batch, and only then acknowledges the statements in it
//! (group commit: an acknowledged statement is durable). A barrier also runs every
//! checkpoint interval while anything is uncommitted.

use std::collections::BTreeMap;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use datafusion::arrow::array::RecordBatch;
use datafusion::physical_expr::PhysicalExpr;
use eddy_planner::StreamPlan;
use eddy_storage::keys::{meta_key, FIRST_USER_TABLE, LATE_ROWS_TABLE};
use eddy_storage::{CatalogEntry, EpochBatch, ObjectKind, Store, TableId};
use tokio::sync::oneshot;

use crate::pipeline::Pipeline;
use crate::stats::{EngineStats, TableStats, ViewStats};
use crate::table::TableRuntime;
pub use crate::table::{TableDef, TableKey};
use crate::{Barrier, ExecError, Message, Result};

type Reply<T> = oneshot::Sender<Result<T>>;

/// A table or view to bring back from the catalog, already planned.
pub enum Restore {
    Table(TableDef),
    View(StreamPlan),
}

enum Command {
    CreateTable {
        def: TableDef,
        sql: String,
        reply: Reply<TableId>,
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
#[derive(Clone)]
pub struct EngineHandle {
    tx: mpsc::Sender<Command>,
    stats: Arc<RwLock<EngineStats>>,
}

impl EngineHandle {
    /// Starts the engine thread over `store`, with a barrier at least every `interval`.
    pub fn start(store: Arc<dyn Store>, interval: Duration) -> Result<Self> {
        let (tx, rx) = mpsc::channel();
        let stats = Arc::new(RwLock::new(EngineStats::default()));
        let mut engine = Engine::new(store, stats.clone())?;
        std::thread::Builder::new()
            .name("eddy-engine".into())
            .spawn(move || engine.run(rx, interval))
            .map_err(|e| ExecError::DataFusion(e.into()))?;
        Ok(Self { tx, stats })
    }

    async fn request<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(make(reply)).map_err(|_| ExecError::Stopped)?;
        rx.await.map_err(|_| ExecError::Stopped)?
    }

    pub async fn create_table(&self, def: TableDef, sql: String) -> Result<TableId> {
        self.request(|reply| Command::CreateTable { def, sql, reply })
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

    pub fn stats(&self) -> EngineStats {
        self.stats.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

struct ViewRuntime {
    entry: CatalogEntry,
    plan: StreamPlan,
    pipeline: Pipeline,
}

/// Counters kept in the meta table.
#[derive(Debug, Default, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Counters {
    epoch: u64,
    next_table_id: TableId,
    next_catalog_seq: u64,
    late_seq: u64,
}

const COUNTERS: &str = "counters";

struct Engine {
    store: Arc<dyn Store>,
    stats: Arc<RwLock<EngineStats>>,
    counters: Counters,
    tables: BTreeMap<String, (CatalogEntry, TableRuntime)>,
    views: BTreeMap<String, ViewRuntime>,
    /// Writes of the current epoch that no operator owns (catalog changes, dropped ranges).
    epoch_writes: EpochBatch,
    /// Whether anything changed since the last commit.
    dirty: bool,
    /// Replies to send once the current epoch is committed.
    acks: Vec<Box<dyn FnOnce(Result<()>) + Send>>,
}

impl Engine {
    fn new(store: Arc<dyn Store>, stats: Arc<RwLock<EngineStats>>) -> Result<Self> {
        let counters = Self::load_counters(store.as_ref())?;
        Ok(Self {
            store,
            stats,
            counters,
            tables: BTreeMap::new(),
            views: BTreeMap::new(),
            epoch_writes: EpochBatch::default(),
            dirty: false,
            acks: Vec::new(),
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

    fn run(&mut self, rx: mpsc::Receiver<Command>, interval: Duration) {
        let mut last_commit = Instant::now();
        loop {
            let wait = interval.saturating_sub(last_commit.elapsed());
            let first = match rx.recv_timeout(wait) {
                Ok(command) => Some(command),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => {
                    let _ = self.commit();
                    return;
                }
            };
            let mut stop = None;
            // Group commit: take everything already queued into this epoch.
            for command in first
                .into_iter()
                .chain(std::iter::from_fn(|| rx.try_recv().ok()).take(10_000))
            {
                if let Command::Shutdown { reply } = command {
                    stop = Some(reply);
                    break;
                }
                self.handle(command);
            }
            let due = last_commit.elapsed() >= interval;
            if !self.acks.is_empty() || (self.dirty && due) || stop.is_some() {
                self.commit_and_ack();
                last_commit = Instant::now();
            } else if due {
                last_commit = Instant::now();
            }
            if let Some(reply) = stop {
                let _ = reply.send(Ok(()));
                return;
            }
        }
    }

    /// Runs a command. Its reply waits for the commit when it changed anything.
    fn handle(&mut self, command: Command) {
        match command {
            Command::CreateTable { def, sql, reply } => {
                let result = self.create_table(def, sql);
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
                let epoch = self.counters.epoch + 1;
                self.ack_after_commit(reply, Ok(epoch));
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

    fn fail_pending(&mut self, why: &str) {
        for ack in self.acks.drain(..) {
            ack(Err(ExecError::NotSupported(why.to_string())));
        }
    }

    fn commit_and_ack(&mut self) {
        let result = self.commit();
        let acks = std::mem::take(&mut self.acks);
        match result {
            Ok(()) => acks.into_iter().for_each(|ack| ack(Ok(()))),
            Err(error) => {
                tracing::error!(%error, "epoch commit failed; reloading the last committed epoch");
                let message = error.to_string();
                for ack in acks {
                    ack(Err(ExecError::NotSupported(format!(
                        "the epoch could not be committed: {message}"
                    ))));
                }
                if let Err(error) = self.reload() {
                    tracing::error!(%error, "reloading after a failed commit failed");
                }
            }
        }
    }

    /// Runs a barrier through every pipeline and commits the epoch atomically.
    fn commit(&mut self) -> Result<()> {
        let epoch = self.counters.epoch + 1;
        let barrier = Barrier { epoch };
        let mut batch = std::mem::take(&mut self.epoch_writes);
        for (_, table) in self.tables.values_mut() {
            table.commit(&mut batch, &mut self.counters.late_seq)?;
        }
        for view in self.views.values_mut() {
            view.pipeline.push(Message::Barrier(barrier), &mut batch)?;
        }
        let mut counters = self.counters;
        counters.epoch = epoch;
        batch.put_meta(
            COUNTERS,
            serde_json::to_vec(&counters).map_err(eddy_storage::StorageError::from)?,
        );
        self.store.commit(batch)?;
        self.counters = counters;
        self.dirty = false;
        self.publish_stats();
        Ok(())
    }

    /// Forgets everything uncommitted and rebuilds tables and pipelines from the store.
    fn reload(&mut self) -> Result<()> {
        self.epoch_writes = EpochBatch::default();
        self.dirty = false;
        self.counters = Self::load_counters(self.store.as_ref())?;
        let tables = std::mem::take(&mut self.tables);
        let views = std::mem::take(&mut self.views);
        let mut entries: Vec<(CatalogEntry, Restore)> = tables
            .into_values()
            .map(|(entry, table)| (entry, Restore::Table(table.def)))
            .chain(
                views
                    .into_values()
                    .map(|v| (v.entry, Restore::View(v.plan))),
            )
            .collect();
        entries.sort_by_key(|(entry, _)| entry.seq);
        for (entry, object) in entries {
            self.restore(entry, object)?;
        }
        self.publish_stats();
        Ok(())
    }

    fn restore(&mut self, entry: CatalogEntry, object: Restore) -> Result<()> {
        match object {
            Restore::Table(def) => {
                let table = TableRuntime::open(entry.table_ids[0], def, self.store.as_ref())?;
                self.tables.insert(entry.name.clone(), (entry, table));
            }
            Restore::View(plan) => {
                let pipeline = self.build_pipeline(&plan, &entry.table_ids)?;
                self.views.insert(
                    entry.name.clone(),
                    ViewRuntime {
                        entry,
                        plan,
                        pipeline,
                    },
                );
            }
        }
        self.publish_stats();
        Ok(())
    }

    fn build_pipeline(&self, plan: &StreamPlan, table_ids: &[TableId]) -> Result<Pipeline> {
        let (_, table) = self.tables.get(&plan.source.name).ok_or_else(|| {
            ExecError::UndefinedObject(format!("table \"{}\" does not exist", plan.source.name))
        })?;
        Pipeline::build(
            plan,
            &table.def.schema,
            table.def.key_fields(),
            table_ids,
            self.store.as_ref(),
        )
    }

    fn name_taken(&self, name: &str) -> bool {
        self.tables.contains_key(name) || self.views.contains_key(name)
    }

    fn new_entry(
        &mut self,
        kind: ObjectKind,
        name: String,
        sql: String,
        ids: usize,
    ) -> Result<CatalogEntry> {
        let table_ids = (0..ids as TableId)
            .map(|i| self.counters.next_table_id + i)
            .collect();
        self.counters.next_table_id += ids as TableId;
        let entry = CatalogEntry {
            seq: self.counters.next_catalog_seq,
            kind,
            name,
            sql,
            table_ids,
        };
        self.counters.next_catalog_seq += 1;
        entry.write(&mut self.epoch_writes)?;
        Ok(entry)
    }

    fn create_table(&mut self, def: TableDef, sql: String) -> Result<TableId> {
        if self.name_taken(&def.name) {
            return Err(ExecError::DuplicateObject(format!(
                "relation \"{}\" already exists",
                def.name
            )));
        }
        let entry = self.new_entry(ObjectKind::Table, def.name.clone(), sql, 1)?;
        let id = entry.table_ids[0];
        let table = TableRuntime::open(id, def, self.store.as_ref())?;
        self.tables.insert(entry.name.clone(), (entry, table));
        Ok(id)
    }

    fn create_view(&mut self, name: String, sql: String, plan: StreamPlan) -> Result<TableId> {
        if self.name_taken(&name) {
            return Err(ExecError::DuplicateObject(format!(
                "relation \"{name}\" already exists"
            )));
        }
        let ids = Pipeline::table_ids_needed(&plan);
        let first_id = self.counters.next_table_id;
        let table_ids: Vec<TableId> = (0..ids as TableId).map(|i| first_id + i).collect();
        let mut pipeline = self.build_pipeline(&plan, &table_ids)?;
        // Backfill: the view starts from every row the table holds now, then its watermark.
        let (_, table) = &self.tables[&plan.source.name];
        let snapshot = table.snapshot(self.store.as_ref())?;
        let watermark = table.watermark();
        let mut scratch = EpochBatch::default();
        if let Some(chunk) = snapshot {
            pipeline.push(Message::Chunk(chunk), &mut scratch)?;
        }
        if let Some(watermark) = watermark {
            pipeline.push(Message::Watermark(watermark), &mut scratch)?;
        }
        let entry = self.new_entry(ObjectKind::MaterializedView, name.clone(), sql, ids)?;
        debug_assert_eq!(entry.table_ids, table_ids);
        self.views.insert(
            name,
            ViewRuntime {
                entry,
                plan,
                pipeline,
            },
        );
        Ok(first_id)
    }

    fn drop_object(&mut self, kind: ObjectKind, name: &str) -> Result<()> {
        match kind {
            ObjectKind::Table => {
                if self.views.contains_key(name) {
                    return Err(ExecError::NotSupported(format!(
                        "\"{name}\" is a materialized view: use DROP MATERIALIZED VIEW"
                    )));
                }
                let dependents: Vec<&str> = self
                    .views
                    .values()
                    .filter(|v| v.plan.source.name == name)
                    .map(|v| v.entry.name.as_str())
                    .collect();
                if !dependents.is_empty() {
                    return Err(ExecError::DependentObjects(format!(
                        "cannot drop table \"{name}\" because materialized view {} depends on it",
                        dependents
                            .iter()
                            .map(|d| format!("\"{d}\""))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
                let (entry, table) = self.tables.remove(name).ok_or_else(|| {
                    ExecError::UndefinedObject(format!("table \"{name}\" does not exist"))
                })?;
                table.drop_progress(&mut self.epoch_writes);
                // The table's late rows go with it, so a new table of that name starts clean.
                for (key, value) in self.store.scan_table(LATE_ROWS_TABLE)? {
                    let late: Option<crate::table::LateRow> = serde_json::from_slice(&value).ok();
                    if late.is_some_and(|l| l.object == name) {
                        self.epoch_writes.delete(LATE_ROWS_TABLE, &key);
                    }
                }
                self.remove_entry(&entry)?;
            }
            ObjectKind::MaterializedView => {
                if self.tables.contains_key(name) {
                    return Err(ExecError::NotSupported(format!(
                        "\"{name}\" is a table: use DROP TABLE"
                    )));
                }
                let view = self.views.remove(name).ok_or_else(|| {
                    ExecError::UndefinedObject(format!(
                        "materialized view \"{name}\" does not exist"
                    ))
                })?;
                self.remove_entry(&view.entry)?;
            }
        }
        Ok(())
    }

    /// Deletes an object's catalog entry and every row of its tables, in this epoch.
    fn remove_entry(&mut self, entry: &CatalogEntry) -> Result<()> {
        entry.remove(&mut self.epoch_writes);
        for &id in &entry.table_ids {
            for (key, _) in self.store.scan_table(id)? {
                self.epoch_writes.delete(id, &key);
            }
        }
        Ok(())
    }

    fn insert(&mut self, name: &str, batches: Vec<RecordBatch>) -> Result<u64> {
        let mut applied = 0;
        for batch in batches {
            let rows = batch.num_rows() as u64;
            let (_, table) = self.tables.get_mut(name).ok_or_else(|| {
                ExecError::UndefinedObject(format!("table \"{name}\" does not exist"))
            })?;
            let late_before = table.rows_late();
            // DML is one split of its own.
            let outcome = table.insert(batch, "", self.store.as_ref());
            let outcome = self.abandon_on_error(outcome)?;
            let late = self.tables[name].1.rows_late() - late_before;
            applied += rows - late;
            self.fan_out(name, outcome)?;
        }
        Ok(applied)
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
        let mut scratch = EpochBatch::default();
        let mut result = Ok(());
        for view in self
            .views
            .values_mut()
            .filter(|v| v.plan.source.name == table)
        {
            if let Some(chunk) = &chunk {
                result = view
                    .pipeline
                    .push(Message::Chunk(chunk.clone()), &mut scratch);
            }
            if let (Ok(()), Some(watermark)) = (&result, watermark) {
                result = view
                    .pipeline
                    .push(Message::Watermark(watermark), &mut scratch);
            }
            if result.is_err() {
                break;
            }
        }
        self.abandon_on_error(result)
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
        let stats = EngineStats {
            epoch: self.counters.epoch,
            tables: self
                .tables
                .values()
                .map(|(entry, table)| TableStats {
                    name: entry.name.clone(),
                    rows_in: table.rows_in(),
                    rows_late: table.rows_late(),
                    watermark: table.watermark().map(|w| w.value),
                })
                .collect(),
            views: self
                .views
                .values()
                .map(|view| ViewStats {
                    name: view.entry.name.clone(),
                    source: view.plan.source.name.clone(),
                    sql: view.entry.sql.clone(),
                    emit_on_window_close: view.plan.emit_on_window_close,
                    state_rows: view.pipeline.state_rows() as u64,
                    open_windows: view.pipeline.open_windows() as u64,
                    unbounded_state: view.plan.has_unbounded_state(),
                })
                .collect(),
            store_bytes: self.store.size_on_disk(),
        };
        *self.stats.write().unwrap_or_else(|e| e.into_inner()) = stats;
    }
}
