//! An ASOF join side through restarts with a tiny cache, and from a table written before
//! state tables (same rows, no counters, no time index).

use std::ops::Bound;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use eddy_planner::JoinSideInfo;
use eddy_storage::{EpochBatch, MemStore};

use super::{place, AsofSide};
use crate::state_table::{StateCache, StateContext};

const TABLE: u32 = 7;

fn info() -> JoinSideInfo {
    JoinSideInfo {
        keys: Vec::new(),
        key_names: Vec::new(),
        schema: Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, true)])),
        key_fields: vec![Field::new("id", DataType::Int64, true)],
        append_only: true,
        reads: Vec::new(),
        unique_per_key: false,
    }
}

fn open(state: &StateContext) -> AsofSide {
    AsofSide::open(
        TABLE,
        "ASOF left",
        &info(),
        &[DataType::Int64],
        8,
        true,
        state,
    )
    .unwrap()
}

/// Join key `k` as the key codec encodes it.
fn key(side: &AsofSide, k: i64) -> Box<[u8]> {
    let column = Arc::new(datafusion::arrow::array::Int64Array::from(vec![k]));
    let rows = side.key_codec.encode(&[column], 1).unwrap();
    rows.row(0).as_ref().into()
}

fn persist(side: &mut AsofSide, state: &StateContext) {
    let mut epoch = EpochBatch::default();
    side.persist(&mut epoch).unwrap();
    state.store.commit(&epoch).unwrap();
}

/// The indexed rows before `time`, as (join key, time, stream key byte).
fn indexed(side: &mut AsofSide, time: i128) -> Vec<(Box<[u8]>, i128, u8)> {
    (side
        .indexed_before(Bound::Excluded(time))
        .unwrap()
        .into_iter())
    .map(|(k, p)| (k, super::place_time(&p, 8), p[8]))
    .collect()
}

#[test]
fn rows_and_their_time_index_survive_restarts_and_the_older_layout() {
    let state = StateContext::new(Arc::new(MemStore::default()), Arc::new(StateCache::new(64)));
    let mut side = open(&state);
    let (a, b) = (key(&side, 1), key(&side, 2));
    side.begin_chunk();
    side.load([&a[..], &b[..]]).unwrap();
    for (k, time, id) in [(&a, 30, 1u8), (&a, 10, 2), (&b, 20, 3), (&a, 20, 4)] {
        side.insert(k, &place(time, &[id], 8), vec![id; 3].into())
            .unwrap();
    }
    persist(&mut side, &state);

    // A restart reads nothing but the counters; rows come back as their keys are loaded.
    let mut side = open(&state);
    assert_eq!((side.rows_count(), side.distinct_keys()), (4, 2));
    assert_eq!(side.max_rows_per_key(), 3);
    let early: Vec<(i128, u8)> = indexed(&mut side, 25).iter().map(|r| (r.1, r.2)).collect();
    // By time, then join key (key 1's row 4 before key 2's row 3).
    assert_eq!(early, [(10, 2), (20, 4), (20, 3)]);
    side.begin_chunk();
    side.load([&a[..]]).unwrap();
    assert_eq!(side.row(&a, &place(10, &[2], 8)), Some(&[2u8; 3][..]));
    assert_eq!(
        side.evict(&a, &place(10, &[2], 8)).unwrap().as_deref(),
        Some(&[2u8; 3][..])
    );
    persist(&mut side, &state);
    let mut side = open(&state);
    assert_eq!((side.rows_count(), side.rows_evicted()), (3, 1));
    assert_eq!(indexed(&mut side, i128::from(i64::MAX)).len(), 3);

    // The older layout: the same rows without counters, markers or index.
    let mut epoch = EpochBatch::default();
    for (stored, _) in state.store.scan_table(TABLE).unwrap() {
        if stored.starts_with(&[0xFF]) {
            epoch.delete(TABLE, &stored);
        }
    }
    state.store.commit(&epoch).unwrap();
    let mut side = open(&state);
    assert_eq!((side.rows_count(), side.distinct_keys()), (3, 2));
    persist(&mut side, &state);
    let mut side = open(&state);
    let all: Vec<(i128, u8)> = (indexed(&mut side, 100).iter())
        .map(|r| (r.1, r.2))
        .collect();
    assert_eq!(all, [(20, 4), (20, 3), (30, 1)]);
    side.begin_chunk();
    side.load([&b[..]]).unwrap();
    assert_eq!(side.rows(&b).map(|rows| rows.len()), Some(1));
}
