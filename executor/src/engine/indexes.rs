//! Secondary indexes on tables and materialized views: built from the committed rows when
//! created, then kept up in every commit, in the same atomic write as the rows.
//!
//! A build spans many epochs, so that its memory is one chunk of entries, not the whole index,
//! and writes go on meanwhile. From its start the index is kept up like any other: every
//! epoch's writes to the base replace their rows' entries. Each epoch also backfills the
//! entries of the next chunk of rows, read as last committed, into the same batch; the upkeep
//! of the epoch's own writes is added after it and so wins over it. A row backfilled, then
//! changed, is kept up from then on; a row changed before its chunk is backfilled from its
//! newer version (its upkeep wrote the same entry, or deleted an entry never written). The
//! catalog entry is written in the epoch the last chunk is, and only then does the CREATE
//! INDEX answer and the planner see the index.

use std::ops::Bound;

use datafusion::arrow::datatypes::SchemaRef;
use eddy_storage::{CatalogEntry, EpochBatch, IndexDef, KeyRange, ObjectKind, TableId};

use super::{Engine, Reply};
use crate::{ExecError, Result};

/// Base rows backfilled per epoch while an index is built.
const BUILD_CHUNK_ROWS: usize = 65_536;

pub(super) struct IndexRuntime {
    pub entry: CatalogEntry,
    /// The table or view indexed.
    pub relation: String,
    pub columns: Vec<usize>,
    pub include: Vec<usize>,
    pub def: IndexDef,
    /// While the index is being built: where its backfill goes on.
    pub build: Option<IndexBuild>,
}

pub(super) struct IndexBuild {
    /// Rows from here on are still to be backfilled.
    next: Bound<Vec<u8>>,
    /// The CREATE INDEX, answered once the build is committed.
    reply: Reply<TableId>,
}

impl Engine {
    /// Starts building an index; `reply` answers once it is built and committed.
    pub(super) fn create_index(
        &mut self,
        name: String,
        sql: String,
        relation: String,
        columns: Vec<usize>,
        include: Vec<usize>,
        reply: Reply<TableId>,
    ) {
        if self.name_taken(&name) {
            let _ = reply.send(Err(ExecError::DuplicateObject(format!(
                "relation \"{name}\" already exists"
            ))));
            return;
        }
        let started = self.indexable(&relation).and_then(|(base, schema)| {
            // The catalog entry is written when the build ends (see `step_index_builds`).
            let entry = self.allocate_entry(ObjectKind::Index, name.clone(), sql, 1);
            let def = IndexDef::new(
                entry.table_ids[0],
                base,
                schema,
                columns.clone(),
                include.clone(),
            )?;
            Ok((entry, def))
        });
        let (entry, def) = match started {
            Ok(started) => started,
            Err(error) => {
                let _ = reply.send(Err(error));
                return;
            }
        };
        self.indexes.insert(
            name,
            IndexRuntime {
                entry,
                relation,
                columns,
                include,
                def,
                build: Some(IndexBuild {
                    next: Bound::Unbounded,
                    reply,
                }),
            },
        );
        self.dirty = true;
    }

    /// Whether an index build is going on (each epoch then backfills a chunk of it).
    pub(super) fn building_indexes(&self) -> bool {
        self.indexes.values().any(|index| index.build.is_some())
    }

    /// Backfills into `batch` the entries of the next chunk of rows of every index being
    /// built, as last committed; an index whose last chunk this is gets its catalog entry in
    /// `batch` and answers its CREATE INDEX once `batch` is committed. Runs before the
    /// upkeep of `batch`'s own writes is added (see the module's comment).
    pub(super) fn step_index_builds(&mut self, batch: &mut EpochBatch) -> Result<()> {
        for index in self.indexes.values_mut() {
            let Some(build) = &mut index.build else {
                continue;
            };
            let snapshot = self.store.snapshot()?;
            let range = KeyRange {
                start: build.next.clone(),
                end: Bound::Unbounded,
            };
            let rows =
                self.store
                    .read_range(&snapshot, index.def.base, &range, BUILD_CHUNK_ROWS)?;
            drop(snapshot);
            let refs: Vec<(&[u8], &[u8])> = rows
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .collect();
            for (key, value) in index.def.entries(&refs)? {
                batch.put(index.def.index, &key, value);
            }
            match rows.last() {
                Some((last, _)) if rows.len() == BUILD_CHUNK_ROWS => {
                    build.next = Bound::Excluded(last.clone());
                }
                _ => {
                    index.entry.write(batch)?;
                    if let Some(build) = index.build.take() {
                        let id = index.def.index;
                        self.acks.push(Box::new(move |committed| {
                            let _ = build.reply.send(committed.map(|()| id));
                        }));
                    }
                }
            }
        }
        Ok(())
    }

    /// Takes out the indexes still being built (when the engine reloads its last commit):
    /// their CREATE INDEX fails with `why`, and what they backfilled so far is to be removed.
    pub(super) fn abandon_index_builds(&mut self, why: &str) -> Vec<CatalogEntry> {
        let building: Vec<String> = self
            .indexes
            .iter()
            .filter(|(_, index)| index.build.is_some())
            .map(|(name, _)| name.clone())
            .collect();
        let mut abandoned = Vec::new();
        for name in building {
            if let Some(index) = self.indexes.remove(&name) {
                if let Some(build) = index.build {
                    let _ = build.reply.send(Err(ExecError::Internal(format!(
                        "the build of index \"{name}\" was abandoned: {why}"
                    ))));
                }
                abandoned.push(index.entry);
            }
        }
        abandoned
    }

    pub(super) fn restore_index(
        &mut self,
        entry: CatalogEntry,
        relation: String,
        columns: Vec<usize>,
        include: Vec<usize>,
    ) -> Result<()> {
        let (base, schema) = self.indexable(&relation)?;
        let def = IndexDef::new(
            entry.table_ids[0],
            base,
            schema,
            columns.clone(),
            include.clone(),
        )?;
        self.indexes.insert(
            entry.name.clone(),
            IndexRuntime {
                entry,
                relation,
                columns,
                include,
                def,
                build: None,
            },
        );
        Ok(())
    }

    /// Where the rows of `relation` are kept, if it keeps any.
    fn indexable(&self, relation: &str) -> Result<(TableId, SchemaRef)> {
        if let Some((entry, table)) = self.tables.get(relation) {
            return Ok((entry.table_ids[0], table.def.schema.clone()));
        }
        if let Some(view) = self.views.get(relation) {
            return Ok((view.entry.table_ids[0], view.plan.schema.clone()));
        }
        if self.sources.contains_key(relation) {
            return Err(ExecError::NotSupported(format!(
                "\"{relation}\" is a source, which keeps no rows: index a materialized view over it"
            )));
        }
        if self.plain_views.contains_key(relation) {
            return Err(ExecError::NotSupported(format!(
                "\"{relation}\" is a view, which keeps no rows: index a materialized view instead"
            )));
        }
        Err(ExecError::UndefinedObject(format!(
            "relation \"{relation}\" does not exist"
        )))
    }

    /// Adds the index writes that `batch`'s row writes call for.
    pub(super) fn maintain_indexes(&self, batch: &mut EpochBatch) -> Result<()> {
        for index in self.indexes.values() {
            index.def.maintain(self.store.as_ref(), batch)?;
        }
        Ok(())
    }

    pub(super) fn drop_index(&mut self, name: &str) -> Result<()> {
        let index = self.indexes.remove(name).ok_or_else(|| {
            ExecError::UndefinedObject(format!("index \"{name}\" does not exist"))
        })?;
        if let Some(build) = index.build {
            // Its relation is being dropped.
            let _ = build.reply.send(Err(ExecError::UndefinedObject(format!(
                "relation \"{}\" was dropped while index \"{name}\" was being built",
                index.relation
            ))));
        }
        self.remove_entry(&index.entry)
    }

    /// Drops the indexes of a relation being dropped (as Postgres does).
    pub(super) fn drop_indexes_of(&mut self, relation: &str) -> Result<()> {
        let names: Vec<String> = self
            .indexes
            .iter()
            .filter(|(_, index)| index.relation == relation)
            .map(|(name, _)| name.clone())
            .collect();
        for name in names {
            self.drop_index(&name)?;
        }
        Ok(())
    }

    /// The indexes of `relation`, by name (a rename would leave their SQL behind).
    pub(super) fn indexes_of(&self, relation: &str) -> Vec<String> {
        self.indexes
            .iter()
            .filter(|(_, index)| index.relation == relation)
            .map(|(name, _)| format!("\"{name}\""))
            .collect()
    }
}
