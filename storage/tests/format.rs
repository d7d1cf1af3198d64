//! A data directory written before the format marker existed opens, is migrated, and reads
//! back exactly what was committed.

use eddy_storage::format::{self, DataFormat, Prepared, FORMAT_FILE};
use eddy_storage::{EpochBatch, SledStore, Store};

const TABLE: u32 = 1000;

/// Writes rows the way Eddy did before the marker: the same store, then no marker file.
fn write_format_0(dir: &std::path::Path) {
    let store = SledStore::open(dir).unwrap();
    let mut batch = EpochBatch::default();
    batch.put(TABLE, b"a", b"first".to_vec());
    batch.put(TABLE, b"b", b"second".to_vec());
    batch.put_meta("counters", b"{\"epoch\":1}".to_vec());
    store.commit(batch).unwrap();
    drop(store);
    std::fs::remove_file(dir.join(FORMAT_FILE)).unwrap();
}

#[test]
fn a_format_0_directory_is_migrated_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    write_format_0(dir.path());
    assert!(!dir.path().join(FORMAT_FILE).exists());

    assert_eq!(
        format::prepare(dir.path()).unwrap(),
        Prepared::Migrated { from: 0 }
    );
    let marker: DataFormat =
        serde_json::from_slice(&std::fs::read(dir.path().join(FORMAT_FILE)).unwrap()).unwrap();
    assert_eq!(marker, DataFormat::current());

    let store = SledStore::open(dir.path()).unwrap();
    assert_eq!(
        store.scan_table(TABLE).unwrap(),
        vec![
            (b"a".to_vec(), b"first".to_vec()),
            (b"b".to_vec(), b"second".to_vec())
        ]
    );
}

#[test]
fn opening_the_store_migrates_too() {
    let dir = tempfile::tempdir().unwrap();
    write_format_0(dir.path());
    let store = SledStore::open(dir.path()).unwrap();
    assert_eq!(store.scan_table(TABLE).unwrap().len(), 2);
    assert!(dir.path().join(FORMAT_FILE).exists());
    drop(store);
    assert_eq!(format::prepare(dir.path()).unwrap(), Prepared::Current);
}

#[test]
fn a_newer_directory_is_refused_by_the_store() {
    let dir = tempfile::tempdir().unwrap();
    drop(SledStore::open(dir.path()).unwrap());
    let mut newer = DataFormat::current();
    newer.format_version += 1;
    std::fs::write(
        dir.path().join(FORMAT_FILE),
        serde_json::to_vec(&newer).unwrap(),
    )
    .unwrap();
    let error = SledStore::open(dir.path())
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains("reads formats up to"), "{error}");
}
