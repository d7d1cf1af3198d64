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
