//! What the format tests share: a running Eddy with a broker, and reading rows as text.

use eddy_sqllogictest::kafka::KafkaBroker;
use eddy_sqllogictest::EddyProcess;
use tokio_postgres::{Client, SimpleQueryMessage};

/// The broker, the server (kept running while the test holds it) and a client of it.
pub struct Setup {
    pub broker: KafkaBroker,
    pub _eddy: EddyProcess,
    pub client: Client,
}

pub async fn setup() -> Setup {
    let broker = KafkaBroker::from_env().expect("the test script starts a broker");
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    Setup {
        broker,
        _eddy: eddy,
        client,
    }
}

/// The rows of a query in PostgreSQL's text form (NULL as "NULL"), joined by `|`.
pub async fn text_rows(client: &Client, sql: &str) -> Vec<String> {
    let messages = client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some(
                (0..row.len())
                    .map(|i| row.get(i).unwrap_or("NULL").to_string())
                    .collect::<Vec<_>>()
                    .join("|"),
            ),
            _ => None,
        })
        .collect()
}

/// The SQLSTATE a statement fails with.
pub async fn sqlstate(client: &Client, sql: &str) -> String {
    let error = client
        .batch_execute(sql)
        .await
        .expect_err(&format!("{sql} should fail"));
    error
        .code()
        .map(|c| c.code().to_string())
        .unwrap_or_else(|| panic!("{sql}: no SQLSTATE in {error}"))
}
