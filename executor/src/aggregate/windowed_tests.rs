//! The windowed aggregate driven by compact changelog literals (`+ k w v`: key, window end in
//! micros, value), for `SELECT k, w, count(v), max(v) ... GROUP BY k, w`.

use std::sync::Arc;

use datafusion::arrow::array::{AsArray, Int64Array, TimestampMicrosecondArray};
use datafusion::arrow::datatypes::{
    DataType, Field, Int64Type, Schema, SchemaRef, TimeUnit, TimestampMicrosecondType,
};
use datafusion::functions_aggregate::{count::count_udaf, min_max::max_udaf};
use datafusion::physical_expr::aggregate::AggregateExprBuilder;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use eddy_planner::{AggregatePlan, WindowBound};
use eddy_storage::{EpochBatch, MemStore, Store};

use super::WindowedAggregateOperator;
use crate::aggregate::AggregateOperator;
use crate::state_table::{StateCache, StateContext};
use crate::{Barrier, Message, Op, Operator, StreamChunk, Watermark};

const STATE: u32 = 100;

/// A store and a cache for the operators' state tables (`cache` bytes).
fn state(cache: usize) -> StateContext {
    StateContext::new(
        Arc::new(MemStore::default()),
        Arc::new(StateCache::new(cache)),
    )
}

/// The state pages of `table` in the store (not the table's counters, markers or index).
fn pages(store: &dyn Store, table: u32) -> usize {
    let rows = store.scan_table(table).unwrap();
    rows.iter()
        .filter(|(key, _)| !key.starts_with(&[0xFF]))
        .count()
}

fn time() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, None)
}

fn input_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("w", time(), true),
        Field::new("v", DataType::Int64, true),
    ]))
}

fn chunk(text: &str) -> StreamChunk {
    let (mut ks, mut ws, mut vs) = (Vec::new(), Vec::new(), Vec::new());
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let parts: Vec<i64> = line[1..]
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        assert!(line.starts_with('+'), "the input only inserts");
        ks.push(parts[0]);
        ws.push(parts[1]);
        vs.push(parts[2]);
    }
    let ids = Int64Array::from_iter_values(0..ks.len() as i64);
    StreamChunk::new(
        vec![Op::Insert; ks.len()],
        &input_schema(),
        vec![
            Arc::new(Int64Array::from(ks)),
            Arc::new(TimestampMicrosecondArray::from(ws)),
            Arc::new(Int64Array::from(vs)),
        ],
        vec![Arc::new(ids)],
    )
    .unwrap()
}

fn plan(emit_on_window_close: bool) -> AggregatePlan {
    let schema = input_schema();
    let v: Arc<dyn PhysicalExpr> = Arc::new(Column::new("v", 2));
    let count = AggregateExprBuilder::new(count_udaf(), vec![v.clone()])
        .schema(schema.clone())
        .alias("c")
        .build()
        .unwrap();
    let max = AggregateExprBuilder::new(max_udaf(), vec![v])
        .schema(schema)
        .alias("m")
        .build()
        .unwrap();
    AggregatePlan {
        group_exprs: vec![Arc::new(Column::new("k", 0)), Arc::new(Column::new("w", 1))],
        aggregates: vec![Arc::new(count), Arc::new(max)],
        filters: vec![None, None],
        input_append_only: true,
        window: Some(WindowBound::End { group_index: 1 }),
        watermarked: true,
        watermark_clock: 0,
        watermark_shift: 0,
        session: None,
        emit_on_window_close,
        grouping_sets: None,
        input_schema: input_schema(),
        schema: Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("w", time(), true),
            Field::new("c", DataType::Int64, true),
            Field::new("m", DataType::Int64, true),
        ])),
    }
}

/// Renders emitted chunks as `op k w c m` lines.
fn render(out: Vec<Message>) -> Vec<String> {
    let mut lines = Vec::new();
    for message in out {
        let Message::Chunk(chunk) = message else {
            continue;
        };
        let columns = chunk.visible_columns();
        for (i, op) in chunk.ops.iter().enumerate() {
            let int = |c: usize| columns[c].as_primitive::<Int64Type>().value(i);
            let w = columns[1]
                .as_primitive::<TimestampMicrosecondType>()
                .value(i);
            let op = match op {
                Op::Insert => "+",
                Op::Delete => "-",
                Op::UpdateDelete => "U-",
                Op::UpdateInsert => "U+",
            };
            lines.push(format!("{op} {} {w} {} {}", int(0), int(2), int(3)));
        }
    }
    lines
}

fn barrier(operator: &mut dyn Operator, store: &dyn Store, epoch: u64) -> Vec<String> {
    let mut batch = EpochBatch::default();
    let mut out = Vec::new();
    operator
        .process_barrier(Barrier { epoch }, &mut batch, &mut out)
        .unwrap();
    store.commit(&batch).unwrap();
    render(out)
}

fn push(operator: &mut dyn Operator, text: &str) {
    let mut out = Vec::new();
    operator.process_chunk(chunk(text), &mut out).unwrap();
    assert!(
        out.is_empty(),
        "rows are emitted at barriers and watermarks"
    );
}

fn watermark(operator: &mut dyn Operator, value: i64) -> Vec<String> {
    let mut out = Vec::new();
    operator
        .process_watermark(Watermark::at(0, value), &mut out)
        .unwrap();
    render(out)
}

#[test]
fn is_chosen_only_for_windowed_append_only_groups() {
    assert!(WindowedAggregateOperator::supports(&plan(false)));
    let mut retracting = plan(false);
    retracting.input_append_only = false;
    assert!(!WindowedAggregateOperator::supports(&retracting));
    let mut unwindowed = plan(false);
    unwindowed.window = None;
    assert!(!WindowedAggregateOperator::supports(&unwindowed));
    // Both averages run vectorized; the exact (decimal) one is told apart, since views created
    // before it had a vectorized form keep its state in the general operator.
    for (data_type, exact) in [
        (DataType::Decimal128(20, 2), true),
        (DataType::Float64, false),
    ] {
        let schema = Arc::new(Schema::new(vec![Field::new("d", data_type, true)]));
        let avg = AggregateExprBuilder::new(
            datafusion::functions_aggregate::average::avg_udaf(),
            vec![Arc::new(Column::new("d", 0))],
        )
        .schema(schema)
        .alias("a")
        .build()
        .unwrap();
        let mut averaging = plan(false);
        averaging.aggregates[1] = Arc::new(avg);
        assert!(WindowedAggregateOperator::supports(&averaging));
        assert_eq!(WindowedAggregateOperator::has_exact_avg(&averaging), exact);
    }
}

#[test]
fn emits_inserts_then_changed_groups_as_update_pairs() {
    let state = state(1 << 20);
    let store = state.store.clone();
    let store = store.as_ref();
    let mut operator = WindowedAggregateOperator::new(plan(false), STATE, &state).unwrap();
    // One chunk across two windows.
    push(&mut operator, "+ 1 10 5\n+ 2 10 7\n+ 1 20 3\n+ 1 10 9");
    assert_eq!(
        barrier(&mut operator, store, 1),
        vec!["+ 1 10 2 9", "+ 2 10 1 7", "+ 1 20 1 3"]
    );
    // Group (1, 10) changes, (2, 10) is untouched, (3, 10) is new.
    push(&mut operator, "+ 1 10 4\n+ 3 10 1");
    assert_eq!(
        barrier(&mut operator, store, 2),
        vec!["U- 1 10 2 9", "U+ 1 10 3 9", "+ 3 10 1 1"]
    );
    // Nothing new: nothing emitted, nothing written.
    assert!(barrier(&mut operator, store, 3).is_empty());
    assert_eq!(pages(store, STATE), 2, "one page per window");
}

#[test]
fn restored_state_continues_exactly_and_closed_windows_leave_no_state() {
    let state = state(1 << 20);
    let store = state.store.clone();
    let store = store.as_ref();
    let mut operator = WindowedAggregateOperator::new(plan(false), STATE, &state).unwrap();
    push(&mut operator, "+ 1 10 5\n+ 2 20 7");
    barrier(&mut operator, store, 1);
    // Uncommitted input is lost with the operator, as in a crash.
    push(&mut operator, "+ 1 10 1000");
    drop(operator);

    let mut restored = WindowedAggregateOperator::new(plan(false), STATE, &state).unwrap();
    assert_eq!(restored.state_rows(), 2);
    assert_eq!(restored.open_windows(), 2);
    assert_eq!(restored.windows.len(), 0, "no window is read at open");
    push(&mut restored, "+ 1 10 6\n+ 2 20 1");
    // The watermark closes window 10: its change is emitted as it closes.
    assert_eq!(
        watermark(&mut restored, 10),
        vec!["U- 1 10 1 5", "U+ 1 10 2 6"]
    );
    assert_eq!(
        barrier(&mut restored, store, 2),
        vec!["U- 2 20 1 7", "U+ 2 20 2 7"]
    );
    assert_eq!(restored.open_windows(), 1);
    assert_eq!(pages(store, STATE), 1, "window 10's page is gone");
}

#[test]
fn emit_on_window_close_emits_each_group_once_when_its_window_closes() {
    let state = state(1 << 20);
    let store = state.store.clone();
    let store = store.as_ref();
    let mut operator = WindowedAggregateOperator::new(plan(true), STATE, &state).unwrap();
    push(&mut operator, "+ 1 10 5\n+ 2 10 7\n+ 1 20 3");
    assert!(barrier(&mut operator, store, 1).is_empty());
    push(&mut operator, "+ 1 10 8");
    assert!(
        watermark(&mut operator, 9).is_empty(),
        "window 10 is still open"
    );
    drop(operator);
    // The last input was not committed: after a restart window 10 closes without it.
    let mut restored = WindowedAggregateOperator::new(plan(true), STATE, &state).unwrap();
    assert_eq!(
        watermark(&mut restored, 15),
        vec!["+ 1 10 1 5", "+ 2 10 1 7"]
    );
    barrier(&mut restored, store, 2);
    assert_eq!(watermark(&mut restored, 20), vec!["+ 1 20 1 3"]);
    barrier(&mut restored, store, 3);
    assert_eq!(pages(store, STATE), 0);
}

#[test]
fn agrees_with_the_general_operator_over_many_groups_and_pages() {
    // A 4 KiB cache: every window's pages are read back after the restart.
    let windowed_state = state(4096);
    let store = windowed_state.store.clone();
    let store = store.as_ref();
    // The general operator's state behind a 4 KiB cache: every group is read back each round.
    let general_state = crate::state_table::StateContext::new(
        std::sync::Arc::new(MemStore::default()),
        std::sync::Arc::new(crate::state_table::StateCache::new(4096)),
    );
    let general_store = general_state.store.clone();
    let mut windowed = WindowedAggregateOperator::new(plan(false), STATE, &windowed_state).unwrap();
    let mut general = AggregateOperator::new(plan(false), STATE, &general_state).unwrap();
    let mut epoch = 0;
    for round in 0..4i64 {
        // 10,000 groups over three windows: several state pages per window.
        let text: String = (0..12_000i64)
            .map(|i| {
                format!(
                    "+ {} {} {}\n",
                    (i * 7 + round) % 10_000,
                    10 * (i % 3),
                    i % 97
                )
            })
            .collect();
        push(&mut windowed, &text);
        push(&mut general, &text);
        epoch += 1;
        let mut a = barrier(&mut windowed, store, epoch);
        let mut b = barrier(&mut general, general_store.as_ref(), epoch);
        a.sort();
        b.sort();
        assert_eq!(a, b, "round {round}");
        if round == 1 {
            windowed = WindowedAggregateOperator::new(plan(false), STATE, &windowed_state).unwrap();
            general = AggregateOperator::new(plan(false), STATE, &general_state).unwrap();
        }
    }
    assert!(pages(store, STATE) >= 6);
}

/// In two phases on workers (each chunk aggregated on its own, the partial states merged by
/// three instances behind an exchange): the same changes at every barrier, the same rows at
/// window close, across a restart, as the operator taking rows.
#[test]
fn two_phases_behind_an_exchange_agree_with_one() {
    use crate::aggregate::PartialAggregateOperator;
    use crate::exchange::ExchangeOperator;
    for close in [false, true] {
        let (whole, split_state) = (state(1 << 20), state(4096));
        let (store, parts) = (whole.store.clone(), split_state.store.clone());
        let (store, parts) = (store.as_ref(), parts.as_ref());
        let one = |state: &StateContext| WindowedAggregateOperator::new(plan(close), STATE, state);
        let phased = |state: &StateContext| {
            let instances: Vec<Box<dyn Operator>> = (0..3)
                .map(|i| {
                    let op = WindowedAggregateOperator::new(plan(close), STATE + i, state).unwrap();
                    Box::new(op.merging_partials()) as Box<dyn Operator>
                })
                .collect();
            let schema = one(state).unwrap().partial_schema();
            let keys: Vec<Arc<dyn PhysicalExpr>> =
                vec![Arc::new(Column::new("k", 0)), Arc::new(Column::new("w", 1))];
            let workers = Arc::new(crate::workers::Workers::new(2));
            ExchangeOperator::new(instances, vec![keys], workers)
                .with_local(Box::new(PartialAggregateOperator::new(plan(close), schema)))
        };
        let mut single: Box<dyn Operator> = Box::new(one(&whole).unwrap());
        let mut split: Box<dyn Operator> = Box::new(phased(&split_state));
        let mut epoch = 0;
        for round in 0..6i64 {
            // A hot key (0) takes half the rows; windows end at 10, 20, 30, 40 and close as
            // the watermark passes them.
            let text: String = (0..3_000i64)
                .map(|i| {
                    let k = if i % 2 == 0 { 0 } else { (i * 7 + round) % 500 };
                    format!("+ {k} {} {}\n", 10 * (1 + round / 2 + i % 2), i % 89)
                })
                .collect();
            push(single.as_mut(), &text);
            push(split.as_mut(), &text);
            epoch += 1;
            let (mut a, mut b) = (
                barrier(single.as_mut(), store, epoch),
                barrier(split.as_mut(), parts, epoch),
            );
            a.sort();
            b.sort();
            assert_eq!(a, b, "barrier of round {round}, close {close}");
            let (mut a, mut b) = (
                watermark(single.as_mut(), 10 * (round / 2)),
                watermark(split.as_mut(), 10 * (round / 2)),
            );
            a.sort();
            b.sort();
            assert_eq!(a, b, "watermark of round {round}, close {close}");
            if round == 2 {
                single = Box::new(one(&whole).unwrap());
                split = Box::new(phased(&split_state));
            }
        }
        assert!(pages(parts, STATE + 2) > 0);
    }
}

/// A table written before state tables (pages under `W ++ end ++ page`, no counters or index)
/// is read at open and moves to the state table's layout in the first epoch.
#[test]
fn state_of_the_older_layout_moves_and_continues() {
    let state = state(1 << 20);
    let store = state.store.clone();
    let store = store.as_ref();
    let mut operator = WindowedAggregateOperator::new(plan(false), STATE, &state).unwrap();
    push(&mut operator, "+ 1 10 5\n+ 2 10 7\n+ 1 20 3");
    barrier(&mut operator, store, 1);
    drop(operator);
    let mut epoch = EpochBatch::default();
    for (key, value) in store.scan_table(STATE).unwrap() {
        epoch.delete(STATE, &key);
        if !key.starts_with(&[0xFF]) {
            let old = [&[b'W'][..], &key[2..]].concat();
            epoch.put(STATE, &old, value);
        }
    }
    store.commit(&epoch).unwrap();

    let mut moved = WindowedAggregateOperator::new(plan(false), STATE, &state).unwrap();
    assert_eq!((moved.state_rows(), moved.open_windows()), (3, 2));
    push(&mut moved, "+ 1 10 9");
    assert_eq!(
        barrier(&mut moved, store, 2),
        vec!["U- 1 10 1 5", "U+ 1 10 2 9"]
    );
    assert!(store
        .scan_table(STATE)
        .unwrap()
        .iter()
        .all(|(key, _)| key[0] != b'W'));
    let mut reopened = WindowedAggregateOperator::new(plan(false), STATE, &state).unwrap();
    assert_eq!((reopened.state_rows(), reopened.windows.len()), (3, 0));
    assert_eq!(
        watermark(&mut reopened, 25),
        Vec::<String>::new(),
        "every change was emitted before"
    );
    barrier(&mut reopened, store, 3);
    assert_eq!(pages(store, STATE), 0);
}
