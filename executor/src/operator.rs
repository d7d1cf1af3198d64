//! The operator trait. The pipeline driver owns the loop; an operator only says what it does
//! with each kind of message, forwarding what it does not handle.

use eddy_storage::EpochBatch;

use crate::{Barrier, Message, Result, StreamChunk, Watermark};

pub trait Operator: Send {
    fn name(&self) -> &'static str;

    /// Handles a changelog batch, pushing what it produces to `out`.
    fn process_chunk(&mut self, chunk: StreamChunk, out: &mut Vec<Message>) -> Result<()>;

    /// Handles a watermark; by default forwards it.
    fn process_watermark(&mut self, watermark: Watermark, out: &mut Vec<Message>) -> Result<()> {
        out.push(Message::Watermark(watermark));
        Ok(())
    }

    /// Called when a barrier passes: emit what is due before it and write dirty state into
    /// the epoch's batch. The driver forwards the barrier itself.
    fn process_barrier(
        &mut self,
        _barrier: Barrier,
        _epoch: &mut EpochBatch,
        _out: &mut Vec<Message>,
    ) -> Result<()> {
        Ok(())
    }

    /// Rows of state held in memory (for `eddy_catalog.materialized_views`).
    fn state_rows(&self) -> usize {
        0
    }

    /// Windows still open in this operator's state.
    fn open_windows(&self) -> usize {
        0
    }

    /// Rows the operator's expressions failed on since the last call, kept for
    /// `eddy_catalog.view_errors` (operators that evaluate expressions row-wise set them aside
    /// instead of failing the epoch).
    fn take_failed_rows(&mut self) -> Vec<crate::operators::FailedRow> {
        Vec::new()
    }

    /// How many rows the operator failed on since it started.
    fn rows_failed(&self) -> u64 {
        0
    }
}
