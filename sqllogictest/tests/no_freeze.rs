//! A statement's CPU work never holds up other connections: while one client's statement
//! computes for seconds between its awaits (here folding a 900 MB constant, within the query
//! memory limit), another client's `SELECT 1` is answered at once. It used to wait for the
//! whole statement (5.9 s on a busy machine), as no worker read the sockets meanwhile. Both
//! clients are psql, which showed it.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use eddy_sqllogictest::EddyProcess;

/// How long another client's `SELECT 1` may take: the fuzz soak's freeze limit.
const FREEZE: Duration = Duration::from_secs(1);

fn psql(psql: &Path, eddy: &EddyProcess, sql: &str) -> Command {
    let mut command = Command::new(psql);
    command
        .args(["-h", "127.0.0.1", "-p", &eddy.port().to_string()])
        .args(["-U", "eddy", "-d", "dev", "-qAt", "-c", sql])
        .env("PGCONNECT_TIMEOUT", "30")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

#[tokio::test]
async fn a_long_statement_does_not_hold_up_another_client() {
    let Some(psql_path) = common::require("psql", common::on_path("psql")) else {
        return;
    };
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (setup, _setup_driver) = eddy.connect().await.unwrap();
    setup
        .batch_execute("CREATE TABLE bids (auction INT, price INT); INSERT INTO bids VALUES (1, 1)")
        .await
        .unwrap();
    for heavy in [
        "SELECT length(repeat('x', 900000000))",
        "CREATE MATERIALIZED VIEW heavy AS SELECT auction FROM bids \
         WHERE price <= length(repeat('x', 900000000))",
    ] {
        let started = Instant::now();
        let mut running = psql(&psql_path, &eddy, heavy).spawn().unwrap();
        let mut worst = Duration::ZERO;
        let mut probes = 0;
        while running.try_wait().unwrap().is_none() {
            // A quiet moment first: the server's workers go idle, one takes the statement, and
            // the question is whether any other reads the next client.
            std::thread::sleep(Duration::from_millis(200));
            let asked = Instant::now();
            let answered = psql(&psql_path, &eddy, "SELECT 1").status().unwrap();
            assert!(answered.success());
            worst = worst.max(asked.elapsed());
            probes += 1;
        }
        assert!(running.wait().unwrap().success(), "{heavy}");
        let took = started.elapsed();
        println!("{heavy}: {took:?}, {probes} probes, the slowest {worst:?}");
        assert!(probes >= 2, "{heavy}: took {took:?}, too short to probe");
        assert!(
            worst < FREEZE,
            "{heavy} (running {took:?}) held another client's SELECT 1 for {worst:?}"
        );
    }
}
