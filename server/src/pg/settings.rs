//! The run-time parameters Postgres reports, and their values when a connection starts: what
//! `SHOW`, `current_setting()` and the startup's ParameterStatus messages give before a `SET`.

/// The Postgres version Eddy presents itself as (`server_version`, `version()`): a plain
/// `major.minor`, which psql and pg_dump 15 and later accept (pg_dump refuses a newer major).
pub const SERVER_VERSION: &str = "15.6";
/// `server_version_num` of [`SERVER_VERSION`].
pub const SERVER_VERSION_NUM: &str = "150006";

/// Settings and their values when a connection starts, lower-case names.
pub const DEFAULTS: &[(&str, &str)] = &[
    ("application_name", ""),
    ("bytea_output", "hex"),
    ("client_encoding", "UTF8"),
    ("client_min_messages", "notice"),
    ("datestyle", "ISO, YMD"),
    ("default_transaction_isolation", "read committed"),
    ("default_transaction_read_only", "off"),
    ("extra_float_digits", "1"),
    ("idle_in_transaction_session_timeout", "0"),
    ("integer_datetimes", "on"),
    ("intervalstyle", "postgres"),
    ("is_superuser", "on"),
    // No JIT compiler; asyncpg asks before it introspects array types.
    ("jit", "off"),
    ("lc_collate", "C"),
    ("lc_ctype", "C"),
    ("lc_messages", "C"),
    ("lc_monetary", "C"),
    ("lc_numeric", "C"),
    ("lc_time", "C"),
    ("lock_timeout", "0"),
    ("max_identifier_length", "63"),
    ("search_path", "\"$user\", public"),
    ("server_encoding", "UTF8"),
    ("server_version", SERVER_VERSION),
    ("server_version_num", SERVER_VERSION_NUM),
    ("standard_conforming_strings", "on"),
    ("statement_timeout", "0"),
    ("timezone", "Etc/UTC"),
    ("transaction_isolation", "read committed"),
    ("transaction_read_only", "off"),
];

/// A setting's value when a connection starts.
pub fn default_setting(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    DEFAULTS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}
