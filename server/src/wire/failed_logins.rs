//! Failed logins leave a trace: a warning each (when, from which address, as which user, and
//! why, in classes: never anything the client sent as its password), at most
//! [`LINES_PER_INTERVAL`] per [`INTERVAL`] with the count of the others, so that a flood of
//! guesses cannot flood the log; and a counter per class in `/metrics`
//! (`eddy_login_failures_total{reason}`).

use std::net::SocketAddr;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use pgwire::error::PgWireError;

/// Log lines of failed logins per interval, at most.
pub const LINES_PER_INTERVAL: u32 = 20;
pub const INTERVAL: Duration = Duration::from_secs(10);

/// Why a login failed, as the log and the metric tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A wrong password or an unknown user name (they fail alike, on purpose).
    Password,
    /// A SASL mechanism the server does not offer.
    Mechanism,
    /// A message out of place or malformed before authentication completed.
    Protocol,
    /// No login within the time allowed.
    Timeout,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Password => "password",
            Reason::Mechanism => "mechanism",
            Reason::Protocol => "protocol",
            Reason::Timeout => "timeout",
        }
    }

    /// The class of an error the authentication exchange ended with.
    pub fn of(error: &PgWireError) -> Self {
        match error {
            PgWireError::InvalidPassword(_) => Reason::Password,
            PgWireError::UnsupportedSASLAuthMethod(_) => Reason::Mechanism,
            _ => Reason::Protocol,
        }
    }
}

/// Lines logged in the current interval, and failures left out of the log.
struct LogWindow {
    started: Instant,
    logged: u32,
    left_out: u64,
}

static WINDOW: LazyLock<Mutex<LogWindow>> = LazyLock::new(|| {
    Mutex::new(LogWindow {
        started: Instant::now(),
        logged: 0,
        left_out: 0,
    })
});

/// Counts a failed login from `peer` as `user`, and logs it unless this interval's lines are
/// spent.
pub fn record(peer: SocketAddr, user: &str, reason: Reason) {
    crate::metrics::logins::failed(reason.as_str());
    let mut window = WINDOW.lock().unwrap_or_else(|e| e.into_inner());
    if window.started.elapsed() >= INTERVAL {
        if window.left_out > 0 {
            tracing::warn!(
                failed_logins = window.left_out,
                interval_seconds = INTERVAL.as_secs(),
                "more failed logins than the log shows one by one"
            );
        }
        *window = LogWindow {
            started: Instant::now(),
            logged: 0,
            left_out: 0,
        };
    }
    if window.logged >= LINES_PER_INTERVAL {
        window.left_out += 1;
        return;
    }
    window.logged += 1;
    // The user name is the client's text: quoted (Debug), so it cannot forge log lines.
    tracing::warn!(
        client = %peer,
        user = ?user,
        reason = reason.as_str(),
        "login failed"
    );
}
