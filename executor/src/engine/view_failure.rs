//! One view's failure stays in that view.
//!
//! A view whose operators fail at run time (an error, a panic) or whose state passes its
//! memory budget stops alone: its graph and state are dropped, its catalog entry records why,
//! and reading it answers that error until it is dropped. The tables, sources and other views
//! go on committing. Only a storage error, which no view causes, still abandons the epoch.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

use eddy_storage::{EpochBatch, ViewFailure};

use super::Engine;
use crate::operators::FailedRow;
use crate::{Barrier, ExecError, Message, Result};

/// The memory views' state may hold: per view, and all views together (bytes, estimated by
/// the operators). Past either, a view fails: past the total, the one holding the most.
#[derive(Debug)]
pub struct StateBudget {
    per_view: AtomicUsize,
    total: AtomicUsize,
}

impl Default for StateBudget {
    fn default() -> Self {
        Self {
            per_view: AtomicUsize::new(usize::MAX),
            total: AtomicUsize::new(usize::MAX),
        }
    }
}

impl StateBudget {
    pub fn set(&self, per_view: usize, total: usize) {
        self.per_view.store(per_view, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
    }

    /// The memory one view's state may hold, in bytes.
    pub fn per_view(&self) -> usize {
        self.per_view.load(Ordering::Relaxed)
    }

    fn limits(&self) -> (usize, usize) {
        (
            self.per_view.load(Ordering::Relaxed),
            self.total.load(Ordering::Relaxed),
        )
    }
}

/// SQLSTATE of a view whose state passed its budget (Postgres' out_of_memory).
pub const OUT_OF_MEMORY: &str = "53200";

impl Engine {
    /// Pushes `messages` from `input` through view `view`'s graph and returns what the view
    /// emitted. A failure of the view's own (an error or a panic in its operators) fails the
    /// view and returns no changes; a storage error is returned, to abandon the epoch.
    pub(super) fn push_into_view(
        &mut self,
        view: &str,
        input: &str,
        messages: &[Message],
    ) -> Result<Vec<Message>> {
        let Some(graph) = self.views.get_mut(view).and_then(|v| v.graph.as_mut()) else {
            return Ok(Vec::new());
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<Vec<Message>> {
            #[cfg(debug_assertions)]
            if std::env::var("EDDY_TEST_PANIC_ON_PUSH").is_ok_and(|v| v == view) {
                // Debug builds only: the tests' way to see one view's bug stay in that view.
                panic!("a fault injected into view {view}");
            }
            let mut changes = Vec::new();
            for message in messages {
                changes.extend(graph.push(input, message.clone())?);
            }
            Ok(changes)
        }));
        Ok(self.on_view_outcome(view, outcome)?.unwrap_or_default())
    }

    /// Runs the barrier through view `name`: its changes and the rows its expressions failed
    /// on, or None when the view has failed (now or before).
    pub(super) fn barrier_view(
        &mut self,
        name: &str,
        barrier: Barrier,
        batch: &mut EpochBatch,
    ) -> Result<Option<(Vec<Message>, Vec<FailedRow>)>> {
        let Some(graph) = self.views.get_mut(name).and_then(|v| v.graph.as_mut()) else {
            return Ok(None);
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let changes = graph.barrier(barrier, batch)?;
            Ok((changes, graph.take_failed_rows()))
        }));
        self.on_view_outcome(name, outcome)
    }

    /// Passes a view's result on, failing the view when its operators did.
    fn on_view_outcome<T>(
        &mut self,
        view: &str,
        outcome: std::thread::Result<Result<T>>,
    ) -> Result<Option<T>> {
        match outcome {
            Ok(Ok(value)) => Ok(Some(value)),
            Ok(Err(error @ ExecError::Storage(_))) => Err(error),
            Ok(Err(error)) => {
                self.fail_view(view, runtime_sqlstate(&error), error.to_string())?;
                Ok(None)
            }
            Err(panic) => {
                // The panic hook noted it for an interrupted statement: none was.
                let _ = super::panic_note::take();
                let what = super::run_loop::panic_message(panic.as_ref());
                self.fail_view(view, "XX000", format!("internal error: {what}"))?;
                Ok(None)
            }
        }
    }

    /// Fails the views whose state passes the budget: each view past its own limit, then the
    /// largest while all together pass the total.
    pub(super) fn enforce_state_budget(&mut self) -> Result<()> {
        let (per_view, total) = self.state_budget.limits();
        let mut sizes: Vec<(usize, String)> = self
            .views
            .values()
            .filter_map(|v| Some((v.graph.as_ref()?.state_bytes(), v.entry.name.clone())))
            .collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        let mut held: usize = sizes.iter().map(|(bytes, _)| bytes).sum();
        for (bytes, name) in sizes {
            let limit = if bytes > per_view {
                format!(
                    "its own limit of {} (--view-state-memory-limit)",
                    mib(per_view)
                )
            } else if held > total {
                format!(
                    "what all views may hold together, {} (--state-memory-limit), with {} held; it was the largest",
                    mib(total),
                    mib(held)
                )
            } else {
                continue;
            };
            held -= bytes;
            let message = format!(
                "its state grew to about {} in memory, past {limit}. A view over an input that never ends needs a window, a watermark or a bound on its keys to keep its state bounded",
                mib(bytes)
            );
            self.fail_view(&name, OUT_OF_MEMORY, message)?;
        }
        Ok(())
    }

    /// Stops view `name` for good: its graph and operator state go, its readers stop, and its
    /// catalog entry records `message` (in the current epoch, which commits them together).
    pub(super) fn fail_view(&mut self, name: &str, sqlstate: &str, message: String) -> Result<()> {
        let epoch = self.counters.epoch;
        let Some(view) = self.views.get_mut(name) else {
            return Ok(());
        };
        if view.graph.take().is_none() {
            return Ok(());
        }
        tracing::error!(view = name, sqlstate, %message, "materialized view failed: it is no longer maintained");
        view.entry.failed = Some(ViewFailure {
            sqlstate: sqlstate.to_string(),
            message,
            epoch,
        });
        let mut writes = EpochBatch::default();
        view.entry.write(&mut writes)?;
        // The rows stay (views looking it up read them); the operators' state goes.
        for &id in &view.entry.table_ids[1..] {
            for (key, _) in self.store.scan_table(id)? {
                writes.delete(id, &key);
            }
        }
        for reader in std::mem::take(&mut view.readers) {
            if let Some(mut feed) = self.feeds.remove(&reader.feed) {
                feed.stop();
            }
        }
        self.epoch_writes.append(writes);
        self.dirty = true;
        Ok(())
    }
}

/// The SQLSTATE a read of a view failed by `error` answers.
fn runtime_sqlstate(error: &ExecError) -> &'static str {
    use datafusion::arrow::error::ArrowError;
    use datafusion::error::DataFusionError;
    let arrow = match error {
        ExecError::Arrow(e) => Some(e),
        ExecError::DataFusion(DataFusionError::ArrowError(e, _)) => Some(e.as_ref()),
        ExecError::NotSupported(_) => return "0A000",
        ExecError::Constraint(_) => return "23000",
        ExecError::OutOfMemory(_) => return OUT_OF_MEMORY,
        ExecError::DataFusion(DataFusionError::External(inner)) => {
            if let Some(coded) = inner.downcast_ref::<eddy_planner::CodedError>() {
                return coded.code;
            }
            return match inner.downcast_ref::<eddy_planner::PlanError>() {
                Some(eddy_planner::PlanError::OutOfRange(_)) => "22008",
                Some(eddy_planner::PlanError::LimitExceeded(_)) => "54000",
                _ => "XX000",
            };
        }
        _ => None,
    };
    match arrow {
        Some(ArrowError::DivideByZero) => "22012",
        Some(ArrowError::ArithmeticOverflow(_)) => "22003",
        Some(ArrowError::CastError(_) | ArrowError::ParseError(_)) => "22P02",
        Some(ArrowError::ComputeError(m)) if m.contains("overflow") => "22003",
        _ => "XX000",
    }
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}
