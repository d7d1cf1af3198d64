//! What the sink tests share: waiting for a sink to deliver, reading a topic back as a state.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use eddy_sqllogictest::kafka::ReadMessage;
use serde_json::Value;
use tokio_postgres::Client;

/// How long a sink may take to deliver what was committed (the machine may be busy).
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(60);

/// Waits until sink `name` has delivered every committed epoch.
pub async fn wait_delivered(client: &Client, name: &str) {
    let deadline = Instant::now() + DELIVERY_TIMEOUT;
    loop {
        let row = client
            .query_one(
                "SELECT epochs_behind, state, last_error FROM eddy_catalog.sinks WHERE name = $1",
                &[&name],
            )
            .await
            .unwrap_or_else(|e| panic!("sink {name}: {e}"));
        let behind: i64 = row.get(0);
        if behind == 0 {
            return;
        }
        if Instant::now() > deadline {
            let state: String = row.get(1);
            let error: Option<String> = row.get(2);
            panic!("sink {name} still {behind} epochs behind ({state}, {error:?})");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A text read as JSON (a number's text as the number).
pub fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// The last value of each key (by the key's JSON, keys sorted), tombstones removing it: what
/// an upsert topic says.
pub fn upsert_state(messages: &[ReadMessage]) -> BTreeMap<String, Value> {
    let mut state = BTreeMap::new();
    for message in messages {
        let key = json_of(std::str::from_utf8(message.key.as_deref().expect("a key")).unwrap());
        let key = key.to_string();
        match &message.payload {
            Some(payload) => {
                assert_ne!(
                    payload.as_slice(),
                    b"null",
                    "a delete written as the text null"
                );
                state.insert(key, json_of(std::str::from_utf8(payload).unwrap()));
            }
            None => {
                state.remove(&key);
            }
        }
    }
    state
}

/// The `id` of each message's JSON value.
pub fn ids(messages: &[ReadMessage]) -> Vec<i64> {
    messages
        .iter()
        .map(|m| {
            let value: Value =
                serde_json::from_slice(m.payload.as_deref().expect("a value")).unwrap();
            value["id"].as_i64().expect("an id")
        })
        .collect()
}
