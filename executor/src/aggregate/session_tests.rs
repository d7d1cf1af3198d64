//! The session aggregate against sessions computed in batch, with a tiny cache and restarts, and
//! from a table written in the layout before state tables.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{AsArray, Int64Array, TimestampMicrosecondArray};
use datafusion::arrow::datatypes::{
    DataType, Field, Int64Type, Schema, SchemaRef, TimeUnit, TimestampMicrosecondType,
};
use datafusion::functions_aggregate::{min_max::max_udaf, sum::sum_udaf};
use datafusion::physical_expr::aggregate::AggregateExprBuilder;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use eddy_planner::{AggregatePlan, SessionWindow};
use eddy_storage::{EpochBatch, MemStore};

use super::SessionAggregateOperator;
use crate::state_table::{StateCache, StateContext};
use crate::test_random::Random;
use crate::{Barrier, Message, Op, Operator, StreamChunk, Watermark};

const GAP: i64 = 10;
const TABLE: u32 = 50;

fn time() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, None)
}

/// `k, v, window_start, window_end`: each row as the window operator gives it, its own session.
fn input_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
        Field::new("window_start", time(), true),
        Field::new("window_end", time(), true),
    ]))
}

/// `SELECT k, window_start, window_end, sum(v), max(v) ... GROUP BY k, window_start, window_end`
/// over SESSION windows of gap `GAP`.
fn plan(emit_on_window_close: bool) -> AggregatePlan {
    let schema = input_schema();
    let v: Arc<dyn PhysicalExpr> = Arc::new(Column::new("v", 1));
    let aggregate = |udaf, alias: &str| {
        Arc::new(
            AggregateExprBuilder::new(udaf, vec![v.clone()])
                .schema(schema.clone())
                .alias(alias)
                .build()
                .unwrap(),
        )
    };
    AggregatePlan {
        group_exprs: vec![
            Arc::new(Column::new("k", 0)),
            Arc::new(Column::new("window_start", 2)),
            Arc::new(Column::new("window_end", 3)),
        ],
        aggregates: vec![aggregate(sum_udaf(), "s"), aggregate(max_udaf(), "m")],
        filters: vec![None, None],
        input_append_only: true,
        window: None,
        watermarked: true,
        watermark_clock: 0,
        watermark_shift: 0,
        session: Some(SessionWindow {
            gap: GAP,
            start_index: Some(1),
            end_index: Some(2),
            keep_column: None,
        }),
        emit_on_window_close,
        grouping_sets: None,
        input_schema: input_schema(),
        schema: Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("window_start", time(), true),
            Field::new("window_end", time(), true),
            Field::new("s", DataType::Int64, true),
            Field::new("m", DataType::Int64, true),
        ])),
    }
}

/// A session as the view holds it: (k, start, end) → (sum, max).
type View = BTreeMap<(i64, i64, i64), (i64, i64)>;

struct Harness {
    operator: SessionAggregateOperator,
    state: StateContext,
    emit_on_close: bool,
    view: View,
    /// Every change emitted, in order.
    changes: Vec<String>,
    evictions: u64,
}

impl Harness {
    fn new(emit_on_close: bool, cache: StateCache) -> Self {
        let state = StateContext::new(Arc::new(MemStore::default()), Arc::new(cache));
        Self {
            operator: SessionAggregateOperator::new(plan(emit_on_close), TABLE, &state).unwrap(),
            state,
            emit_on_close,
            view: View::new(),
            changes: Vec::new(),
            evictions: 0,
        }
    }

    fn apply(&mut self, out: Vec<Message>) {
        for message in out {
            let Message::Chunk(chunk) = message else {
                continue;
            };
            let int = |i: usize| chunk.batch.column(i).as_primitive::<Int64Type>().clone();
            let at = |i: usize| {
                (chunk.batch.column(i))
                    .as_primitive::<TimestampMicrosecondType>()
                    .clone()
            };
            let (k, start, end, s, m) = (int(0), at(1), at(2), int(3), int(4));
            for (i, op) in chunk.ops.iter().enumerate() {
                let key = (k.value(i), start.value(i), end.value(i));
                let values = (s.value(i), m.value(i));
                self.changes.push(format!("{op:?} {key:?} {values:?}"));
                if op.is_insert() {
                    assert!(self.view.insert(key, values).is_none(), "{key:?} twice");
                } else {
                    assert_eq!(
                        self.view.remove(&key),
                        Some(values),
                        "{key:?} not in the view"
                    );
                }
            }
        }
    }

    fn push(&mut self, rows: &[(i64, i64, i64)]) {
        let column =
            |f: fn(&(i64, i64, i64)) -> i64| Int64Array::from_iter_values(rows.iter().map(f));
        let times = |shift: i64| {
            TimestampMicrosecondArray::from_iter_values(rows.iter().map(|r| r.2 + shift))
        };
        let chunk = StreamChunk::new(
            vec![Op::Insert; rows.len()],
            &input_schema(),
            vec![
                Arc::new(column(|r| r.0)),
                Arc::new(column(|r| r.1)),
                Arc::new(times(0)),
                Arc::new(times(GAP)),
            ],
            vec![],
        )
        .unwrap();
        let mut out = Vec::new();
        self.operator.process_chunk(chunk, &mut out).unwrap();
        self.apply(out);
    }

    fn watermark(&mut self, value: i64) {
        let mut out = Vec::new();
        let watermark = Watermark {
            clock: 0,
            value,
            idle: false,
        };
        self.operator
            .process_watermark(watermark, &mut out)
            .unwrap();
        self.apply(out);
    }

    fn barrier(&mut self) {
        let mut epoch = EpochBatch::default();
        let mut out = Vec::new();
        self.operator
            .process_barrier(Barrier { epoch: 1 }, &mut epoch, &mut out)
            .unwrap();
        self.state.store.commit(&epoch).unwrap();
        self.apply(out);
    }

    fn restart(&mut self) {
        self.barrier();
        self.evictions += self.operator.state_tables()[0].evictions;
        self.operator =
            SessionAggregateOperator::new(plan(self.emit_on_close), TABLE, &self.state).unwrap();
    }
}

/// Sessions over `rows` (k, v, t) computed in batch: per key, rows sorted by time, a new session
/// wherever the gap to the previous session's end is reached.
fn sessions(rows: &[(i64, i64, i64)]) -> View {
    let mut sorted = rows.to_vec();
    sorted.sort_by_key(|r| (r.0, r.2));
    let mut view = View::new();
    let mut open: Option<(i64, i64, i64, i64, i64)> = None;
    for (k, v, t) in sorted {
        match &mut open {
            Some((ok, _, end, s, m)) if *ok == k && t < *end => {
                *end = (*end).max(t + GAP);
                *s += v;
                *m = (*m).max(v);
            }
            _ => {
                if let Some((k, start, end, s, m)) = open.take() {
                    view.insert((k, start, end), (s, m));
                }
                open = Some((k, t, t + GAP, v, v));
            }
        }
    }
    if let Some((k, start, end, s, m)) = open {
        view.insert((k, start, end), (s, m));
    }
    view
}

/// Random rows at or after the watermark, watermarks and barriers; a restart every
/// `restart_every` barriers. Checks the view against batch sessions and returns the changes.
fn run(seed: u64, emit_on_close: bool, cache: StateCache, restart_every: u64) -> Harness {
    let mut random = Random::seeded(seed);
    let mut harness = Harness::new(emit_on_close, cache);
    let (mut rows, mut watermark) = (Vec::new(), 0);
    for step in 1..=50u64 {
        let chunk: Vec<(i64, i64, i64)> = (0..1 + random.below(8))
            .map(|_| {
                let t = watermark + random.below(3 * GAP as u64) as i64;
                (random.below(5) as i64, random.below(100) as i64, t)
            })
            .collect();
        rows.extend_from_slice(&chunk);
        harness.push(&chunk);
        if step % 2 == 0 {
            watermark += random.below(GAP as u64) as i64;
            harness.watermark(watermark);
        }
        if step % 3 == 0 {
            harness.barrier();
            if !emit_on_close {
                assert_eq!(harness.view, sessions(&rows), "seed {seed}, step {step}");
            }
            if step % (3 * restart_every) == 0 {
                harness.restart();
            }
        }
    }
    // A watermark past every row closes every session.
    harness.watermark(watermark + 10 * GAP);
    harness.barrier();
    assert_eq!(harness.view, sessions(&rows), "seed {seed}, at the end");
    assert_eq!(
        harness.operator.state_rows(),
        0,
        "seed {seed}: sessions left open"
    );
    harness
}

#[test]
fn sessions_match_the_batch_answer_with_a_tiny_cache_and_restarts() {
    for emit_on_close in [false, true] {
        for seed in 1..10 {
            let roomy = run(seed, emit_on_close, StateCache::default(), 1_000);
            let tiny = run(seed, emit_on_close, StateCache::new(256), 2);
            assert_eq!(
                roomy.changes, tiny.changes,
                "seed {seed}, on close {emit_on_close}"
            );
            assert!(
                tiny.evictions > 0,
                "seed {seed}: the tiny cache never evicted"
            );
        }
    }
}

/// A table of the layout before state tables (sessions keyed by partition columns and start)
/// moves to the state table's layout: the sessions go on growing, and a session that was
/// emitted before is replaced, not emitted twice.
#[test]
fn state_of_the_older_layout_moves_and_continues() {
    let mut old = Harness::new(false, StateCache::default());
    old.push(&[(1, 5, 100), (2, 7, 100)]);
    old.barrier();
    // Rewrite the state in the older layout: key = partition columns ++ start, no counters.
    let state = old.state.clone();
    let stored = state.store.scan_table(TABLE).unwrap();
    let mut epoch = EpochBatch::default();
    for (key, value) in &stored {
        epoch.delete(TABLE, key);
        if key.starts_with(&[0xFF]) {
            continue;
        }
        let start = super::time_from(&key[key.len() - 8..]).unwrap();
        let partition = &key[2..key.len() - 8];
        let columns = old
            .operator
            .partition_codec
            .as_ref()
            .unwrap()
            .decode([partition])
            .unwrap();
        let mut columns = columns.columns().to_vec();
        columns.push(Arc::new(Int64Array::from(vec![start])));
        let old_key = old.operator.state_key_codec.encode(&columns, 1).unwrap();
        epoch.put(TABLE, old_key.row(0).as_ref(), value.clone());
    }
    state.store.commit(&epoch).unwrap();

    let mut moved = Harness {
        operator: SessionAggregateOperator::new(plan(false), TABLE, &state).unwrap(),
        state,
        emit_on_close: false,
        view: old.view.clone(),
        changes: Vec::new(),
        evictions: 0,
    };
    assert_eq!(moved.operator.state_rows(), 2);
    moved.restart();
    moved.push(&[(1, 9, 105)]);
    moved.barrier();
    let expected = sessions(&[(1, 5, 100), (2, 7, 100), (1, 9, 105)]);
    assert_eq!(moved.view, expected);
    assert_eq!(
        moved.changes.len(),
        2,
        "one update of key 1's session: {:?}",
        moved.changes
    );
}
