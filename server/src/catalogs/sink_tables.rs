//! `eddy_catalog.sinks` (each sink's state and how far behind its target it is, read live
//! from its sender), `eddy_catalog.sink_errors` (messages a target refused for good) and
//! `eddy_catalog.subscriptions` (the `SUBSCRIBE`s running, with what their clients have not
//! read yet).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Float64Array, RecordBatch};
use datafusion::error::{DataFusionError, Result};
use eddy_executor::sink::status::SinkError;
use eddy_executor::EngineHandle;
use eddy_storage::keys::SINK_ERRORS_TABLE;
use eddy_storage::Store;

use crate::catalogs::eddy_catalog::{batch, ints, nullable_strings, strings, timestamps};

pub(crate) fn sinks(engine: &EngineHandle) -> Result<RecordBatch> {
    let stats = engine.stats();
    let s = &stats.sinks;
    let states: Vec<_> = s.iter().map(|s| s.shared.state()).collect();
    let behind: Vec<_> = s.iter().map(|s| s.shared.behind()).collect();
    batch(vec![
        ("name", strings(s.iter().map(|s| s.name.clone()))),
        ("input", strings(s.iter().map(|s| s.input.clone()))),
        ("connector", strings(s.iter().map(|s| s.connector.clone()))),
        (
            "format",
            strings(s.iter().map(|s| format!("{} {}", s.format, s.encode))),
        ),
        ("target", strings(s.iter().map(|s| s.target.clone()))),
        ("key", strings(s.iter().map(|s| s.key.join(", ")))),
        // A sink whose log passed its bound holds its inputs back: that is its state then.
        (
            "state",
            strings(
                s.iter()
                    .zip(&states)
                    .map(|(s, state)| match (&s.backpressure, state.state) {
                        (Some(_), "running" | "retrying") => "backpressured".to_string(),
                        (_, state) => state.to_string(),
                    }),
            ),
        ),
        (
            "backpressure",
            nullable_strings(s.iter().map(|s| s.backpressure.clone())),
        ),
        (
            "last_error",
            nullable_strings(states.iter().map(|state| state.last_error.clone())),
        ),
        (
            "delivered_epoch",
            ints(s.iter().map(|s| Some(s.shared.delivered_epoch() as i64))),
        ),
        (
            "epochs_behind",
            ints(behind.iter().map(|b| Some(b.0 as i64))),
        ),
        (
            "bytes_behind",
            ints(behind.iter().map(|b| Some(b.1 as i64))),
        ),
        (
            "lag_seconds",
            Arc::new(Float64Array::from(
                s.iter()
                    .map(|s| Some(s.shared.lag_seconds()))
                    .collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
        (
            "messages_sent",
            ints(
                s.iter()
                    .map(|s| Some(s.shared.messages_sent.load(Ordering::Relaxed) as i64)),
            ),
        ),
        (
            "bytes_sent",
            ints(
                s.iter()
                    .map(|s| Some(s.shared.bytes_sent.load(Ordering::Relaxed) as i64)),
            ),
        ),
        (
            "messages_refused",
            ints(s.iter().map(|s| Some(s.shared.errors_total() as i64))),
        ),
        (
            "log_max_bytes",
            ints(s.iter().map(|s| Some(s.log_max_bytes as i64))),
        ),
        ("definition", strings(s.iter().map(|s| s.sql.clone()))),
    ])
}

pub(crate) fn sink_errors(store: &Arc<dyn Store>) -> Result<RecordBatch> {
    let rows = store
        .scan_table(SINK_ERRORS_TABLE)
        .map_err(|e| DataFusionError::External(Box::new(e)))?;
    let errors: Vec<SinkError> = rows
        .iter()
        .map(|(_, value)| serde_json::from_slice(value))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| DataFusionError::External(Box::new(e)))?;
    batch(vec![
        ("sink", strings(errors.iter().map(|e| e.sink.clone()))),
        ("epoch", ints(errors.iter().map(|e| Some(e.epoch as i64)))),
        ("seq", ints(errors.iter().map(|e| Some(i64::from(e.seq))))),
        ("error", strings(errors.iter().map(|e| e.error.clone()))),
        (
            "key",
            nullable_strings(errors.iter().map(|e| e.key.clone())),
        ),
        (
            "value_start",
            nullable_strings(errors.iter().map(|e| e.value.clone())),
        ),
        (
            "value_bytes",
            ints(errors.iter().map(|e| Some(e.value_bytes as i64))),
        ),
        (
            "refused_at",
            timestamps(errors.iter().map(|e| Some(e.at_ms * 1000))),
        ),
    ])
}

pub(crate) fn subscriptions(engine: &EngineHandle) -> Result<RecordBatch> {
    let s = engine.subscriptions();
    batch(vec![
        ("id", ints(s.iter().map(|s| Some(s.id as i64)))),
        ("relation", strings(s.iter().map(|s| s.relation.clone()))),
        (
            "start_epoch",
            ints(s.iter().map(|s| Some(s.start_epoch as i64))),
        ),
        (
            "delivered_epoch",
            ints(s.iter().map(|s| Some(s.delivered_epoch as i64))),
        ),
        (
            "committed_epoch",
            ints(s.iter().map(|s| Some(s.committed_epoch as i64))),
        ),
        (
            "buffered_bytes",
            ints(s.iter().map(|s| Some(s.buffered_bytes as i64))),
        ),
        (
            "buffer_limit",
            ints(s.iter().map(|s| Some(s.buffer_limit as i64))),
        ),
    ])
}
