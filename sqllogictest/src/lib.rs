//! Test harness around the `eddy` binary: start it on a free loopback port
//! with its own data directory, crash it (`kill -9`), stop it (SIGTERM) and
//! start it again on the same data directory.
//!
//! Used by the `.slt` runner (`tests/slt.rs`), the recovery test
//! (`tests/recovery.rs`) and the benchmarks (`bench/`).
//!
//! - [`find_eddy_binary`]: where the `eddy` executable is.
//! - [`EddyConfig`]: what to start (binary, data directory, flags).
//! - [`EddyProcess`]: one running server, killed when dropped.
//! - [`sql_timestamp`]: timestamp literals for generated rows.
//! - [`kafka`]: a real Kafka-protocol broker (Tansu) for the Kafka tests.
//! - [`wire`]: a raw protocol client, for what drivers never send.
//! - [`postgres`]: a throwaway PostgreSQL 15, the reference of the differential tests.
//! - [`process_stats`]: a process's CPU time.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tempfile::TempDir;
use tokio::task::JoinHandle;

pub mod files;
pub mod kafka;
pub mod postgres;
pub mod process_stats;
pub mod rows;
pub mod wire;

/// Environment variable naming the `eddy` executable to test.
pub const EDDY_BIN_ENV: &str = "EDDY_BIN";
/// Environment variable: seconds to wait for eddy to accept connections.
pub const START_TIMEOUT_ENV: &str = "EDDY_START_TIMEOUT";
/// Database name the harness connects to (any name is accepted by eddy).
pub const DATABASE: &str = "dev";
/// User name the harness connects as (any name is accepted by eddy).
pub const USER: &str = "eddy";

/// Default time allowed for eddy to open its port; a debug build that
/// replays a large data directory can be slow.
const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time allowed for a graceful (SIGTERM) shutdown.
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// Finds the `eddy` executable: `$EDDY_BIN`, else `eddy` in the target
/// profile directory of the running executable (`target/debug/eddy` for a
/// test in `target/debug/deps/`, or a binary in `target/debug/`).
pub fn find_eddy_binary() -> Result<PathBuf> {
    locate_eddy_binary(
        std::env::var_os(EDDY_BIN_ENV).map(PathBuf::from),
        &profile_dir_candidates()?,
    )
}

/// `explicit` if given (it must exist), else the first `eddy` found in
/// `dirs`; the error says how to build it.
pub fn locate_eddy_binary(explicit: Option<PathBuf>, dirs: &[PathBuf]) -> Result<PathBuf> {
    if let Some(path) = explicit {
        if !path.is_file() {
            bail!("the eddy binary {} does not exist", path.display());
        }
        return Ok(path);
    }
    let candidates: Vec<PathBuf> = dirs.iter().map(|dir| dir.join(exe_name("eddy"))).collect();
    if let Some(found) = candidates.iter().find(|path| path.is_file()) {
        return Ok(found.clone());
    }
    bail!(
        "the eddy binary was not found (looked at {}); build it with \
         `cargo build -p eddy-server` (same CARGO_TARGET_DIR as the tests) \
         or set {EDDY_BIN_ENV}=/path/to/eddy",
        candidates
            .iter()
            .map(|path| path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The cargo target directory the running executable was built into
/// (`target/` for `target/debug/deps/x` and for `target/debug/x`).
pub fn target_dir_of_current_exe() -> Result<PathBuf> {
    let profile_dir = profile_dir_candidates()?
        .into_iter()
        .next()
        .context("the current executable has no parent directory")?;
    profile_dir
        .parent()
        .map(Path::to_path_buf)
        .context("the profile directory has no parent")
}

/// Profile directories (`target/<profile>`) the current executable may be
/// in, most likely first.
fn profile_dir_candidates() -> Result<Vec<PathBuf>> {
    let exe = std::env::current_exe().context("cannot locate the current executable")?;
    let dir = exe
        .parent()
        .context("the current executable has no parent directory")?;
    let mut dirs = Vec::new();
    // Tests and benches live in `<profile>/deps`, binaries in `<profile>`.
    if dir.file_name().is_some_and(|name| name == "deps") {
        if let Some(profile) = dir.parent() {
            dirs.push(profile.to_path_buf());
        }
    }
    dirs.push(dir.to_path_buf());
    Ok(dirs)
}

fn exe_name(name: &str) -> String {
    format!("{name}{}", std::env::consts::EXE_SUFFIX)
}

/// Returns a loopback port that was free a moment ago and that this process has not handed
/// out before (tests run in parallel threads; two servers told the same port would race).
pub fn free_port() -> Result<u16> {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    loop {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding port 0")?;
        let port = listener.local_addr()?.port();
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
        if handed_out.insert(port) {
            return Ok(port);
        }
    }
}

/// What eddy logs once its Postgres listener is bound.
const ACCEPTING_LINE: &str = "eddy is accepting connections";

/// What to start.
#[derive(Debug, Clone)]
pub struct EddyConfig {
    /// The `eddy` executable.
    pub binary: PathBuf,
    /// `--data-dir`; kept across restarts.
    pub data_dir: PathBuf,
    /// eddy's stdout and stderr are appended here.
    pub log_file: PathBuf,
    /// `--checkpoint-interval` (e.g. `200ms`); eddy's default when `None`.
    pub checkpoint_interval: Option<String>,
    /// Further command-line arguments.
    pub extra_args: Vec<String>,
    /// Further environment variables.
    pub env: Vec<(String, String)>,
    /// How long to wait for the port to accept connections.
    pub start_timeout: Duration,
    /// Run the server as this user and group id (the harness runs as root), e.g. so that
    /// file permissions apply to it.
    pub run_as: Option<(u32, u32)>,
}

impl EddyConfig {
    /// A config for `binary` using `dir/data` and `dir/eddy.log`.
    pub fn in_dir(binary: PathBuf, dir: &Path) -> Self {
        Self {
            binary,
            data_dir: dir.join("data"),
            log_file: dir.join("eddy.log"),
            checkpoint_interval: None,
            extra_args: Vec::new(),
            env: Vec::new(),
            start_timeout: start_timeout_from_env(),
            run_as: None,
        }
    }
}

fn start_timeout_from_env() -> Duration {
    std::env::var(START_TIMEOUT_ENV)
        .ok()
        .and_then(|secs| secs.parse::<u64>().ok())
        .map_or(DEFAULT_START_TIMEOUT, Duration::from_secs)
}

/// A running `eddy` server. Dropping it kills the process (`kill -9`).
#[derive(Debug)]
pub struct EddyProcess {
    config: EddyConfig,
    port: u16,
    child: Option<Child>,
    /// Owns the temporary directory of [`EddyProcess::start_fresh`].
    temp_dir: Option<TempDir>,
}

impl EddyProcess {
    /// Starts `eddy` (from [`find_eddy_binary`]) with a fresh temporary data
    /// directory, removed when this value is dropped.
    pub async fn start_fresh() -> Result<Self> {
        Self::start_fresh_with(|_| {}).await
    }

    /// Like [`EddyProcess::start_fresh`], letting `adjust` change the config
    /// (flags, timeouts) first.
    pub async fn start_fresh_with(adjust: impl FnOnce(&mut EddyConfig)) -> Result<Self> {
        let binary = find_eddy_binary()?;
        let temp_dir = tempfile::Builder::new()
            .prefix("eddy-test-")
            .tempdir()
            .context("creating a temporary directory")?;
        let mut config = EddyConfig::in_dir(binary, temp_dir.path());
        adjust(&mut config);
        let mut process = Self::start(config).await?;
        process.temp_dir = Some(temp_dir);
        Ok(process)
    }

    /// Starts `eddy` with `config` on a free loopback port and waits until it
    /// accepts connections.
    pub async fn start(config: EddyConfig) -> Result<Self> {
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("creating {}", config.data_dir.display()))?;
        let mut process = Self {
            config,
            port: free_port()?,
            child: None,
            temp_dir: None,
        };
        process.spawn_and_wait().await?;
        Ok(process)
    }

    /// The port eddy listens on (the same across restarts unless it was
    /// taken meanwhile).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The data directory (kept across restarts).
    pub fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }

    /// The file eddy's output goes to.
    pub fn log_file(&self) -> &Path {
        &self.config.log_file
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is still alive (not exited, not killed).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(Ok(Some(_)) | Err(_)) | None => false,
        }
    }

    /// Connection settings for this server (user [`USER`], database [`DATABASE`]).
    pub fn pg_config(&self) -> tokio_postgres::Config {
        let mut config = tokio_postgres::Config::new();
        config
            .host("127.0.0.1")
            .port(self.port)
            .user(USER)
            .dbname(DATABASE)
            .connect_timeout(Duration::from_secs(10));
        config
    }

    /// Opens a client connection; its driver task runs until the client is
    /// dropped or the server goes away.
    pub async fn connect(&self) -> Result<(tokio_postgres::Client, JoinHandle<()>)> {
        let (client, connection) = self
            .pg_config()
            .connect(tokio_postgres::NoTls)
            .await
            .with_context(|| format!("connecting to eddy at {}", self.addr()))?;
        // The error surfaces to the client's next call; nothing to do here.
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok((client, driver))
    }

    /// Crashes the server: SIGKILL, then reaps it. A no-op when not running.
    pub fn kill9(&mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            self.log_marker("harness: kill -9")?;
            // kill() fails only when the process already exited, which is fine.
            let _ = child.kill();
            child.wait().context("waiting for the killed eddy")?;
        }
        Ok(())
    }

    /// Stops the server gracefully: SIGTERM, then waits up to `timeout` for
    /// it to exit (killing it if it does not). Returns its exit status.
    pub async fn terminate(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let Some(mut child) = self.child.take() else {
            bail!("eddy is not running");
        };
        self.log_marker("harness: SIGTERM")?;
        // std offers SIGKILL only and unsafe code is forbidden, so use kill(1).
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .context("running kill -TERM")?;
        if !sent.success() {
            // Already exited: collect its status below.
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            bail!("kill -TERM {} failed: {sent}", child.id());
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                child.wait()?;
                bail!(
                    "eddy did not exit within {timeout:?} of SIGTERM (killed it)\n{}",
                    self.log_tail(40)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sets the extra command-line arguments the next [`EddyProcess::restart`] starts with.
    pub fn set_extra_args(&mut self, args: Vec<String>) {
        self.config.extra_args = args;
    }

    /// Starts the server again on the same data directory, as after a crash:
    /// kills it first if it is still running.
    pub async fn restart(&mut self) -> Result<()> {
        self.kill9()?;
        self.log_marker("harness: restart")?;
        self.spawn_and_wait().await
    }

    /// The last `lines` lines of eddy's output, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.config.log_file).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        let tail = &all[all.len().saturating_sub(lines)..];
        format!(
            "--- last {} lines of {} ---\n{}",
            tail.len(),
            self.config.log_file.display(),
            tail.join("\n")
        )
    }

    /// Keeps the temporary directory (data and log) after this value is
    /// dropped, for debugging; returns its path.
    pub fn keep_files(&mut self) -> Option<PathBuf> {
        self.temp_dir.take().map(TempDir::keep)
    }

    /// Spawns the process and waits for its port; if the port was taken
    /// meanwhile (eddy exits at once), retries once on another port.
    async fn spawn_and_wait(&mut self) -> Result<()> {
        match self.spawn_once().await {
            Ok(()) => Ok(()),
            Err(first) if !self.is_running() => {
                let busy = TcpListener::bind((Ipv4Addr::LOCALHOST, self.port)).is_err();
                if !busy {
                    return Err(first);
                }
                self.child = None;
                self.port = free_port()?;
                self.spawn_once()
                    .await
                    .with_context(|| format!("after: {first:#}"))
            }
            Err(other) => Err(other),
        }
    }

    async fn spawn_once(&mut self) -> Result<()> {
        let log = self.open_log()?;
        let log_start = log.metadata().map_or(0, |m| m.len());
        let mut command = Command::new(&self.config.binary);
        command
            .arg("--listen")
            .arg(self.addr().to_string())
            .arg("--data-dir")
            .arg(&self.config.data_dir)
            .envs(self.config.env.iter().map(|(k, v)| (k, v)));
        // Whatever filter is asked for, keep the line that says the listener is bound.
        let filter = self
            .config
            .env
            .iter()
            .find(|(k, _)| k == "EDDY_LOG")
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var("EDDY_LOG").ok());
        if let Some(filter) = filter {
            command.env("EDDY_LOG", format!("{filter},eddy=info"));
        }
        if let Some(interval) = &self.config.checkpoint_interval {
            command.arg("--checkpoint-interval").arg(interval);
        }
        if let Some((uid, gid)) = self.config.run_as {
            use std::os::unix::process::CommandExt;
            command.uid(uid).gid(gid);
        }
        command
            .args(&self.config.extra_args)
            // The log is read as text, by people and by log_tail.
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = command
            .spawn()
            .with_context(|| format!("spawning {}", self.config.binary.display()))?;
        self.child = Some(child);
        self.wait_until_accepting(log_start).await
    }

    /// Waits until the port accepts connections and this process's log (from `log_start`) says
    /// it bound the listener: a connection alone could reach another server given the same port.
    async fn wait_until_accepting(&mut self, log_start: u64) -> Result<()> {
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    self.child = None;
                    bail!(
                        "eddy exited during startup ({status}) on port {}\n{}",
                        self.port,
                        self.log_tail(40)
                    );
                }
            }
            let connect = tokio::net::TcpStream::connect(self.addr());
            if let Ok(Ok(_stream)) = tokio::time::timeout(Duration::from_secs(1), connect).await {
                if self.log_since(log_start).contains(ACCEPTING_LINE) {
                    return Ok(());
                }
            }
            if started.elapsed() > self.config.start_timeout {
                let _ = self.kill9();
                bail!(
                    "eddy did not accept connections on port {} within {:?}\n{}",
                    self.port,
                    self.config.start_timeout,
                    self.log_tail(40)
                );
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The log written since byte `start`.
    fn log_since(&self, start: u64) -> String {
        let bytes = std::fs::read(&self.config.log_file).unwrap_or_default();
        let start = usize::try_from(start)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }

    fn open_log(&self) -> Result<File> {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.config.log_file)
            .with_context(|| format!("opening {}", self.config.log_file.display()))
    }

    /// Notes a harness action in eddy's log so the log reads in order.
    fn log_marker(&self, what: &str) -> Result<()> {
        let mut log = self.open_log()?;
        writeln!(log, "===== {what} =====")?;
        Ok(())
    }
}

impl Drop for EddyProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `YYYY-MM-DD HH:MM:SS.mmm` (UTC, proleptic Gregorian) for a time in
/// milliseconds since the Unix epoch: the text of a TIMESTAMP literal.
pub fn sql_timestamp(millis: i64) -> String {
    let days = millis.div_euclid(86_400_000);
    let ms_of_day = millis.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03}",
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1_000 % 60,
        ms_of_day % 1_000
    )
}

/// (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153; // March = 0
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_timestamp_formats_utc() {
        assert_eq!(sql_timestamp(0), "1970-01-01 00:00:00.000");
        assert_eq!(sql_timestamp(1_704_067_200_000), "2024-01-01 00:00:00.000");
        // Leap day, and a time of day with every field set.
        assert_eq!(
            sql_timestamp(1_709_164_800_000 + 45_296_789),
            "2024-02-29 12:34:56.789"
        );
        assert_eq!(sql_timestamp(951_782_400_000), "2000-02-29 00:00:00.000");
        assert_eq!(sql_timestamp(-1), "1969-12-31 23:59:59.999");
    }

    #[test]
    fn free_port_is_bindable() {
        let port = free_port().unwrap();
        assert_ne!(port, 0);
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
    }

    #[test]
    fn free_port_never_hands_out_a_port_twice() {
        let ports: Vec<u16> = (0..2000).map(|_| free_port().unwrap()).collect();
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
    }

    #[test]
    fn locate_eddy_binary_prefers_explicit_then_first_dir() {
        let dir = tempfile::tempdir().unwrap();
        let (release, debug) = (dir.path().join("release"), dir.path().join("debug"));
        std::fs::create_dir_all(&release).unwrap();
        std::fs::create_dir_all(&debug).unwrap();
        let dirs = [release.clone(), debug.clone()];

        let err = locate_eddy_binary(None, &dirs).unwrap_err().to_string();
        assert!(err.contains("cargo build -p eddy-server"), "{err}");
        assert!(
            err.contains(&release.join("eddy").display().to_string()),
            "{err}"
        );

        std::fs::write(debug.join("eddy"), "").unwrap();
        assert_eq!(locate_eddy_binary(None, &dirs).unwrap(), debug.join("eddy"));
        std::fs::write(release.join("eddy"), "").unwrap();
        assert_eq!(
            locate_eddy_binary(None, &dirs).unwrap(),
            release.join("eddy")
        );

        let explicit = dir.path().join("custom-eddy");
        assert!(locate_eddy_binary(Some(explicit.clone()), &dirs).is_err());
        std::fs::write(&explicit, "").unwrap();
        assert_eq!(
            locate_eddy_binary(Some(explicit.clone()), &dirs).unwrap(),
            explicit
        );
    }

    #[test]
    fn test_executables_look_in_their_profile_dir_first() {
        // This test runs from target/<profile>/deps.
        let dirs = profile_dir_candidates().unwrap();
        assert!(!dirs[0].ends_with("deps"), "{dirs:?}");
        assert!(dirs.iter().any(|dir| dir.ends_with("deps")), "{dirs:?}");
    }
}
