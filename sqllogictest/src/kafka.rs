//! A real Kafka-protocol broker for tests: Tansu (see `scripts/kafka-broker.sh`
//! and `scripts/install-kafka-broker.sh`), driven with `rdkafka`.
//!
//! Two ways to get a [`KafkaBroker`]:
//!
//! - [`KafkaBroker::from_env`]: the broker `scripts/test.sh` starts once per
//!   run (`scripts/kafka-broker.sh start`) and names in `EDDY_KAFKA_BOOTSTRAP`.
//!   Shared by every test of the run, which run in parallel: it cannot be
//!   stopped from a test, and each test uses its own topics
//!   ([`unique_topic`]).
//! - [`KafkaBroker::start_own`]: a private tansu process on its own port and
//!   data directory (a temporary directory, removed on drop), for
//!   broker-fault tests: [`KafkaBroker::stop`] (SIGTERM), [`KafkaBroker::kill9`]
//!   and [`KafkaBroker::start`] again on the same port and data directory.
//!   The binary is `$EDDY_TANSU_BIN` (exported by `scripts/test.sh`), else
//!   `$EDDY_TOOLS_DIR/bin/tansu`, else `~/.cache/eddy-tools/bin/tansu`.
//!
//! Tansu 0.6.0 quirks that shape this helper: deleting one topic deletes
//! every topic (so there is no `delete_topic`: use [`unique_topic`]),
//! CreatePartitions is unsupported (create a topic with its final partition
//! count), and producing to a topic that does not exist fails with
//! UnknownTopicOrPartition after `message.timeout.ms` (no auto-creation):
//! create every topic first. librdkafka refuses `assign` without a
//! `group.id`, so [`KafkaBroker::consumer`] sets a unique one (assign never
//! joins the group).

use std::fs::OpenOptions;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::future_producer::Delivery;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use rdkafka::ClientConfig;
use tempfile::TempDir;

use crate::free_port;
use own_broker::OwnBroker;

mod own_broker;

/// Environment variable with the bootstrap address of the shared test broker.
pub const BOOTSTRAP_ENV: &str = "EDDY_KAFKA_BOOTSTRAP";
/// Environment variable naming the tansu executable (for `start_own`).
pub const TANSU_BIN_ENV: &str = "EDDY_TANSU_BIN";
/// Environment variable with the directory `scripts/install-kafka-broker.sh`
/// installs into (`bin/tansu` below it).
pub const TOOLS_DIR_ENV: &str = "EDDY_TOOLS_DIR";

/// Time allowed for a request (create topic, metadata, watermarks) and for a
/// message to be delivered. Generous: the machine may be busy compiling.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Time allowed for tansu to open its port (well under a second normally).
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Time allowed for tansu to exit after SIGTERM (about 2 s normally).
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// One message for [`KafkaBroker::produce_batch`]. `None` fields are left to
/// the client: the partitioner picks the partition, the broker sees a null
/// key or payload (a tombstone), the timestamp is the time of sending.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    pub partition: Option<i32>,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    pub timestamp_ms: Option<i64>,
}

impl Record {
    /// A record with this payload and nothing else set.
    pub fn payload(payload: impl Into<Vec<u8>>) -> Self {
        Self {
            payload: Some(payload.into()),
            ..Self::default()
        }
    }

    /// Sets the key.
    pub fn with_key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the partition.
    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Sets the message timestamp (CreateTime, ms since the Unix epoch).
    pub fn with_timestamp(mut self, timestamp_ms: i64) -> Self {
        self.timestamp_ms = Some(timestamp_ms);
        self
    }
}

/// Where a message landed.
pub type Delivered = Delivery;

/// A message read back by [`KafkaBroker::read_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadMessage {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    /// `None` for a tombstone.
    pub payload: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp_ms: Option<i64>,
}

impl ReadMessage {
    /// The value of header `name`, as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .and_then(|(_, value)| value.as_ref())
            .map(|value| String::from_utf8_lossy(value).into_owned())
    }
}

/// A Kafka-protocol broker for a test: the shared one ([`Self::from_env`]) or
/// a private one ([`Self::start_own`]).
pub struct KafkaBroker {
    bootstrap: String,
    producer: FutureProducer,
    admin: AdminClient<DefaultClientContext>,
    /// `Some` for a broker this value started and may stop.
    own: Option<OwnBroker>,
}

impl std::fmt::Debug for KafkaBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaBroker")
            .field("bootstrap", &self.bootstrap)
            .field("own", &self.own)
            .finish_non_exhaustive()
    }
}

impl KafkaBroker {
    /// The shared broker of this test run, from `EDDY_KAFKA_BOOTSTRAP`
    /// (`host:port[,host:port...]`). Fails with instructions when it is unset
    /// or nothing accepts connections there.
    pub fn from_env() -> Result<Self> {
        let bootstrap = std::env::var(BOOTSTRAP_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty());
        let Some(bootstrap) = bootstrap else {
            bail!(
                "{BOOTSTRAP_ENV} is not set: the Kafka tests need a running broker. \
                 Run `scripts/test.sh` (which starts one), or start one yourself with \
                 `eval \"$(scripts/kafka-broker.sh start)\"` (after \
                 `scripts/install-kafka-broker.sh`) and run the tests in that shell; \
                 stop it with `scripts/kafka-broker.sh stop`"
            );
        };
        check_reachable(&bootstrap).with_context(|| {
            format!(
                "{BOOTSTRAP_ENV}={bootstrap} but no broker answers there; \
                 is it running? (`scripts/kafka-broker.sh status`, or `start`)"
            )
        })?;
        Self::connect(bootstrap, None)
    }

    /// Starts a private tansu broker on a free loopback port with a fresh
    /// temporary data directory (sqlite storage), for tests that stop or
    /// crash the broker. Killed when dropped; its directory is removed then.
    pub async fn start_own() -> Result<Self> {
        let binary = find_tansu_binary()?;
        let dir = tempfile::Builder::new()
            .prefix("eddy-kafka-own-")
            .tempdir()
            .context("creating a temporary directory for tansu")?;
        let mut own = OwnBroker {
            binary,
            data_dir: dir.path().to_path_buf(),
            port: free_port()?,
            child: None,
            _temp_dir: Some(dir),
        };
        own.spawn_and_wait().await?;
        Self::connect(format!("127.0.0.1:{}", own.port), Some(own))
    }

    fn connect(bootstrap: String, own: Option<OwnBroker>) -> Result<Self> {
        let producer = producer_config(&bootstrap)
            .create()
            .context("creating a Kafka producer")?;
        let admin = client_config(&bootstrap)
            .create()
            .context("creating a Kafka admin client")?;
        Ok(Self {
            bootstrap,
            producer,
            admin,
            own,
        })
    }

    /// `host:port` for `bootstrap.servers` (and for Eddy's
    /// `properties.bootstrap.server`).
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// A client config with `bootstrap.servers` set, to build other clients.
    pub fn client_config(&self) -> ClientConfig {
        client_config(&self.bootstrap)
    }

    /// A consumer for manual `assign` (no group membership, no offset
    /// commits).
    pub fn consumer(&self) -> Result<BaseConsumer> {
        let mut config = self.client_config();
        config
            // librdkafka refuses `assign` without a group.id ("Unknown
            // group"), though assign never joins the group: a unique one.
            .set("group.id", unique_topic("eddy-test-consumer"))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest");
        config.create().context("creating a Kafka consumer")
    }

    /// Creates `name` with `partitions` partitions (replication 1). Tansu
    /// cannot add partitions later: create with the final count. Fails if the
    /// topic exists.
    pub async fn create_topic(&self, name: &str, partitions: i32) -> Result<()> {
        let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
        let options = AdminOptions::new()
            .request_timeout(Some(REQUEST_TIMEOUT))
            .operation_timeout(Some(REQUEST_TIMEOUT));
        let results = self
            .admin
            .create_topics([&topic], &options)
            .await
            .with_context(|| format!("creating topic {name} at {}", self.bootstrap))?;
        for result in results {
            if let Err((topic, code)) = result {
                bail!("creating topic {topic} at {}: {code}", self.bootstrap);
            }
        }
        Ok(())
    }

    /// Produces one message and waits for its acknowledgement (acks=all).
    pub async fn produce(
        &self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
        timestamp_ms: Option<i64>,
    ) -> Result<Delivered> {
        let record = future_record(topic, partition, key, payload, timestamp_ms);
        self.producer
            .send(record, Timeout::After(REQUEST_TIMEOUT))
            .await
            .map_err(|(error, _message)| anyhow!(error))
            .with_context(|| format!("producing to {topic} at {}", self.bootstrap))
    }

    /// Produces `records` in order (pipelined, not one round trip each) and
    /// waits until every one is acknowledged; returns where each landed, in
    /// the order given. Fails on the first delivery error.
    pub async fn produce_batch(&self, topic: &str, records: &[Record]) -> Result<Vec<Delivered>> {
        let mut pending = Vec::with_capacity(records.len());
        for record in records {
            let deadline = Instant::now() + REQUEST_TIMEOUT;
            let mut future_record = future_record(
                topic,
                record.partition,
                record.key.as_deref(),
                record.payload.as_deref(),
                record.timestamp_ms,
            );
            // Enqueue; when librdkafka's local queue is full, give it time to
            // send (its background thread drains the queue) and retry.
            let delivery = loop {
                match self.producer.send_result(future_record) {
                    Ok(delivery) => break delivery,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back))
                        if Instant::now() < deadline =>
                    {
                        future_record = back;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Err((error, _)) => {
                        return Err(anyhow!(error)).with_context(|| {
                            format!("enqueueing a message for {topic} at {}", self.bootstrap)
                        })
                    }
                }
            };
            pending.push(delivery);
        }
        let mut delivered = Vec::with_capacity(pending.len());
        for (index, delivery) in pending.into_iter().enumerate() {
            let result = delivery
                .await
                .map_err(|_| anyhow!("the producer was dropped before delivering"))?;
            let done = result
                .map_err(|(error, _)| anyhow!(error))
                .with_context(|| {
                    format!("producing message {index} to {topic} at {}", self.bootstrap)
                })?;
            delivered.push(done);
        }
        Ok(delivered)
    }

    /// (low, high) watermark offsets of a partition: high is the offset the
    /// next message will get.
    pub fn watermarks(&self, topic: &str, partition: i32) -> Result<(i64, i64)> {
        self.consumer()?
            .fetch_watermarks(topic, partition, REQUEST_TIMEOUT)
            .with_context(|| format!("fetching watermarks of {topic}/{partition}"))
    }

    /// Every message of `topic` now, read back partition by partition from the first offset
    /// to the high-water offset: the messages in each partition's order. Tansu 0.6 takes time
    /// growing with the square of a partition's length to read it all (about 5 s for 6,000
    /// messages): keep partitions read this way to a few thousand messages.
    pub fn read_all(&self, topic: &str) -> Result<Vec<ReadMessage>> {
        let consumer = self.consumer()?;
        let metadata = consumer
            .fetch_metadata(Some(topic), REQUEST_TIMEOUT)
            .with_context(|| format!("metadata of {topic}"))?;
        let partitions = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .map_or(0, |t| t.partitions().len() as i32);
        let mut messages = Vec::new();
        for partition in 0..partitions {
            let (low, high) = consumer
                .fetch_watermarks(topic, partition, REQUEST_TIMEOUT)
                .with_context(|| format!("watermarks of {topic}/{partition}"))?;
            if high <= low {
                continue;
            }
            let mut assignment = rdkafka::TopicPartitionList::new();
            assignment.add_partition_offset(topic, partition, rdkafka::Offset::Offset(low))?;
            consumer.assign(&assignment)?;
            let deadline = Instant::now() + REQUEST_TIMEOUT;
            let mut next = low;
            while next < high {
                if Instant::now() > deadline {
                    bail!("reading {topic}/{partition}: stuck at offset {next} of {high}");
                }
                let message = match consumer.poll(Duration::from_millis(200)) {
                    None => continue,
                    Some(Ok(message)) => message,
                    // A broker busy with other tests may drop a connection: the client
                    // reconnects and goes on.
                    Some(Err(KafkaError::MessageConsumption(
                        RDKafkaErrorCode::AllBrokersDown | RDKafkaErrorCode::BrokerTransportFailure,
                    ))) => continue,
                    Some(Err(error)) => {
                        return Err(error).with_context(|| format!("reading {topic}/{partition}"))
                    }
                };
                use rdkafka::message::{Headers, Message};
                let headers = message
                    .headers()
                    .map(|headers| {
                        headers
                            .iter()
                            .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                            .collect()
                    })
                    .unwrap_or_default();
                messages.push(ReadMessage {
                    partition,
                    offset: message.offset(),
                    key: message.key().map(<[u8]>::to_vec),
                    payload: message.payload().map(<[u8]>::to_vec),
                    headers,
                    timestamp_ms: message.timestamp().to_millis(),
                });
                next = message.offset() + 1;
            }
        }
        Ok(messages)
    }

    /// Whether this value started the broker (and may stop it).
    pub fn is_own(&self) -> bool {
        self.own.is_some()
    }

    /// Stops a broker from [`Self::start_own`] gracefully (SIGTERM, then
    /// waits for it to exit); its port and data directory are kept for
    /// [`Self::start`]. The shared broker cannot be stopped (an error).
    pub async fn stop(&mut self) -> Result<()> {
        self.own_mut()?.terminate().await
    }

    /// Crashes a broker from [`Self::start_own`] (SIGKILL).
    pub fn kill9(&mut self) -> Result<()> {
        self.own_mut()?.kill9()
    }

    /// Starts a stopped broker from [`Self::start_own`] again on the same port
    /// and data directory, and waits until it accepts connections. Clients
    /// (the producer here, Eddy's consumers) reconnect by themselves.
    pub async fn start(&mut self) -> Result<()> {
        let own = self.own_mut()?;
        if own.is_running() {
            bail!("tansu is already running (pid {:?})", own.pid());
        }
        own.spawn_and_wait().await
    }

    /// The private broker's data directory (`None` for the shared broker).
    pub fn data_dir(&self) -> Option<&Path> {
        self.own.as_ref().map(|own| own.data_dir.as_path())
    }

    /// The last `lines` lines of the private broker's log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        match &self.own {
            Some(own) => own.log_tail(lines),
            None => "(the shared broker's log is broker.log in its data directory: \
                     `scripts/kafka-broker.sh status` names it)"
                .to_string(),
        }
    }

    fn own_mut(&mut self) -> Result<&mut OwnBroker> {
        self.own.as_mut().context(
            "this is the shared test broker (EDDY_KAFKA_BOOTSTRAP), used by tests running \
             in parallel: it cannot be stopped or started from a test; use \
             KafkaBroker::start_own() for broker-fault tests",
        )
    }
}

/// A topic name no other test (or earlier run on the same broker) uses:
/// `prefix-<pid>-<counter>-<nanos>`, with characters Kafka does not allow in
/// `prefix` replaced by `_`. Tansu deletes every topic when one is deleted,
/// so tests never delete topics; they make new ones.
pub fn unique_topic(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let clean: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{clean}-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Finds the tansu executable: `$EDDY_TANSU_BIN`, else
/// `$EDDY_TOOLS_DIR/bin/tansu`, else `~/.cache/eddy-tools/bin/tansu`.
pub fn find_tansu_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(TANSU_BIN_ENV) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            bail!("{TANSU_BIN_ENV}={} does not exist", path.display());
        }
        return Ok(path);
    }
    let tools_dir = match std::env::var_os(TOOLS_DIR_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/eddy-tools")
        }
    };
    let path = tools_dir.join("bin").join("tansu");
    if path.is_file() {
        return Ok(path);
    }
    bail!(
        "tansu was not found at {}; install it with scripts/install-kafka-broker.sh \
         or set {TANSU_BIN_ENV}=/path/to/tansu",
        path.display()
    )
}

fn client_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        // Fail a request rather than hang a test when the broker is gone.
        .set("socket.timeout.ms", "30000");
    config
}

fn producer_config(bootstrap: &str) -> ClientConfig {
    let mut config = client_config(bootstrap);
    config
        .set("acks", "all")
        // A message that cannot be delivered fails the test after this long
        // (librdkafka's default is 5 minutes); covers a broker restart.
        .set(
            "message.timeout.ms",
            REQUEST_TIMEOUT.as_millis().to_string(),
        );
    config
}

fn future_record<'a>(
    topic: &'a str,
    partition: Option<i32>,
    key: Option<&'a [u8]>,
    payload: Option<&'a [u8]>,
    timestamp_ms: Option<i64>,
) -> FutureRecord<'a, [u8], [u8]> {
    let mut record = FutureRecord::to(topic);
    if let Some(partition) = partition {
        record = record.partition(partition);
    }
    if let Some(key) = key {
        record = record.key(key);
    }
    if let Some(payload) = payload {
        record = record.payload(payload);
    }
    if let Some(timestamp) = timestamp_ms {
        record = record.timestamp(timestamp);
    }
    record
}

/// Fails unless the first address of `bootstrap` accepts a TCP connection.
fn check_reachable(bootstrap: &str) -> Result<()> {
    let first = bootstrap.split(',').next().unwrap_or_default().trim();
    let addrs: Vec<SocketAddr> = first
        .to_socket_addrs()
        .with_context(|| format!("resolving {first}"))?
        .collect();
    let mut last_error = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(_) => return Ok(()),
            Err(error) => last_error = Some(error),
        }
    }
    Err(match last_error {
        Some(error) => anyhow!(error).context(format!("connecting to {first}")),
        None => anyhow!("{first} resolves to no address"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_topic_is_unique_and_legal() {
        let a = unique_topic("orders by/user");
        let b = unique_topic("orders by/user");
        assert_ne!(a, b);
        assert!(a.starts_with("orders_by_user-"), "{a}");
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')));
        assert!(a.len() < 249);
    }
}
