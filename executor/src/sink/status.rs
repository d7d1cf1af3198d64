//! What the engine, a sink's sender and the catalog share about a sink, read live.
//!
//! The engine records each epoch it logs and trims those the sender has delivered; the
//! sender records how far it got, its state and the messages it could not deliver; the
//! catalog and the metrics compute what is behind from both.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::sink::log::LoggedEpoch;

/// A message the target refused for good (too large), kept in `eddy_catalog.sink_errors`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SinkError {
    pub sink: String,
    pub epoch: u64,
    pub seq: u32,
    pub error: String,
    /// The message's key, as text (cut to a few hundred bytes).
    pub key: Option<String>,
    /// The start of the message's value, as text.
    pub value: Option<String>,
    pub value_bytes: u64,
    /// When it was met, in milliseconds since 1970.
    pub at_ms: i64,
}

/// The sender's state, as the catalog shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SenderState {
    /// `starting`, `running`, `retrying` (the target cannot be reached; backing off) or
    /// `failed` (the sink cannot go on: see the error).
    pub state: &'static str,
    pub last_error: Option<String>,
}

#[derive(Debug)]
pub struct SinkShared {
    /// Epochs in the log, oldest first, until trimmed.
    logged: Mutex<VecDeque<LoggedEpoch>>,
    /// The last epoch every message of which (and of every earlier one) is delivered.
    delivered_epoch: AtomicU64,
    /// Messages and bytes delivered since the server started.
    pub messages_sent: AtomicU64,
    pub bytes_sent: AtomicU64,
    state: Mutex<SenderState>,
    /// Messages refused for good, for the engine to write into the error table.
    errors: Mutex<Vec<SinkError>>,
    errors_total: AtomicU64,
    /// Set to stop the sender.
    stop: AtomicBool,
    /// Wakes the sender when an epoch with messages is committed.
    wake: crossbeam_channel::Sender<()>,
    wakeups: crossbeam_channel::Receiver<()>,
}

impl SinkShared {
    /// A sink whose log holds `logged` (read from the store) and of which everything up to
    /// epoch `delivered` is delivered.
    pub fn new(logged: VecDeque<LoggedEpoch>, delivered: u64) -> Arc<Self> {
        let (wake, wakeups) = crossbeam_channel::bounded(1);
        Arc::new(Self {
            logged: Mutex::new(logged),
            delivered_epoch: AtomicU64::new(delivered),
            messages_sent: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            state: Mutex::new(SenderState {
                state: "starting",
                last_error: None,
            }),
            errors: Mutex::new(Vec::new()),
            errors_total: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            wake,
            wakeups,
        })
    }

    /// The engine: epoch `logged` is committed in the log.
    pub fn logged(&self, logged: LoggedEpoch) {
        self.logged
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(logged);
        let _ = self.wake.try_send(());
    }

    /// The engine: the epochs delivered and not trimmed yet, taken out to be trimmed.
    pub fn take_delivered(&self) -> Vec<LoggedEpoch> {
        let delivered = self.delivered_epoch();
        let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        let mut taken = Vec::new();
        while logged.front().is_some_and(|e| e.epoch <= delivered) {
            taken.extend(logged.pop_front());
        }
        taken
    }

    /// Whether a delivered epoch waits to be trimmed.
    pub fn has_trimmable(&self) -> bool {
        let delivered = self.delivered_epoch();
        self.logged
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .front()
            .is_some_and(|e| e.epoch <= delivered)
    }

    /// Whether refused messages wait to be written into the error table.
    pub fn errors_waiting(&self) -> bool {
        !self
            .errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// The sender: waits up to `timeout` for a new epoch in the log.
    pub fn wait(&self, timeout: std::time::Duration) {
        let _ = self.wakeups.recv_timeout(timeout);
    }

    pub fn delivered_epoch(&self) -> u64 {
        self.delivered_epoch.load(Ordering::Acquire)
    }

    /// The sender: everything up to `epoch` is delivered.
    pub fn set_delivered(&self, epoch: u64) {
        self.delivered_epoch.fetch_max(epoch, Ordering::AcqRel);
    }

    pub fn set_state(&self, state: &'static str, last_error: Option<String>) {
        let mut current = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // An error stays shown while running again, until another replaces it.
        let last_error = last_error.or_else(|| current.last_error.take());
        *current = SenderState { state, last_error };
    }

    pub fn state(&self) -> SenderState {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn record_error(&self, error: SinkError) {
        self.errors_total.fetch_add(1, Ordering::Relaxed);
        self.errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(error);
        self.set_state(
            self.state().state,
            Some("a message was refused by the target: see eddy_catalog.sink_errors".into()),
        );
    }

    /// The engine: refused messages to write into the error table.
    pub fn take_errors(&self) -> Vec<SinkError> {
        std::mem::take(&mut *self.errors.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Messages refused since the server started.
    pub fn errors_total(&self) -> u64 {
        self.errors_total.load(Ordering::Relaxed)
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.wake.try_send(());
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// What the log holds beyond the delivered epoch: (epochs, bytes, the oldest's commit
    /// time in ms).
    pub fn behind(&self) -> (u64, u64, Option<i64>) {
        let delivered = self.delivered_epoch();
        let logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        let mut epochs = 0;
        let mut bytes = 0;
        let mut oldest = None;
        for epoch in logged.iter().filter(|e| e.epoch > delivered) {
            epochs += 1;
            bytes += epoch.bytes;
            oldest = oldest.or(Some(epoch.ts_ms));
        }
        (epochs, bytes, oldest)
    }

    /// Seconds since the oldest epoch not yet delivered committed (0 when none is behind).
    pub fn lag_seconds(&self) -> f64 {
        match self.behind().2 {
            Some(ts_ms) => ((now_ms() - ts_ms).max(0) as f64) / 1000.0,
            None => 0.0,
        }
    }
}

/// The wall clock in milliseconds since 1970.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A sink, as the engine publishes it for `eddy_catalog.sinks` and the metrics.
#[derive(Debug, Clone)]
pub struct SinkStats {
    pub name: String,
    pub input: String,
    pub connector: String,
    pub format: &'static str,
    pub encode: &'static str,
    /// Where it writes (`topic 't' at host:port`).
    pub target: String,
    pub key: Vec<String>,
    pub sql: String,
    pub log_max_bytes: u64,
    /// Why its inputs are held back, when they are.
    pub backpressure: Option<String>,
    pub shared: Arc<SinkShared>,
}
