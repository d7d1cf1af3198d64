//! Failed logins by reason (`eddy_login_failures_total{reason}`), counted where a login fails
//! ([`crate::wire::failed_logins`]).

use std::sync::LazyLock;

use prometheus::{IntCounterVec, Opts, Registry};

/// The reasons a login fails, as `failed_logins` names them: each shows from the start, at 0.
pub const REASONS: &[&str] = &["password", "mechanism", "protocol", "timeout"];

static FAILURES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    IntCounterVec::new(
        Opts::new(
            "eddy_login_failures_total",
            "Failed logins, by reason (password, mechanism, protocol, timeout)",
        ),
        &["reason"],
    )
    .expect("valid metric")
});

pub fn register(registry: &Registry) -> prometheus::Result<()> {
    for reason in REASONS {
        FAILURES.with_label_values(&[reason]);
    }
    registry.register(Box::new(FAILURES.clone()))
}

/// One failed login, of this reason.
pub fn failed(reason: &str) {
    FAILURES.with_label_values(&[reason]).inc();
}
