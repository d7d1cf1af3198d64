//! One view's operators as a tree, from its inputs to its materialized rows, driven message by
//! message.
//!
//! A message entering at an input goes up the tree at once, each operator's output going to
//! its parent (tagged with which of the parent's inputs it is), and what reaches the top goes
//! through the materialize operator. A barrier is aligned: an operator handles it only after
//! every one of its inputs has handled it and delivered what it emitted at it, so that a
//! two-input operator commits epoch N with both inputs' rows of epoch N. Watermarks reach
//! an operator tagged by input; a two-input operator merges them itself (a join derives its own
//! clocks from its inputs').

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub use crate::state_layout::StateLayout;
use datafusion::arrow::datatypes::Field;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use eddy_planner::{NodeKind, StreamNode, StreamPlan};
use eddy_storage::{EpochBatch, Store, TableId};

use crate::aggregate::{
    AggregateOperator, PartialAggregateOperator, SessionAggregateOperator,
    WindowedAggregateOperator,
};
use crate::engine::StateBudget;
use crate::exchange::ExchangeOperator;
use crate::join::{AsofJoinOperator, JoinOperator, LookupJoinOperator, StoredRelation};
use crate::operators::{
    FilterOperator, InputOperator, MaterializeOperator, ProctimeOperator, ProjectOperator,
    UnionOperator, WindowOperator,
};
use crate::state_table::{StateContext, StateTableStats};
use crate::stats::JoinSideStats;
use crate::{Barrier, ExecError, Message, Operator, Result, StreamChunk};

struct Node {
    operator: Box<dyn Operator>,
    /// The node's parent and which of its inputs this node is; None for the top node.
    parent: Option<(usize, usize)>,
    children: Vec<usize>,
}

pub struct Graph {
    /// Children before parents; the top node last.
    nodes: Vec<Node>,
    /// Each input node: the table, source or view it reads and its node.
    inputs: Vec<(String, usize)>,
    /// The view's rows; what passes it is the view's own changelog (for views reading it).
    materialize: MaterializeOperator,
    key_fields: Vec<Field>,
    /// The newest value of each clock the view's changelog carried.
    clocks: BTreeMap<usize, i64>,
    /// The view's state budget, checked while a chunk is expanded piece by piece.
    state_budget: Option<Arc<StateBudget>>,
}

impl Graph {
    /// Builds the operators of `plan` over their state tables. `table_ids[0]` is
    /// the view's result table; stateful operators take the following ids, children before
    /// their parents, left before right.
    /// `relations` finds where a table or view looked up by a lookup join keeps its rows.
    /// Keyed operators run as `instances` instances (see [`crate::exchange`]), each with state
    /// tables of its own.
    pub fn build(
        plan: &StreamPlan,
        table_ids: &[TableId],
        instances: usize,
        layout: StateLayout,
        state: &StateContext,
        relations: &dyn Fn(&str) -> Option<StoredRelation>,
    ) -> Result<Self> {
        let mut builder = Builder {
            plan,
            state,
            relations,
            state_ids: table_ids.iter().skip(1).copied(),
            instances,
            layout,
            nodes: Vec::new(),
            inputs: Vec::new(),
        };
        let root = builder.build(&plan.root)?;
        let (mut nodes, inputs) = (builder.nodes, builder.inputs);
        nodes[root].parent = None;
        let materialize =
            MaterializeOperator::new(table_ids[0], plan.schema.clone(), plan.key_fields.clone())?;
        Ok(Self {
            nodes,
            inputs,
            materialize,
            key_fields: plan.key_fields.clone(),
            clocks: BTreeMap::new(),
            state_budget: None,
        })
    }

    /// Checks the view's state against `budget` between the pieces of a chunk an operator
    /// expands (a HOP window), not only at the next commit: one chunk can put a row in
    /// thousands of windows.
    pub fn set_state_budget(&mut self, budget: Arc<StateBudget>) {
        self.state_budget = Some(budget);
    }

    /// How many table ids a plan needs run as `instances`: the result table and the operators'
    /// state tables (a keyed operator's for each instance).
    pub fn table_ids_needed(plan: &StreamPlan, instances: usize, layout: StateLayout) -> usize {
        fn tables(node: &StreamNode, instances: usize, layout: StateLayout) -> usize {
            let per_instance =
                node.state_tables() + usize::from(layout.stores_index_of(&node.kind));
            let own = match route_keys(&node.kind) {
                Some(_) if instances > 1 => per_instance * instances,
                _ => per_instance,
            };
            own + node
                .inputs
                .iter()
                .map(|n| tables(n, instances, layout))
                .sum::<usize>()
        }
        1 + tables(&plan.root, instances, layout)
    }

    /// The stream key's fields of the view's changelog.
    pub fn key_fields(&self) -> &[Field] {
        &self.key_fields
    }

    /// The view's rows now (committed and pending) as inserts, to backfill a view reading it.
    pub fn snapshot(&self, store: &dyn Store) -> Result<Option<StreamChunk>> {
        self.materialize.snapshot(store)
    }

    /// The newest value of each clock the view's changelog carried, as watermarks.
    pub fn watermarks(&self) -> Vec<crate::Watermark> {
        self.clocks
            .iter()
            .map(|(&clock, &value)| crate::Watermark::at(clock, value))
            .collect()
    }

    /// Pushes a chunk or watermark from `input` (a table, source or view's name) through every
    /// node reading it, one after the other (a self-join reads one input twice). Returns the
    /// view's changes and watermarks that came out.
    pub fn push(&mut self, input: &str, message: Message) -> Result<Vec<Message>> {
        let leaves: Vec<usize> = self
            .inputs
            .iter()
            .filter(|(name, _)| name == input)
            .map(|(_, node)| *node)
            .collect();
        let mut changes = Vec::new();
        for leaf in leaves {
            let out = self.apply(leaf, 0, message.clone())?;
            self.send_up(leaf, out, &mut changes)?;
        }
        Ok(changes)
    }

    /// Runs a barrier through every node, inputs first; returns what the view emitted at it.
    pub fn barrier(&mut self, barrier: Barrier, epoch: &mut EpochBatch) -> Result<Vec<Message>> {
        let top = self.nodes.len() - 1;
        let out = self.barrier_node(top, barrier, epoch)?;
        let mut changes = Vec::new();
        for message in out {
            self.materialize_message(message, &mut changes)?;
        }
        let mut at_barrier = Vec::new();
        self.materialize
            .process_barrier(barrier, epoch, &mut at_barrier)?;
        changes.extend(at_barrier);
        Ok(changes)
    }

    /// Node `node`'s barrier: its inputs' first, with what they emit at it delivered to it.
    fn barrier_node(
        &mut self,
        node: usize,
        barrier: Barrier,
        epoch: &mut EpochBatch,
    ) -> Result<Vec<Message>> {
        let mut out = Vec::new();
        for (port, child) in self.nodes[node].children.clone().into_iter().enumerate() {
            for message in self.barrier_node(child, barrier, epoch)? {
                out.extend(self.apply(node, port, message)?);
            }
        }
        self.nodes[node]
            .operator
            .process_barrier(barrier, epoch, &mut out)?;
        Ok(out)
    }

    /// Runs one message through node `node` (from its input `port`).
    fn apply(&mut self, node: usize, port: usize, message: Message) -> Result<Vec<Message>> {
        let mut out = Vec::new();
        let operator = &mut self.nodes[node].operator;
        match message {
            Message::Chunk(chunk) => operator.process_input_chunk(port, chunk, &mut out)?,
            Message::Watermark(watermark) => {
                operator.process_input_watermark(port, watermark, &mut out)?
            }
            Message::Barrier(_) => {
                return Err(ExecError::DataFusion(
                    datafusion::error::DataFusionError::Internal(
                        "barriers go through Graph::barrier".into(),
                    ),
                ))
            }
        }
        Ok(out)
    }

    /// Sends what node `from` emitted on to its parent, and so on up to the view's rows.
    fn send_up(
        &mut self,
        from: usize,
        messages: Vec<Message>,
        changes: &mut Vec<Message>,
    ) -> Result<()> {
        for message in messages {
            match self.nodes[from].parent {
                Some((parent, port)) => {
                    match (message, self.nodes[parent].operator.max_input_rows()) {
                        (Message::Chunk(chunk), Some(rows)) if chunk.len() > rows => {
                            for piece in chunk.pieces(rows) {
                                let out = self.apply(parent, port, Message::Chunk(piece))?;
                                self.send_up(parent, out, changes)?;
                                self.check_state_budget()?;
                            }
                        }
                        (message, _) => {
                            let out = self.apply(parent, port, message)?;
                            self.send_up(parent, out, changes)?;
                        }
                    }
                }
                None => self.materialize_message(message, changes)?,
            }
        }
        Ok(())
    }

    /// Fails (53200) once the view's state passes its budget.
    fn check_state_budget(&self) -> Result<()> {
        let Some(budget) = &self.state_budget else {
            return Ok(());
        };
        let (held, limit) = (self.state_bytes(), budget.per_view());
        if held <= limit {
            return Ok(());
        }
        Err(ExecError::OutOfMemory(format!(
            "its state grew to about {} MiB in memory while one chunk of rows was assigned to \
             its windows, past its limit of {} MiB (--view-state-memory-limit)",
            held >> 20,
            limit >> 20
        )))
    }

    fn materialize_message(&mut self, message: Message, changes: &mut Vec<Message>) -> Result<()> {
        match message {
            Message::Chunk(chunk) => self.materialize.process_chunk(chunk, changes),
            Message::Watermark(watermark) if watermark.idle && watermark.value == i64::MIN => {
                self.materialize.process_watermark(watermark, changes)
            }
            Message::Watermark(watermark) => {
                let value = self
                    .clocks
                    .entry(watermark.clock)
                    .or_insert(watermark.value);
                *value = (*value).max(watermark.value);
                self.materialize.process_watermark(watermark, changes)
            }
            Message::Barrier(_) => Ok(()),
        }
    }

    pub fn state_rows(&self) -> usize {
        self.nodes.iter().map(|n| n.operator.state_rows()).sum()
    }

    /// Memory the view's operators hold, estimated (see `Operator::state_bytes`).
    pub fn state_bytes(&self) -> usize {
        self.nodes.iter().map(|n| n.operator.state_bytes()).sum()
    }

    pub fn open_windows(&self) -> usize {
        self.nodes.iter().map(|n| n.operator.open_windows()).sum()
    }

    /// Rows the view's expressions failed on since the last call (see
    /// `Operator::take_failed_rows`).
    pub fn take_failed_rows(&mut self) -> Vec<crate::operators::FailedRow> {
        self.nodes
            .iter_mut()
            .flat_map(|n| n.operator.take_failed_rows())
            .collect()
    }

    pub fn rows_failed(&self) -> u64 {
        self.nodes.iter().map(|n| n.operator.rows_failed()).sum()
    }

    /// Every operator's state tables, in build order.
    pub fn state_tables(&self) -> Vec<StateTableStats> {
        self.nodes
            .iter()
            .flat_map(|n| n.operator.state_tables())
            .collect()
    }

    /// Every join's state, per side, joins numbered in build order.
    pub fn join_state(&self) -> Vec<JoinSideStats> {
        let mut sides = Vec::new();
        let mut join = 0;
        for node in &self.nodes {
            let stats = node.operator.join_state();
            if stats.is_empty() {
                continue;
            }
            sides.extend(stats.into_iter().map(|s| JoinSideStats { join, ..s }));
            join += 1;
        }
        sides
    }
}

struct Builder<'a, I> {
    plan: &'a StreamPlan,
    state: &'a StateContext,
    relations: &'a dyn Fn(&str) -> Option<StoredRelation>,
    state_ids: I,
    instances: usize,
    layout: StateLayout,
    nodes: Vec<Node>,
    inputs: Vec<(String, usize)>,
}

impl<I: Iterator<Item = TableId>> Builder<'_, I> {
    fn state_id(&mut self) -> Result<TableId> {
        self.state_ids.next().ok_or_else(|| {
            ExecError::DataFusion(datafusion::error::DataFusionError::Internal(
                "no state table id for an operator".into(),
            ))
        })
    }

    /// Builds `node` and its inputs; returns its index.
    fn build(&mut self, node: &StreamNode) -> Result<usize> {
        let children = node
            .inputs
            .iter()
            .map(|input| self.build(input))
            .collect::<Result<Vec<_>>>()?;
        let operator = match route_keys(&node.kind) {
            Some(_)
                if self.instances > 1 && two_phase_aggregate(&node.kind, self.layout).is_some() =>
            {
                self.two_phase_aggregate(node)?
            }
            Some(keys) if self.instances > 1 => {
                let instances = (0..self.instances)
                    .map(|_| self.operator(node))
                    .collect::<Result<Vec<_>>>()?;
                Box::new(ExchangeOperator::new(
                    instances,
                    keys,
                    self.state.workers.clone(),
                ))
            }
            _ => self.operator(node)?,
        };
        let index = self.nodes.len();
        for (port, &child) in children.iter().enumerate() {
            self.nodes[child].parent = Some((index, port));
        }
        self.nodes.push(Node {
            operator,
            parent: None,
            children,
        });
        Ok(index)
    }

    /// An aggregate on workers in two phases: each chunk aggregated on its own, then routed
    /// by group to the instances, which merge the partial states.
    fn two_phase_aggregate(&mut self, node: &StreamNode) -> Result<Box<dyn Operator>> {
        let plan = two_phase_aggregate(&node.kind, self.layout).expect("checked by the caller");
        let windowed = self.layout.runs_windowed(plan);
        let partial_schema = AggregateOperator::partial_schema(plan)?;
        let mut instances: Vec<Box<dyn Operator>> = Vec::with_capacity(self.instances);
        for _ in 0..self.instances {
            let table = self.state_id()?;
            instances.push(match windowed {
                true => Box::new(
                    WindowedAggregateOperator::new(plan.clone(), table, self.state)?
                        .merging_partials(),
                ),
                false => Box::new(
                    AggregateOperator::new(plan.clone(), table, self.state)?.merging_partials(),
                ),
            });
        }
        let keys = (0..plan.group_len())
            .map(|i| {
                let name = partial_schema.field(i).name();
                Arc::new(Column::new(name, i)) as Arc<dyn PhysicalExpr>
            })
            .collect();
        let local = PartialAggregateOperator::new(plan.clone(), partial_schema);
        Ok(Box::new(
            ExchangeOperator::new(instances, vec![keys], self.state.workers.clone())
                .with_local(Box::new(local)),
        ))
    }

    /// One instance of `node`'s operator, with its own state tables.
    fn operator(&mut self, node: &StreamNode) -> Result<Box<dyn Operator>> {
        Ok(match &node.kind {
            NodeKind::Input { input, projection } => {
                let input = &self.plan.inputs[*input];
                let clocks: BTreeSet<usize> =
                    input.source.watermarks.iter().map(|w| w.clock).collect();
                let index = self.nodes.len();
                self.inputs.push((input.source.name.clone(), index));
                Box::new(InputOperator::new(
                    projection.clone(),
                    node.schema.clone(),
                    clocks,
                    input.clock_base,
                ))
            }
            NodeKind::Filter { predicate } => Box::new(FilterOperator::new(predicate.clone())),
            NodeKind::Project { exprs } => {
                Box::new(ProjectOperator::new(exprs.clone(), node.schema.clone()))
            }
            NodeKind::Window {
                time_column,
                spec,
                adds_key,
            } => Box::new(WindowOperator::new(
                *time_column,
                *spec,
                *adds_key,
                node.schema.clone(),
            )),
            NodeKind::Aggregate(aggregate) => {
                let table = self.state_id()?;
                let plan = (**aggregate).clone();
                if plan.session.is_some() {
                    Box::new(SessionAggregateOperator::new(plan, table, self.state)?)
                } else if self.layout.runs_windowed(&plan) {
                    Box::new(WindowedAggregateOperator::new(plan, table, self.state)?)
                } else {
                    Box::new(AggregateOperator::new(plan, table, self.state)?)
                }
            }
            NodeKind::Join(join) => {
                let tables = [self.state_id()?, self.state_id()?];
                Box::new(JoinOperator::new(
                    (**join).clone(),
                    tables,
                    node.schema.clone(),
                    self.state,
                )?)
            }
            NodeKind::Asof(asof) => {
                let tables = [self.state_id()?, self.state_id()?];
                Box::new(AsofJoinOperator::new(
                    (**asof).clone(),
                    tables,
                    node.schema.clone(),
                    self.state,
                )?)
            }
            NodeKind::TopN(top) => {
                let table = self.state_id()?;
                Box::new(crate::top_n::TopNOperator::new(
                    (**top).clone(),
                    table,
                    node.schema.clone(),
                    self.state,
                )?)
            }
            NodeKind::OverWindow(over) => {
                let table = self.state_id()?;
                Box::new(crate::over_window::OverWindowOperator::new(
                    (**over).clone(),
                    table,
                    node.schema.clone(),
                    self.state,
                )?)
            }
            NodeKind::TemporalFilter(filter) => {
                let table = self.state_id()?;
                Box::new(crate::temporal_filter::TemporalFilterOperator::new(
                    (**filter).clone(),
                    table,
                    node.schema.clone(),
                    &node.key_fields,
                    self.state,
                )?)
            }
            NodeKind::Proctime { clock } => Box::new(ProctimeOperator::new(*clock)),
            NodeKind::Union(union) => {
                Box::new(UnionOperator::new((**union).clone(), node.schema.clone()))
            }
            NodeKind::Lookup(lookup) => {
                let relation = (self.relations)(&lookup.table).ok_or_else(|| {
                    ExecError::UndefinedObject(format!(
                        "\"{}\" keeps no rows to look up (a lookup join reads a table or a materialized view)",
                        lookup.table
                    ))
                })?;
                let emitted = match lookup.left_retracts {
                    true => Some(self.state_id()?),
                    false => None,
                };
                let index = match self.layout.stores_index_of(&node.kind) {
                    true => Some(self.state_id()?),
                    false => None,
                };
                Box::new(LookupJoinOperator::new(
                    (**lookup).clone(),
                    relation,
                    emitted,
                    index,
                    node.schema.clone(),
                    self.state,
                )?)
            }
        })
    }
}

/// The plan of an aggregate that runs in two phases on workers: a windowed one that runs
/// vectorized, or a GROUP BY over an append-only input whose aggregates merge.
fn two_phase_aggregate(
    kind: &NodeKind,
    layout: StateLayout,
) -> Option<&eddy_planner::AggregatePlan> {
    match kind {
        NodeKind::Aggregate(plan)
            if plan.session.is_none()
                && (layout.runs_windowed(plan) || AggregateOperator::supports_two_phases(plan)) =>
        {
            Some(plan)
        }
        _ => None,
    }
}

/// The keys a node's operator keeps its state by, per input, when it can run as instances
/// that each own some keys: joins on equal keys, GROUP BY (one grouping set, not SESSION),
/// top-N and OVER with a PARTITION BY. None for the rest (a global aggregate, a join with no
/// equal keys, stateless operators).
fn route_keys(kind: &NodeKind) -> Option<Vec<Vec<Arc<dyn PhysicalExpr>>>> {
    let keyed = |keys: &Vec<Arc<dyn PhysicalExpr>>| (!keys.is_empty()).then(|| keys.clone());
    match kind {
        NodeKind::Join(join) => Some(vec![keyed(&join.left.keys)?, keyed(&join.right.keys)?]),
        NodeKind::Asof(asof) => Some(vec![keyed(&asof.left.keys)?, keyed(&asof.right.keys)?]),
        NodeKind::Aggregate(aggregate)
            if aggregate.grouping_sets.is_none() && aggregate.session.is_none() =>
        {
            Some(vec![keyed(&aggregate.group_exprs)?])
        }
        NodeKind::TopN(top) => Some(vec![keyed(&top.partition_by)?]),
        NodeKind::OverWindow(over) => Some(vec![keyed(&over.partition_by)?]),
        _ => None,
    }
}
