//! A running connector feeding one table or view: its thread, its channel, the positions it
//! has reached per split, and the progress figures of `eddy_catalog.source_progress`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver};
use eddy_storage::keys::meta_key;
use eddy_storage::{EpochBatch, Store, TableId};

use crate::connector::{
    self, ConnectorContext, DeadLetter, SourceEvent, SourceSpec, CHANNEL_BATCHES,
};
use crate::Result;

/// Default for `watermark.idle.timeout`.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// Progress of one split, for `eddy_catalog.source_progress`.
#[derive(Debug, Clone)]
pub struct SplitProgress {
    /// Where the split resumes (the next offset), as of the pipeline (committed at the next epoch).
    pub position: i64,
    /// The split's end as last reported by the connector (Kafka high-water offset).
    pub high_watermark: Option<i64>,
    pub last_data: Instant,
    pub idle: bool,
    /// Whether `high_watermark` was fetched since the connector last lost its broker; until
    /// it is, a Kafka split cannot tell "caught up" from "cut off", so it is never idle.
    pub end_fresh: bool,
    /// Messages per second, smoothed.
    pub rate: f64,
    /// Lag in seconds a second ago, to report the trend.
    pub previous_lag_seconds: Option<f64>,
    pub lag_trend: Option<f64>,
    /// Undecodable messages since the server started.
    pub dead_letters: u64,
    /// Messages per unit of position: 1 where positions count messages (Kafka offsets,
    /// generator events); for files (positions in bytes) lines per byte read so far.
    pub messages_per_position: f64,
    /// Where the split was when the feed started, and messages read since.
    start_position: i64,
    messages_read: i64,
    rate_window_start: Instant,
    rate_window_messages: i64,
}

pub struct Feed {
    pub spec: SourceSpec,
    /// The table whose runtime the rows go into (a stored table's, or a view's private one).
    pub table_id: TableId,
    pub positions: BTreeMap<String, i64>,
    pub splits: BTreeMap<String, SplitProgress>,
    pub events: Receiver<SourceEvent>,
    pub last_error: Option<String>,
    pub finished: bool,
    pub idle_timeout: Duration,
    /// `watermark.alignment.max.drift`: how far this source's watermark may run ahead of the
    /// slowest other source its view reads before Eddy stops reading it (see `alignment`).
    pub max_drift: Option<Duration>,
    pub dead_letters: Vec<DeadLetter>,
    /// The view or table it reads for (what its dead letters were met by).
    pub reader: String,
    positions_dirty: bool,
    /// The last refresh generation requested of the connector, and the last it answered.
    refresh: Arc<AtomicU64>,
    pub reported_generation: u64,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// When the connector started, and from where (a throttled generator's schedule).
    started: Instant,
    start_positions: BTreeMap<String, i64>,
}

/// What a feed must reach for a FLUSH issued now to be done.
#[derive(Debug, Clone)]
pub enum FlushTarget {
    /// A bounded source (a file read once, a generator with a maximum): all of it.
    Finished,
    /// A log with known ends (Kafka): these positions per split.
    Positions(BTreeMap<String, i64>),
    /// An endless source with no known end: what has arrived so far.
    Nothing,
}

fn positions_key(table_id: TableId) -> String {
    format!("feed_positions/{table_id}")
}

/// The source option that aligns a view's sources by watermark.
pub const MAX_DRIFT_OPTION: &str = "watermark.alignment.max.drift";

/// A source option that is a duration, if set.
pub(crate) fn duration_option(spec: &SourceSpec, key: &str) -> Result<Option<Duration>> {
    spec.option(key)
        .map(|text| {
            parse_duration(text).ok_or_else(|| {
                crate::ExecError::InvalidOption(format!(
                    "source \"{}\": {key} = '{text}' is not a duration (e.g. '5s')",
                    spec.name
                ))
            })
        })
        .transpose()
}

/// Parses `5s`, `500ms`, `2min`, `1h` or a plain number of seconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        // A negative, infinite or too large number is no duration (not a panic).
        return Duration::try_from_secs_f64(seconds).ok();
    }
    humantime_like(text)
}

fn humantime_like(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let seconds = match unit.trim() {
        "ms" => number / 1000.0,
        "s" | "sec" | "second" | "seconds" => number,
        "m" | "min" | "minute" | "minutes" => number * 60.0,
        "h" | "hour" | "hours" => number * 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(seconds).ok()
}

impl Feed {
    /// Starts the connector from the positions committed for `table_id`.
    /// `interactive` is the engine's flag for smaller batches while statements are made.
    pub fn start(
        spec: SourceSpec,
        table_id: TableId,
        store: &dyn Store,
        interactive: Arc<AtomicBool>,
    ) -> Result<Self> {
        let positions: BTreeMap<String, i64> =
            match store.get(&meta_key(&positions_key(table_id)))? {
                Some(bytes) => {
                    serde_json::from_slice(&bytes).map_err(eddy_storage::StorageError::from)?
                }
                None => BTreeMap::new(),
            };
        let idle_timeout =
            duration_option(&spec, "watermark.idle.timeout")?.unwrap_or(DEFAULT_IDLE_TIMEOUT);
        let max_drift = duration_option(&spec, MAX_DRIFT_OPTION)?;
        let connector = connector::build(&spec)?;
        let start_positions = positions.clone();
        let (sender, events) = bounded(CHANNEL_BATCHES);
        let stop = Arc::new(AtomicBool::new(false));
        let refresh = Arc::new(AtomicU64::new(0));
        let context = ConnectorContext {
            events: sender,
            stop: stop.clone(),
            positions: positions.clone(),
            refresh: refresh.clone(),
            interactive,
        };
        let thread = std::thread::Builder::new()
            .name(format!("eddy-source-{}", spec.name))
            .spawn(move || {
                crate::thread_priority::lower_for_sources();
                connector.run(context)
            })
            .map_err(|e| crate::ExecError::DataFusion(e.into()))?;
        Ok(Self {
            spec,
            table_id,
            positions,
            splits: BTreeMap::new(),
            events,
            last_error: None,
            finished: false,
            idle_timeout,
            max_drift,
            dead_letters: Vec::new(),
            reader: String::new(),
            positions_dirty: false,
            refresh,
            reported_generation: 0,
            stop,
            thread: Some(thread),
            started: Instant::now(),
            start_positions,
        })
    }

    fn split(&mut self, split: &str) -> &mut SplitProgress {
        let position = self.positions.get(split).copied().unwrap_or(0);
        self.splits
            .entry(split.to_string())
            .or_insert_with(|| SplitProgress {
                position,
                high_watermark: None,
                last_data: Instant::now(),
                idle: false,
                end_fresh: false,
                rate: 0.0,
                previous_lag_seconds: None,
                lag_trend: None,
                dead_letters: 0,
                messages_per_position: 1.0,
                start_position: position,
                messages_read: 0,
                rate_window_start: Instant::now(),
                rate_window_messages: 0,
            })
    }

    /// Whether the source has gone quiet: every split idle, or none reported for the idle
    /// timeout since the feed started (an empty file, a topic with no partition yet).
    pub fn quiet(&self) -> bool {
        match self.splits.is_empty() {
            true => self.started.elapsed() >= self.idle_timeout,
            false => self.splits.values().all(|split| split.idle),
        }
    }

    /// Whether the source has an end that the feed will reach on its own.
    fn bounded(&self) -> bool {
        match self.spec.connector.as_str() {
            "file" => !self
                .spec
                .option("follow")
                .is_some_and(|v| v.eq_ignore_ascii_case("true")),
            "nexmark" => self.spec.option("nexmark.max.events").is_some(),
            _ => false,
        }
    }

    /// Asks the connector for fresh split ends (Kafka); returns the generation to wait for,
    /// or `None` when the connector's ends are known without asking.
    pub fn request_refresh(&self) -> Option<u64> {
        (self.spec.connector == "kafka").then(|| self.refresh.fetch_add(1, Ordering::Relaxed) + 1)
    }

    pub fn flush_target(&self) -> FlushTarget {
        if self.bounded() {
            return FlushTarget::Finished;
        }
        if self.spec.connector == "nexmark" {
            // An endless generator's "end" is its schedule, which moves on while a FLUSH
            // waits: a FLUSH takes what has arrived.
            return FlushTarget::Nothing;
        }
        if self.spec.connector == "file" {
            // A followed file's end right now: its last complete line.
            if let Some(path) = self.spec.option("path") {
                if let Ok(end) = complete_length(std::path::Path::new(path)) {
                    return FlushTarget::Positions(BTreeMap::from([(path.to_string(), end)]));
                }
            }
        }
        let ends: BTreeMap<String, i64> = self
            .splits
            .iter()
            .filter_map(|(split, p)| p.high_watermark.map(|h| (split.clone(), h)))
            .collect();
        if ends.is_empty() {
            FlushTarget::Nothing
        } else {
            FlushTarget::Positions(ends)
        }
    }

    pub fn reached(&self, target: &FlushTarget) -> bool {
        match target {
            FlushTarget::Finished => self.finished,
            FlushTarget::Nothing => true,
            FlushTarget::Positions(ends) => ends
                .iter()
                .all(|(split, end)| self.positions.get(split).copied().unwrap_or(0) >= *end),
        }
    }

    /// Keeps a batch's dead letters for the next commit, and counts them.
    pub fn add_dead_letters(&mut self, split: &str, letters: Vec<DeadLetter>) {
        self.split(split).dead_letters += letters.len() as u64;
        let reader = &self.reader;
        self.dead_letters
            .extend(letters.into_iter().map(|letter| DeadLetter {
                reader: reader.clone(),
                ..letter
            }));
    }

    /// Records that `split` delivered up to `next_position` (messages: how many it read).
    pub fn advance(&mut self, split: &str, next_position: i64, messages: i64) {
        self.positions.insert(split.to_string(), next_position);
        self.positions_dirty = true;
        let progress = self.split(split);
        progress.position = next_position;
        progress.last_data = Instant::now();
        progress.rate_window_messages += messages;
        progress.messages_read += messages;
    }

    /// Fills in the split ends that no connector reports: a file's size (positions are
    /// bytes; lines left are estimated from the lines per byte read so far), and the events a
    /// throttled endless generator should have produced by now at `nexmark.event.rate`.
    fn estimate_ends(&mut self) {
        match self.spec.connector.as_str() {
            "file" => {
                let Some(path) = self.spec.option("path") else {
                    return;
                };
                let path = std::path::Path::new(path);
                let follow = !self.bounded();
                // A followed file's last line may still be being written: it ends at its
                // last newline. A file read once is read to its last byte.
                let end = if follow {
                    complete_length(path).ok()
                } else {
                    std::fs::metadata(path).ok().map(|m| m.len() as i64)
                };
                let Some(end) = end else {
                    return;
                };
                let progress = self.split(&path.display().to_string());
                progress.high_watermark = Some(end);
                let bytes = progress.position - progress.start_position;
                if progress.messages_read > 0 && bytes > 0 {
                    progress.messages_per_position = progress.messages_read as f64 / bytes as f64;
                }
            }
            "nexmark" if !self.bounded() => {
                let Some(rate) = self
                    .spec
                    .option("nexmark.event.rate")
                    .and_then(|r| r.trim().parse::<f64>().ok())
                    .filter(|r| *r > 0.0)
                else {
                    return;
                };
                let due = self.started.elapsed().as_secs_f64() * rate;
                for (split, progress) in self.splits.iter_mut() {
                    let start = self.start_positions.get(split).copied().unwrap_or(0);
                    progress.high_watermark = Some(start + due as i64);
                }
            }
            _ => {}
        }
    }

    /// Takes in what the connector reports of a split: its end, and (before any data) the
    /// resolved place it starts from, which is then committed like any position.
    pub fn report(&mut self, report: &crate::connector::SplitReport) {
        if let Some(position) = report.position {
            if !self.positions.contains_key(&report.split) {
                self.positions.insert(report.split.clone(), position);
                self.positions_dirty = true;
                self.split(&report.split).position = position;
            }
        }
        let progress = self.split(&report.split);
        progress.high_watermark = report.high_watermark;
        let fresh = report.high_watermark.is_some();
        if fresh && !progress.end_fresh {
            // Quiet while cut off is not quiet: a split's idle timeout starts again when its
            // end is known again (after an outage, or the first report).
            progress.last_data = Instant::now();
        }
        progress.end_fresh = fresh;
    }

    /// The connector lost its broker: until each split's end is fetched again, none is idle
    /// (one split's rows arriving first after the outage would otherwise move the watermark
    /// past the rows the others still hold).
    pub fn broker_lost(&mut self) {
        for progress in self.splits.values_mut() {
            progress.end_fresh = false;
        }
    }

    /// Decides which splits are idle now; returns those whose idleness changed. A split is
    /// idle when it has nothing left to read and no message came for `idle_timeout`; a split
    /// with messages still unread is slow, not idle (its rows would otherwise arrive late
    /// behind the others' watermark); a Kafka split whose end is not known afresh is neither.
    pub fn update_idle(&mut self) -> Vec<(String, bool)> {
        let timeout = self.idle_timeout;
        let needs_fresh_end = self.spec.connector == "kafka";
        let mut changed = Vec::new();
        for (split, progress) in self.splits.iter_mut() {
            let lagging = progress
                .high_watermark
                .is_some_and(|high| progress.position < high);
            let known = progress.end_fresh || !needs_fresh_end;
            let idle = known && !lagging && progress.last_data.elapsed() >= timeout;
            if idle != progress.idle {
                progress.idle = idle;
                changed.push((split.clone(), idle));
            }
        }
        changed
    }

    /// Updates rates, estimated ends and lag trends (call about once a second).
    pub fn tick(&mut self) {
        self.estimate_ends();
        for progress in self.splits.values_mut() {
            let elapsed = progress.rate_window_start.elapsed().as_secs_f64();
            if elapsed < 1.0 {
                continue;
            }
            let current = progress.rate_window_messages as f64 / elapsed;
            // Exponential smoothing: steady under bursty batches.
            progress.rate = if progress.rate == 0.0 {
                current
            } else {
                0.5 * progress.rate + 0.5 * current
            };
            progress.rate_window_start = Instant::now();
            progress.rate_window_messages = 0;
            let lag = lag_seconds(progress);
            progress.lag_trend = match (lag, progress.previous_lag_seconds) {
                (Some(now), Some(before)) => Some((now - before) / elapsed),
                _ => None,
            };
            progress.previous_lag_seconds = lag;
        }
    }

    /// Writes the positions reached (and the dead letters) into the epoch.
    pub fn commit(&mut self, epoch: &mut EpochBatch) -> Result<()> {
        if std::mem::take(&mut self.positions_dirty) {
            let bytes =
                serde_json::to_vec(&self.positions).map_err(eddy_storage::StorageError::from)?;
            epoch.put_meta(&positions_key(self.table_id), bytes);
        }
        Ok(())
    }

    pub fn forget(&self, epoch: &mut EpochBatch) {
        epoch.delete_meta(&positions_key(self.table_id));
    }

    /// Stops the connector thread and waits for it.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Unblock a connector waiting on a full channel.
        while self.events.try_recv().is_ok() {}
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The length of a file up to and including its last newline.
fn complete_length(path: &std::path::Path) -> std::io::Result<i64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    let mut end = file.metadata()?.len();
    let mut buffer = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(buffer.len() as u64);
        file.seek(SeekFrom::Start(start))?;
        let chunk = &mut buffer[..(end - start) as usize];
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|b| *b == b'\n') {
            return Ok((start + i as u64 + 1) as i64);
        }
        end = start;
    }
    Ok(0)
}

/// Messages between the split's position and its end (for files, estimated lines).
pub fn lag_messages(progress: &SplitProgress) -> Option<i64> {
    let behind = (progress.high_watermark? - progress.position).max(0);
    Some((behind as f64 * progress.messages_per_position).ceil() as i64)
}

/// Lag in seconds: messages behind the end of the split divided by the consumption rate.
pub fn lag_seconds(progress: &SplitProgress) -> Option<f64> {
    let behind = lag_messages(progress)? as f64;
    if behind == 0.0 {
        return Some(0.0);
    }
    (progress.rate > 0.0).then(|| behind / progress.rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s"), Some(Duration::from_secs(5)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("soon"), None);
        for huge in ["1e400", "-1", "99999999999999999999999h", "NaN", "inf"] {
            assert_eq!(parse_duration(huge), None, "{huge}");
        }
    }
}
