//! `eddy --demo`: the main command shows a live view with nothing else running.

use std::time::{Duration, Instant};

use eddy_sqllogictest::{EddyProcess, DEFAULT_STOP_TIMEOUT};
use tokio_postgres::Client;

async fn total_bids(client: &Client) -> i64 {
    client
        .query_one("SELECT coalesce(sum(bids), 0) FROM hot_auctions", &[])
        .await
        .unwrap()
        .get(0)
}

/// Waits until the view holds more than `above` bids, or fails after 30 s.
async fn bids_above(client: &Client, above: i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let total = total_bids(client).await;
        if total > above {
            return total;
        }
        assert!(
            Instant::now() < deadline,
            "hot_auctions stayed at {total} bids"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn demo_view_is_live_and_survives_a_restart() {
    let mut eddy = EddyProcess::start_fresh_with(|c| {
        c.extra_args.push("--demo".into());
        c.checkpoint_interval = Some("200ms".into());
    })
    .await
    .unwrap();
    let (client, _conn) = eddy.connect().await.unwrap();
    let first = bids_above(&client, 0).await;
    // It moves: the generator keeps producing at 1,000 bids a second.
    let second = bids_above(&client, first).await;
    assert!(second > first);
    let sources: Vec<String> = client
        .query("SHOW SOURCES", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(sources, vec!["bid".to_string()]);
    drop(client);

    // A second start with --demo keeps the objects (and their rows) it finds.
    eddy.terminate(DEFAULT_STOP_TIMEOUT).await.unwrap();
    eddy.restart().await.unwrap();
    let (client, _conn) = eddy.connect().await.unwrap();
    let after = total_bids(&client).await;
    assert!(
        after >= second,
        "{after} bids after the restart, {second} before"
    );
    bids_above(&client, after).await;
    let views = client.query("SHOW MATERIALIZED VIEWS", &[]).await.unwrap();
    assert_eq!(views.len(), 1);
    assert!(eddy.log_tail(200).contains("already there"));
}
