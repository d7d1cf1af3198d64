//! A Kafka-protocol broker for the benchmarks and a fast bulk producer.
//!
//! The broker is the one named by `EDDY_KAFKA_BOOTSTRAP` (e.g. from
//! `scripts/kafka-broker.sh start`) when set, else a private Tansu started
//! for the run (removed afterwards). The producer batches (linger, large
//! batches, a deep local queue) and sends round-robin over the partitions.

use std::io::BufRead;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use eddy_sqllogictest::kafka::{KafkaBroker, BOOTSTRAP_ENV};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;

/// The shared broker when `EDDY_KAFKA_BOOTSTRAP` is set, else a private one.
pub async fn broker() -> Result<KafkaBroker> {
    if std::env::var_os(BOOTSTRAP_ENV).is_some() {
        let broker = KafkaBroker::from_env()?;
        println!("kafka: {} (from {BOOTSTRAP_ENV})", broker.bootstrap());
        Ok(broker)
    } else {
        let broker = KafkaBroker::start_own().await?;
        println!("kafka: private tansu at {}", broker.bootstrap());
        Ok(broker)
    }
}

/// Counts deliveries and keeps the first failure.
#[derive(Default)]
pub struct Deliveries {
    pub delivered: AtomicU64,
    pub failed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _opaque: ()) {
        match result {
            Ok(_) => {
                self.delivered.fetch_add(1, Ordering::Relaxed);
            }
            Err((error, _)) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                let mut first = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
                first.get_or_insert_with(|| error.to_string());
            }
        }
    }
}

/// A producer tuned for throughput: batches of up to 1 MiB, 20 ms linger.
pub fn bulk_producer(broker: &KafkaBroker, linger_ms: u32) -> Result<ThreadedProducer<Deliveries>> {
    let mut config = broker.client_config();
    config
        .set("linger.ms", linger_ms.to_string())
        .set("batch.size", "1048576")
        .set("batch.num.messages", "100000")
        .set("queue.buffering.max.messages", "1000000")
        .set("queue.buffering.max.kbytes", "1048576")
        .set("message.timeout.ms", "300000")
        .set("acks", "1");
    config
        .create_with_context(Deliveries::default())
        .context("creating a Kafka producer")
}

/// Enqueues one message for `partition`, waiting while the local queue is full.
pub fn send(
    producer: &ThreadedProducer<Deliveries>,
    topic: &str,
    partition: i32,
    payload: &[u8],
) -> Result<()> {
    let mut record = BaseRecord::<(), [u8]>::to(topic)
        .partition(partition)
        .payload(payload);
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err((error, _)) => return Err(error).context("enqueueing a message"),
        }
    }
}

/// Waits for every enqueued message and fails if any was not delivered.
pub fn finish(producer: &ThreadedProducer<Deliveries>, sent: u64) -> Result<()> {
    producer
        .flush(Duration::from_secs(600))
        .context("waiting for the producer to deliver")?;
    let context = producer.context();
    let failed = context.failed.load(Ordering::Relaxed);
    if failed > 0 {
        let first = context
            .first_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        bail!("{failed} of {sent} messages were not delivered (first error: {first:?})");
    }
    Ok(())
}

/// Produces every line of a JSON-lines file into `topic`, line `i` to
/// partition `i % partitions` (like `split -n r/N`). Returns the line count.
pub async fn preload_file(
    broker: &KafkaBroker,
    topic: &str,
    partitions: i32,
    path: &Path,
) -> Result<u64> {
    let producer = bulk_producer(broker, 20)?;
    let topic_name = topic.to_string();
    let path = path.to_path_buf();
    let started = Instant::now();
    let lines = tokio::task::spawn_blocking(move || -> Result<u64> {
        let file =
            std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
        let mut line = Vec::new();
        let mut sent = 0u64;
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            let payload = line.strip_suffix(b"\n").unwrap_or(&line);
            if payload.is_empty() {
                continue;
            }
            send(
                &producer,
                &topic_name,
                (sent % partitions as u64) as i32,
                payload,
            )?;
            sent += 1;
        }
        finish(&producer, sent)?;
        Ok(sent)
    })
    .await??;
    let elapsed = started.elapsed();
    println!(
        "preloaded {lines} messages into {topic} ({partitions} partitions) in {:.1}s ({:.0} msg/s)",
        elapsed.as_secs_f64(),
        lines as f64 / elapsed.as_secs_f64()
    );
    Ok(lines)
}

/// Messages a topic holds: the sum of the partitions' high watermarks.
pub fn topic_messages(broker: &KafkaBroker, topic: &str, partitions: i32) -> Result<u64> {
    let mut total = 0;
    for partition in 0..partitions {
        let (low, high) = broker.watermarks(topic, partition)?;
        total += (high - low).max(0) as u64;
    }
    Ok(total)
}
