//! A broker outage must not make in-order rows late: while the broker is away, or before a
//! partition's high-water offset has been fetched again, no partition counts as idle, and the
//! quiet time before a partition is idle counts from when the broker answered again. So the
//! partition that delivers first after the outage cannot move the watermark past the rows the
//! other one still holds. Against a private Tansu broker, stopped and started again.

use std::time::Duration;

use eddy_sqllogictest::kafka::{unique_topic, KafkaBroker, Record};
use eddy_sqllogictest::EddyProcess;

/// 2024-01-01T00:00:00Z in milliseconds.
const T0: i64 = 1_704_067_200_000;

/// Messages `from..to`, 10 ms of event time apart, alternating between the two partitions.
fn in_order(from: i64, to: i64) -> Vec<Record> {
    (from..to)
        .map(|i| {
            Record::payload(format!(r#"{{"id": {i}, "ts": {}}}"#, T0 + i * 10))
                .with_partition((i % 2) as i32)
        })
        .collect()
}

#[tokio::test]
async fn a_broker_outage_makes_no_row_late() {
    let mut broker = KafkaBroker::start_own().await.expect("a private broker");
    let topic = unique_topic("outage_idle");
    broker.create_topic(&topic, 2).await.unwrap();
    broker
        .produce_batch(&topic, &in_order(0, 1000))
        .await
        .unwrap();
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE SOURCE s (id BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
             WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{}',
                   watermark.idle.timeout = '4s', properties.reconnect.backoff.max.ms = '200')
             FORMAT PLAIN ENCODE JSON;
             CREATE MATERIALIZED VIEW counted AS SELECT count(*) AS n FROM s;",
            broker.bootstrap()
        ))
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    let n: i64 = client
        .query_one("SELECT n FROM counted", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1000);

    // Longer than the idle timeout: the partitions were quiet all along (cut off).
    broker.stop().await.unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    broker.start().await.unwrap();
    // The reader reconnects and fetches the ends (nothing new yet), then the rows come.
    tokio::time::sleep(Duration::from_secs(2)).await;
    broker
        .produce_batch(&topic, &in_order(1000, 2000))
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();

    let row = client
        .query_one(
            "SELECT rows_in, rows_late FROM eddy_catalog.tables WHERE name = 'counted'",
            &[],
        )
        .await
        .unwrap();
    let (rows_in, rows_late): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!(
        (rows_in, rows_late),
        (2000, 0),
        "rows late after the outage"
    );
    let n: i64 = client
        .query_one("SELECT n FROM counted", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 2000);
}
