//! Authentication and TLS against a real eddy: with a password configured (flags or
//! environment), SCRAM-SHA-256 lets the right password in and turns anything else away with
//! 28P01; with a certificate, clients can connect over TLS.

mod common;

use std::process::Command;
use std::time::Duration;

use eddy_sqllogictest::EddyProcess;
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

async fn try_connect(
    eddy: &EddyProcess,
    user: &str,
    password: Option<&str>,
) -> Result<i64, tokio_postgres::Error> {
    let mut config = tokio_postgres::Config::new();
    config
        .host("127.0.0.1")
        .port(eddy.port())
        .user(user)
        .dbname("dev")
        .connect_timeout(Duration::from_secs(10));
    if let Some(password) = password {
        config.password(password);
    }
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client.query_one("SELECT 41::BIGINT + 1", &[]).await?.get(0))
}

fn expect_refused(result: Result<i64, tokio_postgres::Error>, what: &str) {
    let err = result.expect_err(what);
    assert_eq!(
        err.code(),
        Some(&SqlState::INVALID_PASSWORD),
        "{what}: {err:?}"
    );
}

#[tokio::test]
async fn passwords_tls_and_trust() {
    // No password configured: any user name is trusted, as before.
    let trusting = EddyProcess::start_fresh().await.expect("start eddy");
    assert_eq!(try_connect(&trusting, "postgres", None).await.unwrap(), 42);
    drop(trusting);

    let eddy = EddyProcess::start_fresh_with(|config| {
        config.extra_args = ["--user", "alice", "--password", "s3cret"]
            .map(String::from)
            .to_vec();
    })
    .await
    .expect("start eddy with a password");
    assert_eq!(
        try_connect(&eddy, "alice", Some("s3cret")).await.unwrap(),
        42
    );
    // Twice: each connection has its own SCRAM exchange.
    assert_eq!(
        try_connect(&eddy, "alice", Some("s3cret")).await.unwrap(),
        42
    );
    expect_refused(
        try_connect(&eddy, "alice", Some("wrong")).await,
        "a wrong password",
    );
    expect_refused(
        try_connect(&eddy, "bob", Some("s3cret")).await,
        "another user",
    );
    assert!(
        try_connect(&eddy, "alice", None).await.is_err(),
        "no password, no connection"
    );
    drop(eddy);

    // The same from the environment; without --user any user name goes with the password.
    // (The only test in this binary: the variable reaches no other server.)
    std::env::set_var("EDDY_PASSWORD", "from-env");
    let from_env = EddyProcess::start_fresh().await;
    std::env::remove_var("EDDY_PASSWORD");
    let from_env = from_env.expect("start eddy with EDDY_PASSWORD");
    assert_eq!(
        try_connect(&from_env, "anyone", Some("from-env"))
            .await
            .unwrap(),
        42
    );
    expect_refused(
        try_connect(&from_env, "anyone", Some("s3cret")).await,
        "a wrong password",
    );
    drop(from_env);

    // TLS, checked with psql (the driver here speaks no TLS).
    let Some(openssl) = common::require("openssl", common::on_path("openssl")) else {
        return;
    };
    let Some(psql) = common::require("psql", common::on_path("psql")) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = Command::new(openssl)
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("run openssl");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let tls = EddyProcess::start_fresh_with(|config| {
        config.extra_args = vec![
            "--password".into(),
            "s3cret".into(),
            "--tls-cert".into(),
            cert.display().to_string(),
            "--tls-key".into(),
            key.display().to_string(),
        ];
    })
    .await
    .expect("start eddy with TLS");
    for (sslmode, expect_tls) in [("require", true), ("disable", false)] {
        let conninfo = format!(
            "host=127.0.0.1 port={} user=alice dbname=dev sslmode={sslmode}",
            tls.port()
        );
        let output = Command::new(&psql)
            .args(["-X", &conninfo, "-c", r"\conninfo", "-c", "SELECT 6 * 7"])
            .env("PGPASSWORD", "s3cret")
            .output()
            .expect("run psql");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{sslmode}: {stdout} {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.contains("42"), "{stdout}");
        assert_eq!(
            stdout.contains("SSL connection"),
            expect_tls,
            "{sslmode}: {stdout}"
        );
    }
}
