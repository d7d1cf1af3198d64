//! The engine's side of connectors: starting feeds, applying their batches, idle splits, dead
//! letters and progress figures.

use crossbeam_channel::Receiver;
use eddy_planner::StreamPlan;
use eddy_storage::keys::SOURCE_ERRORS_TABLE;
use eddy_storage::{EpochBatch, ObjectKind, TableId};
use serde::{Deserialize, Serialize};

use super::{Engine, SourceDefinition};
use crate::connector::{DeadLetter, SourceEvent, SourceSpec};
use crate::feed::{lag_seconds, Feed};
use crate::stats::SourceProgressStats;
use crate::table::TableRuntime;
use crate::{ExecError, Result};

/// How many dead letters `eddy_catalog.source_errors` keeps.
pub const SOURCE_ERRORS_RETENTION: u64 = 100_000;
/// Dead letters keep at most this much of the payload.
pub const PAYLOAD_LIMIT: usize = 1024;

/// A message a source could not decode, as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredDeadLetter {
    pub source: String,
    pub split: String,
    pub position: i64,
    pub error: String,
    /// The payload, cut to [`PAYLOAD_LIMIT`] bytes (lossy UTF-8).
    pub payload: String,
    /// When the message was read, in microseconds since the epoch (wall clock).
    pub read_at: i64,
    /// The view (or connector table) whose reader met it; empty in letters stored before
    /// readers were recorded.
    #[serde(default)]
    pub reader: String,
}

pub fn write_dead_letter(
    epoch: &mut EpochBatch,
    seq: &mut u64,
    source: &str,
    letter: DeadLetter,
) -> Result<()> {
    let cut = &letter.payload[..letter.payload.len().min(PAYLOAD_LIMIT)];
    let stored = StoredDeadLetter {
        source: source.to_string(),
        split: letter.split,
        position: letter.position,
        error: letter.error,
        payload: String::from_utf8_lossy(cut).into_owned(),
        read_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64),
        reader: letter.reader,
    };
    let bytes = serde_json::to_vec(&stored).map_err(eddy_storage::StorageError::from)?;
    epoch.put(SOURCE_ERRORS_TABLE, &seq.to_be_bytes(), bytes);
    if *seq >= SOURCE_ERRORS_RETENTION {
        epoch.delete(
            SOURCE_ERRORS_TABLE,
            &(*seq - SOURCE_ERRORS_RETENTION).to_be_bytes(),
        );
    }
    *seq += 1;
    Ok(())
}

impl Engine {
    pub(super) fn create_source(&mut self, def: SourceDefinition, sql: String) -> Result<()> {
        if self.name_taken(&def.table.name) {
            return Err(ExecError::DuplicateObject(format!(
                "relation \"{}\" already exists",
                def.table.name
            )));
        }
        // Check the options now (and reach the broker), so mistakes surface at CREATE time.
        crate::connector::validate(&def.spec)?;
        let mut entry = self.allocate_entry(ObjectKind::Source, def.table.name.clone(), sql, 0);
        entry.source_schema = def.spec.encode.schema_text();
        entry.source_key_schema = def.spec.key_encode.as_ref().and_then(|e| e.schema_text());
        entry.write(&mut self.epoch_writes)?;
        self.sources.insert(entry.name.clone(), (entry, def));
        Ok(())
    }

    /// Starts the connector feeding table or view `target` (its progress kept under `id`).
    pub(super) fn start_feed(
        &mut self,
        target: &str,
        spec: SourceSpec,
        id: TableId,
        table: &TableRuntime,
    ) -> Result<()> {
        let mut feed = Feed::start(spec, id, self.store.as_ref(), self.interactive.clone())?;
        feed.reader = table.object_name.clone();
        self.feeds.insert(target.to_string(), feed);
        Ok(())
    }

    /// For a view over sources: a private reader table and feed per source it reads, keeping
    /// their progress under the view's last table ids (one per source, in input order).
    pub(super) fn open_view_readers(
        &mut self,
        view: &str,
        plan: &StreamPlan,
        table_ids: &[TableId],
    ) -> Result<Vec<super::Reader>> {
        let sources: Vec<String> = plan
            .input_names()
            .into_iter()
            .filter(|name| self.sources.contains_key(*name))
            .map(str::to_string)
            .collect();
        let first = table_ids.len().checked_sub(sources.len()).ok_or_else(|| {
            ExecError::UndefinedObject("a view over a source needs a progress id".into())
        })?;
        let mut readers = Vec::with_capacity(sources.len());
        for (source_name, &id) in sources.iter().zip(&table_ids[first..]) {
            let Some((_, source)) = self.sources.get(source_name) else {
                continue;
            };
            let source = source.clone();
            let feed = reader_feed_name(view, source_name, sources.len());
            let mut table = TableRuntime::open(id, source.table.clone(), self.store.as_ref())?;
            table.object_name = view.to_string();
            self.start_feed(&feed, source.spec, id, &table)?;
            readers.push(super::Reader {
                source: source_name.clone(),
                feed,
                table,
            });
        }
        Ok(readers)
    }

    /// Stops selecting the channel of `target`'s feed: its connector ended (finished, failed or
    /// panicked) and every event it sent has been taken, so nothing more can come.
    pub(super) fn stop_waiting_on(&mut self, target: &str, events: &Receiver<SourceEvent>) {
        let Some(feed) = self.feeds.get_mut(target) else {
            return;
        };
        if !feed.events.same_channel(events) {
            return;
        }
        if !feed.finished && feed.last_error.is_none() {
            feed.last_error = Some("the connector stopped before the end of its source".into());
        }
        feed.events = crossbeam_channel::never();
    }

    /// Applies one event from the feed of `target`.
    pub(super) fn on_source_event(&mut self, target: &str, event: SourceEvent) {
        let result = self.apply_source_event(target, event);
        if let Err(error) = result {
            tracing::error!(%error, target, "applying source data failed; reloading the last committed epoch");
            let message = error.to_string();
            let _ = self.abandon_on_error::<()>(Err(error));
            if let Some(feed) = self.feeds.get_mut(target) {
                feed.last_error = Some(message);
            }
        }
    }

    fn apply_source_event(&mut self, target: &str, event: SourceEvent) -> Result<()> {
        let Some(feed) = self.feeds.get_mut(target) else {
            return Ok(());
        };
        match event {
            SourceEvent::Splits { splits, generation } => {
                for report in &splits {
                    feed.report(report);
                }
                feed.reported_generation = feed.reported_generation.max(generation);
                // A split found behind its fresh end stops counting as idle before its rows
                // come, not at the next tick.
                let changed = feed.update_idle();
                if let Some(table) = self.feed_table(target) {
                    for report in &splits {
                        table.register_split(&report.split);
                    }
                }
                self.set_splits_idle(target, changed)
            }
            SourceEvent::Error(message) => {
                feed.last_error = Some(message);
                feed.broker_lost();
                let changed = feed.update_idle();
                self.set_splits_idle(target, changed)
            }
            SourceEvent::Finished => {
                feed.finished = true;
                Ok(())
            }
            SourceEvent::Batch(batch) => {
                let messages = (batch.rows.num_rows() + batch.dead_letters.len()) as i64;
                feed.advance(&batch.split, batch.next_position, messages);
                feed.last_error = None;
                feed.add_dead_letters(&batch.split, batch.dead_letters);
                self.dirty = true;
                if batch.rows.num_rows() == 0 {
                    return Ok(());
                }
                let rows = crate::connector::stamp_processing_time(&feed.spec, batch.rows)?;
                let store = self.store.clone();
                let table = self.feed_table(target).ok_or_else(|| {
                    ExecError::UndefinedObject(format!("no table for feed {target}"))
                })?;
                let changes = table.apply(rows, batch.deletes, &batch.split, store.as_ref())?;
                let refused = table.take_refused();
                if let (false, Some(feed)) = (refused.is_empty(), self.feeds.get_mut(target)) {
                    // A row's own position is not known after decoding: the batch's end is.
                    let letters = refused.into_iter().map(|refused| DeadLetter {
                        split: batch.split.clone(),
                        position: batch.next_position,
                        error: refused.error,
                        payload: refused.row.into_bytes(),
                        reader: String::new(),
                    });
                    feed.add_dead_letters(&batch.split, letters.collect());
                }
                self.route(target, changes)
            }
        }
    }

    /// The table runtime a feed writes into.
    fn feed_table(&mut self, target: &str) -> Option<&mut TableRuntime> {
        if let Some((_, table)) = self.tables.get_mut(target) {
            return Some(table);
        }
        self.views
            .values_mut()
            .find_map(|v| v.reader_mut(target))
            .map(|r| &mut r.table)
    }

    /// Sends a feed's changes on: to every view of a stored table, or into its own view.
    fn route(
        &mut self,
        target: &str,
        changes: (Option<crate::StreamChunk>, Option<crate::Watermark>),
    ) -> Result<()> {
        if self.tables.contains_key(target) {
            return self.fan_out(target, changes);
        }
        let view = self
            .views
            .values()
            .find(|v| v.reader(target).is_some())
            .ok_or_else(|| ExecError::UndefinedObject(format!("no view for feed {target}")))?;
        let source = view
            .reader(target)
            .map(|r| r.source.clone())
            .unwrap_or_default();
        let name = view.entry.name.clone();
        let messages: Vec<crate::Message> = changes
            .0
            .map(crate::Message::Chunk)
            .into_iter()
            .chain(changes.1.map(crate::Message::Watermark))
            .collect();
        let view_changes = self.push_into_view(&name, &source, &messages)?;
        self.deliver(&name, view_changes)
    }

    /// Idle splits stop holding the watermark back; rates and lag trends are refreshed.
    pub(super) fn tick_feeds(&mut self) {
        let names: Vec<String> = self.feeds.keys().cloned().collect();
        for name in names {
            let held = self.feed_held(&name);
            let changed = match self.feeds.get_mut(&name) {
                // A held feed's splits are quiet because Eddy does not read them: not idle.
                Some(feed) if held => {
                    feed.tick();
                    continue;
                }
                Some(feed) => {
                    feed.tick();
                    feed.update_idle()
                }
                None => continue,
            };
            if let Err(error) = self.set_splits_idle(&name, changed) {
                let _ = self.abandon_on_error::<()>(Err(error));
                return;
            }
        }
    }

    /// Tells the table fed by `name` which splits went idle or active, and sends on the
    /// watermark that moved.
    fn set_splits_idle(&mut self, name: &str, changed: Vec<(String, bool)>) -> Result<()> {
        for (split, idle) in changed {
            let watermark = self
                .feed_table(name)
                .and_then(|t| t.set_split_idle(&split, idle));
            if let Some(watermark) = watermark {
                self.dirty = true;
                self.route(name, (None, Some(watermark)))?;
            }
        }
        Ok(())
    }

    pub(super) fn source_progress(&self) -> Vec<SourceProgressStats> {
        let mut rows = Vec::new();
        for (target, feed) in &self.feeds {
            let watermark = match self.tables.get(target) {
                Some((_, table)) => table.watermark(),
                None => self
                    .views
                    .values()
                    .find_map(|v| v.reader(target))
                    .and_then(|r| r.table.watermark()),
            };
            for (split, progress) in &feed.splits {
                rows.push(SourceProgressStats {
                    source: feed.spec.name.clone(),
                    target: target.clone(),
                    split: split.clone(),
                    position: progress.position,
                    high_watermark: progress.high_watermark,
                    lag_messages: crate::feed::lag_messages(progress),
                    rate: progress.rate,
                    lag_seconds: lag_seconds(progress),
                    lag_trend: progress.lag_trend,
                    watermark: watermark.map(|w| w.value),
                    idle: progress.idle,
                    finished: feed.finished,
                    // A held feed says so (its lag is not refreshed).
                    last_error: self
                        .feed_held_reason(target)
                        .or_else(|| feed.last_error.clone()),
                    dead_letters: progress.dead_letters,
                });
            }
        }
        rows
    }
}

/// The feed name of a view's reader of `source`: the view's own name when it reads one source
/// (so that `eddy_catalog.source_progress` names the view), `view/source` otherwise.
pub(super) fn reader_feed_name(view: &str, source: &str, sources_read: usize) -> String {
    if sources_read == 1 {
        view.to_string()
    } else {
        format!("{view}/{source}")
    }
}
