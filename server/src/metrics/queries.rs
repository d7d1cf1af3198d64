//! Statements and connections: how many ran, how long they took, which failed (by SQLSTATE),
//! and how many clients are connected.
//!
//! These are process-wide, like the connections they count: the handlers record into them
//! wherever a registry is (or is not) serving them.

use std::future::Future;
use std::sync::LazyLock;
use std::time::Instant;

use pgwire::api::results::Response;
use pgwire::error::{PgWireError, PgWireResult};
use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry};

struct QueryMetrics {
    statements: IntCounter,
    duration: Histogram,
    errors: IntCounterVec,
    connections_open: IntGauge,
    connections: IntCounter,
}

static METRICS: LazyLock<QueryMetrics> = LazyLock::new(|| QueryMetrics {
    statements: IntCounter::new("eddy_statements_total", "Statements run").expect("valid metric"),
    duration: Histogram::with_opts(
        HistogramOpts::new(
            "eddy_statement_duration_seconds",
            "Time until a statement's response is ready (failed ones included)",
        )
        .buckets(prometheus::exponential_buckets(0.0005, 2.0, 16).expect("valid buckets")),
    )
    .expect("valid metric"),
    errors: IntCounterVec::new(
        Opts::new(
            "eddy_statement_errors_total",
            "Statements that failed, by SQLSTATE",
        ),
        &["sqlstate"],
    )
    .expect("valid metric"),
    connections_open: IntGauge::new("eddy_connections_open", "Clients connected now")
        .expect("valid metric"),
    connections: IntCounter::new("eddy_connections_total", "Clients that connected")
        .expect("valid metric"),
});

pub fn register(registry: &Registry) -> prometheus::Result<()> {
    let m = &*METRICS;
    registry.register(Box::new(m.statements.clone()))?;
    registry.register(Box::new(m.duration.clone()))?;
    registry.register(Box::new(m.errors.clone()))?;
    registry.register(Box::new(m.connections_open.clone()))?;
    registry.register(Box::new(m.connections.clone()))
}

/// Runs one statement, counting it, timing it and counting its error's SQLSTATE.
pub async fn observe(run: impl Future<Output = PgWireResult<Response>>) -> PgWireResult<Response> {
    let started = Instant::now();
    let response = run.await;
    let m = &*METRICS;
    m.statements.inc();
    m.duration.observe(started.elapsed().as_secs_f64());
    match &response {
        Ok(Response::Error(info)) => failed(&info.code),
        Err(PgWireError::UserError(info)) => failed(&info.code),
        _ => {}
    }
    response
}

/// Counts a statement refused before it could run (a syntax error).
pub fn rejected(sqlstate: &str) {
    METRICS.statements.inc();
    failed(sqlstate);
}

fn failed(sqlstate: &str) {
    METRICS.errors.with_label_values(&[sqlstate]).inc();
}

/// Counts a connection while it lives.
pub struct ConnectionGuard(());

impl ConnectionGuard {
    pub fn open() -> Self {
        METRICS.connections.inc();
        METRICS.connections_open.inc();
        Self(())
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        METRICS.connections_open.dec();
    }
}
