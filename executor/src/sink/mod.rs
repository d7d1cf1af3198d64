//! Sinks: a table's or materialized view's changes, written outside Eddy exactly once.
//!
//! Each epoch's changes to a sink's input are encoded into messages and written into the
//! sink's **log** (a table of the store) in the same atomic commit as the epoch; a sender
//! thread of the sink's own ships the log to its target after the commit, never on the
//! engine's thread, and the engine trims what was delivered. After a crash the sender finds
//! where its target stands and resumes right after it, so every change arrives once.
//!
//! Modules in data-flow order:
//!
//! - this file: [`SinkSpec`], a `CREATE SINK` checked against its input.
//! - [`encode`]: an epoch's changelog chunks → messages (key, value), per format.
//! - [`log`]: the sink log in the store: records, keys, the epochs it holds.
//! - [`status`]: what the engine, the sender and the catalog share about a sink.
//! - [`kafka`]: the Kafka sender (idempotent producer, resume from each partition's tail).
//! - [`file`]: the file sender (Parquet or JSON lines, one file per range of epochs).

use std::collections::BTreeMap;

use datafusion::arrow::datatypes::SchemaRef;
use eddy_planner::statement::SinkDef;

use crate::{ExecError, Result};

pub mod encode;
pub mod file;
pub mod kafka;
pub mod log;
pub mod status;

pub use encode::{SinkEncoder, SinkMessage};
pub use status::{SinkShared, SinkStats};

/// The sink log holds at most this many bytes not yet delivered, by default; past it the
/// sink's inputs are held back (`sink.log.max.bytes`).
pub const DEFAULT_LOG_MAX_BYTES: u64 = 256 << 20;

/// How each change becomes a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkFormat {
    /// Inserts only: each new row is a message (the input must be append-only, or
    /// `force_append_only` drops its deletes and sends updates' new rows).
    Plain,
    /// Keyed by the row's key: the row as the value, a delete as a tombstone (null value).
    Upsert,
    /// Debezium's envelope: `{before, after, op, ts_ms, source}`.
    Debezium,
}

impl SinkFormat {
    pub fn name(self) -> &'static str {
        match self {
            SinkFormat::Plain => "PLAIN",
            SinkFormat::Upsert => "UPSERT",
            SinkFormat::Debezium => "DEBEZIUM",
        }
    }
}

/// How a message's key and value are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkEncode {
    Json,
    /// Parquet files (file sinks).
    Parquet,
}

impl SinkEncode {
    pub fn name(self) -> &'static str {
        match self {
            SinkEncode::Json => "JSON",
            SinkEncode::Parquet => "PARQUET",
        }
    }
}

/// What the input of a sink is, as far as the sink cares.
#[derive(Debug, Clone)]
pub struct SinkInput {
    /// The table's or view's visible columns (with their fields' markings: `json` columns).
    pub schema: SchemaRef,
    /// The visible columns its key is made of, when it is made of visible columns.
    pub key_columns: Option<Vec<usize>>,
    pub append_only: bool,
}

/// A `CREATE SINK`, checked: where it writes, how, and the key of its messages.
#[derive(Debug, Clone)]
pub struct SinkSpec {
    pub name: String,
    /// The table or materialized view it reads.
    pub input: String,
    /// `kafka` or `file`.
    pub connector: String,
    pub format: SinkFormat,
    pub encode: SinkEncode,
    /// `WITH (...)`: the connector's options (`topic`, `properties.*`).
    pub options: BTreeMap<String, String>,
    /// The input's visible columns, which every message carries.
    pub schema: SchemaRef,
    /// The columns of the message key (none: messages have no key).
    pub key_columns: Vec<usize>,
    pub force_append_only: bool,
    /// Whether the rows the input holds at creation are written first.
    pub snapshot: bool,
    /// Bytes of log not yet delivered past which the inputs are held back.
    pub log_max_bytes: u64,
}

/// Options every sink takes, besides its connector's.
const COMMON_OPTIONS: &[&str] = &[
    "connector",
    "primary_key",
    "force_append_only",
    "snapshot",
    "sink.log.max.bytes",
];

/// Each connector's own options (`properties.*` too, for Kafka).
fn connector_options(connector: &str) -> Option<&'static [&'static str]> {
    match connector {
        "kafka" => Some(&[
            "topic",
            "properties.bootstrap.server",
            "properties.bootstrap.servers",
        ]),
        "file" => Some(&["path", "file.interval"]),
        _ => None,
    }
}

impl SinkSpec {
    /// Checks `def` against its input: the connector and its options, the format and the
    /// input's shape, the message key.
    pub fn new(def: &SinkDef, input: &SinkInput) -> Result<Self> {
        let connector = def.options.get("connector").cloned().unwrap_or_default();
        let known = connector_options(&connector).ok_or_else(|| {
            ExecError::NotSupported(format!(
                "sink connector '{connector}' (supported: kafka, file)"
            ))
        })?;
        let mut options = def.options.clone();
        for (key, value) in &def.encode_options {
            options.entry(key.clone()).or_insert_with(|| value.clone());
        }
        for key in options.keys() {
            let allowed = COMMON_OPTIONS.contains(&key.as_str())
                || known.contains(&key.as_str())
                || (connector == "kafka" && key.starts_with("properties."));
            if !allowed {
                let mut listed: Vec<&str> = COMMON_OPTIONS.to_vec();
                listed.extend(known.iter().filter(|k| !k.ends_with(".servers")));
                if connector == "kafka" {
                    listed.push("properties.*");
                }
                return Err(ExecError::InvalidOption(format!(
                    "unrecognized option \"{key}\" for a {connector} sink (known: {})",
                    listed.join(", ")
                )));
            }
        }
        if connector == "kafka" {
            kafka::KafkaTarget::from_options(&def.name, &options)?;
        }
        let format = match def.format.as_str() {
            "PLAIN" => SinkFormat::Plain,
            "UPSERT" => SinkFormat::Upsert,
            "DEBEZIUM" => SinkFormat::Debezium,
            other => {
                return Err(ExecError::NotSupported(format!(
                    "FORMAT {other} for a sink (supported: PLAIN, UPSERT, DEBEZIUM)"
                )))
            }
        };
        let encode = match (def.encode.as_str(), connector.as_str()) {
            ("JSON", _) => SinkEncode::Json,
            ("PARQUET", "file") => SinkEncode::Parquet,
            (other, "file") => {
                return Err(ExecError::NotSupported(format!(
                    "ENCODE {other} for a file sink (supported: PARQUET, JSON)"
                )))
            }
            (other, _) => {
                return Err(ExecError::NotSupported(format!(
                    "ENCODE {other} for a {connector} sink (supported: JSON)"
                )))
            }
        };
        if connector == "file" && format != SinkFormat::Plain {
            return Err(ExecError::NotSupported(format!(
                "FORMAT {} for a file sink: files are written append-only (FORMAT PLAIN)",
                format.name()
            )));
        }
        let flag = |key: &str, default: bool| -> Result<bool> {
            match options.get(key).map(|v| v.to_ascii_lowercase()) {
                None => Ok(default),
                Some(v) if v == "true" => Ok(true),
                Some(v) if v == "false" => Ok(false),
                Some(v) => Err(ExecError::InvalidOption(format!(
                    "option {key} = '{v}': expected 'true' or 'false'"
                ))),
            }
        };
        let force_append_only = flag("force_append_only", false)?;
        let snapshot = flag("snapshot", true)?;
        if format != SinkFormat::Plain && force_append_only {
            return Err(ExecError::InvalidOption(format!(
                "force_append_only applies to FORMAT PLAIN only (FORMAT {} writes deletes)",
                format.name()
            )));
        }
        if format == SinkFormat::Plain && !input.append_only && !force_append_only {
            return Err(ExecError::NotSupported(format!(
                "FORMAT PLAIN needs an append-only input, and \"{}\" has updates or deletes: use FORMAT UPSERT or DEBEZIUM, or force_append_only = 'true' to drop deletes and write updates as new rows",
                def.from
            )));
        }
        let log_max_bytes = match options.get("sink.log.max.bytes") {
            None => DEFAULT_LOG_MAX_BYTES,
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    ExecError::InvalidOption(format!(
                        "sink.log.max.bytes = '{v}': expected a positive number of bytes"
                    ))
                })?,
        };
        let key_columns = match options.get("primary_key") {
            Some(list) => list
                .split(',')
                .map(|name| {
                    let name = name.trim();
                    input.schema.index_of(name).map_err(|_| {
                        ExecError::UndefinedColumn(format!(
                            "primary_key names column \"{name}\", which \"{}\" does not have",
                            def.from
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()?,
            None if format == SinkFormat::Plain => Vec::new(),
            None => input.key_columns.clone().ok_or_else(|| {
                ExecError::InvalidDefinition(format!(
                    "FORMAT {} needs a key: \"{}\" has no key among its columns, so name one with primary_key = 'column, ...'",
                    format.name(),
                    def.from
                ))
            })?,
        };
        for field in input.schema.fields() {
            crate::formats::json::check_type(field)?;
        }
        let spec = Self {
            name: def.name.clone(),
            input: def.from.clone(),
            connector,
            format,
            encode,
            options,
            schema: input.schema.clone(),
            key_columns,
            force_append_only,
            snapshot,
            log_max_bytes,
        };
        if spec.connector == "file" {
            file::FileTarget::new(&spec)?;
        }
        Ok(spec)
    }

    pub fn option(&self, key: &str) -> Option<&str> {
        self.options.get(key).map(String::as_str)
    }

    /// The names of the key columns, for EXPLAIN and the catalog.
    pub fn key_names(&self) -> Vec<String> {
        self.key_columns
            .iter()
            .map(|&i| self.schema.field(i).name().clone())
            .collect()
    }

    /// Where the sink writes, for EXPLAIN and the catalog: `kafka topic 't' at host:9092`.
    pub fn target(&self) -> String {
        match self.connector.as_str() {
            "kafka" => format!(
                "topic '{}' at {}",
                self.option("topic").unwrap_or_default(),
                kafka::bootstrap(self).unwrap_or_default()
            ),
            "file" => format!("directory '{}'", self.option("path").unwrap_or_default()),
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests;
