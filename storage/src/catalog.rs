//! The persistent catalog: each object's defining SQL and the table ids it owns.
//!
//! Objects are re-planned from their SQL on restart, so the catalog stores no plan formats
//! that could drift between versions.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde::{Deserialize, Serialize};

use crate::keys::{TableId, CATALOG_TABLE};
use crate::{EpochBatch, Result, Store};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectKind {
    Table,
    MaterializedView,
    Source,
    /// A plain view: a stored query with no rows of its own, expanded where it is read.
    View,
    /// A secondary index of a table or materialized view.
    Index,
    /// A sink: a table's or materialized view's changes written outside Eddy.
    Sink,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CatalogEntry {
    /// Creation order; objects are restored in this order, so dependencies come first.
    pub seq: u64,
    pub kind: ObjectKind,
    pub name: String,
    /// The statement that created the object, as the user wrote it.
    pub sql: String,
    /// The table ids the object owns: its rows first, then one per stateful operator.
    pub table_ids: Vec<TableId>,
    /// Set when a materialized view failed: it is no longer maintained, its state is gone,
    /// and reading it answers this error until it is dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<ViewFailure>,
    /// A view's operators' key layout when it was created (absent before Eddy recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_layout: Option<String>,
    /// How many instances a view's keyed operators run as (`--workers` when it was created;
    /// absent: one, as before Eddy ran views on workers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
    /// Which operators keep a view's state and how (absent: 0, as before Eddy recorded it): a
    /// view restored later runs on the operators it wrote its state with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_layout: Option<u32>,
    /// A source's message schema (Avro's JSON, a Protobuf descriptor set in hex) as read at
    /// CREATE: a restart decodes with it, not with whatever the schema file holds by then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_schema: Option<String>,
    /// Likewise, the schema of an upsert source's message keys, when they have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_key_schema: Option<String>,
    /// A materialized view's shape as created (absent before Eddy recorded it): a view whose
    /// query no longer plans at a restart keeps it, so that its indexes and sinks come back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_shape: Option<ViewShape>,
}

/// A materialized view's visible columns, the ones its stream key repeats, and whether it only
/// inserts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewShape {
    /// Each column's name, Arrow type (as Arrow displays it) and nullability.
    pub columns: Vec<(String, String, bool)>,
    pub key_columns: Option<Vec<usize>>,
    pub append_only: bool,
}

impl ViewShape {
    pub fn new(schema: &Schema, key_columns: Option<Vec<usize>>, append_only: bool) -> Self {
        let columns = schema
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().to_string(), f.is_nullable()))
            .collect();
        Self {
            columns,
            key_columns,
            append_only,
        }
    }

    /// The columns as a schema; None when a type no longer reads back.
    pub fn schema(&self) -> Option<SchemaRef> {
        let fields = self
            .columns
            .iter()
            .map(|(name, data_type, nullable)| {
                let data_type: DataType = data_type.parse().ok()?;
                Some(Field::new(name, data_type, *nullable))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Arc::new(Schema::new(fields)))
    }
}

/// Why a materialized view stopped, as reading it reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewFailure {
    /// The SQLSTATE a read of the view answers (53200 when its state passed its budget).
    pub sqlstate: String,
    pub message: String,
    /// The last epoch whose changes the view's rows hold.
    pub epoch: u64,
}

impl CatalogEntry {
    pub fn write(&self, batch: &mut EpochBatch) -> Result<()> {
        batch.put(
            CATALOG_TABLE,
            &self.seq.to_be_bytes(),
            serde_json::to_vec(self)?,
        );
        Ok(())
    }

    pub fn remove(&self, batch: &mut EpochBatch) {
        batch.delete(CATALOG_TABLE, &self.seq.to_be_bytes());
    }

    /// All entries, in creation order.
    pub fn load_all(store: &dyn Store) -> Result<Vec<CatalogEntry>> {
        store
            .scan_table(CATALOG_TABLE)?
            .into_iter()
            .map(|(_, value)| Ok(serde_json::from_slice(&value)?))
            .collect()
    }
}
