//! Evicting a state table's clean groups when the node's cache is over its limit.

use std::cmp::Ordering;

use hashbrown::HashMap;

use super::{KeyedStateTable, StateValue};

impl<V: StateValue> KeyedStateTable<V> {
    /// Evicts clean groups, least recently used first, until the node's cache holds at most
    /// `target` bytes or no clean group is left.
    ///
    /// Two passes over the groups and no sort of them (a table may cache millions, and this
    /// runs within a chunk): the first sums clean groups' memory by when they were last used,
    /// which finds the cut-off; the second evicts every clean group used before it, and
    /// those used at it until enough is freed.
    pub(super) fn evict_clean(&mut self, target: usize) {
        let Some(excess) = self.cache.used().checked_sub(target).filter(|&e| e > 0) else {
            return;
        };
        let mut by_tick: HashMap<u64, usize> = HashMap::new();
        for group in self.groups.values().filter(|g| !g.dirty) {
            *by_tick.entry(group.last_used).or_default() += group.memory;
        }
        let mut ticks: Vec<(u64, usize)> = by_tick.into_iter().collect();
        ticks.sort_unstable();
        let mut cut = u64::MAX;
        let mut older = 0;
        for (tick, memory) in ticks {
            if older + memory >= excess {
                cut = tick;
                break;
            }
            older += memory;
        }
        // Groups before the cut hold less than the excess: all go; then some at the cut.
        let mut at_cut = excess - older;
        // Freed here: freeing on another thread cost q20 more CPU per event than it saved.
        let (mut freed, mut evicted) = (0, 0);
        let evicting = self.groups.extract_if(|_, group| {
            let evict = !group.dirty
                && match group.last_used.cmp(&cut) {
                    Ordering::Less => true,
                    Ordering::Equal => at_cut > 0,
                    Ordering::Greater => false,
                };
            if evict && group.last_used == cut {
                at_cut = at_cut.saturating_sub(group.memory);
            }
            evict
        });
        for (_, group) in evicting {
            freed += group.memory;
            evicted += 1;
            self.whole &= group.rows.is_empty();
        }
        self.stats.evictions += evicted;
        self.stats.cached_groups -= evicted;
        self.stats.cache_bytes -= freed as u64;
        self.cache.shrink(freed);
    }
}
