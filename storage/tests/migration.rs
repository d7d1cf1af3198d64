//! Data directories written by older Eddy formats (sled: formats 0 and 1) are migrated into
//! the current store once, at open, and read back exactly what was committed; a migration cut
//! short by a crash is done again from the old files.

use std::path::Path;

use eddy_storage::format::{self, DataFormat, Prepared, FORMAT_FILE};
use eddy_storage::keys::{meta_key, state_table_id, table_key};
use eddy_storage::{FjallStore, Store};

const TABLE: u32 = 1000;
const CACHE: u64 = 8 << 20;

/// Writes rows the way formats 0 and 1 did: one sled tree of full keys; a format-1 directory
/// also has its marker.
fn write_sled_directory(dir: &Path, format_version: Option<u32>, rows: usize) {
    // No flusher thread: it would hold sled's file lock for a moment after the drop.
    let db = sled::Config::new()
        .path(dir)
        .flush_every_ms(None)
        .open()
        .unwrap();
    let tree = db.open_tree("eddy").unwrap();
    for i in 0..rows {
        tree.insert(
            table_key(TABLE, format!("row{i:06}").as_bytes()),
            format!("value {i}").into_bytes(),
        )
        .unwrap();
    }
    tree.insert(table_key(state_table_id(7), b"s"), b"state".to_vec())
        .unwrap();
    tree.insert(meta_key("counters"), b"{\"epoch\":1}".to_vec())
        .unwrap();
    db.flush().unwrap();
    drop(tree);
    drop(db);
    if let Some(version) = format_version {
        let marker = DataFormat {
            format_version: version,
            ..DataFormat::current()
        };
        std::fs::write(dir.join(FORMAT_FILE), serde_json::to_vec(&marker).unwrap()).unwrap();
    }
}

fn marker(dir: &Path) -> DataFormat {
    serde_json::from_slice(&std::fs::read(dir.join(FORMAT_FILE)).unwrap()).unwrap()
}

fn assert_migrated(dir: &Path, rows: usize) {
    assert_eq!(marker(dir), DataFormat::current());
    for old in ["conf", "db", "blobs", "store.migrating"] {
        assert!(!dir.join(old).exists(), "{old} is left");
    }
    let store = FjallStore::open(dir).unwrap();
    let table = store.scan_table(TABLE).unwrap();
    assert_eq!(table.len(), rows);
    assert_eq!(table[3], (b"row000003".to_vec(), b"value 3".to_vec()));
    assert_eq!(
        store.scan_table(state_table_id(7)).unwrap(),
        vec![(b"s".to_vec(), b"state".to_vec())]
    );
    assert_eq!(
        store.get(&meta_key("counters")).unwrap(),
        Some(b"{\"epoch\":1}".to_vec())
    );
}

#[test]
fn a_format_1_directory_is_migrated_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    write_sled_directory(dir.path(), Some(1), 5_000);
    match format::prepare(dir.path(), CACHE).unwrap() {
        Prepared::Migrated { from: 1, copied } => assert_eq!(copied.rows, 5_002),
        other => panic!("{other:?}"),
    }
    assert_migrated(dir.path(), 5_000);
    assert_eq!(
        format::prepare(dir.path(), CACHE).unwrap(),
        Prepared::Current
    );
}

#[test]
fn a_format_0_directory_is_migrated_when_the_store_opens() {
    let dir = tempfile::tempdir().unwrap();
    write_sled_directory(dir.path(), None, 10);
    drop(FjallStore::open(dir.path()).unwrap());
    assert_migrated(dir.path(), 10);
}

#[test]
fn a_migration_cut_short_is_done_again_from_the_old_files() {
    let dir = tempfile::tempdir().unwrap();
    write_sled_directory(dir.path(), Some(1), 100);
    // A crash while copying left a half-written staging store, and a crash after it was moved
    // into place (before the marker) left a store the marker does not vouch for.
    std::fs::create_dir_all(dir.path().join("store.migrating/junk")).unwrap();
    std::fs::create_dir_all(dir.path().join("store")).unwrap();
    std::fs::write(dir.path().join("store/partial"), b"not a store").unwrap();
    drop(FjallStore::open(dir.path()).unwrap());
    assert_migrated(dir.path(), 100);
}

#[test]
fn old_files_left_by_a_crash_after_the_marker_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    drop(FjallStore::open(dir.path()).unwrap());
    std::fs::write(dir.path().join("conf"), b"sled").unwrap();
    std::fs::write(dir.path().join("snap.0000000000001234"), b"sled").unwrap();
    assert_eq!(
        format::prepare(dir.path(), CACHE).unwrap(),
        Prepared::Current
    );
    assert!(!dir.path().join("conf").exists());
    assert!(!dir.path().join("snap.0000000000001234").exists());
}

#[test]
fn a_newer_directory_is_refused_by_the_store() {
    let dir = tempfile::tempdir().unwrap();
    drop(FjallStore::open(dir.path()).unwrap());
    let mut newer = DataFormat::current();
    newer.format_version += 1;
    std::fs::write(
        dir.path().join(FORMAT_FILE),
        serde_json::to_vec(&newer).unwrap(),
    )
    .unwrap();
    let error = FjallStore::open(dir.path())
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains("reads formats up to"), "{error}");
}
