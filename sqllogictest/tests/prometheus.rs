//! Eddy's metrics through a real Prometheus: it scrapes `--metrics-listen`, and its HTTP API
//! must show figures that move as rows arrive. The alert rules and the dashboard are checked
//! against what Eddy exports, and with `promtool check rules` / `promtool test rules`.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use eddy_sqllogictest::{free_port, EddyProcess};

fn repository() -> PathBuf {
    common::manifest_dir().join("..")
}

/// A Prometheus of the test's own, killed when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(binary: &Path, target: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 rule_files:\n  - {}\n\
                 scrape_configs:\n  - job_name: eddy\n    static_configs:\n      - targets: [\"{target}\"]\n",
                repository().join("docker/prometheus/alerts.yml").display()
            ),
        )
        .unwrap();
        let port = free_port().unwrap();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        Self {
            child,
            port,
            _dir: dir,
        }
    }

    /// The values of an instant query, by the series' labels rendered as JSON.
    fn query(&self, expr: &str) -> Option<Vec<(serde_json::Value, f64)>> {
        let url = format!("http://127.0.0.1:{}/api/v1/query", self.port);
        let mut response = ureq::get(&url).query("query", expr).call().ok()?;
        let body: serde_json::Value =
            serde_json::from_str(&response.body_mut().read_to_string().ok()?).ok()?;
        let results = body["data"]["result"].as_array()?;
        Some(
            results
                .iter()
                .map(|r| {
                    let value = r["value"][1]
                        .as_str()
                        .unwrap_or("NaN")
                        .parse()
                        .unwrap_or(f64::NAN);
                    (r["metric"].clone(), value)
                })
                .collect(),
        )
    }

    /// Waits until `expr` has one series whose value satisfies `check`; returns the value.
    fn wait_for(&self, expr: &str, check: impl Fn(f64) -> bool) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = None;
        while Instant::now() < deadline {
            last = self.query(expr);
            if let Some([(_, value)]) = last.as_deref() {
                if check(*value) {
                    return *value;
                }
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!("Prometheus never had a matching value for {expr}; last answer: {last:?}")
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_eddy(metrics_port: u16) -> EddyProcess {
    EddyProcess::start_fresh_with(|config| {
        config.checkpoint_interval = Some("200ms".into());
        config.extra_args = vec![
            "--metrics-listen".into(),
            format!("127.0.0.1:{metrics_port}"),
        ];
    })
    .await
    .expect("start eddy")
}

#[tokio::test(flavor = "multi_thread")]
async fn prometheus_scrapes_figures_that_move() {
    let Some(binary) = common::require("prometheus", common::on_path("prometheus")) else {
        return;
    };
    let metrics_port = free_port().unwrap();
    let eddy = start_eddy(metrics_port).await;
    let (client, _connection) = eddy.connect().await.expect("connect");
    client
        .batch_execute(
            "CREATE TABLE readings (sensor INT, value DOUBLE, ts TIMESTAMP,
               WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY;
             CREATE MATERIALIZED VIEW per_sensor AS
               SELECT sensor, count(*) AS n FROM readings GROUP BY sensor;
             INSERT INTO readings VALUES (1, 1.0, '2024-01-01 00:00:10'), (2, 2.0, '2024-01-01 00:00:11');
             INSERT INTO readings VALUES (1, 0.5, '2024-01-01 00:00:01');
             CREATE SOURCE bid (auction BIGINT, price BIGINT, date_time TIMESTAMP)
               WITH (connector = 'nexmark', nexmark.table.type = 'bid',
                     nexmark.event.rate = '2000', nexmark.max.events = '2000');
             CREATE MATERIALIZED VIEW bids AS SELECT count(*) AS n FROM bid;",
        )
        .await
        .expect("create objects");
    let prometheus = Prometheus::start(&binary, &format!("127.0.0.1:{metrics_port}"));

    prometheus.wait_for(r#"up{job="eddy"}"#, |v| v == 1.0);
    prometheus.wait_for(r#"eddy_table_rows_in_total{table="readings"}"#, |v| {
        v == 3.0
    });
    prometheus.wait_for(r#"eddy_view_rows_late_total{view="per_sensor"}"#, |v| {
        v == 1.0
    });
    client
        .batch_execute(
            "INSERT INTO readings VALUES (3, 3.0, '2024-01-01 00:00:12'), (3, 3.5, '2024-01-01 00:00:13');",
        )
        .await
        .unwrap();
    // The counter moved, and Prometheus sees it grow.
    prometheus.wait_for(r#"eddy_table_rows_in_total{table="readings"}"#, |v| {
        v == 5.0
    });
    prometheus.wait_for(
        r#"increase(eddy_table_rows_in_total{table="readings"}[1m])"#,
        |v| v > 0.0,
    );
    // The table's watermark is 2024-01-01 00:00:12 (13 s less its 1 s delay).
    prometheus.wait_for(
        r#"eddy_table_watermark_timestamp_seconds{table="readings"}"#,
        |v| v == 1_704_067_212.0,
    );

    // The bounded generator: its end is known, so the lag goes to 0 once it is read.
    prometheus.wait_for(
        r#"eddy_source_high_watermark_offset{source="bid",target="bids"}"#,
        |v| v == 2000.0,
    );
    prometheus.wait_for(
        r#"eddy_source_committed_offset{source="bid",target="bids"}"#,
        |v| v == 2000.0,
    );
    prometheus.wait_for(
        r#"eddy_source_lag_messages{source="bid",target="bids"}"#,
        |v| v == 0.0,
    );
    prometheus.wait_for(
        r#"eddy_source_lag_seconds{source="bid",target="bids"}"#,
        |v| v == 0.0,
    );

    // Statements, their errors by SQLSTATE, commits and connections.
    let error = client
        .simple_query("SELECT * FROM missing")
        .await
        .unwrap_err();
    assert_eq!(error.code().map(|c| c.code()), Some("42P01"));
    prometheus.wait_for(r#"eddy_statement_errors_total{sqlstate="42P01"}"#, |v| {
        v == 1.0
    });
    prometheus.wait_for("eddy_statements_total", |v| v >= 4.0);
    prometheus.wait_for("eddy_epoch_commit_duration_seconds_count", |v| v >= 3.0);
    prometheus.wait_for("eddy_epoch_write_duration_seconds_count", |v| v >= 3.0);
    prometheus.wait_for("eddy_epoch_bytes_written_total", |v| v > 0.0);
    prometheus.wait_for("eddy_connections_open", |v| v >= 1.0);
    prometheus.wait_for(
        r#"eddy_restore_duration_seconds{phase="restore_catalog"}"#,
        |v| v >= 0.0,
    );
    // The rules loaded: with a late row now, the late share of per_sensor is above 0.
    prometheus.wait_for(r#"eddy:view_late_share:rate5m{view="per_sensor"}"#, |v| {
        v == 0.0
    });
    client
        .batch_execute("INSERT INTO readings VALUES (4, 4.0, '2024-01-01 00:00:02');")
        .await
        .unwrap();
    prometheus.wait_for(r#"eddy_view_rows_late_total{view="per_sensor"}"#, |v| {
        v == 2.0
    });
    prometheus.wait_for(r#"eddy:view_late_share:rate5m{view="per_sensor"}"#, |v| {
        v > 0.0 && v <= 1.0
    });
}

/// Every `eddy_...` metric the alert rules and the dashboard use, stripped of histogram
/// suffixes.
fn metrics_used() -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for file in [
        "docker/prometheus/alerts.yml",
        "docker/grafana/dashboards/eddy.json",
    ] {
        let text = std::fs::read_to_string(repository().join(file)).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("eddy_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // `eddy_catalog` is the schema named in annotations, not a metric.
            if !name.starts_with("eddy_catalog") {
                let name = ["_bucket", "_count", "_sum"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .unwrap_or(&name)
                    .to_string();
                used.insert(name);
            }
            rest = &rest[at + 5..];
        }
    }
    used
}

#[tokio::test(flavor = "multi_thread")]
async fn alerts_and_dashboard_use_only_metrics_eddy_exports() {
    let dir = tempfile::tempdir().unwrap();
    let lines = dir.path().join("readings.jsonl");
    std::fs::write(
        &lines,
        "{\"k\": 1, \"ts\": \"2024-01-01 00:00:01\"}\nnot json\n{\"k\": 2, \"ts\": \"2024-01-01 00:00:02\"}\n",
    )
    .unwrap();
    let metrics_port = free_port().unwrap();
    let eddy = start_eddy(metrics_port).await;
    let (client, _connection) = eddy.connect().await.expect("connect");
    client
        .batch_execute(&format!(
            "CREATE TABLE t (k INT PRIMARY KEY, ts TIMESTAMP, WATERMARK FOR ts AS ts);
             CREATE SOURCE f (k INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
               WITH (connector = 'file', path = '{}') FORMAT PLAIN ENCODE JSON;
             CREATE MATERIALIZED VIEW joined AS SELECT f.k, t.ts FROM f JOIN t ON f.k = t.k;
             INSERT INTO t VALUES (1, '2024-01-01 00:00:05');
             FLUSH;",
            lines.display()
        ))
        .await
        .expect("create objects");
    let _ = client.simple_query("SELECT nonsense").await;
    // The file's end is estimated on the engine's next tick: scrape until its lag shows.
    let lag = r#"eddy_source_lag_messages{source="f",split=""#;
    let deadline = Instant::now() + Duration::from_secs(20);
    let body = loop {
        let mut response = ureq::get(&format!("http://127.0.0.1:{metrics_port}/metrics"))
            .call()
            .expect("scrape");
        let body = response.body_mut().read_to_string().unwrap();
        if body.contains(lag) || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Read to its end: nothing left, in lines and in seconds.
    let value = |name: &str| {
        body.lines()
            .find(|l| l.starts_with(name) && l.contains(r#"source="f""#))
            .and_then(|l| l.rsplit(' ').next())
            .map(|v| v.to_string())
    };
    assert_eq!(
        value("eddy_source_lag_messages").as_deref(),
        Some("0"),
        "{body}"
    );
    assert_eq!(
        value("eddy_source_lag_seconds").as_deref(),
        Some("0"),
        "{body}"
    );
    let size = std::fs::metadata(&lines).unwrap().len().to_string();
    assert_eq!(
        value("eddy_source_high_watermark_offset").as_deref(),
        Some(size.as_str()),
        "{body}"
    );
    let exported: BTreeSet<String> = body
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect();
    let missing: Vec<String> = metrics_used()
        .into_iter()
        .filter(|name| !exported.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "used but not exported: {missing:?}\nexported: {exported:?}"
    );
    assert!(
        body.contains(r#"eddy_source_dead_letters_total{source="f",split="#),
        "{body}"
    );
}

#[test]
fn alert_rules_pass_promtool() {
    let Some(promtool) = common::require("promtool", common::on_path("promtool")) else {
        return;
    };
    let rules = repository().join("docker/prometheus");
    for args in [
        vec!["check", "rules", "alerts.yml"],
        vec!["test", "rules", "alerts.test.yml"],
        vec!["check", "config", "prometheus.yml"],
    ] {
        let output = Command::new(&promtool)
            .args(&args)
            .current_dir(&rules)
            .output()
            .expect("run promtool");
        assert!(
            output.status.success(),
            "promtool {args:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn dashboard_and_compose_files_parse() {
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repository().join("docker/grafana/dashboards/eddy.json")).unwrap(),
    )
    .unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels
        .iter()
        .any(|p| p["title"] == "Lag (seconds to catch up)"));
    let compose = std::fs::read_to_string(repository().join("docker/docker-compose.yml")).unwrap();
    for service in ["eddy:", "prometheus:", "grafana:", "9466:9466"] {
        assert!(compose.contains(service), "compose lacks {service}");
    }
}
