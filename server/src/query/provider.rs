//! Reading committed rows: a DataFusion `TableProvider` over one table id's key range.
//!
//! A query reads every table and view from one snapshot of the store (see [`QuerySnapshot`]),
//! in chunks, narrowed to the key ranges its filters allow (see `key_ranges`).

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use eddy_storage::{IndexDef, KeyRange, RowCodec, Snapshot, Store, TableId};

use crate::query::key_ranges::{key_ranges, KeyLayout};
use crate::query::scan_admission::ScanAdmission;
use crate::query::stored_scan::{projected_schema, Decode, EntryColumn, ScanSpec, StoredScanExec};

/// Tells whether a view has failed (a read then answers its error).
pub type FailureCheck = Arc<dyn Fn() -> Option<eddy_storage::ViewFailure> + Send + Sync>;

/// The one snapshot every table a query reads is read from, taken at its first scan. It is a
/// session-config extension of the query's own state.
#[derive(Default)]
pub struct QuerySnapshot {
    snapshot: OnceLock<Arc<Snapshot>>,
}

impl QuerySnapshot {
    /// Reads from `snapshot` (a subscription's, taken at the commit it starts at).
    pub fn fixed(snapshot: Arc<Snapshot>) -> Self {
        Self {
            snapshot: OnceLock::from(snapshot),
        }
    }

    fn get(&self, store: &dyn Store) -> Result<Arc<Snapshot>> {
        if let Some(snapshot) = self.snapshot.get() {
            return Ok(snapshot.clone());
        }
        let snapshot = Arc::new(store.snapshot().map_err(crate::error::ServerError::from)?);
        Ok(self.snapshot.get_or_init(|| snapshot).clone())
    }
}

pub struct StoredTable {
    store: Arc<dyn Store>,
    table_id: TableId,
    codec: Arc<RowCodec>,
    /// How rows are keyed, when the key is made of visible columns.
    key: Option<(KeyLayout, Arc<RowCodec>)>,
    table_type: TableType,
    /// The server's indexes, of which those on these rows serve reads.
    indexes: Option<Arc<crate::query::indexes::IndexRegistry>>,
    /// For a view: its name and how to learn whether it failed.
    failure: Option<(String, FailureCheck)>,
    /// Where full scans wait for their turn.
    admission: Option<Arc<ScanAdmission>>,
}

impl std::fmt::Debug for StoredTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoredTable({})", self.table_id)
    }
}

impl StoredTable {
    pub fn new(
        store: Arc<dyn Store>,
        table_id: TableId,
        schema: SchemaRef,
        table_type: TableType,
    ) -> Result<Self> {
        Ok(Self {
            store,
            table_id,
            codec: Arc::new(
                RowCodec::new(schema).map_err(|e| DataFusionError::External(Box::new(e)))?,
            ),
            key: None,
            table_type,
            indexes: None,
            failure: None,
            admission: None,
        })
    }

    /// Says how rows are keyed: `fields` (the stored key) repeat the visible `columns`.
    pub fn with_key(
        mut self,
        fields: Vec<datafusion::arrow::datatypes::Field>,
        columns: Vec<usize>,
    ) -> Result<Self> {
        if let Some(layout) = KeyLayout::new(self.codec.schema(), fields, columns) {
            let codec = RowCodec::new(Arc::new(datafusion::arrow::datatypes::Schema::new(
                layout.fields.clone(),
            )))
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
            self.key = Some((layout, Arc::new(codec)));
        }
        Ok(self)
    }

    /// The table id the rows are kept under.
    pub fn table_id(&self) -> TableId {
        self.table_id
    }

    /// Lets reads use the indexes of these rows.
    pub fn with_indexes(mut self, indexes: Arc<crate::query::indexes::IndexRegistry>) -> Self {
        self.indexes = Some(indexes);
        self
    }

    /// Makes full scans of these rows wait for a permit of `admission`.
    pub fn with_admission(mut self, admission: Arc<ScanAdmission>) -> Self {
        self.admission = Some(admission);
        self
    }

    /// Makes reads of view `name` answer its failure once `check` reports one.
    pub fn with_failure_check(mut self, name: String, check: FailureCheck) -> Self {
        self.failure = Some((name, check));
        self
    }

    /// An index whose leading columns the filters narrow, with its ranges; of several, the
    /// one that reads the fewest ranges.
    fn index_for(&self, filters: &[Expr]) -> Option<(Arc<IndexDef>, Vec<KeyRange>)> {
        let registry = self.indexes.as_ref()?;
        let schema = self.schema();
        registry
            .on_table(self.table_id)
            .into_iter()
            .filter_map(|index| {
                let fields = index
                    .def
                    .key_schema()
                    .fields()
                    .iter()
                    .map(|f| f.as_ref().clone());
                let layout = KeyLayout::new(&schema, fields.collect(), index.def.columns.clone())?;
                let ranges = key_ranges(filters, &schema, &layout)?;
                Some((index.def.clone(), ranges))
            })
            .min_by_key(|(_, ranges)| ranges.len())
    }

    fn decode_for(&self, projection: Option<&Vec<usize>>) -> Decode {
        let Some(columns) = projection else {
            return Decode::Rows(None);
        };
        if columns.is_empty() {
            return Decode::Nothing;
        }
        if let Some((layout, _)) = &self.key {
            let fields: Option<Vec<usize>> = columns
                .iter()
                .map(|c| layout.columns.iter().position(|k| k == c))
                .collect();
            if let Some(fields) = fields {
                return Decode::Keys(fields);
            }
        }
        Decode::Rows(Some(columns.clone()))
    }
}

#[async_trait]
impl TableProvider for StoredTable {
    fn schema(&self) -> SchemaRef {
        self.codec.schema().clone()
    }

    fn table_type(&self) -> TableType {
        self.table_type
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // Filters narrow the key ranges read and are applied again on the rows.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if let Some((name, check)) = &self.failure {
            if let Some(failure) = check() {
                return Err(crate::error::view_failed(name, &failure).into());
            }
        }
        let snapshot = match state.config().get_extension::<QuerySnapshot>() {
            Some(query) => query.get(self.store.as_ref())?,
            None => Arc::new(
                self.store
                    .snapshot()
                    .map_err(crate::error::ServerError::from)?,
            ),
        };
        let schema = self.schema();
        let mut ranges = self
            .key
            .as_ref()
            .and_then(|(layout, _)| key_ranges(filters, &schema, layout));
        let mut decode = self.decode_for(projection);
        let mut index = None;
        if ranges.is_none() {
            if let Some((found, index_ranges)) = self.index_for(filters) {
                if let (Some(columns), Decode::Rows(_)) = (projection, &decode) {
                    // An entry holds the indexed and included columns and the base row's key:
                    // when those are all the query reads, the base rows are not read at all.
                    let stored = found.stored_columns();
                    let key_columns = self.key.as_ref().map(|(layout, _)| &layout.columns);
                    let included: Option<Vec<EntryColumn>> = columns
                        .iter()
                        .map(|c| {
                            stored
                                .iter()
                                .position(|i| i == c)
                                .map(EntryColumn::Stored)
                                .or_else(|| {
                                    key_columns?
                                        .iter()
                                        .position(|k| k == c)
                                        .map(EntryColumn::BaseKey)
                                })
                        })
                        .collect();
                    if let Some(included) = included {
                        decode = Decode::Included(included);
                    }
                }
                ranges = Some(index_ranges);
                index = Some(found);
            }
        }
        // Narrowed reads (a key or index range, a LIMIT) end soon: only full scans queue.
        let admission = match (&ranges, limit) {
            (None, None) => self.admission.clone(),
            _ => None,
        };
        Ok(Arc::new(StoredScanExec::new(ScanSpec {
            store: self.store.clone(),
            snapshot,
            table: self.table_id,
            row_codec: self.codec.clone(),
            key_codec: self.key.as_ref().map(|(_, codec)| codec.clone()),
            ranges,
            index,
            decode,
            limit,
            admission,
            schema: projected_schema(&schema, projection)?,
        })))
    }
}
