//! Subscriptions: a table's or materialized view's committed changes, handed to one client
//! epoch by epoch (`SUBSCRIBE`).
//!
//! The engine appends each committed epoch's changes to every subscription of the relation
//! after the epoch's commit, without ever waiting: a [`SubscriptionQueue`] holds what the
//! client has not taken yet, up to a bound in bytes (passed by one epoch at most: an epoch
//! is taken whole when the queue is empty), past which the subscription ends with 53200 and
//! its changes are dropped (the engine's memory never grows with a slow client).
//! The client's side is a [`Subscription`]: the store as of the epoch it starts at (for its
//! snapshot), then [`Update`]s in epoch order. Dropping it ends the subscription.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eddy_storage::Snapshot;
use tokio::sync::Notify;

use crate::{ExecError, Result, StreamChunk};

/// What a subscription's client may leave unread by default (`--subscribe-buffer`): past
/// it, the subscription ends with 53200.
pub const DEFAULT_BUFFER_BYTES: usize = 64 << 20;

/// The recent changes kept per subscribed relation by default, for `AS OF`
/// (`--subscribe-history`).
pub const DEFAULT_HISTORY_BYTES: usize = 64 << 20;

/// The changes of a relation in one committed epoch, shared by every subscription and the
/// relation's history.
#[derive(Debug)]
pub struct EpochChanges {
    pub epoch: u64,
    /// Visible columns first, then the relation's key columns (see [`StreamChunk`]).
    pub chunks: Vec<StreamChunk>,
    /// The memory the chunks take (bytes, as Arrow counts them).
    pub bytes: usize,
}

impl EpochChanges {
    pub fn new(epoch: u64, chunks: Vec<StreamChunk>) -> Self {
        let bytes = chunks
            .iter()
            .map(|c| c.batch.get_array_memory_size() + c.ops.len())
            .sum();
        Self {
            epoch,
            chunks,
            bytes,
        }
    }
}

/// What a subscription hands out next.
#[derive(Debug, Clone)]
pub enum Update {
    /// The changes of one committed epoch.
    Changes(Arc<EpochChanges>),
    /// Every change of the epochs up to this one (inclusive) has been handed out.
    Progress(u64),
}

/// Why a subscription ended on the engine's side.
#[derive(Debug, Clone)]
enum End {
    /// Its client fell too far behind (53200).
    Overflow(String),
    /// Its relation is gone (42P01).
    Dropped(String),
}

#[derive(Debug, Default)]
struct QueueState {
    changes: VecDeque<Arc<EpochChanges>>,
    bytes: usize,
    /// The last committed epoch the engine told of.
    committed: u64,
    /// The last epoch handed out (as changes or progress).
    delivered: u64,
    end: Option<End>,
    /// The client is gone: the engine forgets the subscription at its next commit.
    closed: bool,
}

/// The changes one subscription's client has not taken yet: the engine appends, the client
/// takes. Neither waits for the other (the lock is held for a push or a pop).
#[derive(Debug)]
pub struct SubscriptionQueue {
    pub id: u64,
    pub relation: String,
    /// The epoch of its snapshot, or the epoch it resumed after (`AS OF`).
    pub start_epoch: u64,
    /// Bytes past which it ends.
    pub limit: usize,
    state: Mutex<QueueState>,
    notify: Notify,
}

/// One subscription as `eddy_catalog.subscriptions` lists it.
#[derive(Debug, Clone)]
pub struct SubscriptionStats {
    pub id: u64,
    pub relation: String,
    pub start_epoch: u64,
    pub delivered_epoch: u64,
    pub committed_epoch: u64,
    pub buffered_bytes: usize,
    pub buffer_limit: usize,
}

impl SubscriptionQueue {
    pub(crate) fn new(id: u64, relation: String, start_epoch: u64, limit: usize) -> Self {
        Self {
            id,
            relation,
            start_epoch,
            limit,
            state: Mutex::new(QueueState {
                committed: start_epoch,
                delivered: start_epoch,
                ..QueueState::default()
            }),
            notify: Notify::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends epoch `epoch` (with its changes to the relation, if any). False once the
    /// subscription is over: its client left, or it just passed its bound.
    pub(crate) fn push(&self, changes: Option<&Arc<EpochChanges>>, epoch: u64) -> bool {
        let mut state = self.state();
        if state.closed || state.end.is_some() {
            return false;
        }
        if let Some(changes) = changes {
            // One epoch is always taken (it is in memory anyway, shared with the history):
            // an epoch larger than the bound must not end every subscription.
            if state.bytes > 0 && state.bytes + changes.bytes > self.limit {
                state.end = Some(End::Overflow(format!(
                    "the subscription to \"{}\" ended: its client left {} bytes of changes unread, over the {} bytes a subscription may hold (--subscribe-buffer); read faster, or subscribe to fewer rows",
                    self.relation,
                    state.bytes + changes.bytes,
                    self.limit
                )));
                state.changes.clear();
                state.bytes = 0;
                drop(state);
                self.notify.notify_one();
                return false;
            }
            state.bytes += changes.bytes;
            state.changes.push_back(changes.clone());
        }
        state.committed = state.committed.max(epoch);
        drop(state);
        self.notify.notify_one();
        true
    }

    /// Ends the subscription because its relation is gone.
    pub(crate) fn end_dropped(&self) {
        let mut state = self.state();
        if state.end.is_none() {
            state.end = Some(End::Dropped(format!(
                "relation \"{}\" is gone (dropped, renamed, or a view that failed): its subscription ended",
                self.relation
            )));
            state.changes.clear();
            state.bytes = 0;
        }
        drop(state);
        self.notify.notify_one();
    }

    /// Whether the engine can forget it.
    pub(crate) fn is_over(&self) -> bool {
        let state = self.state();
        state.closed || state.end.is_some()
    }

    fn close(&self) {
        let mut state = self.state();
        state.closed = true;
        state.changes.clear();
        state.bytes = 0;
    }

    /// The next update if one is ready: changes first, then the progress they complete.
    fn try_take(&self) -> Option<Result<Update>> {
        let mut state = self.state();
        if let Some(end) = &state.end {
            return Some(Err(match end {
                End::Overflow(message) => ExecError::OutOfMemory(message.clone()),
                End::Dropped(message) => ExecError::UndefinedObject(message.clone()),
            }));
        }
        if let Some(changes) = state.changes.pop_front() {
            state.bytes -= changes.bytes;
            state.delivered = changes.epoch;
            return Some(Ok(Update::Changes(changes)));
        }
        if state.committed > state.delivered {
            state.delivered = state.committed;
            return Some(Ok(Update::Progress(state.committed)));
        }
        None
    }

    pub fn stats(&self) -> SubscriptionStats {
        let state = self.state();
        SubscriptionStats {
            id: self.id,
            relation: self.relation.clone(),
            start_epoch: self.start_epoch,
            delivered_epoch: state.delivered,
            committed_epoch: state.committed,
            buffered_bytes: state.bytes,
            buffer_limit: self.limit,
        }
    }
}

/// A client's subscription: where it starts, then its updates. Dropping it ends it.
pub struct Subscription {
    /// The store as of `queue.start_epoch`, for the snapshot (`None` when resuming `AS OF`).
    pub snapshot: Option<Arc<Snapshot>>,
    queue: Arc<SubscriptionQueue>,
}

impl Subscription {
    pub(crate) fn new(snapshot: Option<Arc<Snapshot>>, queue: Arc<SubscriptionQueue>) -> Self {
        Self { snapshot, queue }
    }

    /// The epoch of the snapshot (changes handed out are of later epochs).
    pub fn start_epoch(&self) -> u64 {
        self.queue.start_epoch
    }

    /// The next update, waiting for one (cancel-safe: dropping the future loses nothing).
    pub async fn next(&self) -> Result<Update> {
        loop {
            // Registered before looking, so that a push in between still wakes it.
            let notified = self.queue.notify.notified();
            if let Some(update) = self.queue.try_take() {
                return update;
            }
            notified.await;
        }
    }

    /// The next update within `wait`, `Ok(None)` if none came.
    pub async fn next_within(&self, wait: Duration) -> Result<Option<Update>> {
        match tokio::time::timeout(wait, self.next()).await {
            Ok(update) => update.map(Some),
            Err(_) => Ok(None),
        }
    }

    /// The next update if one is ready now.
    pub fn try_next(&self) -> Option<Result<Update>> {
        self.queue.try_take()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.queue.close();
    }
}

/// The subscriptions running, for the catalog, and the bounds new ones get.
#[derive(Debug)]
pub struct SubscriptionRegistry {
    running: Mutex<Vec<Arc<SubscriptionQueue>>>,
    buffer_bytes: AtomicUsize,
    history_bytes: AtomicUsize,
}

impl Default for SubscriptionRegistry {
    fn default() -> Self {
        Self {
            running: Mutex::default(),
            buffer_bytes: AtomicUsize::new(DEFAULT_BUFFER_BYTES),
            history_bytes: AtomicUsize::new(DEFAULT_HISTORY_BYTES),
        }
    }
}

impl SubscriptionRegistry {
    fn running(&self) -> std::sync::MutexGuard<'_, Vec<Arc<SubscriptionQueue>>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets what a subscription's client may leave unread and the history kept per relation.
    pub fn set_limits(&self, buffer_bytes: usize, history_bytes: usize) {
        self.buffer_bytes
            .store(buffer_bytes.max(1), Ordering::Relaxed);
        self.history_bytes.store(history_bytes, Ordering::Relaxed);
    }

    pub(crate) fn buffer_bytes(&self) -> usize {
        self.buffer_bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn history_bytes(&self) -> usize {
        self.history_bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn add(&self, queue: Arc<SubscriptionQueue>) {
        self.running().push(queue);
    }

    pub(crate) fn forget_over(&self) {
        self.running().retain(|queue| !queue.is_over());
    }

    pub fn stats(&self) -> Vec<SubscriptionStats> {
        self.running()
            .iter()
            .filter(|queue| !queue.is_over())
            .map(|queue| queue.stats())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    fn changes(epoch: u64, rows: usize) -> Arc<EpochChanges> {
        let schema = Schema::new(vec![Field::new("v", DataType::Int64, false)]);
        let column = Arc::new(Int64Array::from(vec![1i64; rows]));
        let chunk = StreamChunk::new(vec![Op::Insert; rows], &schema, vec![column], vec![])
            .expect("a chunk");
        Arc::new(EpochChanges::new(epoch, vec![chunk]))
    }

    fn take(subscription: &Subscription) -> Option<String> {
        subscription.try_next().map(|update| match update {
            Ok(Update::Changes(c)) => format!("changes {}", c.epoch),
            Ok(Update::Progress(e)) => format!("progress {e}"),
            Err(e) => format!("error {e}"),
        })
    }

    #[test]
    fn changes_then_the_progress_they_complete() {
        let queue = Arc::new(SubscriptionQueue::new(1, "v".into(), 4, 1 << 20));
        let subscription = Subscription::new(None, queue.clone());
        assert_eq!(take(&subscription), None);
        assert!(queue.push(Some(&changes(5, 3)), 5));
        assert!(queue.push(None, 6));
        assert_eq!(take(&subscription).as_deref(), Some("changes 5"));
        assert_eq!(take(&subscription).as_deref(), Some("progress 6"));
        assert_eq!(take(&subscription), None);
        assert_eq!(queue.stats().delivered_epoch, 6);
    }

    #[test]
    fn past_the_bound_it_ends_and_drops_its_changes() {
        let one = changes(5, 1000).bytes;
        let queue = Arc::new(SubscriptionQueue::new(1, "v".into(), 4, one + one / 2));
        let subscription = Subscription::new(None, queue.clone());
        // An epoch over the bound is taken when the queue is empty.
        assert!(queue.push(Some(&changes(5, 2000)), 5));
        assert_eq!(take(&subscription).as_deref(), Some("changes 5"));
        assert!(queue.push(Some(&changes(6, 1000)), 6));
        assert!(!queue.push(Some(&changes(7, 1000)), 7), "past the bound");
        assert_eq!(queue.stats().buffered_bytes, 0);
        let error = take(&subscription).expect("the error");
        assert!(
            error.starts_with("error the subscription to \"v\" ended"),
            "{error}"
        );
        assert!(queue.is_over());
    }

    #[test]
    fn a_dropped_subscription_is_over() {
        let queue = Arc::new(SubscriptionQueue::new(1, "v".into(), 4, 1 << 20));
        drop(Subscription::new(None, queue.clone()));
        assert!(queue.is_over());
        assert!(!queue.push(Some(&changes(5, 1)), 5));
    }
}
