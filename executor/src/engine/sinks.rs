//! The engine's side of sinks: what a sink's input changes goes into its log at each commit,
//! in the epoch's own write; the epochs its sender delivered are trimmed; the messages its
//! target refused go to the error table.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex};
use std::thread::JoinHandle;

use eddy_storage::keys::SINK_ERRORS_TABLE;
use eddy_storage::{CatalogEntry, EpochBatch, KeyRange, ObjectKind, TableId};
use serde::{Deserialize, Serialize};

use super::Engine;
use crate::sink::file::{self, FileSenderSetup, FileTarget};
use crate::sink::kafka::sender::{self, SenderSetup};
use crate::sink::kafka::KafkaTarget;
use crate::sink::log::{self, LoggedEpoch, Position};
use crate::sink::status::{now_ms, SinkError, SinkShared, SinkStats};
use crate::sink::{SinkEncoder, SinkSpec};
use crate::{ExecError, Message, Result, StreamChunk};

/// What a sink keeps about its target, decided when it is created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkMeta {
    /// Unique to this sink: the `eddy.sink` header of its messages.
    pub id: String,
    /// The topic's partition count when the sink was created.
    pub partitions: i32,
}

impl SinkMeta {
    /// Reaches the sink's target: the topic must exist. Blocking (network): not for the
    /// engine thread.
    pub fn prepare(spec: &SinkSpec) -> Result<Self> {
        let partitions = match spec.connector.as_str() {
            "file" => {
                FileTarget::new(spec)?.prepare()?;
                0
            }
            _ => KafkaTarget::new(spec)?.partitions()?,
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Ok(Self {
            id: format!("{}.{nanos:x}", spec.name),
            partitions,
        })
    }

    fn key(log_table: TableId) -> String {
        format!("sink/{log_table}")
    }
}

/// A running sink.
pub(super) struct SinkRuntime {
    pub(super) entry: CatalogEntry,
    pub(super) spec: SinkSpec,
    encoder: SinkEncoder,
    /// This epoch's changes to the input (with whether they are the initial snapshot).
    pending: Vec<(StreamChunk, bool)>,
    /// The epoch written into the log in the commit under way.
    logging: Option<LoggedEpoch>,
    pub(super) shared: Arc<SinkShared>,
    sender: Option<JoinHandle<()>>,
}

impl SinkRuntime {
    pub(super) fn log_table(&self) -> TableId {
        self.entry.table_ids[0]
    }
}

impl Drop for SinkRuntime {
    fn drop(&mut self) {
        // The sender lets what it has in flight land first (a few seconds at most); the engine
        // does not wait for it: a sender that replaces it (a reload) waits instead, so that
        // it finds all of it in the partitions' tails.
        self.shared.stop();
        if let Some(sender) = self.sender.take() {
            let mut retiring = retiring();
            retiring.retain(|_, sender| !sender.is_finished());
            retiring.insert(self.entry.table_ids[0], sender);
        }
    }
}

/// Senders stopping, by their sink's log table: the next sender of the sink waits for its
/// predecessor before it starts.
static RETIRING: LazyLock<Mutex<HashMap<TableId, JoinHandle<()>>>> = LazyLock::new(Mutex::default);

fn retiring() -> std::sync::MutexGuard<'static, HashMap<TableId, JoinHandle<()>>> {
    RETIRING.lock().unwrap_or_else(|e| e.into_inner())
}

/// The key of a refused message in the error table: the sink's log table, then its position.
fn error_key(log_table: TableId, (epoch, seq): Position) -> Vec<u8> {
    let mut key = log_table.to_be_bytes().to_vec();
    key.extend_from_slice(&epoch.to_be_bytes());
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

impl Engine {
    pub(super) fn create_sink(
        &mut self,
        spec: SinkSpec,
        meta: SinkMeta,
        sql: String,
    ) -> Result<()> {
        if self.name_taken(&spec.name) {
            return Err(ExecError::DuplicateObject(format!(
                "relation \"{}\" already exists",
                spec.name
            )));
        }
        let snapshot = self.sink_input_snapshot(&spec.input)?;
        let mut entry = self.allocate_entry(ObjectKind::Sink, spec.name.clone(), sql, 1);
        // Its log churns like operator state: kept in the state keyspace.
        entry.table_ids[0] = eddy_storage::keys::state_table_id(entry.table_ids[0]);
        let log_table = entry.table_ids[0];
        self.epoch_writes.put_meta(
            &SinkMeta::key(log_table),
            serde_json::to_vec(&meta).map_err(eddy_storage::StorageError::from)?,
        );
        entry.write(&mut self.epoch_writes)?;
        let mut sink = self.start_sink(entry, spec, &meta)?;
        if sink.spec.snapshot {
            sink.pending.extend(snapshot.map(|chunk| (chunk, true)));
        }
        self.sinks.insert(sink.spec.name.clone(), sink);
        Ok(())
    }

    /// The rows a sink's input holds now (committed and pending), as inserts.
    fn sink_input_snapshot(&self, input: &str) -> Result<Option<StreamChunk>> {
        if let Some((_, table)) = self.tables.get(input) {
            return table.snapshot(self.store.as_ref());
        }
        if let Some(view) = self.views.get(input) {
            return match (&view.graph, &view.entry.failed) {
                (Some(graph), _) => graph.snapshot(self.store.as_ref()),
                (None, failure) => Err(ExecError::NotSupported(format!(
                    "materialized view \"{input}\" has failed and is no longer maintained ({}): drop it and create it again first",
                    failure.as_ref().map_or("", |f| f.message.as_str())
                ))),
            };
        }
        if self.sources.contains_key(input) {
            return Err(ExecError::NotSupported(format!(
                "a sink from source \"{input}\": a source keeps no rows of its own; create a materialized view over it (or a table WITH (connector = ...)) and a sink from that"
            )));
        }
        if self.plain_views.contains_key(input) {
            return Err(ExecError::NotSupported(format!(
                "a sink from view \"{input}\": a plain view has no changes of its own; create a materialized view and a sink from that"
            )));
        }
        Err(ExecError::UndefinedObject(format!(
            "relation \"{input}\" does not exist"
        )))
    }

    pub(super) fn restore_sink(&mut self, entry: CatalogEntry, spec: SinkSpec) -> Result<()> {
        let meta: SinkMeta = match self
            .store
            .get(&eddy_storage::keys::meta_key(&SinkMeta::key(
                entry.table_ids[0],
            )))? {
            Some(bytes) => {
                serde_json::from_slice(&bytes).map_err(eddy_storage::StorageError::from)?
            }
            None => {
                return Err(ExecError::Internal(format!(
                    "sink \"{}\" has no record of its target",
                    entry.name
                )))
            }
        };
        let sink = self.start_sink(entry, spec, &meta)?;
        self.sinks.insert(sink.spec.name.clone(), sink);
        Ok(())
    }

    /// The sink's runtime with its sender running, from what its log holds.
    fn start_sink(
        &self,
        entry: CatalogEntry,
        spec: SinkSpec,
        meta: &SinkMeta,
    ) -> Result<SinkRuntime> {
        let log_table = entry.table_ids[0];
        let logged = log::logged_epochs(self.store.as_ref(), log_table)?;
        let shared = SinkShared::new(logged, 0);
        let prefix = log_table.to_be_bytes();
        let refused: HashSet<Position> = self
            .store
            .read_range(
                &self.store.snapshot()?,
                SINK_ERRORS_TABLE,
                &KeyRange::prefix(&prefix),
                usize::MAX,
            )?
            .into_iter()
            .filter_map(|(key, _)| {
                let epoch = u64::from_be_bytes(key.get(4..12)?.try_into().ok()?);
                let seq = u32::from_be_bytes(key.get(12..16)?.try_into().ok()?);
                Some((epoch, seq))
            })
            .collect();
        let run: Box<dyn FnOnce() + Send> = match spec.connector.as_str() {
            "file" => {
                let setup = FileSenderSetup {
                    sink: spec.name.clone(),
                    target: FileTarget::new(&spec)?,
                    store: self.store.clone(),
                    log_table,
                    shared: shared.clone(),
                };
                Box::new(move || file::run(setup))
            }
            _ => {
                let setup = SenderSetup {
                    sink: spec.name.clone(),
                    sink_id: meta.id.clone(),
                    target: KafkaTarget::new(&spec)?,
                    partitions: meta.partitions,
                    store: self.store.clone(),
                    log_table,
                    shared: shared.clone(),
                    refused,
                };
                Box::new(move || sender::run(setup))
            }
        };
        // The sink's previous sender (before a reload) finishes first.
        let predecessor = retiring().remove(&log_table);
        let started = std::thread::Builder::new()
            .name(format!("eddy-sink-{}", spec.name))
            .spawn(move || {
                if let Some(predecessor) = predecessor {
                    let _ = predecessor.join();
                }
                run()
            });
        let sender = started.map_err(|e| {
            ExecError::Internal(format!(
                "starting the sender of sink \"{}\": {e}",
                spec.name
            ))
        })?;
        Ok(SinkRuntime {
            encoder: SinkEncoder::new(&spec),
            entry,
            spec,
            pending: Vec::new(),
            logging: None,
            shared,
            sender: Some(sender),
        })
    }

    /// Takes the changes of `upstream` that sinks read.
    pub(super) fn take_for_sinks(&mut self, upstream: &str, messages: &[Message]) {
        for sink in self.sinks.values_mut().filter(|s| s.spec.input == upstream) {
            for message in messages {
                if let Message::Chunk(chunk) = message {
                    sink.pending.push((chunk.clone(), false));
                }
            }
        }
    }

    /// At the commit of `epoch`: each sink's changes into its log (a sink whose input is
    /// outside `scope` keeps them for the epoch committing its input), delivered epochs
    /// trimmed, refused messages into the error table.
    pub(super) fn log_sinks(
        &mut self,
        batch: &mut EpochBatch,
        epoch: u64,
        scope: &super::scope::Scope,
    ) -> Result<()> {
        let ts_ms = now_ms();
        for sink in self.sinks.values_mut() {
            let log_table = sink.log_table();
            for delivered in sink.shared.take_delivered() {
                log::trim_epoch(batch, log_table, &delivered);
            }
            for error in sink.shared.take_errors() {
                write_error(batch, log_table, &error)?;
            }
            if !super::scope::in_scope(scope, &sink.spec.input) {
                continue;
            }
            let pending = std::mem::take(&mut sink.pending);
            let mut messages = Vec::new();
            for (chunk, snapshot) in &pending {
                sink.encoder
                    .encode(chunk, *snapshot, epoch, ts_ms, &mut messages)?;
            }
            sink.logging = match messages.is_empty() {
                true => None,
                false => Some(log::write_epoch(batch, log_table, epoch, ts_ms, &messages)?),
            };
        }
        Ok(())
    }

    /// After the commit: the senders may ship what was logged.
    pub(super) fn sinks_committed(&mut self) {
        let mut grew = false;
        for sink in self.sinks.values_mut() {
            if let Some(logged) = sink.logging.take() {
                sink.shared.logged(logged);
                grew = true;
            }
        }
        if grew {
            // A log only grows here: measure it again before the next statement runs.
            self.update_held_back_now();
        }
    }

    /// Whether a sink has delivered epochs to trim or refused messages to record.
    pub(super) fn sinks_need_commit(&self) -> bool {
        self.sinks
            .values()
            .any(|sink| sink.shared.has_trimmable() || sink.shared.errors_waiting())
    }

    /// Drops sink `name`: its sender stops, its log, record and refused messages go.
    pub(super) fn drop_sink(&mut self, name: &str) -> Result<()> {
        let sink = self.sinks.remove(name).ok_or_else(|| {
            ExecError::UndefinedExternal(format!("sink \"{name}\" does not exist"))
        })?;
        let log_table = sink.log_table();
        self.epoch_writes.delete_meta(&SinkMeta::key(log_table));
        let prefix = log_table.to_be_bytes();
        for (key, _) in self.store.read_range(
            &self.store.snapshot()?,
            SINK_ERRORS_TABLE,
            &KeyRange::prefix(&prefix),
            usize::MAX,
        )? {
            self.epoch_writes.delete(SINK_ERRORS_TABLE, &key);
        }
        self.remove_entry(&sink.entry)
    }

    /// The sinks reading `name`, quoted, for messages refusing to drop or rename it.
    pub(super) fn sinks_reading(&self, name: &str) -> Vec<String> {
        self.sinks
            .values()
            .filter(|s| s.spec.input == name)
            .map(|s| format!("\"{}\"", s.spec.name))
            .collect()
    }

    pub(super) fn sink_stats(&self) -> Vec<SinkStats> {
        self.sinks
            .values()
            .map(|sink| {
                let (_, bytes, _) = sink.shared.behind();
                SinkStats {
                    name: sink.spec.name.clone(),
                    input: sink.spec.input.clone(),
                    connector: sink.spec.connector.clone(),
                    format: sink.spec.format.name(),
                    encode: sink.spec.encode.name(),
                    target: sink.spec.target(),
                    key: sink.spec.key_names(),
                    sql: sink.entry.sql.clone(),
                    log_max_bytes: sink.spec.log_max_bytes,
                    backpressure: (bytes > sink.spec.log_max_bytes).then(|| {
                        format!(
                            "its log holds {bytes} bytes not yet delivered, over sink.log.max.bytes = {}: the changes of \"{}\" wait until the target takes them",
                            sink.spec.log_max_bytes, sink.spec.input
                        )
                    }),
                    shared: sink.shared.clone(),
                }
            })
            .collect()
    }
}

fn write_error(batch: &mut EpochBatch, log_table: TableId, error: &SinkError) -> Result<()> {
    batch.put(
        SINK_ERRORS_TABLE,
        &error_key(log_table, (error.epoch, error.seq)),
        serde_json::to_vec(error).map_err(eddy_storage::StorageError::from)?,
    );
    Ok(())
}
