//! Lines a source cannot take become dead letters, whatever they hold: a JSON line nested
//! 100,000 levels deep used to overflow the source thread's stack and kill the server, again at
//! every restart (the line is read again); lenient JSON (`{"id":36,}`) used to pass as a row.
//! `eddy_catalog.source_errors` has one row per bad line, with the views it failed for; so has
//! a row whose primary key the source refuses (NULL, or already there on an append-only one).

use eddy_sqllogictest::EddyProcess;

fn nested(open: &str, close: &str, depth: usize) -> String {
    format!("{{\"id\":{}1{}}}", open.repeat(depth), close.repeat(depth))
}

async fn counts(client: &tokio_postgres::Client) -> (i64, i64) {
    let rows = client
        .query_one("SELECT n FROM line_count", &[])
        .await
        .unwrap()
        .get(0);
    let total = client
        .query_one("SELECT total FROM line_sum", &[])
        .await
        .unwrap()
        .get(0);
    (rows, total)
}

/// (offset, error, views) of each dead letter of source `lines`, in file order.
async fn dead_letters(client: &tokio_postgres::Client) -> Vec<(i64, String, Vec<String>)> {
    client
        .query(
            "SELECT \"offset\", error, views FROM eddy_catalog.source_errors \
             WHERE source = 'lines' ORDER BY \"offset\"",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect()
}

#[tokio::test]
async fn deep_and_lenient_lines_are_dead_letters_once_each() {
    let mut eddy = EddyProcess::start_fresh().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lines.jsonl");
    let lines = [
        "{\"id\":1}".to_string(),
        nested("[", "]", 100_000),
        "{\"id\":36,}".to_string(),
        nested("{\"a\":", "}", 50_000),
        // Malformed deep inside: never closed.
        format!("{{\"id\":{}", "[".repeat(200_000)),
        "{\"id\":1 \"x\":2}".to_string(),
        "{\"id\":2}".to_string(),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE SOURCE lines (id BIGINT) WITH (connector = 'file', path = '{}');
             CREATE MATERIALIZED VIEW line_count AS SELECT count(*) AS n FROM lines;
             CREATE MATERIALIZED VIEW line_sum AS SELECT sum(id) AS total FROM lines;
             FLUSH;",
            path.display()
        ))
        .await
        .unwrap();
    assert_eq!(counts(&client).await, (2, 3));
    let letters = dead_letters(&client).await;
    let views = vec!["line_count".to_string(), "line_sum".to_string()];
    let errors: Vec<&str> = letters.iter().map(|(_, error, _)| error.as_str()).collect();
    assert_eq!(letters.len(), 5, "{letters:?}");
    assert!(
        errors[0].contains("nested 128 levels deep or deeper"),
        "{errors:?}"
    );
    assert!(errors[1].contains("trailing comma"), "{errors:?}");
    assert!(
        errors[2].contains("nested 128 levels deep or deeper"),
        "{errors:?}"
    );
    assert!(
        errors[3].contains("nested 128 levels deep or deeper"),
        "{errors:?}"
    );
    assert!(errors[4].contains("invalid JSON"), "{errors:?}");
    for (offset, _, failed_for) in &letters {
        assert_eq!(failed_for, &views, "the letter at {offset}");
    }
    // A crash and a restart: the server comes back to the same answers.
    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    assert!(eddy.is_running(), "{}", eddy.log_tail(20));
    assert_eq!(counts(&client).await, (2, 3));
    assert_eq!(dead_letters(&client).await.len(), 5);
    let log = std::fs::read_to_string(eddy.log_file()).unwrap_or_default();
    assert!(
        !log.contains("overflowed its stack"),
        "{}",
        eddy.log_tail(20)
    );
}

/// A row its primary key refuses (a key an append-only source already has, a NULL key) is a
/// dead letter, with the row as JSON; the rest of the source goes on. It used to fail the whole
/// batch, read again and failed again for ever: the source and its views froze. Two equal
/// lines refused in one batch are two dead letters.
#[tokio::test]
async fn rows_a_source_key_refuses_are_dead_letters_and_the_source_goes_on() {
    let mut eddy = EddyProcess::start_fresh().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keyed.jsonl");
    let lines = [
        r#"{"id": 1, "c": 10}"#,
        r#"{"id": 1, "c": 11}"#,
        r#"{"id": null, "c": 12}"#,
        r#"{"c": 13}"#,
        r#"{"c": 13}"#,
        r#"{"id": 2, "c": 14}"#,
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE SOURCE keyed (id BIGINT PRIMARY KEY, c INT) WITH (connector = 'file', path = '{}');
             CREATE MATERIALIZED VIEW keyed_rows AS SELECT id, c FROM keyed;
             CREATE MATERIALIZED VIEW keyed_count AS SELECT count(*) AS n FROM keyed;
             FLUSH;",
            path.display()
        ))
        .await
        .unwrap();
    let expect_rows = |rows: Vec<tokio_postgres::Row>| {
        let rows: Vec<(i64, i32)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        assert_eq!(rows, [(1, 10), (2, 14)]);
    };
    expect_rows(
        client
            .query("SELECT id, c FROM keyed_rows ORDER BY id", &[])
            .await
            .unwrap(),
    );
    let letters: Vec<(String, String, Vec<String>)> = client
        .query(
            "SELECT error, payload, views FROM eddy_catalog.source_errors \
             WHERE source = 'keyed' ORDER BY payload",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let payloads: Vec<&str> = letters.iter().map(|(_, p, _)| p.as_str()).collect();
    assert_eq!(
        payloads,
        [
            r#"{"c":12}"#,
            r#"{"c":13}"#,
            r#"{"c":13}"#,
            r#"{"id":1,"c":11}"#
        ],
        "{letters:?}"
    );
    assert!(
        letters[0].0.contains("null value in column \"id\""),
        "{letters:?}"
    );
    assert!(
        letters[3]
            .0
            .contains("duplicate key value violates primary key"),
        "{letters:?}"
    );
    // Each line once, with both views it failed for (each view reads the source itself).
    assert!(letters
        .iter()
        .all(|(_, _, v)| v == &["keyed_count", "keyed_rows"]));
    // Restarted, the source resumes after the lines it read: nothing is refused twice.
    drop(client);
    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    expect_rows(
        client
            .query("SELECT id, c FROM keyed_rows ORDER BY id", &[])
            .await
            .unwrap(),
    );
    let count: i64 = client
        .query_one(
            "SELECT count(*) FROM eddy_catalog.source_errors WHERE source = 'keyed'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 4);
}
