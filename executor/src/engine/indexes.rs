//! Secondary indexes on tables and materialized views: built from the committed rows when
//! created, then kept up in every commit, in the same atomic write as the rows.

use std::ops::Bound;

use datafusion::arrow::datatypes::SchemaRef;
use eddy_storage::{CatalogEntry, EpochBatch, IndexDef, KeyRange, ObjectKind, TableId};

use super::Engine;
use crate::{ExecError, Result};

/// Rows read from the base table per step of an index build.
const BUILD_CHUNK_ROWS: usize = 65_536;

pub(super) struct IndexRuntime {
    pub entry: CatalogEntry,
    /// The table or view indexed.
    pub relation: String,
    pub columns: Vec<usize>,
    pub include: Vec<usize>,
    pub def: IndexDef,
}

impl Engine {
    pub(super) fn create_index(
        &mut self,
        name: String,
        sql: String,
        relation: String,
        columns: Vec<usize>,
        include: Vec<usize>,
    ) -> Result<TableId> {
        if self.name_taken(&name) {
            return Err(ExecError::DuplicateObject(format!(
                "relation \"{name}\" already exists"
            )));
        }
        let (base, schema) = self.indexable(&relation)?;
        let entry = self.new_entry(ObjectKind::Index, name.clone(), sql, 1)?;
        let id = entry.table_ids[0];
        let def = IndexDef::new(id, base, schema, columns.clone(), include.clone())?;
        self.build_index(&def)?;
        self.indexes.insert(
            name,
            IndexRuntime {
                entry,
                relation,
                columns,
                include,
                def,
            },
        );
        Ok(id)
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

    /// Writes the entries of every committed row into this epoch. Rows changed in this epoch
    /// are then handled at its commit, like any later change.
    fn build_index(&mut self, def: &IndexDef) -> Result<()> {
        let snapshot = self.store.snapshot();
        let mut range = KeyRange::all();
        loop {
            let rows = self
                .store
                .read_range(&snapshot, def.base, &range, BUILD_CHUNK_ROWS)?;
            let refs: Vec<(&[u8], &[u8])> = rows
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .collect();
            for (key, value) in def.entries(&refs)? {
                self.epoch_writes.put(def.index, &key, value);
            }
            match rows.last() {
                Some((last, _)) if rows.len() == BUILD_CHUNK_ROWS => {
                    range.start = Bound::Excluded(last.clone());
                }
                _ => return Ok(()),
            }
        }
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
