//! An open session's state (what the session aggregate keeps per partition and start) and the
//! changes that bring the view up to date for it.

use datafusion::common::ScalarValue;

use super::{evaluate_all, Group};
use crate::state_table::{StateValue, AUX_PREFIX};
use crate::{Op, Result};

/// A session's identity: partition key and start.
pub(super) type SessionId = (Vec<u8>, i64);

/// A row the operator emits: partition key, start, end, op, aggregate values.
pub(super) type SessionRow = (Vec<u8>, i64, i64, Op, Vec<ScalarValue>);

/// One open session of one partition (its start is the map key it is stored under).
pub(super) struct Session {
    /// Accumulators, row count and `window_end` (the session's end).
    pub(super) group: Group,
    /// Rows the view holds now that this session's next output replaces: start, end, values.
    pub(super) replaces: Vec<(i64, i64, Vec<ScalarValue>)>,
}

impl Session {
    pub(super) fn end(&self) -> i64 {
        self.group.window_end.unwrap_or(i64::MIN)
    }

    /// The rows this session's next output replaces, its own last output among them (a
    /// session read back from the store keeps only that: it was emitted before it was stored).
    pub(super) fn take_replaces(&mut self, start: i64) -> Vec<(i64, i64, Vec<ScalarValue>)> {
        if self.replaces.is_empty() {
            if let Some(values) = &self.group.last_output {
                return vec![(start, self.end(), values.clone())];
            }
        }
        std::mem::take(&mut self.replaces)
    }
}

impl StateValue for Session {
    fn memory(&self) -> usize {
        let replaces: usize = (self.replaces.iter())
            .map(|(_, _, values)| 16 + values.iter().map(ScalarValue::size).sum::<usize>())
            .sum();
        self.group.memory() + replaces
    }

    fn stored_len(&self) -> usize {
        self.group.stored
    }

    fn stored_as(&mut self, len: usize) {
        self.group.stored = len;
    }
}

/// Big-endian with the sign flipped: bytes sort like the numbers.
pub(super) fn time_bytes(time: i64) -> [u8; 8] {
    ((time as u64) ^ (1 << 63)).to_be_bytes()
}

pub(super) fn time_from(bytes: &[u8]) -> Option<i64> {
    Some((u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?) ^ (1 << 63)) as i64)
}

/// The auxiliary row indexing an open session by end.
pub(super) fn end_key(end: i64, start: i64, partition: &[u8]) -> Vec<u8> {
    [
        &AUX_PREFIX[..],
        &time_bytes(end),
        &time_bytes(start),
        partition,
    ]
    .concat()
}

/// The changelog rows that bring the view up to date for `session`, starting at `start`.
pub(super) fn session_changes(
    partition: &[u8],
    start: i64,
    session: &mut Session,
    out: &mut Vec<SessionRow>,
) -> Result<()> {
    let end = session.end();
    let replaces = session.take_replaces(start);
    if session.group.row_count == 0 {
        // Only rows the WHERE clause dropped: the session has no row in the view.
        for (old_start, old_end, old) in replaces {
            out.push((partition.to_vec(), old_start, old_end, Op::Delete, old));
        }
        return Ok(());
    }
    let values = evaluate_all(&mut session.group)?;
    let mut same_bounds = None;
    for (old_start, old_end, old) in replaces {
        if (old_start, old_end) == (start, end) {
            same_bounds = Some(old);
        } else {
            out.push((partition.to_vec(), old_start, old_end, Op::Delete, old));
        }
    }
    match same_bounds {
        Some(old) if old == values => {}
        Some(old) => {
            out.push((partition.to_vec(), start, end, Op::UpdateDelete, old));
            out.push((
                partition.to_vec(),
                start,
                end,
                Op::UpdateInsert,
                values.clone(),
            ));
        }
        None => out.push((partition.to_vec(), start, end, Op::Insert, values.clone())),
    }
    // What the view now holds is the last output (see `Session::take_replaces`).
    session.group.last_output = Some(values);
    Ok(())
}
