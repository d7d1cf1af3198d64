//! Reading committed rows: a DataFusion `TableProvider` over one table id's key range.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use eddy_storage::{RowCodec, Store, TableId};

/// Rows decoded per batch when scanning.
const SCAN_BATCH_ROWS: usize = 8192;

/// Tells whether a view has failed (a read then answers its error).
pub type FailureCheck = Arc<dyn Fn() -> Option<eddy_storage::ViewFailure> + Send + Sync>;

pub struct StoredTable {
    store: Arc<dyn Store>,
    table_id: TableId,
    codec: RowCodec,
    table_type: TableType,
    /// For a view: its name and how to learn whether it failed.
    failure: Option<(String, FailureCheck)>,
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
            codec: RowCodec::new(schema).map_err(|e| DataFusionError::External(Box::new(e)))?,
            table_type,
            failure: None,
        })
    }

    /// Makes reads of view `name` answer its failure once `check` reports one.
    pub fn with_failure_check(mut self, name: String, check: FailureCheck) -> Self {
        self.failure = Some((name, check));
        self
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

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if let Some((name, check)) = &self.failure {
            if let Some(failure) = check() {
                return Err(crate::error::view_failed(name, &failure).into());
            }
        }
        let external = |e: eddy_storage::StorageError| DataFusionError::External(Box::new(e));
        let rows = self.store.scan_table(self.table_id).map_err(external)?;
        let batches = rows
            .chunks(SCAN_BATCH_ROWS)
            .map(|chunk| {
                self.codec
                    .decode(chunk.iter().map(|(_, v)| v.as_slice()))
                    .map_err(external)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(MemorySourceConfig::try_new_exec(
            &[batches],
            self.schema(),
            projection.cloned(),
        )?)
    }
}
