//! Protocol frames: sessions of valid messages with some mutated (truncated bodies, wrong
//! lengths, flipped bytes, unknown types), sent pipelined to a running server. Against a
//! server with a password every session fails to log in, so nothing it sends may ever run:
//! a canary table that only such sessions write to must stay empty.

use std::time::Duration;

use eddy_sqllogictest::wire::{message, startup, RawConnection};
use eddy_sqllogictest::EddyProcess;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::Report;

/// The table fuzzed sessions write to; with a password it must stay empty.
pub const CANARY: &str = "fuzz_canary";

const QUERIES: &[&str] = &[
    "SELECT 1",
    "SELECT $1::INT",
    "SELECT $1, $2",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "INSERT INTO fuzz_canary VALUES (1)",
    "SELECT * FROM fuzz_canary",
    "",
    ";",
    "SELECT repeat('x', 100)",
    "COPY fuzz_canary TO STDOUT",
    "COPY fuzz_canary FROM STDIN",
    "SET statement_timeout = 1000",
    "SHOW TABLES",
    "FLUSH",
    "SELECT value FROM generate_series(1, 1000)",
    "SELEC 1",
    "SELECT 1; SELECT 2",
];

/// Sessions run at once (a failed login is answered late: sequential sessions would mostly
/// wait).
const CONCURRENT_SESSIONS: usize = 32;

/// Runs sessions until `frames` messages were sent. `password`: the server's (sessions then
/// try wrong ones).
pub async fn run(eddy: &mut EddyProcess, password: Option<&str>, seed: u64, frames: u64) -> Report {
    let name = if password.is_some() {
        "frames (password)"
    } else {
        "frames"
    };
    let mut report = Report::new(name, seed);
    let mut rng = StdRng::seed_from_u64(seed);
    while report.cases < frames {
        let mut sessions = tokio::task::JoinSet::new();
        // Failed logins wait (up to 8 s each): many more of them at once.
        let at_once = if password.is_some() {
            CONCURRENT_SESSIONS * 8
        } else {
            CONCURRENT_SESSIONS
        };
        for _ in 0..at_once {
            let case: u64 = rng.random();
            let script = session(case, password.is_some());
            report.cases += script.len() as u64;
            let address = eddy.addr();
            sessions.spawn(async move { (case, exchange(address, &script).await) });
        }
        while let Some(done) = sessions.join_next().await {
            match done {
                Ok((case, Ok(replies))) => {
                    for (code, text) in replies {
                        report.code(&code, &text, || format!("frames case {case}"));
                    }
                }
                Ok((case, Err(error))) => report.fail(format!("frames case {case}: {error}")),
                Err(error) => report.fail(format!("a session task failed: {error}")),
            }
        }
        if !eddy.is_running() {
            report.deaths += 1;
            report.fail(format!(
                "the server died during frames cases from seed {seed}\n{}",
                eddy.log_tail(20)
            ));
            if eddy.restart().await.is_err() {
                return report;
            }
        }
    }
    report
}

/// Sends a session and returns the (SQLSTATE, message) of each error in the reply.
async fn exchange(
    address: std::net::SocketAddr,
    script: &[Vec<u8>],
) -> anyhow::Result<Vec<(String, String)>> {
    let mut connection = RawConnection::connect(address).await?;
    let bytes: Vec<u8> = script.concat();
    // The server may close early (a FATAL error): a refused write is fine.
    let _ = connection.send(&bytes).await;
    let _ = connection.finish_sending().await;
    // Failed logins are answered late (up to 8 s).
    let replies = connection.until_closed(Duration::from_secs(30)).await;
    if !connection.closed() {
        anyhow::bail!("the server neither answered nor closed within 30 s");
    }
    Ok(replies
        .iter()
        .filter(|m| m.is_error())
        .map(|m| {
            (
                m.field(b'C').unwrap_or_default(),
                m.field(b'M').unwrap_or_default(),
            )
        })
        .collect())
}

/// One session: a startup packet, (with a password) some attempts to authenticate, then
/// messages, any of them possibly mutated.
pub fn session(case: u64, password: bool) -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(case);
    let mut frames = Vec::new();
    let mut hello = startup(&[("user", "eddy"), ("database", "dev")]);
    if rng.random_bool(0.1) {
        mutate(&mut rng, &mut hello, false);
    }
    frames.push(hello);
    if password {
        for _ in 0..rng.random_range(0..3) {
            let mut attempt = match rng.random_range(0..4) {
                0 => sasl_initial(&mut rng, "SCRAM-SHA-256"),
                1 => sasl_initial(&mut rng, "BOGUS"),
                2 => text_message(b'p', "wrong"),
                _ => message(b'p', &random_bytes(&mut rng, 40)),
            };
            if rng.random_bool(0.3) {
                mutate(&mut rng, &mut attempt, true);
            }
            frames.push(attempt);
        }
    }
    for _ in 0..rng.random_range(1..40) {
        let mut frame = random_message(&mut rng);
        if rng.random_bool(0.3) {
            mutate(&mut rng, &mut frame, true);
        }
        frames.push(frame);
    }
    frames
}

fn random_message(rng: &mut StdRng) -> Vec<u8> {
    let name = |rng: &mut StdRng| ["", "s1", "p1"][rng.random_range(0..3)].as_bytes().to_vec();
    let sql = |rng: &mut StdRng| QUERIES[rng.random_range(0..QUERIES.len())];
    match rng.random_range(0..16) {
        0 | 1 => text_message(b'Q', sql(rng)),
        2 | 3 => {
            let mut body = cstring(&name(rng));
            body.extend(cstring(sql(rng).as_bytes()));
            let types = rng.random_range(0..4);
            body.extend_from_slice(&(types as i16).to_be_bytes());
            for _ in 0..types {
                let oid: u32 = [0, 16, 20, 23, 25, 1043, 1114, 1700, 99999][rng.random_range(0..9)];
                body.extend_from_slice(&oid.to_be_bytes());
            }
            message(b'P', &body)
        }
        4 | 5 => {
            let mut body = cstring(&name(rng));
            body.extend(cstring(&name(rng)));
            let formats = rng.random_range(0..4);
            body.extend_from_slice(&(formats as i16).to_be_bytes());
            for _ in 0..formats {
                body.extend_from_slice(&[0i16, 1, 2, -1][rng.random_range(0..4)].to_be_bytes());
            }
            let parameters = rng.random_range(0..4);
            body.extend_from_slice(&(parameters as i16).to_be_bytes());
            for _ in 0..parameters {
                if rng.random_bool(0.2) {
                    body.extend_from_slice(&(-1i32).to_be_bytes());
                } else {
                    let value = match rng.random_range(0..4) {
                        0 => b"42".to_vec(),
                        1 => 7i32.to_be_bytes().to_vec(),
                        2 => b"not a number".to_vec(),
                        _ => random_bytes(rng, 12),
                    };
                    body.extend_from_slice(&(value.len() as i32).to_be_bytes());
                    body.extend(value);
                }
            }
            let results = rng.random_range(0..3);
            body.extend_from_slice(&(results as i16).to_be_bytes());
            for _ in 0..results {
                body.extend_from_slice(&[0i16, 1, 5][rng.random_range(0..3)].to_be_bytes());
            }
            message(b'B', &body)
        }
        6 => {
            let mut body = vec![[b'S', b'P', b'X'][rng.random_range(0..3)]];
            body.extend(cstring(&name(rng)));
            message(b'D', &body)
        }
        7 | 8 => {
            let mut body = cstring(&name(rng));
            let rows = [0, 1, 2, -1, i32::MAX, i32::MIN][rng.random_range(0..6)];
            body.extend_from_slice(&rows.to_be_bytes());
            message(b'E', &body)
        }
        9 => {
            let mut body = vec![[b'S', b'P'][rng.random_range(0..2)]];
            body.extend(cstring(&name(rng)));
            message(b'C', &body)
        }
        10 | 11 => message(b'S', &[]),
        12 => message(b'H', &[]),
        13 => match rng.random_range(0..3) {
            0 => message(b'd', &random_bytes(rng, 20)),
            1 => message(b'c', &[]),
            _ => text_message(b'f', "no"),
        },
        14 => message(rng.random(), &random_bytes(rng, 10)),
        _ => {
            if rng.random_bool(0.1) {
                message(b'X', &[])
            } else {
                text_message(b'Q', "SELECT 2")
            }
        }
    }
}

/// Changes a frame: a truncated body, a wrong length, flipped bytes, extra bytes, another type.
fn mutate(rng: &mut StdRng, frame: &mut Vec<u8>, typed: bool) {
    let header = if typed { 5 } else { 4 };
    let length_at = header - 4;
    let set_length = |frame: &mut Vec<u8>, value: i32| {
        frame[length_at..length_at + 4].copy_from_slice(&value.to_be_bytes());
    };
    match rng.random_range(0..6) {
        0 if frame.len() > header => {
            let keep = rng.random_range(header..frame.len());
            frame.truncate(keep);
            let length = (keep - length_at) as i32;
            set_length(frame, length);
        }
        1 => {
            let value =
                [0, 1, 3, 4, 5, 8, 100, 65_536, i32::MAX, -1, i32::MIN][rng.random_range(0..11)];
            set_length(frame, value);
        }
        2 => {
            for _ in 0..rng.random_range(1..4) {
                let at = rng.random_range(0..frame.len());
                frame[at] ^= 1 << rng.random_range(0..8);
            }
        }
        3 => {
            frame.extend(random_bytes(rng, 8));
            let length = (frame.len() - length_at) as i32;
            set_length(frame, length);
        }
        4 if typed => frame[0] = rng.random(),
        _ => {
            if frame.len() > header {
                let at = rng.random_range(header..frame.len());
                frame[at] = 0;
            }
        }
    }
}

fn sasl_initial(rng: &mut StdRng, mechanism: &str) -> Vec<u8> {
    let mut body = cstring(mechanism.as_bytes());
    let data = if rng.random_bool(0.5) {
        b"n,,n=,r=fuzzfuzzfuzz".to_vec()
    } else {
        random_bytes(rng, 24)
    };
    body.extend_from_slice(&(data.len() as i32).to_be_bytes());
    body.extend(data);
    message(b'p', &body)
}

fn text_message(kind: u8, text: &str) -> Vec<u8> {
    message(kind, &cstring(text.as_bytes()))
}

fn cstring(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out.push(0);
    out
}

fn random_bytes(rng: &mut StdRng, most: usize) -> Vec<u8> {
    (0..rng.random_range(0..=most))
        .map(|_| rng.random())
        .collect()
}
