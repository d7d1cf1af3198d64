//! A query's rows as they go to the client: batches are pulled from DataFusion one at a time
//! and encoded as they come, so that a large result is never held whole in memory. The first
//! error (a value the wire encoding cannot carry, a failing expression, the statement timeout)
//! ends the result.

use std::time::Instant;

use datafusion::arrow::array::RecordBatch;
use datafusion::execution::SendableRecordBatchStream;
use futures::{Stream, StreamExt};
use pgwire::error::PgWireResult;
use pgwire::messages::data::DataRow;

use crate::error::ServerError;

/// The DataRows of a result stream, each batch encoded by `encode` (which stops at a row that
/// fails), ending at the first error or at `deadline`.
pub fn data_rows<E>(
    batches: SendableRecordBatchStream,
    deadline: Option<Instant>,
    encode: E,
) -> impl Stream<Item = PgWireResult<DataRow>> + Send + 'static
where
    E: Fn(RecordBatch) -> Vec<PgWireResult<DataRow>> + Send + 'static,
{
    let batches = futures::stream::unfold(
        (batches, false),
        move |(mut batches, finished)| async move {
            if finished {
                return None;
            }
            let next = match deadline {
                None => batches.next().await,
                Some(deadline) => {
                    match tokio::time::timeout_at(deadline.into(), batches.next()).await {
                        Ok(next) => next,
                        Err(_) => Some(Err(datafusion::error::DataFusionError::External(
                            Box::new(StatementTimeout),
                        ))),
                    }
                }
            };
            let failed = !matches!(next, Some(Ok(_)));
            next.map(|batch| (batch, (batches, failed)))
        },
    );
    batches.flat_map(move |batch| {
        let rows = match batch {
            Ok(batch) => encode(batch),
            Err(error) => vec![Err(query_error(error).into_pgwire())],
        };
        futures::stream::iter(rows)
    })
}

#[derive(Debug)]
struct StatementTimeout;

impl std::fmt::Display for StatementTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("canceling statement due to statement timeout")
    }
}

impl std::error::Error for StatementTimeout {}

fn query_error(error: datafusion::error::DataFusionError) -> ServerError {
    if let datafusion::error::DataFusionError::External(inner) = &error {
        if inner.is::<StatementTimeout>() || inner.is::<crate::query::activity::Cancelled>() {
            return ServerError::new("57014", inner.to_string());
        }
    }
    ServerError::from(error)
}
