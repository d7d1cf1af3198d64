//! Eviction: the rows of a side that no future row of the other side can match leave its
//! state when the watermarks pass them (see the planner's `join_bounds` for the rules).

use eddy_planner::stream::Eviction;

use super::{JoinOperator, Shape};
use crate::{Message, Result, StreamChunk, Watermark};

impl JoinOperator {
    /// Evicts side `s`'s rows its eviction rule says are done with: below the other side's
    /// bound and, for a side that retracts, below its own watermark too.
    pub(super) fn evict_passed(&mut self, s: usize, out: &mut Vec<Message>) -> Result<()> {
        let Some(eviction) = self.plan.evictions[s] else {
            return Ok(());
        };
        let Some(other) = self.clocks.value(1 - s, eviction.clock) else {
            return Ok(());
        };
        let mut bound = other.saturating_add(eviction.shift);
        if let Some(own) = eviction.own {
            let Some(value) = self.clocks.value(s, own.clock) else {
                return Ok(());
            };
            bound = bound.min(value.saturating_add(own.shift));
        }
        self.evict(s, bound, out)
    }

    /// Evicts side `s`'s rows below `bound`. Eviction emits nothing, except that an outer
    /// side padded at eviction (EMIT ON WINDOW CLOSE) emits its never-matched rows then.
    fn evict(&mut self, s: usize, bound: i64, out: &mut Vec<Message>) -> Result<()> {
        let evicted = self.sides[s].evict_below(bound)?;
        let pads =
            matches!(self.shape, Shape::Pairs { pads } if pads[s]) && self.plan.pad_on_eviction;
        if !pads {
            return Ok(());
        }
        let unmatched: Vec<&[u8]> = evicted
            .iter()
            .filter(|e| e.degree == 0)
            .map(|e| e.row.as_ref())
            .collect();
        if unmatched.is_empty() {
            return Ok(());
        }
        let batch = self.sides[s].row_codec.decode(unmatched)?;
        let key_len = self.side_plan(s).key_fields.len();
        let rows = StreamChunk {
            ops: vec![crate::Op::Insert; batch.num_rows()],
            batch,
            key_len,
        };
        self.output.start(s, &rows);
        for row in 0..rows.len() {
            self.output.pad_this(true, row);
            self.output.flush_if_full(out)?;
        }
        self.output.emit(out)
    }
}

/// Whether a watermark of `input` moves side `side`'s eviction bound.
pub(super) fn bounded_by(
    eviction: &Eviction,
    side: usize,
    input: usize,
    watermark: &Watermark,
) -> bool {
    if side != input {
        eviction.clock == watermark.clock
    } else {
        eviction.own.is_some_and(|own| own.clock == watermark.clock)
    }
}
