//! The temporal filter against its definition: after every barrier the view holds exactly the
//! live rows whose `[enter, leave)` holds the clock, whatever the cache, across restarts, and
//! from a table written in the layout before state tables.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, Int64Array, TimestampMicrosecondArray};
use datafusion::arrow::datatypes::{
    DataType, Field, Int64Type, Schema, SchemaRef, TimeUnit, TimestampMicrosecondType,
};
use datafusion::physical_expr::expressions::Column;
use eddy_planner::stream::BoundOp;
use eddy_planner::{TemporalFilterPlan, TimeBound};
use eddy_storage::{EpochBatch, MemStore, RowCodec};

use super::{moment_bytes, TemporalFilterOperator, LEGACY_CLOCK_KEY};
use crate::state_table::{StateCache, StateContext};
use crate::test_random::Random;
use crate::{Barrier, Message, Op, Operator, StreamChunk};

const SECOND: i64 = 1_000_000;
const TABLE: u32 = 40;

thread_local! {
    /// The clock the operators under test read.
    static NOW: Cell<i64> = const { Cell::new(0) };
}

fn test_clock() -> i64 {
    NOW.with(Cell::get)
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
    ]))
}

fn key_fields() -> Vec<Field> {
    vec![Field::new("_id", DataType::Int64, true)]
}

/// `ts > now() - 3 s AND ts <= now() + 1 s`: a row enters one second before its time and
/// leaves three seconds after it.
fn plan() -> TemporalFilterPlan {
    let ts = || Arc::new(Column::new("ts", 1)) as _;
    TemporalFilterPlan {
        bounds: vec![
            TimeBound {
                time: ts(),
                op: BoundOp::Gt,
                offset: -3 * SECOND,
            },
            TimeBound {
                time: ts(),
                op: BoundOp::LtEq,
                offset: SECOND,
            },
        ],
    }
}

fn visible(ts: i64, now: i64) -> bool {
    ts - SECOND <= now && now < ts + 3 * SECOND
}

struct Harness {
    operator: TemporalFilterOperator,
    state: StateContext,
    /// The view: (id, ts) → count.
    view: BTreeMap<(i64, i64), i64>,
    evictions: u64,
}

impl Harness {
    fn new(cache: StateCache) -> Self {
        let state = StateContext::new(Arc::new(MemStore::default()), Arc::new(cache));
        Self {
            operator: open(&state),
            state,
            view: BTreeMap::new(),
            evictions: 0,
        }
    }

    fn apply(&mut self, out: Vec<Message>) {
        for message in out {
            let Message::Chunk(chunk) = message else {
                continue;
            };
            let ids = chunk.batch.column(0).as_primitive::<Int64Type>();
            let times = chunk
                .batch
                .column(1)
                .as_primitive::<TimestampMicrosecondType>();
            for (i, op) in chunk.ops.iter().enumerate() {
                let row = (ids.value(i), times.value(i));
                let count = self.view.entry(row).or_default();
                *count += if op.is_insert() { 1 } else { -1 };
                assert!(*count >= 0, "deleted {row:?}, not in the view");
                if *count == 0 {
                    self.view.remove(&row);
                }
            }
        }
    }

    fn push(&mut self, changes: &[(Op, i64, i64)]) {
        let ops = changes.iter().map(|c| c.0).collect();
        let ids = Int64Array::from_iter_values(changes.iter().map(|c| c.1));
        let times = TimestampMicrosecondArray::from_iter_values(changes.iter().map(|c| c.2));
        let chunk = StreamChunk::new(
            ops,
            &schema(),
            vec![Arc::new(ids.clone()), Arc::new(times)],
            vec![Arc::new(ids)],
        )
        .unwrap();
        let mut out = Vec::new();
        self.operator.process_chunk(chunk, &mut out).unwrap();
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
        self.operator = open(&self.state);
    }
}

fn open(state: &StateContext) -> TemporalFilterOperator {
    TemporalFilterOperator::with_clock(plan(), TABLE, schema(), &key_fields(), state, test_clock)
        .unwrap()
}

/// Runs random inserts and deletes of rows timed around the clock, barriers as the clock moves,
/// and a restart every `restart_every` barriers; checks the view after every barrier and
/// returns the views seen.
fn run(seed: u64, cache: StateCache, restart_every: u64) -> (Vec<Vec<(i64, i64)>>, Harness) {
    let mut random = Random::seeded(seed);
    let mut now = 1_700_000_000 * SECOND;
    NOW.with(|c| c.set(now));
    let mut harness = Harness::new(cache);
    let mut live: Vec<(i64, i64)> = Vec::new();
    let mut views = Vec::new();
    for step in 1..=60u64 {
        let mut changes = Vec::new();
        for _ in 0..1 + random.below(12) {
            if !live.is_empty() && random.below(4) == 0 {
                let (id, ts) = live.swap_remove(random.below(live.len() as u64) as usize);
                changes.push((Op::Delete, id, ts));
            } else {
                let id = random.below(1_000_000) as i64;
                let ts = now + random.below(14 * SECOND as u64) as i64 - 7 * SECOND;
                // Some rows share a time (and so a place in the state).
                let ts = if random.below(5) == 0 {
                    ts - ts % SECOND
                } else {
                    ts
                };
                live.push((id, ts));
                changes.push((Op::Insert, id, ts));
            }
        }
        harness.push(&changes);
        if step % 3 == 0 {
            now += random.below(2 * SECOND as u64) as i64;
            NOW.with(|c| c.set(now));
            harness.barrier();
            let mut expected: BTreeMap<(i64, i64), i64> = BTreeMap::new();
            for row in live.iter().filter(|(_, ts)| visible(*ts, now)) {
                *expected.entry(*row).or_default() += 1;
            }
            assert_eq!(harness.view, expected, "seed {seed}, step {step}");
            views.push(harness.view.keys().copied().collect());
        }
        if step % (3 * restart_every) == 0 {
            harness.restart();
        }
    }
    (views, harness)
}

#[test]
fn the_view_holds_the_rows_whose_bounds_hold_the_clock() {
    for seed in 1..12 {
        let (_, harness) = run(seed, StateCache::default(), 1_000);
        assert!(harness.operator.state_rows() > 0, "seed {seed}: no state");
    }
}

#[test]
fn a_tiny_cache_and_restarts_give_the_same_views() {
    for seed in 1..12 {
        let (roomy, _) = run(seed, StateCache::default(), 1_000);
        let (tiny, harness) = run(seed, StateCache::new(64), 2);
        assert_eq!(roomy, tiny, "seed {seed}");
        assert!(
            harness.evictions > 0,
            "seed {seed}: the tiny cache never evicted"
        );
        // After a restart nothing is cached: the state is read as chunks and barriers need it.
        let mut restarted = harness;
        restarted.restart();
        assert_eq!(restarted.operator.table.cached_groups(), 0);
    }
}

/// A table of the layout before state tables (rows under `partition ++ moment ++ row`, the
/// clock under one byte) moves to the state table's layout and goes on from its clock.
#[test]
fn state_of_the_older_layout_moves_and_continues() {
    let now = 1_700_000_000 * SECOND;
    // The clock the operator opens with is behind the stored one: the stored one counts.
    NOW.with(|c| c.set(now - 10 * SECOND));
    let state = StateContext::new(
        Arc::new(MemStore::default()),
        Arc::new(StateCache::default()),
    );
    let fields: Vec<Field> = schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .chain(key_fields())
        .collect();
    let codec = RowCodec::new(Arc::new(Schema::new(fields))).unwrap();
    // Row 1 is in the view (leaves at ts + 3 s); row 2 waits to enter (at ts - 1 s).
    let (in_view, waiting) = ((1, now - SECOND), (2, now + 5 * SECOND));
    let columns: Vec<Arc<dyn Array>> = vec![
        Arc::new(Int64Array::from(vec![in_view.0, waiting.0])),
        Arc::new(TimestampMicrosecondArray::from(vec![in_view.1, waiting.1])),
        Arc::new(Int64Array::from(vec![in_view.0, waiting.0])),
    ];
    let rows = codec.encode(&columns, 2).unwrap();
    let mut epoch = EpochBatch::default();
    let mut old_keys = vec![LEGACY_CLOCK_KEY.to_vec()];
    for (i, (moment, waiting, leave)) in [
        (in_view.1 + 3 * SECOND, false, in_view.1 + 3 * SECOND),
        (waiting.1 - SECOND, true, waiting.1 + 3 * SECOND),
    ]
    .into_iter()
    .enumerate()
    {
        let order = moment_bytes(moment);
        let key = crate::partition::ordered_key(&[], &order, rows.row(i).as_ref());
        let mut value = crate::partition::ordered_value(&[], &order, 17);
        value.push(u8::from(waiting));
        value.extend_from_slice(&1u64.to_le_bytes());
        value.extend_from_slice(&leave.to_le_bytes());
        epoch.put(TABLE, &key, value);
        old_keys.push(key);
    }
    epoch.put(TABLE, LEGACY_CLOCK_KEY, moment_bytes(now).to_vec());
    state.store.commit(&epoch).unwrap();

    let mut harness = Harness {
        operator: open(&state),
        state,
        view: BTreeMap::from([(in_view, 1)]),
        evictions: 0,
    };
    assert_eq!(harness.operator.now, now, "the clock moves with the rows");
    harness.restart();
    assert_eq!(harness.operator.state_rows(), 2);
    // Five seconds on: row 1 left, row 2 entered.
    NOW.with(|c| c.set(now + 5 * SECOND));
    harness.barrier();
    assert_eq!(harness.view, BTreeMap::from([(waiting, 1)]));
    assert_eq!(harness.operator.state_rows(), 1, "row 2 waits to leave");
    let stored = harness.state.store.scan_table(TABLE).unwrap();
    assert!(
        stored.iter().all(|(key, _)| !old_keys.contains(key)),
        "no row of the old layout is left"
    );
}
