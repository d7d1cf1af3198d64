//! `connector = 'nexmark'`: the Nexmark generator as a source, at `nexmark.event.rate` events
//! per second (unthrottled when 0), stopping after `nexmark.max.events` if set.
//!
//! One split (`"0"`) whose position is the next global event number, so a restart continues
//! with exactly the events that follow the committed ones.

use std::time::{Duration, Instant};

use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::compute::cast;

use super::nexmark::{NexmarkConfig, NexmarkGenerator, NexmarkTable};
use super::{
    with_includes, Connector, ConnectorContext, MessageMeta, SourceBatch, SourceEvent, SourceSpec,
    SplitReport,
};
use crate::{ExecError, Result};

const SPLIT: &str = "0";
const MAX_BATCH_ROWS: usize = 8192;

pub struct NexmarkConnector {
    config: NexmarkConfig,
    /// Global events per second; `None`: as fast as the pipeline takes them.
    event_rate: Option<f64>,
    /// For each declared column, its index in the generator's schema.
    columns: Vec<usize>,
    spec: SourceSpec,
}

fn parse<T: std::str::FromStr>(spec: &SourceSpec, key: &str) -> Result<Option<T>> {
    match spec.option(key) {
        None => Ok(None),
        Some(v) => v.trim().parse().map(Some).map_err(|_| {
            ExecError::NotSupported(format!(
                "source \"{}\": option {key} = '{v}' is not a valid number",
                spec.name
            ))
        }),
    }
}

impl NexmarkConnector {
    pub fn new(spec: &SourceSpec) -> Result<Self> {
        let table: NexmarkTable = spec.option("nexmark.table.type").unwrap_or("bid").parse()?;
        let mut config = NexmarkConfig::new(table);
        config.seed = parse(spec, "nexmark.seed")?.unwrap_or(0);
        config.max_events = parse(spec, "nexmark.max.events")?;
        if let Some(gap) = parse::<f64>(spec, "nexmark.inter.event.micros")? {
            config.inter_event_micros = gap;
        }
        let event_rate = parse::<f64>(spec, "nexmark.event.rate")?.filter(|r| *r > 0.0);
        let generated = table.schema();
        let columns = spec
            .payload_schema
            .fields()
            .iter()
            .map(|field| {
                generated.index_of(field.name()).map_err(|_| {
                    let names: Vec<&str> = generated
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect();
                    ExecError::NotSupported(format!(
                        "source \"{}\": nexmark {} has no column \"{}\" (it has {})",
                        spec.name,
                        table,
                        field.name(),
                        names.join(", ")
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            config,
            event_rate,
            columns,
            spec: spec.clone(),
        })
    }

    /// The generator's batch in the declared columns and types.
    fn project(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let columns = self
            .columns
            .iter()
            .zip(self.spec.payload_schema.fields())
            .map(|(&i, field)| {
                let column = batch.column(i);
                if column.data_type() == field.data_type() {
                    Ok(column.clone())
                } else {
                    Ok(cast(column, field.data_type())?)
                }
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let schema = std::sync::Arc::new(datafusion::arrow::datatypes::Schema::new(
            self.spec
                .payload_schema
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        Ok(RecordBatch::try_new(schema, columns)?)
    }
}

impl Connector for NexmarkConnector {
    fn run(self: Box<Self>, context: ConnectorContext) {
        context.send(SourceEvent::Splits {
            splits: vec![SplitReport::new(
                SPLIT,
                self.config.max_events.map(|m| m as i64),
            )],
            generation: 0,
        });
        let mut generator = NexmarkGenerator::new(self.config.clone());
        let start = context.positions.get(SPLIT).copied().unwrap_or(0).max(0) as u64;
        generator.seek(start);
        let started = Instant::now();
        // About 10 ms of events per batch when throttled, so rows arrive smoothly.
        let rows_per_batch = self.event_rate.map_or(MAX_BATCH_ROWS, |rate| {
            ((rate / 100.0) as usize).clamp(1, MAX_BATCH_ROWS)
        });
        loop {
            let Some(batch) = generator.next_batch(context.batch_rows(rows_per_batch)) else {
                context.send(SourceEvent::Finished);
                return;
            };
            let rows = match self
                .project(&batch)
                .and_then(|rows| with_includes(&self.spec, rows, &MessageMeta::default()))
            {
                Ok(rows) => rows,
                Err(error) => {
                    context.send(SourceEvent::Error(error.to_string()));
                    return;
                }
            };
            let position = generator.position();
            let sent = context.send(SourceEvent::Batch(SourceBatch {
                split: SPLIT.to_string(),
                rows,
                next_position: position as i64,
                dead_letters: Vec::new(),
                deletes: None,
            }));
            if !sent {
                return;
            }
            if let Some(rate) = self.event_rate {
                let due = Duration::from_secs_f64((position - start) as f64 / rate);
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    if !context.sleep(wait) {
                        return;
                    }
                }
            }
        }
    }
}
