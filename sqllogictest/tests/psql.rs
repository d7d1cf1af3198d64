//! psql's meta-commands (`\d`, `\dt`, `\dt+`, `\dv`, `\dm`, `\dm+`, `\di`, `\d name`, `\l`,
//! `\l+`, `\dn`) against a real eddy: psql sends its own catalog queries, and its output must list
//! Eddy's objects.

mod common;

use std::process::Command;

use eddy_sqllogictest::{EddyProcess, DATABASE, USER};

/// Runs one psql command with unaligned output (`|` between columns) and returns what it
/// printed (psql's notes such as "Did not find any relations." go to stderr).
fn psql(eddy: &EddyProcess, psql: &std::path::Path, command: &str) -> String {
    let output = Command::new(psql)
        .args(["-X", "-A", "-F", "|", "-v", "ON_ERROR_STOP=1"])
        .args(["-h", "127.0.0.1", "-p", &eddy.port().to_string()])
        .args(["-U", USER, "-d", DATABASE, "-c", command])
        .env("PGCONNECT_TIMEOUT", "10")
        .output()
        .expect("run psql");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(
        output.status.success() && !stderr.contains("ERROR"),
        "psql -c '{command}' failed ({}):\n{stderr}\n{stdout}",
        output.status
    );
    stdout + &stderr
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

#[tokio::test]
async fn psql_meta_commands_list_eddys_objects() {
    let Some(psql_bin) = common::require("psql", common::on_path("psql")) else {
        return;
    };
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _conn) = eddy.connect().await.expect("connect");
    client
        .batch_execute(common::SAMPLE_OBJECTS)
        .await
        .expect("create objects");

    let all = psql(&eddy, &psql_bin, r"\d");
    let all = lines(&all);
    assert_eq!(all[0], "List of relations");
    assert_eq!(all[1], "Schema|Name|Type|Owner");
    // Sorted by schema and name; only what is on the search path, as in Postgres.
    assert_eq!(
        all[2..],
        [
            "public|bid|foreign table|postgres",
            "public|per_sensor|materialized view|postgres",
            "public|readings|table|postgres",
            "(3 rows)",
        ],
        "{all:#?}"
    );
    // Eddy's system tables, by schema.
    let system = psql(&eddy, &psql_bin, r"\dt eddy_catalog.*");
    assert!(
        system.contains("eddy_catalog|source_progress|table|"),
        "{system}"
    );
    let progress = psql(&eddy, &psql_bin, r"\d eddy_catalog.tables");
    assert!(
        progress.starts_with("Table \"eddy_catalog.tables\""),
        "{progress}"
    );

    let tables = psql(&eddy, &psql_bin, r"\dt");
    assert!(tables.contains("public|readings|table|"), "{tables}");
    assert!(
        !tables.contains("per_sensor"),
        "\\dt lists tables only: {tables}"
    );
    assert!(
        !tables.contains("|bid|"),
        "\\dt lists tables only: {tables}"
    );

    // Eddy's views are all materialized: \dv finds none, \dm finds them.
    let views = psql(&eddy, &psql_bin, r"\dv");
    assert_eq!(views.trim(), "Did not find any relations.");
    let matviews = psql(&eddy, &psql_bin, r"\dm");
    let matviews = lines(&matviews);
    assert_eq!(matviews[1], "Schema|Name|Type|Owner");
    assert!(matviews[2].starts_with("public|per_sensor|materialized view|"));
    assert_eq!(matviews[3], "(1 row)");

    let table = psql(&eddy, &psql_bin, r"\d readings");
    assert_eq!(
        lines(&table)[..7],
        [
            "Table \"public.readings\"",
            "Column|Type|Collation|Nullable|Default",
            "sensor|integer||not null|",
            "value|double precision|||",
            "ts|timestamp without time zone|||",
            "Indexes:",
            "    \"readings_pkey\" PRIMARY KEY, btree (sensor)",
        ]
    );
    let indexes = psql(&eddy, &psql_bin, r"\di");
    assert!(
        indexes.contains("public|readings_pkey|index|postgres|readings"),
        "{indexes}"
    );
    let view = psql(&eddy, &psql_bin, r"\d per_sensor");
    assert_eq!(
        lines(&view)[..4],
        [
            "Materialized view \"public.per_sensor\"",
            "Column|Type|Collation|Nullable|Default",
            "sensor|integer||not null|",
            "n|bigint||not null|",
        ]
    );

    let databases = psql(&eddy, &psql_bin, r"\l");
    assert!(
        lines(&databases)
            .iter()
            .any(|line| line.starts_with("dev|")),
        "{databases}"
    );
    // The `+` forms add sizes (pg_size_pretty over pg_database_size / pg_table_size).
    let databases = psql(&eddy, &psql_bin, r"\l+");
    let header = lines(&databases)[1];
    assert!(header.contains("|Size|"), "{databases}");
    assert!(
        lines(&databases).iter().any(|l| l.starts_with("dev|")
            && (l.contains(" bytes|") || l.contains(" kB|") || l.contains(" MB|"))),
        "{databases}"
    );
    let tables = psql(&eddy, &psql_bin, r"\dt+");
    assert!(lines(&tables)[1].contains("|Size|"), "{tables}");
    assert!(tables.contains("public|readings|table|"), "{tables}");
    let matviews = psql(&eddy, &psql_bin, r"\dm+");
    assert!(
        matviews.contains("public|per_sensor|materialized view|"),
        "{matviews}"
    );

    let schemas = psql(&eddy, &psql_bin, r"\dn");
    let schemas = lines(&schemas);
    assert_eq!(schemas[1], "Name|Owner");
    assert!(schemas.iter().any(|line| line.starts_with("public|")));
    assert!(schemas.iter().any(|line| line.starts_with("eddy_catalog|")));

    // A name that does not exist: psql's own message, and a failing exit status.
    let missing = Command::new(&psql_bin)
        .args(["-X", "-h", "127.0.0.1", "-p", &eddy.port().to_string()])
        .args(["-U", USER, "-d", DATABASE, "-c", r"\d nothing_here"])
        .output()
        .expect("run psql");
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("Did not find any relation named \"nothing_here\""),
        "{stderr}"
    );
}

/// The meta-commands that read more of the catalog: a plain view (`\dv`, `\d+ v` with its
/// definition), a source as a foreign table with its connector as the server, the `+` forms
/// of a table and the schemas, roles (`\du`) and functions (`\df+`).
#[tokio::test]
async fn psql_describes_views_sources_roles_and_plus_forms() {
    let Some(psql_bin) = common::require("psql", common::on_path("psql")) else {
        return;
    };
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _conn) = eddy.connect().await.expect("connect");
    client
        .batch_execute(common::SAMPLE_OBJECTS)
        .await
        .expect("create objects");
    client
        .batch_execute("CREATE VIEW hot AS SELECT sensor, value FROM readings WHERE value > 10")
        .await
        .expect("create a plain view");

    let views = psql(&eddy, &psql_bin, r"\dv");
    let views = lines(&views);
    assert_eq!(
        views[1..],
        [
            "Schema|Name|Type|Owner",
            "public|hot|view|postgres",
            "(1 row)"
        ],
        "{views:#?}"
    );
    let view = psql(&eddy, &psql_bin, r"\d+ hot");
    let view = lines(&view);
    assert_eq!(view[0], "View \"public.hot\"");
    assert_eq!(
        view[1],
        "Column|Type|Collation|Nullable|Default|Storage|Description"
    );
    assert!(view[2].starts_with("sensor|integer|"), "{view:#?}");
    let at = view.iter().position(|l| *l == "View definition:");
    assert_eq!(
        at.map(|i| view[i + 1]),
        Some(" SELECT sensor, value FROM readings WHERE value > 10;"),
        "{view:#?}"
    );

    let source = psql(&eddy, &psql_bin, r"\d bid");
    let source = lines(&source);
    assert_eq!(
        source,
        [
            "Foreign table \"public.bid\"",
            "Column|Type|Collation|Nullable|Default|FDW options",
            "auction|bigint||||",
            "price|bigint||||",
            "date_time|timestamp without time zone||||",
            "Server: nexmark",
        ]
    );

    let table = psql(&eddy, &psql_bin, r"\d+ readings");
    let table = lines(&table);
    assert_eq!(
        table[..4],
        [
            "Table \"public.readings\"",
            "Column|Type|Collation|Nullable|Default|Storage|Compression|Stats target|Description",
            "sensor|integer||not null||plain|||",
            "value|double precision||||plain|||",
        ]
    );
    assert!(
        table.contains(&"    \"readings_pkey\" PRIMARY KEY, btree (sensor)"),
        "{table:#?}"
    );

    let schemas = psql(&eddy, &psql_bin, r"\dn+");
    let schemas = lines(&schemas);
    assert_eq!(schemas[1], "Name|Owner|Access privileges|Description");
    assert!(schemas.contains(&"public|postgres||"), "{schemas:#?}");

    let roles = psql(&eddy, &psql_bin, r"\du");
    let roles = lines(&roles);
    assert_eq!(
        roles,
        [
            "List of roles",
            "Role name|Attributes|Member of",
            "postgres|Superuser, Create role, Create DB|{}",
        ]
    );

    let functions = psql(&eddy, &psql_bin, r"\df+");
    let functions = lines(&functions);
    assert_eq!(functions[0], "List of functions");
    assert!(functions[1]
        .starts_with("Schema|Name|Result data type|Argument data types|Type|Volatility|"));
    assert_eq!(functions.last(), Some(&"(0 rows)"));
}

/// Indexes as psql shows them (`\di`, `\di+`, the "Indexes:" of `\d table` and of a
/// materialized view, `\d index`), each compared with what psql prints for the same objects on
/// PostgreSQL 15.
#[tokio::test]
async fn psql_lists_and_describes_indexes() {
    let Some(psql_bin) = common::require("psql", common::on_path("psql")) else {
        return;
    };
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _conn) = eddy.connect().await.expect("connect");
    client
        .batch_execute(
            "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT, status TEXT, total DOUBLE PRECISION);
             CREATE TABLE events (kind TEXT, at TIMESTAMP);
             CREATE INDEX orders_by_customer ON orders (customer, status) INCLUDE (total);
             CREATE INDEX events_by_time ON events (at);
             CREATE MATERIALIZED VIEW per_customer AS
               SELECT customer, count(*) AS n FROM orders GROUP BY customer;
             CREATE INDEX per_customer_by_n ON per_customer (n);
             INSERT INTO events VALUES ('a', TIMESTAMP '2026-01-01 00:00:00');",
        )
        .await
        .expect("create objects");

    let table = psql(&eddy, &psql_bin, r"\d orders");
    assert_eq!(
        lines(&table),
        [
            "Table \"public.orders\"",
            "Column|Type|Collation|Nullable|Default",
            "id|bigint||not null|",
            "customer|integer|||",
            "status|text|||",
            "total|double precision|||",
            "Indexes:",
            "    \"orders_pkey\" PRIMARY KEY, btree (id)",
            "    \"orders_by_customer\" btree (customer, status) INCLUDE (total)",
        ]
    );
    let table = psql(&eddy, &psql_bin, r"\d events");
    assert_eq!(
        lines(&table)[4..],
        ["Indexes:", "    \"events_by_time\" btree (at)"],
        "{table}"
    );
    let view = psql(&eddy, &psql_bin, r"\d per_customer");
    let view = lines(&view);
    assert_eq!(view[0], "Materialized view \"public.per_customer\"");
    assert_eq!(
        view[view.len() - 2..],
        ["Indexes:", "    \"per_customer_by_n\" btree (n)"],
        "{view:#?}"
    );

    let indexes = psql(&eddy, &psql_bin, r"\di");
    assert_eq!(
        lines(&indexes),
        [
            "List of relations",
            "Schema|Name|Type|Owner|Table",
            "public|events_by_time|index|postgres|events",
            "public|orders_by_customer|index|postgres|orders",
            "public|orders_pkey|index|postgres|orders",
            "public|per_customer_by_n|index|postgres|per_customer",
            "(4 rows)",
        ]
    );
    // With sizes: the bytes of each index's entries (Postgres counts pages instead).
    let indexes = psql(&eddy, &psql_bin, r"\di+");
    let indexes = lines(&indexes);
    assert_eq!(
        indexes[1],
        "Schema|Name|Type|Owner|Table|Persistence|Access method|Size|Description"
    );
    let events = indexes
        .iter()
        .find(|l| l.starts_with("public|events_by_time|"))
        .expect("events_by_time listed");
    assert!(
        events.starts_with("public|events_by_time|index|postgres|events|permanent|btree|")
            && events.ends_with(" bytes|")
            && !events.ends_with("|0 bytes|"),
        "{indexes:#?}"
    );

    let index = psql(&eddy, &psql_bin, r"\d orders_by_customer");
    assert_eq!(
        lines(&index),
        [
            "Index \"public.orders_by_customer\"",
            "Column|Type|Key?|Definition",
            "customer|integer|yes|customer",
            "status|text|yes|status",
            "total|double precision|no|total",
            "btree, for table \"public.orders\"",
        ]
    );
    let key = psql(&eddy, &psql_bin, r"\d orders_pkey");
    assert_eq!(
        lines(&key),
        [
            "Index \"public.orders_pkey\"",
            "Column|Type|Key?|Definition",
            "id|bigint|yes|id",
            "primary key, btree, for table \"public.orders\"",
        ]
    );
    let on_view = psql(&eddy, &psql_bin, r"\d per_customer_by_n");
    assert_eq!(
        lines(&on_view),
        [
            "Index \"public.per_customer_by_n\"",
            "Column|Type|Key?|Definition",
            "n|bigint|yes|n",
            "btree, for table \"public.per_customer\"",
        ]
    );

    // Dropped, it is gone from the table's description and the list.
    client
        .batch_execute("DROP INDEX orders_by_customer")
        .await
        .expect("drop the index");
    let table = psql(&eddy, &psql_bin, r"\d orders");
    assert_eq!(
        lines(&table)[6..],
        ["Indexes:", "    \"orders_pkey\" PRIMARY KEY, btree (id)"],
        "{table}"
    );
    let indexes = psql(&eddy, &psql_bin, r"\di");
    assert!(!indexes.contains("orders_by_customer"), "{indexes}");
}
