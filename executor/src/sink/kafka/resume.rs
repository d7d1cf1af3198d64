//! Where a sink's messages stop in each partition of its topic: the largest (epoch, sequence)
//! among the last messages carrying the sink's id.
//!
//! A producer writes each partition's messages in log order, so everything of the log up to
//! that position in that partition is there, and nothing after it: the sender resumes right
//! after it. The tail is read backwards in growing windows, so other writers' messages at the
//! end of a partition cost a few more reads, not a wrong answer.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::{KafkaTarget, EPOCH_HEADER, NETWORK_TIMEOUT, SEQ_HEADER, SINK_HEADER};
use crate::sink::log::Position;

/// Messages read back from the end of a partition at first; the window grows eightfold while
/// none of them is the sink's.
const FIRST_WINDOW: i64 = 16;
/// How long reading one window may take.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The sink's (epoch, sequence) in a message's headers, if the message is the sink's.
pub fn position_of(headers: Option<&impl Headers>, sink_id: &str) -> Option<Position> {
    let headers = headers?;
    let (mut sink, mut epoch, mut seq) = (None, None, None);
    for header in headers.iter() {
        let value = header.value.and_then(|v| std::str::from_utf8(v).ok());
        match header.key {
            SINK_HEADER => sink = value,
            EPOCH_HEADER => epoch = value.and_then(|v| v.parse::<u64>().ok()),
            SEQ_HEADER => seq = value.and_then(|v| v.parse::<u32>().ok()),
            _ => {}
        }
    }
    match sink == Some(sink_id) {
        true => Some((epoch?, seq?)),
        false => None,
    }
}

/// The last position of sink `sink_id`'s messages in each of the topic's `partitions`
/// (`None` where it has none). An error names what failed (the broker is away, ...).
pub fn last_positions(
    target: &KafkaTarget,
    sink_id: &str,
    partitions: i32,
) -> Result<Vec<Option<Position>>, String> {
    let consumer: BaseConsumer = target
        .client_config()
        .set("group.id", format!("eddy-sink-resume-{sink_id}"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("fetch.wait.max.ms", "50")
        .create()
        .map_err(|e| e.to_string())?;
    (0..partitions)
        .map(|partition| last_in_partition(&consumer, target, sink_id, partition))
        .collect()
}

fn last_in_partition(
    consumer: &BaseConsumer,
    target: &KafkaTarget,
    sink_id: &str,
    partition: i32,
) -> Result<Option<Position>, String> {
    let (low, high) = consumer
        .fetch_watermarks(&target.topic, partition, NETWORK_TIMEOUT)
        .map_err(|e| format!("offsets of partition {partition}: {e}"))?;
    let mut window = FIRST_WINDOW;
    let mut end = high;
    while end > low {
        let start = (end - window).max(low);
        if let Some(found) = read_window(consumer, target, sink_id, partition, start, end)? {
            return Ok(Some(found));
        }
        end = start;
        window = window.saturating_mul(8);
    }
    Ok(None)
}

/// The largest position of the sink's messages at offsets `start..end` of a partition.
fn read_window(
    consumer: &BaseConsumer,
    target: &KafkaTarget,
    sink_id: &str,
    partition: i32,
    start: i64,
    end: i64,
) -> Result<Option<Position>, String> {
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(&target.topic, partition, Offset::Offset(start))
        .map_err(|e| e.to_string())?;
    consumer.assign(&assignment).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut found: Option<Position> = None;
    loop {
        if Instant::now() >= deadline {
            return Err(format!(
                "reading the end of partition {partition} of topic \"{}\" timed out",
                target.topic
            ));
        }
        match consumer.poll(Duration::from_millis(200)) {
            None => continue,
            Some(Ok(message)) => {
                if let Some(position) = position_of(message.headers(), sink_id) {
                    found = found.max(Some(position));
                }
                if message.offset() + 1 >= end {
                    return Ok(found);
                }
            }
            Some(Err(KafkaError::PartitionEOF(_))) => return Ok(found),
            Some(Err(error)) => {
                return Err(format!(
                    "reading the end of partition {partition} of topic \"{}\": {error}",
                    target.topic
                ))
            }
        }
    }
}
