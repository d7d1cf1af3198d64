//! The connection state machine against a real eddy, with raw protocol bytes: nothing a client
//! sends before authentication completes, after a FATAL error or around a failed TLS
//! negotiation is acted on, in the simple and the extended protocol; failed logins look alike
//! and are answered late; connections beyond --max-connections are refused with 53300.

mod common;

use std::time::{Duration, Instant};

use eddy_sqllogictest::wire::{
    bind, execute, message, parse, password, query, sasl_initial, ssl_request, startup, sync,
    BackendMessage, RawConnection,
};
use eddy_sqllogictest::EddyProcess;
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

const PASSWORD: &str = "s3cret";
const WAIT: Duration = Duration::from_secs(15);

async fn with_password() -> EddyProcess {
    EddyProcess::start_fresh_with(|config| {
        config.extra_args = vec!["--password".into(), PASSWORD.into()];
    })
    .await
    .expect("start eddy with a password")
}

/// A client that knows the password, with a table `secret` holding one row.
async fn owner(eddy: &EddyProcess) -> tokio_postgres::Client {
    let mut config = eddy.pg_config();
    config.password(PASSWORD);
    let (client, connection) = config.connect(NoTls).await.expect("log in");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
        .batch_execute("CREATE TABLE IF NOT EXISTS secret (x INT); INSERT INTO secret VALUES (1)")
        .await
        .expect("create secret");
    client
}

/// Nothing the attacker sent ran: no table `pwned`, no row 666.
async fn assert_nothing_ran(client: &tokio_postgres::Client, what: &str) {
    let rows = client
        .query("SELECT count(*) FROM secret WHERE x = 666", &[])
        .await
        .expect("read secret");
    assert_eq!(rows[0].get::<_, i64>(0), 0, "{what}: the INSERT ran");
    let pwned = client.simple_query("SELECT * FROM pwned").await;
    assert!(pwned.is_err(), "{what}: the CREATE TABLE ran");
}

const ATTACK: &str = "CREATE TABLE pwned (x INT); INSERT INTO secret VALUES (666)";

/// The server's reply to `bytes` sent in one write, up to the connection's end.
async fn replies(eddy: &EddyProcess, bytes: &[u8]) -> Vec<BackendMessage> {
    let mut connection = RawConnection::connect(eddy.addr()).await.unwrap();
    connection.send(bytes).await.unwrap();
    let replies = connection.until_closed(WAIT).await;
    assert!(
        connection.closed(),
        "the connection stayed open: {replies:?}"
    );
    replies
}

/// A FATAL error with `code`, and nothing that says a query ran or the session is ready.
fn assert_fatal_only(replies: &[BackendMessage], code: &str, what: &str) {
    let fatal = replies
        .iter()
        .find(|m| m.is_error())
        .unwrap_or_else(|| panic!("{what}: no error in {replies:?}"));
    assert_eq!(fatal.field(b'S').as_deref(), Some("FATAL"), "{what}");
    assert_eq!(
        fatal.field(b'C').as_deref(),
        Some(code),
        "{what}: {fatal:?}"
    );
    for forbidden in [b'Z', b'C', b'T', b'D', b'1', b'2'] {
        assert!(
            !replies.iter().any(|m| m.kind == forbidden),
            "{what}: got a '{}' message: {replies:?}",
            forbidden as char
        );
    }
}

/// A startup packet asking for protocol 2.0, which the server does not speak.
fn protocol_2_startup() -> Vec<u8> {
    let mut body = 0x0002_0000i32.to_be_bytes().to_vec();
    body.extend_from_slice(b"user\0eddy\0\0");
    let mut packet = (body.len() as i32 + 4).to_be_bytes().to_vec();
    packet.extend(body);
    packet
}

fn extended(sql: &str) -> Vec<u8> {
    [parse(sql), bind(), execute(0), sync()].concat()
}

#[tokio::test]
async fn nothing_pipelined_behind_a_failing_login_runs() {
    let eddy = with_password().await;
    let owner = owner(&eddy).await;
    let hello = startup(&[("user", "eddy"), ("database", "dev")]);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "unknown SASL mechanism, simple query",
            [hello.clone(), sasl_initial("BOGUS"), query(ATTACK)].concat(),
            "08P01",
        ),
        (
            "wrong cleartext password, simple query",
            [hello.clone(), password("wrong"), query(ATTACK)].concat(),
            "08P01",
        ),
        (
            "unknown SASL mechanism, extended protocol",
            [
                hello.clone(),
                sasl_initial("BOGUS"),
                extended("INSERT INTO secret VALUES (666)"),
            ]
            .concat(),
            "08P01",
        ),
        (
            "no password at all, simple query",
            [hello.clone(), query(ATTACK)].concat(),
            "08P01",
        ),
        (
            "no password at all, extended protocol",
            [hello.clone(), extended("INSERT INTO secret VALUES (666)")].concat(),
            "08P01",
        ),
        (
            "a broken startup packet, then a query",
            [protocol_2_startup(), query(ATTACK)].concat(),
            "08P01",
        ),
    ];
    for (what, bytes, code) in cases {
        let replies = replies(&eddy, &bytes).await;
        assert_fatal_only(&replies, code, what);
        assert_nothing_ran(&owner, what).await;
    }
}

#[tokio::test]
async fn a_failed_scram_exchange_runs_nothing_after_it() {
    let eddy = with_password().await;
    let owner = owner(&eddy).await;
    // A real SCRAM client-first, then a client-final with a wrong proof, then the attack.
    let mut connection = RawConnection::connect(eddy.addr()).await.unwrap();
    connection
        .send(&startup(&[("user", "eddy"), ("database", "dev")]))
        .await
        .unwrap();
    let offer = connection.next(WAIT).await.expect("SASL offer");
    assert_eq!(offer.kind, b'R');
    let first = b"n,,n=,r=rOprNGfwEbeRWgbNEkqO";
    let mut body = b"SCRAM-SHA-256\0".to_vec();
    body.extend_from_slice(&(first.len() as i32).to_be_bytes());
    body.extend_from_slice(first);
    connection.send(&message(b'p', &body)).await.unwrap();
    let server_first = connection.next(WAIT).await.expect("server-first");
    let text = String::from_utf8_lossy(&server_first.body[4..]).into_owned();
    let nonce = text
        .split(',')
        .find_map(|part| part.strip_prefix("r="))
        .expect("a nonce");
    let last = format!("c=biws,r={nonce},p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
    let attack = [
        message(b'p', last.as_bytes()),
        query(ATTACK),
        extended("INSERT INTO secret VALUES (666)"),
    ]
    .concat();
    connection.send(&attack).await.unwrap();
    let replies = connection.until_closed(WAIT).await;
    assert!(connection.closed());
    assert_fatal_only(&replies, "28P01", "a wrong SCRAM proof");
    assert_nothing_ran(&owner, "a wrong SCRAM proof").await;
}

#[tokio::test]
async fn nothing_runs_after_a_fatal_error_once_logged_in() {
    // Trust: the connection is logged in at once; a FATAL protocol error must still end it.
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute("CREATE TABLE secret (x INT)")
        .await
        .unwrap();
    let hello = startup(&[("user", "eddy"), ("database", "dev")]);
    for (what, bad) in [
        ("an unknown message type", message(b'F', b"\0\0\0\0")),
        ("a message length below 4", b"Q\0\0\0\x02".to_vec()),
        ("a password message after login", password("x")),
    ] {
        for (protocol, attack) in [
            ("simple", query(ATTACK)),
            ("extended", extended("INSERT INTO secret VALUES (666)")),
        ] {
            let mut connection = RawConnection::connect(eddy.addr()).await.unwrap();
            connection.send(&hello).await.unwrap();
            let ready = connection.until_ready(WAIT).await;
            assert_eq!(ready.last().map(|m| m.kind), Some(b'Z'), "{ready:?}");
            connection
                .send(&[bad.clone(), attack].concat())
                .await
                .unwrap();
            let replies = connection.until_closed(WAIT).await;
            let what = format!("{what}, then the {protocol} protocol");
            assert!(connection.closed(), "{what}: still open");
            assert_fatal_only(&replies, "08P01", &what);
            let rows = client
                .query("SELECT count(*) FROM secret", &[])
                .await
                .unwrap();
            assert_eq!(rows[0].get::<_, i64>(0), 0, "{what}: the INSERT ran");
            assert!(client.simple_query("SELECT * FROM pwned").await.is_err());
        }
    }
}

#[tokio::test]
async fn cleartext_bytes_around_tls_negotiation_are_not_taken_as_encrypted() {
    let Some(openssl) = common::require("openssl", common::on_path("openssl")) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = std::process::Command::new(openssl)
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("run openssl");
    assert!(made.status.success());
    let eddy = EddyProcess::start_fresh_with(|config| {
        config.extra_args = vec![
            "--tls-cert".into(),
            cert.display().to_string(),
            "--tls-key".into(),
            key.display().to_string(),
        ];
    })
    .await
    .unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute("CREATE TABLE secret (x INT)")
        .await
        .unwrap();
    let hello = startup(&[("user", "eddy"), ("database", "dev")]);
    // SSLRequest with a startup and a query pipelined in the clear behind it: the server
    // agrees to TLS, and the clear bytes then fail the handshake; nothing runs.
    for attack in [query(ATTACK), extended("INSERT INTO secret VALUES (666)")] {
        let mut connection = RawConnection::connect(eddy.addr()).await.unwrap();
        connection
            .send(&[ssl_request(), hello.clone(), attack].concat())
            .await
            .unwrap();
        assert_eq!(connection.ssl_answer(WAIT).await, Some(b'S'));
        let replies = connection.until_closed(WAIT).await;
        assert!(connection.closed());
        assert!(
            !replies.iter().any(|m| m.kind == b'C' || m.kind == b'Z'),
            "{replies:?}"
        );
    }
    // A failed handshake (garbage instead of a ClientHello) ends the connection too.
    let mut connection = RawConnection::connect(eddy.addr()).await.unwrap();
    connection.send(&ssl_request()).await.unwrap();
    assert_eq!(connection.ssl_answer(WAIT).await, Some(b'S'));
    connection
        .send(&[hello.clone(), query(ATTACK)].concat())
        .await
        .unwrap();
    let replies = connection.until_closed(WAIT).await;
    assert!(connection.closed() && replies.is_empty(), "{replies:?}");
    let rows = client
        .query("SELECT count(*) FROM secret", &[])
        .await
        .unwrap();
    assert_eq!(rows[0].get::<_, i64>(0), 0);
    assert!(client.simple_query("SELECT * FROM pwned").await.is_err());
}

#[tokio::test]
async fn failed_logins_look_alike_and_slow_down() {
    let eddy = EddyProcess::start_fresh_with(|config| {
        config.extra_args = ["--user", "alice", "--password", PASSWORD]
            .map(String::from)
            .to_vec();
    })
    .await
    .unwrap();
    let attempt = |user: &'static str, secret: &'static str| {
        let mut config = eddy.pg_config();
        config.user(user).password(secret);
        async move {
            let started = Instant::now();
            let error = config.connect(NoTls).await.err().expect("refused");
            let error = error.as_db_error().expect("a server error").clone();
            (error, started.elapsed())
        }
    };
    let (wrong_password, first) = attempt("alice", "guess").await;
    let (unknown_user, second) = attempt("mallory", PASSWORD).await;
    let (_, third) = attempt("alice", "guess2").await;
    for error in [&wrong_password, &unknown_user] {
        assert_eq!(error.code(), &SqlState::INVALID_PASSWORD);
        assert_eq!(error.severity(), "FATAL");
    }
    assert_eq!(
        wrong_password.message().replace("alice", "USER"),
        unknown_user.message().replace("mallory", "USER"),
        "the two failures must not be told apart"
    );
    // 0.5 s, then 1 s, then 2 s: each further failure from an address waits longer.
    assert!(first >= Duration::from_millis(450), "{first:?}");
    assert!(second >= Duration::from_millis(950), "{second:?}");
    assert!(third >= Duration::from_millis(1950), "{third:?}");
    // The right password still gets in, and clears the address's record.
    let mut config = eddy.pg_config();
    config.user("alice").password(PASSWORD);
    let (client, connection) = config.connect(NoTls).await.expect("log in");
    tokio::spawn(connection);
    assert_eq!(
        client
            .query_one("SELECT 1::BIGINT", &[])
            .await
            .unwrap()
            .get::<_, i64>(0),
        1
    );
}

#[tokio::test]
async fn connections_beyond_the_limit_are_refused_with_53300() {
    let eddy = EddyProcess::start_fresh_with(|config| {
        config.extra_args = vec!["--max-connections".into(), "3".into()];
    })
    .await
    .unwrap();
    // The server's readiness probe was a connection too: its slot is freed when the server
    // sees it close, which may come a moment after the probe's client closed it.
    let mut clients = Vec::new();
    let deadline = Instant::now() + WAIT;
    while clients.len() < 3 {
        match eddy.connect().await {
            Ok(client) => clients.push(client),
            Err(error) if Instant::now() < deadline => {
                let _ = error;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => panic!("within the limit: {error:?}"),
        }
    }
    let refused = eddy
        .pg_config()
        .connect(NoTls)
        .await
        .err()
        .expect("a fourth connection is refused");
    assert_eq!(
        refused.code(),
        Some(&SqlState::TOO_MANY_CONNECTIONS),
        "{refused:?}"
    );
    // The connected clients keep working.
    for (client, _) in &clients {
        let row = client.query_one("SELECT 6 * 7", &[]).await.unwrap();
        assert_eq!(row.get::<_, i32>(0), 42);
    }
    // A slot freed is a slot for the next client.
    drop(clients.pop());
    let deadline = Instant::now() + WAIT;
    loop {
        match eddy.connect().await {
            Ok(_) => break,
            Err(error) if Instant::now() < deadline => {
                let _ = error;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => panic!("no slot after a client left: {error:?}"),
        }
    }
}
