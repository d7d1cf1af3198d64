//! The engine's catalog side: creating, dropping and restoring tables, sources and views,
//! and reloading everything from the last committed epoch.

use std::collections::BTreeMap;
use std::sync::Arc;

use eddy_planner::StreamPlan;
use eddy_storage::keys::{LATE_ROWS_TABLE, VIEW_ERRORS_TABLE};
use eddy_storage::{CatalogEntry, EpochBatch, ObjectKind, TableId};

use super::{Engine, Restore, ViewRuntime};
use crate::connector::{Encode, SourceSpec};
use crate::graph::{Graph, StateLayout};
use crate::table::{TableDef, TableRuntime};
use crate::{ExecError, Message, Result};

impl Engine {
    /// Forgets everything uncommitted and rebuilds tables, pipelines and connectors from the
    /// store; connectors resume from their committed positions.
    pub(super) fn reload(&mut self) -> Result<()> {
        // The epoch in flight is durable or failed before anything is read back. Its failure
        // reloads too (this engine's state is abandoned either way).
        let _ = self.finish_in_flight();
        self.epoch_writes = EpochBatch::default();
        self.dirty = false;
        self.subscriptions.abandon_pending();
        self.counters = Self::load_counters(self.store.as_ref())?;
        let table_feeds: BTreeMap<String, SourceSpec> = std::mem::take(&mut self.feeds)
            .into_iter()
            .map(|(name, mut feed)| {
                feed.stop();
                (name, feed.spec.clone())
            })
            .collect();
        let tables = std::mem::take(&mut self.tables);
        let views = std::mem::take(&mut self.views);
        let sources = std::mem::take(&mut self.sources);
        let plain_views = std::mem::take(&mut self.plain_views);
        let sinks = std::mem::take(&mut self.sinks);
        // An index still being built has no catalog entry yet: its build starts over only if
        // its CREATE INDEX is run again.
        let abandoned = self.abandon_index_builds("the engine reloaded its last commit");
        let indexes = std::mem::take(&mut self.indexes);
        let mut entries: Vec<(CatalogEntry, Restore)> = tables
            .into_values()
            .map(|(entry, table)| {
                let feed = table_feeds.get(&entry.name).cloned();
                (entry, Restore::Table(table.def, feed))
            })
            .chain(
                sources
                    .into_values()
                    .map(|(entry, def)| (entry, Restore::Source(def))),
            )
            .chain(
                views
                    .into_values()
                    .map(|v| (v.entry, Restore::View(v.plan))),
            )
            .chain(
                plain_views
                    .into_values()
                    .map(|entry| (entry, Restore::PlainView)),
            )
            .chain(sinks.into_values().map(|sink| {
                let object = Restore::Sink(sink.spec.clone());
                (sink.entry.clone(), object)
            }))
            .chain(indexes.into_values().map(|index| {
                let object = Restore::Index {
                    relation: index.relation,
                    columns: index.columns,
                    include: index.include,
                };
                (index.entry, object)
            }))
            .collect();
        // An object created in the abandoned epoch was never committed: it goes with it (a view
        // whose backfill panicked must not come back and fail every later write to its inputs).
        let committed = self.counters.next_catalog_seq;
        entries.retain(|(entry, _)| entry.seq < committed);
        entries.sort_by_key(|(entry, _)| entry.seq);
        self.unrestored = entries;
        self.restore_unrestored()?;
        for entry in abandoned {
            self.remove_entry(&entry)?;
            self.dirty = true;
        }
        self.publish_stats();
        Ok(())
    }
    pub(super) fn restore(&mut self, entry: CatalogEntry, object: Restore) -> Result<()> {
        match object {
            Restore::Table(def, feed) => {
                let id = entry.table_ids[0];
                let table = TableRuntime::open(id, def, self.store.as_ref())?;
                if let Some(spec) = feed {
                    self.start_feed(&entry.name, spec, id, &table)?;
                }
                self.tables.insert(entry.name.clone(), (entry, table));
            }
            Restore::Source(def) => {
                self.sources.insert(entry.name.clone(), (entry, def));
            }
            Restore::View(plan) if entry.failed.is_none() && keyed_otherwise(&entry, &plan) => {
                // Its stored rows and state are keyed as an earlier Eddy planned them: reading
                // them with this plan's keys would double or lose rows.
                let message = "it was created by an earlier version of Eddy that keyed its rows otherwise (an outer join now keys each padded side by its presence)".to_string();
                return self.restore_failed(entry, plan, "55000", message);
            }
            Restore::View(plan) if entry.failed.is_some() => {
                // A failed view keeps its rows for reading its error, and nothing runs.
                let view = ViewRuntime {
                    entry,
                    plan,
                    graph: None,
                    readers: Vec::new(),
                };
                self.views.insert(view.entry.name.clone(), view);
            }
            Restore::Unplanned { sqlstate, message } => {
                let plan = unplanned_plan(&entry);
                if entry.failed.is_some() {
                    return self.restore(entry, Restore::View(plan));
                }
                let message =
                    format!("its query could not be planned when Eddy started ({message})");
                return self.restore_failed(entry, plan, &sqlstate, message);
            }
            Restore::PlainView => {
                self.plain_views.insert(entry.name.clone(), entry);
            }
            Restore::Sink(spec) => self.restore_sink(entry, spec)?,
            Restore::Index {
                relation,
                columns,
                include,
            } => self.restore_index(entry, relation, columns, include)?,
            Restore::View(plan) => {
                let instances = entry.workers.map_or(1, |w| w as usize);
                let layout = StateLayout(entry.state_layout.unwrap_or(0));
                let state = self.state_context();
                let built = Graph::build(
                    &plan,
                    &entry.table_ids,
                    instances,
                    layout,
                    &state,
                    &|name| self.stored_relation(name),
                );
                let mut graph = match built {
                    Ok(graph) => graph,
                    // The store could not be read: the reload is tried again.
                    Err(error @ ExecError::Storage(eddy_storage::StorageError::Io(_))) => {
                        return Err(error)
                    }
                    // Only this view is lost: the others start.
                    Err(error) => {
                        let message = format!("it could not be restored ({error})");
                        return self.restore_failed(entry, plan, "XX000", message);
                    }
                };
                graph.set_state_budget(self.state_budget.clone());
                let graph = Some(graph);
                let readers = self.open_view_readers(&entry.name, &plan, &entry.table_ids)?;
                self.views.insert(
                    entry.name.clone(),
                    ViewRuntime {
                        entry,
                        plan,
                        graph,
                        readers,
                    },
                );
            }
        }
        self.publish_stats();
        Ok(())
    }
    /// Restores a view as failed (reading it answers `message` with `sqlstate`). The failure
    /// is written: from now on the view misses every change to its inputs.
    fn restore_failed(
        &mut self,
        mut entry: CatalogEntry,
        plan: StreamPlan,
        sqlstate: &str,
        message: String,
    ) -> Result<()> {
        tracing::error!(view = entry.name, "{message}");
        entry.failed = Some(eddy_storage::ViewFailure {
            sqlstate: sqlstate.into(),
            message,
            epoch: self.counters.epoch,
        });
        entry.write(&mut self.epoch_writes)?;
        self.restore(entry, Restore::View(plan))
    }

    /// Where a table or view keeps its rows (for lookup joins).
    pub(super) fn stored_relation(&self, name: &str) -> Option<crate::join::StoredRelation> {
        if let Some((entry, table)) = self.tables.get(name) {
            return Some(crate::join::StoredRelation {
                table: entry.table_ids[0],
                key_fields: table.def.key_fields(),
                schema: table.def.schema.clone(),
            });
        }
        let view = self.views.get(name)?;
        Some(crate::join::StoredRelation {
            table: view.entry.table_ids[0],
            key_fields: view.plan.key_fields.clone(),
            schema: view.plan.schema.clone(),
        })
    }

    pub(super) fn name_taken(&self, name: &str) -> bool {
        self.tables.contains_key(name)
            || self.views.contains_key(name)
            || self.sources.contains_key(name)
            || self.plain_views.contains_key(name)
            || self.indexes.contains_key(name)
            || self.sinks.contains_key(name)
    }
    pub(super) fn new_entry(
        &mut self,
        kind: ObjectKind,
        name: String,
        sql: String,
        ids: usize,
    ) -> Result<CatalogEntry> {
        let entry = self.allocate_entry(kind, name, sql, ids);
        entry.write(&mut self.epoch_writes)?;
        Ok(entry)
    }

    /// A new catalog entry and its table ids, not written yet.
    pub(super) fn allocate_entry(
        &mut self,
        kind: ObjectKind,
        name: String,
        sql: String,
        ids: usize,
    ) -> CatalogEntry {
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
            failed: None,
            key_layout: None,
            workers: None,
            state_layout: None,
            source_schema: None,
            source_key_schema: None,
            view_shape: None,
        };
        self.counters.next_catalog_seq += 1;
        entry
    }
    pub(super) fn create_table(
        &mut self,
        def: TableDef,
        feed: Option<SourceSpec>,
        sql: String,
    ) -> Result<TableId> {
        if self.name_taken(&def.name) {
            return Err(ExecError::DuplicateObject(format!(
                "relation \"{}\" already exists",
                def.name
            )));
        }
        // Check the connector's options (and reach the broker) before the table enters the
        // catalog: a table whose connector cannot be built would not restore.
        if let Some(spec) = &feed {
            crate::connector::validate(spec)?;
        }
        // Written to the catalog only once its feed runs: an entry for a table that failed to
        // start would not restore.
        let mut entry = self.allocate_entry(ObjectKind::Table, def.name.clone(), sql, 1);
        if let Some(spec) = &feed {
            entry.source_schema = spec.encode.schema_text();
            entry.source_key_schema = spec.key_encode.as_ref().and_then(Encode::schema_text);
        }
        let id = entry.table_ids[0];
        let table = TableRuntime::open(id, def, self.store.as_ref())?;
        if let Some(spec) = feed {
            self.start_feed(&entry.name, spec, id, &table)?;
        }
        if let Err(error) = entry.write(&mut self.epoch_writes) {
            self.feeds.remove(&entry.name);
            return Err(error.into());
        }
        self.tables.insert(entry.name.clone(), (entry, table));
        Ok(id)
    }
    pub(super) fn create_view(
        &mut self,
        name: String,
        sql: String,
        plan: StreamPlan,
    ) -> Result<TableId> {
        if self.name_taken(&name) {
            return Err(ExecError::DuplicateObject(format!(
                "relation \"{name}\" already exists"
            )));
        }
        for input in plan.input_names() {
            if !self.name_taken(input) {
                return Err(ExecError::UndefinedObject(format!(
                    "relation \"{input}\" does not exist"
                )));
            }
        }
        // A view over sources also keeps each reader's progress under an id of its own.
        let sources_read = plan
            .input_names()
            .into_iter()
            .filter(|name| self.sources.contains_key(*name))
            .count();
        let instances = self.workers.count();
        let layout = StateLayout::CURRENT;
        let ids = Graph::table_ids_needed(&plan, instances, layout) + sources_read;
        let first_id = self.counters.next_table_id;
        // The view's rows, its operators' state (in the store's state keyspace), then one id
        // per source reader.
        let state = 1..Graph::table_ids_needed(&plan, instances, layout) as TableId;
        let table_ids: Vec<TableId> = (0..ids as TableId)
            .map(|i| match state.contains(&i) {
                true => eddy_storage::keys::state_table_id(first_id + i),
                false => first_id + i,
            })
            .collect();
        let context = self.state_context();
        let mut graph = Graph::build(&plan, &table_ids, instances, layout, &context, &|name| {
            self.stored_relation(name)
        })?;
        graph.set_state_budget(self.state_budget.clone());
        #[cfg(debug_assertions)]
        if std::env::var("EDDY_TEST_PANIC_IN_VIEW").is_ok_and(|v| v == name) {
            // Debug builds only: the tests' way to see the engine survive a bug in an operator.
            panic!("a fault injected into view {name}");
        }
        // Backfill: a view over tables or other views starts from every row that holds now,
        // then their watermarks (a source gets a reader of its own instead), one input after
        // the other, so that a join sees the first input's rows when the second's arrive.
        for input in plan.input_names() {
            let snapshot = match (self.tables.get(input), self.views.get(input)) {
                (Some((_, table)), _) => table.snapshot(self.store.as_ref())?,
                (None, Some(upstream)) => match (&upstream.graph, &upstream.entry.failed) {
                    (Some(graph), _) => graph.snapshot(self.store.as_ref())?,
                    (None, failure) => {
                        return Err(ExecError::NotSupported(format!(
                            "materialized view \"{input}\" has failed and is no longer maintained ({}): drop it and create it again first",
                            failure.as_ref().map_or("", |f| f.message.as_str())
                        )))
                    }
                },
                (None, None) => continue,
            };
            if let Some(chunk) = snapshot {
                graph.push(input, Message::Chunk(chunk))?;
            }
            for watermark in self.watermarks_of(input) {
                graph.push(input, Message::Watermark(watermark))?;
            }
        }
        let readers = self.open_view_readers(&name, &plan, &table_ids)?;
        let mut entry = self.allocate_entry(ObjectKind::MaterializedView, name.clone(), sql, ids);
        debug_assert_eq!(entry.table_ids.len(), table_ids.len());
        entry.table_ids = table_ids;
        entry.key_layout = Some(plan.key_layout());
        entry.workers = Some(instances as u32);
        entry.state_layout = Some(layout.0);
        entry.view_shape = Some(eddy_storage::ViewShape::new(
            &plan.schema,
            plan.root.key_columns.clone(),
            plan.append_only,
        ));
        entry.write(&mut self.epoch_writes)?;
        self.views.insert(
            name,
            ViewRuntime {
                entry,
                plan,
                graph: Some(graph),
                readers,
            },
        );
        Ok(first_id)
    }
    pub(super) fn drop_object(&mut self, kind: ObjectKind, name: &str) -> Result<()> {
        let wrong_kind = |actual: &str, statement: &str| {
            ExecError::NotSupported(format!("\"{name}\" is a {actual}: use {statement}"))
        };
        if kind != ObjectKind::MaterializedView && self.views.contains_key(name) {
            return Err(wrong_kind("materialized view", "DROP MATERIALIZED VIEW"));
        }
        if kind != ObjectKind::Table && self.tables.contains_key(name) {
            return Err(wrong_kind("table", "DROP TABLE"));
        }
        if kind != ObjectKind::Source && self.sources.contains_key(name) {
            return Err(wrong_kind("source", "DROP SOURCE"));
        }
        if kind != ObjectKind::View && self.plain_views.contains_key(name) {
            return Err(wrong_kind("view", "DROP VIEW"));
        }
        if kind != ObjectKind::Index && self.indexes.contains_key(name) {
            return Err(wrong_kind("index", "DROP INDEX"));
        }
        if kind != ObjectKind::Sink && self.sinks.contains_key(name) {
            return Err(wrong_kind("sink", "DROP SINK"));
        }
        if kind == ObjectKind::Sink {
            return self.drop_sink(name);
        }
        if kind == ObjectKind::Index {
            return self.drop_index(name);
        }
        if kind == ObjectKind::View {
            let entry = self.plain_views.remove(name).ok_or_else(|| {
                ExecError::UndefinedObject(format!("view \"{name}\" does not exist"))
            })?;
            return self.remove_entry(&entry);
        }
        let views: Vec<String> = self
            .views
            .values()
            .filter(|v| v.plan.reads(name))
            .map(|v| format!("\"{}\"", v.entry.name))
            .collect();
        let sinks = self.sinks_reading(name);
        let mut dependents = Vec::new();
        if !views.is_empty() {
            dependents.push(format!("materialized view {}", views.join(", ")));
        }
        if !sinks.is_empty() {
            dependents.push(format!("sink {}", sinks.join(", ")));
        }
        if !dependents.is_empty() {
            let what = match kind {
                ObjectKind::Table => "table",
                ObjectKind::Source => "source",
                ObjectKind::MaterializedView => "materialized view",
                ObjectKind::View => "view",
                ObjectKind::Index => "index",
                ObjectKind::Sink => "sink",
            };
            return Err(ExecError::DependentObjects(format!(
                "cannot drop {what} \"{name}\" because {} depends on it",
                dependents.join(" and ")
            )));
        }
        let entry = match kind {
            ObjectKind::Table => {
                let (entry, table) = self.tables.remove(name).ok_or_else(|| {
                    ExecError::UndefinedObject(format!("table \"{name}\" does not exist"))
                })?;
                table.drop_progress(&mut self.epoch_writes);
                entry
            }
            ObjectKind::Source => {
                let (entry, _) = self.sources.remove(name).ok_or_else(|| {
                    ExecError::UndefinedObject(format!("source \"{name}\" does not exist"))
                })?;
                entry
            }
            ObjectKind::View | ObjectKind::Index | ObjectKind::Sink => {
                return Err(ExecError::Internal(
                    "a plain view, an index or a sink reached the drop of stored objects".into(),
                ))
            }
            ObjectKind::MaterializedView => {
                let view = self.views.remove(name).ok_or_else(|| {
                    ExecError::UndefinedObject(format!(
                        "materialized view \"{name}\" does not exist"
                    ))
                })?;
                for reader in &view.readers {
                    reader.table.drop_progress(&mut self.epoch_writes);
                    if let Some(mut feed) = self.feeds.remove(&reader.feed) {
                        feed.stop();
                        feed.forget(&mut self.epoch_writes);
                    }
                }
                view.entry
            }
        };
        if let Some(mut feed) = self.feeds.remove(name) {
            feed.stop();
            feed.forget(&mut self.epoch_writes);
        }
        self.drop_indexes_of(name)?;
        // The object's late rows go with it, so a new object of that name starts clean.
        for (key, value) in self.store.scan_table(LATE_ROWS_TABLE)? {
            let late: Option<crate::table::LateRow> = serde_json::from_slice(&value).ok();
            if late.is_some_and(|l| l.object == name) {
                self.epoch_writes.delete(LATE_ROWS_TABLE, &key);
            }
        }
        for (key, value) in self.store.scan_table(VIEW_ERRORS_TABLE)? {
            let failed: Option<crate::view_errors::StoredViewError> =
                serde_json::from_slice(&value).ok();
            if failed.is_some_and(|f| f.view == name) {
                self.epoch_writes.delete(VIEW_ERRORS_TABLE, &key);
            }
        }
        self.remove_entry(&entry)
    }
    /// Deletes an object's catalog entry and every row of its tables, in this epoch.
    pub(super) fn remove_entry(&mut self, entry: &CatalogEntry) -> Result<()> {
        entry.remove(&mut self.epoch_writes);
        for &id in &entry.table_ids {
            for (key, _) in self.store.scan_table(id)? {
                self.epoch_writes.delete(id, &key);
            }
        }
        Ok(())
    }
}

/// Whether `plan` keys a view's rows or state otherwise than when the view was created.
fn keyed_otherwise(entry: &CatalogEntry, plan: &StreamPlan) -> bool {
    let layout = plan.key_layout();
    match &entry.key_layout {
        Some(created) => *created != layout,
        // Recorded since outer joins gained presence flags: an older entry with one is stale.
        None => layout.contains("_join_left_present") || layout.contains("_join_right_present"),
    }
}

/// The plan a view whose query no longer plans is kept with: its columns, key and appends as
/// recorded when it was created (none when they were not), nothing to run.
pub fn unplanned_plan(entry: &CatalogEntry) -> StreamPlan {
    let shape = entry.view_shape.as_ref();
    match shape.and_then(|shape| Some((shape.schema()?, shape))) {
        Some((schema, shape)) => {
            StreamPlan::unplanned(schema, shape.key_columns.clone(), shape.append_only)
        }
        None => StreamPlan::unplanned(
            Arc::new(datafusion::arrow::datatypes::Schema::empty()),
            None,
            true,
        ),
    }
}
