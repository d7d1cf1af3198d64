//! Finding the real client programs the client tests drive (psql, python, java, node).
//!
//! `scripts/install-clients.sh` installs them into `$EDDY_TOOLS_DIR/clients`; `scripts/test.sh`
//! sets `EDDY_REQUIRE_CLIENTS=1`, so there a missing client fails the test instead of skipping.

#![allow(dead_code)]

use std::path::PathBuf;

/// A table with a primary key, a view over it and a source: what catalog browsing should list.
pub const SAMPLE_OBJECTS: &str =
    "CREATE TABLE readings (sensor INT PRIMARY KEY, value DOUBLE, ts TIMESTAMP);
     CREATE MATERIALIZED VIEW per_sensor AS
       SELECT sensor, count(*) AS n FROM readings GROUP BY sensor;
     CREATE SOURCE bid (auction BIGINT, price BIGINT, date_time TIMESTAMP)
       WITH (connector = 'nexmark', nexmark.table.type = 'bid',
             nexmark.event.rate = '10', nexmark.max.events = '10');";

/// Whether a missing client is a failure (set by scripts/test.sh) rather than a skip.
pub fn clients_required() -> bool {
    std::env::var("EDDY_REQUIRE_CLIENTS").is_ok_and(|v| v == "1")
}

/// Where scripts/install-clients.sh puts the Python environment, node modules and jars.
pub fn clients_dir() -> PathBuf {
    let tools = std::env::var_os("EDDY_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/eddy-tools")
        });
    tools.join("clients")
}

/// An executable found on PATH.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// `Some(path)` if it exists; otherwise fails (clients required) or says why it skips.
pub fn require(what: &str, path: Option<PathBuf>) -> Option<PathBuf> {
    match path {
        Some(path) if path.exists() => Some(path),
        _ if clients_required() => {
            panic!("{what} is missing: run scripts/install-clients.sh")
        }
        _ => {
            eprintln!("skipping: {what} is not installed (scripts/install-clients.sh installs it)");
            None
        }
    }
}

/// This crate's folder: cargo's value when it runs the test (the binary may have been built in
/// another checkout sharing the target directory), else the one compiled in.
pub fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// The folder of client scripts in this crate.
pub fn scripts_dir() -> PathBuf {
    manifest_dir().join("clients")
}
