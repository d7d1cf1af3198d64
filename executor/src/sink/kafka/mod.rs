//! `connector = 'kafka'` sinks: the topic, the client settings, where each message goes.
//!
//! Exactly once without broker transactions (the test broker, Tansu 0.6, has no EndTxn): the
//! sender produces with an idempotent producer (no duplicates or gaps within a producer's life,
//! through the broker's restarts too), choosing every message's partition itself, and each
//! message carries its sink, epoch and sequence in headers (`eddy.sink`, `eddy.epoch`,
//! `eddy.seq`). A new producer (a restart, or after a fatal error) first reads the last
//! messages of each partition ([`resume`]) and sends only what follows them in the log.
//!
//! - [`resume`]: the last position of the sink's messages in each partition.
//! - [`sender`]: the sender thread.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::sink::SinkSpec;
use crate::{ExecError, Result};

pub mod resume;
pub mod sender;

/// Time allowed for a metadata or offsets request.
pub(crate) const NETWORK_TIMEOUT: Duration = Duration::from_secs(5);

/// The headers every message carries.
pub const SINK_HEADER: &str = "eddy.sink";
pub const EPOCH_HEADER: &str = "eddy.epoch";
pub const SEQ_HEADER: &str = "eddy.seq";

/// `properties.bootstrap.server` (or `...servers`) of a Kafka sink.
pub fn bootstrap(spec: &SinkSpec) -> Option<&str> {
    spec.option("properties.bootstrap.server")
        .or_else(|| spec.option("properties.bootstrap.servers"))
}

/// A Kafka sink's topic and client settings.
#[derive(Debug, Clone)]
pub struct KafkaTarget {
    pub topic: String,
    pub bootstrap: String,
    /// `properties.*` other than the bootstrap servers, for librdkafka.
    properties: Vec<(String, String)>,
}

impl KafkaTarget {
    pub fn new(spec: &SinkSpec) -> Result<Self> {
        Self::from_options(&spec.name, &spec.options)
    }

    /// The target a sink named `sink` with `options` (`WITH (...)`) writes to.
    pub fn from_options(sink: &str, options: &BTreeMap<String, String>) -> Result<Self> {
        let missing = |what: &str| {
            ExecError::InvalidOption(format!("sink \"{sink}\": connector 'kafka' needs {what}"))
        };
        let option = |key: &str| options.get(key).map(String::as_str);
        let topic = option("topic")
            .filter(|t| !t.is_empty())
            .ok_or_else(|| missing("topic = '...'"))?;
        let bootstrap = option("properties.bootstrap.server")
            .or_else(|| option("properties.bootstrap.servers"))
            .filter(|b| !b.is_empty())
            .ok_or_else(|| missing("properties.bootstrap.server = 'host:port'"))?;
        let properties = options
            .iter()
            .filter_map(|(key, value)| Some((key.strip_prefix("properties.")?, value)))
            .filter(|(key, _)| *key != "bootstrap.server" && *key != "bootstrap.servers")
            .map(|(key, value)| (key.to_string(), value.clone()))
            .collect();
        Ok(Self {
            topic: topic.to_string(),
            bootstrap: bootstrap.to_string(),
            properties,
        })
    }

    /// Settings shared by the producer and the resume reader.
    pub(crate) fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &self.bootstrap)
            .set("socket.connection.setup.timeout.ms", "5000");
        config
    }

    /// The producer's settings: idempotent (acks from all replicas, at most 5 requests in
    /// flight, retried in order), and messages never expire in the client: while the broker
    /// is away they wait, and the log behind them absorbs what comes meanwhile.
    pub(crate) fn producer_config(&self) -> ClientConfig {
        let mut config = self.client_config();
        config
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("message.timeout.ms", "0")
            .set("linger.ms", "5")
            .set("reconnect.backoff.max.ms", "2000");
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        config
    }

    /// The topic's partition count, asking the broker: the topic must exist.
    pub fn partitions(&self) -> Result<i32> {
        let consumer: BaseConsumer = self
            .client_config()
            .set("group.id", "eddy-sink-check")
            .create()
            .map_err(|e| {
                ExecError::Unreachable(format!("Kafka client for {}: {e}", self.bootstrap))
            })?;
        let metadata = consumer
            .fetch_metadata(Some(&self.topic), NETWORK_TIMEOUT)
            .map_err(|e| {
                ExecError::Unreachable(format!(
                    "cannot reach the Kafka broker at {}: {e}",
                    self.bootstrap
                ))
            })?;
        let partitions = metadata
            .topics()
            .iter()
            .find(|t| t.name() == self.topic && t.error().is_none())
            .map_or(0, |t| t.partitions().len());
        if partitions == 0 {
            return Err(ExecError::UndefinedExternal(format!(
                "topic \"{}\" does not exist on the Kafka broker at {}: create it first (with the partitions it should have: a sink keeps a key on one partition)",
                self.topic, self.bootstrap
            )));
        }
        Ok(partitions as i32)
    }
}

/// The partition of a message: by its key as Kafka's Java client hashes it (murmur2), so that
/// consumers co-partitioned with Java producers find the same keys together; a message with no
/// key goes round by its place in the log.
pub fn partition_for(key: Option<&[u8]>, epoch: u64, seq: u32, partitions: i32) -> i32 {
    let partitions = partitions.max(1);
    match key {
        Some(key) => (murmur2(key) & 0x7fff_ffff) % partitions,
        None => ((epoch.wrapping_add(u64::from(seq))) % partitions as u64) as i32,
    }
}

/// Kafka's murmur2 (the Java client's `Utils.murmur2`).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_the_java_client() {
        // The values of Kafka's own tests of Utils.murmur2.
        for (key, expected) in [
            ("21", -973_932_308),
            ("foobar", -790_332_482),
            ("a-little-bit-long-string", -985_981_536),
            ("a-little-bit-longer-string", -1_486_304_829),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            ("abc", 479_470_107),
        ] {
            assert_eq!(murmur2(key.as_bytes()), expected, "{key}");
        }
    }

    #[test]
    fn keys_stay_on_one_partition_and_keyless_messages_spread() {
        let first = partition_for(Some(b"{\"id\":1}"), 1, 0, 4);
        assert_eq!(partition_for(Some(b"{\"id\":1}"), 9, 7, 4), first);
        let spread: std::collections::BTreeSet<i32> =
            (0..8).map(|seq| partition_for(None, 3, seq, 4)).collect();
        assert_eq!(spread.len(), 4);
    }
}
