//! What Linux says about a process's CPU time (`/proc/<pid>/stat`): the tests that check an idle
//! server stays idle, and the benchmarks' events per CPU-second.

use std::time::Duration;

use anyhow::{Context, Result};

/// User plus system CPU time the process has used so far.
pub fn cpu_time(pid: u32) -> Result<Duration> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    // The command name (field 2) is in parentheses and may hold spaces:
    // count fields after the last ')'. There, field 3 (state) is index 0.
    let after = stat
        .rsplit_once(')')
        .with_context(|| format!("no ')' in {path}"))?
        .1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |index: usize| -> Result<u64> {
        fields
            .get(index)
            .with_context(|| format!("{path} has fewer fields than expected"))?
            .parse()
            .with_context(|| format!("bad CPU time field in {path}"))
    };
    // utime is field 14, stime field 15: indexes 11 and 12 after the state.
    let ticks = tick(11)? + tick(12)?;
    Ok(Duration::from_millis(ticks * 1000 / CLOCK_TICKS_PER_SECOND))
}

/// `sysconf(_SC_CLK_TCK)`: 100 on every Linux platform Eddy runs on (the
/// kernel's USER_HZ, fixed by its ABI).
const CLOCK_TICKS_PER_SECOND: u64 = 100;
