//! The operator trait. The graph driver owns the loop and barrier alignment; an operator only
//! says what it does with each kind of message, forwarding what it does not handle.

use eddy_storage::EpochBatch;

use crate::stats::JoinSideStats;
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

    /// Handles a chunk from input `input` (0 or 1 for a two-input operator). One-input
    /// operators get every chunk through [`Operator::process_chunk`].
    fn process_input_chunk(
        &mut self,
        _input: usize,
        chunk: StreamChunk,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        self.process_chunk(chunk, out)
    }

    /// Handles a watermark from input `input`.
    fn process_input_watermark(
        &mut self,
        _input: usize,
        watermark: Watermark,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        self.process_watermark(watermark, out)
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

    /// The most input rows the operator takes at once, when it emits many rows per input row
    /// (a HOP window): the driver hands it a larger chunk in pieces and sends each piece's
    /// output on before the next, so one chunk's expansion is never held whole.
    fn max_input_rows(&self) -> Option<usize> {
        None
    }

    /// Rows of state held in memory (for `eddy_catalog.materialized_views`).
    fn state_rows(&self) -> usize {
        0
    }

    /// Memory the operator's state holds, estimated (checked against the view's state budget).
    fn state_bytes(&self) -> usize {
        0
    }

    /// Windows still open in this operator's state.
    fn open_windows(&self) -> usize {
        0
    }

    /// The ends of the windows still open, for operators whose windows every key shares (so
    /// that instances of one operator count a window once).
    fn open_window_ends(&self) -> Vec<i64> {
        Vec::new()
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
    /// A join's state, per side (for `eddy_catalog.join_state`).
    fn join_state(&self) -> Vec<JoinSideStats> {
        Vec::new()
    }

    /// The operator's state tables: rows in the store, cache, reads and writes.
    fn state_tables(&self) -> Vec<crate::state_table::StateTableStats> {
        Vec::new()
    }
}
