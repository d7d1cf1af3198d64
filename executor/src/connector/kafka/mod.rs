//! `connector = 'kafka'`: reads a topic with partitions assigned by Eddy (no consumer-group
//! protocol) from the positions Eddy committed, so each message counts exactly once.
//!
//! A broker that goes away is retried with backoff while the error shows in
//! `eddy_catalog.source_progress`; librdkafka keeps its fetch positions, so consumption goes on
//! where it stopped when the broker is back. New partitions are picked up by polling metadata.
//!
//! Losing the broker is reported at once (librdkafka's error callback), and after it no rows
//! are sent before every partition's high-water offset was fetched again: until then the
//! engine counts no partition idle, so the first partition to deliver after an outage cannot
//! move the watermark past rows another one still holds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

mod messages;

use super::decode::Decoder;
use super::{Connector, ConnectorContext, Encode, SourceEvent, SourceSpec, SplitReport};
use crate::{ExecError, Result};

/// Messages per batch at most, and how long a partial batch may wait.
const BATCH_MESSAGES: usize = 4096;
const BATCH_WAIT: Duration = Duration::from_millis(50);
/// How often partitions and high-water offsets are refreshed.
const METADATA_INTERVAL: Duration = Duration::from_secs(1);
const NETWORK_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy)]
enum StartupMode {
    Earliest,
    Latest,
    /// Epoch milliseconds.
    Timestamp(i64),
}

pub struct KafkaConnector {
    topic: String,
    config: ClientConfig,
    bootstrap: String,
    startup: StartupMode,
    /// One per core: a batch of messages is decoded in parts at once.
    decoders: Vec<Decoder>,
    /// Reads the keys of `FORMAT UPSERT` tombstones (JSON objects or bare values, or Avro).
    key_decoder: Decoder,
    spec: SourceSpec,
}

impl KafkaConnector {
    pub fn new(spec: &SourceSpec) -> Result<Self> {
        let topic = spec.required("topic")?.to_string();
        let bootstrap = spec
            .option("properties.bootstrap.server")
            .or_else(|| spec.option("properties.bootstrap.servers"))
            .ok_or_else(|| {
                ExecError::NotSupported(format!(
                    "source \"{}\": connector 'kafka' needs properties.bootstrap.server",
                    spec.name
                ))
            })?
            .to_string();
        let startup = match spec.option("scan.startup.mode").unwrap_or("earliest") {
            "earliest" => StartupMode::Earliest,
            "latest" => StartupMode::Latest,
            "timestamp" => {
                let millis = spec.required("scan.startup.timestamp.millis")?;
                StartupMode::Timestamp(millis.trim().parse().map_err(|_| {
                    ExecError::NotSupported(format!(
                        "source \"{}\": scan.startup.timestamp.millis = '{millis}' is not a number",
                        spec.name
                    ))
                })?)
            }
            other => {
                return Err(ExecError::NotSupported(format!(
                "source \"{}\": scan.startup.mode = '{other}' (use earliest, latest or timestamp)",
                spec.name
            )))
            }
        };
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", format!("eddy-{}", spec.name))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false")
            .set("socket.connection.setup.timeout.ms", "5000")
            // librdkafka's default lets a fetch wait 500 ms for data; a broker that does not
            // answer early when data arrives then adds up to that to every row's freshness.
            .set("fetch.wait.max.ms", "100");
        // Any other properties.* go to librdkafka as they are.
        for (key, value) in &spec.options {
            if let Some(property) = key.strip_prefix("properties.") {
                if property != "bootstrap.server" && property != "bootstrap.servers" {
                    config.set(property, value);
                }
            }
        }
        Ok(Self {
            topic,
            config,
            bootstrap,
            startup,
            decoders: (0..std::thread::available_parallelism().map_or(1, |n| n.get()))
                .map(|_| Decoder::new(spec.payload_schema.clone(), spec.encode.clone()))
                .collect(),
            key_decoder: Decoder::new(
                spec.payload_schema.clone(),
                spec.key_encode.clone().unwrap_or(Encode::Json),
            ),
            spec: spec.clone(),
        })
    }

    fn consumer(&self) -> Result<Consumer_> {
        self.config
            .create_with_context(BrokerWatch::default())
            .map_err(|e| {
                ExecError::NotSupported(format!("Kafka client for {}: {e}", self.bootstrap))
            })
    }

    /// Checks, at CREATE time, that the broker answers and the topic exists.
    pub fn validate(&self) -> Result<()> {
        let consumer = self.consumer()?;
        let metadata = consumer
            .fetch_metadata(Some(&self.topic), NETWORK_TIMEOUT)
            .map_err(|e| {
                ExecError::NotSupported(format!(
                    "cannot reach the Kafka broker at {}: {e}",
                    self.bootstrap
                ))
            })?;
        let found = metadata
            .topics()
            .iter()
            .any(|t| t.name() == self.topic && t.error().is_none() && !t.partitions().is_empty());
        if !found {
            return Err(ExecError::NotSupported(format!(
                "topic \"{}\" does not exist on the Kafka broker at {}",
                self.topic, self.bootstrap
            )));
        }
        Ok(())
    }

    fn partitions(&self, consumer: &Consumer_) -> Result<Vec<i32>> {
        let metadata = consumer
            .fetch_metadata(Some(&self.topic), NETWORK_TIMEOUT)
            .map_err(|e| {
                ExecError::NotSupported(format!("metadata from {}: {e}", self.bootstrap))
            })?;
        let mut partitions: Vec<i32> = metadata
            .topics()
            .iter()
            .filter(|t| t.name() == self.topic)
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        partitions.sort_unstable();
        Ok(partitions)
    }

    /// The offset a partition without a committed position starts at, as a number: a
    /// restart before its first message then resumes from the same place.
    fn start_offset(&self, consumer: &Consumer_, partition: i32) -> Result<i64> {
        let (low, high) = consumer
            .fetch_watermarks(&self.topic, partition, NETWORK_TIMEOUT)
            .map_err(|e| {
                ExecError::NotSupported(format!("offsets from {}: {e}", self.bootstrap))
            })?;
        Ok(match self.startup {
            StartupMode::Earliest => low,
            StartupMode::Latest => high,
            StartupMode::Timestamp(millis) => {
                let mut query = TopicPartitionList::new();
                query
                    .add_partition_offset(&self.topic, partition, Offset::Offset(millis))
                    .map_err(|e| ExecError::NotSupported(e.to_string()))?;
                let found = consumer
                    .offsets_for_times(query, NETWORK_TIMEOUT)
                    .map_err(|e| ExecError::NotSupported(e.to_string()))?;
                match found
                    .find_partition(&self.topic, partition)
                    .map(|p| p.offset())
                {
                    Some(Offset::Offset(offset)) => offset,
                    // No message at or after the time: start at the end.
                    _ => high,
                }
            }
        })
    }

    fn assign(&self, consumer: &Consumer_, positions: &BTreeMap<i32, Offset>) -> Result<()> {
        let mut list = TopicPartitionList::new();
        for (&partition, &offset) in positions {
            list.add_partition_offset(&self.topic, partition, offset)
                .map_err(|e| ExecError::NotSupported(e.to_string()))?;
        }
        consumer
            .assign(&list)
            .map_err(|e| ExecError::NotSupported(format!("assigning partitions: {e}")))
    }

    /// Reports every partition's end and position. Returns whether each end was fetched
    /// (false: the broker did not answer for some), and false for `sent` when stopping.
    fn report_splits(
        &self,
        consumer: &Consumer_,
        partitions: &[i32],
        next: &BTreeMap<i32, i64>,
        generation: u64,
        context: &ConnectorContext,
    ) -> Reported {
        let splits: Vec<SplitReport> = partitions
            .iter()
            .map(|&p| SplitReport {
                split: p.to_string(),
                high_watermark: consumer
                    .fetch_watermarks(&self.topic, p, NETWORK_TIMEOUT)
                    .ok()
                    .map(|(_, high)| high),
                position: next.get(&p).copied(),
            })
            .collect();
        let complete = splits.iter().all(|s| s.high_watermark.is_some());
        let sent = context.send(SourceEvent::Splits { splits, generation });
        Reported { sent, complete }
    }

    /// One connected session: assign, then poll until stopped or an error needs a reconnect.
    fn session(&self, context: &ConnectorContext, next: &mut BTreeMap<i32, i64>) -> Result<()> {
        let consumer = self.consumer()?;
        let mut partitions = self.partitions(&consumer)?;
        for &p in &partitions {
            if let std::collections::btree_map::Entry::Vacant(entry) = next.entry(p) {
                entry.insert(self.start_offset(&consumer, p)?);
            }
        }
        self.assign(&consumer, &self.offsets(&partitions, next))?;
        let mut generation = context.refresh.load(Ordering::Relaxed);
        let reported = self.report_splits(&consumer, &partitions, next, generation, context);
        if !reported.sent {
            return Ok(());
        }
        // Rows wait until every partition's end is known afresh (see the module's doc).
        let mut ends_stale = !reported.complete;
        let mut last_metadata = Instant::now();
        let mut pending: BTreeMap<i32, Vec<PendingMessage>> = BTreeMap::new();
        let mut batch_started = Instant::now();
        while !context.stopped() {
            match consumer.poll(Duration::from_millis(20)) {
                Some(Ok(message)) => {
                    if pending.is_empty() {
                        batch_started = Instant::now();
                    }
                    pending
                        .entry(message.partition())
                        .or_default()
                        .push(PendingMessage {
                            offset: message.offset(),
                            key: message.key().map(|k| k.to_vec()),
                            payload: message.payload().map(|p| p.to_vec()),
                            timestamp: message.timestamp().to_millis(),
                        });
                }
                Some(Err(error)) => {
                    // Transient errors (a broker restarting) are retried by librdkafka.
                    context.send(SourceEvent::Error(format!("{}: {error}", self.bootstrap)));
                    ends_stale = true;
                }
                None => {}
            }
            if let Some(trouble) = consumer.context().take_trouble() {
                context.send(SourceEvent::Error(format!("{}: {trouble}", self.bootstrap)));
                ends_stale = true;
            }
            let full =
                pending.values().map(Vec::len).sum::<usize>() >= context.batch_rows(BATCH_MESSAGES);
            if ends_stale && !pending.is_empty() {
                let reported =
                    self.report_splits(&consumer, &partitions, next, generation, context);
                if !reported.sent {
                    return Ok(());
                }
                ends_stale = !reported.complete;
                last_metadata = Instant::now();
            }
            // While the ends are unknown rows wait (bounded: past a full batch they go anyway).
            let hold = ends_stale && !full;
            if !hold
                && (full || batch_started.elapsed() >= BATCH_WAIT)
                && !self.send_pending(&mut pending, next, context)?
            {
                return Ok(());
            }
            let requested = context.refresh.load(Ordering::Relaxed);
            if requested != generation || last_metadata.elapsed() >= METADATA_INTERVAL {
                // Everything polled before a refresh goes out before its report.
                if !self.send_pending(&mut pending, next, context)? {
                    return Ok(());
                }
                if let Ok(now) = self.partitions(&consumer) {
                    if now != partitions {
                        // New partitions are read from their beginning; known ones go on.
                        for &p in &now {
                            if let std::collections::btree_map::Entry::Vacant(entry) = next.entry(p)
                            {
                                let (low, _) = consumer
                                    .fetch_watermarks(&self.topic, p, NETWORK_TIMEOUT)
                                    .map_err(|e| ExecError::NotSupported(e.to_string()))?;
                                entry.insert(low);
                            }
                        }
                        self.assign(&consumer, &self.offsets(&now, next))?;
                        partitions = now;
                    }
                }
                generation = requested;
                let reported =
                    self.report_splits(&consumer, &partitions, next, generation, context);
                if !reported.sent {
                    return Ok(());
                }
                if !reported.complete {
                    // The broker did not answer: an outage librdkafka has not reported yet.
                    context.send(SourceEvent::Error(format!(
                        "{}: no high-water offsets (broker unreachable?)",
                        self.bootstrap
                    )));
                }
                ends_stale = !reported.complete;
                last_metadata = Instant::now();
            }
        }
        Ok(())
    }

    /// Where to read each partition from.
    fn offsets(&self, partitions: &[i32], next: &BTreeMap<i32, i64>) -> BTreeMap<i32, Offset> {
        partitions
            .iter()
            .map(|p| {
                (
                    *p,
                    next.get(p)
                        .map_or(Offset::Beginning, |&o| Offset::Offset(o)),
                )
            })
            .collect()
    }

    /// Decodes and sends the polled messages, one batch per partition. False: stop.
    fn send_pending(
        &self,
        pending: &mut BTreeMap<i32, Vec<PendingMessage>>,
        next: &mut BTreeMap<i32, i64>,
        context: &ConnectorContext,
    ) -> Result<bool> {
        for (partition, messages) in std::mem::take(pending) {
            let Some(last) = messages.last().map(|m| m.offset) else {
                continue;
            };
            let batch = self.decode(partition, messages)?;
            next.insert(partition, last + 1);
            if !context.send(SourceEvent::Batch(batch)) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// What reporting the splits did.
struct Reported {
    /// The report went out (false: the connector is stopping).
    sent: bool,
    /// Every partition's end was fetched.
    complete: bool,
}

type Consumer_ = BaseConsumer<BrokerWatch>;

/// librdkafka's error callback: remembers that the broker was lost (or a request to it
/// failed) so that the connector reports it and re-fetches the partitions' ends.
#[derive(Default)]
struct BrokerWatch {
    trouble: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl BrokerWatch {
    /// The trouble seen since the last call, if any.
    fn take_trouble(&self) -> Option<String> {
        if !self.trouble.swap(false, Ordering::Relaxed) {
            return None;
        }
        self.reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .or_else(|| Some("broker error".into()))
    }
}

impl ClientContext for BrokerWatch {
    fn error(&self, error: KafkaError, reason: &str) {
        *self.reason.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{error}: {reason}"));
        self.trouble.store(true, Ordering::Relaxed);
    }
}

impl ConsumerContext for BrokerWatch {}

/// A polled message not yet decoded.
struct PendingMessage {
    offset: i64,
    key: Option<Vec<u8>>,
    payload: Option<Vec<u8>>,
    timestamp: Option<i64>,
}

impl Connector for KafkaConnector {
    fn run(self: Box<Self>, context: ConnectorContext) {
        let mut next: BTreeMap<i32, i64> = context
            .positions
            .iter()
            .filter_map(|(split, offset)| split.parse().ok().map(|p| (p, *offset)))
            .collect();
        let mut backoff = Duration::from_millis(250);
        while !context.stopped() {
            match self.session(&context, &mut next) {
                Ok(()) => return,
                Err(error) => {
                    context.send(SourceEvent::Error(error.to_string()));
                    if !context.sleep(backoff) {
                        return;
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        }
    }
}
