//! An epoch's commit: one atomic write of everything the epoch changed, then the
//! acknowledgements and the FLUSHes it completes.

use super::committer::{self, Written};
use super::scope::{in_scope, Reach, Scope};
use super::*;

impl Engine {
    /// Replies now on error; on success, once the epoch holding the change is committed (a
    /// full epoch). An error after state was touched abandons the epoch (state reloads from
    /// the store).
    pub(super) fn ack_after_commit<T: Send + 'static>(
        &mut self,
        reply: Reply<T>,
        result: Result<T>,
    ) {
        self.reach = Reach::Everything;
        self.push_ack(reply, result);
    }

    /// As [`Self::ack_after_commit`] for a statement that changed only rows of `table`: its
    /// epoch may be scoped to the views over that table (see [`super::scope`]).
    pub(super) fn ack_rows_after_commit<T: Send + 'static>(
        &mut self,
        table: &str,
        reply: Reply<T>,
        result: Result<T>,
    ) {
        self.reach.table(table);
        self.push_ack(reply, result);
    }

    fn push_ack<T: Send + 'static>(&mut self, reply: Reply<T>, result: Result<T>) {
        match result {
            Ok(value) => {
                self.dirty = true;
                self.statements_since.get_or_insert_with(Instant::now);
                self.acks.push(Box::new(move |committed: Result<()>| {
                    let _ = reply.send(committed.map(|()| value));
                }));
            }
            Err(error) => {
                let _ = reply.send(Err(error));
            }
        }
    }

    /// Moves FLUSHes whose feeds have caught up into this epoch's acknowledgements.
    pub(super) fn check_flushes(&mut self) {
        if self.flushes.is_empty() {
            return;
        }
        let mut waiting = Vec::new();
        for mut flush in std::mem::take(&mut self.flushes) {
            for (name, wait) in flush.targets.iter_mut() {
                if let (FlushWait::Refresh(generation), Some(feed)) = (&*wait, self.feeds.get(name))
                {
                    if feed.reported_generation >= *generation {
                        *wait = FlushWait::Target(feed.flush_target());
                    }
                }
            }
            let behind = flush.targets.iter().find(|(name, wait)| {
                self.feeds.get(*name).is_some_and(|feed| match wait {
                    FlushWait::Refresh(_) => true,
                    FlushWait::Target(target) => !feed.reached(target),
                })
            });
            match behind {
                None => {
                    let epoch = self.counters.epoch + 1;
                    self.ack_after_commit(flush.reply, Ok(epoch));
                }
                Some((name, _)) if flush.since.elapsed() >= FLUSH_TIMEOUT => {
                    let error = self.feeds.get(name).and_then(|f| f.last_error.clone());
                    let _ = flush.reply.send(Err(ExecError::NotSupported(format!(
                        "FLUSH gave up after {}s waiting for the source feeding \"{name}\"{}",
                        FLUSH_TIMEOUT.as_secs(),
                        error.map_or(String::new(), |e| format!(" (last error: {e})"))
                    ))));
                }
                Some(_) => waiting.push(flush),
            }
        }
        self.flushes = waiting;
    }

    pub(super) fn fail_pending(&mut self, why: &str) {
        self.reach = Reach::default();
        self.statements_since = None;
        for ack in self.acks.drain(..) {
            ack(Err(ExecError::Internal(why.to_string())));
        }
    }

    /// Commits the epoch (the objects in `scope`): its batch goes to the committer, which
    /// acknowledges its statements once it is durable, while the engine goes on (see
    /// [`super::committer`]).
    pub(super) fn commit_and_ack(&mut self, scope: Scope) {
        let started = Instant::now();
        if self.finish_in_flight().is_err() {
            // That failure abandoned this epoch too, and reloaded.
            return;
        }
        let waited = started.elapsed();
        let scoped = scope.is_some();
        let statements_since = self.statements_since.take();
        match self.prepare_epoch(scope) {
            Ok(epoch) => {
                // `EDDY_LOG=eddy::epochs=debug`: where a statement's time goes.
                tracing::debug!(
                    target: "eddy::epochs",
                    epoch = epoch.epoch,
                    scoped,
                    statements = self.acks.len(),
                    // From the first statement's arrival to here.
                    statement_age_ms = statements_since
                        .map_or(0.0, |since| since.elapsed().as_secs_f64() * 1e3),
                    waited_for_previous_ms = waited.as_secs_f64() * 1e3,
                    barrier_ms = (started.elapsed() - waited).as_secs_f64() * 1e3,
                    writes = epoch.writes,
                    "epoch prepared"
                );
                self.dispatch(epoch);
                // A subscription starts at a commit, with what every later epoch changes: none
                // may be processed before it has started.
                if self.subscriptions.starting() {
                    let _ = self.finish_in_flight();
                }
            }
            Err(error) => {
                tracing::error!(%error, "epoch commit failed; reloading the last committed epoch");
                for ack in std::mem::take(&mut self.acks) {
                    ack(Err(committer::statement_error(&error)));
                }
                if let Err(error) = self.reload() {
                    tracing::error!(%error, "reloading after a failed commit failed");
                }
            }
        }
    }

    /// Commits the epoch and waits until it is durable.
    pub(super) fn commit(&mut self) -> Result<()> {
        self.finish_in_flight()?;
        let epoch = self.prepare_epoch(None)?;
        self.dispatch(epoch);
        self.finish_in_flight()
    }

    /// Hands a prepared epoch to the committer, with the statements it acknowledges.
    fn dispatch(&mut self, prepared: PreparedEpoch) {
        let acks = std::mem::take(&mut self.acks);
        self.subscriptions.seal(&prepared.scope);
        let stats = self.stats_now();
        let shared = self.stats.clone();
        let observer = self.commit_observer.get().cloned();
        let PreparedEpoch {
            epoch,
            batch,
            started,
            bytes,
            writes,
            scope,
        } = prepared;
        let scoped = scope.is_some();
        let on_durable = Box::new(move |write| {
            *shared.write().unwrap_or_else(|e| e.into_inner()) = stats;
            if let Some(observer) = observer {
                observer(&CommitReport {
                    epoch,
                    duration: started.elapsed(),
                    write,
                    bytes,
                    writes,
                    scoped,
                });
            }
        });
        let (done, batch) = self.committer.begin(batch, on_durable, acks);
        self.in_flight = Some(InFlight {
            epoch,
            done,
            _written: batch,
        });
    }

    /// Whether an epoch is still being written.
    pub(super) fn writing(&self) -> bool {
        self.in_flight.as_ref().is_some_and(|f| f.done.is_empty())
    }

    /// Waits for the epoch in flight, if any, and completes it.
    pub(super) fn finish_in_flight(&mut self) -> Result<()> {
        let Some(in_flight) = self.in_flight.take() else {
            return Ok(());
        };
        let written = in_flight
            .done
            .recv()
            .unwrap_or_else(|_| Err(ExecError::Internal("the committer stopped".into())));
        self.complete(in_flight, written)
    }

    /// After the committer wrote an epoch (and answered its statements): sinks and
    /// subscriptions take its changes. After a failure, the epoch being processed is abandoned
    /// with it and the engine reloads the last durable epoch.
    pub(super) fn complete(&mut self, in_flight: InFlight, written: Written) -> Result<()> {
        if let Err(error) = written {
            tracing::error!(%error, epoch = in_flight.epoch, "epoch commit failed; reloading the last committed epoch");
            for ack in std::mem::take(&mut self.acks) {
                ack(Err(committer::statement_error(&error)));
            }
            if let Err(error) = self.reload() {
                tracing::error!(%error, "reloading after a failed commit failed");
            }
            return Err(error);
        }
        self.sinks_committed();
        self.subscriptions_committed(in_flight.epoch);
        Ok(())
    }

    /// Runs a barrier through every pipeline (in `scope`) and gathers the epoch's one atomic
    /// write: rows, state, watermarks, late rows, source positions and dead letters together.
    fn prepare_epoch(&mut self, scope: Scope) -> Result<PreparedEpoch> {
        self.restore_unrestored()?;
        let started = Instant::now();
        let epoch = self.counters.epoch + 1;
        let barrier = Barrier { epoch };
        let mut batch = std::mem::take(&mut self.epoch_writes);
        for (name, (_, table)) in self.tables.iter_mut() {
            if in_scope(&scope, name) {
                table.commit(&mut batch, &mut self.counters.late_seq)?;
            }
        }
        // Upstream views first (creation order), so that what a view emits at its barrier
        // reaches the views reading it before their own barrier.
        let mut order: Vec<(u64, String)> = self
            .views
            .values()
            .filter(|v| in_scope(&scope, &v.entry.name))
            .map(|v| (v.entry.seq, v.entry.name.clone()))
            .collect();
        order.sort_unstable();
        for (_, name) in order {
            let Some(view) = self.views.get_mut(&name) else {
                continue;
            };
            for reader in &mut view.readers {
                reader
                    .table
                    .commit(&mut batch, &mut self.counters.late_seq)?;
            }
            let Some((changes, failed_rows)) = self.barrier_view(&name, barrier, &mut batch)?
            else {
                continue;
            };
            for failed in failed_rows {
                crate::view_errors::write(
                    &mut batch,
                    &mut self.counters.view_error_seq,
                    &name,
                    failed,
                )?;
            }
            self.deliver(&name, changes)?;
        }
        // Every change of the epoch has reached the sinks reading it.
        self.log_sinks(&mut batch, epoch, &scope)?;
        // Views measured at this barrier past the budget fail in this epoch; with those that
        // failed at their barrier, their catalog entries and dropped state commit now too.
        self.enforce_state_budget()?;
        batch.append(std::mem::take(&mut self.epoch_writes));
        let feeds: Vec<String> = self
            .feeds
            .keys()
            .filter(|feed| scope.is_none() || in_scope(&scope, self.feed_owner(feed)))
            .cloned()
            .collect();
        for name in feeds {
            let Some(feed) = self.feeds.get_mut(&name) else {
                continue;
            };
            feed.commit(&mut batch)?;
            for letter in std::mem::take(&mut feed.dead_letters) {
                sources::write_dead_letter(
                    &mut batch,
                    &mut self.counters.error_seq,
                    &feed.spec.name,
                    letter,
                )?;
            }
        }
        let mut counters = self.counters;
        counters.epoch = epoch;
        batch.put_meta(
            COUNTERS,
            serde_json::to_vec(&counters).map_err(eddy_storage::StorageError::from)?,
        );
        self.step_index_builds(&mut batch)?;
        self.maintain_indexes(&mut batch)?;
        let (bytes, writes) = (batch.bytes() as u64, batch.len() as u64);
        self.counters = counters;
        // What a scoped epoch left out is still to be committed.
        self.dirty = scope.is_some();
        self.reach = Reach::default();
        Ok(PreparedEpoch {
            epoch,
            batch,
            started,
            bytes,
            writes,
            scope,
        })
    }
}

/// An epoch's write, ready for the committer.
struct PreparedEpoch {
    epoch: u64,
    batch: EpochBatch,
    started: Instant,
    bytes: u64,
    writes: u64,
    scope: Scope,
}

/// The epoch the committer is writing.
pub(super) struct InFlight {
    epoch: u64,
    pub(super) done: Receiver<Written>,
    /// Dropped here, by the engine thread that allocated it (freeing it on the committer's
    /// thread cost about a sixth of the CPU q20 takes).
    _written: Arc<EpochBatch>,
}
