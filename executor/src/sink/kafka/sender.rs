//! The Kafka sender: a thread per sink that ships the sink log to the topic.
//!
//! A session opens an idempotent producer, checks the topic kept its partition count, reads
//! where the sink's messages stop in each partition ([`super::resume`]) and then reads the log
//! page by page from its start, sending each message not already in its partition. Messages
//! never expire in the client: while the broker is away they wait (the state says
//! `retrying`) and librdkafka's idempotent retries deliver them once when it is back. At most a
//! window of messages is in flight, so the client's queue never fills. An epoch is delivered
//! once every message of it and before it is acknowledged; the engine then trims it.
//!
//! A message over the size the client or broker takes is refused for good: it goes to
//! `eddy_catalog.sink_errors` and the sender goes on (it is skipped after a restart too).
//! Any other failure of a delivery ends the session: the producer is dropped and a new
//! session starts after a backoff, from the partitions' tails again.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientConfig;

use eddy_storage::{Store, TableId};

use super::{partition_for, resume, KafkaTarget, EPOCH_HEADER, SEQ_HEADER, SINK_HEADER};
use crate::sink::log::{self, LogRecord, Position};
use crate::sink::status::{now_ms, SinkError, SinkShared};

/// Records read from the log at a time.
const PAGE: usize = 1024;
/// At most this many messages, and bytes, in flight.
const WINDOW_MESSAGES: usize = 10_000;
const WINDOW_BYTES: usize = 32 << 20;
/// How long a stopping sender waits for what it has in flight.
const STOP_FLUSH: Duration = Duration::from_secs(5);
const BACKOFF_MIN: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Text kept of a refused message's key and value in the error table.
const ERROR_TEXT_BYTES: usize = 256;

/// What a sender needs: the sink's log, target and identity.
pub struct SenderSetup {
    pub sink: String,
    /// Unique to this sink (also across sinks of the same name): the `eddy.sink` header.
    pub sink_id: String,
    pub target: KafkaTarget,
    /// The topic's partition count when the sink was created.
    pub partitions: i32,
    pub store: Arc<dyn Store>,
    pub log_table: TableId,
    pub shared: Arc<SinkShared>,
    /// Messages refused for good before (from the error table), skipped.
    pub refused: HashSet<Position>,
}

enum SessionEnd {
    /// Try again after a backoff, with a new producer.
    Retry(String),
    /// The sink cannot go on as it is (its topic changed).
    Fatal(String),
}

/// The sender's loop (on a thread of its own), until the sink stops.
pub fn run(mut setup: SenderSetup) {
    let mut backoff = BACKOFF_MIN;
    while !setup.shared.stopped() {
        let started = Instant::now();
        match session(&mut setup) {
            Ok(()) => return,
            Err(SessionEnd::Retry(error)) => {
                tracing::warn!(sink = setup.sink, %error, "sink sender retrying");
                setup.shared.set_state("retrying", Some(error));
            }
            Err(SessionEnd::Fatal(error)) => {
                tracing::error!(sink = setup.sink, %error, "sink sender stopped");
                setup.shared.set_state("failed", Some(error));
                while !setup.shared.stopped() {
                    setup.shared.wait(Duration::from_secs(1));
                }
                return;
            }
        }
        // A session that ran a while was a success: the next failure starts the backoff over.
        if started.elapsed() > BACKOFF_MAX {
            backoff = BACKOFF_MIN;
        }
        sleep_unless_stopped(&setup.shared, backoff);
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

fn sleep_unless_stopped(shared: &SinkShared, duration: Duration) {
    let until = Instant::now() + duration;
    while !shared.stopped() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
    }
}

/// The producer's context: delivery reports and client errors, taken by the session.
#[derive(Default)]
struct Reports {
    deliveries: Mutex<Vec<(Position, Result<(), KafkaError>)>>,
    /// The last error the client reported (a broker gone), cleared by a delivery.
    trouble: Mutex<Option<String>>,
}

impl ClientContext for Reports {
    fn error(&self, error: KafkaError, reason: &str) {
        *self.trouble.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(format!("{error}: {reason}"));
    }
}

impl ProducerContext for Reports {
    type DeliveryOpaque = Box<Position>;

    fn delivery(&self, result: &DeliveryResult<'_>, position: Box<Position>) {
        let outcome = match result {
            Ok(_) => Ok(()),
            Err((error, _)) => Err(error.clone()),
        };
        self.deliveries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((*position, outcome));
    }
}

/// Messages sent and not yet acknowledged, by position.
#[derive(Default)]
struct InFlight {
    positions: BTreeSet<Position>,
    bytes: usize,
    sizes: std::collections::HashMap<Position, usize>,
}

impl InFlight {
    fn add(&mut self, position: Position, bytes: usize) {
        self.positions.insert(position);
        self.sizes.insert(position, bytes);
        self.bytes += bytes;
    }

    fn remove(&mut self, position: Position) -> usize {
        self.positions.remove(&position);
        let bytes = self.sizes.remove(&position).unwrap_or(0);
        self.bytes -= bytes;
        bytes
    }

    fn full(&self) -> bool {
        self.positions.len() >= WINDOW_MESSAGES || self.bytes >= WINDOW_BYTES
    }
}

fn session(setup: &mut SenderSetup) -> Result<(), SessionEnd> {
    let shared = setup.shared.clone();
    let partitions = setup
        .target
        .partitions()
        .map_err(|e| SessionEnd::Retry(e.to_string()))?;
    if partitions != setup.partitions {
        return Err(SessionEnd::Fatal(format!(
            "topic \"{}\" has {partitions} partitions, and had {} when the sink was created: keys would move to other partitions; drop the sink and create it again",
            setup.target.topic, setup.partitions
        )));
    }
    let config: ClientConfig = setup.target.producer_config();
    let producer: BaseProducer<Reports> = config
        .create_with_context(Reports::default())
        .map_err(|e| SessionEnd::Retry(format!("creating the Kafka producer: {e}")))?;
    let resume = resume::last_positions(&setup.target, &setup.sink_id, partitions)
        .map_err(SessionEnd::Retry)?;
    shared.set_state("running", None);
    let outcome = ship(setup, &producer, &resume, partitions);
    // What is in flight lands (or fails) before a next session or sender reads the
    // partitions' tails; past the wait, whatever landed is found there.
    let _ = producer.flush(STOP_FLUSH);
    outcome
}

/// Sends the log from its start, skipping what `resume` says each partition holds, until
/// stopped or a delivery fails.
fn ship(
    setup: &mut SenderSetup,
    producer: &BaseProducer<Reports>,
    resume: &[Option<Position>],
    partitions: i32,
) -> Result<(), SessionEnd> {
    let shared = setup.shared.clone();
    let mut cursor: Option<Position> = None;
    let mut exhausted = false;
    let mut in_flight = InFlight::default();
    let epoch_text = |epoch: u64| epoch.to_string();
    loop {
        if shared.stopped() {
            return Ok(());
        }
        if !in_flight.full() {
            let page = log::read_after(setup.store.as_ref(), setup.log_table, cursor, PAGE)
                .map_err(|e| SessionEnd::Retry(format!("reading the sink log: {e}")))?;
            exhausted = page.len() < PAGE;
            for record in page {
                cursor = Some(record.position());
                let partition = partition_for(
                    record.message.key.as_deref(),
                    record.epoch,
                    record.seq,
                    partitions,
                );
                let already_there =
                    resume[partition as usize].is_some_and(|last| record.position() <= last);
                if already_there || setup.refused.contains(&record.position()) {
                    continue;
                }
                send(
                    setup,
                    producer,
                    &record,
                    partition,
                    &epoch_text,
                    &mut in_flight,
                )?;
            }
        }
        let idle = exhausted && in_flight.positions.is_empty();
        producer.poll(match (idle, in_flight.full()) {
            (false, true) => Duration::from_millis(20),
            _ => Duration::ZERO,
        });
        let deliveries = std::mem::take(
            &mut *producer
                .context()
                .deliveries
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        let delivered_any = !deliveries.is_empty();
        for (position, outcome) in deliveries {
            let bytes = in_flight.remove(position);
            match outcome {
                Ok(()) => {
                    shared
                        .messages_sent
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    shared
                        .bytes_sent
                        .fetch_add(bytes as u64, std::sync::atomic::Ordering::Relaxed);
                }
                Err(error) if too_large(&error) => {
                    refuse(setup, position, &error.to_string(), None);
                }
                Err(error) => {
                    return Err(SessionEnd::Retry(format!(
                        "delivering to topic \"{}\": {error}",
                        setup.target.topic
                    )))
                }
            }
        }
        let trouble = producer
            .context()
            .trouble
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match (trouble, delivered_any) {
            (_, true) => shared.set_state("running", None),
            (Some(error), false) if !in_flight.positions.is_empty() => {
                shared.set_state("retrying", Some(error))
            }
            _ => {}
        }
        // Everything before the first message in flight is delivered; with nothing in flight,
        // everything read (whole epochs, once the log is read to its end).
        let delivered = match (in_flight.positions.first(), cursor) {
            (Some(&(epoch, _)), _) => epoch.checked_sub(1),
            (None, Some((epoch, _))) if exhausted => Some(epoch),
            (None, Some((epoch, _))) => epoch.checked_sub(1),
            (None, None) => None,
        };
        if let Some(epoch) = delivered {
            shared.set_delivered(epoch);
        }
        if idle {
            shared.wait(Duration::from_millis(200));
        }
    }
}

fn send(
    setup: &mut SenderSetup,
    producer: &BaseProducer<Reports>,
    record: &LogRecord,
    partition: i32,
    epoch_text: &dyn Fn(u64) -> String,
    in_flight: &mut InFlight,
) -> Result<(), SessionEnd> {
    let position = record.position();
    let epoch = epoch_text(record.epoch);
    let seq = record.seq.to_string();
    loop {
        let headers = OwnedHeaders::new_with_capacity(3)
            .insert(Header {
                key: SINK_HEADER,
                value: Some(setup.sink_id.as_str()),
            })
            .insert(Header {
                key: EPOCH_HEADER,
                value: Some(epoch.as_str()),
            })
            .insert(Header {
                key: SEQ_HEADER,
                value: Some(seq.as_str()),
            });
        let mut message: BaseRecord<'_, [u8], [u8], Box<Position>> =
            BaseRecord::with_opaque_to(&setup.target.topic, Box::new(position))
                .partition(partition)
                .timestamp(record.ts_ms)
                .headers(headers);
        if let Some(key) = &record.message.key {
            message = message.key(key.as_slice());
        }
        if let Some(value) = &record.message.value {
            message = message.payload(value.as_slice());
        }
        match producer.send(message) {
            Ok(()) => {
                in_flight.add(position, record.bytes());
                return Ok(());
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                producer.poll(Duration::from_millis(50));
            }
            Err((error, _)) if too_large(&error) => {
                refuse(setup, position, &error.to_string(), Some(record));
                return Ok(());
            }
            Err((error, _)) => {
                return Err(SessionEnd::Retry(format!(
                    "producing to topic \"{}\": {error}",
                    setup.target.topic
                )))
            }
        }
    }
}

fn too_large(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize)
    )
}

/// Sets a message the target refuses for good aside for the error table; it is not sent again.
fn refuse(setup: &mut SenderSetup, position: Position, error: &str, record: Option<&LogRecord>) {
    setup.refused.insert(position);
    let text = |bytes: &Option<Vec<u8>>| {
        bytes.as_ref().map(|b| {
            let cut = &b[..b.len().min(ERROR_TEXT_BYTES)];
            String::from_utf8_lossy(cut).into_owned()
        })
    };
    setup.shared.record_error(SinkError {
        sink: setup.sink.clone(),
        epoch: position.0,
        seq: position.1,
        error: error.to_string(),
        key: record.and_then(|r| text(&r.message.key)),
        value: record.and_then(|r| text(&r.message.value)),
        value_bytes: record.map_or(0, |r| r.message.value.as_ref().map_or(0, Vec::len) as u64),
        at_ms: now_ms(),
    });
}
