//! The last start's restore, by phase (the figures of `eddy_catalog.restore`).

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, Opts};

pub struct RestoreCollector {
    seconds: GaugeVec,
}

impl RestoreCollector {
    pub fn new() -> prometheus::Result<Self> {
        Ok(Self {
            seconds: GaugeVec::new(
                Opts::new(
                    "eddy_restore_duration_seconds",
                    "How long this start took to open the store and to restore the catalog",
                ),
                &["phase"],
            )?,
        })
    }
}

impl Collector for RestoreCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.seconds.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        if let Some(report) = crate::restore::last() {
            for (phase, duration) in [
                ("open_store", report.open_store),
                ("restore_catalog", report.restore_catalog),
            ] {
                self.seconds
                    .with_label_values(&[phase])
                    .set(duration.as_secs_f64());
            }
        }
        self.seconds.collect()
    }
}
