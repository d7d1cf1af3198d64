//! Benchmark commands for Eddy. Not tests: each starts its own `eddy`
//! (the release build when there is one), drives a workload over pgwire and
//! prints figures.
//!
//! - `insert`: multi-row INSERTs into a table feeding a TUMBLE view.
//! - `nexmark`: a Nexmark query over the generator, a JSON-lines file or a
//!   Kafka topic; events/s, events per CPU-second, peak RSS.
//! - `freshness`: a fixed rate into a Kafka topic; append-to-visible latency.
//! - `drain`: a preloaded topic through a slow view; RSS sampled every second.
//! - `bounded`: an hour of event time through TUMBLE and SESSION views; state and RSS over time.
//! - `nexmark-files`: the generator's person, auction and bid events as JSON-lines files.
//! - `recovery`: kill -9 with 250 MB to 1 GB kept, restart: time to accept and to catch up.
//! - `store`: the store alone: epochs of random keys committed, then read back in ranges.
//! - `sink`: a Kafka sink from a 10 M-row view: messages/s and per CPU-second, then
//!   INSERT-to-readable latency.
//! - `serve`: point lookups, range queries and full scans on 10 M-row views, alone and from
//!   64 clients during ingestion.
//!
//! `cargo run --release -p eddy-bench -- nexmark --query q7 --input file --path bids.jsonl`

mod ack_probe;
mod bounded;
mod drain;
mod freshness;
mod insert;
mod kafka_load;
mod nexmark;
mod nexmark_files;
mod process;
mod queries;
#[cfg(test)]
mod query_answers;
mod recovery;
mod serve;
mod serve_mix;
mod sink;
mod startup;
mod store;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "Benchmarks for Eddy (they print figures; they are not tests)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Multi-row INSERTs into an append-only table feeding a TUMBLE view.
    Insert(insert::InsertArgs),
    /// One Nexmark query end to end over a bounded input.
    Nexmark(nexmark::NexmarkArgs),
    /// Bids at a fixed rate into a Kafka topic: event-to-visible latency.
    Freshness(freshness::FreshnessArgs),
    /// A preloaded topic drained through a deliberately slow view: RSS over time.
    Drain(drain::DrainArgs),
    /// An hour of event time through 1 s TUMBLE and 10 s SESSION views: state, disk and RSS.
    Bounded(bounded::BoundedArgs),
    /// Exec to accepting connections, fresh and restoring a view.
    Startup(startup::StartupArgs),
    /// One run of the Nexmark generator as person, auction and bid JSON-lines files.
    NexmarkFiles(nexmark_files::NexmarkFilesArgs),
    /// Views holding 250 MB to 1 GB, kill -9, restart: time to accept and to catch up.
    Recovery(recovery::RecoveryArgs),
    /// Views read like tables: lookups, ranges, scans, 64 clients during ingestion.
    Serve(serve::ServeArgs),
    /// The store alone: commits of random keys, then range reads (no server).
    Store(store::StoreArgs),
    /// A Kafka sink from a 10 M-row view: throughput, then INSERT-to-readable latency.
    Sink(sink::SinkArgs),
}

#[tokio::main]
async fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Insert(args) => insert::run(args).await,
        Command::Nexmark(args) => nexmark::run(args).await,
        Command::Freshness(args) => freshness::run(args).await,
        Command::Drain(args) => drain::run(args).await,
        Command::Bounded(args) => bounded::run(args).await,
        Command::Startup(args) => startup::run(args).await,
        Command::NexmarkFiles(args) => nexmark_files::run(args),
        Command::Recovery(args) => recovery::run(args).await,
        Command::Serve(args) => serve::run(args).await,
        Command::Store(args) => store::run(args),
        Command::Sink(args) => sink::run(args).await,
    }
}
