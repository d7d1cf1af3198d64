//! A query's rows in the order Postgres answers them where that order is not left to chance: a
//! `UNION ALL` at the top of a query is answered branch by branch, as Postgres' Append does
//! (clients and suites read `SELECT 1 UNION ALL SELECT 2` in that order without ORDER BY).

use std::sync::Arc;

use datafusion::dataframe::DataFrame;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::union::UnionExec;
use datafusion::physical_plan::{
    execute_stream, ExecutionPlan, ExecutionPlanProperties, SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};

use crate::error::Result;

/// Runs `frame`: a top-level `UNION ALL` one branch after the other (each branch still runs on
/// every core it is planned for), any other plan as DataFusion streams it.
pub async fn execute_in_order(frame: DataFrame) -> Result<SendableRecordBatchStream> {
    let task_ctx = Arc::new(frame.task_ctx());
    let plan = frame.create_physical_plan().await?;
    let Some(union) = plan.downcast_ref::<UnionExec>() else {
        return Ok(execute_stream(plan, task_ctx)?);
    };
    // One partition per branch: a branch is started only when the one before it has ended, so
    // none of them runs ahead and buffers.
    let branches: Vec<Arc<dyn ExecutionPlan>> = union
        .children()
        .into_iter()
        .map(
            |branch| match branch.output_partitioning().partition_count() {
                1 => branch.clone(),
                _ => {
                    Arc::new(CoalescePartitionsExec::new(branch.clone())) as Arc<dyn ExecutionPlan>
                }
            },
        )
        .collect();
    let rows = futures::stream::iter(branches)
        .then(move |branch| {
            let task_ctx = task_ctx.clone();
            async move { branch.execute(0, task_ctx) }
        })
        .try_flatten();
    Ok(Box::pin(RecordBatchStreamAdapter::new(plan.schema(), rows)))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::Int64Array;
    use datafusion::prelude::SessionContext;

    use super::*;

    #[tokio::test]
    async fn union_all_branches_come_in_order() {
        let ctx = SessionContext::new();
        let sql = (0..8)
            .map(|i| format!("SELECT {i}::BIGINT AS n FROM generate_series(1, 3)"))
            .collect::<Vec<_>>()
            .join(" UNION ALL ");
        for _ in 0..20 {
            let frame = ctx.sql(&sql).await.unwrap();
            let batches: Vec<_> = execute_in_order(frame)
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            let values: Vec<i64> = batches
                .iter()
                .flat_map(|b| {
                    let column = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                    column.values().to_vec()
                })
                .collect();
            let expected: Vec<i64> = (0..8).flat_map(|i| [i; 3]).collect();
            assert_eq!(values, expected);
        }
    }
}
