use super::*;

#[test]
fn watermark_and_append_only_are_cut_out() {
    let parsed = parse_statements(
        "CREATE TABLE r (sensor INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) APPEND ONLY;",
    )
    .unwrap();
    assert_eq!(parsed.len(), 1);
    let EddyStatement::CreateTable {
        statement,
        watermark,
        append_only,
        name,
        ..
    } = &parsed[0].statement
    else {
        panic!("not a create table: {:?}", parsed[0]);
    };
    assert!(append_only);
    assert_eq!(name, "r");
    assert_eq!(
        watermark,
        &Some(WatermarkDef {
            column: "ts".into(),
            delay_sql: Some("INTERVAL '2' SECOND".into())
        })
    );
    assert_eq!(
        statement.to_string(),
        "CREATE TABLE r (sensor INT, ts TIMESTAMP)"
    );
}

#[test]
fn a_watermark_minus_nothing_is_a_syntax_error() {
    // Found by the SQL fuzzer: `ts - ,` left no delay after the minus and panicked.
    for sql in [
        "CREATE TABLE r (ts TIMESTAMP, WATERMARK FOR ts AS ts - , x INT)",
        "CREATE TABLE r (ts TIMESTAMP, WATERMARK FOR ts AS ts -)",
    ] {
        match parse_statements(sql) {
            Err(PlanError::Syntax(message)) => {
                assert!(message.contains("a watermark must be"), "{sql}: {message}")
            }
            other => panic!("{sql}: {other:?}"),
        }
    }
}

#[test]
fn watermark_first_in_list() {
    let parsed = parse_statements("create table r (WATERMARK FOR ts AS ts, ts timestamp)").unwrap();
    let EddyStatement::CreateTable { statement, .. } = &parsed[0].statement else {
        panic!()
    };
    assert_eq!(statement.to_string(), "CREATE TABLE r (ts TIMESTAMP)");
}

#[test]
fn splits_and_recognises_eddy_statements() {
    let parsed = parse_statements(
        "FLUSH; ; show tables; SHOW MATERIALIZED VIEWS; create materialized view v as select 1 emit on window close; select ';'",
    )
    .unwrap();
    assert_eq!(parsed.len(), 5);
    assert!(matches!(parsed[0].statement, EddyStatement::Flush));
    assert!(matches!(parsed[1].statement, EddyStatement::ShowTables));
    assert!(matches!(
        parsed[2].statement,
        EddyStatement::ShowMaterializedViews
    ));
    assert!(matches!(
        parsed[3].statement,
        EddyStatement::CreateMaterializedView {
            emit_on_window_close: true,
            ..
        }
    ));
    assert_eq!(parsed[4].sql, "select ';'");
}

#[test]
fn create_source_with_includes_options_and_format() {
    let parsed = parse_statements(
        "CREATE SOURCE bids (auction BIGINT, date_time TIMESTAMP, WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND) \
         INCLUDE partition AS p INCLUDE offset \
         WITH (connector = 'kafka', topic = 'bids', properties.bootstrap.server = '127.0.0.1:9092', nexmark.event.rate = 10) \
         FORMAT PLAIN ENCODE CSV (delimiter = ';', without_header = 'true')",
    )
    .unwrap();
    let EddyStatement::CreateSource(def) = &parsed[0].statement else {
        panic!("not a source: {:?}", parsed[0]);
    };
    assert_eq!(def.name, "bids");
    assert_eq!(
        def.table.to_string(),
        "CREATE TABLE bids (auction BIGINT, date_time TIMESTAMP)"
    );
    assert_eq!(
        def.watermark.as_ref().map(|w| w.column.as_str()),
        Some("date_time")
    );
    assert_eq!(
        def.includes,
        vec![
            (IncludeKind::Partition, "p".to_string()),
            (IncludeKind::Offset, "_rw_kafka_offset".to_string())
        ]
    );
    assert_eq!(def.options["properties.bootstrap.server"], "127.0.0.1:9092");
    assert_eq!(def.options["nexmark.event.rate"], "10");
    assert_eq!((def.format.as_str(), def.encode.as_str()), ("PLAIN", "CSV"));
    assert_eq!(def.encode_options["delimiter"], ";");
    assert!(!def.stored);

    let parsed = parse_statements(
        "create table t (id int primary key, v int) with (connector='kafka', topic='t') format upsert encode json",
    )
    .unwrap();
    let EddyStatement::CreateSource(def) = &parsed[0].statement else {
        panic!("not a source table");
    };
    assert!(def.stored);
    assert_eq!(def.format, "UPSERT");
    assert!(parse_statements("CREATE SOURCE s (a INT) WITH (topic = 'x')").is_err());
    assert!(
        parse_statements("CREATE SOURCE s (a INT) WITH (connector = 'kafka') FORMAT PLAIN")
            .is_err()
    );
}

#[test]
fn bad_sql_is_a_syntax_error() {
    assert!(matches!(
        parse_statements("SELEC 1"),
        Err(PlanError::Syntax(_))
    ));
    assert!(matches!(
        parse_statements("CREATE TABLE t (a INT, WATERMARK FOR a AS b - INTERVAL '1' SECOND)"),
        Err(PlanError::Syntax(_))
    ));
}

#[test]
fn create_sink_in_risingwave_form() {
    let parsed = parse_statements(
        "CREATE SINK IF NOT EXISTS public.s FROM \"My View\" WITH (connector = 'kafka', topic = 't', \
         properties.bootstrap.server = 'h:9092', primary_key = 'a,b') FORMAT upsert ENCODE json (force_append_only = 'true')",
    )
    .unwrap();
    let EddyStatement::CreateSink(def) = &parsed[0].statement else {
        panic!("not a sink: {:?}", parsed[0]);
    };
    assert_eq!(def.name, "s");
    assert!(def.if_not_exists);
    assert_eq!(def.from, "My View");
    assert_eq!(def.format, "UPSERT");
    assert_eq!(def.encode, "JSON");
    assert_eq!(def.options["properties.bootstrap.server"], "h:9092");
    assert_eq!(def.options["primary_key"], "a,b");
    assert_eq!(def.encode_options["force_append_only"], "true");

    let parsed = parse_statements("EXPLAIN CREATE SINK s FROM v WITH (connector = 'file', path = 'd') FORMAT PLAIN ENCODE PARQUET").unwrap();
    assert!(matches!(
        &parsed[0].statement,
        EddyStatement::ExplainView(inner) if matches!(inner.as_ref(), EddyStatement::CreateSink(_))
    ));
}

#[test]
fn create_sink_mistakes_are_named() {
    for (sql, expected) in [
        ("CREATE SINK s WITH (connector = 'kafka')", "expected FROM"),
        ("CREATE SINK s FROM v FORMAT PLAIN ENCODE JSON", "connector"),
        (
            "CREATE SINK s FROM v WITH (connector = 'kafka')",
            "needs FORMAT",
        ),
        (
            "CREATE SINK s FROM v WITH (connector = 'kafka') FORMAT PLAIN",
            "ENCODE",
        ),
        ("CREATE SINK s AS SELECT 1", "materialized view"),
        (
            "CREATE SINK s FROM v WITH (connector = 'kafka') FORMAT PLAIN ENCODE JSON garbage",
            "unexpected",
        ),
    ] {
        let error = parse_statements(sql).unwrap_err().to_string();
        assert!(error.contains(expected), "{sql}: {error}");
    }
}

#[test]
fn drop_and_show_sinks() {
    let parsed = parse_statements("DROP SINK IF EXISTS a, public.b; SHOW SINKS").unwrap();
    let EddyStatement::DropSink { names, if_exists } = &parsed[0].statement else {
        panic!("not a drop sink: {:?}", parsed[0]);
    };
    assert_eq!(names, &["a", "b"]);
    assert!(if_exists);
    assert!(matches!(parsed[1].statement, EddyStatement::ShowSinks));
}

fn subscribe(sql: &str) -> (SubscribeStatement, SubscribeOutput) {
    let mut parsed = parse_statements(sql).unwrap();
    match parsed.remove(0).statement {
        EddyStatement::Subscribe { subscribe, output } => (*subscribe, output),
        other => panic!("not a subscribe: {other:?}"),
    }
}

#[test]
fn subscribe_forms() {
    let (s, output) = subscribe("SUBSCRIBE TO per_minute");
    assert_eq!(s.relation.as_deref(), Some("per_minute"));
    assert!(matches!(output, SubscribeOutput::Rows));
    assert_eq!((s.snapshot, s.progress, s.as_of), (None, false, None));

    let (s, _) = subscribe("SUBSCRIBE \"Mixed\" WITH (snapshot = false, PROGRESS) AS OF 42");
    assert_eq!(s.relation.as_deref(), Some("Mixed"));
    assert_eq!(
        (s.snapshot, s.progress, s.as_of),
        (Some(false), true, Some(42))
    );

    let (s, output) = subscribe(
        "COPY (SUBSCRIBE TO (SELECT a, b * 2 FROM v WHERE a > 1) WITH (progress = 'true')) TO STDOUT WITH (FORMAT csv)",
    );
    assert!(s.relation.is_none());
    assert_eq!(
        s.query.unwrap().to_string(),
        "SELECT a, b * 2 FROM v WHERE a > 1"
    );
    assert!(s.progress);
    let SubscribeOutput::Copy(copy) = output else {
        panic!("not a COPY");
    };
    assert_eq!(copy.to_string(), "COPY (SELECT 1) TO STDOUT (FORMAT csv)");

    let (s, output) = subscribe("DECLARE c CURSOR WITH HOLD FOR SUBSCRIBE v AS OF AT LEAST 7");
    assert_eq!((s.relation.as_deref(), s.as_of), (Some("v"), Some(7)));
    let SubscribeOutput::Cursor(declare) = output else {
        panic!("not a DECLARE");
    };
    assert!(declare
        .to_string()
        .starts_with("DECLARE c CURSOR WITH HOLD FOR SELECT 1"));
}

#[test]
fn subscribe_errors() {
    for (sql, what) in [
        ("SUBSCRIBE TO", "relation name"),
        (
            "SUBSCRIBE v WITH (snapshot = maybe)",
            "expected true or false",
        ),
        (
            "SUBSCRIBE v WITH (envelope = 'x')",
            "unrecognized SUBSCRIBE option",
        ),
        ("SUBSCRIBE v AS OF now()", "AS OF needs an epoch"),
        ("SUBSCRIBE v LIMIT 3", "unexpected"),
    ] {
        let error = parse_statements(sql).unwrap_err().to_string();
        assert!(error.contains(what), "{sql}: {error}");
    }
}
