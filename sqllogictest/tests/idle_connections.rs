//! An idle connection does not keep the memory of its largest message: after 40 connections
//! each sent a 1 MiB statement, the server's resident memory is back near where it was.

use std::time::Duration;

use eddy_sqllogictest::wire::{query, startup, RawConnection};
use eddy_sqllogictest::EddyProcess;

fn resident_kib(eddy: &EddyProcess) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", eddy.pid().unwrap())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn idle_connections_give_their_buffers_back() {
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let hello = startup(&[("user", "eddy"), ("database", "dev")]);
    // A statement of 1 MiB that fails fast (a syntax error at its end).
    let big = format!("SELECT 1 {} +", " ".repeat(1 << 20));
    let mut warm = RawConnection::connect(eddy.addr()).await.unwrap();
    warm.send(&[hello.clone(), query(&big)].concat())
        .await
        .unwrap();
    warm.until_ready(Duration::from_secs(30)).await;
    warm.until_ready(Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = resident_kib(&eddy);
    let mut idle = Vec::new();
    for _ in 0..40 {
        let mut connection = RawConnection::connect(eddy.addr()).await.unwrap();
        connection
            .send(&[hello.clone(), query(&big)].concat())
            .await
            .unwrap();
        // The startup's ReadyForQuery, then the statement's error and ReadyForQuery.
        connection.until_ready(Duration::from_secs(30)).await;
        let replies = connection.until_ready(Duration::from_secs(30)).await;
        assert!(replies.iter().any(|m| m.is_error()), "{replies:?}");
        idle.push(connection);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let growth_mib = resident_kib(&eddy).saturating_sub(before) / 1024;
    assert!(
        growth_mib < 20,
        "40 idle connections hold {growth_mib} MiB after one 1 MiB statement each"
    );
    drop(idle);
}
