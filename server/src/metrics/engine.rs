//! The engine's figures as metrics: per source split, stored table, view and join side.
//!
//! Each scrape reads the figures the engine published at its last commit (the ones
//! `eddy_catalog.source_progress`, `tables`, `materialized_views` and `join_state` show) and
//! sets one gauge or counter per figure. Figures that are not known (a split with no known
//! end, a table without a watermark) are left out rather than reported as zero.

use std::time::{SystemTime, UNIX_EPOCH};

use eddy_executor::{EngineHandle, EngineStats};
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Counter, GaugeVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts};

const SPLIT_LABELS: &[&str] = &["source", "target", "split"];
const JOIN_LABELS: &[&str] = &["view", "join", "side", "input"];

struct Families {
    committed_offset: IntGaugeVec,
    high_watermark: IntGaugeVec,
    lag_messages: IntGaugeVec,
    rate: GaugeVec,
    lag_seconds: GaugeVec,
    lag_trend: GaugeVec,
    source_watermark: GaugeVec,
    source_watermark_delay: GaugeVec,
    idle: IntGaugeVec,
    finished: IntGaugeVec,
    dead_letters: IntCounterVec,
    table_rows_in: IntCounterVec,
    table_rows_late: IntCounterVec,
    table_watermark: GaugeVec,
    table_watermark_delay: GaugeVec,
    view_rows_in: IntCounterVec,
    view_rows_late: IntCounterVec,
    view_state_rows: IntGaugeVec,
    view_open_windows: IntGaugeVec,
    view_unbounded_state: IntGaugeVec,
    view_committed_epoch: IntGaugeVec,
    join_rows: IntGaugeVec,
    join_keys: IntGaugeVec,
    join_bytes: IntGaugeVec,
    join_evicted: IntCounterVec,
    state_store_rows: IntGaugeVec,
    state_store_bytes: IntGaugeVec,
    state_cache_bytes: IntGaugeVec,
    state_lookups: IntCounterVec,
    state_rows_read: IntCounterVec,
    state_writes_last_epoch: IntGaugeVec,
    state_cache_limit: IntGauge,
    state_cache_used: IntGauge,
    committed_epoch: IntGauge,
    store_bytes: IntGauge,
    store_write_buffer_bytes: IntGauge,
    store_write_buffer_limit: IntGauge,
    store_write_held: Counter,
    store_cache_bytes: IntGauge,
    store_faults: IntCounter,
    store_recovering: IntGauge,
}

fn opts(name: &str, help: &str) -> Opts {
    Opts::new(name, help)
}

impl Families {
    fn new() -> prometheus::Result<Self> {
        let split_gauge = |name: &str, help: &str| GaugeVec::new(opts(name, help), SPLIT_LABELS);
        let split_int = |name: &str, help: &str| IntGaugeVec::new(opts(name, help), SPLIT_LABELS);
        let join_int = |name: &str, help: &str| IntGaugeVec::new(opts(name, help), JOIN_LABELS);
        Ok(Self {
            committed_offset: split_int(
                "eddy_source_committed_offset",
                "Where the split resumes: the next offset (Kafka), byte (file) or event (Nexmark)",
            )?,
            high_watermark: split_int(
                "eddy_source_high_watermark_offset",
                "The split's end as last seen (Kafka high-water offset, file size, a bounded generator's last event)",
            )?,
            lag_messages: split_int(
                "eddy_source_lag_messages",
                "Messages between the committed offset and the split's end (files: lines, estimated)",
            )?,
            rate: split_gauge(
                "eddy_source_messages_per_second",
                "Messages read per second, smoothed",
            )?,
            lag_seconds: split_gauge(
                "eddy_source_lag_seconds",
                "Time to read what is behind at the current rate (0 when caught up)",
            )?,
            lag_trend: split_gauge(
                "eddy_source_lag_trend",
                "Change of the lag in seconds per second (positive: falling behind)",
            )?,
            source_watermark: split_gauge(
                "eddy_source_watermark_timestamp_seconds",
                "The watermark of the table or view the split feeds, as Unix time",
            )?,
            source_watermark_delay: split_gauge(
                "eddy_source_watermark_delay_seconds",
                "Wall-clock time minus that watermark",
            )?,
            idle: split_int(
                "eddy_source_idle",
                "1 when the split no longer holds the watermark back (no data for watermark.idle.timeout)",
            )?,
            finished: split_int(
                "eddy_source_finished",
                "1 when a bounded source has been read to its end",
            )?,
            dead_letters: IntCounterVec::new(
                opts(
                    "eddy_source_dead_letters_total",
                    "Messages that could not be decoded (kept in eddy_catalog.source_errors)",
                ),
                SPLIT_LABELS,
            )?,
            table_rows_in: IntCounterVec::new(
                opts("eddy_table_rows_in_total", "Rows written to the table, late ones included"),
                &["table"],
            )?,
            table_rows_late: IntCounterVec::new(
                opts(
                    "eddy_table_rows_late_total",
                    "Rows below the table's watermark on arrival (not applied)",
                ),
                &["table"],
            )?,
            table_watermark: GaugeVec::new(
                opts("eddy_table_watermark_timestamp_seconds", "The table's watermark, as Unix time"),
                &["table"],
            )?,
            table_watermark_delay: GaugeVec::new(
                opts(
                    "eddy_table_watermark_delay_seconds",
                    "Wall-clock time minus the table's watermark",
                ),
                &["table"],
            )?,
            view_rows_in: IntCounterVec::new(
                opts(
                    "eddy_view_rows_in_total",
                    "Rows that arrived at the view's sources and tables, late ones included",
                ),
                &["view"],
            )?,
            view_rows_late: IntCounterVec::new(
                opts("eddy_view_rows_late_total", "Of those, rows that were late"),
                &["view"],
            )?,
            view_state_rows: IntGaugeVec::new(
                opts("eddy_view_state_rows", "Rows of operator state the view holds"),
                &["view"],
            )?,
            view_open_windows: IntGaugeVec::new(
                opts("eddy_view_open_windows", "Windows still open in the view's state"),
                &["view"],
            )?,
            view_unbounded_state: IntGaugeVec::new(
                opts(
                    "eddy_view_unbounded_state",
                    "1 when some state of the view grows with its keys, with no watermark to evict it",
                ),
                &["view"],
            )?,
            view_committed_epoch: IntGaugeVec::new(
                opts("eddy_view_committed_epoch", "The last epoch committed with the view's rows"),
                &["view"],
            )?,
            join_rows: join_int("eddy_join_state_rows", "Rows one side of a join keeps")?,
            join_keys: join_int("eddy_join_state_keys", "Distinct join keys on that side")?,
            join_bytes: join_int("eddy_join_state_bytes", "Bytes of that side's rows as stored")?,
            join_evicted: IntCounterVec::new(
                opts(
                    "eddy_join_rows_evicted_total",
                    "Rows evicted from that side by the other side's watermark",
                ),
                JOIN_LABELS,
            )?,
            state_store_rows: IntGaugeVec::new(
                opts("eddy_view_state_store_rows", "Rows of the view's operator state in the store"),
                &["view"],
            )?,
            state_store_bytes: IntGaugeVec::new(
                opts(
                    "eddy_view_state_store_bytes",
                    "Bytes of the view's operator state in the store (keys and values)",
                ),
                &["view"],
            )?,
            state_cache_bytes: IntGaugeVec::new(
                opts(
                    "eddy_view_state_cache_bytes",
                    "Memory the view's cached operator state holds, estimated",
                ),
                &["view"],
            )?,
            state_lookups: IntCounterVec::new(
                opts(
                    "eddy_view_state_lookups_total",
                    "Lookups of operator state by key: result=hit (cached) or miss (read from the store)",
                ),
                &["view", "result"],
            )?,
            state_rows_read: IntCounterVec::new(
                opts(
                    "eddy_view_state_rows_read_total",
                    "Rows of operator state read back from the store",
                ),
                &["view"],
            )?,
            state_writes_last_epoch: IntGaugeVec::new(
                opts(
                    "eddy_view_state_writes_last_epoch",
                    "Rows of operator state the last epoch wrote (puts and deletes)",
                ),
                &["view"],
            )?,
            state_cache_limit: IntGauge::new(
                "eddy_state_cache_limit_bytes",
                "The memory operator state caches may hold together (--state-cache-mib)",
            )?,
            state_cache_used: IntGauge::new(
                "eddy_state_cache_bytes",
                "The memory operator state caches hold together, estimated",
            )?,
            committed_epoch: IntGauge::new("eddy_committed_epoch", "The last committed epoch")?,
            store_bytes: IntGauge::new("eddy_store_size_bytes", "Bytes the store takes on disk")?,
            store_write_buffer_bytes: IntGauge::new(
                "eddy_store_write_buffer_bytes",
                "Bytes of committed writes held in memory (memtables), not yet in table files",
            )?,
            store_write_buffer_limit: IntGauge::new(
                "eddy_store_write_buffer_limit_bytes",
                "The write buffer past which sources wait for the store's flushes \
                 (--store-write-buffer-mib; 0: no bound)",
            )?,
            store_write_held: Counter::new(
                "eddy_store_write_held_seconds_total",
                "Time every source waited because the store's write buffer was over its bound",
            )?,
            store_cache_bytes: IntGauge::new(
                "eddy_store_cache_bytes",
                "Bytes in the store's block cache (bounded by --store-cache-mib)",
            )?,
            store_faults: IntCounter::new(
                "eddy_store_write_faults_total",
                "Epoch writes that failed (disk full, permissions, open-file limit, I/O errors)",
            )?,
            store_recovering: IntGauge::new(
                "eddy_store_recovering",
                "1 while the store is recovering from a write fault (writes fail meanwhile)",
            )?,
        })
    }

    fn collectors(&self) -> Vec<&dyn Collector> {
        vec![
            &self.committed_offset,
            &self.high_watermark,
            &self.lag_messages,
            &self.rate,
            &self.lag_seconds,
            &self.lag_trend,
            &self.source_watermark,
            &self.source_watermark_delay,
            &self.idle,
            &self.finished,
            &self.dead_letters,
            &self.table_rows_in,
            &self.table_rows_late,
            &self.table_watermark,
            &self.table_watermark_delay,
            &self.view_rows_in,
            &self.view_rows_late,
            &self.view_state_rows,
            &self.view_open_windows,
            &self.view_unbounded_state,
            &self.view_committed_epoch,
            &self.join_rows,
            &self.join_keys,
            &self.join_bytes,
            &self.join_evicted,
            &self.state_store_rows,
            &self.state_store_bytes,
            &self.state_cache_bytes,
            &self.state_lookups,
            &self.state_rows_read,
            &self.state_writes_last_epoch,
            &self.state_cache_limit,
            &self.state_cache_used,
            &self.committed_epoch,
            &self.store_bytes,
            &self.store_write_buffer_bytes,
            &self.store_write_buffer_limit,
            &self.store_write_held,
            &self.store_cache_bytes,
            &self.store_faults,
            &self.store_recovering,
        ]
    }

    /// Sets every figure from `stats`.
    fn set(&self, stats: &EngineStats, now_micros: i64) {
        let seconds = |micros: i64| micros as f64 / 1e6;
        let delay = |watermark: i64| seconds(now_micros - watermark);
        for p in &stats.progress {
            let labels = [p.source.as_str(), p.target.as_str(), p.split.as_str()];
            self.committed_offset
                .with_label_values(&labels)
                .set(p.position);
            if let Some(end) = p.high_watermark {
                self.high_watermark.with_label_values(&labels).set(end);
            }
            if let Some(lag) = p.lag_messages {
                self.lag_messages.with_label_values(&labels).set(lag);
            }
            self.rate.with_label_values(&labels).set(p.rate);
            if let Some(lag) = p.lag_seconds {
                self.lag_seconds.with_label_values(&labels).set(lag);
            }
            if let Some(trend) = p.lag_trend {
                self.lag_trend.with_label_values(&labels).set(trend);
            }
            if let Some(watermark) = p.watermark {
                self.source_watermark
                    .with_label_values(&labels)
                    .set(seconds(watermark));
                self.source_watermark_delay
                    .with_label_values(&labels)
                    .set(delay(watermark));
            }
            self.idle.with_label_values(&labels).set(i64::from(p.idle));
            self.finished
                .with_label_values(&labels)
                .set(i64::from(p.finished));
            self.dead_letters
                .with_label_values(&labels)
                .inc_by(p.dead_letters);
        }
        let views: std::collections::BTreeSet<&str> =
            stats.views.iter().map(|v| v.name.as_str()).collect();
        // The engine lists each view's private readers of sources among its tables, under the
        // view's name; their figures are the view's.
        for t in stats
            .tables
            .iter()
            .filter(|t| !views.contains(t.name.as_str()))
        {
            let labels = [t.name.as_str()];
            self.table_rows_in
                .with_label_values(&labels)
                .inc_by(t.rows_in);
            self.table_rows_late
                .with_label_values(&labels)
                .inc_by(t.rows_late);
            if let Some(watermark) = t.watermark {
                self.table_watermark
                    .with_label_values(&labels)
                    .set(seconds(watermark));
                self.table_watermark_delay
                    .with_label_values(&labels)
                    .set(delay(watermark));
            }
        }
        for v in &stats.views {
            let labels = [v.name.as_str()];
            self.view_rows_in
                .with_label_values(&labels)
                .inc_by(v.rows_in);
            self.view_rows_late
                .with_label_values(&labels)
                .inc_by(v.rows_late);
            self.view_state_rows
                .with_label_values(&labels)
                .set(v.state_rows as i64);
            self.view_open_windows
                .with_label_values(&labels)
                .set(v.open_windows as i64);
            self.view_unbounded_state
                .with_label_values(&labels)
                .set(i64::from(v.unbounded_state));
            self.view_committed_epoch
                .with_label_values(&labels)
                .set(stats.epoch as i64);
            if !v.state_tables.is_empty() {
                let sum = |f: fn(&eddy_executor::state_table::StateTableStats) -> u64| {
                    v.state_tables.iter().map(f).sum::<u64>()
                };
                self.state_store_rows
                    .with_label_values(&labels)
                    .set(sum(|t| t.rows) as i64);
                self.state_store_bytes
                    .with_label_values(&labels)
                    .set(sum(|t| t.bytes) as i64);
                self.state_cache_bytes
                    .with_label_values(&labels)
                    .set(sum(|t| t.cache_bytes) as i64);
                self.state_lookups
                    .with_label_values(&[v.name.as_str(), "hit"])
                    .inc_by(sum(|t| t.hits));
                self.state_lookups
                    .with_label_values(&[v.name.as_str(), "miss"])
                    .inc_by(sum(|t| t.misses));
                self.state_rows_read
                    .with_label_values(&labels)
                    .inc_by(sum(|t| t.rows_read));
                self.state_writes_last_epoch
                    .with_label_values(&labels)
                    .set(sum(|t| t.writes_last_epoch) as i64);
            }
            for j in &v.joins {
                let join = j.join.to_string();
                let labels = [v.name.as_str(), join.as_str(), j.side, j.input.as_str()];
                self.join_rows.with_label_values(&labels).set(j.rows as i64);
                self.join_keys
                    .with_label_values(&labels)
                    .set(j.distinct_keys as i64);
                self.join_bytes
                    .with_label_values(&labels)
                    .set(j.bytes as i64);
                self.join_evicted
                    .with_label_values(&labels)
                    .inc_by(j.rows_evicted);
            }
        }
        self.committed_epoch.set(stats.epoch as i64);
        self.state_cache_limit
            .set(stats.state_cache.limit_bytes as i64);
        self.state_cache_used
            .set(stats.state_cache.used_bytes as i64);
        self.store_bytes.set(stats.store.disk_bytes as i64);
        self.store_write_buffer_bytes
            .set(stats.store.write_buffer_bytes as i64);
        self.store_write_buffer_limit
            .set(stats.write_buffer_hold.limit_bytes as i64);
        self.store_write_held
            .inc_by(stats.write_buffer_hold.held_seconds);
        self.store_cache_bytes.set(stats.store.cache_bytes as i64);
        self.store_faults.inc_by(stats.store.faults);
        self.store_recovering
            .set(i64::from(stats.store.fault.is_some()));
    }
}

/// Reads the engine's figures at each scrape, into metric vectors made for that scrape (so
/// that an object dropped since the last one disappears).
pub struct EngineCollector {
    engine: EngineHandle,
    /// The families' descriptions, for the registry's checks.
    descs: Vec<Desc>,
}

impl EngineCollector {
    pub fn new(engine: EngineHandle) -> prometheus::Result<Self> {
        let families = Families::new()?;
        let descs = families
            .collectors()
            .into_iter()
            .flat_map(|c| c.desc().into_iter().cloned())
            .collect();
        Ok(Self { engine, descs })
    }
}

impl Collector for EngineCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let stats = self.engine.stats();
        let now_micros = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        let Ok(families) = Families::new() else {
            // The same options built the registered descriptions: this cannot fail now.
            return Vec::new();
        };
        families.set(&stats, now_micros);
        families
            .collectors()
            .into_iter()
            .flat_map(|c| c.collect())
            .collect()
    }
}
