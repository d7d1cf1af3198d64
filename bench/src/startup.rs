//! `startup`: how long eddy takes from exec to accepting connections, fresh and when it
//! restores a source and a view (the `--demo` objects) on restart.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::process::locate_bench_binary;

#[derive(Args)]
pub struct StartupArgs {
    /// Starts measured of each kind.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// The eddy executable (default: $EDDY_BIN, else target/release/eddy, else target/debug/eddy).
    #[arg(long)]
    eddy: Option<std::path::PathBuf>,
}

pub async fn run(args: StartupArgs) -> Result<()> {
    let binary = locate_bench_binary(args.eddy)?;
    println!("eddy: {}", binary.display());
    let mut fresh = Vec::new();
    let mut with_view = Vec::new();
    for _ in 0..args.runs.max(1) {
        let dir = tempfile::Builder::new().prefix("eddy-startup-").tempdir()?;
        fresh.push(time_to_accept(&binary, dir.path(), &[])?);
        // The first --demo start creates the source and view; the next one restores them.
        time_to_accept(&binary, dir.path(), &["--demo"])?;
        with_view.push(time_to_accept(&binary, dir.path(), &["--demo"])?);
    }
    report("fresh data directory", &mut fresh);
    report(
        "restart restoring a source and a running view",
        &mut with_view,
    );
    Ok(())
}

/// Starts eddy and returns how long it took until a TCP connection was accepted.
fn time_to_accept(binary: &Path, dir: &Path, extra: &[&str]) -> Result<Duration> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let address = format!("127.0.0.1:{port}");
    let started = Instant::now();
    let child = Command::new(binary)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(["--listen", &address])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let mut child = KillOnDrop(child);
    loop {
        if TcpStream::connect(&address).is_ok() {
            let took = started.elapsed();
            stop(&mut child.0)?;
            return Ok(took);
        }
        if let Some(status) = child.0.try_wait()? {
            bail!("eddy exited before accepting connections: {status}");
        }
        if started.elapsed() > Duration::from_secs(30) {
            bail!("eddy did not accept connections within 30 s");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// SIGTERM (eddy commits and exits), then waits.
fn stop(child: &mut Child) -> Result<()> {
    Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .context("running kill")?;
    child.wait()?;
    Ok(())
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn report(what: &str, times: &mut [Duration]) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{what}: exec to accepting connections min {:.0} ms, median {:.0} ms, max {:.0} ms ({} starts)",
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1]),
        times.len()
    );
}
