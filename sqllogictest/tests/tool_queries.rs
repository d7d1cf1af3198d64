//! The on-connect and schema-browsing queries of Grafana, Metabase, Superset and DBeaver
//! (`sqllogictest/clients/tool_queries.sql`) against a real eddy: every one runs without
//! error, and the ones that list objects list Eddy's.

mod common;

use eddy_sqllogictest::EddyProcess;
use tokio_postgres::SimpleQueryMessage;

/// `(name, sql)` for each `-- tool: what` block of the fixture.
fn blocks(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let header = line.strip_prefix("-- ").filter(|rest| {
            rest.split_once(": ")
                .is_some_and(|(tool, _)| !tool.contains(' '))
        });
        match (header, out.last_mut()) {
            (Some(name), _) => out.push((name.to_string(), String::new())),
            (None, Some((_, sql))) => {
                sql.push_str(line);
                sql.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// Rows as `a|b|c` lines (NULL as empty).
fn rows(messages: &[SimpleQueryMessage]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some(
                (0..row.len())
                    .map(|i| row.get(i).unwrap_or(""))
                    .collect::<Vec<_>>()
                    .join("|"),
            ),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn bi_tools_catalog_queries_run() {
    let fixture = common::manifest_dir().join("clients/tool_queries.sql");
    let text = std::fs::read_to_string(&fixture).expect("read the fixture");
    let blocks = blocks(&text);
    for tool in ["grafana", "metabase", "superset", "dbeaver"] {
        assert!(
            blocks
                .iter()
                .filter(|(name, _)| name.starts_with(tool))
                .count()
                >= 3,
            "the fixture has {tool}'s queries"
        );
    }

    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _conn) = eddy.connect().await.expect("connect");
    client
        .batch_execute(common::SAMPLE_OBJECTS)
        .await
        .expect("create objects");

    // What some answers must contain, beyond running at all.
    let expected: &[(&str, &[&str])] = &[
        ("grafana: server version", &["1500"]),
        (
            "grafana: tables of a schema",
            &["bid", "per_sensor", "readings"],
        ),
        (
            "grafana: columns of a table",
            &[
                "sensor|integer",
                "value|double precision",
                "ts|timestamp without time zone",
            ],
        ),
        (
            "metabase: tables, views and materialized views",
            &[
                "public|bid|FOREIGN TABLE",
                "public|per_sensor|MATERIALIZED VIEW",
                "public|readings|TABLE",
            ],
        ),
        (
            "metabase: fields of tables and views (information_schema part)",
            &["sensor|int4|0|public|readings|t||t"],
        ),
        (
            "metabase: fields of materialized views (pg_catalog part)",
            &["n|int8|1|public|per_sensor"],
        ),
        (
            "metabase: indexes (first column of each)",
            &["public|readings|sensor"],
        ),
        ("superset: databases (catalogs)", &["dev"]),
        ("dbeaver: constraints of a table", &["readings_pkey"]),
        (
            "dbeaver: view definition",
            &["SELECT sensor, count(*) AS n FROM readings GROUP BY sensor"],
        ),
    ];

    // Rows some answers must have exactly: Grafana names a table on the search path without
    // its schema, and one elsewhere with it.
    let exact: &[(&str, &[&str])] = &[(
        "grafana: tables on the search path",
        &["per_sensor", "readings", "eddy_catalog.sources"],
    )];

    let mut failures = Vec::new();
    for (name, sql) in &blocks {
        match client.simple_query(sql).await {
            Ok(messages) => {
                let got = rows(&messages);
                if let Some((_, wanted)) = expected.iter().find(|(n, _)| n == name) {
                    for want in *wanted {
                        if !got.iter().any(|row| row.contains(want)) {
                            failures.push(format!("{name}: no row contains {want:?} in {got:#?}"));
                        }
                    }
                }
                if let Some((_, wanted)) = exact.iter().find(|(n, _)| n == name) {
                    for want in *wanted {
                        if !got.iter().any(|row| row == want) {
                            failures.push(format!("{name}: no row is {want:?} in {got:#?}"));
                        }
                    }
                }
            }
            Err(e) => failures.push(format!("{name}: {e:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
