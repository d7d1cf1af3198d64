//! Running out of file descriptors: `--max-connections` above what the limit on open files can
//! serve is cut down at start (with a warning), and when descriptors run out all the same the
//! accept loop pauses instead of spinning (it took a core and wrote 22 M log lines in 40 s).

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use eddy_sqllogictest::process_stats::cpu_time;
use eddy_sqllogictest::{find_eddy_binary, EddyProcess};

/// The limit on open files the server runs under (soft and hard).
const OPEN_FILES: u32 = 200;

#[tokio::test]
async fn a_server_out_of_descriptors_refuses_and_pauses_without_spinning() {
    let dir = tempfile::tempdir().unwrap();
    // The server under a low limit: a shell sets it, then becomes the server.
    let wrapper = dir.path().join("eddy-low-limit");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nulimit -n {OPEN_FILES} || exit 1\nexec '{}' \"$@\"\n",
            find_eddy_binary().unwrap().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let eddy = EddyProcess::start_fresh_with(|config| {
        config.binary = wrapper.clone();
        config.extra_args = vec!["--max-connections".into(), "1000".into()];
    })
    .await
    .unwrap();
    let log = std::fs::read_to_string(eddy.log_file()).unwrap();
    assert!(
        log.contains("--max-connections is more than the limit on open files can serve")
            && log.contains("served=72"),
        "{}",
        eddy.log_tail(10)
    );
    // Descriptors the reserve did not plan for: followed files, each held open.
    let (client, _driver) = eddy.connect().await.unwrap();
    for i in 0..60 {
        let path = dir.path().join(format!("in{i}.jsonl"));
        std::fs::write(&path, "{\"id\": 1}\n").unwrap();
        client
            .batch_execute(&format!(
                "CREATE TABLE followed{i} (id BIGINT) WITH (connector = 'file', \
                 path = '{}', follow = 'true') FORMAT PLAIN ENCODE JSON",
                path.display()
            ))
            .await
            .unwrap();
    }
    // Clients that connect and say nothing: each holds a descriptor until the server gives up
    // on it; past the descriptors left, accepting fails.
    let mut silent = Vec::new();
    for _ in 0..250 {
        match tokio::net::TcpStream::connect(eddy.addr()).await {
            Ok(stream) => silent.push(stream),
            Err(_) => break,
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pid = eddy.pid().unwrap();
    let before = cpu_time(pid).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let used = cpu_time(pid).unwrap() - before;
    let log = std::fs::read_to_string(eddy.log_file()).unwrap();
    let failures = log
        .lines()
        .filter(|l| l.contains("accepting connections failed"))
        .count();
    assert!(
        (1..=2).contains(&failures),
        "{failures} log lines of failed accepts\n{}",
        eddy.log_tail(10)
    );
    assert!(
        used < Duration::from_millis(600),
        "the server used {used:?} of CPU in 3 s while out of descriptors"
    );
    // Descriptors back: the server takes clients again.
    drop(silent);
    let mut answered = false;
    for _ in 0..50 {
        if let Ok((client, _driver)) = eddy.connect().await {
            if client.simple_query("SELECT 1").await.is_ok() {
                answered = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(answered, "{}", eddy.log_tail(10));
}
