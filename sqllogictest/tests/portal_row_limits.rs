//! An Execute's row limit is a bound, not a size: a portal executed with a limit of
//! 2^31 - 1 rows sends the rows it has and completes (pgwire reserved a vector of that many
//! rows, tens of gigabytes of address space, before the first), and a small limit suspends the
//! portal and goes on at the next Execute. Eddy sends a portal's rows itself since SQL cursors
//! became portals too.

use std::time::Duration;

use eddy_sqllogictest::wire::{self, RawConnection};
use eddy_sqllogictest::EddyProcess;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn an_execute_row_limit_is_never_allocated_up_front() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let mut raw = RawConnection::connect(eddy.addr()).await.unwrap();
    raw.send(&wire::startup(&[("user", "eddy"), ("database", "dev")]))
        .await
        .unwrap();
    raw.until_ready(WAIT).await;
    let mut exchange = wire::parse("SELECT value FROM generate_series(1, 5)");
    exchange.extend(wire::bind());
    exchange.extend(wire::execute(i32::MAX));
    exchange.extend(wire::sync());
    raw.send(&exchange).await.unwrap();
    let answer = raw.until_ready(WAIT).await;
    let kinds: Vec<u8> = answer.iter().map(|m| m.kind).collect();
    // ParseComplete, BindComplete, five DataRows, CommandComplete, ReadyForQuery.
    assert_eq!(kinds, b"12DDDDDCZ".to_vec(), "{answer:?}");
    // A limit of 2: suspended twice, then the last row and the end.
    let mut exchange = wire::parse("SELECT value FROM generate_series(1, 5)");
    exchange.extend(wire::bind());
    for _ in 0..3 {
        exchange.extend(wire::execute(2));
    }
    exchange.extend(wire::sync());
    raw.send(&exchange).await.unwrap();
    let answer = raw.until_ready(WAIT).await;
    let kinds: Vec<u8> = answer.iter().map(|m| m.kind).collect();
    assert_eq!(kinds, b"12DDsDDsDCZ".to_vec(), "{answer:?}");
    assert!(raw.until_ready(Duration::from_millis(100)).await.is_empty());
    let (client, _driver) = eddy.connect().await.unwrap();
    client.simple_query("SELECT 1").await.unwrap();
}

/// Describe of portal `name`.
fn describe_portal(name: &str) -> Vec<u8> {
    let mut body = vec![b'P'];
    body.extend_from_slice(name.as_bytes());
    body.push(0);
    wire::message(b'D', &body)
}

/// Execute of portal `name` with a row limit.
fn execute_portal(name: &str, max_rows: i32) -> Vec<u8> {
    let mut body = name.as_bytes().to_vec();
    body.push(0);
    body.extend_from_slice(&max_rows.to_be_bytes());
    wire::message(b'E', &body)
}

/// A cursor declared in SQL is a portal of the connection: described and executed by name
/// (psycopg 3 describes its named cursors so; it was `26000 portal not found`).
#[tokio::test]
async fn an_sql_cursor_is_a_portal() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let mut raw = RawConnection::connect(eddy.addr()).await.unwrap();
    raw.send(&wire::startup(&[("user", "eddy"), ("database", "dev")]))
        .await
        .unwrap();
    raw.until_ready(WAIT).await;
    for sql in [
        "BEGIN",
        "DECLARE big CURSOR FOR SELECT value FROM generate_series(1, 5)",
    ] {
        raw.send(&wire::query(sql)).await.unwrap();
        let answer = raw.until_ready(WAIT).await;
        assert!(!answer.iter().any(|m| m.is_error()), "{sql}: {answer:?}");
    }
    let mut exchange = describe_portal("big");
    exchange.extend(execute_portal("big", 2));
    exchange.extend(execute_portal("big", 0));
    exchange.extend(wire::sync());
    raw.send(&exchange).await.unwrap();
    let answer = raw.until_ready(WAIT).await;
    let kinds: Vec<u8> = answer.iter().map(|m| m.kind).collect();
    // RowDescription; two rows, suspended; the other three and the end.
    assert_eq!(kinds, b"TDDsDDDCZ".to_vec(), "{answer:?}");
    let value = |message: &wire::BackendMessage| {
        // One column: its length (4 bytes) then its text.
        String::from_utf8_lossy(&message.body[6..]).into_owned()
    };
    let values: Vec<String> = answer
        .iter()
        .filter(|m| m.kind == b'D')
        .map(value)
        .collect();
    assert_eq!(values, ["1", "2", "3", "4", "5"]);
    // An unknown name is still no portal.
    let mut exchange = describe_portal("nothing");
    exchange.extend(wire::sync());
    raw.send(&exchange).await.unwrap();
    let answer = raw.until_ready(WAIT).await;
    let error = answer.iter().find(|m| m.is_error()).expect("an error");
    assert_eq!(error.field(b'C').as_deref(), Some("26000"));
}
