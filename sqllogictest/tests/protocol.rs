//! The wire protocol as drivers use it: prepared statements with `$1` parameters, errors with
//! SQLSTATEs that leave the connection usable, several statements in one simple query, and
//! garbage bytes that close only their own connection.

use std::time::Duration;

use eddy_sqllogictest::EddyProcess;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_postgres::error::SqlState;
use tokio_postgres::SimpleQueryMessage;

#[tokio::test]
async fn prepared_statements_with_parameters() {
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _conn) = eddy.connect().await.expect("connect");
    client
        .batch_execute("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR, price DOUBLE)")
        .await
        .unwrap();
    let insert = client
        .prepare("INSERT INTO items VALUES ($1, $2, $3)")
        .await
        .unwrap();
    for (id, name, price) in [(1, "pen", 1.5), (2, "ink", 7.25), (3, "pad", 3.0)] {
        let rows = client
            .execute(&insert, &[&id, &name, &price])
            .await
            .unwrap();
        assert_eq!(rows, 1);
    }
    let rows = client
        .query(
            "SELECT id, name FROM items WHERE price > $1 ORDER BY id",
            &[&2.0f64],
        )
        .await
        .unwrap();
    let got: Vec<(i32, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(got, vec![(2, "ink".to_string()), (3, "pad".to_string())]);

    // Describe reports the parameter and result types before execution.
    let statement = client
        .prepare("SELECT name, price FROM items WHERE id = $1")
        .await
        .unwrap();
    assert_eq!(statement.params(), &[tokio_postgres::types::Type::INT4]);
    let columns: Vec<&str> = statement.columns().iter().map(|c| c.name()).collect();
    assert_eq!(columns, vec!["name", "price"]);
    let row = client.query_one(&statement, &[&3i32]).await.unwrap();
    assert_eq!(row.get::<_, f64>(1), 3.0);

    // UPDATE and DELETE with parameters.
    let updated = client
        .execute(
            "UPDATE items SET price = $1 WHERE id = $2",
            &[&9.5f64, &1i32],
        )
        .await
        .unwrap();
    assert_eq!(updated, 1);
    let deleted = client
        .execute("DELETE FROM items WHERE name = $1", &[&"ink"])
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    let total: f64 = client
        .query_one("SELECT sum(price) FROM items", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(total, 12.5);
}

#[tokio::test]
async fn errors_carry_sqlstate_and_leave_the_connection_usable() {
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _conn) = eddy.connect().await.expect("connect");
    let cases = [
        ("SELEC 1", SqlState::SYNTAX_ERROR),
        ("SELECT * FROM missing", SqlState::UNDEFINED_TABLE),
        ("SELECT 1/0", SqlState::DIVISION_BY_ZERO),
        (
            "CREATE MATERIALIZED VIEW v AS SELECT 1",
            SqlState::FEATURE_NOT_SUPPORTED,
        ),
    ];
    for (sql, expected) in cases {
        let simple = client.simple_query(sql).await.expect_err(sql);
        assert_eq!(simple.code(), Some(&expected), "{sql} (simple): {simple:?}");
        let extended = client.query(sql, &[]).await.expect_err(sql);
        assert_eq!(
            extended.code(),
            Some(&expected),
            "{sql} (extended): {extended:?}"
        );
        let one: i64 = client
            .query_one("SELECT 1::BIGINT", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(one, 1, "the connection still answers after {sql}");
    }
}

#[tokio::test]
async fn several_statements_in_one_simple_query() {
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _conn) = eddy.connect().await.expect("connect");
    let messages = client
        .simple_query(
            "CREATE TABLE t (a INT); INSERT INTO t VALUES (1), (2); SELECT count(*) FROM t;",
        )
        .await
        .unwrap();
    let completions: Vec<u64> = messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::CommandComplete(n) => Some(*n),
            _ => None,
        })
        .collect();
    assert_eq!(completions, vec![0, 2, 1]);
    let count = messages.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
        _ => None,
    });
    assert_eq!(count.as_deref(), Some("2"));

    // The first failing statement stops the rest, as in Postgres.
    let err = client
        .simple_query("INSERT INTO t VALUES (3); SELECT * FROM nope; INSERT INTO t VALUES (4)")
        .await
        .expect_err("the second statement fails");
    assert_eq!(err.code(), Some(&SqlState::UNDEFINED_TABLE));
    let rows: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 3);
}

#[tokio::test]
async fn garbage_bytes_close_only_their_connection() {
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _conn) = eddy.connect().await.expect("connect");
    client
        .batch_execute("CREATE TABLE t (a INT)")
        .await
        .unwrap();

    for garbage in [
        &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        &[0xff; 64][..],
        &[0, 0, 0, 8, 1, 2, 3, 4][..],
    ] {
        let mut socket = tokio::net::TcpStream::connect(eddy.addr()).await.unwrap();
        socket.write_all(garbage).await.unwrap();
        // The server answers with an error or just closes; either way the socket ends.
        let mut buffer = vec![0u8; 1024];
        let read = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match socket.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        assert!(read.is_ok(), "a connection sending garbage is closed");
    }
    client
        .batch_execute("INSERT INTO t VALUES (1)")
        .await
        .unwrap();
    let rows: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1, "other connections keep working");
    let (fresh, _conn2) = eddy.connect().await.expect("new connections are accepted");
    let rows: i64 = fresh
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1);
}
