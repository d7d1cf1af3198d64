//! The join operator: INNER, LEFT, RIGHT and FULL equi-joins over changelogs, and the semi,
//! anti and mark joins of `EXISTS` / `IN` subqueries.
//!
//! A change on one side probes the other side's state, then updates its own: Δ(L ⋈ R) =
//! ΔL ⋈ R + L' ⋈ ΔR, whichever side's change comes first. The residual predicate is evaluated
//! on a batch of candidate pairs at a time. Outer sides keep each row's degree (matches passing
//! the predicate): a row's first match retracts its NULL-padded row (Delete, then the joined
//! Insert: the stream key changes), its last match going brings the padded row back. Semi and
//! anti joins emit or retract a row when its degree crosses zero; a mark join updates its
//! `mark` column. NULL keys never match (unless `IS NOT DISTINCT FROM`) and are not stored: an
//! outer side pads them at once.
//!
//! One row matching many emits in bounded chunks: its candidates are taken from the other
//! side's state a slice at a time.

mod asof;
mod asof_state;
mod eviction;
mod lookup;
mod output;
mod pairs;
mod residual;
mod rows_by_time;
mod state;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::row::Rows;
use datafusion::common::JoinType;
use datafusion::physical_expr::PhysicalExpr;
use eddy_planner::window::to_micros;
use eddy_planner::JoinPlan;
use eviction::bounded_by;

use crate::clocks::InputClocks;
use eddy_storage::{EpochBatch, TableId};

use crate::state_table::{StateContext, StateTableStats};
use crate::stats::JoinSideStats;
use crate::{Barrier, ExecError, Message, Operator, Result, StreamChunk, Watermark};
use output::OutputBuilder;

pub use asof::AsofJoinOperator;
pub use lookup::{LookupJoinOperator, StoredRelation};
use state::SideState;

/// Candidate pairs evaluated (and output rows built) at a time.
pub(crate) const SLICE_ROWS: usize = 4096;

/// How a join type treats each side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Joined pairs; `pads[s]` when side s's unmatched rows appear padded with NULLs.
    Pairs { pads: [bool; 2] },
    /// Rows of side `kept` only, by whether they match.
    Filter { kept: usize, kind: FilterKind },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FilterKind {
    Semi,
    Anti,
    Mark,
}

impl Shape {
    fn of(join_type: JoinType) -> Self {
        let filter = |kept, kind| Shape::Filter { kept, kind };
        match join_type {
            JoinType::Inner => Shape::Pairs {
                pads: [false, false],
            },
            JoinType::Left => Shape::Pairs {
                pads: [true, false],
            },
            JoinType::Right => Shape::Pairs {
                pads: [false, true],
            },
            JoinType::Full => Shape::Pairs { pads: [true, true] },
            JoinType::LeftSemi => filter(0, FilterKind::Semi),
            JoinType::RightSemi => filter(1, FilterKind::Semi),
            JoinType::LeftAnti => filter(0, FilterKind::Anti),
            JoinType::RightAnti => filter(1, FilterKind::Anti),
            JoinType::LeftMark => filter(0, FilterKind::Mark),
            JoinType::RightMark => filter(1, FilterKind::Mark),
        }
    }

    /// Whether side `s` needs each row's degree.
    fn tracks_degree(self, s: usize) -> bool {
        match self {
            Shape::Pairs { pads } => pads[s],
            Shape::Filter { kept, .. } => kept == s,
        }
    }
}

pub struct JoinOperator {
    plan: JoinPlan,
    shape: Shape,
    sides: [SideState; 2],
    output: OutputBuilder,
    clocks: InputClocks,
}

/// One row of the chunk being applied.
struct Probe {
    join_key: Box<[u8]>,
    row_key: Box<[u8]>,
    insert: bool,
    /// Whether the row's key can match at all (a NULL key cannot, unless NULLs match).
    matchable: bool,
    /// The row's eviction column (micros), when its side has one.
    time: Option<i64>,
    /// Candidates that passed the predicate so far.
    matches: u64,
}

/// What to do next, in the chunk's row order.
enum Step {
    /// Probe row `probe` meets the other side's row (`row key`, its index among the slice's
    /// candidates).
    Pair(usize, Box<[u8]>, usize),
    /// Every candidate of probe row `probe` has been seen.
    Finish(usize),
}

/// Steps waiting to be taken together: the candidates they meet are decoded and the predicate
/// evaluated on all of them at once.
#[derive(Default)]
struct Slice {
    steps: Vec<Step>,
    /// The candidates' rows (the other side's encoding).
    rows: Vec<Box<[u8]>>,
}

impl JoinOperator {
    /// Builds the operator over state tables `tables` (left, right); their rows are read as
    /// keys need them.
    pub fn new(
        plan: JoinPlan,
        tables: [TableId; 2],
        schema: SchemaRef,
        state: &StateContext,
    ) -> Result<Self> {
        let open = |side: &eddy_planner::JoinSideInfo, table, s: usize| {
            let evict_column = plan.evictions[s].map(|e| e.column);
            SideState::open(
                state,
                table,
                ["join left", "join right"][s],
                &side.schema,
                &side.key_fields,
                &plan.key_types,
                evict_column,
            )
        };
        let sides = [
            open(&plan.left, tables[0], 0)?,
            open(&plan.right, tables[1], 1)?,
        ];
        let shape = Shape::of(plan.join_type);
        let output = OutputBuilder::new(&plan, schema);
        let clocks = InputClocks::new(2, &plan.clocks);
        Ok(Self {
            plan,
            shape,
            sides,
            output,
            clocks,
        })
    }

    fn side_plan(&self, s: usize) -> &eddy_planner::JoinSideInfo {
        if s == 0 {
            &self.plan.left
        } else {
            &self.plan.right
        }
    }

    /// Applies one chunk from side `s`: each row meets the other side's rows of its key, then
    /// takes its place in this side's state.
    fn apply(&mut self, s: usize, chunk: StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let o = 1 - s;
        let keys = evaluate(&self.side_plan(s).keys, &chunk.batch)?;
        let join_keys = self.sides[s].key_codec.encode(&keys, chunk.len())?;
        let row_keys = self.sides[s]
            .stream_key_codec
            .encode(chunk.key_columns(), chunk.len())?;
        let stored = self.sides[s]
            .row_codec
            .encode(chunk.batch.columns(), chunk.len())?;
        let times = match self.sides[s].evict_column {
            Some(column) => Some(to_micros(chunk.batch.column(column))?),
            None => None,
        };
        let mut probes: Vec<Probe> = (0..chunk.len())
            .map(|i| Probe {
                time: times
                    .as_ref()
                    .and_then(|t| t.is_valid(i).then(|| t.value(i))),
                join_key: join_keys.row(i).as_ref().into(),
                row_key: row_keys.row(i).as_ref().into(),
                insert: chunk.ops[i].is_insert(),
                matchable: self.plan.nulls_match || keys.iter().all(|k| k.is_valid(i)),
                matches: 0,
            })
            .collect();
        // Both sides' groups of the chunk's keys, the missing ones read from the store at once.
        for side in &mut self.sides {
            side.table.begin_chunk();
            let keys = probes.iter().filter(|p| p.matchable);
            side.load(keys.map(|p| p.join_key.as_ref()))?;
        }
        self.output.start(s, &chunk);
        let mut slice = Slice::default();
        for i in 0..probes.len() {
            if probes[i].matchable {
                let join_key = probes[i].join_key.clone();
                // The other side's rows of this key, a slice at a time.
                let mut after: Option<Box<[u8]>> = None;
                while let Some(bucket) = self.sides[o].table.group(&join_key) {
                    let room = SLICE_ROWS.saturating_sub(slice.rows.len()).max(1);
                    let range = match &after {
                        Some(last) => bucket.range::<[u8], _>((
                            std::ops::Bound::Excluded(last.as_ref()),
                            std::ops::Bound::Unbounded,
                        )),
                        None => bucket.range::<[u8], _>(..),
                    };
                    let mut taken = 0;
                    for (row_key, entry) in range.take(room) {
                        slice
                            .steps
                            .push(Step::Pair(i, row_key.clone(), slice.rows.len()));
                        slice.rows.push(entry.row.clone());
                        after = Some(row_key.clone());
                        taken += 1;
                    }
                    if taken < room {
                        break;
                    }
                    self.flush(
                        s,
                        &chunk,
                        &stored,
                        &mut probes,
                        std::mem::take(&mut slice),
                        out,
                    )?;
                }
            }
            slice.steps.push(Step::Finish(i));
        }
        self.flush(s, &chunk, &stored, &mut probes, slice, out)?;
        self.output.emit(out)
    }

    /// Takes a slice's steps in order: evaluates the predicate on its candidates at once, then
    /// emits what each pair and each finished row produces and updates the state.
    fn flush(
        &mut self,
        s: usize,
        chunk: &StreamChunk,
        stored: &Rows,
        probes: &mut [Probe],
        slice: Slice,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        let o = 1 - s;
        let mut passed = None;
        if !slice.rows.is_empty() {
            let candidates = self.sides[o]
                .row_codec
                .decode(slice.rows.iter().map(|r| r.as_ref()))?;
            if let Some(filter) = &self.plan.filter {
                passed = Some(self.evaluate_filter(filter, s, chunk, &slice, &candidates)?);
            }
            self.output.set_candidates(candidates);
        }
        for step in slice.steps {
            match step {
                Step::Pair(i, other_key, candidate) => {
                    if passed
                        .as_ref()
                        .is_some_and(|mask: &Vec<bool>| !mask[candidate])
                    {
                        continue;
                    }
                    probes[i].matches += 1;
                    let probe = &probes[i];
                    self.matched(
                        s,
                        i,
                        probe.insert,
                        &probe.join_key.clone(),
                        &other_key,
                        candidate,
                    )?;
                }
                Step::Finish(i) => {
                    let probe = &probes[i];
                    self.finish(s, i, probe, stored.row(i).as_ref())?;
                }
            }
            self.output.flush_if_full(out)?;
        }
        Ok(())
    }

    /// Probe row `row` of side `s` met the other side's row `other_key` (candidate
    /// `candidate`), and the predicate held.
    fn matched(
        &mut self,
        s: usize,
        row: usize,
        insert: bool,
        join_key: &[u8],
        other_key: &[u8],
        candidate: usize,
    ) -> Result<()> {
        let o = 1 - s;
        let delta = if insert { 1 } else { -1 };
        match self.shape {
            Shape::Pairs { pads } => {
                let crossed = if pads[o] {
                    self.sides[o].add_degree(join_key, other_key, delta)?
                } else {
                    None
                };
                // Padded at eviction: no padded row was emitted, so none goes.
                let crossed = crossed.filter(|_| !self.plan.pad_on_eviction);
                match (insert, crossed) {
                    (true, Some((0, _))) => {
                        // The other row's first match: its padded row goes first.
                        self.output.pad_other(false, candidate);
                        self.output.pair(true, row, candidate);
                    }
                    (false, Some((1, 0))) => {
                        self.output.pair(false, row, candidate);
                        self.output.pad_other(true, candidate);
                    }
                    _ => self.output.pair(insert, row, candidate),
                }
            }
            Shape::Filter { kept, kind } if kept == o => {
                // A change on the other side moves the kept row's degree across zero or not.
                if let Some((old, new)) = self.sides[o].add_degree(join_key, other_key, delta)? {
                    let (gained, lost) = (old == 0 && new > 0, old > 0 && new == 0);
                    match kind {
                        FilterKind::Semi if gained => self.output.kept_other(true, candidate, None),
                        FilterKind::Semi if lost => self.output.kept_other(false, candidate, None),
                        FilterKind::Anti if gained => {
                            self.output.kept_other(false, candidate, None)
                        }
                        FilterKind::Anti if lost => self.output.kept_other(true, candidate, None),
                        FilterKind::Mark if gained || lost => {
                            self.output.kept_other(false, candidate, Some(lost));
                            self.output.kept_other(true, candidate, Some(gained));
                        }
                        _ => {}
                    }
                }
            }
            // A kept row's own matches are counted by its probe and settled when it finishes.
            Shape::Filter { .. } => {}
        }
        Ok(())
    }

    /// Settles probe row `row` of side `s` once all its candidates are seen: its own padded
    /// or filtered output, and its place in this side's state.
    fn finish(&mut self, s: usize, row: usize, probe: &Probe, stored: &[u8]) -> Result<()> {
        match self.shape {
            Shape::Pairs { pads }
                if pads[s] && probe.matches == 0 && !self.plan.pad_on_eviction =>
            {
                self.output.pad_this(probe.insert, row);
            }
            Shape::Filter { kept, kind } if kept == s => {
                let matched = probe.matches > 0;
                match kind {
                    FilterKind::Semi if matched => self.output.kept_this(probe.insert, row, None),
                    FilterKind::Anti if !matched => self.output.kept_this(probe.insert, row, None),
                    FilterKind::Mark => self.output.kept_this(probe.insert, row, Some(matched)),
                    _ => {}
                }
            }
            _ => {}
        }
        let side = &mut self.sides[s];
        side.figures.max_fan_out = side.figures.max_fan_out.max(probe.matches);
        // A NULL key never matches, so it needs no state: its delete pads or filters alike.
        if !probe.matchable {
            return Ok(());
        }
        if !probe.insert {
            self.sides[s].remove(&probe.join_key, &probe.row_key, probe.time)?;
            return Ok(());
        }
        let o = 1 - s;
        let other_has_key = self.sides[o]
            .table
            .group(&probe.join_key)
            .is_some_and(|g| !g.is_empty());
        // When the other side is append-only and holds at most one row per key, a key it has
        // is taken for good: no row of it will ever come for that key again. So a row arriving
        // to find that key present is never probed again (its own delete probes the other
        // side, whose row is still there) and is not kept; and a row of such a side, arriving,
        // is the last the other side's rows of its key will ever meet, so they leave (their
        // deletes and degrees are settled by probing this row, which stays).
        if other_has_key && self.plan.fixed_keys(o) {
            return Ok(());
        }
        if other_has_key && self.plan.fixed_keys(s) {
            self.sides[o].remove_key(&probe.join_key)?;
        }
        let degree = if self.shape.tracks_degree(s) {
            probe.matches
        } else {
            0
        };
        self.sides[s].insert(
            &probe.join_key,
            &probe.row_key,
            stored.into(),
            degree,
            probe.time,
        )
    }
}

fn evaluate(exprs: &[Arc<dyn PhysicalExpr>], batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    let rows = batch.num_rows();
    Ok(exprs
        .iter()
        .map(|e| e.evaluate(batch)?.into_array(rows))
        .collect::<Result<Vec<_>, _>>()?)
}

pub(crate) fn internal(message: &str) -> ExecError {
    ExecError::DataFusion(datafusion::error::DataFusionError::Internal(message.into()))
}

impl Operator for JoinOperator {
    fn name(&self) -> &'static str {
        "Join"
    }

    fn process_chunk(&mut self, _chunk: StreamChunk, _out: &mut Vec<Message>) -> Result<()> {
        Err(internal(
            "a join's chunks come with the input they are from",
        ))
    }

    fn process_input_chunk(
        &mut self,
        input: usize,
        chunk: StreamChunk,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        self.apply(input, chunk, out)?;
        // A row already behind the other side's watermark can match no future row: it leaves
        // at once (the other side may never send another watermark: a finished source).
        self.evict_passed(input, out)
    }

    fn process_input_watermark(
        &mut self,
        input: usize,
        watermark: Watermark,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        if self.clocks.observe(input, &watermark).is_some() {
            // Rows of the other side no future row of this input can match leave the state,
            // and (a side that retracts) rows of this side no delete can follow any more.
            for side in [1 - input, input] {
                if self.plan.evictions[side]
                    .is_some_and(|e| bounded_by(&e, side, input, &watermark))
                {
                    self.evict_passed(side, out)?;
                }
            }
        }
        // Then the clocks the output carries (after any padded rows the eviction emitted).
        self.clocks.emit_advanced(out);
        // The inputs' own clocks bound nothing in the output.
        Ok(())
    }

    fn process_barrier(
        &mut self,
        _barrier: Barrier,
        epoch: &mut EpochBatch,
        _out: &mut Vec<Message>,
    ) -> Result<()> {
        for side in &mut self.sides {
            side.persist(epoch)?;
        }
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.sides.iter().map(|s| s.table.rows() as usize).sum()
    }

    fn state_bytes(&self) -> usize {
        self.sides.iter().map(|s| s.memory_bytes()).sum()
    }

    fn join_state(&self) -> Vec<JoinSideStats> {
        [("left", &self.plan.left), ("right", &self.plan.right)]
            .into_iter()
            .zip(&self.sides)
            .map(|((name, info), side)| JoinSideStats {
                join: 0,
                side: name,
                input: info.reads.join(", "),
                rows: side.table.rows(),
                distinct_keys: side.figures.distinct_keys,
                bytes: side.stats().bytes,
                max_rows_per_key: side.figures.max_rows_per_key,
                max_fan_out: side.figures.max_fan_out,
                rows_evicted: side.figures.rows_evicted,
                retention: side.figures.retention,
            })
            .collect()
    }

    fn state_tables(&self) -> Vec<StateTableStats> {
        self.sides.iter().map(SideState::stats).collect()
    }
}
