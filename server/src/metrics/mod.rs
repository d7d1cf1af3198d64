//! Metrics in Prometheus' text format, on an HTTP listener of their own (`--metrics-listen`).
//!
//! - [`engine`]: sources, tables, views and joins, read at each scrape from the same figures
//!   `eddy_catalog` shows (nothing is computed twice).
//! - [`sinks`]: what each sink's log holds not yet delivered, what it sent and what its
//!   target refused, read live from its sender.
//! - [`commits`]: each epoch commit's duration and bytes, as the engine reports them.
//! - [`restore`]: how long this start took to restore the data directory.
//! - [`logins`]: failed logins, by reason.
//! - [`queries`]: statements run, their latency, errors by SQLSTATE, open connections.
//! - [`http`]: the `/metrics` endpoint.

pub(crate) mod commits;
pub(crate) mod engine;
pub mod http;
pub(crate) mod logins;
pub mod queries;
pub(crate) mod restore;
pub(crate) mod sinks;

use eddy_executor::EngineHandle;
use prometheus::Registry;

/// A registry holding every Eddy metric, with the engine's commits observed from now on.
pub fn registry(engine: &EngineHandle) -> prometheus::Result<Registry> {
    let registry = Registry::new();
    registry.register(Box::new(engine::EngineCollector::new(engine.clone())?))?;
    registry.register(Box::new(sinks::SinkCollector::new(engine.clone())?))?;
    let commits = commits::CommitMetrics::new()?;
    commits.register(&registry)?;
    engine.observe_commits(commits.observer());
    queries::register(&registry)?;
    logins::register(&registry)?;
    registry.register(Box::new(restore::RestoreCollector::new()?))?;
    Ok(registry)
}
