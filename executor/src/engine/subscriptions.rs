//! The engine's side of subscriptions: the changes of each subscribed relation are taken
//! as they flow (where sinks take theirs), and handed out after the epoch's commit, never
//! before; a new subscription starts at a commit, with the store as of that epoch for its
//! snapshot. Each subscribed relation keeps its recent epochs' changes (a bounded history),
//! so that a client can resume `AS OF` an epoch it has seen.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use super::{Engine, Reply};
use crate::subscribe::{EpochChanges, Subscription, SubscriptionQueue, SubscriptionRegistry};
use crate::{ExecError, Message, Result, StreamChunk};

/// A subscription waiting for the next commit to start.
pub(super) struct Starting {
    relation: String,
    /// Resume after this epoch (no snapshot).
    as_of: Option<u64>,
    reply: Reply<Subscription>,
}

/// A relation with subscriptions (or that had some): its changes of this epoch and its
/// history.
struct Tracked {
    pending: Vec<StreamChunk>,
    /// The changes of the epoch being written (its commit hands them out).
    sealed: Vec<StreamChunk>,
    history: VecDeque<Arc<EpochChanges>>,
    history_bytes: usize,
    /// The history holds every change of the epochs after this one.
    complete_after: u64,
    subscribers: Vec<Arc<SubscriptionQueue>>,
}

#[derive(Default)]
pub(super) struct Subscriptions {
    relations: BTreeMap<String, Tracked>,
    starting: Vec<Starting>,
    next_id: u64,
    pub(super) registry: Arc<SubscriptionRegistry>,
}

impl Subscriptions {
    /// Whether a subscription waits for a commit.
    pub(super) fn starting(&self) -> bool {
        !self.starting.is_empty()
    }

    /// An abandoned epoch's changes are never handed out.
    pub(super) fn abandon_pending(&mut self) {
        for tracked in self.relations.values_mut() {
            tracked.pending.clear();
            tracked.sealed.clear();
        }
    }

    /// At a barrier: the changes taken so far are the epoch's; later ones are the next's.
    /// A relation outside the epoch's scope keeps its changes for the epoch committing them.
    pub(super) fn seal(&mut self, scope: &super::scope::Scope) {
        for (name, tracked) in self.relations.iter_mut() {
            if super::scope::in_scope(scope, name) {
                tracked.sealed.append(&mut tracked.pending);
            }
        }
    }
}

impl Engine {
    /// Starts a subscription to `relation` at the next commit.
    pub(super) fn subscribe(
        &mut self,
        relation: String,
        as_of: Option<u64>,
        reply: Reply<Subscription>,
    ) {
        if let Err(error) = self.check_subscribable(&relation) {
            let _ = reply.send(Err(error));
            return;
        }
        self.subscriptions.starting.push(Starting {
            relation,
            as_of,
            reply,
        });
    }

    fn check_subscribable(&self, relation: &str) -> Result<()> {
        if self.tables.contains_key(relation) {
            return Ok(());
        }
        if let Some(view) = self.views.get(relation) {
            return match &view.entry.failed {
                None => Ok(()),
                Some(failure) => Err(ExecError::NotSupported(format!(
                    "materialized view \"{relation}\" has failed and is no longer maintained ({})",
                    failure.message
                ))),
            };
        }
        if self.sources.contains_key(relation) {
            return Err(ExecError::NotSupported(format!(
                "SUBSCRIBE to source \"{relation}\": a source keeps no rows of its own; subscribe to a materialized view over it"
            )));
        }
        Err(ExecError::UndefinedObject(format!(
            "relation \"{relation}\" does not exist"
        )))
    }

    /// Takes the changes of `upstream` that subscriptions read.
    pub(super) fn take_for_subscriptions(&mut self, upstream: &str, messages: &[Message]) {
        if let Some(tracked) = self.subscriptions.relations.get_mut(upstream) {
            for message in messages {
                if let Message::Chunk(chunk) = message {
                    tracked.pending.push(chunk.clone());
                }
            }
        }
    }

    /// After the commit of `epoch`: its changes to each subscribed relation go to the
    /// relation's history and subscriptions; the subscriptions waiting start here.
    pub(super) fn subscriptions_committed(&mut self, epoch: u64) {
        let history_limit = self.subscriptions.registry.history_bytes();
        let mut gone = Vec::new();
        for (name, tracked) in self.subscriptions.relations.iter_mut() {
            let present = self.tables.contains_key(name)
                || self
                    .views
                    .get(name)
                    .is_some_and(|view| view.entry.failed.is_none());
            if !present {
                tracked.subscribers.iter().for_each(|s| s.end_dropped());
                gone.push(name.clone());
                continue;
            }
            let chunks = std::mem::take(&mut tracked.sealed);
            let changes = (!chunks.is_empty()).then(|| Arc::new(EpochChanges::new(epoch, chunks)));
            if let Some(changes) = &changes {
                tracked.history_bytes += changes.bytes;
                tracked.history.push_back(changes.clone());
                while tracked.history_bytes > history_limit {
                    let Some(oldest) = tracked.history.pop_front() else {
                        break;
                    };
                    tracked.history_bytes -= oldest.bytes;
                    tracked.complete_after = oldest.epoch;
                }
            }
            tracked
                .subscribers
                .retain(|queue| queue.push(changes.as_ref(), epoch));
        }
        for name in gone {
            self.subscriptions.relations.remove(&name);
        }
        for starting in std::mem::take(&mut self.subscriptions.starting) {
            let started = self.start_subscription(&starting, epoch);
            // A client that left meanwhile drops its subscription, which ends it.
            let _ = starting.reply.send(started);
        }
        self.subscriptions.registry.forget_over();
    }

    fn start_subscription(&mut self, starting: &Starting, epoch: u64) -> Result<Subscription> {
        self.check_subscribable(&starting.relation)?;
        let snapshot = match starting.as_of {
            Some(_) => None,
            None => Some(Arc::new(self.store.snapshot()?)),
        };
        let subscriptions = &mut self.subscriptions;
        let tracked = subscriptions
            .relations
            .entry(starting.relation.clone())
            .or_insert_with(|| Tracked {
                pending: Vec::new(),
                sealed: Vec::new(),
                history: VecDeque::new(),
                history_bytes: 0,
                complete_after: epoch,
                subscribers: Vec::new(),
            });
        if let Some(as_of) = starting.as_of {
            if as_of > epoch {
                return Err(ExecError::InvalidOption(format!(
                    "SUBSCRIBE ... AS OF {as_of}: the last committed epoch is {epoch}"
                )));
            }
            if as_of < tracked.complete_after {
                return Err(ExecError::SnapshotTooOld(format!(
                    "SUBSCRIBE ... AS OF {as_of}: the changes of \"{}\" are kept for the epochs after {} only (AS OF {} or later; the history kept per relation is bounded by --subscribe-history and starts with its first subscription since the server started); subscribe again with a snapshot",
                    starting.relation,
                    tracked.complete_after,
                    tracked.complete_after
                )));
            }
        }
        subscriptions.next_id += 1;
        let start_epoch = starting.as_of.unwrap_or(epoch);
        let queue = Arc::new(SubscriptionQueue::new(
            subscriptions.next_id,
            starting.relation.clone(),
            start_epoch,
            subscriptions.registry.buffer_bytes(),
        ));
        if starting.as_of.is_some() {
            for changes in tracked.history.iter().filter(|c| c.epoch > start_epoch) {
                queue.push(Some(changes), changes.epoch);
            }
            queue.push(None, epoch);
        }
        tracked.subscribers.push(queue.clone());
        subscriptions.registry.add(queue.clone());
        Ok(Subscription::new(snapshot, queue))
    }
}
