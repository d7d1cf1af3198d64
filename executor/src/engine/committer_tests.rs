//! The committer: reads during a write see it (state snapshots without waiting), durable
//! readers do not, and statements are
//! answered only when their epoch is durable (or with the fault that kept it from being).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{unbounded, Receiver, Sender};
use eddy_storage::keys::table_key;
use eddy_storage::{
    EpochBatch, FaultKind, KeyRange, MemStore, Result, Snapshot, StorageError, Store, StoreFault,
    StoreStats, TableId,
};

use super::{Ack, PipelinedStore};
use crate::ExecError;

/// What a gated commit does once let through.
#[derive(Clone, Copy)]
enum Outcome {
    Write,
    Fail,
    Panic,
}
use Outcome::{Fail, Panic, Write};

/// A store whose commits wait for a word on `gate`, and do what it says.
struct GatedStore {
    rows: MemStore,
    gate: Mutex<Receiver<Outcome>>,
}

impl Store for GatedStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.rows.get(key)
    }
    fn scan_table(&self, table: TableId) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.rows.scan_table(table)
    }
    fn commit(&self, batch: &EpochBatch) -> Result<()> {
        let outcome = self.gate.lock().unwrap().recv().unwrap();
        match outcome {
            Write => self.rows.commit(batch),
            Fail => Err(StorageError::Fault(StoreFault {
                kind: FaultKind::DiskFull,
                data_dir: "data".into(),
                detail: "No space left on device".into(),
            })),
            Panic => panic!("a bug in the store"),
        }
    }
    fn snapshot(&self) -> Result<Snapshot> {
        self.rows.snapshot()
    }
    fn stats(&self) -> StoreStats {
        StoreStats::default()
    }
}

/// A committer over a gated store: the sender lets each commit through.
fn gated() -> (Sender<Outcome>, Arc<GatedStore>, Arc<PipelinedStore>) {
    let (open, gate) = unbounded();
    let inner = Arc::new(GatedStore {
        rows: MemStore::default(),
        gate: Mutex::new(gate),
    });
    let store = PipelinedStore::start(inner.clone()).unwrap();
    (open, inner, store)
}

/// An acknowledgement that reports into `events`.
fn ack(events: &Arc<Mutex<Vec<String>>>) -> Ack {
    let events = events.clone();
    Box::new(move |result: crate::Result<()>| {
        let said = match result {
            Ok(()) => "ack ok".to_string(),
            Err(ExecError::Storage(storage)) => match storage.fault() {
                Some(fault) => format!("ack fault {:?}", fault.kind),
                None => format!("ack storage {storage}"),
            },
            Err(error) => format!("ack error {error}"),
        };
        events.lock().unwrap().push(said);
    })
}

fn one_row(value: &str) -> EpochBatch {
    let mut batch = EpochBatch::default();
    batch.put(20, b"a", value.as_bytes().to_vec());
    batch.delete(20, b"gone");
    batch
}

#[test]
fn reads_during_a_write_see_it_and_statements_wait_for_durability() {
    let (open, inner, store) = gated();
    let mut first = EpochBatch::default();
    first.put(20, b"gone", b"old".to_vec());
    open.send(Write).unwrap();
    inner.commit(&first).unwrap();

    let events = Arc::new(Mutex::new(Vec::new()));
    let published = events.clone();
    let (done, _batch) = store.begin(
        one_row("1"),
        Box::new(move |_| published.lock().unwrap().push("published".into())),
        vec![ack(&events)],
    );
    // While it is written: the engine's point reads see it, the durable store does not, and
    // nobody has been answered.
    assert_eq!(
        store.get(&table_key(20, b"a")).unwrap(),
        Some(b"1".to_vec())
    );
    assert_eq!(store.get(&table_key(20, b"gone")).unwrap(), None);
    assert_eq!(inner.get(&table_key(20, b"a")).unwrap(), None);
    assert_eq!(
        inner.get(&table_key(20, b"gone")).unwrap(),
        Some(b"old".to_vec())
    );
    std::thread::sleep(Duration::from_millis(50));
    assert!(events.lock().unwrap().is_empty());
    assert!(done.try_recv().is_err());

    // A state snapshot sees it at once, in range and point reads; the store's own does not.
    let state = store.state_snapshot().unwrap();
    assert_eq!(
        store
            .read_range(&state, 20, &KeyRange::all(), usize::MAX)
            .unwrap(),
        vec![(b"a".to_vec(), b"1".to_vec())]
    );
    assert_eq!(
        store
            .read_keys(&state, 20, &[&b"a"[..], &b"gone"[..]])
            .unwrap(),
        vec![Some(b"1".to_vec()), None]
    );
    assert_eq!(
        inner
            .read_range(&inner.snapshot().unwrap(), 20, &KeyRange::all(), usize::MAX)
            .unwrap(),
        vec![(b"gone".to_vec(), b"old".to_vec())]
    );

    // Any other snapshot (for range reads) waits for the write.
    let reader = store.clone();
    let (snapshot_taken, taken) = unbounded();
    std::thread::spawn(move || {
        let snapshot = reader.snapshot().unwrap();
        let rows = reader
            .read_range(&snapshot, 20, &KeyRange::all(), usize::MAX)
            .unwrap();
        snapshot_taken.send(rows).unwrap();
    });
    assert!(taken.recv_timeout(Duration::from_millis(100)).is_err());
    open.send(Write).unwrap();
    assert_eq!(
        taken.recv_timeout(Duration::from_secs(5)).unwrap(),
        vec![(b"a".to_vec(), b"1".to_vec())]
    );
    assert!(done.recv_timeout(Duration::from_secs(5)).unwrap().is_ok());
    assert_eq!(*events.lock().unwrap(), ["published", "ack ok"]);
    assert_eq!(
        inner.get(&table_key(20, b"a")).unwrap(),
        Some(b"1".to_vec())
    );
}

/// After a failed epoch, the next one is written and read back.
fn next_epoch_is_written_afresh(open: &Sender<Outcome>, store: &PipelinedStore) {
    let (next, _batch) = store.begin(one_row("2"), Box::new(|_| {}), Vec::new());
    open.send(Write).unwrap();
    assert!(next.recv_timeout(Duration::from_secs(5)).unwrap().is_ok());
    assert_eq!(
        store.get(&table_key(20, b"a")).unwrap(),
        Some(b"2".to_vec())
    );
}

#[test]
fn a_failed_write_answers_its_statements_with_the_fault_and_is_read_no_more() {
    let (open, _inner, store) = gated();
    let events = Arc::new(Mutex::new(Vec::new()));
    let published = events.clone();
    let (done, _batch) = store.begin(
        one_row("1"),
        Box::new(move |_| published.lock().unwrap().push("published".into())),
        vec![ack(&events), ack(&events)],
    );
    open.send(Fail).unwrap();
    let error = done
        .recv_timeout(Duration::from_secs(5))
        .unwrap()
        .unwrap_err();
    assert!(matches!(error, ExecError::Storage(_)), "{error}");
    let events = events.lock().unwrap().clone();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        events.iter().all(|e| e == "ack fault DiskFull"),
        "{events:?}"
    );
    // Nothing of it is read back.
    assert_eq!(store.get(&table_key(20, b"a")).unwrap(), None);
    next_epoch_is_written_afresh(&open, &store);
}

#[test]
fn a_panic_in_the_store_fails_the_epoch_and_the_committer_goes_on() {
    let (open, _inner, store) = gated();
    let events = Arc::new(Mutex::new(Vec::new()));
    let (done, _batch) = store.begin(one_row("1"), Box::new(|_| {}), vec![ack(&events)]);
    open.send(Panic).unwrap();
    let error = done
        .recv_timeout(Duration::from_secs(5))
        .unwrap()
        .unwrap_err();
    assert!(error.to_string().contains("a bug in the store"), "{error}");
    assert_eq!(events.lock().unwrap().len(), 1);
    assert!(events.lock().unwrap()[0].starts_with("ack error"));
    next_epoch_is_written_afresh(&open, &store);
}
