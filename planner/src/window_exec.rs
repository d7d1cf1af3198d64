//! TUMBLE, HOP and CUMULATE in a batch query: the input's rows assigned to their windows as they
//! stream, a slice of rows at a time, so that a row in many windows never builds more than one
//! output batch at once. Each output batch is accounted in the query's memory pool
//! (`--query-memory-limit`): a batch the pool cannot hold fails the query with DataFusion's
//! resources-exhausted error instead of growing the server.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::Result;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    ReplaceChildrenOptions,
};
use futures::StreamExt;

use crate::window::{apply_windows, WindowSpec};

/// Assigns the rows of `input` to the windows of `spec`; the output is the input's columns,
/// `window_start` and `window_end`, then cut to `projection`.
#[derive(Debug)]
pub struct WindowExec {
    input: Arc<dyn ExecutionPlan>,
    time_column: usize,
    spec: WindowSpec,
    /// The input's columns and the two window columns.
    windowed: SchemaRef,
    projection: Option<Vec<usize>>,
    properties: Arc<PlanProperties>,
}

impl WindowExec {
    pub fn try_new(
        input: Arc<dyn ExecutionPlan>,
        time_column: usize,
        spec: WindowSpec,
        windowed: SchemaRef,
        projection: Option<Vec<usize>>,
    ) -> Result<Self> {
        let output = match &projection {
            Some(columns) => Arc::new(windowed.project(columns)?),
            None => windowed.clone(),
        };
        let partitions = input.properties().output_partitioning().partition_count();
        let properties = PlanProperties::new(
            EquivalenceProperties::new(output),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(Self {
            input,
            time_column,
            spec,
            windowed,
            projection,
            properties: Arc::new(properties),
        })
    }
}

impl DisplayAs for WindowExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "WindowExec: {}", self.spec)
    }
}

impl ExecutionPlan for WindowExec {
    fn name(&self) -> &str {
        "WindowExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(Self::try_new(
            children.swap_remove(0),
            self.time_column,
            self.spec,
            self.windowed.clone(),
            self.projection.clone(),
        )?))
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(
                datafusion::physical_plan::ChildrenPropertiesMode::Recompute,
            ),
        )
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context.clone())?;
        let reservation =
            MemoryConsumer::new(format!("WindowExec[{partition}]")).register(context.memory_pool());
        // Input rows per output batch: about a batch of output rows, and at least one row.
        let per_row = usize::try_from(self.spec.windows_per_row()).unwrap_or(usize::MAX);
        let slice_rows = (context.session_config().batch_size() / per_row.max(1)).max(1);
        let state = Expansion {
            input,
            pending: None,
            slice_rows,
            time_column: self.time_column,
            spec: self.spec,
            windowed: self.windowed.clone(),
            projection: self.projection.clone(),
            reservation,
        };
        let output = futures::stream::unfold(Some(state), |state| async move {
            let mut state = state?;
            match state.next_batch().await {
                Ok(Some(batch)) => Some((Ok(batch), Some(state))),
                Ok(None) => None,
                Err(error) => Some((Err(error), None)),
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema(),
            output,
        )))
    }
}

/// The state of one partition's expansion.
struct Expansion {
    input: SendableRecordBatchStream,
    /// An input batch and the first of its rows not expanded yet.
    pending: Option<(RecordBatch, usize)>,
    slice_rows: usize,
    time_column: usize,
    spec: WindowSpec,
    windowed: SchemaRef,
    projection: Option<Vec<usize>>,
    /// The output batch being handed on.
    reservation: MemoryReservation,
}

impl Expansion {
    /// The next non-empty output batch, or `None` at the end of the input.
    async fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            let (batch, start) = match self.pending.take() {
                Some(pending) => pending,
                None => match self.input.next().await {
                    Some(batch) => (batch?, 0),
                    None => {
                        self.reservation.free();
                        return Ok(None);
                    }
                },
            };
            let length = self.slice_rows.min(batch.num_rows() - start);
            let slice = batch.slice(start, length);
            if start + length < batch.num_rows() {
                self.pending = Some((batch, start + length));
            }
            let (columns, _) = apply_windows(slice.columns(), self.time_column, &self.spec)?;
            let windowed = RecordBatch::try_new(self.windowed.clone(), columns)?;
            let output = match &self.projection {
                Some(columns) => windowed.project(columns)?,
                None => windowed,
            };
            if output.num_rows() == 0 {
                continue;
            }
            self.reservation
                .try_resize(output.get_array_memory_size())?;
            return Ok(Some(output));
        }
    }
}
