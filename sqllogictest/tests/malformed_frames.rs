//! Malformed and oversized protocol messages against a real eddy: each gets a clean error with
//! Postgres' SQLSTATE (08P01 for a broken frame, 54001 for a too-long statement), the server
//! never panics, and the connection goes on as Postgres' does (the error, then ReadyForQuery
//! once the client sends Sync).

use std::time::Duration;

use eddy_sqllogictest::wire::{
    bind, execute, message, parse, query, startup, sync, BackendMessage, RawConnection,
};
use eddy_sqllogictest::EddyProcess;

const WAIT: Duration = Duration::from_secs(15);

/// A logged-in raw connection.
async fn logged_in(eddy: &EddyProcess) -> RawConnection {
    let mut connection = RawConnection::connect(eddy.addr()).await.unwrap();
    connection
        .send(&startup(&[("user", "eddy"), ("database", "dev")]))
        .await
        .unwrap();
    let ready = connection.until_ready(WAIT).await;
    assert_eq!(ready.last().map(|m| m.kind), Some(b'Z'), "{ready:?}");
    connection
}

fn kinds(messages: &[BackendMessage]) -> String {
    messages.iter().map(|m| m.kind as char).collect()
}

fn error_code(messages: &[BackendMessage]) -> Option<(String, String)> {
    messages.iter().find(|m| m.is_error()).map(|m| {
        (
            m.field(b'S').unwrap_or_default(),
            m.field(b'C').unwrap_or_default(),
        )
    })
}

/// The connection still answers a query.
async fn still_usable(connection: &mut RawConnection) {
    connection.send(&query("SELECT 42")).await.unwrap();
    let replies = connection.until_ready(WAIT).await;
    assert_eq!(kinds(&replies), "TDCZ", "{replies:?}");
    assert_eq!(&replies[1].body[6..], b"42");
}

fn assert_no_panic(eddy: &EddyProcess) {
    let log = std::fs::read_to_string(eddy.log_file()).unwrap_or_default();
    assert!(!log.contains("panicked"), "{}", eddy.log_tail(40));
}

#[tokio::test]
async fn truncated_messages_are_protocol_errors() {
    let mut eddy = EddyProcess::start_fresh().await.unwrap();
    let count = |n: i16| n.to_be_bytes().to_vec();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "a Bind announcing five format codes and holding none",
            [
                parse("SELECT 1"),
                message(b'B', &[b"\0\0".to_vec(), count(5)].concat()),
            ]
            .concat(),
            "1EZ",
        ),
        (
            "a Bind whose parameter runs past its end",
            [
                parse("SELECT $1::INT"),
                message(
                    b'B',
                    &[
                        b"\0\0".to_vec(),
                        count(0),
                        count(1),
                        100i32.to_be_bytes().to_vec(),
                        b"12".to_vec(),
                    ]
                    .concat(),
                ),
            ]
            .concat(),
            "1EZ",
        ),
        (
            "a Parse whose query is not terminated",
            message(b'P', b"\0SELECT 1"),
            "EZ",
        ),
        (
            "a Parse announcing parameter types it lacks",
            message(b'P', &[b"\0SELECT 1\0".to_vec(), count(3)].concat()),
            "EZ",
        ),
        ("an empty Describe", message(b'D', b""), "EZ"),
        (
            "a Describe of neither statement nor portal",
            message(b'D', b"X\0"),
            "EZ",
        ),
        (
            "an Execute without its row limit",
            message(b'E', b"\0\0\0"),
            "EZ",
        ),
    ];
    let simple = (
        "a Query with bytes after its text",
        message(b'Q', b"SELECT 1\0junk"),
        "EZ",
    );
    // Extended-protocol messages are followed by the Sync that ends the error; the Query not.
    let cases = cases
        .into_iter()
        .map(|(what, bytes, expected)| (what, [bytes, sync()].concat(), expected))
        .chain([simple]);
    for (what, bytes, expected) in cases {
        let mut connection = logged_in(&eddy).await;
        connection.send(&bytes).await.unwrap();
        let replies = connection.until_ready(WAIT).await;
        assert_eq!(kinds(&replies), expected, "{what}: {replies:?}");
        assert_eq!(
            error_code(&replies),
            Some(("ERROR".into(), "08P01".into())),
            "{what}"
        );
        still_usable(&mut connection).await;
    }
    assert!(eddy.is_running());
    assert_no_panic(&eddy);
}

/// A Bind of the unnamed statement: these parameter format codes and (text) values, then these
/// result format codes.
fn bind_with_formats(
    parameter_formats: &[i16],
    values: &[&str],
    result_formats: &[i16],
) -> Vec<u8> {
    let mut body = b"\0\0".to_vec();
    let count = |n: usize| (n as i16).to_be_bytes();
    body.extend_from_slice(&count(parameter_formats.len()));
    for code in parameter_formats {
        body.extend_from_slice(&code.to_be_bytes());
    }
    body.extend_from_slice(&count(values.len()));
    for value in values {
        body.extend_from_slice(&(value.len() as i32).to_be_bytes());
        body.extend_from_slice(value.as_bytes());
    }
    body.extend_from_slice(&count(result_formats.len()));
    for code in result_formats {
        body.extend_from_slice(&code.to_be_bytes());
    }
    message(b'B', &body)
}

#[tokio::test]
async fn format_codes_that_fit_neither_one_nor_each_are_protocol_errors() {
    // Found by the frames fuzzer: pgwire indexed the codes by parameter or column and panicked
    // ("index out of bounds") past their end.
    let mut eddy = EddyProcess::start_fresh().await.unwrap();
    let describe_portal = message(b'D', b"P\0");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "two parameter formats for one parameter",
            [
                parse("SELECT $1::INT"),
                bind_with_formats(&[0, 0], &["7"], &[]),
                execute(0),
            ]
            .concat(),
            "bind message has 2 parameter formats but 1 parameters",
        ),
        (
            "two result formats for three columns, then Execute",
            [
                parse("SELECT 1, 2, 3"),
                bind_with_formats(&[], &[], &[0, 1]),
                execute(0),
            ]
            .concat(),
            "bind message has 2 result formats but query has 3 columns",
        ),
        (
            "three result formats for one column, then Describe",
            [
                parse("SELECT 1"),
                bind_with_formats(&[], &[], &[1, 0, 1]),
                describe_portal.clone(),
                execute(0),
            ]
            .concat(),
            "bind message has 3 result formats but query has 1 columns",
        ),
    ];
    for (what, bytes, expected) in cases {
        let mut connection = logged_in(&eddy).await;
        connection.send(&[bytes, sync()].concat()).await.unwrap();
        let replies = connection.until_ready(WAIT).await;
        let error = replies.iter().find(|m| m.is_error());
        assert_eq!(
            error.and_then(|m| m.field(b'C')).as_deref(),
            Some("08P01"),
            "{what}: {replies:?}"
        );
        assert_eq!(error.and_then(|m| m.field(b'M')).as_deref(), Some(expected));
        assert!(kinds(&replies).ends_with("EZ"), "{what}: {replies:?}");
        assert!(!kinds(&replies).contains(['T', 'D']), "{what}: {replies:?}");
        still_usable(&mut connection).await;
    }
    // One code for all, or one each, still works.
    let mut connection = logged_in(&eddy).await;
    connection
        .send(
            &[
                parse("SELECT $1::INT, $2::INT"),
                bind_with_formats(&[0], &["1", "2"], &[0, 0]),
                execute(0),
                sync(),
            ]
            .concat(),
        )
        .await
        .unwrap();
    let replies = connection.until_ready(WAIT).await;
    assert_eq!(kinds(&replies), "12DCZ", "{replies:?}");
    assert!(eddy.is_running());
    assert_no_panic(&eddy);
}

#[tokio::test]
async fn a_negative_row_limit_means_all_rows_as_in_postgres() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let mut connection = logged_in(&eddy).await;
    connection
        .send(
            &[
                parse("SELECT 1 UNION ALL SELECT 2"),
                bind(),
                execute(-5),
                sync(),
            ]
            .concat(),
        )
        .await
        .unwrap();
    let replies = connection.until_ready(WAIT).await;
    assert_eq!(kinds(&replies), "12DDCZ", "{replies:?}");
    assert_no_panic(&eddy);
}

#[tokio::test]
async fn oversized_and_overnested_statements_get_54001() {
    let mut eddy = EddyProcess::start_fresh_with(|config| {
        config.extra_args = vec!["--max-statement-size".into(), "256KiB".into()];
    })
    .await
    .unwrap();
    let long_sum = format!("SELECT 1{}", "+1".repeat(100_000));
    let deep_parens = format!("SELECT {}1{}", "(".repeat(5_000), ")".repeat(5_000));
    let oversized = format!("SELECT '{}'", "x".repeat(300 << 10));
    let huge = format!("SELECT '{}'", "x".repeat(8 << 20));
    for (what, sql) in [
        ("100,000 additions", long_sum.as_str()),
        ("5,000 nested parentheses", deep_parens.as_str()),
        ("a statement over the size limit", oversized.as_str()),
        ("a statement of 8 MiB (skipped unread)", huge.as_str()),
    ] {
        let mut connection = logged_in(&eddy).await;
        connection.send(&query(sql)).await.unwrap();
        let replies = connection.until_ready(WAIT).await;
        assert_eq!(kinds(&replies), "EZ", "{what}: {replies:?}");
        assert_eq!(
            error_code(&replies),
            Some(("ERROR".into(), "54001".into())),
            "{what}"
        );
        still_usable(&mut connection).await;
        // The extended protocol refuses it the same way.
        connection
            .send(&[parse(sql), sync()].concat())
            .await
            .unwrap();
        let replies = connection.until_ready(WAIT).await;
        assert_eq!(kinds(&replies), "EZ", "{what} (Parse): {replies:?}");
        assert_eq!(
            error_code(&replies).map(|(_, code)| code).as_deref(),
            Some("54001")
        );
        still_usable(&mut connection).await;
    }
    assert!(eddy.is_running());
    assert_no_panic(&eddy);
}
