//! The committer: an epoch's write and fsync run on a thread of their own, overlapping the
//! next epoch's processing.
//!
//! The engine builds epoch N's batch at its barrier and hands it over; it then goes on taking
//! rows and statements into epoch N+1 while N is written. Statements of N are acknowledged by
//! the committer thread as soon as N is durable, so a write never waits for the engine to
//! finish what it is doing. At most one epoch is in flight: the next barrier first waits for
//! it.
//!
//! The engine reads the store while N is in flight (a table's old row, a state table's
//! group): it must see N's writes, which the store does not have yet. [`PipelinedStore`] is
//! the engine's store: a point read looks in the batch in flight first, and so do the reads of
//! a state snapshot (operators' state tables: N laid over the store's last snapshot); any
//! other snapshot, and a table scan, waits until N is written. Queries and subscriptions read
//! the store itself, which holds durable epochs only.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};
use eddy_storage::{EpochBatch, PendingEpoch, Result, Snapshot, Store, StoreStats, TableId};

use crate::ExecError;

/// A reply to send once an epoch is committed (or failed).
pub(super) type Ack = Box<dyn FnOnce(crate::Result<()>) + Send>;

/// Run once an epoch is durable, before its statements are answered (given the write's
/// time): the figures a client may read right after its answer are published here.
pub(super) type OnDurable = Box<dyn FnOnce(Duration) + Send>;

/// The engine's view of the store: what is durable, plus the epoch being written.
pub(crate) struct PipelinedStore {
    inner: Arc<dyn Store>,
    in_flight: Mutex<Option<Arc<PendingEpoch>>>,
    written: Condvar,
    jobs: Sender<Job>,
}

/// An epoch for the committer thread.
struct Job {
    batch: Arc<EpochBatch>,
    on_durable: OnDurable,
    acks: Vec<Ack>,
    done: Sender<Written>,
}

/// What the committer tells the engine of an epoch: durable, or why not.
pub(super) type Written = crate::Result<()>;

impl PipelinedStore {
    /// The engine's store over `inner`, with its committer thread.
    pub(crate) fn start(inner: Arc<dyn Store>) -> crate::Result<Arc<Self>> {
        let (jobs, queue) = bounded::<Job>(1);
        let store = Arc::new(Self {
            inner,
            in_flight: Mutex::new(None),
            written: Condvar::new(),
            jobs,
        });
        let weak = Arc::downgrade(&store);
        std::thread::Builder::new()
            .name("eddy-commit".into())
            .spawn(move || {
                // Ends when the engine's store is dropped (its sender with it).
                while let Ok(job) = queue.recv() {
                    let Some(store) = weak.upgrade() else { return };
                    store.write(job);
                }
            })
            .map_err(|e| ExecError::Internal(format!("cannot start the committer: {e}")))?;
        Ok(store)
    }

    /// Starts writing `batch`; `acks` are answered when it is durable (after `on_durable`)
    /// or has failed, and so is the returned receiver. Waits for an epoch still in flight
    /// first. The batch comes back to be dropped by the caller once written: its memory is
    /// freed by the thread that allocated it.
    pub(super) fn begin(
        &self,
        batch: EpochBatch,
        on_durable: OnDurable,
        acks: Vec<Ack>,
    ) -> (Receiver<Written>, Arc<EpochBatch>) {
        let batch = Arc::new(batch);
        let kept = batch.clone();
        let mut in_flight = self.wait_idle();
        *in_flight = Some(Arc::new(PendingEpoch::new(batch.clone())));
        drop(in_flight);
        let (done, receiver) = bounded(1);
        let job = Job {
            batch,
            on_durable,
            acks,
            done,
        };
        if let Err(unsent) = self.jobs.send(job) {
            // The thread is gone (it cannot be while the store lives): write here instead.
            self.write(unsent.0);
        }
        (receiver, kept)
    }

    /// Runs on the committer thread.
    fn write(&self, job: Job) {
        let started = Instant::now();
        // A panic in the store must not end this thread: the engine would wait for it forever.
        let result =
            match std::panic::catch_unwind(AssertUnwindSafe(|| self.inner.commit(&job.batch))) {
                Ok(written) => written.map_err(ExecError::from),
                Err(panic) => Err(ExecError::Internal(format!(
                    "the store failed while writing an epoch: {}",
                    super::run_loop::panic_message(panic.as_ref())
                ))),
            };
        let took = started.elapsed();
        tracing::debug!(
            target: "eddy::epochs",
            write_ms = took.as_secs_f64() * 1e3,
            writes = job.batch.len(),
            statements = job.acks.len(),
            "epoch written"
        );
        drop(job.batch);
        // Reads see the store itself from here on: it has the epoch, or the engine reloads.
        *self.lock() = None;
        self.written.notify_all();
        match &result {
            Ok(()) => {
                (job.on_durable)(took);
                job.acks.into_iter().for_each(|ack| ack(Ok(())));
            }
            Err(error) => {
                for ack in job.acks {
                    ack(Err(statement_error(error)));
                }
            }
        }
        let _ = job.done.send(result);
    }

    fn lock(&self) -> MutexGuard<'_, Option<Arc<PendingEpoch>>> {
        self.in_flight.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until no epoch is being written.
    fn wait_idle(&self) -> MutexGuard<'_, Option<Arc<PendingEpoch>>> {
        let mut in_flight = self.lock();
        while in_flight.is_some() {
            in_flight = self
                .written
                .wait(in_flight)
                .unwrap_or_else(|e| e.into_inner());
        }
        in_flight
    }

    /// The epoch being written, if any.
    fn pending(&self) -> Option<Arc<PendingEpoch>> {
        self.lock().clone()
    }
}

/// What a statement of an epoch whose commit failed is told: a storage fault as itself (53100
/// for a full disk), a key too long as itself, anything else as an internal error.
pub(super) fn statement_error(error: &ExecError) -> ExecError {
    match error {
        ExecError::Storage(storage) => {
            if let Some(fault) = storage.fault() {
                return eddy_storage::StorageError::Fault(fault.clone()).into();
            }
            if let eddy_storage::StorageError::KeyTooLong { table, bytes } = storage {
                return eddy_storage::StorageError::KeyTooLong {
                    table: *table,
                    bytes: *bytes,
                }
                .into();
            }
            ExecError::Internal(format!("the epoch could not be committed: {error}"))
        }
        _ => ExecError::Internal(format!("the epoch could not be committed: {error}")),
    }
}

impl Store for PipelinedStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(pending) = self.pending() {
            if let Some(value) = pending.batch().lookup(key) {
                return Ok(value.map(<[u8]>::to_vec));
            }
        }
        self.inner.get(key)
    }

    fn scan_table(&self, table: TableId) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        drop(self.wait_idle());
        self.inner.scan_table(table)
    }

    /// Written in order: waits for the epoch in flight, then writes here.
    fn commit(&self, batch: &EpochBatch) -> Result<()> {
        let _idle = self.wait_idle();
        self.inner.commit(batch)
    }

    /// A snapshot with every epoch the engine has committed, the one in flight included.
    fn snapshot(&self) -> Result<Snapshot> {
        drop(self.wait_idle());
        self.inner.snapshot()
    }

    /// The epoch in flight over the store's last snapshot, without waiting: the engine reads
    /// its state while the committer writes (the pipeline's point).
    fn state_snapshot(&self) -> Result<Snapshot> {
        // Looked up before the snapshot is taken: an epoch written in between is in both,
        // the same.
        let pending = self.pending();
        let snapshot = self.inner.snapshot()?;
        Ok(match pending {
            Some(pending) => snapshot.with_pending(pending),
            None => snapshot,
        })
    }

    fn stats(&self) -> StoreStats {
        self.inner.stats()
    }

    fn write_buffer_bytes(&self) -> u64 {
        self.inner.write_buffer_bytes()
    }

    fn size_on_disk(&self) -> u64 {
        self.inner.size_on_disk()
    }
}

#[cfg(test)]
#[path = "committer_tests.rs"]
mod tests;
