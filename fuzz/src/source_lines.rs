//! Malformed lines through a live server's file sources: the payload fuzzer's messages (deeply
//! nested, truncated, flipped bytes, lenient JSON) appended to followed JSON and CSV files that
//! views read. The server must stay up and account for every line: each is a row of its view
//! or a dead letter in `eddy_catalog.source_errors`.

use std::io::Write;
use std::time::{Duration, Instant};

use eddy_executor::connector::Encode;
use eddy_sqllogictest::EddyProcess;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::Report;

/// Lines appended to a file at a time.
const BATCH_LINES: usize = 500;
/// How long the server may take to read a batch of lines.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Appends `lines` lines in all to the sources' files of a fresh server, checking after each
/// batch that the server lives and that every line was read as a row or a dead letter.
pub async fn run(seed: u64, lines: u64) -> Report {
    let mut report = Report::new("source lines", seed);
    if let Err(error) = run_inner(seed, lines, &mut report).await {
        report.fail(format!("source lines seed {seed}: {error}"));
    }
    report
}

async fn run_inner(seed: u64, lines: u64, report: &mut Report) -> anyhow::Result<()> {
    let mut eddy = EddyProcess::start_fresh().await?;
    let dir = tempfile::tempdir()?;
    let schema = crate::payloads::schemas().swap_remove(0);
    let encodes = [
        ("json_lines", Encode::Json, "ENCODE JSON"),
        (
            "csv_lines",
            Encode::Csv {
                delimiter: b',',
                header: false,
            },
            "ENCODE CSV (without_header = 'true')",
        ),
    ];
    let (client, _driver) = eddy.connect().await?;
    for (name, _, encode) in &encodes {
        let path = dir.path().join(format!("{name}.txt"));
        std::fs::write(&path, b"")?;
        client
            .batch_execute(&format!(
                "CREATE SOURCE {name} (auction BIGINT, price BIGINT, channel VARCHAR, \
                   date_time TIMESTAMP)
                 WITH (connector = 'file', path = '{}', follow = 'true') FORMAT PLAIN {encode};
                 CREATE MATERIALIZED VIEW {name}_rows AS SELECT count(*) AS n FROM {name};",
                path.display()
            ))
            .await?;
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut written = [0u64; 2];
    // Rows and dead letters read so far, per source.
    let mut accounted = [(0u64, 0u64); 2];
    while report.cases < lines {
        let case: u64 = rng.random();
        let mut case_rng = StdRng::seed_from_u64(case);
        let which = case_rng.random_range(0..encodes.len());
        let (name, encode, _) = &encodes[which];
        let mut text = Vec::new();
        for _ in 0..BATCH_LINES {
            let mut message = crate::payloads::message(&mut case_rng, &schema, encode);
            // A line ends at the first newline: a message holding one is two lines.
            message.retain(|&b| b != b'\r');
            text.extend_from_slice(&message);
            text.push(b'\n');
        }
        let appended = text
            .split(|&b| b == b'\n')
            .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
            .count() as u64;
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(format!("{name}.txt")))?
            .write_all(&text)?;
        written[which] += appended;
        report.cases += appended;
        let read = wait_for_lines(&client, name, written[which]).await;
        if !eddy.is_running() {
            report.deaths += 1;
            report.fail(format!(
                "the server died reading source lines case {case}\n{}",
                eddy.log_tail(20)
            ));
            return Ok(());
        }
        match read {
            Ok(read) => {
                accounted[which] = read;
                let (rows, dead) = (
                    accounted[0].0 + accounted[1].0,
                    accounted[0].1 + accounted[1].1,
                );
                report.codes.insert("row".into(), rows);
                report.codes.insert("dead letter".into(), dead);
            }
            Err(error) => {
                report.fail(format!("source lines case {case} ({name}): {error}"));
                return Ok(());
            }
        }
    }
    eddy.terminate(Duration::from_secs(30)).await?;
    Ok(())
}

/// Waits until the rows of `name`'s view and its dead letters add up to `lines`.
async fn wait_for_lines(
    client: &tokio_postgres::Client,
    name: &str,
    lines: u64,
) -> anyhow::Result<(u64, u64)> {
    let started = Instant::now();
    loop {
        let rows: i64 = client
            .query_one(&format!("SELECT n FROM {name}_rows"), &[])
            .await?
            .get(0);
        let dead: i64 = client
            .query_one(
                "SELECT count(*) FROM eddy_catalog.source_errors WHERE source = $1",
                &[&name],
            )
            .await?
            .get(0);
        let (rows, dead) = (rows as u64, dead as u64);
        if rows + dead == lines {
            return Ok((rows, dead));
        }
        if rows + dead > lines || started.elapsed() > READ_TIMEOUT {
            anyhow::bail!(
                "{lines} lines written, {rows} rows and {dead} dead letters read after {:.0} s",
                started.elapsed().as_secs_f64()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
