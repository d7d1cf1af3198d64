//! Figures the engine publishes after each commit, for `eddy_catalog`.

#[derive(Debug, Clone, Default)]
pub struct TableStats {
    pub name: String,
    pub rows_in: u64,
    pub rows_late: u64,
    /// Current watermark in microseconds, when the table has one.
    pub watermark: Option<i64>,
}

#[derive(Debug, Clone, Default)]
pub struct ViewStats {
    pub name: String,
    pub source: String,
    pub sql: String,
    pub emit_on_window_close: bool,
    pub state_rows: u64,
    pub open_windows: u64,
    /// Whether some operator's state grows with the number of keys, with no watermark to evict it.
    pub unbounded_state: bool,
}

#[derive(Debug, Clone, Default)]
pub struct EngineStats {
    pub epoch: u64,
    pub tables: Vec<TableStats>,
    pub views: Vec<ViewStats>,
    pub store_bytes: u64,
}
