//! Table ids and key layout: `table_id (u32, big-endian) ++ row key`.

/// Identifies one key range of the store: a user table, a view's result table, an operator's
/// state table, or a system table.
pub type TableId = u32;

/// Catalog entries, keyed by their creation sequence number.
pub const CATALOG_TABLE: TableId = 0;
/// Small named values: id counters, per-object progress (watermarks, row-id counters, counters).
pub const META_TABLE: TableId = 1;
/// Rows that arrived below their watermark (`eddy_catalog.late_rows`).
pub const LATE_ROWS_TABLE: TableId = 2;
/// Messages a source could not decode (`eddy_catalog.source_errors`).
pub const SOURCE_ERRORS_TABLE: TableId = 3;
/// Rows a view's expressions failed on (`eddy_catalog.view_errors`).
pub const VIEW_ERRORS_TABLE: TableId = 4;
/// The first id handed out to user objects; everything below is reserved.
pub const FIRST_USER_TABLE: TableId = 16;

/// The full store key of `row_key` in `table`.
pub fn table_key(table: TableId, row_key: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(4 + row_key.len());
    key.extend_from_slice(&table.to_be_bytes());
    key.extend_from_slice(row_key);
    key
}

/// The prefix shared by every key of `table`.
pub fn table_prefix(table: TableId) -> [u8; 4] {
    table.to_be_bytes()
}

/// The key of a named value in the meta table.
pub fn meta_key(name: &str) -> Vec<u8> {
    table_key(META_TABLE, name.as_bytes())
}
