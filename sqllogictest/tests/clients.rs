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

/// `pg_dump` with these arguments against an eddy; its output.
fn pg_dump(pg_dump: &Path, eddy: &EddyProcess) -> String {
    let output = Command::new(pg_dump)
        .args([
            "--schema-only",
            "-h",
            "127.0.0.1",
            "-p",
            &eddy.port().to_string(),
        ])
        .args([
            "-U",
            eddy_sqllogictest::USER,
            "-d",
            eddy_sqllogictest::DATABASE,
        ])
        .env("PGCONNECT_TIMEOUT", "10")
        .output()
        .expect("run pg_dump");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stderr.is_empty(),
        "pg_dump failed ({}):\n{stderr}\n{}",
        output.status,
        eddy.log_tail(20)
    );
    // Without the random key of psql's `\restrict` lines.
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| !line.starts_with("\\restrict") && !line.starts_with("\\unrestrict"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn pg_dump_schema_only_recreates_tables_and_views() {
    let Some(pg_dump_bin) = common::require("pg_dump", common::on_path("pg_dump")) else {
        return;
    };
    let Some(psql) = common::require("psql", common::on_path("psql")) else {
        return;
    };
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _connection) = eddy.connect().await.expect("connect");
    client
        .batch_execute(
            "CREATE TABLE readings (id INT PRIMARY KEY, sensor TEXT, value DOUBLE, at TIMESTAMPTZ);
             CREATE TABLE notes (line TEXT, title VARCHAR(20), kind character varying,
                 price NUMERIC(10, 2), amount NUMERIC, doc JSONB, raw JSON);
             CREATE MATERIALIZED VIEW per_sensor AS
                 SELECT sensor, count(*) AS n FROM readings GROUP BY sensor;
             CREATE MATERIALIZED VIEW busy AS SELECT sensor FROM per_sensor WHERE n > 10;
             CREATE VIEW recent AS SELECT id, value FROM readings;
             INSERT INTO readings VALUES (1, 'a', 1.5, '2026-01-01 00:00:00+00');",
        )
        .await
        .unwrap();
    let dump = pg_dump(&pg_dump_bin, &eddy);
    let at = |text: &str| {
        dump.find(text)
            .unwrap_or_else(|| panic!("no {text:?} in the dump:\n{dump}"))
    };
    // Each relation after those it reads; Eddy's own schema is not the user's.
    assert!(
        at("CREATE TABLE public.readings (\n    id integer NOT NULL,")
            < at("CREATE MATERIALIZED VIEW public.per_sensor AS")
    );
    assert!(
        at("CREATE MATERIALIZED VIEW public.per_sensor AS")
            < at("CREATE MATERIALIZED VIEW public.busy AS")
    );
    assert!(at("CREATE TABLE public.readings") < at("CREATE VIEW public.recent AS"));
    // Columns as declared: the type modifiers are kept.
    at("CREATE TABLE public.notes (\n    line text,\n    title character varying(20),\n    kind character varying,\n    price numeric(10,2),\n    amount numeric,\n    doc jsonb,\n    raw json\n);");
    at("ALTER TABLE ONLY public.readings\n    ADD CONSTRAINT readings_pkey PRIMARY KEY (id);");
    assert!(!dump.contains("eddy_catalog"), "{dump}");
    assert!(
        !dump.contains("GRANT") && !dump.contains("REVOKE"),
        "{dump}"
    );

    // Restored into a fresh eddy by psql, the dump recreates every relation, the primary key
    // (added by ALTER TABLE to the empty table) included: dumped again, it is the same.
    let restored = EddyProcess::start_fresh()
        .await
        .expect("start a second eddy");
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), &dump).unwrap();
    let output = Command::new(&psql)
        .args(["-X", "-h", "127.0.0.1", "-p", &restored.port().to_string()])
        .args([
            "-U",
            eddy_sqllogictest::USER,
            "-d",
            eddy_sqllogictest::DATABASE,
            "-f",
        ])
        .arg(script.path())
        .output()
        .expect("run psql");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && !stderr.contains("ERROR"),
        "{stderr}"
    );
    assert_eq!(pg_dump(&pg_dump_bin, &restored), dump);
    eprintln!("pg_dump --schema-only: dumped, restored and dumped again alike");

    // A source is a foreign table of its connector's server, which is Eddy's own (built in,
    // as the connectors are): pg_dump runs, and dumps the table but not the server.
    let (client, _connection) = restored.connect().await.expect("connect");
    client
        .batch_execute(
            "CREATE SOURCE bids (auction BIGINT, bidder VARCHAR(10)) WITH (
                 connector = 'nexmark', nexmark.table.type = 'bid',
                 nexmark.event.rate = '10', nexmark.max.events = '10')",
        )
        .await
        .unwrap();
    let dump = pg_dump(&pg_dump_bin, &restored);
    assert!(
        dump.contains("CREATE FOREIGN TABLE public.bids (\n    auction bigint,\n    bidder character varying(10)\n)\nSERVER nexmark;"),
        "{dump}"
    );
    assert!(!dump.contains("CREATE SERVER"), "{dump}");
}
