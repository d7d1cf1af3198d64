//! A failed `accept` waits before the next one. Out of file descriptors (EMFILE, ENFILE) the
//! pending connection stays in the queue, so the listener is ready again at once: without a
//! pause the loop spins on a core and writes a log line each time round. The pause doubles with
//! each failure in a row, up to [`MAX_PAUSE`], and the failures are logged once per
//! [`LOG_INTERVAL`] with how many there were.

use std::time::{Duration, Instant};

const FIRST_PAUSE: Duration = Duration::from_millis(10);
pub const MAX_PAUSE: Duration = Duration::from_secs(1);
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
pub struct AcceptBackoff {
    /// The pause after the next failure (zero: the last accept succeeded).
    pause: Duration,
    /// When failures were last logged, and how many came since.
    logged_at: Option<Instant>,
    unlogged: u64,
}

impl AcceptBackoff {
    /// An accept succeeded: the next failure pauses briefly again.
    pub fn accepted(&mut self) {
        self.pause = Duration::ZERO;
    }

    /// An accept failed with `error`: logs it when due, and returns how long to wait before
    /// accepting again.
    pub fn failed(&mut self, error: &std::io::Error) -> Duration {
        self.pause = if self.pause.is_zero() {
            FIRST_PAUSE
        } else {
            (self.pause * 2).min(MAX_PAUSE)
        };
        self.unlogged += 1;
        let due = self.logged_at.is_none_or(|at| at.elapsed() >= LOG_INTERVAL);
        if due {
            tracing::warn!(
                %error,
                failures = self.unlogged,
                pause_ms = self.pause.as_millis() as u64,
                "accepting connections failed (out of file descriptors? see --max-connections and `ulimit -n`); pausing before the next"
            );
            self.logged_at = Some(Instant::now());
            self.unlogged = 0;
        }
        self.pause
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_most_and_reset_after_a_success() {
        let mut backoff = AcceptBackoff::default();
        let error = std::io::Error::other("too many open files");
        let pauses: Vec<Duration> = (0..10).map(|_| backoff.failed(&error)).collect();
        assert_eq!(pauses[0], FIRST_PAUSE);
        assert_eq!(pauses[1], FIRST_PAUSE * 2);
        assert_eq!(pauses[9], MAX_PAUSE);
        // Ten failures in a row wait for seconds in all, not microseconds.
        assert!(pauses.iter().sum::<Duration>() >= Duration::from_secs(3));
        backoff.accepted();
        assert_eq!(backoff.failed(&error), FIRST_PAUSE);
    }

    #[test]
    fn failures_are_logged_once_per_interval() {
        let mut backoff = AcceptBackoff::default();
        let error = std::io::Error::other("too many open files");
        backoff.failed(&error);
        assert_eq!(backoff.unlogged, 0);
        for _ in 0..1000 {
            backoff.failed(&error);
        }
        assert_eq!(backoff.unlogged, 1000);
    }
}
