//! A side's rows by the value of its eviction column, so that the rows a watermark passes
//! are found without reading the store.
//!
//! Rows are bucketed by time: a stream brings many rows of one time (a millisecond holds a
//! hundred Nexmark bids), and ordering them by (time, join key, row key) cost every insert
//! twenty byte comparisons of keys; a bucket costs one comparison of times per level.

use std::collections::BTreeMap;

/// A row's place in its side: join key and row key.
pub(super) type Place = (Box<[u8]>, Box<[u8]>);

#[derive(Default)]
pub(super) struct RowsByTime {
    buckets: BTreeMap<i64, Vec<Place>>,
    len: usize,
}

impl RowsByTime {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn insert(&mut self, time: i64, join_key: &[u8], row_key: &[u8]) {
        let place = (join_key.into(), row_key.into());
        self.buckets.entry(time).or_default().push(place);
        self.len += 1;
    }

    /// Forgets a row (one that left before the watermark passed it).
    pub fn remove(&mut self, time: i64, join_key: &[u8], row_key: &[u8]) {
        let Some(bucket) = self.buckets.get_mut(&time) else {
            return;
        };
        let found = bucket
            .iter()
            .position(|(j, r)| **j == *join_key && **r == *row_key);
        if let Some(at) = found {
            bucket.swap_remove(at);
            self.len -= 1;
            if bucket.is_empty() {
                self.buckets.remove(&time);
            }
        }
    }

    /// Takes out every row whose time is below `bound`, oldest first (rows of one time in the
    /// order they came).
    pub fn take_below(&mut self, bound: i64) -> Vec<Place> {
        let mut places = Vec::new();
        while let Some(bucket) = self.buckets.first_entry() {
            if *bucket.key() >= bound {
                break;
            }
            places.append(&mut bucket.remove());
        }
        self.len -= places.len();
        places
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(j: u8, r: u8) -> Place {
        (vec![j].into(), vec![r].into())
    }

    #[test]
    fn takes_rows_below_the_bound_oldest_first_and_forgets_removed_ones() {
        let mut rows = RowsByTime::default();
        rows.insert(20, &[1], &[1]);
        rows.insert(10, &[2], &[2]);
        rows.insert(10, &[1], &[3]);
        rows.insert(30, &[3], &[4]);
        rows.remove(10, &[2], &[2]);
        rows.remove(10, &[9], &[9]); // Not there: nothing changes.
        rows.remove(99, &[1], &[1]);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows.take_below(20), vec![place(1, 3)]);
        assert_eq!(rows.take_below(31), vec![place(1, 1), place(3, 4)]);
        assert_eq!(rows.len(), 0);
        assert!(rows.take_below(i64::MAX).is_empty());
    }
}
