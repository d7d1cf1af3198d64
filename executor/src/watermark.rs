//! Event-time watermarks per split (Kafka partition, file, generator, or DML).
//!
//! Each split keeps the largest event time it has delivered; the source's watermark is the
//! minimum over the splits that are not idle, minus the declared delay, and never goes back.
//! A row is late when its event time is below the watermark at the moment it arrives; the
//! watermark advances row by row in arrival order, so batch boundaries never change an answer.

use std::collections::BTreeMap;

use datafusion::arrow::array::Int64Array;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SplitClock {
    /// Largest event time delivered by the split, in microseconds.
    max_event_time: Option<i64>,
    /// Idle splits do not hold the watermark back (not persisted: a restart starts active).
    #[serde(skip)]
    idle: bool,
}

/// The watermark of one source over its splits.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WatermarkTracker {
    splits: BTreeMap<String, SplitClock>,
    /// The source's watermark in microseconds; only grows.
    current: Option<i64>,
}

/// A row that arrived below the watermark: its index, event time and the watermark then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LateArrival {
    pub row: usize,
    pub event_time: i64,
    pub watermark: i64,
}

impl WatermarkTracker {
    pub fn current(&self) -> Option<i64> {
        self.current
    }

    /// Declares a split before it delivers data: until it does (or goes idle) it holds the
    /// watermark back, so a slow partition cannot make another's rows look late.
    pub fn register_split(&mut self, split: &str) {
        self.splits.entry(split.to_string()).or_default();
    }

    pub fn splits(&self) -> impl Iterator<Item = (&str, Option<i64>, bool)> {
        self.splits
            .iter()
            .map(|(name, clock)| (name.as_str(), clock.max_event_time, clock.idle))
    }

    /// Whether the source has splits and every one is idle.
    pub fn all_idle(&self) -> bool {
        !self.splits.is_empty() && self.splits.values().all(|c| c.idle)
    }

    /// Marks a split idle or active. Returns the new watermark when this advanced it.
    pub fn set_idle(&mut self, split: &str, idle: bool, delay: i64) -> Option<i64> {
        let clock = self.splits.entry(split.to_string()).or_default();
        if clock.idle == idle {
            return None;
        }
        clock.idle = idle;
        let active = self.splits.values().any(|c| !c.idle);
        let candidate = if active {
            self.combined(None, delay)
        } else {
            // Every split is quiet: nothing holds the watermark back any more.
            self.splits
                .values()
                .filter_map(|c| c.max_event_time)
                .max()
                .map(|m| m.saturating_sub(delay))
        };
        self.advance_to(candidate)
    }

    /// Judges the event times of one batch from `split`, in arrival order, advancing the
    /// watermark as it goes. Returns the late rows. NULL event times are never late.
    pub fn observe(&mut self, split: &str, times: &Int64Array, delay: i64) -> Vec<LateArrival> {
        let clock = self.splits.entry(split.to_string()).or_default();
        clock.idle = false;
        let mut run_max = clock.max_event_time;
        // Other splits do not move within this batch: their bound is computed once.
        let others = self.combined(Some(split), delay);
        let mut current = self.current.unwrap_or(i64::MIN);
        let mut late = Vec::new();
        // A running maximum is a scan with a carried value: one pass over an i64 column.
        for (row, time) in times.iter().enumerate() {
            let Some(time) = time else { continue };
            if time < current {
                late.push(LateArrival {
                    row,
                    event_time: time,
                    watermark: current,
                });
                continue;
            }
            let split_max = run_max.map_or(time, |m| m.max(time));
            run_max = Some(split_max);
            let own = split_max.saturating_sub(delay);
            let candidate = others.map_or(own, |o| o.min(own));
            current = current.max(candidate);
        }
        if let Some(clock) = self.splits.get_mut(split) {
            clock.max_event_time = run_max;
        }
        if current != i64::MIN {
            self.current = Some(current);
        }
        late
    }

    /// Minimum over active splits (other than `except`) of `max - delay`; `None` when no
    /// active split constrains it. A split with no data yet constrains it to nothing.
    fn combined(&self, except: Option<&str>, delay: i64) -> Option<i64> {
        self.splits
            .iter()
            .filter(|(name, clock)| Some(name.as_str()) != except && !clock.idle)
            .map(|(_, clock)| {
                clock
                    .max_event_time
                    .map_or(i64::MIN, |m| m.saturating_sub(delay))
            })
            .min()
    }

    fn advance_to(&mut self, candidate: Option<i64>) -> Option<i64> {
        let candidate = candidate.filter(|c| *c != i64::MIN)?;
        if self.current.is_some_and(|c| c >= candidate) {
            return None;
        }
        self.current = Some(candidate);
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(values: &[i64]) -> Int64Array {
        Int64Array::from(values.to_vec())
    }

    #[test]
    fn a_row_is_judged_only_against_rows_before_it() {
        let mut tracker = WatermarkTracker::default();
        let late = tracker.observe("", &times(&[14, 20, 14, 15]), 5);
        assert_eq!(
            late,
            vec![LateArrival {
                row: 2,
                event_time: 14,
                watermark: 15
            }]
        );
        assert_eq!(tracker.current(), Some(15));
    }

    #[test]
    fn the_slowest_active_partition_holds_the_watermark() {
        let mut tracker = WatermarkTracker::default();
        tracker.register_split("0");
        tracker.register_split("1");
        // Partition 1 has delivered nothing yet: no watermark, nothing late.
        assert!(tracker.observe("0", &times(&[100, 200]), 10).is_empty());
        assert_eq!(tracker.current(), None);
        tracker.observe("1", &times(&[50]), 10);
        assert_eq!(tracker.current(), Some(40));
        // A row of partition 1 at 45 is not late, though partition 0 is far ahead.
        assert!(tracker.observe("1", &times(&[45]), 10).is_empty());
        // Once partition 1 is idle, partition 0 alone sets the watermark.
        assert_eq!(tracker.set_idle("1", true, 10), Some(190));
        // Partition 1 rejoins; its old rows are now late, and the watermark never goes back.
        let late = tracker.observe("1", &times(&[60, 195]), 10);
        assert_eq!(late.len(), 1);
        assert_eq!(tracker.current(), Some(190));
    }

    #[test]
    fn when_every_split_is_quiet_the_largest_event_time_sets_it() {
        let mut tracker = WatermarkTracker::default();
        tracker.register_split("0");
        tracker.register_split("1");
        tracker.observe("0", &times(&[100]), 10);
        tracker.observe("1", &times(&[300]), 10);
        assert_eq!(tracker.current(), Some(90));
        // Partition 1 goes quiet first: partition 0 still holds the watermark.
        assert_eq!(tracker.set_idle("1", true, 10), None);
        // Then partition 0 too: nothing holds it back.
        assert_eq!(tracker.set_idle("0", true, 10), Some(290));
    }
}
