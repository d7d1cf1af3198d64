//! One query's memory. Each query runs with a DataFusion memory pool of its own, of
//! `--query-memory-limit` bytes: sorts and aggregations spill to disk when they reach it, and
//! what cannot spill (a join's build side, the rows an INSERT collects) fails with 53200
//! instead of growing until the server is killed.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::dataframe::DataFrame;
use datafusion::execution::memory_pool::GreedyMemoryPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::{SendableRecordBatchStream, SessionState, SessionStateBuilder};
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use futures::StreamExt;

use crate::error::{Result, ServerError};

/// `--query-memory-limit`'s default.
pub const DEFAULT_QUERY_MEMORY_LIMIT: usize = 1 << 30;

/// The context's state with a memory pool of `limit` bytes for one query.
pub fn bounded_state(ctx: &SessionContext, limit: usize) -> Result<SessionState> {
    let state = ctx.state();
    let runtime = RuntimeEnvBuilder::from_runtime_env(state.runtime_env())
        .with_memory_pool(Arc::new(GreedyMemoryPool::new(limit)))
        .build_arc()?;
    let mut state = SessionStateBuilder::new_from_existing(state)
        .with_runtime_env(runtime)
        .build();
    // Every table the query reads is read from one snapshot.
    state
        .config_mut()
        .set_extension(Arc::new(crate::query::provider::QuerySnapshot::default()));
    Ok(state)
}

/// A query plan ready to run within `limit` bytes.
pub fn dataframe(ctx: &SessionContext, limit: usize, plan: LogicalPlan) -> Result<DataFrame> {
    Ok(DataFrame::new(bounded_state(ctx, limit)?, plan))
}

/// Collects a result that must be held whole (the rows of an INSERT ... SELECT), refusing
/// one larger than `limit` bytes.
pub async fn collect_within(
    mut stream: SendableRecordBatchStream,
    limit: usize,
) -> Result<Vec<RecordBatch>> {
    let mut batches = Vec::new();
    let mut held = 0usize;
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        held = held.saturating_add(batch.get_array_memory_size());
        if held > limit {
            return Err(out_of_memory(limit));
        }
        batches.push(batch);
    }
    Ok(batches)
}

/// 53200, naming the limit.
pub fn out_of_memory(limit: usize) -> ServerError {
    ServerError::new(
        "53200",
        format!(
            "out of memory: the statement needs more than the {} MiB a query may use \
             (--query-memory-limit)",
            limit >> 20
        ),
    )
}
