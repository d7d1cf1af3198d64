//! A subscription's rows: the snapshot read from the store as of the epoch it starts at,
//! then each committed epoch's changes, as `eddy_epoch, [eddy_progressed,] eddy_diff,
//! columns...` batches in epoch order. A query over the relation (`SUBSCRIBE TO (SELECT
//! ...)`) is a chain of filters and projections, applied alike to the snapshot and to each
//! change (they commute with the diffs: a change of a row is a change of its projection).

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, RecordBatchOptions,
};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::cast::as_boolean_array;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_expr::PhysicalExpr;
use eddy_executor::subscribe::{EpochChanges, Subscription, Update};
use futures::StreamExt;

use crate::error::{Result, ServerError};

/// Arrow's errors as DataFusion's (which the server maps to a SQLSTATE).
fn arrow<T>(result: std::result::Result<T, datafusion::arrow::error::ArrowError>) -> Result<T> {
    Ok(result.map_err(datafusion::error::DataFusionError::from)?)
}

/// The epoch column: the epoch whose commit made the change (the snapshot's: the epoch it
/// was read at).
pub const EPOCH_COLUMN: &str = "eddy_epoch";
/// True on a progress row: every change up to `eddy_epoch` has been sent.
pub const PROGRESSED_COLUMN: &str = "eddy_progressed";
/// +1 for a row added, -1 for a row taken away (an update is a -1 then a +1).
pub const DIFF_COLUMN: &str = "eddy_diff";

/// One step of the query over the relation's rows.
pub enum Step {
    Filter(Arc<dyn PhysicalExpr>),
    Project(Vec<Arc<dyn PhysicalExpr>>, SchemaRef),
}

/// The relation's rows → the query's rows (each with its diff).
pub struct RowQuery {
    /// The relation's visible columns (a change carries its key columns after them).
    pub relation_schema: SchemaRef,
    pub steps: Vec<Step>,
    /// The query's columns.
    pub schema: SchemaRef,
}

impl RowQuery {
    /// Applies the steps to `batch` (the relation's columns) and its `diffs`.
    fn apply(
        &self,
        mut batch: RecordBatch,
        mut diffs: Int64Array,
    ) -> Result<(RecordBatch, Int64Array)> {
        for step in &self.steps {
            match step {
                Step::Filter(predicate) => {
                    let mask = predicate.evaluate(&batch)?.into_array(batch.num_rows())?;
                    let mask = as_boolean_array(&mask)?;
                    batch = arrow(filter_record_batch(&batch, mask))?;
                    let filtered = arrow(datafusion::arrow::compute::filter(&diffs, mask))?;
                    diffs = filtered
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .cloned()
                        .ok_or_else(|| ServerError::internal("a filtered diff column"))?;
                }
                Step::Project(exprs, schema) => {
                    let columns = exprs
                        .iter()
                        .map(|e| e.evaluate(&batch)?.into_array(batch.num_rows()))
                        .collect::<datafusion::error::Result<Vec<ArrayRef>>>()?;
                    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
                    batch = arrow(RecordBatch::try_new_with_options(
                        nullable(schema),
                        columns,
                        &options,
                    ))?;
                }
            }
        }
        Ok((batch, diffs))
    }
}

/// `schema` with every column nullable (progress rows have no values).
fn nullable(schema: &SchemaRef) -> SchemaRef {
    Arc::new(Schema::new_with_metadata(
        schema
            .fields()
            .iter()
            .map(|f| Arc::new(f.as_ref().clone().with_nullable(true)))
            .collect::<Vec<_>>(),
        schema.metadata().clone(),
    ))
}

/// The columns a subscription's rows have.
pub fn output_schema(query: &SchemaRef, progress: bool) -> SchemaRef {
    let mut fields = vec![Arc::new(Field::new(EPOCH_COLUMN, DataType::Int64, false))];
    if progress {
        fields.push(Arc::new(Field::new(
            PROGRESSED_COLUMN,
            DataType::Boolean,
            false,
        )));
    }
    fields.push(Arc::new(Field::new(DIFF_COLUMN, DataType::Int64, true)));
    fields.extend(nullable(query).fields().iter().cloned());
    Arc::new(Schema::new(fields))
}

/// A running subscription's rows, pulled batch by batch.
pub struct SubscriptionRows {
    subscription: Subscription,
    query: RowQuery,
    /// The relation's rows at the start epoch, while they are being read.
    snapshot: Option<SendableRecordBatchStream>,
    progress: bool,
    /// A progress row for the start epoch is due (after the snapshot, if any).
    start_progress: bool,
    schema: SchemaRef,
    /// Batches of the epoch being handed out.
    ready: std::collections::VecDeque<RecordBatch>,
}

impl SubscriptionRows {
    /// `resumed`: it resumes `AS OF` an epoch (whose progress the client has seen).
    pub fn new(
        subscription: Subscription,
        query: RowQuery,
        snapshot: Option<SendableRecordBatchStream>,
        progress: bool,
        resumed: bool,
    ) -> Self {
        let schema = output_schema(&query.schema, progress);
        Self {
            start_progress: progress && !resumed,
            subscription,
            query,
            snapshot,
            progress,
            schema,
            ready: Default::default(),
        }
    }

    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The next batch of rows, waiting for one. Never ends: it fails, or is dropped.
    /// Cancel-safe: a batch is handed out whole or kept for the next call.
    pub async fn next(&mut self) -> Result<RecordBatch> {
        loop {
            if let Some(batch) = self.ready.pop_front() {
                return Ok(batch);
            }
            if let Some(snapshot) = &mut self.snapshot {
                match snapshot.next().await {
                    Some(batch) => {
                        let batch = batch?;
                        let diffs = Int64Array::from(vec![1i64; batch.num_rows()]);
                        let epoch = self.subscription.start_epoch();
                        self.push_rows(epoch, batch, diffs)?;
                    }
                    None => self.snapshot = None,
                }
                continue;
            }
            if std::mem::take(&mut self.start_progress) {
                let epoch = self.subscription.start_epoch();
                self.ready.push_back(self.progress_row(epoch)?);
                continue;
            }
            match self.subscription.next().await? {
                Update::Changes(changes) => self.push_changes(&changes)?,
                Update::Progress(epoch) if self.progress => {
                    self.ready.push_back(self.progress_row(epoch)?)
                }
                Update::Progress(_) => {}
            }
        }
    }

    fn push_changes(&mut self, changes: &EpochChanges) -> Result<()> {
        let visible = self.query.relation_schema.fields().len();
        for chunk in &changes.chunks {
            let columns: Vec<ArrayRef> = chunk.batch.columns()[..visible].to_vec();
            let options = RecordBatchOptions::new().with_row_count(Some(chunk.ops.len()));
            let batch = arrow(RecordBatch::try_new_with_options(
                nullable(&self.query.relation_schema),
                columns,
                &options,
            ))?;
            let diffs: Int64Array = chunk
                .ops
                .iter()
                .map(|op| Some(if op.is_insert() { 1 } else { -1 }))
                .collect();
            self.push_rows(changes.epoch, batch, diffs)?;
        }
        if self.progress {
            self.ready.push_back(self.progress_row(changes.epoch)?);
        }
        Ok(())
    }

    /// The relation's `batch` with its `diffs`, through the query, as rows of `epoch`.
    fn push_rows(&mut self, epoch: u64, batch: RecordBatch, diffs: Int64Array) -> Result<()> {
        let (batch, diffs) = self.query.apply(batch, diffs)?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let rows = batch.num_rows();
        let mut columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![epoch as i64; rows]))];
        if self.progress {
            columns.push(Arc::new(BooleanArray::from(vec![false; rows])));
        }
        columns.push(Arc::new(diffs));
        columns.extend(batch.columns().iter().cloned());
        self.ready
            .push_back(arrow(RecordBatch::try_new(self.schema.clone(), columns))?);
        Ok(())
    }

    /// `epoch, true, NULL, NULL...`.
    fn progress_row(&self, epoch: u64) -> Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![epoch as i64])),
            Arc::new(BooleanArray::from(vec![true])),
        ];
        for field in self.schema.fields().iter().skip(2) {
            columns.push(datafusion::arrow::array::new_null_array(
                field.data_type(),
                1,
            ));
        }
        arrow(RecordBatch::try_new(self.schema.clone(), columns))
    }
}
