//! The indexes a table's reads can use. The engine keeps each index's entries up in the
//! epoch its rows change; the server keeps which indexes exist, for the planner (a filter on an
//! index's leading columns reads a range of its entries) and for the catalogs (`pg_indexes`,
//! `pg_index`, psql's `\di`).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use eddy_storage::{IndexDef, TableId};

/// An index as queries and catalogs see it.
#[derive(Debug)]
pub struct ServedIndex {
    pub name: String,
    pub relation: String,
    pub columns: Vec<String>,
    pub include: Vec<String>,
    /// The schema of the relation's stored rows, which `def`'s positions are in.
    pub schema: datafusion::arrow::datatypes::SchemaRef,
    pub def: Arc<IndexDef>,
}

/// Every index, by name.
#[derive(Debug, Default)]
pub struct IndexRegistry {
    indexes: RwLock<BTreeMap<String, Arc<ServedIndex>>>,
}

impl IndexRegistry {
    /// The indexes of the rows kept in table `base`.
    pub fn on_table(&self, base: TableId) -> Vec<Arc<ServedIndex>> {
        self.read()
            .values()
            .filter(|index| index.def.base == base)
            .cloned()
            .collect()
    }

    pub fn all(&self) -> Vec<Arc<ServedIndex>> {
        self.read().values().cloned().collect()
    }

    pub fn get(&self, name: &str) -> Option<Arc<ServedIndex>> {
        self.read().get(name).cloned()
    }

    pub(crate) fn insert(&self, index: ServedIndex) {
        self.indexes
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(index.name.clone(), Arc::new(index));
    }

    pub(crate) fn remove(&self, name: &str) {
        self.indexes
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    /// Forgets the indexes of a dropped relation (the engine drops their entries with it).
    pub fn remove_relation(&self, relation: &str) {
        self.indexes
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, index| index.relation != relation);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<ServedIndex>>> {
        self.indexes.read().unwrap_or_else(|e| e.into_inner())
    }
}
