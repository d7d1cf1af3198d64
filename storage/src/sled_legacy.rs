//! The store of formats 0 and 1 (sled), read once to migrate a data directory.
//!
//! Those formats kept every key in one sled tree, `eddy`, and the last epoch's writes as one
//! redo record in the tree `eddy-redo`: a crash between writing the record and applying it
//! left the record newer than the tree. Its writes are therefore read over the tree's.

use std::collections::BTreeMap;
use std::path::Path;

use crate::{Result, StorageError};

const TREE: &str = "eddy";
const REDO_TREE: &str = "eddy-redo";
const REDO_KEY: &[u8] = b"last-epoch";
/// sled's page cache while migrating: rows are read once, in order.
const CACHE_BYTES: u64 = 64 << 20;

/// The files and folders sled keeps in a data directory.
pub(crate) fn is_sled_file(name: &str) -> bool {
    matches!(name, "conf" | "db" | "blobs") || name.starts_with("snap.")
}

/// Whether sled's files are in `dir`.
pub(crate) fn holds_sled_store(dir: &Path) -> bool {
    dir.join("conf").is_file() && dir.join("db").is_file()
}

/// Opens the old files, waiting up to two seconds for sled's file lock: a handle dropped a
/// moment ago in this process may still hold it while its threads wind down.
fn open_when_unlocked(dir: &Path) -> Result<sled::Db> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let opened = sled::Config::new()
            .path(dir)
            .cache_capacity(CACHE_BYTES)
            .flush_every_ms(None)
            .open();
        match opened {
            Err(sled::Error::Io(error))
                if error.to_string().contains("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => return Ok(other?),
        }
    }
}

/// An old data directory's rows.
pub(crate) struct SledData {
    tree: sled::Tree,
    /// The redo record's writes (a delete is `None`).
    redo: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    _db: sled::Db,
}

impl SledData {
    pub(crate) fn open(dir: &Path) -> Result<Self> {
        let db = open_when_unlocked(dir)?;
        let tree = db.open_tree(TREE)?;
        let redo = match db.open_tree(REDO_TREE)?.get(REDO_KEY)? {
            Some(record) => decode_redo_record(&record)?,
            None => BTreeMap::new(),
        };
        Ok(Self {
            tree,
            redo,
            _db: db,
        })
    }

    /// Calls `each` with every committed (key, value), the redo record's writes over the tree's.
    pub(crate) fn for_each(&self, mut each: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<()> {
        for entry in self.tree.iter() {
            let (key, value) = entry?;
            if !self.redo.contains_key(key.as_ref()) {
                each(&key, &value)?;
            }
        }
        for (key, value) in &self.redo {
            if let Some(value) = value {
                each(key, value)?;
            }
        }
        Ok(())
    }

    /// Rows in the tree (an estimate of the work, for progress).
    pub(crate) fn len(&self) -> usize {
        self.tree.len()
    }
}

/// Reads a redo record: per write the key's length (u32, little-endian) and bytes, a flag (1 a
/// put, 0 a delete), and for a put the value's length and bytes.
pub(crate) fn decode_redo_record(mut bytes: &[u8]) -> Result<BTreeMap<Vec<u8>, Option<Vec<u8>>>> {
    fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Result<&'a [u8]> {
        if bytes.len() < n {
            return Err(StorageError::Corrupt("truncated epoch redo record".into()));
        }
        let (head, rest) = bytes.split_at(n);
        *bytes = rest;
        Ok(head)
    }
    fn length(bytes: &mut &[u8]) -> Result<usize> {
        let raw = take(bytes, 4)?;
        Ok(u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize)
    }
    let mut writes = BTreeMap::new();
    while !bytes.is_empty() {
        let key_len = length(&mut bytes)?;
        let key = take(&mut bytes, key_len)?.to_vec();
        let value = match take(&mut bytes, 1)?[0] {
            0 => None,
            1 => {
                let value_len = length(&mut bytes)?;
                Some(take(&mut bytes, value_len)?.to_vec())
            }
            flag => {
                return Err(StorageError::Corrupt(format!(
                    "epoch redo record: unknown write flag {flag}"
                )))
            }
        };
        writes.insert(key, value);
    }
    Ok(writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A redo record as formats 0 and 1 wrote it.
    pub(crate) fn encode(writes: &[(&[u8], Option<&[u8]>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (key, value) in writes {
            out.extend_from_slice(&(key.len() as u32).to_le_bytes());
            out.extend_from_slice(key);
            match value {
                Some(value) => {
                    out.push(1);
                    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                    out.extend_from_slice(value);
                }
                None => out.push(0),
            }
        }
        out
    }

    #[test]
    fn the_redo_record_is_read_over_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = sled::Config::new()
                .path(dir.path())
                .flush_every_ms(None)
                .open()
                .unwrap();
            let tree = db.open_tree(TREE).unwrap();
            tree.insert(b"kept", b"old".to_vec()).unwrap();
            tree.insert(b"dropped", b"x".to_vec()).unwrap();
            tree.insert(b"other", b"y".to_vec()).unwrap();
            let record = encode(&[
                (b"kept", Some(b"new")),
                (b"dropped", None),
                (b"added", Some(b"z")),
            ]);
            db.open_tree(REDO_TREE)
                .unwrap()
                .insert(REDO_KEY, record)
                .unwrap();
            db.flush().unwrap();
        }
        let data = SledData::open(dir.path()).unwrap();
        let mut rows = BTreeMap::new();
        data.for_each(|k, v| {
            rows.insert(k.to_vec(), v.to_vec());
            Ok(())
        })
        .unwrap();
        let expected: BTreeMap<Vec<u8>, Vec<u8>> = [
            (&b"added"[..], &b"z"[..]),
            (b"kept", b"new"),
            (b"other", b"y"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
        assert_eq!(rows, expected);
    }

    #[test]
    fn a_truncated_record_is_refused() {
        let bytes = encode(&[(b"a", Some(b"value"))]);
        let error = decode_redo_record(&bytes[..bytes.len() - 2]).unwrap_err();
        assert!(error.to_string().contains("truncated"), "{error}");
    }
}
