//! The data directory's format: which layout and encodings wrote it.
//!
//! `eddy-format.json` in the data directory says which storage format wrote the data (the key
//! layout, the epoch redo record, the catalog) and which row encoding (Arrow's row format,
//! which is not guaranteed stable across Arrow major versions, so the major is recorded too).
//! It is checked before the store opens: a directory from an older format is migrated when a
//! migration exists and refused otherwise, a directory from a newer Eddy or another Arrow
//! major is refused, each with a message saying what to do. Nothing is ever read in a format
//! it was not written in.
//!
//! Format history:
//! - 0: Eddy before the marker: the layout of format 1, rows in Arrow 59's row format (the
//!   only Arrow Eddy used then).
//! - 1: the marker, with the layout of format 0: one sled tree of `table_id ++ key`, and the
//!   last epoch's writes in a redo record.
//! - 2: a fjall database in the folder `store`: the same keys and values, in keyspaces by the
//!   kind of table (see `keys::Space`); fjall's journal is the redo log. Formats 0 and 1 are
//!   migrated into it (see `migrate`).

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{sled_legacy, Result, StorageError};

/// The marker's file name, in the data directory.
pub const FORMAT_FILE: &str = "eddy-format.json";
/// The storage format this Eddy writes. Bump it (and add a migration or a refusal below) with
/// any change to how keys, values, the redo record or the catalog are encoded.
pub const FORMAT_VERSION: u32 = 2;
/// How rows are encoded into keys and values.
pub const ROW_ENCODING: &str = "arrow-row";
/// The Arrow major version whose row format encodes the rows (checked against Cargo.lock by a
/// test, so an Arrow upgrade cannot change it unnoticed).
pub const ARROW_MAJOR: u32 = 59;
/// Arrow's major version when the data directories had no marker (format 0).
const FORMAT_0_ARROW_MAJOR: u32 = 59;

/// What the marker records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataFormat {
    pub format_version: u32,
    pub row_encoding: String,
    pub arrow_major: u32,
    /// The Eddy version that created the directory or last migrated it.
    pub written_by: String,
}

impl DataFormat {
    /// The format this Eddy writes.
    pub fn current() -> Self {
        Self {
            format_version: FORMAT_VERSION,
            row_encoding: ROW_ENCODING.to_string(),
            arrow_major: ARROW_MAJOR,
            written_by: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// What [`prepare`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prepared {
    /// A new (or empty) directory, now marked with the current format.
    Created,
    /// The directory is in the current format.
    Current,
    /// The directory was migrated from this format to the current one.
    Migrated {
        from: u32,
        copied: crate::migrate::Copied,
    },
}

/// Checks (and if needed migrates or creates) the format of the data directory `dir`, before
/// the store is opened in it. A migration opens the new store with a cache of `cache_bytes`.
pub fn prepare(dir: &Path, cache_bytes: u64) -> Result<Prepared> {
    std::fs::create_dir_all(dir)?;
    let marker = dir.join(FORMAT_FILE);
    let found = match std::fs::read(&marker) {
        Ok(bytes) => Some(serde_json::from_slice::<DataFormat>(&bytes).map_err(|e| {
            StorageError::Format(format!(
                "{} is unreadable ({e}): it should say which Eddy format wrote the data. \
                 Restore the file (or the whole directory) from a backup; do not delete it, \
                 Eddy would then refuse the directory as not its own.",
                marker.display()
            ))
        })?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    match found {
        Some(format) if format.format_version >= FORMAT_VERSION => {
            check(dir, &format)?;
            // A crash after the marker of a migration, before the old files were removed.
            crate::migrate::remove_sled_files(dir)?;
            Ok(Prepared::Current)
        }
        Some(format) => {
            check_encoding(
                dir,
                &format.row_encoding,
                format.arrow_major,
                format.format_version,
            )?;
            migrate(dir, format.format_version, cache_bytes)
        }
        None if sled_legacy::holds_sled_store(dir) => {
            // Format 0: the layout of format 1, unmarked. Its rows were encoded by Arrow 59.
            check_encoding(dir, ROW_ENCODING, FORMAT_0_ARROW_MAJOR, 0)?;
            migrate(dir, 0, cache_bytes)
        }
        None if is_empty(dir)? => {
            write_marker(dir, &DataFormat::current())?;
            Ok(Prepared::Created)
        }
        None => Err(StorageError::Format(format!(
            "{} holds files but no Eddy data (no {FORMAT_FILE}, no store): give --data-dir \
             a new or empty directory, or the directory of an existing Eddy.",
            dir.display()
        ))),
    }
}

/// Copies a sled store (format `from`) into the current store, marks the directory, then
/// removes the old files: until the marker is written, they are the data.
fn migrate(dir: &Path, from: u32, cache_bytes: u64) -> Result<Prepared> {
    let copied = crate::migrate::sled_to_fjall(dir, cache_bytes)?;
    write_marker(dir, &DataFormat::current())?;
    crate::migrate::remove_sled_files(dir)?;
    Ok(Prepared::Migrated { from, copied })
}

/// [`prepare`], logging a migration or a new directory.
pub fn prepare_logged(dir: &Path, cache_bytes: u64) -> Result<Prepared> {
    let prepared = prepare(dir, cache_bytes)?;
    match prepared {
        Prepared::Migrated { from, copied } => tracing::info!(
            data_dir = %dir.display(), from, to = FORMAT_VERSION, rows = copied.rows,
            "migrated the data directory's storage format"
        ),
        Prepared::Created => tracing::info!(
            data_dir = %dir.display(), format = FORMAT_VERSION, arrow = ARROW_MAJOR,
            "new data directory"
        ),
        Prepared::Current => {}
    }
    Ok(prepared)
}

fn check(dir: &Path, format: &DataFormat) -> Result<()> {
    if format.format_version > FORMAT_VERSION {
        return Err(StorageError::Format(format!(
            "{} was written by Eddy {} in storage format {}; this Eddy ({}) reads formats up to \
             {FORMAT_VERSION}. Run Eddy {} or newer on it; this Eddy has not changed it.",
            dir.display(),
            format.written_by,
            format.format_version,
            env!("CARGO_PKG_VERSION"),
            format.written_by,
        )));
    }
    check_encoding(
        dir,
        &format.row_encoding,
        format.arrow_major,
        format.format_version,
    )
}

fn check_encoding(dir: &Path, encoding: &str, arrow_major: u32, version: u32) -> Result<()> {
    if encoding == ROW_ENCODING && arrow_major == ARROW_MAJOR {
        return Ok(());
    }
    Err(StorageError::Format(format!(
        "{} holds rows encoded as {encoding} by Arrow {arrow_major} (storage format {version}); \
         this Eddy ({}) encodes {ROW_ENCODING} with Arrow {ARROW_MAJOR}, and Arrow's row format \
         may differ between major versions, so it will not read them. Run the Eddy that wrote \
         the directory, or start this one on a new directory and re-create your tables, sources \
         and views there (their SQL is in eddy_catalog on the old server).",
        dir.display(),
        env!("CARGO_PKG_VERSION"),
    )))
}

fn is_empty(dir: &Path) -> Result<bool> {
    Ok(std::fs::read_dir(dir)?.next().is_none())
}

/// Writes the marker atomically: a whole file or the old one, never half of one.
fn write_marker(dir: &Path, format: &DataFormat) -> Result<()> {
    let partial = dir.join(format!("{FORMAT_FILE}.partial"));
    let mut file = std::fs::File::create(&partial)?;
    file.write_all(&serde_json::to_vec_pretty(format)?)?;
    file.sync_all()?;
    std::fs::rename(&partial, dir.join(FORMAT_FILE))?;
    // The rename is durable once the directory is.
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CACHE: u64 = 8 << 20;

    #[test]
    fn the_recorded_arrow_major_is_the_one_built_with() {
        let lock = include_str!("../../Cargo.lock");
        let version = lock
            .split("[[package]]")
            .find_map(|package| {
                let mut lines = package.lines().map(str::trim);
                lines.find(|l| *l == "name = \"arrow\"")?;
                lines.find_map(|l| l.strip_prefix("version = \""))
            })
            .expect("arrow is in Cargo.lock");
        let major: u32 = version.split('.').next().unwrap().parse().unwrap();
        assert_eq!(
            major, ARROW_MAJOR,
            "Arrow's major changed: its row format may have too. Bump FORMAT_VERSION and \
             ARROW_MAJOR, and migrate or refuse directories written with Arrow {ARROW_MAJOR}."
        );
    }

    fn marker(dir: &Path) -> DataFormat {
        serde_json::from_slice(&std::fs::read(dir.join(FORMAT_FILE)).unwrap()).unwrap()
    }

    #[test]
    fn a_new_directory_is_marked() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        assert_eq!(prepare(&data, CACHE).unwrap(), Prepared::Created);
        assert_eq!(marker(&data), DataFormat::current());
        assert_eq!(prepare(&data, CACHE).unwrap(), Prepared::Current);
    }

    #[test]
    fn a_newer_format_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let newer = DataFormat {
            format_version: FORMAT_VERSION + 1,
            written_by: "9.0.0".into(),
            ..DataFormat::current()
        };
        write_marker(dir.path(), &newer).unwrap();
        let error = prepare(dir.path(), CACHE).unwrap_err().to_string();
        assert!(
            error.contains("written by Eddy 9.0.0 in storage format 3"),
            "{error}"
        );
        assert!(error.contains("Run Eddy 9.0.0 or newer"), "{error}");
        assert_eq!(marker(dir.path()), newer);
    }

    #[test]
    fn another_arrow_major_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let older = DataFormat {
            arrow_major: ARROW_MAJOR - 1,
            ..DataFormat::current()
        };
        write_marker(dir.path(), &older).unwrap();
        let error = prepare(dir.path(), CACHE).unwrap_err().to_string();
        assert!(
            error.contains(&format!("by Arrow {}", ARROW_MAJOR - 1)),
            "{error}"
        );
        assert!(error.contains("re-create your tables"), "{error}");
    }

    #[test]
    fn an_unreadable_marker_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FORMAT_FILE), b"{not json").unwrap();
        let error = prepare(dir.path(), CACHE).unwrap_err().to_string();
        assert!(error.contains("is unreadable"), "{error}");
    }

    #[test]
    fn a_directory_of_other_files_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
        let error = prepare(dir.path(), CACHE).unwrap_err().to_string();
        assert!(error.contains("holds files but no Eddy data"), "{error}");
        assert!(!dir.path().join(FORMAT_FILE).exists());
    }
}
