//! `SUBSCRIBE` against a real eddy: psql's `COPY (SUBSCRIBE ...) TO STDOUT` printing rows as
//! they come, Python's drivers with cursors and FETCH (`clients/subscribe_clients.py`), a
//! client leaving mid-stream, and a client that stops reading: its subscription ends with
//! 53200 once it holds more than `--subscribe-buffer` unread, and the server's memory stays
//! bounded.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use eddy_sqllogictest::{EddyProcess, DATABASE, USER};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn start(extra: &[&str]) -> EddyProcess {
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    EddyProcess::start_fresh_with(|config| {
        config.checkpoint_interval = Some("100ms".into());
        config.extra_args.extend(extra);
    })
    .await
    .expect("start eddy")
}

/// The subscriptions the server is running.
async fn running(client: &tokio_postgres::Client) -> Vec<(String, i64, i64)> {
    client
        .query(
            "SELECT relation, buffered_bytes, buffer_limit FROM eddy_catalog.subscriptions",
            &[],
        )
        .await
        .expect("read eddy_catalog.subscriptions")
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect()
}

/// Waits until no subscription runs (within `limit`).
async fn wait_none_running(client: &tokio_postgres::Client, limit: Duration) {
    let since = Instant::now();
    loop {
        let now = running(client).await;
        if now.is_empty() {
            return;
        }
        assert!(
            since.elapsed() < limit,
            "still running after {limit:?}: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The server's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A client speaking the protocol by hand, so that it can stop reading.
struct RawClient {
    stream: TcpStream,
}

impl RawClient {
    /// Connects and logs in (the server trusts every client).
    async fn connect(port: u16) -> Self {
        let mut stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        let mut body = 196_608u32.to_be_bytes().to_vec();
        for (key, value) in [("user", USER), ("database", DATABASE)] {
            body.extend_from_slice(key.as_bytes());
            body.push(0);
            body.extend_from_slice(value.as_bytes());
            body.push(0);
        }
        body.push(0);
        let mut message = ((body.len() + 4) as u32).to_be_bytes().to_vec();
        message.extend(body);
        stream.write_all(&message).await.expect("send startup");
        let mut client = Self { stream };
        while client.read().await.0 != b'Z' {}
        client
    }

    /// The next message: its type and body.
    async fn read(&mut self) -> (u8, Vec<u8>) {
        let kind = self.stream.read_u8().await.expect("read a message");
        let length = self.stream.read_u32().await.expect("read its length") as usize;
        let mut body = vec![0; length - 4];
        self.stream
            .read_exact(&mut body)
            .await
            .expect("read its body");
        (kind, body)
    }

    async fn query(&mut self, sql: &str) {
        let mut message = vec![b'Q'];
        message.extend(((sql.len() + 5) as u32).to_be_bytes());
        message.extend_from_slice(sql.as_bytes());
        message.push(0);
        self.stream.write_all(&message).await.expect("send a query");
    }
}

/// The SQLSTATE of an ErrorResponse body.
fn sqlstate(body: &[u8]) -> String {
    body.split(|b| *b == 0)
        .find_map(|field| field.strip_prefix(b"C"))
        .map(|code| String::from_utf8_lossy(code).to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn psql_copy_subscribe_prints_rows_as_they_come() {
    let Some(psql) = common::require("psql", common::on_path("psql")) else {
        return;
    };
    let eddy = start(&[]).await;
    let (client, _conn) = eddy.connect().await.expect("connect");
    client
        .batch_execute(
            "CREATE TABLE readings (sensor INT PRIMARY KEY, value BIGINT);
             CREATE MATERIALIZED VIEW totals AS
               SELECT sensor % 2 AS parity, sum(value) AS total FROM readings GROUP BY sensor % 2;
             INSERT INTO readings VALUES (1, 10), (2, 20);",
        )
        .await
        .expect("create");
    // psql writes its stdout through stdio: into a pipe, line-buffered only under stdbuf.
    let mut command = match common::on_path("stdbuf") {
        Some(stdbuf) => {
            let mut command = Command::new(stdbuf);
            command.arg("-oL").arg(&psql);
            command
        }
        None => Command::new(&psql),
    };
    let mut psql = command
        .args(["-X", "-h", "127.0.0.1", "-p", &eddy.port().to_string()])
        .args(["-U", USER, "-d", DATABASE])
        .args(["-c", "COPY (SUBSCRIBE TO totals WITH (progress)) TO STDOUT"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run psql");
    let stdout = psql.stdout.take().expect("psql's stdout");
    let (lines_tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = |what: &str| -> Vec<String> {
        let line = lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("no line from psql for {what}: {e}"));
        line.split('\t').map(str::to_string).collect()
    };
    // The snapshot (parity order unknown), then its progress row.
    let mut snapshot = vec![next("the snapshot"), next("the snapshot")];
    snapshot.sort();
    let start = snapshot[0][0].clone();
    assert_eq!(snapshot[0][1..], ["f", "1", "0", "20"], "{snapshot:?}");
    assert_eq!(snapshot[1][1..], ["f", "1", "1", "10"], "{snapshot:?}");
    assert_eq!(next("its progress row"), [&start, "t", "\\N", "\\N", "\\N"]);
    // A change arrives while psql runs: the old row, the new one, the epoch's progress.
    client
        .batch_execute("UPDATE readings SET value = 15 WHERE sensor = 1")
        .await
        .expect("update");
    let old = next("the old row");
    let epoch: u64 = old[0].parse().expect("an epoch");
    assert!(epoch > start.parse::<u64>().unwrap_or(u64::MAX), "{old:?}");
    assert_eq!(old[1..], ["f", "-1", "1", "10"]);
    assert_eq!(next("the new row")[1..], ["f", "1", "1", "15"]);
    assert_eq!(next("the epoch's progress")[..2], [old[0].as_str(), "t"]);
    assert_eq!(running(&client).await.len(), 1);

    // psql leaves: the subscription ends with it.
    let _ = psql.kill();
    let _ = psql.wait();
    wait_none_running(&client, Duration::from_secs(10)).await;
    let rows = client
        .query("SELECT total FROM totals ORDER BY parity", &[])
        .await
        .expect("the server still answers");
    assert_eq!(rows.len(), 2);
}

#[tokio::test]
async fn python_drivers_subscribe_with_cursors_and_copy() {
    let python = common::clients_dir().join("python/bin/python");
    let Some(python) = common::require("python clients (psycopg)", Some(python)) else {
        return;
    };
    let eddy = start(&[]).await;
    let output = Command::new(python)
        .arg("subscribe_clients.py")
        .current_dir(common::scripts_dir())
        .env("EDDY_PORT", eddy.port().to_string())
        .output()
        .expect("run the client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("subscribe clients: all checks passed"),
        "subscribe_clients.py failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}

#[tokio::test]
async fn a_client_leaving_mid_stream_releases_its_subscription() {
    let eddy = start(&[]).await;
    let (client, _conn) = eddy.connect().await.expect("connect");
    client
        .batch_execute("CREATE TABLE events (id BIGINT PRIMARY KEY, body TEXT)")
        .await
        .expect("create");
    let mut raw = RawClient::connect(eddy.port()).await;
    raw.query("COPY (SUBSCRIBE TO events) TO STDOUT").await;
    assert_eq!(raw.read().await.0, b'H', "CopyOutResponse");
    client
        .batch_execute("INSERT INTO events VALUES (1, 'a'), (2, 'b')")
        .await
        .expect("insert");
    let (kind, row) = raw.read().await;
    assert_eq!(kind, b'd', "a CopyData row");
    assert!(String::from_utf8_lossy(&row).ends_with("\tb\n") || row.ends_with(b"\ta\n"));
    assert_eq!(running(&client).await.len(), 1);
    drop(raw);
    // Changes keep coming; the server notices the closed socket and forgets the subscription.
    for i in 3..10 {
        client
            .batch_execute(&format!("INSERT INTO events VALUES ({i}, 'c')"))
            .await
            .expect("insert");
    }
    wait_none_running(&client, Duration::from_secs(10)).await;
    let count: i64 = client
        .query_one("SELECT count(*) FROM events", &[])
        .await
        .expect("the server still answers")
        .get(0);
    assert_eq!(count, 9);
}

/// Inserts `batches` statements of 500 rows of 1 KiB each (one epoch each) into `table`,
/// from id `first`; the largest `buffered_bytes` seen meanwhile.
async fn insert_wide(
    client: &tokio_postgres::Client,
    table: &str,
    first: i64,
    batches: i64,
) -> i64 {
    let mut peak_buffered = 0;
    for batch in 0..batches {
        let from = first + batch * 500;
        client
            .batch_execute(&format!(
                "INSERT INTO {table} SELECT value, repeat('x', 1000) FROM generate_series({from}, {})",
                from + 499
            ))
            .await
            .expect("insert");
        for (_, buffered, limit) in running(client).await {
            assert!(buffered <= limit, "{buffered} bytes held, over {limit}");
            peak_buffered = peak_buffered.max(buffered);
        }
    }
    peak_buffered
}

#[tokio::test]
async fn a_client_that_stops_reading_gets_53200_and_memory_stays_bounded() {
    let eddy = start(&["--subscribe-buffer", "2MiB", "--subscribe-history", "1MiB"]).await;
    let pid = eddy.pid().expect("eddy's pid");
    let (client, _conn) = eddy.connect().await.expect("connect");
    client
        .batch_execute(
            "CREATE TABLE alone (id BIGINT PRIMARY KEY, pad TEXT);
             CREATE TABLE wide (id BIGINT PRIMARY KEY, pad TEXT);",
        )
        .await
        .expect("create");
    // 96 MB of changes with no subscriber to warm the server up (its store's buffers grow
    // by about as much), 96 MB more into the subscribed table as the baseline, then as much
    // with a subscriber (no snapshot) that reads nothing: its queue must not hold them.
    let batches = 192;
    insert_wide(&client, "alone", 0, batches).await;
    let before = rss_kib(pid);
    insert_wide(&client, "wide", 0, batches).await;
    let alone = rss_kib(pid).saturating_sub(before);
    let mut raw = RawClient::connect(eddy.port()).await;
    raw.query("COPY (SUBSCRIBE TO wide WITH (snapshot = false)) TO STDOUT")
        .await;
    assert_eq!(raw.read().await.0, b'H', "CopyOutResponse");
    let before = rss_kib(pid);
    let peak_buffered = insert_wide(&client, "wide", batches * 500, batches).await;
    let subscribed = rss_kib(pid).saturating_sub(before);
    eprintln!(
        "rss growth: {alone} KiB without a subscriber, {subscribed} KiB with one not reading; peak buffered {peak_buffered} bytes"
    );
    // The queue's own accounting bounds it (checked after every INSERT above). The resident
    // memory is printed, not asserted: the store's buffers alone move it by 0 to 130 MB over
    // runs of these 96 MB, as much as an unbounded queue would add.
    assert!(
        peak_buffered <= 2 * 1024 * 1024,
        "the queue held {peak_buffered} bytes, past its 2 MiB"
    );
    // The subscription ended when it passed its 2 MiB.
    wait_none_running(&client, Duration::from_secs(10)).await;
    // The client reads again: what the socket held, then the error.
    let code = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match raw.read().await {
                (b'd', _) => continue,
                (b'E', body) => return sqlstate(&body),
                (kind, _) => panic!("unexpected message {}", kind as char),
            }
        }
    })
    .await
    .expect("the error arrives");
    assert_eq!(code, "53200");
    let count: i64 = client
        .query_one("SELECT count(*) FROM wide", &[])
        .await
        .expect("the server still answers")
        .get(0);
    assert_eq!(count, 2 * batches * 500);
}
