//! The figures `eddy_catalog` and `/metrics` read, published after each epoch.

use super::*;

impl Engine {
    pub(super) fn publish_stats(&self) {
        let stats = self.stats_now();
        *self.stats.write().unwrap_or_else(|e| e.into_inner()) = stats;
    }

    /// The figures as they stand.
    pub(super) fn stats_now(&self) -> EngineStats {
        let table_stats = |name: &str, table: &TableRuntime| TableStats {
            name: name.to_string(),
            rows_in: table.rows_in(),
            rows_late: table.rows_late(),
            watermark: table.watermark().map(|w| w.value),
        };
        EngineStats {
            epoch: self.counters.epoch,
            tables: self
                .tables
                .values()
                .map(|(entry, table)| table_stats(&entry.name, table))
                .chain(self.views.values().flat_map(|v| {
                    v.readers
                        .iter()
                        .map(|r| table_stats(&v.entry.name, &r.table))
                }))
                .collect(),
            views: self
                .views
                .values()
                .map(|view| {
                    let graph = view.graph.as_ref();
                    // Lateness is judged where rows enter: the view's own readers of sources,
                    // or the stored tables it reads.
                    let (rows_in, rows_late) = view
                        .readers
                        .iter()
                        .map(|r| &r.table)
                        .chain(
                            self.tables
                                .iter()
                                .filter(|(name, _)| view.plan.reads(name))
                                .map(|(_, (_, table))| table),
                        )
                        .fold((0, 0), |(rows_in, late), t| {
                            (rows_in + t.rows_in(), late + t.rows_late())
                        });
                    ViewStats {
                        name: view.entry.name.clone(),
                        rows_in,
                        rows_late,
                        source: view.plan.input_names().join(", "),
                        sql: view.entry.sql.clone(),
                        emit_on_window_close: view.plan.emit_on_window_close,
                        state_rows: graph.map_or(0, |g| g.state_rows() as u64),
                        open_windows: graph.map_or(0, |g| g.open_windows() as u64),
                        unbounded_state: view.plan.has_unbounded_state(),
                        joins: graph.map_or_else(Vec::new, Graph::join_state),
                        rows_failed: graph.map_or(0, Graph::rows_failed),
                        state_bytes: graph.map_or(0, |g| g.state_bytes() as u64),
                        state_tables: graph.map_or_else(Vec::new, Graph::state_tables),
                        failed: view.entry.failed.clone(),
                        workers: view.entry.workers.unwrap_or(1),
                    }
                })
                .collect(),
            sources: self
                .sources
                .values()
                .map(|(entry, def)| crate::stats::SourceStats {
                    name: entry.name.clone(),
                    connector: def.spec.connector.clone(),
                    sql: entry.sql.clone(),
                })
                .collect(),
            progress: self.source_progress(),
            sinks: self.sink_stats(),
            // Read by [`EngineHandle::stats`] when asked for.
            store: Default::default(),
            state_cache: self.state_cache.stats(),
            // Read by [`EngineHandle::stats`] when asked for.
            write_buffer_hold: Default::default(),
        }
    }
}
