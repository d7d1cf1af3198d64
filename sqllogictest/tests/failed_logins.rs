//! Failed logins leave a trace: a warning each in the log (client address, user, reason class,
//! never the password), at most 20 in 10 s with a count of the rest, and a counter per reason
//! in /metrics. 50 failed logins used to leave nothing at all.

use std::time::Duration;

use eddy_sqllogictest::wire::{self, RawConnection};
use eddy_sqllogictest::{free_port, EddyProcess};

const PASSWORD: &str = "s3cret";
const WRONG: &str = "wrong-password-9731";

async fn wrong_login(eddy: &EddyProcess, user: &str) {
    let mut config = eddy.pg_config();
    config.user(user).password(WRONG);
    let refused = config.connect(tokio_postgres::NoTls).await;
    assert!(refused.is_err(), "{user} logged in with a wrong password");
}

async fn bogus_mechanism(eddy: &EddyProcess) {
    let mut raw = RawConnection::connect(eddy.addr()).await.unwrap();
    raw.send(&wire::startup(&[("user", "alice"), ("database", "dev")]))
        .await
        .unwrap();
    raw.send(&wire::sasl_initial("BOGUS-MECHANISM"))
        .await
        .unwrap();
    let answer = raw.until_closed(Duration::from_secs(30)).await;
    assert!(answer.iter().any(|m| m.is_error()), "{answer:?}");
}

fn metric(text: &str, line_start: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(line_start))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {line_start} in:\n{text}"))
}

#[tokio::test]
async fn failed_logins_are_logged_rate_limited_and_counted() {
    let metrics_port = free_port().unwrap();
    let eddy = EddyProcess::start_fresh_with(|config| {
        config.extra_args = vec![
            "--user".into(),
            "alice".into(),
            "--password".into(),
            PASSWORD.into(),
            "--metrics-listen".into(),
            format!("127.0.0.1:{metrics_port}"),
        ];
    })
    .await
    .unwrap();
    // All at once: each failure is answered late (the throttle), not the next one's turn.
    let mut attempts = Vec::new();
    for i in 0..50 {
        let eddy = &eddy;
        attempts.push(async move {
            match i % 5 {
                0..=2 => wrong_login(eddy, "alice").await,
                3 => wrong_login(eddy, "mallory").await,
                _ => bogus_mechanism(eddy).await,
            }
        });
    }
    futures::future::join_all(attempts).await;
    let scrape = || {
        let mut response = ureq::get(&format!("http://127.0.0.1:{metrics_port}/metrics"))
            .call()
            .expect("scrape");
        response.body_mut().read_to_string().unwrap()
    };
    let metrics = scrape();
    assert_eq!(
        metric(&metrics, "eddy_login_failures_total{reason=\"password\"}"),
        40
    );
    assert_eq!(
        metric(&metrics, "eddy_login_failures_total{reason=\"mechanism\"}"),
        10
    );
    let log = std::fs::read_to_string(eddy.log_file()).unwrap();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("login failed")).collect();
    assert_eq!(lines.len(), 20, "{}", lines.join("\n"));
    for line in &lines {
        assert!(line.contains("client=127.0.0.1:"), "{line}");
        assert!(
            line.contains("user=\"alice\"") || line.contains("user=\"mallory\""),
            "{line}"
        );
        assert!(
            line.contains("reason=\"password\"") || line.contains("reason=\"mechanism\""),
            "{line}"
        );
    }
    assert!(!log.contains(WRONG), "the log holds a password");
    // The next interval's first failure says how many the last one left out.
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    wrong_login(&eddy, "alice").await;
    let log = std::fs::read_to_string(eddy.log_file()).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("failed_logins=30") && l.contains("more failed logins")),
        "{}",
        eddy.log_tail(10)
    );
    assert_eq!(
        log.lines().filter(|l| l.contains("login failed")).count(),
        21
    );
    assert_eq!(
        metric(&scrape(), "eddy_login_failures_total{reason=\"password\"}"),
        41
    );
}
