//! `connector = 'file'` sinks: the log written into a directory as files, each holding a range
//! of whole epochs (`part-<first epoch>-<last epoch>.parquet` or `.jsonl`), exactly once.
//!
//! A file is written under a hidden temporary name, synced, renamed to its final name and the
//! directory synced: a reader never sees a partial file, and a file's name says which epochs it
//! holds. At start the sender deletes leftover temporary files and takes the largest last epoch
//! among the files as written; it writes only later epochs. So a crash before a rename writes
//! those epochs again (the temporary file is gone), and one after it never does.
//!
//! Epochs are gathered for `file.interval` (default 10 s) before a file is written, or until
//! 64 MiB of them wait, so that files are not one per epoch.

use std::fs::{self, File};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use eddy_storage::{Store, TableId};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::sink::log::{self, LogRecord, Position};
use crate::sink::status::SinkShared;
use crate::sink::{SinkEncode, SinkSpec};
use crate::{ExecError, Result};

/// Records read from the log at a time.
const PAGE: usize = 1024;
/// Bytes of messages waiting past which a file is written before its interval is up.
const MAX_PENDING_BYTES: usize = 64 << 20;
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// The default of `file.interval`.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// A file sink's directory and file kind.
#[derive(Debug, Clone)]
pub struct FileTarget {
    pub dir: PathBuf,
    pub encode: SinkEncode,
    pub interval: Duration,
    pub schema: SchemaRef,
}

impl FileTarget {
    pub fn new(spec: &SinkSpec) -> Result<Self> {
        let dir = spec
            .option("path")
            .filter(|p| !p.is_empty())
            .ok_or_else(|| {
                ExecError::InvalidOption(format!(
                    "sink \"{}\": connector 'file' needs path = 'directory'",
                    spec.name
                ))
            })?;
        let interval = match spec.option("file.interval") {
            None => DEFAULT_INTERVAL,
            Some(text) => humantime::parse_duration(text)
                .map_err(|e| ExecError::InvalidOption(format!("file.interval = '{text}': {e}")))?,
        };
        Ok(Self {
            dir: PathBuf::from(dir),
            encode: spec.encode,
            interval,
            schema: spec.schema.clone(),
        })
    }

    /// Creates the directory if it is missing and checks a file can be written in it.
    pub fn prepare(&self) -> Result<()> {
        let unusable = |e: std::io::Error| {
            ExecError::InvalidOption(format!("sink directory {}: {e}", self.dir.display()))
        };
        fs::create_dir_all(&self.dir).map_err(unusable)?;
        let probe = self.dir.join(".eddy-write-check");
        File::create(&probe).map_err(unusable)?;
        fs::remove_file(&probe).map_err(unusable)
    }

    fn extension(&self) -> &'static str {
        match self.encode {
            SinkEncode::Parquet => "parquet",
            SinkEncode::Json => "jsonl",
        }
    }

    /// The last epoch the directory's files hold (0 for none); leftover temporary files go.
    fn written_through(&self) -> std::io::Result<u64> {
        let mut last = 0;
        for entry in fs::read_dir(&self.dir)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if name.starts_with(".part-") && name.ends_with(".tmp") {
                fs::remove_file(self.dir.join(&name))?;
                continue;
            }
            if let Some((_, to)) = epochs_of(&name) {
                last = last.max(to);
            }
        }
        Ok(last)
    }

    /// Writes `records` (whole epochs `from..=to`) as one file, atomically and durably.
    fn write(&self, from: u64, to: u64, records: &[LogRecord]) -> Result<PathBuf> {
        let name = format!("part-{from:020}-{to:020}.{}", self.extension());
        let temporary = self.dir.join(format!(".{name}.tmp"));
        let io = |e: std::io::Error| ExecError::Internal(format!("writing {name}: {e}"));
        let file = File::create(&temporary).map_err(io)?;
        match self.encode {
            SinkEncode::Json => {
                let mut out = std::io::BufWriter::new(&file);
                for value in records.iter().filter_map(|r| r.message.value.as_ref()) {
                    out.write_all(value).map_err(io)?;
                    out.write_all(b"\n").map_err(io)?;
                }
                out.flush().map_err(io)?;
            }
            SinkEncode::Parquet => {
                let properties = WriterProperties::builder()
                    .set_compression(Compression::SNAPPY)
                    .build();
                let mut writer = ArrowWriter::try_new(&file, self.schema.clone(), Some(properties))
                    .map_err(|e| ExecError::Internal(format!("writing {name}: {e}")))?;
                for value in records.iter().filter_map(|r| r.message.value.as_ref()) {
                    for batch in decode_rows(value)? {
                        writer
                            .write(&batch)
                            .map_err(|e| ExecError::Internal(format!("writing {name}: {e}")))?;
                    }
                }
                writer
                    .close()
                    .map_err(|e| ExecError::Internal(format!("writing {name}: {e}")))?;
            }
        }
        file.sync_all().map_err(io)?;
        drop(file);
        let path = self.dir.join(&name);
        fs::rename(&temporary, &path).map_err(io)?;
        File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .map_err(io)?;
        Ok(path)
    }
}

/// The epochs a file of the sink holds, from its name.
fn epochs_of(name: &str) -> Option<(u64, u64)> {
    let stem = name.strip_prefix("part-")?.split('.').next()?;
    let (from, to) = stem.split_once('-')?;
    Some((from.parse().ok()?, to.parse().ok()?))
}

/// A chunk's inserted rows as one log value (Arrow IPC), for Parquet files.
pub fn encode_rows(batch: &RecordBatch) -> Result<Vec<u8>> {
    let mut writer = StreamWriter::try_new(Vec::new(), &batch.schema())?;
    writer.write(batch)?;
    writer.finish()?;
    Ok(writer.into_inner()?)
}

fn decode_rows(bytes: &[u8]) -> Result<Vec<RecordBatch>> {
    let reader = StreamReader::try_new(std::io::Cursor::new(bytes), None)?;
    Ok(reader.collect::<std::result::Result<Vec<_>, _>>()?)
}

/// What a file sender needs.
pub struct FileSenderSetup {
    pub sink: String,
    pub target: FileTarget,
    pub store: Arc<dyn Store>,
    pub log_table: TableId,
    pub shared: Arc<SinkShared>,
}

/// The sender's loop (on a thread of its own), until the sink stops.
pub fn run(setup: FileSenderSetup) {
    let shared = setup.shared.clone();
    let mut backoff = Duration::from_millis(250);
    while !shared.stopped() {
        match session(&setup) {
            Ok(()) => return,
            Err(error) => {
                tracing::warn!(sink = setup.sink, %error, "file sink retrying");
                shared.set_state("retrying", Some(error));
                let until = Instant::now() + backoff;
                while !shared.stopped() && Instant::now() < until {
                    shared.wait(Duration::from_millis(50));
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// Writes files of the log's epochs until stopped; an error (a full disk) ends the session.
fn session(setup: &FileSenderSetup) -> std::result::Result<(), String> {
    let shared = &setup.shared;
    let target = &setup.target;
    let mut written = target
        .written_through()
        .map_err(|e| format!("reading {}: {e}", target.dir.display()))?;
    shared.set_delivered(written);
    shared.set_state("running", None);
    let mut cursor: Option<Position> = None;
    let mut pending: Vec<LogRecord> = Vec::new();
    let mut pending_bytes = 0;
    let mut since = Instant::now();
    loop {
        if shared.stopped() {
            return Ok(());
        }
        let page = log::read_after(setup.store.as_ref(), setup.log_table, cursor, PAGE)
            .map_err(|e| format!("reading the sink log: {e}"))?;
        let exhausted = page.len() < PAGE;
        for record in page {
            cursor = Some(record.position());
            if record.epoch > written {
                pending_bytes += record.bytes();
                pending.push(record);
            }
        }
        // Whole epochs only: once the log is read to its end, every epoch read is complete.
        let due = since.elapsed() >= target.interval || pending_bytes >= MAX_PENDING_BYTES;
        if exhausted && due && !pending.is_empty() {
            let (from, to) = (pending[0].epoch, pending[pending.len() - 1].epoch);
            let path = target
                .write(from, to, &pending)
                .map_err(|e| e.to_string())?;
            tracing::debug!(sink = setup.sink, file = %path.display(), "file sink wrote a file");
            shared
                .messages_sent
                .fetch_add(pending.len() as u64, std::sync::atomic::Ordering::Relaxed);
            shared
                .bytes_sent
                .fetch_add(pending_bytes as u64, std::sync::atomic::Ordering::Relaxed);
            written = to;
            pending.clear();
            pending_bytes = 0;
            since = Instant::now();
        }
        // Every epoch read is in the files or waits in `pending`.
        shared.set_delivered(written);
        if pending.is_empty() {
            // The interval runs from the first epoch that waits.
            since = Instant::now();
        }
        if exhausted {
            shared.wait(Duration::from_millis(100));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_say_their_epochs() {
        assert_eq!(
            epochs_of("part-00000000000000000007-00000000000000000012.parquet"),
            Some((7, 12))
        );
        assert_eq!(epochs_of(".part-1-2.parquet.tmp"), None);
        assert_eq!(epochs_of("notes.txt"), None);
    }
}
