//! Lines a source cannot take become dead letters, whatever they hold: a JSON line nested
//! 100,000 levels deep used to overflow the source thread's stack and kill the server, again at
//! every restart (the line is read again); lenient JSON (`{"id":36,}`) used to pass as a row.
//! `eddy_catalog.source_errors` has one row per bad line, with the views it failed for.

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
