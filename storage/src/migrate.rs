//! Migration of a data directory written by an older Eddy (formats 0 and 1: sled) into the
//! current store.
//!
//! The rows are copied into a new fjall database in a staging folder, synced, and only then
//! moved into place; the old files are removed after the format marker says the new store is
//! the data. A crash at any point leaves either the old store (and a staging folder the next
//! start removes and writes again) or the new one: nothing is lost.

use std::path::Path;
use std::time::{Duration, Instant};

use fjall::PersistMode;

use crate::fjall_store::{Opened, STORE_FOLDER};
use crate::keys::space_of_key;
use crate::sled_legacy::{self, SledData};
use crate::{Result, StorageError};

/// Where the new store is written before it is moved into place.
const STAGING_FOLDER: &str = "store.migrating";
/// Bytes per write batch while copying.
const BATCH_BYTES: usize = 32 << 20;
/// How often progress is logged.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// What a migration copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    pub rows: u64,
    pub bytes: u64,
}

/// Copies the sled store in `dir` into a new store in `dir/store`, synced. The sled files stay.
pub(crate) fn sled_to_fjall(dir: &Path, cache_bytes: u64) -> Result<Copied> {
    let staging = dir.join(STAGING_FOLDER);
    if staging.exists() {
        tracing::info!(path = %staging.display(), "removing an unfinished migration");
        std::fs::remove_dir_all(&staging)?;
    }
    let target = dir.join(STORE_FOLDER);
    if target.exists() {
        // Moved into place before a crash, but the marker was never written: the sled files
        // are still the data.
        std::fs::remove_dir_all(&target)?;
    }
    let started = Instant::now();
    let old = SledData::open(dir)?;
    let total = old.len();
    tracing::info!(data_dir = %dir.display(), rows = total, "migrating the data directory from sled to the new store");
    let new = Opened::open(&staging, cache_bytes).map_err(fjall_error)?;
    let mut copied = Copied { rows: 0, bytes: 0 };
    let mut batch = new.db.batch();
    let mut batch_bytes = 0;
    let mut last_log = Instant::now();
    old.for_each(|key, value| {
        batch.insert(new.keyspace(space_of_key(key)), key, value);
        batch_bytes += key.len() + value.len();
        copied.rows += 1;
        copied.bytes += (key.len() + value.len()) as u64;
        if batch_bytes >= BATCH_BYTES {
            std::mem::replace(&mut batch, new.db.batch())
                .commit()
                .map_err(fjall_error)?;
            batch_bytes = 0;
            if last_log.elapsed() >= PROGRESS_EVERY {
                tracing::info!(
                    rows = copied.rows,
                    of = total,
                    mib = copied.bytes >> 20,
                    "migrating"
                );
                last_log = Instant::now();
            }
        }
        Ok(())
    })?;
    batch.commit().map_err(fjall_error)?;
    new.db.persist(PersistMode::SyncAll).map_err(fjall_error)?;
    drop(new);
    drop(old);
    std::fs::rename(&staging, &target)?;
    sync_dir(dir)?;
    tracing::info!(
        rows = copied.rows,
        mib = copied.bytes >> 20,
        seconds = started.elapsed().as_secs_f64(),
        "migrated the rows into the new store"
    );
    Ok(copied)
}

/// Removes what sled left in `dir` (once the marker says the new store holds the data).
pub(crate) fn remove_sled_files(dir: &Path) -> Result<()> {
    let mut removed = false;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if !name.to_str().is_some_and(sled_legacy::is_sled_file) {
            continue;
        }
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
        removed = true;
    }
    if removed {
        sync_dir(dir)?;
        tracing::info!(data_dir = %dir.display(), "removed the old store's files");
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

fn fjall_error(error: fjall::Error) -> StorageError {
    StorageError::Open(format!("migrating into the new store: {error:?}"))
}
