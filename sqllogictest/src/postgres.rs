//! A throwaway PostgreSQL 15 server, the reference Eddy's text, binary values and SQLSTATEs
//! are compared with: `initdb` into a temporary directory, `pg_ctl start` on a free loopback
//! port, stopped and removed when dropped. As root, the server runs as the `postgres` user
//! (initdb refuses root).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{bail, Context, Result};
use tempfile::TempDir;

/// Where Debian's postgresql-15 installs its server programs (`EDDY_PG_BIN_DIR` overrides).
pub const DEFAULT_BIN_DIR: &str = "/usr/lib/postgresql/15/bin";

/// One running reference server.
pub struct PostgresServer {
    bin_dir: PathBuf,
    data_dir: PathBuf,
    port: u16,
    run_as: Option<String>,
    _dir: TempDir,
}

/// The server programs' directory, if they are installed.
pub fn bin_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("EDDY_PG_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_BIN_DIR));
    dir.join("initdb").is_file().then_some(dir)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl PostgresServer {
    /// Initializes and starts a server (trust authentication, user `postgres`, no fsync, no JIT:
    /// Eddy has none either).
    pub fn start(bin_dir: &Path) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("eddy-postgres-")
            .tempdir()
            .context("create the reference server's directory")?;
        let data_dir = dir.path().join("data");
        let run_as = is_root().then(|| "postgres".to_string());
        if let Some(user) = &run_as {
            let status = Command::new("chown")
                .args(["-R", user])
                .arg(dir.path())
                .status()
                .context("chown the reference server's directory")?;
            if !status.success() {
                bail!("cannot give {} to {user}", dir.path().display());
            }
        }
        let port = crate::free_port()?;
        let server = PostgresServer {
            bin_dir: bin_dir.to_path_buf(),
            data_dir,
            port,
            run_as,
            _dir: dir,
        };
        let data = server.data_dir.display().to_string();
        server.run(
            "initdb",
            &[
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        let socket_dir = server.data_dir.display().to_string();
        let options = format!(
            "-p {port} -k {socket_dir} -c listen_addresses=127.0.0.1 -c fsync=off \
             -c full_page_writes=off -c synchronous_commit=off -c jit=off"
        );
        let log = server.data_dir.join("server.log").display().to_string();
        server.run(
            "pg_ctl",
            &["-D", &data, "-o", &options, "-l", &log, "-w", "start"],
        )?;
        Ok(server)
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<Output> {
        let program = self.bin_dir.join(program);
        let mut command = match &self.run_as {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(&program);
                command
            }
            None => Command::new(&program),
        };
        let output = command
            .args(args)
            .current_dir("/")
            .output()
            .with_context(|| format!("run {}", program.display()))?;
        if !output.status.success() {
            bail!(
                "{} {args:?} failed: {}{}",
                program.display(),
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(output)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connects as `postgres` to the `postgres` database.
    pub async fn connect(&self) -> Result<tokio_postgres::Client> {
        let (client, connection) = tokio_postgres::Config::new()
            .host("127.0.0.1")
            .port(self.port)
            .user("postgres")
            .dbname("postgres")
            .connect(tokio_postgres::NoTls)
            .await
            .context("connect to the reference PostgreSQL")?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        let data = self.data_dir.display().to_string();
        let _ = self.run("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
    }
}
