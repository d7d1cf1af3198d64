//! Each sink's figures as metrics, read live at each scrape (the ones `eddy_catalog.sinks`
//! shows): what its log holds not yet delivered, what it sent, what its target refused.

use std::sync::atomic::Ordering;

use eddy_executor::EngineHandle;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Opts};

const LABELS: &[&str] = &["sink", "input"];

struct Families {
    epochs_behind: IntGaugeVec,
    bytes_behind: IntGaugeVec,
    lag_seconds: GaugeVec,
    messages_sent: IntCounterVec,
    bytes_sent: IntCounterVec,
    messages_refused: IntCounterVec,
    backpressured: IntGaugeVec,
    retrying: IntGaugeVec,
}

impl Families {
    fn new() -> prometheus::Result<Self> {
        let int = |name: &str, help: &str| IntGaugeVec::new(Opts::new(name, help), LABELS);
        let counter = |name: &str, help: &str| IntCounterVec::new(Opts::new(name, help), LABELS);
        Ok(Self {
            epochs_behind: int(
                "eddy_sink_epochs_behind",
                "Epochs in the sink's log not yet delivered to its target",
            )?,
            bytes_behind: int(
                "eddy_sink_bytes_behind",
                "Bytes in the sink's log not yet delivered (bounded by sink.log.max.bytes)",
            )?,
            lag_seconds: GaugeVec::new(
                Opts::new(
                    "eddy_sink_lag_seconds",
                    "Seconds since the oldest epoch not yet delivered was committed (0 when caught up)",
                ),
                LABELS,
            )?,
            messages_sent: counter(
                "eddy_sink_messages_sent_total",
                "Messages the target acknowledged since the server started",
            )?,
            bytes_sent: counter(
                "eddy_sink_bytes_sent_total",
                "Bytes of keys and values the target acknowledged since the server started",
            )?,
            messages_refused: counter(
                "eddy_sink_messages_refused_total",
                "Messages the target refused for good (kept in eddy_catalog.sink_errors)",
            )?,
            backpressured: int(
                "eddy_sink_backpressured",
                "1 while the sink's log is past sink.log.max.bytes and its inputs are held back",
            )?,
            retrying: int(
                "eddy_sink_retrying",
                "1 while the sink's target cannot be reached and its sender retries",
            )?,
        })
    }

    fn collectors(&self) -> Vec<&dyn Collector> {
        vec![
            &self.epochs_behind,
            &self.bytes_behind,
            &self.lag_seconds,
            &self.messages_sent,
            &self.bytes_sent,
            &self.messages_refused,
            &self.backpressured,
            &self.retrying,
        ]
    }
}

/// Reads the sinks' figures at each scrape.
pub struct SinkCollector {
    engine: EngineHandle,
    descs: Vec<Desc>,
}

impl SinkCollector {
    pub fn new(engine: EngineHandle) -> prometheus::Result<Self> {
        let descs = Families::new()?
            .collectors()
            .into_iter()
            .flat_map(|c| c.desc().into_iter().cloned())
            .collect();
        Ok(Self { engine, descs })
    }
}

impl Collector for SinkCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Ok(families) = Families::new() else {
            return Vec::new();
        };
        for sink in self.engine.stats().sinks {
            let labels = [sink.name.as_str(), sink.input.as_str()];
            let shared = &sink.shared;
            let (epochs, bytes, _) = shared.behind();
            families
                .epochs_behind
                .with_label_values(&labels)
                .set(epochs as i64);
            families
                .bytes_behind
                .with_label_values(&labels)
                .set(bytes as i64);
            families
                .lag_seconds
                .with_label_values(&labels)
                .set(shared.lag_seconds());
            families
                .messages_sent
                .with_label_values(&labels)
                .inc_by(shared.messages_sent.load(Ordering::Relaxed));
            families
                .bytes_sent
                .with_label_values(&labels)
                .inc_by(shared.bytes_sent.load(Ordering::Relaxed));
            families
                .messages_refused
                .with_label_values(&labels)
                .inc_by(shared.errors_total());
            families
                .backpressured
                .with_label_values(&labels)
                .set(i64::from(sink.backpressure.is_some()));
            families
                .retrying
                .with_label_values(&labels)
                .set(i64::from(shared.state().state == "retrying"));
        }
        families
            .collectors()
            .into_iter()
            .flat_map(|c| c.collect())
            .collect()
    }
}
