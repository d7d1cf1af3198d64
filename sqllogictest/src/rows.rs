//! Query answers as text, for tests that compare them.

use tokio_postgres::{Client, SimpleQueryMessage};

/// The rows `sql` answers over the simple protocol, each cell as PostgreSQL's text (`NULL` for
/// a null). Panics when the query fails: the tests' own queries are expected to run.
pub async fn text_rows(client: &Client, sql: &str) -> Vec<Vec<String>> {
    let messages = client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    messages
        .into_iter()
        .filter_map(|message| match message {
            SimpleQueryMessage::Row(row) => Some(
                (0..row.len())
                    .map(|i| row.get(i).unwrap_or("NULL").to_string())
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}
