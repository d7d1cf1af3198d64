//! EXPLAIN CREATE MATERIALIZED VIEW over a folder of cases, each a snapshot.
//!
//! A case is `tests/explain/NAME.sql`: statements that set up tables and views, then one
//! `EXPLAIN CREATE MATERIALIZED VIEW`. Its plan is compared with `snapshots/explain__NAME.snap`
//! (`cargo insta review` after an intended change).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::AsArray;
use eddy_executor::EngineHandle;
use eddy_server::database::Outcome;
use eddy_storage::{MemStore, Store};

async fn explain(sql: &str) -> String {
    let store: Arc<dyn Store> = Arc::new(MemStore::default());
    let engine = EngineHandle::start(store.clone(), Duration::from_millis(50)).unwrap();
    let db = eddy_server::context::open_database(store, engine.clone())
        .await
        .unwrap();
    let outcomes = db.execute_sql(sql).await.unwrap();
    engine.shutdown().await.unwrap();
    let Some(Outcome::Rows { batches, .. }) = outcomes.into_iter().last() else {
        panic!("the last statement of a case must be an EXPLAIN");
    };
    let mut lines = Vec::new();
    for batch in batches {
        lines.extend(
            batch
                .column(0)
                .as_string::<i32>()
                .iter()
                .map(|l| l.unwrap_or_default().to_string()),
        );
    }
    lines.join("\n")
}

#[tokio::test]
async fn explain_cases() {
    let dir = manifest_dir().join("tests/explain");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 5,
        "explain cases missing in {}",
        dir.display()
    );
    for case in cases {
        let sql = std::fs::read_to_string(&case).unwrap();
        let name = case.file_stem().unwrap().to_string_lossy().to_string();
        let plan = explain(&sql).await;
        insta::with_settings!({ description => sql.trim(), omit_expression => true }, {
            insta::assert_snapshot!(name, plan);
        });
    }
}

/// This crate's folder: cargo's value when it runs the test (the binary may have been built in
/// another checkout sharing the target directory), else the one compiled in.
fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}
