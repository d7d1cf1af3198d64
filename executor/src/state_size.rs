//! Estimating how much memory an operator's state holds, for the views' state budget.
//!
//! Measuring every entry at every check would cost as much as the state is large, so
//! operators measure the entries they touch at a barrier (they encode those anyway) and
//! scale the mean by how many entries they hold.

/// Bytes an in-memory map entry costs beyond its key and value (hash or tree node, boxes).
pub const ENTRY_OVERHEAD: usize = 64;

/// A running mean of entry sizes, from the entries measured at barriers.
#[derive(Debug, Default, Clone, Copy)]
pub struct SizeEstimate {
    mean: f64,
}

impl SizeEstimate {
    /// Folds in `entries` entries measured at `bytes` together. Half the weight goes to the
    /// newest sample, so that a state whose entries grow is followed within a few barriers.
    pub fn observe(&mut self, bytes: usize, entries: usize) {
        if entries == 0 {
            return;
        }
        let sample = bytes as f64 / entries as f64;
        self.mean = if self.mean == 0.0 {
            sample
        } else {
            (self.mean + sample) / 2.0
        };
    }

    /// The estimated bytes of `entries` entries.
    pub fn total(&self, entries: usize) -> usize {
        (self.mean * entries as f64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_growing_entries_and_scales_by_count() {
        let mut estimate = SizeEstimate::default();
        assert_eq!(estimate.total(1000), 0);
        estimate.observe(1000, 10);
        assert_eq!(estimate.total(1000), 100_000);
        estimate.observe(0, 0);
        assert_eq!(estimate.total(1000), 100_000);
        // Entries now ten times larger: the estimate moves halfway at once.
        estimate.observe(10_000, 10);
        assert_eq!(estimate.total(1000), 550_000);
        estimate.observe(10_000, 10);
        estimate.observe(10_000, 10);
        assert!(estimate.total(1000) > 850_000);
    }
}
