//! `store`: the store alone, without a server: epochs of random keys written through the
//! `Store` trait as the engine writes them (one `EpochBatch` per commit, fsynced), then read
//! back in ranges. Rows per CPU-second of this process, and its peak RSS.

use std::time::Instant;

use anyhow::Result;
use clap::Args;
use eddy_storage::{EpochBatch, FjallStore, KeyRange, Store};

use crate::process::{cpu_time, mib, per_second, vm_hwm_kib};

#[derive(Args)]
pub struct StoreArgs {
    /// Rows to write.
    #[arg(long, default_value_t = 2_000_000)]
    rows: u64,
    /// Rows per commit.
    #[arg(long, default_value_t = 10_000)]
    commit: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 120)]
    value_bytes: usize,
    /// The store's block cache, in MiB.
    #[arg(long, default_value_t = eddy_storage::fjall_store::DEFAULT_CACHE_MIB)]
    cache_mib: u64,
    /// Where to put the data directory (a temporary one when not given).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
}

/// A view's table id, as the engine would hand out.
const TABLE: u32 = 16;

/// The row key of row `i`: 8 bytes spread over the key space, as hashed stream keys are.
fn key(i: u64) -> [u8; 8] {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

pub fn run(args: StoreArgs) -> Result<()> {
    let temp = tempfile::tempdir()?;
    let dir = args.dir.clone().unwrap_or_else(|| temp.path().join("data"));
    let store = FjallStore::open_with_cache(&dir, args.cache_mib << 20)?;
    let pid = std::process::id();
    let value = vec![42u8; args.value_bytes];

    let (started, cpu_before) = (Instant::now(), cpu_time(pid)?);
    let mut written = 0;
    while written < args.rows {
        let mut batch = EpochBatch::default();
        for i in written..(written + args.commit).min(args.rows) {
            batch.put(TABLE, &key(i), value.clone());
        }
        written += batch.len() as u64;
        store.commit(&batch)?;
    }
    let (wall, cpu) = (started.elapsed(), cpu_time(pid)? - cpu_before);
    println!(
        "wrote {written} rows in {} commits: {:.2} s wall, {:.2} CPU-s, {:.0} rows per CPU-second",
        written.div_ceil(args.commit),
        wall.as_secs_f64(),
        cpu.as_secs_f64(),
        per_second(written, cpu)
    );

    let (started, cpu_before) = (Instant::now(), cpu_time(pid)?);
    let snapshot = store.snapshot()?;
    let mut range = KeyRange::all();
    let mut read = 0;
    loop {
        let rows = snapshot.read_range(TABLE, &range, 8192)?;
        let Some((last, _)) = rows.last() else { break };
        range.start = std::ops::Bound::Excluded(last.clone());
        read += rows.len() as u64;
    }
    let (wall, cpu) = (started.elapsed(), cpu_time(pid)? - cpu_before);
    println!(
        "read {read} rows in ranges of 8192: {:.2} s wall, {:.0} rows per CPU-second",
        wall.as_secs_f64(),
        per_second(read, cpu)
    );
    let stats = store.stats();
    println!(
        "peak RSS {:.0} MiB; on disk {:.0} MiB for {:.0} MiB of keys and values",
        mib(vm_hwm_kib(pid)?),
        stats.disk_bytes as f64 / (1 << 20) as f64,
        (written * (4 + 8 + args.value_bytes as u64)) as f64 / (1 << 20) as f64
    );
    Ok(())
}
