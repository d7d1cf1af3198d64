//! `fuzz-soak`: the fuzzers for as long as asked, against the `eddy` in `$EDDY_BIN` (a release
//! build goes faster). Prints each fuzzer's report and exits non-zero when anything that must
//! not happen did (a dead server, a panic, an internal error); every case names its seed.
//!
//!     cargo run --release -p eddy-fuzz --bin fuzz-soak -- --frames 1000000 --sql 300000 --payloads 1000000
//!
//! A failing SQL file's statements, as that run sent them:
//!
//!     cargo run --release -p eddy-fuzz --bin fuzz-soak -- --print-sql-file basic/recover.slt --file-seed 42

use clap::Parser;
use eddy_fuzz::{run_all, Budget};

#[derive(Debug, Parser)]
#[command(
    name = "fuzz-soak",
    about = "Fuzz eddy: protocol frames, mutated SQL, malformed payloads"
)]
struct Args {
    /// Protocol messages to send.
    #[arg(long, default_value_t = 100_000)]
    frames: u64,
    /// SQL statements to run.
    #[arg(long, default_value_t = 30_000)]
    sql: u64,
    /// JSON/CSV payloads to decode.
    #[arg(long, default_value_t = 100_000)]
    payloads: u64,
    /// The seed (a new one each run when not given).
    #[arg(long)]
    seed: Option<u64>,
    /// Print the statements a failure names ("sql file FILE seed N") and run nothing:
    /// `--print-sql-file FILE --file-seed N`.
    #[arg(long, requires = "file_seed")]
    print_sql_file: Option<String>,
    #[arg(long)]
    file_seed: Option<u64>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let (Some(file), Some(seed)) = (&args.print_sql_file, args.file_seed) {
        let corpus = eddy_fuzz::sql::corpus(&eddy_fuzz::slt_dir())?;
        let (_, sqls) = corpus
            .iter()
            .find(|(name, _)| name == file)
            .ok_or_else(|| anyhow::anyhow!("no file {file} in the corpus"))?;
        for (index, sql) in eddy_fuzz::sql::mutated_file(sqls, seed).iter().enumerate() {
            println!("-- statement {index}\n{sql};");
        }
        return Ok(());
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    println!("fuzz-soak seed {seed} (replay with --seed {seed})");
    let started = std::time::Instant::now();
    let reports = run_all(
        seed,
        Budget {
            frames: args.frames,
            sql: args.sql,
            payloads: args.payloads,
        },
    )
    .await?;
    let mut clean = true;
    for report in &reports {
        print!("{report}");
        clean &= report.clean();
    }
    println!("done in {:.0} s", started.elapsed().as_secs_f64());
    if !clean {
        std::process::exit(1);
    }
    Ok(())
}
