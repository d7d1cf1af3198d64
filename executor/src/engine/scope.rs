//! Epochs scoped to what a statement reaches: an INSERT into a table that no heavy view reads
//! commits that table and the views over it alone, without a barrier through the heavy view.
//!
//! Tables and views that no view connects (no view reads from both groups) share no state:
//! the objects are split into components, a table or view and everything that reads it or
//! that it reads, transitively and in both directions. A scoped epoch is an ordinary epoch
//! restricted to whole components: their tables' rows, their views' barriers and state, the
//! positions of the feeds filling them, their sinks' logs and their subscriptions' changes go
//! into one atomic write, exactly as a full epoch writes them. Everything outside keeps what
//! it took in since its last barrier, uncommitted, for a later epoch; after a crash each
//! component restarts from its own last commit (its state and its feeds' positions were
//! written together), so a replay gives the same answer. Subscriptions and sinks over a
//! component outside the scope see no change in a scoped epoch, which is what their committed
//! rows did.
//!
//! What needs a full epoch: DDL, FLUSH, a subscription starting, an index build, the
//! checkpoint interval and an epoch's bound of source work.

use std::collections::{BTreeMap, BTreeSet};

use super::Engine;

/// What the statements waiting for this epoch changed.
#[derive(Debug)]
pub(super) enum Reach {
    /// Rows of these tables (INSERT, UPDATE, DELETE).
    Tables(BTreeSet<String>),
    /// Anything: the epoch must be full.
    Everything,
}

impl Default for Reach {
    fn default() -> Self {
        Self::Tables(BTreeSet::new())
    }
}

impl Reach {
    pub(super) fn table(&mut self, name: &str) {
        if let Self::Tables(tables) = self {
            tables.insert(name.to_string());
        }
    }
}

/// The tables and views an epoch commits: None for every one.
pub(super) type Scope = Option<BTreeSet<String>>;

/// Whether `name` (a table, view, or the owner of a feed, sink or subscription) is in scope.
pub(super) fn in_scope(scope: &Scope, name: &str) -> bool {
    scope.as_ref().is_none_or(|names| names.contains(name))
}

impl Engine {
    /// The scope an epoch for the statements waiting now needs: the components of the tables
    /// they changed, or None (a full epoch) when they did more, or reach every object anyway.
    pub(super) fn statement_scope(&self) -> Scope {
        let Reach::Tables(tables) = &self.reach else {
            return None;
        };
        if tables.is_empty() {
            return None;
        }
        let components = self.components();
        let wanted: BTreeSet<usize> = tables
            .iter()
            .filter_map(|t| components.get(t.as_str()).copied())
            .collect();
        let scope: BTreeSet<String> = components
            .iter()
            .filter(|(_, c)| wanted.contains(c))
            .map(|(name, _)| name.to_string())
            .collect();
        (scope.len() < components.len()).then_some(scope)
    }

    /// Each table and view's component (a number shared by the objects connected to it).
    fn components(&self) -> BTreeMap<&str, usize> {
        let names: Vec<&str> = self
            .tables
            .keys()
            .chain(self.views.keys())
            .map(String::as_str)
            .collect();
        let index: BTreeMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let mut parent: Vec<usize> = (0..names.len()).collect();
        fn root(parent: &mut [usize], mut at: usize) -> usize {
            while parent[at] != at {
                parent[at] = parent[parent[at]];
                at = parent[at];
            }
            at
        }
        for (view, runtime) in &self.views {
            let Some(&from) = index.get(view.as_str()) else {
                continue;
            };
            // A source is not shared: each view reads it through a reader of its own.
            for input in runtime.plan.input_names() {
                if let Some(&to) = index.get(input) {
                    let (a, b) = (root(&mut parent, from), root(&mut parent, to));
                    parent[a] = b;
                }
            }
        }
        names
            .iter()
            .enumerate()
            .map(|(i, name)| (*name, root(&mut parent, i)))
            .collect()
    }

    /// The table or view a feed fills (a view through one of its readers).
    pub(super) fn feed_owner<'a>(&'a self, feed: &'a str) -> &'a str {
        if self.tables.contains_key(feed) {
            return feed;
        }
        self.views
            .values()
            .find(|v| v.reader(feed).is_some())
            .map_or(feed, |v| v.entry.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_is_in_the_full_scope_and_only_its_names_in_a_scope() {
        assert!(in_scope(&None, "anything"));
        let scope: Scope = Some(["t".to_string()].into());
        assert!(in_scope(&scope, "t"));
        assert!(!in_scope(&scope, "u"));
        let mut reach = Reach::default();
        reach.table("t");
        assert!(matches!(&reach, Reach::Tables(t) if t.contains("t")));
        let mut everything = Reach::Everything;
        everything.table("t");
        assert!(matches!(everything, Reach::Everything));
    }
}
