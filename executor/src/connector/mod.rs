//! Connectors: where a source's rows come from (Nexmark generator, files, Kafka).
//!
//! A connector runs on its own thread and sends [`SourceEvent`]s over a bounded channel: when
//! the pipeline is behind, `send` blocks and reading pauses (backpressure), so memory stays
//! bounded. Each batch says which split it came from and where that split resumes; the engine
//! commits those positions in the same epoch as the state they produced (exactly-once), and a
//! restarted connector starts from them.

pub mod avro;
pub mod decode;
#[cfg(test)]
mod decode_bench;
pub mod file;
pub mod generator;
pub mod kafka;
pub mod nexmark;
pub mod payload_check;
pub mod protobuf;
pub mod text_timestamps;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{SendTimeoutError, Sender};
use datafusion::arrow::array::{
    ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef, TimeUnit};
use eddy_planner::statement::IncludeKind;

use crate::{ExecError, Result};

/// How many batches may wait between a connector and the engine.
pub const CHANNEL_BATCHES: usize = 4;

/// Rows read from one split, and where the split resumes after them.
#[derive(Debug)]
pub struct SourceBatch {
    pub split: String,
    /// Rows in the source's schema (declared columns, then INCLUDE columns).
    pub rows: RecordBatch,
    /// The position to resume the split from (Kafka: next offset; file: byte offset;
    /// generator: next event number).
    pub next_position: i64,
    /// Messages that could not be decoded, in order.
    pub dead_letters: Vec<DeadLetter>,
    /// `FORMAT UPSERT`: which rows are deletions (a message with no value; the row holds
    /// only its key). `None`: every row is an insert or an upsert.
    pub deletes: Option<Vec<bool>>,
}

/// A message that could not be decoded: kept in `eddy_catalog.source_errors`.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub split: String,
    pub position: i64,
    pub error: String,
    pub payload: Vec<u8>,
    /// The view (or connector table) whose reader met it: the engine fills it in (a source
    /// read by several views has a reader each, and each meets the same bad messages).
    pub reader: String,
}

/// What a connector reports besides rows.
#[derive(Debug)]
pub enum SourceEvent {
    Batch(SourceBatch),
    /// The splits the connector reads and, where known, how far each goes (Kafka high-water
    /// offsets), for `eddy_catalog.source_progress`; `generation` answers refresh requests.
    Splits {
        splits: Vec<SplitReport>,
        generation: u64,
    },
    /// The connector hit an error it retries (a broker that went away).
    Error(String),
    /// The connector read everything it will ever read (a file read once, a bounded generator).
    Finished,
}

/// What a connector knows about one split.
#[derive(Debug, Clone)]
pub struct SplitReport {
    pub split: String,
    /// Where the split ends now (Kafka's high-water offset), when known.
    pub high_watermark: Option<i64>,
    /// Where the connector reads it from (a resolved startup position before any data).
    pub position: Option<i64>,
}

impl SplitReport {
    pub fn new(split: impl Into<String>, high_watermark: Option<i64>) -> Self {
        Self {
            split: split.into(),
            high_watermark,
            position: None,
        }
    }
}

/// The encoding of messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encode {
    Json,
    Csv {
        delimiter: u8,
        header: bool,
    },
    /// Binary Avro datums of this record schema (its JSON text).
    Avro {
        schema: String,
    },
    /// Protobuf messages of type `message` (full name) of a FileDescriptorSet.
    Protobuf {
        descriptors: Vec<u8>,
        message: String,
    },
}

/// What each message of a source means (`FORMAT ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceFormat {
    /// Each message is a row.
    Plain,
    /// The message key is the primary key; a message with no value deletes it.
    Upsert,
    /// Each message is a Debezium change event (`before`, `after`, `op`); tombstones are
    /// ignored.
    Debezium,
}

impl SourceFormat {
    /// Whether rows replace and delete rows by primary key (else they are appended).
    pub fn keyed(self) -> bool {
        self != SourceFormat::Plain
    }
}

impl Encode {
    /// The message schema to keep in the catalog, for encodings that have one.
    pub fn schema_text(&self) -> Option<String> {
        match self {
            Encode::Avro { schema } => Some(schema.clone()),
            Encode::Protobuf { descriptors, .. } => {
                Some(descriptors.iter().map(|b| format!("{b:02x}")).collect())
            }
            Encode::Json | Encode::Csv { .. } => None,
        }
    }
}

/// Everything a connector needs to know about its source.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    pub name: String,
    pub connector: String,
    /// `WITH (...)` options, keys lower-cased.
    pub options: BTreeMap<String, String>,
    pub encode: Encode,
    /// What a message means: a row, an upsert by key, or a Debezium change event.
    pub format: SourceFormat,
    /// `FORMAT UPSERT`: how a tombstone's key is encoded when it is not JSON or text (an Avro
    /// key schema).
    pub key_encode: Option<Encode>,
    /// The primary-key columns (indices into the payload schema), for keyed formats.
    pub key_columns: Vec<usize>,
    /// The columns decoded from message payloads.
    pub payload_schema: SchemaRef,
    /// The source's full schema: payload columns then INCLUDE columns.
    pub schema: SchemaRef,
    /// INCLUDE columns, in order after the payload columns.
    pub includes: Vec<IncludeKind>,
}

impl SourceSpec {
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options.get(key).map(String::as_str)
    }

    pub fn required(&self, key: &str) -> Result<&str> {
        self.option(key).ok_or_else(|| {
            ExecError::NotSupported(format!(
                "source \"{}\": connector '{}' needs the option {key}",
                self.name, self.connector
            ))
        })
    }
}

/// The channel end and stop flag a running connector gets.
#[derive(Clone)]
pub struct ConnectorContext {
    pub events: Sender<SourceEvent>,
    pub stop: Arc<AtomicBool>,
    /// Committed positions per split (absent: start by the source's startup mode).
    pub positions: BTreeMap<String, i64>,
    /// Raised by the engine (a FLUSH) to ask for fresh split ends; answered by a `Splits`
    /// event carrying that generation.
    pub refresh: Arc<AtomicU64>,
    /// Raised by the engine while statements are being made (see [`ConnectorContext::batch_rows`]).
    pub interactive: Arc<AtomicBool>,
}

/// The most rows a batch holds while statements are being made: an epoch takes in at least
/// one batch, and a statement waits for the epoch before it to be written, so a smaller batch
/// keeps a heavy view's epochs (and writes) short while other clients wait on theirs.
pub const INTERACTIVE_BATCH_ROWS: usize = 512;

impl ConnectorContext {
    /// The rows the next batch may hold, at most `most`: fewer while statements are made.
    pub fn batch_rows(&self, most: usize) -> usize {
        match self.interactive.load(Ordering::Relaxed) {
            true => most.min(INTERACTIVE_BATCH_ROWS),
            false => most,
        }
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Sends an event, waiting while the engine is behind (backpressure). Returns false when
    /// the connector should stop.
    pub fn send(&self, mut event: SourceEvent) -> bool {
        loop {
            if self.stopped() {
                return false;
            }
            match self.events.send_timeout(event, Duration::from_millis(100)) {
                Ok(()) => return true,
                Err(SendTimeoutError::Timeout(back)) => event = back,
                Err(SendTimeoutError::Disconnected(_)) => return false,
            }
        }
    }

    /// Sleeps up to `duration`, waking early when asked to stop. Returns false when stopping.
    pub fn sleep(&self, duration: Duration) -> bool {
        let step = Duration::from_millis(20);
        let mut left = duration;
        while !left.is_zero() {
            if self.stopped() {
                return false;
            }
            let now = left.min(step);
            std::thread::sleep(now);
            left -= now;
        }
        !self.stopped()
    }
}

/// A reader of one source; runs on its own thread until stopped or finished.
pub trait Connector: Send {
    fn run(self: Box<Self>, context: ConnectorContext);
}

/// Per-message metadata for INCLUDE columns (parallel to the decoded rows).
#[derive(Debug, Default)]
pub struct MessageMeta {
    pub partition: Option<i32>,
    pub offsets: Vec<i64>,
    /// Message keys (empty: none).
    pub keys: Vec<Option<Vec<u8>>>,
    /// Message timestamps in epoch milliseconds (empty: none).
    pub timestamps: Vec<Option<i64>>,
}

/// The Arrow type of an INCLUDE column.
pub fn include_type(kind: IncludeKind) -> DataType {
    match kind {
        IncludeKind::Key => DataType::Utf8,
        IncludeKind::Partition => DataType::Int32,
        IncludeKind::Offset => DataType::Int64,
        IncludeKind::Timestamp | IncludeKind::ProcessingTime => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))
        }
    }
}

/// Appends the INCLUDE columns to decoded payload rows, giving the source's full schema.
pub fn with_includes(
    spec: &SourceSpec,
    rows: RecordBatch,
    meta: &MessageMeta,
) -> Result<RecordBatch> {
    let n = rows.num_rows();
    let mut columns = rows.columns().to_vec();
    for kind in &spec.includes {
        let column: ArrayRef = match kind {
            IncludeKind::Key => Arc::new(StringArray::from_iter((0..n).map(|i| {
                meta.keys
                    .get(i)
                    .and_then(|k| k.as_ref())
                    .map(|k| String::from_utf8_lossy(k).into_owned())
            }))),
            IncludeKind::Partition => Arc::new(Int32Array::from(vec![meta.partition; n])),
            IncludeKind::Offset => Arc::new(Int64Array::from_iter(
                (0..n).map(|i| meta.offsets.get(i).copied()),
            )),
            IncludeKind::Timestamp => Arc::new(
                TimestampMicrosecondArray::from_iter((0..n).map(|i| {
                    meta.timestamps
                        .get(i)
                        .copied()
                        .flatten()
                        .map(|ms| ms * 1000)
                }))
                .with_timezone("+00:00"),
            ),
            // Stamped again when the engine takes the rows (see `stamp_processing_time`).
            IncludeKind::ProcessingTime => processing_time(n),
        };
        columns.push(column);
    }
    // Nullable: a NULL in a primary key column (declared NOT NULL) is refused row by row by the
    // table, as a dead letter; checked here it failed the whole batch, again at every retry.
    if spec.schema.fields().iter().all(|f| f.is_nullable()) {
        return Ok(RecordBatch::try_new(spec.schema.clone(), columns)?);
    }
    let nullable = Schema::new(
        spec.schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
    );
    Ok(RecordBatch::try_new(Arc::new(nullable), columns)?)
}

fn processing_time(rows: usize) -> ArrayRef {
    let now = eddy_planner::wall_clock::wall_clock_micros();
    Arc::new(TimestampMicrosecondArray::from(vec![now; rows]).with_timezone("+00:00"))
}

/// Sets a source's `AS PROCTIME()` columns to the wall clock now. The engine calls it as it
/// takes each batch, on the thread that also stamps barriers with the wall clock, so no row is
/// ever behind the processing-time watermark already sent.
pub fn stamp_processing_time(spec: &SourceSpec, rows: RecordBatch) -> Result<RecordBatch> {
    let first_include = spec.payload_schema.fields().len();
    let stamped: Vec<usize> = spec
        .includes
        .iter()
        .enumerate()
        .filter(|(_, kind)| **kind == IncludeKind::ProcessingTime)
        .map(|(i, _)| first_include + i)
        .collect();
    if stamped.is_empty() {
        return Ok(rows);
    }
    let mut columns = rows.columns().to_vec();
    for column in stamped {
        columns[column] = processing_time(rows.num_rows());
    }
    Ok(RecordBatch::try_new(rows.schema(), columns)?)
}

/// Checks a source's options and builds its connector (also used at CREATE time, so a bad
/// option or an unreachable broker is reported to the user right away).
pub fn build(spec: &SourceSpec) -> Result<Box<dyn Connector>> {
    match spec.connector.as_str() {
        "nexmark" => Ok(Box::new(generator::NexmarkConnector::new(spec)?)),
        "file" => Ok(Box::new(file::FileConnector::new(spec)?)),
        "kafka" => Ok(Box::new(kafka::KafkaConnector::new(spec)?)),
        other => Err(ExecError::NotSupported(format!(
            "connector '{other}' (available: kafka, nexmark, file)"
        ))),
    }
}

/// Checks a new source: its options, and for Kafka that the broker answers and the topic
/// exists, so that mistakes are reported by CREATE rather than found later.
pub fn validate(spec: &SourceSpec) -> Result<()> {
    refuse_unknown_options(spec)?;
    match spec.connector.as_str() {
        "kafka" => kafka::KafkaConnector::new(spec)?.validate(),
        _ => build(spec).map(drop),
    }
}

/// Options of every source, read by its feed (durations).
const WATERMARK_OPTIONS: [&str; 2] = ["watermark.idle.timeout", crate::feed::MAX_DRIFT_OPTION];

/// The options each connector reads (besides `connector`, the watermark's [`WATERMARK_OPTIONS`],
/// and for Kafka any `properties.*`, passed to librdkafka).
fn known_options(connector: &str) -> &'static [&'static str] {
    match connector {
        "nexmark" => &[
            "nexmark.table.type",
            "nexmark.max.events",
            "nexmark.seed",
            "nexmark.event.rate",
            "nexmark.inter.event.micros",
        ],
        "file" => &["path", "follow"],
        "kafka" => &[
            "topic",
            "scan.startup.mode",
            "scan.startup.timestamp.millis",
        ],
        _ => &[],
    }
}

/// A misspelt option would be ignored, and the source would do something else than asked
/// (`nexmark.max.event` makes an endless stream): CREATE refuses it, naming the known ones.
/// Checked at CREATE only, so that a source stored before this check still starts.
pub(crate) fn refuse_unknown_options(spec: &SourceSpec) -> Result<()> {
    let known = known_options(&spec.connector);
    for key in spec.options.keys() {
        let allowed = key == "connector"
            || WATERMARK_OPTIONS.contains(&key.as_str())
            || known.contains(&key.as_str())
            || (spec.connector == "kafka" && key.starts_with("properties."));
        if !allowed {
            let mut listed: Vec<&str> = known.to_vec();
            listed.extend(WATERMARK_OPTIONS);
            if spec.connector == "kafka" {
                listed.push("properties.*");
            }
            return Err(ExecError::InvalidOption(format!(
                "unrecognized option \"{key}\" for a {} source (known: {})",
                spec.connector,
                listed.join(", ")
            )));
        }
    }
    for key in WATERMARK_OPTIONS {
        crate::feed::duration_option(spec, key)?;
    }
    Ok(())
}
