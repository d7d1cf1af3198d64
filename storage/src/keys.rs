//! Table ids and key layout: `table_id (u32, big-endian) ++ row key`, and which keyspace of the
//! store each table lives in.

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
/// Messages a sink's target refused for good (`eddy_catalog.sink_errors`).
pub const SINK_ERRORS_TABLE: TableId = 5;
/// The first id handed out to user objects; everything below is reserved.
pub const FIRST_USER_TABLE: TableId = 16;
/// Set in the id of an operator's state table: state churns (rewritten every epoch, evicted by
/// watermarks), so it lives in a keyspace of its own whose compactions never rewrite view rows.
pub const STATE_TABLE_FLAG: TableId = 1 << 31;

/// The keyspaces of the store. Each is an LSM tree of its own (its own memtables, files and
/// compactions); one epoch's writes to all of them commit in one atomic batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    /// The catalog and the meta table (counters, watermarks, source positions): small, read
    /// at every start.
    Catalog,
    /// Append-mostly logs with bounded retention: late rows, dead letters, view errors.
    Logs,
    /// What queries read: table rows, view rows, index entries.
    Rows,
    /// Operators' state.
    State,
}

impl Space {
    pub const ALL: [Space; 4] = [Space::Catalog, Space::Logs, Space::Rows, Space::State];

    /// The keyspace's name in the store.
    pub fn name(self) -> &'static str {
        match self {
            Space::Catalog => "catalog",
            Space::Logs => "logs",
            Space::Rows => "rows",
            Space::State => "state",
        }
    }
}

/// The keyspace `table`'s keys are kept in: a pure function of the id, so that reads and
/// writes of a table always meet in the same keyspace.
pub fn space_of(table: TableId) -> Space {
    match table {
        CATALOG_TABLE | META_TABLE => Space::Catalog,
        id if id < FIRST_USER_TABLE => Space::Logs,
        id if id & STATE_TABLE_FLAG != 0 => Space::State,
        _ => Space::Rows,
    }
}

/// The keyspace of a full store key (table prefix included).
pub fn space_of_key(key: &[u8]) -> Space {
    match key.first_chunk::<4>() {
        Some(prefix) => space_of(TableId::from_be_bytes(*prefix)),
        None => Space::Catalog,
    }
}

/// The id of state table `id` (an id from the same counter as every other table).
pub fn state_table_id(id: TableId) -> TableId {
    id | STATE_TABLE_FLAG
}

/// The longest full store key (table prefix included) the store takes (fjall's limit).
pub const MAX_KEY_BYTES: usize = u16::MAX as usize;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_routed_by_their_id() {
        assert_eq!(space_of(CATALOG_TABLE), Space::Catalog);
        assert_eq!(space_of(META_TABLE), Space::Catalog);
        assert_eq!(space_of(LATE_ROWS_TABLE), Space::Logs);
        assert_eq!(space_of(VIEW_ERRORS_TABLE), Space::Logs);
        assert_eq!(space_of(FIRST_USER_TABLE), Space::Rows);
        assert_eq!(space_of(state_table_id(FIRST_USER_TABLE + 1)), Space::State);
        assert_eq!(
            space_of_key(&table_key(state_table_id(40), b"k")),
            Space::State
        );
        assert_eq!(space_of_key(&meta_key("counters")), Space::Catalog);
    }
}
