//! Above a projection computing `PROCTIME()`: rows pass unchanged; at every barrier the clock
//! bounding the PROCTIME() columns advances to the wall clock. The projection reads the same
//! never-decreasing clock for each chunk, so no later row is behind the watermark emitted here,
//! and windows over processing time close as the wall clock passes their end.

use eddy_planner::wall_clock::wall_clock_micros;
use eddy_storage::EpochBatch;

use crate::{Barrier, Message, Operator, Result, StreamChunk, Watermark};

pub struct ProctimeOperator {
    clock: usize,
}

impl ProctimeOperator {
    pub fn new(clock: usize) -> Self {
        Self { clock }
    }
}

impl Operator for ProctimeOperator {
    fn name(&self) -> &'static str {
        "Proctime"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        out.push(Message::Chunk(chunk));
        Ok(())
    }

    fn process_barrier(
        &mut self,
        _barrier: Barrier,
        _epoch: &mut EpochBatch,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        out.push(Message::Watermark(Watermark::at(
            self.clock,
            wall_clock_micros(),
        )));
        Ok(())
    }
}
