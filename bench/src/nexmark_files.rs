//! `nexmark-files`: one run of Eddy's Nexmark generator written as three JSON-lines files
//! (`person.jsonl`, `auction.jsonl`, `bid.jsonl`), so that Eddy's file source and other engines
//! (`bench/flink/flink_nexmark.py`) read the very same events. Times are RFC 3339 in UTC
//! (`2015-07-15T00:00:00.001Z`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, Int64Type, TimestampMicrosecondType};
use eddy_executor::connector::nexmark::{NexmarkConfig, NexmarkGenerator, NexmarkTable};

#[derive(Args)]
pub struct NexmarkFilesArgs {
    /// Nexmark events to generate (all kinds: 1 in 50 a person, 3 auctions, 46 bids).
    #[arg(long, default_value_t = 10_000_000)]
    events: u64,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Share of events whose date_time is moved back (up to 800 ms: inside a 1 s watermark).
    #[arg(long, default_value_t = 0.05)]
    out_of_order: f64,
    /// Where to write the three files.
    #[arg(long)]
    out: PathBuf,
}

pub fn run(args: NexmarkFilesArgs) -> Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    for table in [
        NexmarkTable::Person,
        NexmarkTable::Auction,
        NexmarkTable::Bid,
    ] {
        let path = args.out.join(format!("{}.jsonl", table.as_str()));
        let rows = write_table(&args, table, &path)?;
        println!("{}: {rows} rows", path.display());
    }
    Ok(())
}

fn write_table(args: &NexmarkFilesArgs, table: NexmarkTable, path: &Path) -> Result<u64> {
    let mut config = NexmarkConfig::new(table);
    config.seed = args.seed;
    config.max_events = Some(args.events);
    config.out_of_order_prob = args.out_of_order;
    let mut generator = NexmarkGenerator::new(config);
    let mut out = BufWriter::with_capacity(
        1 << 20,
        File::create(path).with_context(|| format!("creating {}", path.display()))?,
    );
    let mut rows = 0;
    let mut line = String::new();
    while let Some(batch) = generator.next_batch(8192) {
        let schema = batch.schema();
        for row in 0..batch.num_rows() {
            line.clear();
            line.push('{');
            for (i, (field, column)) in schema.fields().iter().zip(batch.columns()).enumerate() {
                if i > 0 {
                    line.push(',');
                }
                line.push_str(&serde_json::to_string(field.name())?);
                line.push(':');
                match column.data_type() {
                    DataType::Int64 => {
                        line.push_str(&column.as_primitive::<Int64Type>().value(row).to_string())
                    }
                    DataType::Timestamp(..) => {
                        let micros = column.as_primitive::<TimestampMicrosecondType>().value(row);
                        line.push('"');
                        line.push_str(&rfc3339(micros));
                        line.push('"');
                    }
                    _ => line.push_str(&serde_json::to_string(
                        column.as_string::<i32>().value(row),
                    )?),
                }
                debug_assert!(!column.is_null(row));
            }
            line.push_str("}\n");
            out.write_all(line.as_bytes())?;
            rows += 1;
        }
    }
    out.flush()?;
    Ok(rows)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for microseconds since the Unix epoch (millisecond precision,
/// as the other engines' JSON timestamps).
fn rfc3339(micros: i64) -> String {
    let millis = micros.div_euclid(1000);
    let text = eddy_sqllogictest::sql_timestamp(millis);
    format!("{}Z", text.replacen(' ', "T", 1))
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_are_rfc3339_in_utc() {
        assert_eq!(
            super::rfc3339(1_436_918_400_001_999),
            "2015-07-15T00:00:00.001Z"
        );
    }
}
