//! A statement's work is CPU between its awaits (planning, optimizing, folding constants,
//! computing a batch) and can take seconds. On a runtime worker that held up every other
//! connection: tokio reads sockets only from a parked worker, and a worker woken for one task
//! wakes no other, so while it ran the statement nobody read the other clients (a `SELECT
//! length(repeat('x', 900000000))` kept another client's `SELECT 1` waiting 1.8 s). Each poll
//! of a statement's future and of its result stream runs as a blocking section
//! (`block_in_place`): the worker hands its place in the runtime to another thread meanwhile.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::Result;
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream};
use futures::Stream;
use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `poll` as a blocking section where the runtime allows it (a multi-threaded runtime's
/// worker); directly elsewhere (a single-threaded runtime, as in tests).
fn blocking<T>(poll: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(poll)
        }
        _ => poll(),
    }
}

/// A future whose every poll is a blocking section.
pub struct BlockingPolls<F> {
    inner: Pin<Box<F>>,
}

pub fn future<F: Future>(inner: F) -> BlockingPolls<F> {
    BlockingPolls {
        inner: Box::pin(inner),
    }
}

impl<F: Future> Future for BlockingPolls<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let inner = self.inner.as_mut();
        blocking(|| inner.poll(cx))
    }
}

/// A query's batches, each computed in a blocking section.
pub struct BlockingStream {
    inner: SendableRecordBatchStream,
}

pub fn stream(inner: SendableRecordBatchStream) -> SendableRecordBatchStream {
    Box::pin(BlockingStream { inner })
}

impl Stream for BlockingStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let inner = self.inner.as_mut();
        blocking(|| inner.poll_next(cx))
    }
}

impl RecordBatchStream for BlockingStream {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }
}
