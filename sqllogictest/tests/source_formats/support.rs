//! What the format tests share: a running Eddy with a broker, and reading rows as text.

use std::io::Write as _;

use eddy_sqllogictest::kafka::KafkaBroker;
use eddy_sqllogictest::EddyProcess;
use tokio_postgres::Client;

/// The broker, the server (kept running while the test holds it) and a client of it.
pub struct Setup {
    pub broker: KafkaBroker,
    pub _eddy: EddyProcess,
    pub client: Client,
}

pub async fn setup() -> Setup {
    let broker = KafkaBroker::from_env().expect("the test script starts a broker");
    let eddy = EddyProcess::start_fresh().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    Setup {
        broker,
        _eddy: eddy,
        client,
    }
}

/// The rows of a query in PostgreSQL's text form (NULL as "NULL"), joined by `|`.
pub async fn text_rows(client: &Client, sql: &str) -> Vec<String> {
    let rows = eddy_sqllogictest::rows::text_rows(client, sql).await;
    rows.into_iter().map(|row| row.join("|")).collect()
}

/// The SQLSTATE a statement fails with.
pub async fn sqlstate(client: &Client, sql: &str) -> String {
    let error = client
        .batch_execute(sql)
        .await
        .expect_err(&format!("{sql} should fail"));
    error
        .code()
        .map(|c| c.code().to_string())
        .unwrap_or_else(|| panic!("{sql}: no SQLSTATE in {error}"))
}

/// Messages encoded by a format's reference library (`clients/encode_messages.py ARGS
/// RECORDS`), one per record; `None` when the Python clients are not installed (and not
/// required).
pub fn encode_messages(args: &[&str], records: &[String]) -> Option<Vec<Vec<u8>>> {
    let python = crate::common::require(
        "the Python clients (fastavro, protobuf)",
        Some(crate::common::clients_dir().join("python/bin/python")),
    )?;
    let mut file = tempfile::NamedTempFile::new().unwrap();
    for record in records {
        writeln!(file, "{record}").unwrap();
    }
    let output = std::process::Command::new(python)
        .arg(crate::common::scripts_dir().join("encode_messages.py"))
        .args(args)
        .arg(file.path())
        .output()
        .expect("running python");
    assert!(
        output.status.success(),
        "encode_messages.py {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(
        String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|line| decode_hex(line.trim()))
            .collect(),
    )
}

fn decode_hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// Compiles `file` in `dir` with protoc (grpcio-tools') into a FileDescriptorSet with its
/// imports; `None` when the Python clients are not installed (and not required).
pub fn protoc(dir: &std::path::Path, file: &str) -> Option<std::path::PathBuf> {
    let python = crate::common::require(
        "the Python clients (grpcio-tools)",
        Some(crate::common::clients_dir().join("python/bin/python")),
    )?;
    let out = dir.join(format!("{file}.desc"));
    let output = std::process::Command::new(python)
        .args(["-m", "grpc_tools.protoc", "--include_imports"])
        .arg(format!("--descriptor_set_out={}", out.display()))
        .arg(format!("-I{}", dir.display()))
        .arg(dir.join(file))
        .output()
        .expect("running protoc");
    assert!(
        output.status.success(),
        "protoc {file}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(out)
}

/// `WITH (...)` reading `topic` from its start.
pub fn earliest_from(broker: &KafkaBroker, topic: &str) -> String {
    format!(
        "WITH (connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{}',
               scan.startup.mode = 'earliest')",
        broker.bootstrap()
    )
}

/// `name|type` of each column of `table`, in order (information_schema).
pub async fn column_types(client: &Client, table: &str) -> Vec<String> {
    text_rows(
        client,
        &format!(
            "SELECT column_name, data_type FROM information_schema.columns
             WHERE table_name = '{table}' ORDER BY ordinal_position"
        ),
    )
    .await
}
