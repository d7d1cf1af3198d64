//! A long oracle soak: `oracle-soak --seeds 1000 [--first 1]`. Prints each failing seed (and
//! why) and exits non-zero if any failed; `--first SEED --seeds 1` replays one.

use std::time::Instant;

use clap::Parser;

#[derive(Parser)]
#[command(about = "Random streams and views, each checked against the same query in batch")]
struct Args {
    /// How many seeds to run.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    first: u64,
    /// Which cases: windowed views (`windows`), joins (`joins`), time-bounded joins of two
    /// streams (`stream-joins`) or all of them (`all`).
    #[arg(long, default_value = "all")]
    kind: String,
    /// The state cache each eddy gets, in MiB (a few KiB makes every state path miss and evict).
    #[arg(long)]
    state_cache_mib: Option<f64>,
    /// The workers each eddy runs views on (default: its own default, the machine's cores).
    #[arg(long)]
    workers: Option<u32>,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let mut server_args = Vec::new();
    if let Some(mib) = args.state_cache_mib {
        server_args.extend(["--state-cache-mib".into(), mib.to_string()]);
    }
    if let Some(workers) = args.workers {
        server_args.extend(["--workers".into(), workers.to_string()]);
    }
    eddy_oracle::set_server_args(server_args);
    let started = Instant::now();
    let mut failed = Vec::new();
    for seed in args.first..args.first + args.seeds {
        let mut outcomes = Vec::new();
        if args.kind == "all" || args.kind == "windows" {
            outcomes.push(("windows", eddy_oracle::run_case(seed).await));
        }
        if args.kind == "all" || args.kind == "joins" {
            outcomes.push(("joins", eddy_oracle::run_join_case(seed).await));
        }
        if args.kind == "all" || args.kind == "stream-joins" {
            outcomes.push((
                "stream-joins",
                eddy_oracle::run_stream_join_case(seed).await,
            ));
        }
        for (kind, outcome) in outcomes {
            match outcome {
                Ok(()) => println!("seed {seed} ({kind}): ok"),
                Err(error) => {
                    println!("seed {seed} ({kind}): FAILED\n{error:#}");
                    failed.push(format!("{seed} ({kind})"));
                }
            }
        }
    }
    println!(
        "{} seeds in {:.1}s, {} failed{}",
        args.seeds,
        started.elapsed().as_secs_f64(),
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(": {failed:?}")
        }
    );
    if failed.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
