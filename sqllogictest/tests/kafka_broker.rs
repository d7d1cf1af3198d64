//! Checks the Kafka test infrastructure itself against the real broker
//! (Tansu) that `scripts/test.sh` starts: topics, keyed and timestamped
//! messages on explicit partitions, manual `assign` reads from offset 0,
//! high watermarks, and a private broker that stops and starts again.
//!
//! Needs `EDDY_KAFKA_BOOTSTRAP` (set by `scripts/test.sh`, or
//! `eval "$(scripts/kafka-broker.sh start)"`); without it these tests fail
//! rather than pass silently.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use eddy_sqllogictest::kafka::{unique_topic, KafkaBroker, Record};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Message, Timestamp};
use rdkafka::{Offset, TopicPartitionList};

/// 2024-01-01T00:00:00Z: far from "now", so a broker that replaced the
/// producer's timestamps with its own clock would be caught.
const BASE_TS: i64 = 1_704_067_200_000;

fn shared_broker() -> KafkaBroker {
    match KafkaBroker::from_env() {
        Ok(broker) => broker,
        Err(error) => panic!("{error:#}"),
    }
}

/// A message as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Read {
    partition: i32,
    offset: i64,
    key: Option<Vec<u8>>,
    payload: Option<Vec<u8>>,
    timestamp: Timestamp,
}

/// Reads `count` messages from `partitions` of `topic`, each from offset 0,
/// with manual assignment (no consumer group).
fn read_from_start(
    consumer: &BaseConsumer,
    topic: &str,
    partitions: &[i32],
    count: usize,
) -> Result<Vec<Read>> {
    let mut assignment = TopicPartitionList::new();
    for &partition in partitions {
        assignment.add_partition_offset(topic, partition, Offset::Offset(0))?;
    }
    consumer.assign(&assignment)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut read = Vec::new();
    while read.len() < count {
        if Instant::now() > deadline {
            bail!("read {} of {count} messages within 60 s", read.len());
        }
        let Some(result) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let message = result.context("consuming")?;
        read.push(Read {
            partition: message.partition(),
            offset: message.offset(),
            key: message.key().map(<[u8]>::to_vec),
            payload: message.payload().map(<[u8]>::to_vec),
            timestamp: message.timestamp(),
        });
    }
    // Nothing beyond what was produced.
    if let Some(Ok(extra)) = consumer.poll(Duration::from_millis(500)) {
        bail!(
            "unexpected extra message at {}/{} offset {}",
            extra.topic(),
            extra.partition(),
            extra.offset()
        );
    }
    Ok(read)
}

#[tokio::test]
async fn produce_and_read_back_two_partitions() -> Result<()> {
    let broker = shared_broker();
    let topic = unique_topic("kafka-broker-smoke");
    broker.create_topic(&topic, 2).await?;

    // 100 messages alternating between partitions 0 and 1.
    let records: Vec<Record> = (0..100_i64)
        .map(|i| {
            Record::payload(format!("value-{i}"))
                .with_key(format!("key-{i}"))
                .with_partition(i32::try_from(i % 2).unwrap())
                .with_timestamp(BASE_TS + i * 1_000)
        })
        .collect();
    let delivered = broker.produce_batch(&topic, &records).await?;
    assert_eq!(delivered.len(), 100);
    for (i, delivery) in (0..100_i64).zip(&delivered) {
        assert_eq!(i64::from(delivery.partition), i % 2, "message {i}");
        assert_eq!(delivery.offset, i / 2, "message {i}: offset");
    }

    for partition in 0..2 {
        let (low, high) = broker.watermarks(&topic, partition)?;
        assert_eq!((low, high), (0, 50), "watermarks of partition {partition}");
    }

    let consumer = broker.consumer()?;
    let read = read_from_start(&consumer, &topic, &[0, 1], 100)?;
    let mut by_partition: BTreeMap<i32, Vec<Read>> = BTreeMap::new();
    for message in read {
        by_partition
            .entry(message.partition)
            .or_default()
            .push(message);
    }
    assert_eq!(by_partition.len(), 2, "{by_partition:?}");
    for (partition, messages) in &by_partition {
        assert_eq!(messages.len(), 50, "partition {partition}");
        for (n, message) in (0_i64..).zip(messages) {
            // Message i went to partition i % 2 at offset i / 2.
            let i = n * 2 + i64::from(*partition);
            let expected = Read {
                partition: *partition,
                offset: n,
                key: Some(format!("key-{i}").into_bytes()),
                payload: Some(format!("value-{i}").into_bytes()),
                timestamp: Timestamp::CreateTime(BASE_TS + i * 1_000),
            };
            assert_eq!(message, &expected, "partition {partition}, offset {n}");
        }
    }

    // A fresh consumer sees the same high watermarks as the producer's offsets.
    for partition in 0..2 {
        let (_, high) = consumer.fetch_watermarks(&topic, partition, Duration::from_secs(30))?;
        assert_eq!(high, 50, "high watermark of partition {partition}");
    }
    Ok(())
}

#[tokio::test]
async fn single_produce_with_null_key_and_payload() -> Result<()> {
    let broker = shared_broker();
    let topic = unique_topic("kafka-broker-single");
    broker.create_topic(&topic, 1).await?;

    let first = broker
        .produce(&topic, Some(0), Some(b"k"), Some(b"v"), Some(BASE_TS))
        .await?;
    assert_eq!((first.partition, first.offset), (0, 0));
    // A tombstone: key without payload. Partition and timestamp left to the
    // client (the partitioner, the time of sending).
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let second = broker.produce(&topic, None, Some(b"k"), None, None).await?;
    assert_eq!((second.partition, second.offset), (0, 1));
    let third = broker.produce(&topic, Some(0), None, None, None).await?;
    assert_eq!((third.partition, third.offset), (0, 2));
    assert_eq!(broker.watermarks(&topic, 0)?, (0, 3));

    let read = read_from_start(&broker.consumer()?, &topic, &[0], 3)?;
    assert_eq!(read[0].key.as_deref(), Some(&b"k"[..]));
    assert_eq!(read[0].payload.as_deref(), Some(&b"v"[..]));
    assert_eq!(read[0].timestamp, Timestamp::CreateTime(BASE_TS));
    assert_eq!(read[1].key.as_deref(), Some(&b"k"[..]));
    assert_eq!(read[1].payload, None, "tombstone payload");
    match read[1].timestamp {
        Timestamp::CreateTime(ts) => assert!(
            u128::try_from(ts)? + 60_000 >= before,
            "timestamp {ts} should be about now ({before})"
        ),
        other => panic!("expected a CreateTime timestamp, got {other:?}"),
    }
    assert_eq!(
        (read[2].key.as_ref(), read[2].payload.as_ref()),
        (None, None)
    );
    Ok(())
}

#[tokio::test]
async fn shared_broker_cannot_be_stopped() {
    let mut broker = shared_broker();
    let error = broker.stop().await.unwrap_err().to_string();
    assert!(error.contains("start_own"), "{error}");
}

#[tokio::test]
async fn own_broker_keeps_data_across_stop_and_start() -> Result<()> {
    let mut broker = KafkaBroker::start_own().await?;
    let bootstrap = broker.bootstrap().to_string();
    let topic = unique_topic("kafka-broker-restart");
    broker.create_topic(&topic, 2).await?;
    let records: Vec<Record> = (0..10_i64)
        .map(|i| {
            Record::payload(format!("v{i}"))
                .with_partition(i32::try_from(i % 2).unwrap())
                .with_timestamp(BASE_TS + i)
        })
        .collect();
    broker.produce_batch(&topic, &records).await?;

    broker.stop().await?;
    broker.start().await?;
    assert_eq!(broker.bootstrap(), bootstrap, "same port after restart");
    assert_eq!(
        broker.watermarks(&topic, 0)?,
        (0, 5),
        "{}",
        broker.log_tail(20)
    );
    assert_eq!(broker.watermarks(&topic, 1)?, (0, 5));

    // Crash, restart, and keep producing with the same client.
    broker.kill9()?;
    broker.start().await?;
    let delivered = broker
        .produce(
            &topic,
            Some(1),
            None,
            Some(b"after crash"),
            Some(BASE_TS + 100),
        )
        .await?;
    assert_eq!((delivered.partition, delivered.offset), (1, 5));
    let read = read_from_start(&broker.consumer()?, &topic, &[0, 1], 11)?;
    let payloads: Vec<_> = read
        .iter()
        .filter(|m| m.partition == 1)
        .map(|m| String::from_utf8_lossy(m.payload.as_deref().unwrap_or_default()).into_owned())
        .collect();
    assert_eq!(payloads, ["v1", "v3", "v5", "v7", "v9", "after crash"]);
    Ok(())
}
