//! The freeze detector: while the fuzzer runs statements on its connection, another connection
//! asks `SELECT 1` again and again. An answer that takes more than [`FREEZE`] means a statement
//! held up a client that has nothing to do with it: a failure, as a death is, blamed on the
//! statements in flight while it waited.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

/// The longest a `SELECT 1` may wait.
pub const FREEZE: Duration = Duration::from_secs(1);
/// The pause between two `SELECT 1`s.
const PROBE_EVERY: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Shared {
    /// What the fuzzer is running now, and a count that changes with each statement.
    running: String,
    statement: u64,
    /// No probing while this is set (the server is being restarted).
    paused: bool,
    freezes: Vec<String>,
    probes: u64,
    stop: bool,
}

pub struct FreezeWatch {
    shared: Arc<Mutex<Shared>>,
    task: JoinHandle<()>,
}

impl FreezeWatch {
    /// Starts probing the server that `config` connects to.
    pub fn start(config: tokio_postgres::Config) -> Self {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let task = tokio::spawn(probe(config, shared.clone()));
        Self { shared, task }
    }

    /// The fuzzer is about to run `what`.
    pub fn running(&self, what: impl FnOnce() -> String) {
        let mut shared = lock(&self.shared);
        shared.running = what();
        shared.statement += 1;
    }

    /// Stops (or resumes) probing: a restarting server answers nobody, and that is no freeze.
    pub fn pause(&self, paused: bool) {
        lock(&self.shared).paused = paused;
    }

    /// Stops probing; returns the freezes seen and how many probes ran.
    pub async fn finish(self) -> (Vec<String>, u64) {
        lock(&self.shared).stop = true;
        let _ = self.task.await;
        let mut shared = lock(&self.shared);
        (std::mem::take(&mut shared.freezes), shared.probes)
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

async fn probe(config: tokio_postgres::Config, shared: Arc<Mutex<Shared>>) {
    let mut client: Option<tokio_postgres::Client> = None;
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        let (stop, paused) = {
            let shared = lock(&shared);
            (shared.stop, shared.paused)
        };
        if stop {
            return;
        }
        if paused {
            client = None;
            continue;
        }
        let Some(connected) = client.as_ref().filter(|c| !c.is_closed()) else {
            // A fresh connection when the last one broke (a restart): not measured.
            client = match config.connect(tokio_postgres::NoTls).await {
                Ok((connected, connection)) => {
                    tokio::spawn(async move {
                        let _ = connection.await;
                    });
                    Some(connected)
                }
                Err(_) => None,
            };
            continue;
        };
        let (before, statement_before) = {
            let shared = lock(&shared);
            (shared.running.clone(), shared.statement)
        };
        let started = Instant::now();
        let answered =
            tokio::time::timeout(Duration::from_secs(60), connected.simple_query("SELECT 1")).await;
        let waited = started.elapsed();
        let mut shared = lock(&shared);
        if shared.paused || !matches!(answered, Ok(Ok(_))) {
            // The server went away meanwhile: the fuzzer reports a death, not a freeze.
            client = None;
            continue;
        }
        shared.probes += 1;
        if waited > FREEZE {
            let mut blamed = format!(
                "another connection's SELECT 1 waited {:.1} s while this ran: {before}",
                waited.as_secs_f64()
            );
            if shared.statement != statement_before {
                blamed.push_str(&format!(" (and later: {})", shared.running));
            }
            shared.freezes.push(blamed);
        }
    }
}
