//! A bug in one view's operator (a panic) fails that statement only: the engine abandons the
//! epoch, reloads the last commit and goes on, and the half-made view does not come back to
//! fail later writes to its inputs. Debug builds can inject the panic by view name.

use eddy_sqllogictest::EddyProcess;

async fn count(client: &tokio_postgres::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0)
}

#[tokio::test]
async fn a_view_whose_operator_panics_leaves_its_inputs_and_other_views_working() {
    let mut eddy = EddyProcess::start_fresh_with(|config| {
        config
            .env
            .push(("EDDY_TEST_PANIC_IN_VIEW".into(), "broken".into()));
    })
    .await
    .unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(
            "CREATE TABLE t (x INT);
             INSERT INTO t VALUES (1), (2);
             CREATE MATERIALIZED VIEW counted AS SELECT count(*) AS n FROM t;",
        )
        .await
        .unwrap();
    let error = client
        .batch_execute("CREATE MATERIALIZED VIEW broken AS SELECT x + 1 AS y FROM t")
        .await
        .unwrap_err();
    let db_error = error.as_db_error().expect("an error from the server");
    assert_eq!(db_error.code().code(), "XX000", "{db_error:?}");
    assert!(
        db_error.message().contains("internal error"),
        "{db_error:?}"
    );

    // The inputs take writes, the other view follows them, the broken one is gone.
    client
        .batch_execute("INSERT INTO t VALUES (3)")
        .await
        .unwrap();
    assert_eq!(count(&client, "SELECT n FROM counted").await, 3);
    let missing = client.query("SELECT * FROM broken", &[]).await.unwrap_err();
    assert_eq!(missing.code().unwrap().code(), "42P01", "{missing:?}");
    client
        .batch_execute("CREATE MATERIALIZED VIEW fixed AS SELECT x + 1 AS y FROM t")
        .await
        .unwrap();
    assert_eq!(count(&client, "SELECT count(*) FROM fixed").await, 3);

    // Nothing of it was committed either: a restart brings back what worked.
    drop(client);
    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute("INSERT INTO t VALUES (4)")
        .await
        .unwrap();
    assert_eq!(count(&client, "SELECT n FROM counted").await, 4);
    assert_eq!(count(&client, "SELECT count(*) FROM fixed").await, 4);
    assert!(client.query("SELECT * FROM broken", &[]).await.is_err());
}

async fn error_of(client: &tokio_postgres::Client, sql: &str) -> tokio_postgres::error::DbError {
    let error = client.query(sql, &[]).await.unwrap_err();
    error
        .as_db_error()
        .expect("an error from the server")
        .clone()
}

async fn status(client: &tokio_postgres::Client, view: &str) -> (String, Option<String>) {
    let row = client
        .query_one(
            "SELECT status, error FROM eddy_catalog.materialized_views WHERE name = $1",
            &[&view],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// `view` is failed, and an INSERT into `t` still reaches the count `counted` reads (at least
/// the four rows the restart tests start with).
async fn failed_while_others_go_on(client: &tokio_postgres::Client, view: &str, counted: &str) {
    let (view_status, reason) = status(client, view).await;
    assert_eq!(view_status, "failed", "{reason:?}");
    client
        .batch_execute("INSERT INTO t VALUES (3)")
        .await
        .unwrap();
    assert!(count(client, counted).await >= 4);
}

#[tokio::test]
async fn a_view_whose_operator_panics_on_data_fails_alone_and_stays_failed() {
    let mut eddy = EddyProcess::start_fresh_with(|config| {
        config
            .env
            .push(("EDDY_TEST_PANIC_ON_PUSH".into(), "broken".into()));
    })
    .await
    .unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(
            "CREATE TABLE t (x INT);
             CREATE MATERIALIZED VIEW counted AS SELECT count(*) AS n FROM t;
             CREATE MATERIALIZED VIEW broken AS SELECT x + 1 AS y FROM t;",
        )
        .await
        .unwrap();
    // The write is taken: only the view that panicked on it stops.
    client
        .batch_execute("INSERT INTO t VALUES (1), (2)")
        .await
        .unwrap();
    assert_eq!(count(&client, "SELECT n FROM counted").await, 2);
    let read = error_of(&client, "SELECT * FROM broken").await;
    assert_eq!(read.code().code(), "XX000", "{read:?}");
    assert!(
        read.message().contains("\"broken\" failed")
            && read.message().contains("a fault injected into view broken"),
        "{read:?}"
    );
    let (state, error) = status(&client, "broken").await;
    assert_eq!(state, "failed");
    assert!(error.unwrap().contains("a fault injected"));
    assert_eq!(status(&client, "counted").await.0, "running");

    // A restart does not bring the failure back round: the view stays failed, the rest runs.
    drop(client);
    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute("INSERT INTO t VALUES (3)")
        .await
        .unwrap();
    assert_eq!(count(&client, "SELECT n FROM counted").await, 3);
    assert_eq!(status(&client, "broken").await.0, "failed");
    let refused = error_of(
        &client,
        "CREATE MATERIALIZED VIEW over_broken AS SELECT * FROM broken",
    )
    .await;
    assert!(
        refused.message().contains("no longer maintained"),
        "{refused:?}"
    );
    client
        .batch_execute("DROP MATERIALIZED VIEW broken")
        .await
        .unwrap();
    assert!(
        error_of(&client, "SELECT * FROM broken")
            .await
            .code()
            .code()
            == "42P01"
    );
}

#[tokio::test]
async fn a_view_past_its_state_budget_fails_alone_with_53200() {
    let mut eddy = EddyProcess::start_fresh_with(|config| {
        config
            .extra_args
            .extend(["--view-state-memory-limit".into(), "1MiB".into()]);
    })
    .await
    .unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(
            "CREATE TABLE t (k BIGINT, v BIGINT);
             CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n FROM t;
             CREATE MATERIALIZED VIEW per_key AS SELECT k, count(*) AS n FROM t GROUP BY k;
             CREATE MATERIALIZED VIEW per_bucket AS SELECT k % 10 AS b, count(*) AS n FROM t GROUP BY k % 10;
             INSERT INTO t SELECT value, value * 2 FROM generate_series(1, 50000);
             FLUSH;",
        )
        .await
        .unwrap();
    let read = error_of(&client, "SELECT * FROM per_key").await;
    assert_eq!(read.code().code(), "53200", "{read:?}");
    assert!(
        read.message().contains("--view-state-memory-limit")
            && read.message().contains("DROP MATERIALIZED VIEW per_key"),
        "{read:?}"
    );
    // The others hold few groups: they keep up.
    client
        .batch_execute("INSERT INTO t VALUES (1, 1)")
        .await
        .unwrap();
    assert_eq!(count(&client, "SELECT n FROM total").await, 50_001);
    assert_eq!(
        count(&client, "SELECT sum(n)::BIGINT FROM per_bucket").await,
        50_001
    );
    let bytes: i64 = client
        .query_one(
            "SELECT state_bytes FROM eddy_catalog.materialized_views WHERE name = 'per_bucket'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        bytes > 0 && bytes < 1 << 20,
        "per_bucket holds {bytes} bytes"
    );

    // Dropped and made again with a bound on its keys, it works.
    drop(client);
    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    assert_eq!(status(&client, "per_key").await.0, "failed");
    client
        .batch_execute(
            "DROP MATERIALIZED VIEW per_key;
             CREATE MATERIALIZED VIEW per_key AS SELECT k, count(*) AS n FROM t WHERE k <= 100 GROUP BY k;",
        )
        .await
        .unwrap();
    assert_eq!(count(&client, "SELECT count(*) FROM per_key").await, 100);
    assert_eq!(status(&client, "per_key").await.0, "running");
}

#[tokio::test]
async fn past_the_total_state_budget_the_largest_view_fails() {
    let eddy = EddyProcess::start_fresh_with(|config| {
        config
            .extra_args
            .extend(["--state-memory-limit".into(), "2MiB".into()]);
    })
    .await
    .unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(
            "CREATE TABLE t (k BIGINT);
             CREATE MATERIALIZED VIEW small AS SELECT k % 100 AS b, count(*) AS n FROM t GROUP BY k % 100;
             CREATE MATERIALIZED VIEW large AS SELECT k, count(*) AS n FROM t GROUP BY k;
             INSERT INTO t SELECT value FROM generate_series(1, 30000);
             FLUSH;",
        )
        .await
        .unwrap();
    let read = error_of(&client, "SELECT * FROM large").await;
    assert_eq!(read.code().code(), "53200", "{read:?}");
    assert!(read.message().contains("--state-memory-limit"), "{read:?}");
    assert_eq!(status(&client, "small").await.0, "running");
    assert_eq!(
        count(&client, "SELECT sum(n)::BIGINT FROM small").await,
        30_000
    );
}

/// A view whose stored state cannot be read when Eddy starts fails alone: Eddy starts, the
/// other views go on, reading the view answers why, and the failure holds across restarts
/// (the view misses changes from then on) until it is dropped and created again.
#[tokio::test]
async fn a_view_whose_state_cannot_be_read_at_start_fails_alone() {
    let mut eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(
            "CREATE TABLE t (x INT);
             CREATE MATERIALIZED VIEW counted AS SELECT count(*) AS n FROM t;
             CREATE MATERIALIZED VIEW per_x AS SELECT x, count(*) AS n FROM t GROUP BY x;
             INSERT INTO t VALUES (1), (2), (2);
             FLUSH;",
        )
        .await
        .unwrap();
    let state_table = count(
        &client,
        "SELECT table_id FROM eddy_catalog.state_tables WHERE view = 'per_x'",
    )
    .await;
    drop(client);
    eddy.terminate(std::time::Duration::from_secs(30))
        .await
        .unwrap();
    // Counters of the aggregate's state table that are too short to read.
    {
        use eddy_storage::Store;
        let store = eddy_storage::fjall_store::FjallStore::open(eddy.data_dir()).unwrap();
        let mut damage = eddy_storage::EpochBatch::default();
        damage.put(
            state_table as eddy_storage::TableId,
            &[0xFF, 0xFE],
            vec![1, 2, 3],
        );
        store.commit(&damage).unwrap();
    }

    for _ in 0..2 {
        eddy.restart().await.unwrap();
        let (client, _driver) = eddy.connect().await.unwrap();
        let error = error_of(&client, "SELECT * FROM per_x").await;
        assert_eq!(error.code().code(), "XX000", "{error:?}");
        assert!(
            error.message().contains("could not be restored"),
            "{error:?}"
        );
        failed_while_others_go_on(&client, "per_x", "SELECT n FROM counted").await;
    }

    let (client, _driver) = eddy.connect().await.unwrap();
    assert_eq!(count(&client, "SELECT n FROM counted").await, 5);
    client
        .batch_execute(
            "DROP MATERIALIZED VIEW per_x;
             CREATE MATERIALIZED VIEW per_x AS SELECT x, count(*) AS n FROM t GROUP BY x;",
        )
        .await
        .unwrap();
    assert_eq!(count(&client, "SELECT n FROM per_x WHERE x = 3").await, 2);
}

/// A view whose query no longer plans when Eddy starts (here its stored definition names a
/// column its table lacks, as a planner change could make it) fails alone: Eddy starts, the
/// other views go on, reading the view (or a plain view over it) answers why, whatever column
/// the reader names, its index and sink come back with it, and the view can be dropped and
/// created again.
#[tokio::test]
async fn a_view_whose_query_no_longer_plans_at_start_fails_alone() {
    let mut eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    let files = tempfile::tempdir().unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE t (x INT);
             CREATE MATERIALIZED VIEW counted AS SELECT count(*) AS n FROM t;
             CREATE MATERIALIZED VIEW per_x AS SELECT x, count(*) AS n FROM t GROUP BY x;
             CREATE VIEW big_x AS SELECT x FROM per_x WHERE n > 1;
             CREATE VIEW plain_counted AS SELECT n FROM counted;
             CREATE VIEW plain_x AS SELECT x FROM t;
             CREATE MATERIALIZED VIEW old_x AS SELECT x FROM t GROUP BY x;
             CREATE INDEX per_x_by_n ON per_x (n);
             CREATE SINK per_x_out FROM per_x
               WITH (connector = 'file', path = '{}', force_append_only = 'true')
               FORMAT PLAIN ENCODE JSON;
             INSERT INTO t VALUES (1), (2), (2);
             FLUSH;",
            files.path().display()
        ))
        .await
        .unwrap();
    drop(client);
    eddy.terminate(std::time::Duration::from_secs(30))
        .await
        .unwrap();
    {
        use eddy_storage::Store;
        let store = eddy_storage::fjall_store::FjallStore::open(eddy.data_dir()).unwrap();
        let mut batch = eddy_storage::EpochBatch::default();
        for mut entry in eddy_storage::CatalogEntry::load_all(&store).unwrap() {
            if entry.name == "old_x" {
                // Made before Eddy recorded a view's columns: it is kept with none.
                entry.view_shape = None;
            }
            if ["per_x", "plain_x", "old_x"].contains(&entry.name.as_str()) {
                entry.sql = entry.sql.replace("x FROM t", "gone FROM t");
                entry.sql = entry.sql.replace("GROUP BY x", "GROUP BY gone");
                entry.write(&mut batch).unwrap();
            }
        }
        store.commit(&batch).unwrap();
    }

    for _ in 0..2 {
        eddy.restart().await.unwrap();
        let (client, _driver) = eddy.connect().await.unwrap();
        for read in ["SELECT * FROM per_x", "SELECT x, n FROM per_x WHERE x = 2"] {
            let error = error_of(&client, read).await;
            assert_eq!(error.code().code(), "XX000", "{error:?}");
            assert!(
                error.message().contains("could not be planned")
                    && error.message().contains("gone"),
                "{error:?}"
            );
        }
        // A plain view over it plans (its columns were recorded) and answers its failure, as
        // does a view made before columns were recorded; a plain view whose own query no
        // longer plans answers why.
        for (read, says) in [
            ("SELECT x FROM big_x", "materialized view \"per_x\" failed"),
            ("SELECT x FROM old_x", "materialized view \"old_x\" failed"),
            (
                "SELECT x FROM plain_x",
                "view \"plain_x\" could not be restored",
            ),
        ] {
            let error = error_of(&client, read).await;
            assert!(error.message().contains(says), "{read}: {error:?}");
        }
        failed_while_others_go_on(&client, "per_x", "SELECT n FROM plain_counted").await;
    }

    let (client, _driver) = eddy.connect().await.unwrap();
    assert_eq!(count(&client, "SELECT n FROM counted").await, 5);
    let error = error_of(&client, "DROP MATERIALIZED VIEW per_x").await;
    assert_eq!(error.code().code(), "2BP01", "{error:?}");
    // Its index and its sink came back with it (its columns were recorded when it was made).
    let dependents: i64 = client
        .query_one(
            "SELECT (SELECT count(*) FROM pg_indexes WHERE indexname = 'per_x_by_n')
                  + (SELECT count(*) FROM eddy_catalog.sinks WHERE name = 'per_x_out')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(dependents, 2);
    client
        .batch_execute(
            "DROP MATERIALIZED VIEW per_x CASCADE;
             CREATE MATERIALIZED VIEW per_x AS SELECT x, count(*) AS n FROM t GROUP BY x;
             CREATE VIEW big_x AS SELECT x FROM per_x WHERE n > 1;",
        )
        .await
        .unwrap();
    assert_eq!(count(&client, "SELECT n FROM per_x WHERE x = 3").await, 2);
    assert_eq!(count(&client, "SELECT count(*) FROM big_x").await, 2);
}
