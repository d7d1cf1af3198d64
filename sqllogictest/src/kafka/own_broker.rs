//! A private tansu process for broker-fault tests (see [`super::KafkaBroker::start_own`]).

use super::*;

/// A tansu process this harness started.
#[derive(Debug)]
pub(super) struct OwnBroker {
    pub(super) binary: PathBuf,
    /// tansu's working directory: `tansu.db` (sqlite) and `broker.log`.
    pub(super) data_dir: PathBuf,
    pub(super) port: u16,
    pub(super) child: Option<Child>,
    /// Removes `data_dir` when dropped.
    pub(super) _temp_dir: Option<TempDir>,
}

impl OwnBroker {
    pub(super) fn log_file(&self) -> PathBuf {
        self.data_dir.join("broker.log")
    }

    pub(super) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub(super) fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(Child::try_wait), Some(Ok(None)))
    }

    /// How many times tansu has said it is ready, in its log (appended to
    /// across restarts).
    pub(super) fn ready_lines(&self) -> usize {
        std::fs::read_to_string(self.log_file())
            .unwrap_or_default()
            .lines()
            .filter(|line| line.starts_with("ready in"))
            .count()
    }

    pub(super) async fn spawn_and_wait(&mut self) -> Result<()> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        // When its port is taken, tansu logs AddrInUse and exits (status 0!)
        // a moment later; meanwhile the other process answers connections.
        if TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
            bail!("cannot start tansu: port {} is in use", self.port);
        }
        let ready_before = self.ready_lines();
        let log_path = self.log_file();
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("opening {}", log_path.display()))?;
        writeln!(
            log,
            "===== harness: start tansu on port {} =====",
            self.port
        )?;
        let listener = format!("tcp://127.0.0.1:{}", self.port);
        // sqlite://PATH is relative to the working directory (tansu mangles an
        // absolute path), hence current_dir.
        let child = Command::new(&self.binary)
            .arg("broker")
            .arg("--listener-url")
            .arg(&listener)
            .arg("--advertised-listener-url")
            .arg(&listener)
            .arg("--storage-engine")
            .arg("sqlite://tansu.db")
            .current_dir(&self.data_dir)
            // A plain-text log, for people and for log_tail.
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("spawning {}", self.binary.display()))?;
        self.child = Some(child);

        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    self.child = None;
                    bail!(
                        "tansu exited during startup ({status}) on port {}\n{}",
                        self.port,
                        self.log_tail(30)
                    );
                }
            }
            // tansu prints "ready in Nms" once it has bound its port.
            if self.ready_lines() > ready_before
                && TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
            {
                return Ok(());
            }
            if started.elapsed() > START_TIMEOUT {
                let _ = self.kill9();
                bail!(
                    "tansu did not accept connections on port {} within {START_TIMEOUT:?}\n{}",
                    self.port,
                    self.log_tail(30)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(super) async fn terminate(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            bail!("tansu is not running");
        };
        // std offers SIGKILL only and unsafe code is forbidden: use kill(1).
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .context("running kill -TERM")?;
        if !sent.success() && child.try_wait()?.is_none() {
            bail!("kill -TERM {} failed: {sent}", child.id());
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if child.try_wait()?.is_some() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                child.wait()?;
                bail!(
                    "tansu did not exit within {STOP_TIMEOUT:?} of SIGTERM (killed it)\n{}",
                    self.log_tail(30)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(super) fn kill9(&mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            // Fails only when it already exited, which is fine.
            let _ = child.kill();
            child.wait().context("waiting for the killed tansu")?;
        }
        Ok(())
    }

    pub(super) fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_file()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        let tail = &all[all.len().saturating_sub(lines)..];
        format!(
            "--- last {} lines of {} ---\n{}",
            tail.len(),
            self.log_file().display(),
            tail.join("\n")
        )
    }
}

impl Drop for OwnBroker {
    fn drop(&mut self) {
        let _ = self.kill9();
    }
}
