//! An epoch's commit: one atomic write of everything the epoch changed, then the
//! acknowledgements and the FLUSHes it completes.

use super::*;

impl Engine {
    /// Replies now on error; on success, once the epoch holding the change is committed.
    /// An error after state was touched abandons the epoch (state reloads from the store).
    pub(super) fn ack_after_commit<T: Send + 'static>(
        &mut self,
        reply: Reply<T>,
        result: Result<T>,
    ) {
        match result {
            Ok(value) => {
                self.dirty = true;
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
        for ack in self.acks.drain(..) {
            ack(Err(ExecError::Internal(why.to_string())));
        }
    }

    pub(super) fn commit_and_ack(&mut self) {
        let result = self.commit();
        let acks = std::mem::take(&mut self.acks);
        match result {
            Ok(()) => acks.into_iter().for_each(|ack| ack(Ok(()))),
            Err(error) => {
                tracing::error!(%error, "epoch commit failed; reloading the last committed epoch");
                // A storage fault reaches each statement as itself (53100 for a full disk);
                // nothing of the epoch was committed.
                let fault = match &error {
                    ExecError::Storage(storage) => storage.fault().cloned(),
                    _ => None,
                };
                let too_long = match &error {
                    ExecError::Storage(eddy_storage::StorageError::KeyTooLong { table, bytes }) => {
                        Some((*table, *bytes))
                    }
                    _ => None,
                };
                let message = error.to_string();
                for ack in acks {
                    ack(Err(match (&fault, too_long) {
                        (Some(fault), _) => eddy_storage::StorageError::Fault(fault.clone()).into(),
                        (None, Some((table, bytes))) => {
                            eddy_storage::StorageError::KeyTooLong { table, bytes }.into()
                        }
                        (None, None) => ExecError::Internal(format!(
                            "the epoch could not be committed: {message}"
                        )),
                    }));
                }
                if let Err(error) = self.reload() {
                    tracing::error!(%error, "reloading after a failed commit failed");
                }
            }
        }
    }

    /// Runs a barrier through every pipeline and commits the epoch atomically: rows, state,
    /// watermarks, late rows, source positions and dead letters together.
    pub(super) fn commit(&mut self) -> Result<()> {
        self.restore_unrestored()?;
        let started = Instant::now();
        let epoch = self.counters.epoch + 1;
        let barrier = Barrier { epoch };
        let mut batch = std::mem::take(&mut self.epoch_writes);
        for (_, table) in self.tables.values_mut() {
            table.commit(&mut batch, &mut self.counters.late_seq)?;
        }
        // Upstream views first (creation order), so that what a view emits at its barrier
        // reaches the views reading it before their own barrier.
        let mut order: Vec<(u64, String)> = self
            .views
            .values()
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
        self.log_sinks(&mut batch, epoch)?;
        // Views measured at this barrier past the budget fail in this epoch; with those that
        // failed at their barrier, their catalog entries and dropped state commit now too.
        self.enforce_state_budget()?;
        batch.append(std::mem::take(&mut self.epoch_writes));
        for feed in self.feeds.values_mut() {
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
        self.store.commit(batch)?;
        self.counters = counters;
        self.dirty = false;
        self.sinks_committed();
        self.subscriptions_committed(epoch);
        if let Some(observer) = self.commit_observer.get() {
            observer(&CommitReport {
                epoch,
                duration: started.elapsed(),
                bytes,
                writes,
            });
        }
        self.publish_stats();
        Ok(())
    }
}
