//! Which operators keep a view's state, and how: recorded in the view's catalog entry when it
//! is created, so that a view restored by a later Eddy runs on the operators that wrote its
//! state, while new views get the newest.

use eddy_planner::{AggregatePlan, NodeKind};

use crate::aggregate::WindowedAggregateOperator;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct StateLayout(pub u32);

impl StateLayout {
    /// What new views are created with.
    pub const CURRENT: Self = Self(2);

    /// Whether an aggregate runs on the vectorized windowed operator. From layout 1 also with
    /// an exact `avg` (of integers or numerics); before, such views kept their state in the
    /// general aggregate.
    pub fn runs_windowed(self, plan: &AggregatePlan) -> bool {
        WindowedAggregateOperator::supports(plan)
            && (self.0 >= 1 || !WindowedAggregateOperator::has_exact_avg(plan))
    }

    /// Whether filters below a join move into it when their side is unique per join key and
    /// append-only (`StreamNode::with_join_side_filters`): from layout 2. Before, such a side
    /// kept only the rows that passed, and its state still does.
    pub fn moves_join_side_filters(self) -> bool {
        self.0 >= 2
    }

    /// Whether a node is a lookup join that keeps its index of the looked-up table in a state
    /// table: from layout 1, one by other columns than the table's primary key (before, the
    /// index was rebuilt in memory at every start).
    pub fn stores_index_of(self, kind: &NodeKind) -> bool {
        matches!(kind, NodeKind::Lookup(lookup) if lookup.by_index) && self.0 >= 1
    }
}
