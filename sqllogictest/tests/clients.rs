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

/// `dbt run` of `clients/dbt_project` (a view, a table and a materialized-view model), in a
/// copy of the project so that dbt's `target/` and `logs/` stay out of the tree.
fn dbt_run(dbt: &Path, project: &Path, port: u16) {
    let output = Command::new(dbt)
        .args(["run", "--profiles-dir", ".", "--project-dir", "."])
        .current_dir(project)
        .env("EDDY_PORT", port.to_string())
        .output()
        .expect("run dbt");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("PASS=3"),
        "dbt run failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn dbt_runs_twice() {
    let dbt = common::clients_dir().join("dbt/bin/dbt");
    let Some(dbt) = common::require("dbt-postgres", Some(dbt)) else {
        return;
    };
    let project = tempfile::tempdir().expect("a temporary directory");
    let source = common::scripts_dir().join("dbt_project");
    for file in [
        "dbt_project.yml",
        "profiles.yml",
        "models/readings_view.sql",
        "models/readings_doubled.sql",
        "models/readings_per_sensor.sql",
    ] {
        let to = project.path().join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(source.join(file), &to).expect("copy the dbt project");
    }
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _connection) = eddy.connect().await.expect("connect");
    client
        .batch_execute(
            "CREATE TABLE readings (sensor INT, value DOUBLE);
             INSERT INTO readings VALUES (1, 2.5), (1, -1.0), (2, 4.0);",
        )
        .await
        .unwrap();
    let answers = || async {
        let mut answers = Vec::new();
        for sql in [
            "SELECT count(*) FROM readings_view",
            "SELECT CAST(sum(doubled) AS BIGINT) FROM readings_doubled",
            "SELECT CAST(sum(readings) AS BIGINT) FROM readings_per_sensor",
        ] {
            let row = client.query_one(sql, &[]).await.expect(sql);
            answers.push(row.get::<_, i64>(0));
        }
        answers
    };
    dbt_run(&dbt, project.path(), eddy.port());
    assert_eq!(answers().await, vec![2, 11, 3]);
    // The second run replaces the view and the table and refreshes the materialized view.
    client
        .batch_execute("INSERT INTO readings VALUES (3, 1.0)")
        .await
        .unwrap();
    dbt_run(&dbt, project.path(), eddy.port());
    assert_eq!(answers().await, vec![3, 13, 4]);
    eprintln!("dbt run twice: view, table and materialized view models as expected");
}
