//! What drivers rely on beyond plain queries, against a real eddy: SET/SHOW/RESET of the
//! settings they send, transactions accepted, COPY ... TO STDOUT, every scalar type in text and
//! binary results, portals fetched a few rows at a time, and the catalog functions and
//! `information_schema` that tools read.

use std::time::SystemTime;

use eddy_sqllogictest::EddyProcess;
use futures::{pin_mut, TryStreamExt};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, SimpleQueryMessage};

/// The first row of a simple query, as text cells (NULL as `None`).
async fn first_row(client: &Client, sql: &str) -> Vec<Option<String>> {
    let messages = client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    messages
        .iter()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some(
                (0..row.len())
                    .map(|i| row.get(i).map(str::to_string))
                    .collect(),
            ),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{sql} returned no row"))
}

async fn show(client: &Client, name: &str) -> String {
    first_row(client, &format!("SHOW {name}")).await[0]
        .clone()
        .unwrap_or_default()
}

#[tokio::test]
async fn set_show_reset_the_settings_drivers_use() {
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _conn) = eddy.connect().await.expect("connect");
    let (other, _conn2) = eddy.connect().await.expect("connect");

    for (name, value, shown) in [
        ("client_encoding", "'UTF8'", "UTF8"),
        ("DateStyle", "'ISO, MDY'", "ISO, MDY"),
        ("TimeZone", "'UTC'", "UTC"),
        ("search_path", "public", "public"),
        ("application_name", "'dashboards'", "dashboards"),
        ("extra_float_digits", "3", "3"),
        ("statement_timeout", "'30s'", "30s"),
        ("standard_conforming_strings", "on", "on"),
    ] {
        let default = show(&client, name).await;
        client
            .batch_execute(&format!("SET {name} = {value}"))
            .await
            .unwrap_or_else(|e| panic!("SET {name}: {e:?}"));
        assert_eq!(show(&client, name).await, shown, "SHOW {name} after SET");
        assert_eq!(
            show(&other, name).await,
            default,
            "{name} is per connection"
        );
        client
            .batch_execute(&format!("RESET {name}"))
            .await
            .unwrap();
        assert_eq!(show(&client, name).await, default, "RESET {name}");
    }
    assert_eq!(show(&client, "server_version").await, "15.6");
    client.batch_execute("SET TIME ZONE 'UTC'").await.unwrap();
    assert_eq!(show(&client, "timezone").await, "UTC");
    client
        .batch_execute("SET SESSION application_name TO 'x'")
        .await
        .unwrap();
    assert_eq!(show(&client, "application_name").await, "x");
    // current_setting() reads the connection's value too.
    let row = first_row(&client, "SELECT current_setting('application_name')").await;
    assert_eq!(row[0].as_deref(), Some("x"));
    client.batch_execute("RESET ALL").await.unwrap();
    assert_eq!(show(&client, "application_name").await, "");

    // SHOW through the extended protocol describes its one column.
    let statement = client.prepare("SHOW search_path").await.unwrap();
    assert_eq!(statement.columns()[0].name(), "search_path");
    let row = client.query_one(&statement, &[]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "\"$user\", public");

    let errors = [
        ("SHOW no_such_setting", SqlState::UNDEFINED_OBJECT),
        (
            "SET client_encoding = 'LATIN1'",
            SqlState::INVALID_PARAMETER_VALUE,
        ),
        (
            "SET statement_timeout = 'soon'",
            SqlState::INVALID_PARAMETER_VALUE,
        ),
        (
            "SET extra_float_digits = 9",
            SqlState::INVALID_PARAMETER_VALUE,
        ),
    ];
    for (sql, code) in errors {
        let err = client.batch_execute(sql).await.expect_err(sql);
        assert_eq!(err.code(), Some(&code), "{sql}: {err:?}");
    }

    // statement_timeout cancels a statement that runs longer.
    client
        .batch_execute("SET statement_timeout = 1")
        .await
        .unwrap();
    let err = client
        .simple_query("SELECT count(*) FROM generate_series(1, 200000000)")
        .await
        .expect_err("the statement outlives its timeout");
    assert_eq!(err.code(), Some(&SqlState::QUERY_CANCELED), "{err:?}");
    client
        .batch_execute("RESET statement_timeout")
        .await
        .unwrap();
    assert_eq!(
        first_row(&client, "SELECT 1").await[0].as_deref(),
        Some("1")
    );
}

#[tokio::test]
async fn transactions_are_accepted_and_savepoints_too() {
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (mut client, _conn) = eddy.connect().await.expect("connect");
    client
        .batch_execute("CREATE TABLE t (a INT)")
        .await
        .unwrap();
    let tx = client.transaction().await.unwrap();
    tx.execute("INSERT INTO t VALUES (1)", &[]).await.unwrap();
    tx.batch_execute("SAVEPOINT s1; RELEASE SAVEPOINT s1; SAVEPOINT s2; ROLLBACK TO SAVEPOINT s2")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    client
        .batch_execute("BEGIN; INSERT INTO t VALUES (2); COMMIT; START TRANSACTION; ROLLBACK")
        .await
        .unwrap();
    // Every statement commits on its own: a rolled-back transaction keeps what it did.
    let tx = client.transaction().await.unwrap();
    tx.execute("INSERT INTO t VALUES (3)", &[]).await.unwrap();
    tx.rollback().await.unwrap();
    let n: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 3);
}

async fn copy_text(client: &Client, sql: &str) -> String {
    let stream = client
        .copy_out(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    pin_mut!(stream);
    let mut out = Vec::new();
    while let Some(chunk) = stream.try_next().await.unwrap() {
        out.extend_from_slice(&chunk);
    }
    String::from_utf8(out).unwrap()
}

#[tokio::test]
async fn copy_to_stdout_in_csv_and_text() {
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _conn) = eddy.connect().await.expect("connect");
    client
        .batch_execute(
            "CREATE TABLE notes (id INT PRIMARY KEY, body VARCHAR, score DOUBLE);
             INSERT INTO notes VALUES (1, 'plain', 1.5), (2, 'a \"quoted\", comma', NULL),
                                      (3, 'tab\there', 2.0);",
        )
        .await
        .unwrap();
    assert_eq!(
        copy_text(
            &client,
            "COPY (SELECT id, body, score FROM notes ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)"
        )
        .await,
        "id,body,score\n1,plain,1.5\n2,\"a \"\"quoted\"\", comma\",\n3,tab\there,2\n"
    );
    assert_eq!(
        copy_text(
            &client,
            "COPY (SELECT id, body, score FROM notes ORDER BY id) TO STDOUT"
        )
        .await,
        "1\tplain\t1.5\n2\ta \"quoted\", comma\t\\N\n3\ttab\\there\t2\n"
    );
    assert_eq!(
        copy_text(
            &client,
            "COPY (SELECT id FROM notes WHERE id > 1 ORDER BY id) TO STDOUT WITH CSV"
        )
        .await,
        "2\n3\n"
    );
    let err = client
        .simple_query("COPY notes FROM STDIN")
        .await
        .expect_err("COPY FROM is refused");
    assert_eq!(
        err.code(),
        Some(&SqlState::FEATURE_NOT_SUPPORTED),
        "{err:?}"
    );
    let err = client
        .simple_query("COPY (SELECT 1) TO '/tmp/x.csv'")
        .await
        .expect_err("COPY to a file is refused");
    assert_eq!(
        err.code(),
        Some(&SqlState::FEATURE_NOT_SUPPORTED),
        "{err:?}"
    );
}

const ALL_TYPES: &str = "SELECT 1::int2 AS i2, 2::int4 AS i4, 3::int8 AS i8, 1.5::float4 AS f4, \
    2.25::float8 AS f8, 12.345::numeric(10,3) AS num, true AS b, 'x'::text AS t, 'y'::varchar AS v, \
    TIMESTAMP '2026-01-02 03:04:05.5' AS ts, TIMESTAMPTZ '2026-01-02 03:04:05+00' AS tstz, \
    DATE '2026-01-02' AS d, TIME '03:04:05' AS tm, INTERVAL '1 day 2 hours' AS iv, \
    decode('deadbeef', 'hex') AS by, '{\"a\": 1}'::jsonb AS j, ARRAY[1, 2, 3] AS ai, \
    ARRAY['a', 'b c'] AS at";

/// A `jsonb` value's text: its binary form is a version byte (1), then the text.
struct JsonbText(String);

impl<'a> tokio_postgres::types::FromSql<'a> for JsonbText {
    fn from_sql(
        _ty: &tokio_postgres::types::Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let text = raw.strip_prefix(&[1]).ok_or("not jsonb's version 1")?;
        Ok(Self(String::from_utf8(text.to_vec())?))
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        *ty == tokio_postgres::types::Type::JSONB
    }
}

#[tokio::test]
async fn every_type_in_text_and_binary_results() {
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _conn) = eddy.connect().await.expect("connect");

    // Text: the simple protocol.
    let text = first_row(&client, ALL_TYPES).await;
    let text: Vec<&str> = text
        .iter()
        .map(|c| c.as_deref().unwrap_or("NULL"))
        .collect();
    assert_eq!(
        text,
        [
            "1",
            "2",
            "3",
            "1.5",
            "2.25",
            "12.345",
            "t",
            "x",
            "y",
            // As PostgreSQL prints them: no trailing zeros.
            "2026-01-02 03:04:05.5",
            "2026-01-02 03:04:05+00",
            "2026-01-02",
            "03:04:05",
            "1 day 02:00:00",
            "\\xdeadbeef",
            "{\"a\": 1}",
            "{1,2,3}",
            "{a,\"b c\"}",
        ]
    );

    // Binary: tokio-postgres asks for binary results in the extended protocol.
    let row = client.query_one(ALL_TYPES, &[]).await.unwrap();
    assert_eq!(row.get::<_, i16>("i2"), 1);
    assert_eq!(row.get::<_, i32>("i4"), 2);
    assert_eq!(row.get::<_, i64>("i8"), 3);
    assert_eq!(row.get::<_, f32>("f4"), 1.5);
    assert_eq!(row.get::<_, f64>("f8"), 2.25);
    assert!(row.get::<_, bool>("b"));
    assert_eq!(row.get::<_, String>("t"), "x");
    assert_eq!(row.get::<_, String>("v"), "y");
    let epoch_micros = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_micros()
    };
    assert_eq!(
        epoch_micros(row.get::<_, SystemTime>("ts")),
        1_767_323_045_500_000
    );
    assert_eq!(
        epoch_micros(row.get::<_, SystemTime>("tstz")),
        1_767_323_045_000_000
    );
    assert_eq!(row.get::<_, Vec<u8>>("by"), vec![0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(row.get::<_, JsonbText>("j").0, "{\"a\": 1}");
    assert_eq!(row.get::<_, Vec<i32>>("ai"), vec![1, 2, 3]);
    assert_eq!(row.get::<_, Vec<String>>("at"), vec!["a", "b c"]);
    let types: Vec<&str> = row.columns().iter().map(|c| c.type_().name()).collect();
    assert_eq!(
        types,
        [
            "int2",
            "int4",
            "int8",
            "float4",
            "float8",
            "numeric",
            "bool",
            "text",
            "varchar",
            "timestamp",
            "timestamptz",
            "date",
            "time",
            "interval",
            "bytea",
            "jsonb",
            "_int4",
            "_text",
        ]
    );

    // Parameters, typed by the statement and untyped.
    let row = client
        .query_one(
            "SELECT $1::int8 + 1 AS n, $2::text || '!' AS s, $3::float8 * 2 AS f",
            &[&41i64, &"hi", &1.25f64],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 42);
    assert_eq!(row.get::<_, String>(1), "hi!");
    assert_eq!(row.get::<_, f64>(2), 2.5);
}

#[tokio::test]
async fn portals_return_rows_in_batches() {
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (mut client, _conn) = eddy.connect().await.expect("connect");
    client
        .batch_execute(
            "CREATE TABLE n (i BIGINT); INSERT INTO n SELECT value FROM generate_series(1, 10)",
        )
        .await
        .unwrap();
    let tx = client.transaction().await.unwrap();
    let portal = tx
        .bind("SELECT i FROM n WHERE i > $1 ORDER BY i", &[&0i64])
        .await
        .unwrap();
    let mut batches = Vec::new();
    loop {
        let rows = tx.query_portal(&portal, 3).await.unwrap();
        if rows.is_empty() {
            break;
        }
        batches.push(rows.iter().map(|r| r.get::<_, i64>(0)).collect::<Vec<_>>());
    }
    tx.commit().await.unwrap();
    assert_eq!(
        batches,
        vec![vec![1, 2, 3], vec![4, 5, 6], vec![7, 8, 9], vec![10]]
    );
}

#[tokio::test]
async fn catalog_functions_and_information_schema() {
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _conn) = eddy.connect().await.expect("connect");
    client
        .batch_execute(
            "CREATE TABLE readings (sensor INT PRIMARY KEY, value DOUBLE, payload JSONB);
             CREATE MATERIALIZED VIEW per_sensor AS
               SELECT sensor, count(*) AS n FROM readings GROUP BY sensor;
             CREATE SOURCE bid (auction BIGINT, price BIGINT)
               WITH (connector = 'nexmark', nexmark.table.type = 'bid',
                     nexmark.event.rate = '10', nexmark.max.events = '10');",
        )
        .await
        .unwrap();

    let row = first_row(
        &client,
        "SELECT version(), current_database(), current_schema(), \
           array_to_string(current_schemas(false), ','), current_setting('server_version'), \
           set_config('application_name', 'x', false), \
           json_build_object('a', 1, 'b', 'two', 'c', true), array_to_string(ARRAY[1, 2], '-'), \
           format('%I.%L', 'My T', 'v'), to_regtype('integer'), to_regtype('hstore')",
    )
    .await;
    let row: Vec<&str> = row.iter().map(|c| c.as_deref().unwrap_or("NULL")).collect();
    assert!(row[0].starts_with("PostgreSQL 15.6 (Eddy "), "{}", row[0]);
    assert_eq!(
        row[1..],
        [
            "dev",
            "public",
            "public",
            "15.6",
            "x",
            "{\"a\" : 1, \"b\" : \"two\", \"c\" : true}",
            "1-2",
            "\"My T\".'v'",
            "23",
            "NULL",
        ]
    );

    let row = first_row(
        &client,
        "SELECT c.relkind, pg_get_userbyid(c.relowner), pg_table_is_visible(c.oid), \
           has_table_privilege(c.relname, 'SELECT'), has_schema_privilege('public', 'USAGE'), \
           obj_description(c.oid, 'pg_class'), col_description(c.oid, 1), \
           pg_get_viewdef(c.oid, true), pg_get_expr(NULL, c.oid) \
         FROM pg_catalog.pg_class c WHERE c.relname = 'per_sensor'",
    )
    .await;
    let row: Vec<&str> = row.iter().map(|c| c.as_deref().unwrap_or("NULL")).collect();
    assert_eq!(
        row,
        [
            "m",
            "postgres",
            "t",
            "t",
            "t",
            "NULL",
            "NULL",
            " SELECT sensor, count(*) AS n FROM readings GROUP BY sensor;",
            "NULL",
        ]
    );
    let types = client
        .simple_query(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
             JOIN pg_class c ON c.oid = a.attrelid WHERE c.relname = 'readings' ORDER BY a.attnum",
        )
        .await
        .unwrap();
    let types: Vec<String> = types
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(format!("{} {}", r.get(0)?, r.get(1)?)),
            _ => None,
        })
        .collect();
    assert_eq!(
        types,
        ["sensor integer", "value double precision", "payload jsonb"]
    );

    let kinds = client
        .simple_query(
            "SELECT table_name, table_type FROM information_schema.tables \
             WHERE table_schema = 'public' ORDER BY table_name",
        )
        .await
        .unwrap();
    let kinds: Vec<String> = kinds
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(format!("{} {}", r.get(0)?, r.get(1)?)),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        ["bid FOREIGN", "per_sensor VIEW", "readings BASE TABLE"]
    );
    let view = first_row(
        &client,
        "SELECT table_name, view_definition FROM information_schema.views",
    )
    .await;
    assert_eq!(view[0].as_deref(), Some("per_sensor"));
    let column = first_row(
        &client,
        "SELECT data_type, udt_name, is_nullable FROM information_schema.columns \
         WHERE table_name = 'readings' AND column_name = 'value'",
    )
    .await;
    assert_eq!(
        column,
        [
            Some("double precision".to_string()),
            Some("float8".to_string()),
            Some("YES".to_string())
        ]
    );
    let key = first_row(
        &client,
        "SELECT constraint_name, column_name FROM information_schema.key_column_usage \
         WHERE table_name = 'readings'",
    )
    .await;
    assert_eq!(
        key,
        [
            Some("readings_pkey".to_string()),
            Some("sensor".to_string())
        ]
    );
    let schemas = first_row(
        &client,
        "SELECT string_agg(schema_name, ',' ORDER BY schema_name) FROM information_schema.schemata",
    )
    .await;
    assert_eq!(
        schemas[0].as_deref(),
        Some("eddy_catalog,information_schema,pg_catalog,public")
    );
    let matview = first_row(&client, "SELECT matviewname, definition FROM pg_matviews").await;
    assert_eq!(matview[0].as_deref(), Some("per_sensor"));

    // Client forms the planner alone would refuse: regclass casts, ANY over an array.
    let row = first_row(
        &client,
        "SELECT count(*) FROM pg_catalog.pg_attribute \
         WHERE attrelid = 'readings'::regclass AND attname = ANY(ARRAY['sensor', 'value'])",
    )
    .await;
    assert_eq!(row[0].as_deref(), Some("2"));
    let row = first_row(
        &client,
        "SELECT 'pg_x' LIKE 'pg/_%' ESCAPE '/', 'pgax' LIKE 'pg/_%' ESCAPE '/'",
    )
    .await;
    assert_eq!(row, [Some("t".to_string()), Some("f".to_string())]);
}

/// Statements sent in one Query string run as Postgres runs them: `BEGIN` opens a block the
/// statements after it are in; without it, several statements form an implicit block, whose
/// cursors close at the end of the string.
#[tokio::test]
async fn a_transaction_block_inside_one_query_string() {
    use tokio_postgres::SimpleQueryMessage;
    let eddy = EddyProcess::start_fresh().await.expect("start eddy");
    let (client, _conn) = eddy.connect().await.expect("connect");
    client
        .batch_execute("CREATE TABLE t (a INT PRIMARY KEY); INSERT INTO t VALUES (1), (2), (3)")
        .await
        .unwrap();
    let fetched = |messages: Vec<SimpleQueryMessage>| -> Vec<String> {
        messages
            .into_iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
                _ => None,
            })
            .collect()
    };
    let explicit = client
        .simple_query(
            "BEGIN; DECLARE c CURSOR FOR SELECT a FROM t ORDER BY a; FETCH 2 FROM c; CLOSE c; COMMIT",
        )
        .await
        .expect("a cursor inside BEGIN ... COMMIT of one string");
    assert_eq!(fetched(explicit), ["1", "2"]);
    // Implicit: no BEGIN, several statements.
    let implicit = client
        .simple_query(
            "DECLARE d CURSOR FOR SELECT a FROM t ORDER BY a; FETCH 1 FROM d; FETCH 1 FROM d",
        )
        .await
        .expect("a cursor in an implicit block");
    assert_eq!(fetched(implicit), ["1", "2"]);
    // The implicit block ended with its string, and closed its cursor.
    let closed = client.simple_query("FETCH 1 FROM d").await.unwrap_err();
    assert_eq!(closed.code().map(|c| c.code()), Some("34000"), "{closed}");
    // One statement alone is in no block.
    let alone = client
        .simple_query("DECLARE e CURSOR FOR SELECT a FROM t")
        .await
        .unwrap_err();
    assert_eq!(alone.code().map(|c| c.code()), Some("25P01"), "{alone}");
    // A block left open by one string goes on in the next.
    client
        .simple_query("BEGIN; DECLARE f CURSOR FOR SELECT a FROM t ORDER BY a")
        .await
        .unwrap();
    let next = client.simple_query("FETCH 3 FROM f").await.unwrap();
    assert_eq!(fetched(next), ["1", "2", "3"]);
    client.simple_query("COMMIT").await.unwrap();
    let committed = client.simple_query("FETCH 1 FROM f").await.unwrap_err();
    assert_eq!(
        committed.code().map(|c| c.code()),
        Some("34000"),
        "{committed}"
    );
}
