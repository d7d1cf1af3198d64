//! The join behind an exchange (instances on workers) against the single join.

use std::sync::Arc;

use datafusion::arrow::array::{Array, Int64Array};
use datafusion::common::JoinType;
use eddy_planner::JoinOutputKey;

use super::{plan, run, side_schema, Harness, Random, JOIN_TYPES};
use crate::state_table::StateCache;
use crate::{Op, StreamChunk};

/// Random inserts, deletes and moves of a live row to another join key (its delete and its
/// insert under the same id, in one chunk: behind an exchange the two halves go to different
/// instances).
fn random_moves(seed: u64, steps: usize) -> Vec<(usize, String)> {
    let mut random = Random(seed);
    let mut live: [Vec<(i64, i64, i64)>; 2] = [Vec::new(), Vec::new()];
    let mut next_id = 1;
    let mut changes = Vec::new();
    for _ in 0..steps {
        let s = random.below(2) as usize;
        let mut lines = Vec::new();
        for _ in 0..1 + random.below(4) {
            let pick = random.below(4);
            if pick < 2 && !live[s].is_empty() {
                let at = random.below(live[s].len() as u64) as usize;
                let (id, k, v) = live[s][at];
                lines.push(format!("- {id} {k} {v}"));
                if pick == 0 {
                    let moved = (k + 1 + random.below(5) as i64) % 6;
                    lines.push(format!("+ {id} {moved} {v}"));
                    live[s][at] = (id, moved, v);
                } else {
                    live[s].swap_remove(at);
                }
                continue;
            }
            let (id, k, v) = (next_id, random.below(6) as i64, random.below(20) as i64);
            next_id += 1;
            live[s].push((id, k, v));
            lines.push(format!("+ {id} {k} {v}"));
        }
        changes.push((s, lines.join("\n")));
    }
    changes
}

/// The join behind an exchange (three instances on two workers) answers what the single join
/// does, change by change, through barriers and restarts, for every join type, with rows
/// moving between join keys (and so between instances) inside one chunk.
#[test]
fn instances_behind_an_exchange_give_the_same_answers() {
    for join_type in JOIN_TYPES {
        for seed in 1..6u64 {
            let changes = random_moves(seed, 60);
            let (plan, schema) = plan(join_type, seed % 2 == 0);
            let mut one = Harness::with_plan(plan.clone(), schema.clone(), StateCache::default());
            let mut three = Harness::on_instances(plan, schema, StateCache::default(), 3);
            let first = run(&mut one, &changes);
            assert_eq!(first, run(&mut three, &changes), "{join_type} seed {seed}");
            let rows = |h: &Harness| {
                h.operator
                    .join_state()
                    .iter()
                    .map(|s| (s.rows, s.distinct_keys))
                    .collect::<Vec<_>>()
            };
            assert_eq!(rows(&one), rows(&three), "{join_type} seed {seed}");
            assert_eq!(one.keyed, three.keyed, "{join_type} seed {seed}");
            assert_eq!(three.operator.state_tables().len(), 6);
        }
    }
}

/// Inputs without a stream key (one row at most, as a global aggregate gives): the row's
/// update to another join key moves it between instances, and its delete must still come out
/// before its insert, for the one output key it has.
#[test]
fn a_keyless_row_moving_between_instances_keeps_its_order() {
    let (mut plan, schema) = plan(JoinType::Left, false);
    plan.left.key_fields.clear();
    plan.right.key_fields.clear();
    plan.output_key = JoinOutputKey::Left;
    let update = |prefix: &str, from: i64, to: i64| {
        let (ks, vs) = (vec![from, to], vec![1, 1]);
        StreamChunk::new(
            vec![Op::UpdateDelete, Op::UpdateInsert],
            &side_schema(prefix),
            vec![
                Arc::new(Int64Array::from(ks)),
                Arc::new(Int64Array::from(vs)),
            ],
            vec![],
        )
        .unwrap()
    };
    let first = |prefix: &str| {
        let columns: Vec<Arc<dyn Array>> = vec![
            Arc::new(Int64Array::from(vec![0])),
            Arc::new(Int64Array::from(vec![1])),
        ];
        StreamChunk::new(vec![Op::Insert], &side_schema(prefix), columns, vec![]).unwrap()
    };
    let mut one = Harness::with_plan(plan.clone(), schema.clone(), StateCache::default());
    let mut three = Harness::on_instances(plan, schema, StateCache::default(), 3);
    for h in [&mut one, &mut three] {
        h.push_chunk(0, first("l"));
        h.push_chunk(1, first("r"));
        for (from, to) in (0..12).zip(1..13) {
            h.push_chunk(0, update("l", from, to));
            assert_eq!(h.keyed.len(), 1, "the left row went missing at key {to}");
        }
    }
    assert_eq!(one.keyed, three.keyed);
}
