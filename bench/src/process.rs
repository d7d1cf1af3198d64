//! The eddy process a benchmark drives: where the binary is, starting it in a
//! kept or temporary directory, and what Linux says about its CPU time and
//! memory (`/proc/<pid>/stat` and `/proc/<pid>/status`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use eddy_sqllogictest::{
    locate_eddy_binary, target_dir_of_current_exe, EddyConfig, EddyProcess, EDDY_BIN_ENV,
};
use tempfile::TempDir;

/// Where eddy runs and what it is started with.
#[derive(clap::Args, Debug, Clone)]
pub struct EddyArgs {
    /// The eddy executable (default: $EDDY_BIN, else target/release/eddy, else target/debug/eddy).
    #[arg(long)]
    pub eddy: Option<PathBuf>,
    /// Keep eddy's data directory and log here (default: a temporary directory).
    #[arg(long = "eddy-dir", id = "eddy_dir")]
    pub dir: Option<PathBuf>,
    /// Passed to eddy as --checkpoint-interval (e.g. 1s).
    #[arg(long)]
    pub checkpoint_interval: Option<String>,
}

/// A started eddy and the directory it works in (removed on drop when temporary).
pub struct BenchEddy {
    pub process: EddyProcess,
    pub pid: u32,
    _temp_dir: Option<TempDir>,
}

impl BenchEddy {
    /// Starts eddy as `args` say and prints its binary, pid and data directory.
    pub async fn start(args: &EddyArgs) -> Result<Self> {
        let binary = locate_bench_binary(args.eddy.clone())?;
        let (dir, temp_dir) = match &args.dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                (dir.clone(), None)
            }
            None => {
                let temp = tempfile::Builder::new().prefix("eddy-bench-").tempdir()?;
                (temp.path().to_path_buf(), Some(temp))
            }
        };
        let mut config = EddyConfig::in_dir(binary.clone(), &dir);
        config.checkpoint_interval = args.checkpoint_interval.clone();
        let process = EddyProcess::start(config).await?;
        let pid = process.pid().context("eddy is not running")?;
        println!("eddy: {} (pid {pid})", binary.display());
        println!("data: {}", process.data_dir().display());
        Ok(Self {
            process,
            pid,
            _temp_dir: temp_dir,
        })
    }
}

/// `--eddy`, else `$EDDY_BIN`, else the release build, else the debug one.
pub fn locate_bench_binary(explicit: Option<PathBuf>) -> Result<PathBuf> {
    let explicit = explicit.or_else(|| std::env::var_os(EDDY_BIN_ENV).map(PathBuf::from));
    let target = target_dir_of_current_exe()?;
    let binary = locate_eddy_binary(explicit, &[target.join("release"), target.join("debug")])?;
    if binary.starts_with(target.join("debug")) {
        eprintln!(
            "warning: no release eddy; benchmarking the debug build (slow). \
             Build one with `cargo build --release -p eddy-server`."
        );
    }
    Ok(binary)
}

pub use eddy_sqllogictest::process_stats::cpu_time;

/// Peak resident set size of a process, in KiB (`VmHWM`).
pub fn vm_hwm_kib(pid: u32) -> Result<u64> {
    status_kib(pid, "VmHWM:")
}

/// Current resident set size of a process, in KiB (`VmRSS`).
pub fn vm_rss_kib(pid: u32) -> Result<u64> {
    status_kib(pid, "VmRSS:")
}

fn status_kib(pid: u32, field: &str) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .with_context(|| format!("no {field} in {path}"))?;
    let kib = line.trim().trim_end_matches("kB").trim();
    kib.parse()
        .with_context(|| format!("bad {field} {line:?} in {path}"))
}

/// KiB as MiB, for printing.
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Total size of the files under `dir`, in bytes.
pub fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))?
        {
            let entry = entry?;
            let metadata = entry.metadata()?;
            if metadata.is_dir() {
                dirs.push(entry.path());
            } else {
                total += metadata.len();
            }
        }
    }
    Ok(total)
}

/// Per second, guarding against a zero duration.
pub fn per_second(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64().max(f64::EPSILON)
}

/// An integer column of any width (NULL as 0).
pub fn int(row: &tokio_postgres::Row, idx: usize) -> Result<i64> {
    use tokio_postgres::types::Type;
    let column = &row.columns()[idx];
    let value = match *column.type_() {
        Type::INT2 => row.try_get::<_, Option<i16>>(idx)?.map(i64::from),
        Type::INT4 => row.try_get::<_, Option<i32>>(idx)?.map(i64::from),
        Type::INT8 => row.try_get::<_, Option<i64>>(idx)?,
        ref other => anyhow::bail!(
            "column {} has type {other}, expected an integer",
            column.name()
        ),
    };
    Ok(value.unwrap_or(0))
}

/// FLUSH, again while eddy gives up waiting for a slow view (its FLUSH waits
/// a bounded time), for up to `limit` in all.
pub async fn flush_until_done(client: &tokio_postgres::Client, limit: Duration) -> Result<()> {
    let started = std::time::Instant::now();
    loop {
        match client.batch_execute("FLUSH").await {
            Ok(()) => return Ok(()),
            Err(error) => {
                let gave_up = error
                    .as_db_error()
                    .is_some_and(|db| db.message().starts_with("FLUSH gave up"));
                if !gave_up || started.elapsed() >= limit {
                    return Err(error).context("FLUSH");
                }
                eprintln!(
                    "FLUSH still waiting after {:.0}s; flushing again",
                    started.elapsed().as_secs_f64()
                );
            }
        }
    }
}
