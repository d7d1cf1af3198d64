//! The join operator driven by compact changelog literals: `+ id k v` inserts row `id` with join
//! key `k` and value `v`, `-` deletes it, `_` is NULL.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, Int64Array};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use datafusion::common::JoinType;
use datafusion::logical_expr::Operator as BinaryOperator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column};
use datafusion::physical_expr::PhysicalExpr;
use eddy_planner::{JoinOutputKey, JoinPlan, JoinSideInfo};
use eddy_storage::{EpochBatch, MemStore};

use super::{JoinOperator, SLICE_ROWS};
use crate::exchange::ExchangeOperator;
use crate::state_table::{StateCache, StateContext};
pub(super) use crate::test_random::Random;
use crate::workers::Workers;
use crate::{Barrier, Message, Op, Operator, StreamChunk};

fn side_schema(prefix: &str) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(format!("{prefix}k"), DataType::Int64, true),
        Field::new(format!("{prefix}v"), DataType::Int64, true),
    ]))
}

fn value(text: &str) -> Option<i64> {
    (text != "_").then(|| text.parse().unwrap())
}

/// One row per line: op, row id (the stream key), join key, value.
fn chunk(prefix: &str, text: &str) -> StreamChunk {
    let (mut ops, mut ids, mut ks, mut vs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let parts: Vec<&str> = line.split_whitespace().collect();
        ops.push(match parts[0] {
            "+" => Op::Insert,
            "-" => Op::Delete,
            other => panic!("unknown op {other}"),
        });
        ids.push(parts[1].parse::<i64>().unwrap());
        ks.push(value(parts[2]));
        vs.push(value(parts[3]));
    }
    StreamChunk::new(
        ops,
        &side_schema(prefix),
        vec![
            Arc::new(Int64Array::from(ks)),
            Arc::new(Int64Array::from(vs)),
        ],
        vec![Arc::new(Int64Array::from(ids))],
    )
    .unwrap()
}

fn side(prefix: &str) -> JoinSideInfo {
    JoinSideInfo {
        keys: vec![Arc::new(Column::new(&format!("{prefix}k"), 0))],
        key_names: vec![format!("{prefix}k")],
        schema: side_schema(prefix),
        key_fields: vec![Field::new("_id", DataType::Int64, true)],
        append_only: false,
        reads: vec![prefix.to_string()],
        unique_per_key: false,
    }
}

/// `l JOIN r ON l.lk = r.rk [AND l.lv < r.rv]`.
fn plan(join_type: JoinType, with_filter: bool) -> (JoinPlan, SchemaRef) {
    let filter = with_filter.then(|| {
        Arc::new(BinaryExpr::new(
            Arc::new(Column::new("lv", 1)),
            BinaryOperator::Lt,
            Arc::new(Column::new("rv", 3)),
        )) as Arc<dyn PhysicalExpr>
    });
    let (left, right) = (side("l"), side("r"));
    let mut fields: Vec<Field> = Vec::new();
    if !matches!(join_type, JoinType::RightSemi | JoinType::RightAnti) {
        fields.extend(left.schema.fields().iter().map(|f| f.as_ref().clone()));
    }
    if !matches!(
        join_type,
        JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark
    ) {
        fields.extend(right.schema.fields().iter().map(|f| f.as_ref().clone()));
    }
    if join_type == JoinType::LeftMark {
        fields.push(Field::new("mark", DataType::Boolean, false));
    }
    let output_key = match join_type {
        JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark => JoinOutputKey::Left,
        JoinType::RightSemi | JoinType::RightAnti => JoinOutputKey::Right,
        _ => JoinOutputKey::Both,
    };
    let plan = JoinPlan {
        join_type,
        left,
        right,
        key_types: vec![DataType::Int64],
        nulls_match: false,
        filter,
        output_key,
        clocks: Vec::new(),
        evictions: [None, None],
        pad_on_eviction: false,
    };
    (plan, Arc::new(Schema::new(fields)))
}

struct Harness {
    operator: Box<dyn Operator>,
    /// Instances the join runs as (more than one: behind an exchange, on two workers).
    instances: usize,
    state: StateContext,
    plan: JoinPlan,
    schema: SchemaRef,
    /// The materialized output: output row (as text) → count.
    rows: BTreeMap<String, i64>,
    /// The output as a view keeps it: the last row inserted under each stream key, removed by
    /// a delete of that key (so the order of changes to one key matters).
    keyed: BTreeMap<String, String>,
    chunks: Vec<usize>,
    /// Cache evictions of the operators replaced by restarts.
    evictions: u64,
}

impl Harness {
    fn new(join_type: JoinType, with_filter: bool) -> Self {
        let (plan, schema) = plan(join_type, with_filter);
        Self::with_plan(plan, schema, StateCache::default())
    }

    fn with_plan(plan: JoinPlan, schema: SchemaRef, cache: StateCache) -> Self {
        Self::on_instances(plan, schema, cache, 1)
    }

    fn on_instances(plan: JoinPlan, schema: SchemaRef, cache: StateCache, n: usize) -> Self {
        let state = StateContext::new(Arc::new(MemStore::default()), Arc::new(cache))
            .with_workers(Arc::new(Workers::new(2)));
        let operator = build(&plan, &schema, &state, n);
        Self {
            operator,
            instances: n,
            state,
            plan,
            schema,
            rows: BTreeMap::new(),
            keyed: BTreeMap::new(),
            chunks: Vec::new(),
            evictions: 0,
        }
    }

    /// Applies a change to side 0 (`l`) or 1 (`r`); returns its output rows in order.
    fn push(&mut self, side: usize, text: &str) -> Vec<String> {
        let prefix = if side == 0 { "l" } else { "r" };
        self.push_chunk(side, chunk(prefix, text))
    }

    fn push_chunk(&mut self, side: usize, chunk: StreamChunk) -> Vec<String> {
        let mut out = Vec::new();
        self.operator
            .process_input_chunk(side, chunk, &mut out)
            .unwrap();
        let mut changes = Vec::new();
        for message in out {
            let Message::Chunk(chunk) = message else {
                continue;
            };
            self.chunks.push(chunk.len());
            for (i, op) in chunk.ops.iter().enumerate() {
                let text = render(&chunk, i);
                let sign = if op.is_insert() { 1 } else { -1 };
                let count = self.rows.entry(text.clone()).or_default();
                *count += sign;
                assert!(*count >= 0, "deleted a row never inserted: {text}");
                if *count == 0 {
                    self.rows.remove(&text);
                }
                let (_, key) = text.split_once(" key ").expect("a key");
                match op.is_insert() {
                    true => self.keyed.insert(key.to_string(), text.clone()),
                    false => self.keyed.remove(key),
                };
                changes.push(format!("{} {text}", if op.is_insert() { "+" } else { "-" }));
            }
        }
        changes
    }

    fn view(&self) -> Vec<String> {
        self.rows.keys().cloned().collect()
    }

    /// Commits the state at a barrier.
    fn barrier(&mut self) {
        let mut epoch = EpochBatch::default();
        self.operator
            .process_barrier(Barrier { epoch: 1 }, &mut epoch, &mut Vec::new())
            .unwrap();
        self.state.store.commit(&epoch).unwrap();
    }

    /// Commits the state and builds the operator again from the store, as after a restart.
    fn restart(&mut self) {
        self.barrier();
        self.evictions += self
            .operator
            .state_tables()
            .iter()
            .map(|t| t.evictions)
            .sum::<u64>();
        self.operator = build(&self.plan, &self.schema, &self.state, self.instances);
    }
}

/// The join as one operator, or as `n` instances (tables 20 + 2i and 21 + 2i) behind an
/// exchange.
fn build(plan: &JoinPlan, schema: &SchemaRef, state: &StateContext, n: usize) -> Box<dyn Operator> {
    let one = |i: u32| {
        let tables = [20 + 2 * i, 21 + 2 * i];
        JoinOperator::new(plan.clone(), tables, schema.clone(), state).unwrap()
    };
    if n == 1 {
        return Box::new(one(0));
    }
    let instances = (0..n as u32)
        .map(|i| Box::new(one(i)) as Box<dyn Operator>)
        .collect();
    let keys = vec![plan.left.keys.clone(), plan.right.keys.clone()];
    Box::new(ExchangeOperator::new(
        instances,
        keys,
        state.workers.clone(),
    ))
}

/// A row's visible columns and key, `_` for NULL: `1 10 | 1 20 | key 7 8`.
fn render(chunk: &StreamChunk, row: usize) -> String {
    let text = |column: &Arc<dyn Array>| {
        if column.is_null(row) {
            "_".to_string()
        } else if let Some(ints) = column.as_primitive_opt::<Int64Type>() {
            ints.value(row).to_string()
        } else {
            column.as_boolean().value(row).to_string()
        }
    };
    let visible: Vec<String> = chunk.visible_columns().iter().map(text).collect();
    let key: Vec<String> = chunk.key_columns().iter().map(text).collect();
    format!("{} key {}", visible.join(" "), key.join(" "))
}

#[test]
fn inner_join_matches_either_order_and_retracts() {
    let mut h = Harness::new(JoinType::Inner, false);
    assert!(h.push(0, "+ 1 7 10").is_empty());
    assert_eq!(h.push(1, "+ 5 7 20\n+ 6 8 30"), ["+ 7 10 7 20 key 1 5"]);
    assert_eq!(h.push(0, "+ 2 7 11"), ["+ 7 11 7 20 key 2 5"]);
    assert_eq!(
        h.push(1, "- 5 7 20"),
        ["- 7 10 7 20 key 1 5", "- 7 11 7 20 key 2 5"]
    );
    assert!(h.view().is_empty());
}

#[test]
fn left_join_pads_and_unpads_both_ways() {
    let mut h = Harness::new(JoinType::Left, false);
    assert_eq!(h.push(0, "+ 1 7 10"), ["+ 7 10 _ _ key 1 false _"]);
    // The first match retracts the padded row before the joined one comes.
    assert_eq!(
        h.push(1, "+ 5 7 20"),
        ["- 7 10 _ _ key 1 false _", "+ 7 10 7 20 key 1 true 5"]
    );
    assert_eq!(h.push(1, "+ 6 7 21"), ["+ 7 10 7 21 key 1 true 6"]);
    assert_eq!(h.push(1, "- 5 7 20"), ["- 7 10 7 20 key 1 true 5"]);
    // The last match going brings the padded row back.
    assert_eq!(
        h.push(1, "- 6 7 21"),
        ["- 7 10 7 21 key 1 true 6", "+ 7 10 _ _ key 1 false _"]
    );
    assert_eq!(h.view(), ["7 10 _ _ key 1 false _"]);
    assert_eq!(h.push(0, "- 1 7 10"), ["- 7 10 _ _ key 1 false _"]);
    assert!(h.view().is_empty());
}

#[test]
fn full_join_pads_both_sides_and_null_keys_never_match() {
    let mut h = Harness::new(JoinType::Full, false);
    assert_eq!(h.push(1, "+ 5 _ 20"), ["+ _ _ _ 20 key false _ true 5"]);
    assert_eq!(h.push(0, "+ 1 _ 10"), ["+ _ 10 _ _ key true 1 false _"]);
    assert_eq!(h.push(1, "+ 6 7 21"), ["+ _ _ 7 21 key false _ true 6"]);
    assert_eq!(
        h.push(0, "+ 2 7 11"),
        [
            "- _ _ 7 21 key false _ true 6",
            "+ 7 11 7 21 key true 2 true 6"
        ]
    );
    // Deleting NULL-keyed rows retracts their pads (they are kept nowhere).
    assert_eq!(h.push(0, "- 1 _ 10"), ["- _ 10 _ _ key true 1 false _"]);
    assert_eq!(h.push(1, "- 5 _ 20"), ["- _ _ _ 20 key false _ true 5"]);
    assert_eq!(h.view(), ["7 11 7 21 key true 2 true 6"]);
}

#[test]
fn degrees_count_the_residual_predicate() {
    // ON lk = rk AND lv < rv: a right row that fails the predicate is no match.
    let mut h = Harness::new(JoinType::Left, true);
    assert_eq!(h.push(0, "+ 1 7 10"), ["+ 7 10 _ _ key 1 false _"]);
    assert!(h.push(1, "+ 5 7 5").is_empty());
    assert_eq!(
        h.push(1, "+ 6 7 50"),
        ["- 7 10 _ _ key 1 false _", "+ 7 10 7 50 key 1 true 6"]
    );
    assert!(h.push(1, "- 5 7 5").is_empty());
    assert_eq!(
        h.push(1, "- 6 7 50"),
        ["- 7 10 7 50 key 1 true 6", "+ 7 10 _ _ key 1 false _"]
    );
}

#[test]
fn a_row_deleted_and_inserted_in_one_chunk_keeps_its_order() {
    let mut h = Harness::new(JoinType::Left, false);
    h.push(1, "+ 5 8 20");
    // Row 1 moves from key 7 (no match) to key 8 (a match) within one chunk.
    h.push(0, "+ 1 7 10");
    assert_eq!(
        h.push(0, "- 1 7 10\n+ 1 8 10"),
        ["- 7 10 _ _ key 1 false _", "+ 8 10 8 20 key 1 true 5"]
    );
    assert_eq!(h.view(), ["8 10 8 20 key 1 true 5"]);
}

#[test]
fn semi_anti_and_mark_follow_the_degree_across_zero() {
    let mut semi = Harness::new(JoinType::LeftSemi, false);
    let mut anti = Harness::new(JoinType::LeftAnti, false);
    let mut mark = Harness::new(JoinType::LeftMark, false);
    for h in [&mut semi, &mut anti, &mut mark] {
        h.push(0, "+ 1 7 10\n+ 2 _ 11");
        h.push(1, "+ 5 7 20\n+ 6 7 21");
        h.push(1, "- 5 7 20");
    }
    assert_eq!(semi.view(), ["7 10 key 1"]);
    assert_eq!(anti.view(), ["_ 11 key 2"]);
    assert_eq!(mark.view(), ["7 10 true key 1", "_ 11 false key 2"]);
    for h in [&mut semi, &mut anti, &mut mark] {
        h.push(1, "- 6 7 21");
    }
    assert!(semi.view().is_empty());
    assert_eq!(anti.view(), ["7 10 key 1", "_ 11 key 2"]);
    assert_eq!(mark.view(), ["7 10 false key 1", "_ 11 false key 2"]);
}

#[test]
fn state_survives_a_restart() {
    let mut h = Harness::new(JoinType::Full, false);
    h.push(0, "+ 1 7 10\n+ 2 8 11");
    h.push(1, "+ 5 7 20");
    h.restart();
    // Degrees came back: row 1's match going pads it again; row 2's first match unpads it.
    assert_eq!(
        h.push(1, "- 5 7 20\n+ 6 8 21"),
        [
            "- 7 10 7 20 key true 1 true 5",
            "+ 7 10 _ _ key true 1 false _",
            "- 8 11 _ _ key true 2 false _",
            "+ 8 11 8 21 key true 2 true 6"
        ]
    );
    let stats = h.operator.join_state();
    assert_eq!((stats[0].rows, stats[1].rows), (2, 1));
}

#[test]
fn one_row_matching_many_emits_bounded_chunks() {
    let mut h = Harness::new(JoinType::Left, false);
    let many = SLICE_ROWS * 3 + 17;
    let rows: String = (0..many).map(|i| format!("+ {i} 7 {i}\n")).collect();
    h.push(1, &rows);
    h.chunks.clear();
    let out = h.push(0, "+ 1000000 7 1");
    assert_eq!(out.len(), many);
    assert!(h.chunks.iter().all(|&n| n <= SLICE_ROWS), "{:?}", h.chunks);
    assert_eq!(h.operator.join_state()[0].max_fan_out, many as u64);
    assert_eq!(h.operator.join_state()[1].max_rows_per_key, many as u64);
}

/// Random changes to both sides: inserts of new rows and deletes of live ones, keys from a
/// small range so that keys are shared; `append_only[s]` keeps side s to inserts, and
/// `unique[s]` gives side s at most one row per key.
fn random_changes(
    seed: u64,
    steps: usize,
    append_only: [bool; 2],
    unique: [bool; 2],
) -> Vec<(usize, String)> {
    let mut random = Random(seed);
    let mut live: [Vec<(i64, i64, i64)>; 2] = [Vec::new(), Vec::new()];
    let mut next_id = 1;
    let mut changes = Vec::new();
    for _ in 0..steps {
        let s = random.below(2) as usize;
        let mut lines = Vec::new();
        for _ in 0..1 + random.below(4) {
            let delete = !append_only[s] && !live[s].is_empty() && random.below(3) == 0;
            if delete {
                let (id, k, v) = live[s].swap_remove(random.below(live[s].len() as u64) as usize);
                lines.push(format!("- {id} {k} {v}"));
                continue;
            }
            let k = random.below(6) as i64;
            if unique[s] && live[s].iter().any(|r| r.1 == k) {
                continue;
            }
            let (id, v) = (next_id, random.below(20) as i64);
            next_id += 1;
            live[s].push((id, k, v));
            lines.push(format!("+ {id} {k} {v}"));
        }
        if !lines.is_empty() {
            changes.push((s, lines.join("\n")));
        }
    }
    changes
}

/// Runs `changes` through `h`, with barriers and restarts along the way; returns the view
/// after each change.
fn run(h: &mut Harness, changes: &[(usize, String)]) -> Vec<Vec<String>> {
    let mut views = Vec::new();
    for (n, (side, text)) in changes.iter().enumerate() {
        h.push(*side, text);
        views.push(h.view());
        match n % 7 {
            3 => h.barrier(),
            6 => h.restart(),
            _ => {}
        }
    }
    views
}

fn with_sides(
    join_type: JoinType,
    with_filter: bool,
    append_only: [bool; 2],
    unique: [bool; 2],
) -> (JoinPlan, SchemaRef) {
    let (mut plan, schema) = plan(join_type, with_filter);
    for (s, side) in [&mut plan.left, &mut plan.right].into_iter().enumerate() {
        side.append_only = append_only[s];
        side.unique_per_key = unique[s];
    }
    (plan, schema)
}

const JOIN_TYPES: [JoinType; 7] = [
    JoinType::Inner,
    JoinType::Left,
    JoinType::Right,
    JoinType::Full,
    JoinType::LeftSemi,
    JoinType::LeftAnti,
    JoinType::LeftMark,
];

#[test]
fn a_tiny_cache_gives_the_same_answers() {
    for join_type in JOIN_TYPES {
        for seed in 1..6u64 {
            let changes = random_changes(seed, 60, [false, false], [false, false]);
            let (plan, schema) =
                with_sides(join_type, seed % 2 == 0, [false, false], [false, false]);
            let mut roomy = Harness::with_plan(plan.clone(), schema.clone(), StateCache::default());
            let mut tiny = Harness::with_plan(plan, schema, StateCache::new(256));
            assert_eq!(
                run(&mut roomy, &changes),
                run(&mut tiny, &changes),
                "{join_type} seed {seed}"
            );
            tiny.restart();
            let evictions = tiny.evictions;
            assert!(
                evictions > 0,
                "{join_type} seed {seed}: the tiny cache never evicted"
            );
            let rows = |h: &Harness| {
                h.operator
                    .join_state()
                    .iter()
                    .map(|s| (s.rows, s.distinct_keys))
                    .collect::<Vec<_>>()
            };
            assert_eq!(rows(&roomy), rows(&tiny));
        }
    }
}

/// A side that is append-only with one row per key lets the other side's matched rows go: the
/// answers are those of the join keeping everything, with deletes and late matches on the
/// other side, for every join type, and the state is smaller.
#[test]
fn rows_matched_by_a_fixed_key_are_not_kept_and_answers_stay() {
    let (mut kept, mut dropped) = (0, 0);
    for join_type in JOIN_TYPES {
        for fixed in [0, 1] {
            for seed in 1..8u64 {
                let (mut append_only, mut unique) = ([false, false], [false, false]);
                append_only[fixed] = true;
                unique[fixed] = true;
                let changes = random_changes(seed, 80, append_only, unique);
                let with_filter = seed % 3 == 0;
                let (plan, schema) =
                    with_sides(join_type, with_filter, [false, false], [false, false]);
                let mut keeping = Harness::with_plan(plan, schema, StateCache::default());
                let (plan, schema) = with_sides(join_type, with_filter, append_only, unique);
                let mut dropping = Harness::with_plan(plan, schema, StateCache::new(512));
                assert_eq!(
                    run(&mut keeping, &changes),
                    run(&mut dropping, &changes),
                    "{join_type}, side {fixed} fixed, seed {seed}"
                );
                let rows = |h: &Harness| h.operator.join_state()[1 - fixed].rows;
                assert!(rows(&dropping) <= rows(&keeping));
                (kept, dropped) = (kept + rows(&keeping), dropped + rows(&dropping));
            }
        }
    }
    assert!(dropped * 2 < kept, "kept {dropped} rows of {kept}");
}

#[test]
fn a_row_arriving_to_a_fixed_key_is_not_kept() {
    let (plan, schema) = with_sides(JoinType::Inner, false, [false, true], [false, true]);
    let mut h = Harness::with_plan(plan, schema, StateCache::default());
    // Left rows waiting for key 7 are kept until the right row of key 7 comes; then they go.
    h.push(0, "+ 1 7 10\n+ 2 8 11");
    assert_eq!(h.operator.join_state()[0].rows, 2);
    assert_eq!(h.push(1, "+ 5 7 20"), ["+ 7 10 7 20 key 1 5"]);
    assert_eq!(h.operator.join_state()[0].rows, 1);
    // A left row of key 7 now matches at once and is not kept; its delete still retracts.
    assert_eq!(h.push(0, "+ 3 7 12"), ["+ 7 12 7 20 key 3 5"]);
    assert_eq!(h.operator.join_state()[0].rows, 1);
    h.restart();
    assert_eq!(h.push(0, "- 3 7 12"), ["- 7 12 7 20 key 3 5"]);
    assert_eq!(h.view(), ["7 10 7 20 key 1 5"]);
}

#[path = "exchange_tests.rs"]
mod exchange;
