//! The `eddy_catalog` schema: tables, views and late rows as queryable tables.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, ListBuilder, RecordBatch, StringArray,
    StringBuilder, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::catalog::{MemTable, SchemaProvider, TableProvider};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::context::SessionContext;
use eddy_executor::engine::StoredDeadLetter;
use eddy_executor::table::LateRow;
use eddy_executor::view_errors::StoredViewError;
use eddy_executor::EngineHandle;
use eddy_storage::keys::{LATE_ROWS_TABLE, SOURCE_ERRORS_TABLE, VIEW_ERRORS_TABLE};
use eddy_storage::Store;

const TABLES: &[&str] = &[
    "join_state",
    "late_rows",
    "materialized_views",
    "restore",
    "sink_errors",
    "sinks",
    "source_errors",
    "source_progress",
    "sources",
    "state_tables",
    "store",
    "subscriptions",
    "tables",
    "view_errors",
];

/// `eddy_catalog` in the default catalog.
pub fn register(
    ctx: &SessionContext,
    engine: &EngineHandle,
    store: &Arc<dyn Store>,
) -> crate::error::Result<()> {
    let catalog = ctx
        .catalog(crate::database::DATABASE)
        .ok_or_else(|| crate::error::ServerError::internal("default catalog missing"))?;
    catalog
        .register_schema(
            crate::catalogs::eddy_extension::SCHEMA,
            Arc::new(SystemSchema::new(engine.clone(), store.clone())),
        )
        .map_err(crate::error::ServerError::from)?;
    Ok(())
}

pub struct SystemSchema {
    engine: EngineHandle,
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for SystemSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SystemSchema")
    }
}

impl SystemSchema {
    pub fn new(engine: EngineHandle, store: Arc<dyn Store>) -> Self {
        Self { engine, store }
    }

    fn tables(&self) -> Result<RecordBatch> {
        let stats = self.engine.stats();
        let t = &stats.tables;
        batch(vec![
            ("name", strings(t.iter().map(|t| t.name.clone()))),
            ("rows_in", ints(t.iter().map(|t| Some(t.rows_in as i64)))),
            (
                "rows_late",
                ints(t.iter().map(|t| Some(t.rows_late as i64))),
            ),
            ("watermark", timestamps(t.iter().map(|t| t.watermark))),
            (
                "watermark_delay_seconds",
                delays(t.iter().map(|t| t.watermark)),
            ),
        ])
    }

    fn materialized_views(&self) -> Result<RecordBatch> {
        let stats = self.engine.stats();
        let v = &stats.views;
        batch(vec![
            ("name", strings(v.iter().map(|v| v.name.clone()))),
            ("source", strings(v.iter().map(|v| v.source.clone()))),
            (
                "emit",
                strings(v.iter().map(|v| {
                    if v.emit_on_window_close {
                        "on_window_close"
                    } else {
                        "on_update"
                    }
                    .to_string()
                })),
            ),
            ("rows_in", ints(v.iter().map(|v| Some(v.rows_in as i64)))),
            (
                "rows_late",
                ints(v.iter().map(|v| Some(v.rows_late as i64))),
            ),
            (
                "state_rows",
                ints(v.iter().map(|v| Some(v.state_rows as i64))),
            ),
            (
                "open_windows",
                ints(v.iter().map(|v| Some(v.open_windows as i64))),
            ),
            (
                "unbounded_state",
                Arc::new(BooleanArray::from(
                    v.iter().map(|v| v.unbounded_state).collect::<Vec<_>>(),
                )),
            ),
            (
                "committed_epoch",
                ints(v.iter().map(|_| Some(stats.epoch as i64))),
            ),
            ("definition", strings(v.iter().map(|v| v.sql.clone()))),
            (
                "rows_failed",
                ints(v.iter().map(|v| Some(v.rows_failed as i64))),
            ),
            (
                "state_bytes",
                ints(v.iter().map(|v| Some(v.state_bytes as i64))),
            ),
            (
                "status",
                strings(v.iter().map(|v| {
                    if v.failed.is_some() {
                        "failed"
                    } else {
                        "running"
                    }
                    .to_string()
                })),
            ),
            (
                "error",
                nullable_strings(
                    v.iter()
                        .map(|v| v.failed.as_ref().map(|f| f.message.clone())),
                ),
            ),
            (
                "workers",
                ints(v.iter().map(|v| Some(i64::from(v.workers)))),
            ),
        ])
    }

    fn view_errors(&self) -> Result<RecordBatch> {
        let rows = self
            .store
            .scan_table(VIEW_ERRORS_TABLE)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let mut failed = Vec::with_capacity(rows.len());
        for (_, value) in rows {
            let row: StoredViewError = serde_json::from_slice(&value)
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
            failed.push(row);
        }
        batch(vec![
            ("view", strings(failed.iter().map(|f| f.view.clone()))),
            ("error", strings(failed.iter().map(|f| f.error.clone()))),
            ("row", strings(failed.iter().map(|f| f.row.clone()))),
            (
                "failed_at",
                timestamps(failed.iter().map(|f| Some(f.failed_at))),
            ),
        ])
    }

    /// One row per view, join and side: what the join keeps.
    fn join_state(&self) -> Result<RecordBatch> {
        let stats = self.engine.stats();
        let sides: Vec<(&str, &eddy_executor::JoinSideStats)> = stats
            .views
            .iter()
            .flat_map(|v| v.joins.iter().map(move |j| (v.name.as_str(), j)))
            .collect();
        let count = |f: fn(&eddy_executor::JoinSideStats) -> u64| {
            ints(sides.iter().map(move |(_, j)| Some(f(j) as i64)))
        };
        batch(vec![
            ("view", strings(sides.iter().map(|(v, _)| v.to_string()))),
            ("join", ints(sides.iter().map(|(_, j)| Some(j.join as i64)))),
            (
                "side",
                strings(sides.iter().map(|(_, j)| j.side.to_string())),
            ),
            ("input", strings(sides.iter().map(|(_, j)| j.input.clone()))),
            ("rows", count(|j| j.rows)),
            ("distinct_keys", count(|j| j.distinct_keys)),
            ("bytes", count(|j| j.bytes)),
            ("max_rows_per_key", count(|j| j.max_rows_per_key)),
            ("max_fan_out", count(|j| j.max_fan_out)),
            ("rows_evicted", count(|j| j.rows_evicted)),
            (
                "retention",
                timestamps(sides.iter().map(|(_, j)| j.retention)),
            ),
        ])
    }

    /// One row per view and state table: rows in the store, the cache, reads and writes.
    fn state_tables(&self) -> Result<RecordBatch> {
        let stats = self.engine.stats();
        let tables: Vec<(&str, &eddy_executor::state_table::StateTableStats)> = stats
            .views
            .iter()
            .flat_map(|v| v.state_tables.iter().map(move |t| (v.name.as_str(), t)))
            .collect();
        let count = |f: fn(&eddy_executor::state_table::StateTableStats) -> u64| {
            ints(tables.iter().map(move |(_, t)| Some(f(t) as i64)))
        };
        let hit_rate: Float64Array = tables
            .iter()
            .map(|(_, t)| {
                let lookups = t.hits + t.misses;
                (lookups > 0).then(|| t.hits as f64 / lookups as f64)
            })
            .collect();
        batch(vec![
            ("view", strings(tables.iter().map(|(v, _)| v.to_string()))),
            (
                "operator",
                strings(tables.iter().map(|(_, t)| t.role.to_string())),
            ),
            ("table_id", count(|t| u64::from(t.table))),
            ("rows", count(|t| t.rows)),
            ("bytes", count(|t| t.bytes)),
            ("cached_groups", count(|t| t.cached_groups)),
            ("cache_bytes", count(|t| t.cache_bytes)),
            ("hits", count(|t| t.hits)),
            ("misses", count(|t| t.misses)),
            ("hit_rate", Arc::new(hit_rate)),
            ("rows_read", count(|t| t.rows_read)),
            ("writes_last_epoch", count(|t| t.writes_last_epoch)),
            ("writes", count(|t| t.writes)),
            ("evictions", count(|t| t.evictions)),
        ])
    }

    fn late_rows(&self) -> Result<RecordBatch> {
        let rows = self
            .store
            .scan_table(LATE_ROWS_TABLE)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let mut seqs = Vec::with_capacity(rows.len());
        let mut late = Vec::with_capacity(rows.len());
        for (key, value) in rows {
            let seq = key
                .as_slice()
                .try_into()
                .map(i64::from_be_bytes)
                .unwrap_or(-1);
            let row: LateRow = serde_json::from_slice(&value)
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
            seqs.push(Some(seq));
            late.push(row);
        }
        batch(vec![
            ("seq", ints(seqs.into_iter())),
            ("object", strings(late.iter().map(|r| r.object.clone()))),
            ("source", strings(late.iter().map(|r| r.source.clone()))),
            (
                "event_time",
                timestamps(late.iter().map(|r| Some(r.event_time))),
            ),
            (
                "watermark",
                timestamps(late.iter().map(|r| Some(r.watermark))),
            ),
            ("row", strings(late.iter().map(|r| r.row.clone()))),
        ])
    }
}

impl SystemSchema {
    fn sources(&self) -> Result<RecordBatch> {
        let stats = self.engine.stats();
        let s = &stats.sources;
        batch(vec![
            ("name", strings(s.iter().map(|s| s.name.clone()))),
            ("connector", strings(s.iter().map(|s| s.connector.clone()))),
            ("definition", strings(s.iter().map(|s| s.sql.clone()))),
        ])
    }

    fn source_progress(&self) -> Result<RecordBatch> {
        let stats = self.engine.stats();
        let p = &stats.progress;
        let floats =
            |values: Vec<Option<f64>>| -> ArrayRef { Arc::new(Float64Array::from(values)) };
        batch(vec![
            ("source", strings(p.iter().map(|p| p.source.clone()))),
            ("target", strings(p.iter().map(|p| p.target.clone()))),
            ("split", strings(p.iter().map(|p| p.split.clone()))),
            ("committed_offset", ints(p.iter().map(|p| Some(p.position)))),
            ("high_watermark", ints(p.iter().map(|p| p.high_watermark))),
            ("lag_messages", ints(p.iter().map(|p| p.lag_messages))),
            ("rate", floats(p.iter().map(|p| Some(p.rate)).collect())),
            (
                "lag_seconds",
                floats(p.iter().map(|p| p.lag_seconds).collect()),
            ),
            ("lag_trend", floats(p.iter().map(|p| p.lag_trend).collect())),
            ("watermark", timestamps(p.iter().map(|p| p.watermark))),
            (
                "watermark_delay_seconds",
                delays(p.iter().map(|p| p.watermark)),
            ),
            (
                "idle",
                Arc::new(BooleanArray::from(
                    p.iter().map(|p| p.idle).collect::<Vec<_>>(),
                )),
            ),
            (
                "finished",
                Arc::new(BooleanArray::from(
                    p.iter().map(|p| p.finished).collect::<Vec<_>>(),
                )),
            ),
            (
                "last_error",
                Arc::new(StringArray::from(
                    p.iter().map(|p| p.last_error.clone()).collect::<Vec<_>>(),
                )),
            ),
        ])
    }

    fn source_errors(&self) -> Result<RecordBatch> {
        let rows = self
            .store
            .scan_table(SOURCE_ERRORS_TABLE)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        // One row per bad message: each reader of a source (a view has its own) meets the
        // same message, and records it, so the records are gathered by where it lies and what
        // it is. Rows a source's key refused share their batch's position: the n-th record of
        // one reader at a place is the n-th such row, which every reader records in turn.
        let mut letters: Vec<StoredDeadLetter> = Vec::with_capacity(rows.len());
        let mut readers: Vec<Vec<String>> = Vec::with_capacity(rows.len());
        type Place = (String, String, i64, String, String);
        let mut places: HashMap<(Place, usize), usize> = HashMap::new();
        let mut seen: HashMap<(Place, String), usize> = HashMap::new();
        for (_, value) in rows {
            let letter: StoredDeadLetter = serde_json::from_slice(&value)
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
            let place = (
                letter.source.clone(),
                letter.split.clone(),
                letter.position,
                letter.error.clone(),
                letter.payload.clone(),
            );
            let nth = seen
                .entry((place.clone(), letter.reader.clone()))
                .or_default();
            *nth += 1;
            let row = *places.entry((place, *nth)).or_insert_with(|| {
                letters.push(letter.clone());
                readers.push(Vec::new());
                letters.len() - 1
            });
            if !letter.reader.is_empty() && !readers[row].contains(&letter.reader) {
                readers[row].push(letter.reader);
            }
        }
        let mut views = ListBuilder::new(StringBuilder::new());
        for names in &mut readers {
            names.sort();
            for name in names.iter() {
                views.values().append_value(name);
            }
            views.append(true);
        }
        batch(vec![
            ("source", strings(letters.iter().map(|l| l.source.clone()))),
            ("split", strings(letters.iter().map(|l| l.split.clone()))),
            ("offset", ints(letters.iter().map(|l| Some(l.position)))),
            ("error", strings(letters.iter().map(|l| l.error.clone()))),
            (
                "payload",
                strings(letters.iter().map(|l| l.payload.clone())),
            ),
            (
                "read_at",
                timestamps(letters.iter().map(|l| Some(l.read_at))),
            ),
            ("views", Arc::new(views.finish())),
        ])
    }

    /// One row: the store's sizes, its write buffer against the bound that holds sources back,
    /// and its health (the figures `/metrics` has, for a client without Prometheus).
    fn store_table(&self) -> Result<RecordBatch> {
        let stats = self.engine.stats();
        let (store, hold) = (&stats.store, &stats.write_buffer_hold);
        let int = |v: u64| ints(std::iter::once(Some(v as i64)));
        batch(vec![
            ("size_bytes", int(store.disk_bytes)),
            ("write_buffer_bytes", int(store.write_buffer_bytes)),
            ("write_buffer_limit_bytes", int(hold.limit_bytes)),
            (
                "sources_held",
                Arc::new(BooleanArray::from(vec![hold.holding])),
            ),
            (
                "sources_held_seconds",
                Arc::new(Float64Array::from(vec![hold.held_seconds])),
            ),
            ("cache_bytes", int(store.cache_bytes)),
            ("write_faults", int(store.faults)),
            (
                "fault",
                nullable_strings(std::iter::once(store.fault.clone())),
            ),
        ])
    }
}

/// One row: how long this server's start took to bring its data back (no row before the
/// start has finished restoring).
fn restore_table() -> Result<RecordBatch> {
    let report = crate::restore::last();
    let rows: Vec<&crate::restore::RestoreReport> = report.into_iter().collect();
    let seconds = |f: fn(&crate::restore::RestoreReport) -> f64| -> ArrayRef {
        Arc::new(Float64Array::from(
            rows.iter().map(|r| Some(f(r))).collect::<Vec<_>>(),
        ))
    };
    batch(vec![
        (
            "started_at",
            timestamps(rows.iter().map(|r| Some(r.started_at_micros))),
        ),
        (
            "open_store_seconds",
            seconds(|r| r.open_store.as_secs_f64()),
        ),
        (
            "restore_catalog_seconds",
            seconds(|r| r.restore_catalog.as_secs_f64()),
        ),
        ("total_seconds", seconds(|r| r.total().as_secs_f64())),
        ("objects", ints(rows.iter().map(|r| Some(r.objects as i64)))),
        (
            "store_bytes",
            ints(rows.iter().map(|r| Some(r.store_bytes as i64))),
        ),
        ("epoch", ints(rows.iter().map(|r| Some(r.epoch as i64)))),
    ])
}

/// Wall-clock time minus each watermark (micros), in seconds.
fn delays(watermarks: impl Iterator<Item = Option<i64>>) -> ArrayRef {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64);
    Arc::new(Float64Array::from(
        watermarks
            .map(|w| w.map(|w| (now - w) as f64 / 1e6))
            .collect::<Vec<_>>(),
    ))
}

pub(crate) fn strings(values: impl Iterator<Item = String>) -> ArrayRef {
    Arc::new(StringArray::from(values.collect::<Vec<_>>()))
}

pub(crate) fn nullable_strings(values: impl Iterator<Item = Option<String>>) -> ArrayRef {
    Arc::new(StringArray::from(values.collect::<Vec<_>>()))
}

pub(crate) fn ints(values: impl Iterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(Int64Array::from(values.collect::<Vec<_>>()))
}

pub(crate) fn timestamps(values: impl Iterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(TimestampMicrosecondArray::from(values.collect::<Vec<_>>()))
}

pub(crate) fn batch(columns: Vec<(&str, ArrayRef)>) -> Result<RecordBatch> {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, array)| {
            let data_type = match array.data_type() {
                DataType::Timestamp(_, _) => DataType::Timestamp(TimeUnit::Microsecond, None),
                other => other.clone(),
            };
            Field::new(*name, data_type, true)
        })
        .collect();
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns.into_iter().map(|(_, a)| a).collect(),
    )?)
}

#[async_trait]
impl SchemaProvider for SystemSchema {
    fn table_names(&self) -> Vec<String> {
        TABLES.iter().map(|s| s.to_string()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let batch = match name {
            "tables" => self.tables()?,
            "materialized_views" => self.materialized_views()?,
            "join_state" => self.join_state()?,
            "state_tables" => self.state_tables()?,
            "late_rows" => self.late_rows()?,
            "sources" => self.sources()?,
            "source_progress" => self.source_progress()?,
            "source_errors" => self.source_errors()?,
            "restore" => restore_table()?,
            "store" => self.store_table()?,
            "view_errors" => self.view_errors()?,
            "sinks" => crate::catalogs::sink_tables::sinks(&self.engine)?,
            "sink_errors" => crate::catalogs::sink_tables::sink_errors(&self.store)?,
            "subscriptions" => crate::catalogs::sink_tables::subscriptions(&self.engine)?,
            _ => return Ok(None),
        };
        Ok(Some(Arc::new(MemTable::try_new(
            batch.schema(),
            vec![vec![batch]],
        )?)))
    }

    fn table_exist(&self, name: &str) -> bool {
        TABLES.contains(&name)
    }
}
