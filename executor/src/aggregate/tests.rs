//! The aggregate operator driven by compact changelog literals (`+ k v`, `- k v`).

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use datafusion::functions_aggregate::{min_max::max_udaf, sum::sum_udaf};
use datafusion::physical_expr::aggregate::AggregateExprBuilder;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use eddy_planner::{AggregatePlan, GroupingSetSpec};
use eddy_storage::{EpochBatch, MemStore, Store};

use crate::state_table::{StateCache, StateContext};

fn state() -> StateContext {
    StateContext::new(
        Arc::new(MemStore::default()),
        Arc::new(StateCache::default()),
    )
}

use super::AggregateOperator;
use crate::{Barrier, Message, Op, Operator, StreamChunk};

fn input_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
    ]))
}

/// `"+ 1 10\n- 1 10"`: one row per line, op then `k` and `v`; a hidden row id is the key.
fn chunk(text: &str) -> StreamChunk {
    let mut ops = Vec::new();
    let (mut ks, mut vs) = (Vec::new(), Vec::new());
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let parts: Vec<&str> = line.split_whitespace().collect();
        ops.push(match parts[0] {
            "+" => Op::Insert,
            "-" => Op::Delete,
            "U-" => Op::UpdateDelete,
            "U+" => Op::UpdateInsert,
            other => panic!("unknown op {other}"),
        });
        ks.push(parts[1].parse::<i64>().unwrap());
        vs.push(parts[2].parse::<i64>().unwrap());
    }
    let ids = Int64Array::from_iter_values(0..ops.len() as i64);
    StreamChunk::new(
        ops,
        &input_schema(),
        vec![
            Arc::new(Int64Array::from(ks)),
            Arc::new(Int64Array::from(vs)),
        ],
        vec![Arc::new(ids)],
    )
    .unwrap()
}

/// `SELECT k, sum(v), max(v) ... GROUP BY k`.
fn plan(input_append_only: bool) -> AggregatePlan {
    let schema = input_schema();
    let v: Arc<dyn PhysicalExpr> = Arc::new(Column::new("v", 1));
    let sum = AggregateExprBuilder::new(sum_udaf(), vec![v.clone()])
        .schema(schema.clone())
        .alias("s")
        .build()
        .unwrap();
    let max = AggregateExprBuilder::new(max_udaf(), vec![v])
        .schema(schema)
        .alias("m")
        .build()
        .unwrap();
    AggregatePlan {
        group_exprs: vec![Arc::new(Column::new("k", 0))],
        aggregates: vec![Arc::new(sum), Arc::new(max)],
        filters: vec![None, None],
        input_append_only,
        window: None,
        watermarked: false,
        watermark_clock: 0,
        watermark_shift: 0,
        session: None,
        emit_on_window_close: false,
        grouping_sets: None,
        input_schema: input_schema(),
        schema: Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("s", DataType::Int64, true),
            Field::new("m", DataType::Int64, true),
        ])),
    }
}

/// Runs a barrier and renders what the operator emitted as `op k s m` lines.
fn barrier(operator: &mut dyn Operator, store: &dyn Store, epoch: u64) -> Vec<String> {
    let mut batch = EpochBatch::default();
    let mut out = Vec::new();
    operator
        .process_barrier(Barrier { epoch }, &mut batch, &mut out)
        .unwrap();
    store.commit(&batch).unwrap();
    let mut lines = Vec::new();
    for message in out {
        let Message::Chunk(chunk) = message else {
            continue;
        };
        let columns = chunk.visible_columns();
        for (i, op) in chunk.ops.iter().enumerate() {
            let value = |c: usize| {
                let array = columns[c].as_primitive::<Int64Type>();
                if array.is_null(i) {
                    "NULL".to_string()
                } else {
                    array.value(i).to_string()
                }
            };
            let op = match op {
                Op::Insert => "+",
                Op::Delete => "-",
                Op::UpdateDelete => "U-",
                Op::UpdateInsert => "U+",
            };
            lines.push(format!("{op} {} {} {}", value(0), value(1), value(2)));
        }
    }
    lines
}

#[test]
fn emits_inserts_then_update_pairs_then_deletes() {
    let state = state();
    let store = state.store.as_ref();
    let mut operator = AggregateOperator::new(plan(false), 100, &state).unwrap();
    let mut out = Vec::new();
    operator
        .process_chunk(chunk("+ 1 10\n+ 1 30\n+ 2 5"), &mut out)
        .unwrap();
    assert!(out.is_empty(), "rows are emitted at the barrier");
    assert_eq!(
        barrier(&mut operator, store, 1),
        vec!["+ 1 40 30", "+ 2 5 5"]
    );

    // Retracting the maximum reveals the next one; the old row is retracted first.
    operator.process_chunk(chunk("- 1 30"), &mut out).unwrap();
    assert_eq!(
        barrier(&mut operator, store, 2),
        vec!["U- 1 40 30", "U+ 1 10 10"]
    );

    // A change that leaves the result as it was emits nothing.
    operator
        .process_chunk(chunk("+ 2 7\n- 2 7"), &mut out)
        .unwrap();
    assert!(barrier(&mut operator, store, 3).is_empty());

    // The last row of a group going away deletes the group's row and its state.
    operator.process_chunk(chunk("- 2 5"), &mut out).unwrap();
    assert_eq!(barrier(&mut operator, store, 4), vec!["- 2 5 5"]);
    assert_eq!(operator.state_rows(), 1);
    let stored = store.scan_table(100).unwrap();
    assert_eq!(stored.iter().filter(|(k, _)| k[0] != 0xFF).count(), 1);
}

#[test]
fn state_restored_from_the_store_continues_exactly() {
    let state = state();
    let store = state.store.as_ref();
    let mut operator = AggregateOperator::new(plan(false), 100, &state).unwrap();
    let mut out = Vec::new();
    operator
        .process_chunk(chunk("+ 1 10\n+ 1 30"), &mut out)
        .unwrap();
    barrier(&mut operator, store, 1);
    // Uncommitted input is lost with the operator, as in a crash.
    operator.process_chunk(chunk("+ 1 1000"), &mut out).unwrap();
    drop(operator);

    let mut restored = AggregateOperator::new(plan(false), 100, &state).unwrap();
    restored
        .process_chunk(chunk("- 1 30\n+ 1 20"), &mut out)
        .unwrap();
    assert_eq!(
        barrier(&mut restored, store, 2),
        vec!["U- 1 40 30", "U+ 1 30 20"]
    );
}

/// State written before state tables (each group's state under its key alone, no counters)
/// moves to its place on open, and the aggregate goes on from it.
#[test]
fn state_of_the_older_layout_moves_and_continues() {
    let state = state();
    let store = state.store.as_ref();
    let mut operator = AggregateOperator::new(plan(false), 100, &state).unwrap();
    let mut out = Vec::new();
    operator
        .process_chunk(chunk("+ 1 10\n+ 1 30\n+ 2 5"), &mut out)
        .unwrap();
    barrier(&mut operator, store, 1);
    drop(operator);
    // Rewrite the table in the older layout: group key → state, nothing else.
    let mut older = EpochBatch::default();
    for (key, value) in store.scan_table(100).unwrap() {
        older.delete(100, &key);
        if key[0] != 0xFF {
            older.put(100, &key[2..], value);
        }
    }
    store.commit(&older).unwrap();

    let mut restored = AggregateOperator::new(plan(false), 100, &state).unwrap();
    assert_eq!(restored.state_rows(), 2);
    restored.process_chunk(chunk("+ 1 2"), &mut out).unwrap();
    assert_eq!(
        barrier(&mut restored, store, 2),
        vec!["U- 1 40 30", "U+ 1 42 30"]
    );
    // Moved for good: opened again, it is the current layout, with the same groups.
    let mut again = AggregateOperator::new(plan(false), 100, &state).unwrap();
    assert_eq!(again.state_rows(), 2);
    again.process_chunk(chunk("- 2 5"), &mut out).unwrap();
    assert_eq!(barrier(&mut again, store, 3), vec!["- 2 5 5"]);
    let stored = store.scan_table(100).unwrap();
    assert!(
        stored.iter().all(|(k, _)| k[0] == 0 || k[0] == 0xFF),
        "{stored:?}"
    );
}

#[test]
fn append_only_input_uses_plain_accumulators() {
    let state = state();
    let store = state.store.as_ref();
    let mut operator = AggregateOperator::new(plan(true), 100, &state).unwrap();
    let mut out = Vec::new();
    operator
        .process_chunk(chunk("+ 3 1\n+ 3 2"), &mut out)
        .unwrap();
    assert_eq!(barrier(&mut operator, store, 1), vec!["+ 3 3 2"]);
}

/// `SELECT k, sum(v) ... GROUP BY ROLLUP(k)`: the set (k) with id 0, the empty set with id 1.
fn rollup_plan() -> AggregatePlan {
    let mut plan = plan(false);
    plan.aggregates.truncate(1);
    plan.filters.truncate(1);
    plan.grouping_sets = Some(vec![
        GroupingSetSpec {
            absent: vec![false],
            id: 0,
        },
        GroupingSetSpec {
            absent: vec![true],
            id: 1,
        },
    ]);
    plan.schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("__grouping_id", DataType::UInt8, false),
        Field::new("s", DataType::Int64, true),
    ]));
    plan
}

/// Runs a barrier and renders the emitted rows as `op col col ...`, each column as text.
fn barrier_text(operator: &mut AggregateOperator, store: &dyn Store, epoch: u64) -> Vec<String> {
    let mut batch = EpochBatch::default();
    let mut out = Vec::new();
    operator
        .process_barrier(Barrier { epoch }, &mut batch, &mut out)
        .unwrap();
    store.commit(&batch).unwrap();
    let mut lines = Vec::new();
    for message in out {
        let Message::Chunk(chunk) = message else {
            continue;
        };
        let texts: Vec<_> = chunk
            .visible_columns()
            .iter()
            .map(|c| cast(c, &DataType::Utf8).unwrap())
            .collect();
        for (i, op) in chunk.ops.iter().enumerate() {
            let mut line = format!("{op:?}");
            for text in &texts {
                let text = text.as_string::<i32>();
                line.push(' ');
                line.push_str(if text.is_null(i) {
                    "NULL"
                } else {
                    text.value(i)
                });
            }
            lines.push(line);
        }
    }
    lines
}

#[test]
fn rollup_counts_each_row_once_per_set_and_keeps_the_total() {
    let state = state();
    let store = state.store.as_ref();
    let mut operator = AggregateOperator::new(rollup_plan(), 100, &state).unwrap();
    // The total's row is there before any input, as PostgreSQL's ROLLUP total is.
    assert_eq!(
        barrier_text(&mut operator, store, 1),
        vec!["Insert NULL 1 NULL"]
    );
    let mut out = Vec::new();
    operator
        .process_chunk(chunk("+ 1 10\n+ 2 5"), &mut out)
        .unwrap();
    let mut rows = barrier_text(&mut operator, store, 2);
    rows.sort();
    assert_eq!(
        rows,
        vec![
            "Insert 1 0 10",
            "Insert 2 0 5",
            "UpdateDelete NULL 1 NULL",
            "UpdateInsert NULL 1 15"
        ]
    );

    // A delete leaves every set's group it was counted in; restored state goes on from there.
    drop(operator);
    let mut operator = AggregateOperator::new(rollup_plan(), 100, &state).unwrap();
    operator.process_chunk(chunk("- 2 5"), &mut out).unwrap();
    let mut rows = barrier_text(&mut operator, store, 3);
    rows.sort();
    assert_eq!(
        rows,
        vec![
            "Delete 2 0 5",
            "UpdateDelete NULL 1 15",
            "UpdateInsert NULL 1 10"
        ]
    );
}

/// On workers in two phases (each chunk aggregated on its own, the partial states merged by
/// three instances behind an exchange): the same changes at every barrier as the operator
/// taking rows, a hot key taking half of them, across a restart of both.
#[test]
fn two_phases_behind_an_exchange_agree_with_one() {
    use super::PartialAggregateOperator;
    use crate::exchange::ExchangeOperator;
    assert!(AggregateOperator::supports_two_phases(&plan(true)));
    assert!(!AggregateOperator::supports_two_phases(&plan(false)));
    let (whole, parts) = (state(), state());
    let one = || AggregateOperator::new(plan(true), 100, &whole).unwrap();
    let phased = || {
        let instances: Vec<Box<dyn Operator>> = (0..3)
            .map(|i| {
                let op = AggregateOperator::new(plan(true), 200 + i, &parts).unwrap();
                Box::new(op.merging_partials()) as Box<dyn Operator>
            })
            .collect();
        let schema = AggregateOperator::partial_schema(&plan(true)).unwrap();
        let keys: Vec<Arc<dyn PhysicalExpr>> = vec![Arc::new(Column::new("k", 0))];
        let workers = Arc::new(crate::workers::Workers::new(2));
        ExchangeOperator::new(instances, vec![keys], workers)
            .with_local(Box::new(PartialAggregateOperator::new(plan(true), schema)))
    };
    let mut single: Box<dyn Operator> = Box::new(one());
    let mut split: Box<dyn Operator> = Box::new(phased());
    let mut out = Vec::new();
    for round in 0..6i64 {
        for part in 0..3i64 {
            let text: String = (0..1_000i64)
                .map(|i| {
                    let k = if i % 2 == 0 {
                        0
                    } else {
                        (i * 7 + round + part) % 300
                    };
                    format!("+ {k} {}\n", (i * 31 + round) % 1_000 - 500)
                })
                .collect();
            single.process_chunk(chunk(&text), &mut out).unwrap();
            split.process_chunk(chunk(&text), &mut out).unwrap();
        }
        assert!(out.is_empty(), "an aggregate emits at barriers");
        let mut a = barrier(single.as_mut(), whole.store.as_ref(), round as u64 + 1);
        let mut b = barrier(split.as_mut(), parts.store.as_ref(), round as u64 + 1);
        a.sort();
        b.sort();
        assert!(!a.is_empty());
        assert_eq!(a, b, "barrier of round {round}");
        if round == 2 {
            single = Box::new(one());
            split = Box::new(phased());
        }
    }
}
