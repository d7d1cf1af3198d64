//! Real Postgres drivers against a real eddy: each script in `sqllogictest/clients/` runs
//! its own checks (parameters, catalog reflection, results) and fails on any mismatch.
//! scripts/install-clients.sh installs the drivers.

mod common;

use std::path::Path;
use std::process::Command;

use eddy_sqllogictest::EddyProcess;

/// Runs a client program against a fresh eddy and asserts it passed all its checks.
async fn run_client(program: &Path, args: &[&str], env: &[(&str, String)], done: &str) {
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(common::scripts_dir())
        .env("EDDY_PORT", eddy.port().to_string());
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("run the client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains(done),
        "{} {args:?} failed ({}):\n{stdout}\n{stderr}\n{}",
        program.display(),
        output.status,
        eddy.log_tail(20)
    );
    print!("{stdout}");
}

#[tokio::test]
async fn python_psycopg_sqlalchemy_pandas() {
    let python = common::clients_dir().join("python/bin/python");
    let Some(python) =
        common::require("python clients (psycopg, SQLAlchemy, pandas)", Some(python))
    else {
        return;
    };
    run_client(
        &python,
        &["python_clients.py"],
        &[],
        "python clients: all checks passed",
    )
    .await;
}

#[tokio::test]
async fn node_postgres() {
    let modules = common::clients_dir().join("node/node_modules");
    let Some(modules) = common::require("node-postgres", Some(modules.join("pg"))) else {
        return;
    };
    let Some(node) = common::require("node", common::on_path("node")) else {
        return;
    };
    let node_path = modules
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    run_client(
        &node,
        &["node_pg.js"],
        &[("NODE_PATH", node_path)],
        "node clients: all checks passed",
    )
    .await;
}

#[tokio::test]
async fn java_jdbc() {
    let jar = common::clients_dir().join("postgresql.jar");
    let Some(jar) = common::require("the PostgreSQL JDBC driver", Some(jar)) else {
        return;
    };
    let Some(java) = common::require("java", common::on_path("java")) else {
        return;
    };
    let jar = jar.display().to_string();
    // Java 11+ runs a single source file directly: no build step.
    run_client(
        &java,
        &["-cp", &jar, "JdbcCheck.java"],
        &[],
        "java clients: all checks passed",
    )
    .await;
}
