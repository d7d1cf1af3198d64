//! While the store's write buffer is over its bound, sources wait and statements do not; once
//! it drains, the sources go on from where they stopped and nothing is lost.
//!
//! The store here reports the write buffer the test sets: how full it gets under a real load
//! depends on the disk, and the engine's part is what is tested.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::physical_plan::common::collect;
use eddy_executor::EngineHandle;
use eddy_server::database::{Database, Outcome};
use eddy_storage::{EpochBatch, MemStore, Snapshot, Store, StoreStats, TableId};

/// A store in memory whose write buffer is whatever the test says.
#[derive(Default)]
struct BufferedStore {
    inner: MemStore,
    write_buffer: AtomicU64,
}

impl Store for BufferedStore {
    fn get(&self, key: &[u8]) -> eddy_storage::Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn scan_table(&self, table: TableId) -> eddy_storage::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.inner.scan_table(table)
    }
    fn commit(&self, batch: &EpochBatch) -> eddy_storage::Result<()> {
        self.inner.commit(batch)
    }
    fn snapshot(&self) -> eddy_storage::Result<Snapshot> {
        self.inner.snapshot()
    }
    fn stats(&self) -> StoreStats {
        StoreStats {
            write_buffer_bytes: self.write_buffer_bytes(),
            ..StoreStats::default()
        }
    }
    fn write_buffer_bytes(&self) -> u64 {
        self.write_buffer.load(Ordering::Relaxed)
    }
}

async fn batches(db: &Database, sql: &str) -> Vec<RecordBatch> {
    let outcomes = db.execute_sql(sql).await.unwrap();
    match outcomes.into_iter().last() {
        Some(Outcome::Rows { batches, .. }) => batches,
        Some(Outcome::Stream { stream, .. }) => collect(stream).await.unwrap(),
        _ => panic!("no rows from {sql}"),
    }
}

async fn count(db: &Database, sql: &str) -> i64 {
    let batches = batches(db, sql).await;
    batches[0].column(0).as_primitive::<Int64Type>().value(0)
}

async fn text(db: &Database, sql: &str) -> Vec<String> {
    let mut values = Vec::new();
    for batch in batches(db, sql).await {
        let column = batch.column(0).as_string::<i32>();
        values.extend((0..column.len()).map(|i| column.value(i).to_string()));
    }
    values
}

async fn wait_for_rows(db: &Database) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(db, "SELECT count(*) FROM bids").await == 0 {
        assert!(Instant::now() < deadline, "no rows from the source");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sources_wait_for_a_full_write_buffer_and_statements_do_not() {
    const EVENTS: i64 = 6_000;
    let store = Arc::new(BufferedStore::default());
    let engine = EngineHandle::start(store.clone(), Duration::from_millis(50)).unwrap();
    engine.set_store_write_buffer_limit(64 << 20);
    let db = eddy_server::context::open_database(store.clone(), engine.clone())
        .await
        .unwrap();
    db.execute_sql(&format!(
        "CREATE TABLE bids (auction BIGINT, price BIGINT)
           WITH (connector = 'nexmark', nexmark.table.type = 'bid',
                 nexmark.event.rate = '2000', nexmark.max.events = '{EVENTS}');
         CREATE MATERIALIZED VIEW bid_count AS SELECT count(*) AS n FROM bids;
         CREATE TABLE notes (id INT PRIMARY KEY, body TEXT);"
    ))
    .await
    .unwrap();
    wait_for_rows(&db).await;

    // Over the bound: the source stops where it is.
    store.write_buffer.store(65 << 20, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopped_at = count(&db, "SELECT count(*) FROM bids").await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(count(&db, "SELECT count(*) FROM bids").await, stopped_at);
    assert!(
        stopped_at < EVENTS * 46 / 50,
        "the source finished too soon"
    );
    let reasons = text(
        &db,
        "SELECT last_error FROM eddy_catalog.source_progress WHERE target = 'bids'",
    )
    .await;
    assert!(
        reasons.iter().any(|r| r.contains("write buffer is full")),
        "source_progress says {reasons:?}"
    );
    assert_eq!(
        text(
            &db,
            "SELECT sources_held::TEXT || ' ' || write_buffer_bytes || ' ' \
             || write_buffer_limit_bytes FROM eddy_catalog.store"
        )
        .await,
        vec![format!("true {} {}", 65 << 20, 64 << 20)]
    );
    let held = engine.stats().write_buffer_hold;
    assert!(held.holding);
    assert!(
        held.held_seconds >= 0.9,
        "held {} s so far",
        held.held_seconds
    );
    assert_eq!(held.limit_bytes, 64 << 20);
    // A statement is answered at once while the source waits.
    let started = Instant::now();
    db.execute_sql("INSERT INTO notes VALUES (1, 'written while sources wait')")
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "an INSERT waited {:?} for a full write buffer",
        started.elapsed()
    );
    assert_eq!(count(&db, "SELECT count(*) FROM notes").await, 1);

    // Drained: the source goes on, and every event arrives once.
    store.write_buffer.store(0, Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let finished = text(
            &db,
            "SELECT finished::TEXT FROM eddy_catalog.source_progress WHERE target = 'bids'",
        )
        .await;
        if finished.iter().all(|f| f == "true") {
            break;
        }
        assert!(Instant::now() < deadline, "the source did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    db.execute_sql("FLUSH").await.unwrap();
    let bids = count(&db, "SELECT count(*) FROM bids").await;
    // Nexmark's bids are 46 of every 50 events.
    assert_eq!(bids, EVENTS * 46 / 50);
    assert_eq!(count(&db, "SELECT n FROM bid_count").await, bids);
    let held = engine.stats().write_buffer_hold;
    assert!(!held.holding);
    assert!(held.held_seconds >= 1.0, "held {} s", held.held_seconds);
    engine.shutdown().await.unwrap();
}
