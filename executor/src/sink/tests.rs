use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use eddy_planner::statement::{parse_statements, EddyStatement, SinkDef};

use super::*;

fn def(sql: &str) -> SinkDef {
    match parse_statements(sql).unwrap().remove(0).statement {
        EddyStatement::CreateSink(def) => *def,
        other => panic!("not a sink: {other:?}"),
    }
}

fn input(append_only: bool, key_columns: Option<Vec<usize>>) -> SinkInput {
    SinkInput {
        schema: Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("n", DataType::Int64, true),
        ])),
        key_columns,
        append_only,
    }
}

const KAFKA: &str = "connector = 'kafka', topic = 't', properties.bootstrap.server = 'h:1'";

fn error(sql: &str, input: &SinkInput) -> ExecError {
    SinkSpec::new(&def(sql), input).unwrap_err()
}

#[test]
fn a_sink_takes_its_key_from_its_input_or_primary_key() {
    let spec = SinkSpec::new(
        &def(&format!(
            "CREATE SINK s FROM v WITH ({KAFKA}) FORMAT UPSERT ENCODE JSON"
        )),
        &input(false, Some(vec![0])),
    )
    .unwrap();
    assert_eq!(spec.key_names(), ["id"]);
    assert!(spec.snapshot);
    assert_eq!(spec.target(), "topic 't' at h:1");
    let spec = SinkSpec::new(
        &def(&format!("CREATE SINK s FROM v WITH ({KAFKA}, primary_key = 'n, id', snapshot = 'false') FORMAT DEBEZIUM ENCODE JSON")),
        &input(false, None),
    )
    .unwrap();
    assert_eq!(spec.key_columns, [1, 0]);
    assert!(!spec.snapshot);
    let plain = SinkSpec::new(
        &def(&format!(
            "CREATE SINK s FROM v WITH ({KAFKA}) FORMAT PLAIN ENCODE JSON"
        )),
        &input(true, Some(vec![0])),
    )
    .unwrap();
    assert!(plain.key_columns.is_empty());
}

#[test]
fn mistakes_get_clear_errors() {
    let retracting = input(false, None);
    let cases = [
        (format!("CREATE SINK s FROM v WITH ({KAFKA}) FORMAT PLAIN ENCODE JSON"), "append-only"),
        (format!("CREATE SINK s FROM v WITH ({KAFKA}) FORMAT UPSERT ENCODE JSON"), "needs a key"),
        (format!("CREATE SINK s FROM v WITH ({KAFKA}, primary_key = 'nope') FORMAT UPSERT ENCODE JSON"), "column \"nope\""),
        (format!("CREATE SINK s FROM v WITH ({KAFKA}, topik = 'x') FORMAT UPSERT ENCODE JSON"), "unrecognized option \"topik\""),
        (format!("CREATE SINK s FROM v WITH ({KAFKA}) FORMAT CANONICAL ENCODE JSON"), "FORMAT CANONICAL"),
        (format!("CREATE SINK s FROM v WITH ({KAFKA}) FORMAT UPSERT ENCODE AVRO"), "ENCODE AVRO"),
        (format!("CREATE SINK s FROM v WITH ({KAFKA}, snapshot = 'maybe') FORMAT UPSERT ENCODE JSON"), "'true' or 'false'"),
        (format!("CREATE SINK s FROM v WITH ({KAFKA}, sink.log.max.bytes = 'lots') FORMAT UPSERT ENCODE JSON"), "sink.log.max.bytes"),
        ("CREATE SINK s FROM v WITH (connector = 'kafka', topic = 't') FORMAT UPSERT ENCODE JSON".to_string(), "properties.bootstrap.server"),
        ("CREATE SINK s FROM v WITH (connector = 'pulsar') FORMAT UPSERT ENCODE JSON".to_string(), "'pulsar'"),
    ];
    for (sql, expected) in cases {
        let message = error(&sql, &retracting).to_string();
        assert!(message.contains(expected), "{sql}: {message}");
    }
    assert!(matches!(
        error(&format!("CREATE SINK s FROM v WITH ({KAFKA}, primary_key = 'nope') FORMAT UPSERT ENCODE JSON"), &retracting),
        ExecError::UndefinedColumn(_)
    ));
    assert!(matches!(
        error(
            &format!("CREATE SINK s FROM v WITH ({KAFKA}) FORMAT UPSERT ENCODE JSON"),
            &retracting
        ),
        ExecError::InvalidDefinition(_)
    ));
    // Forced append-only takes a retracting input.
    SinkSpec::new(
        &def(&format!("CREATE SINK s FROM v WITH ({KAFKA}, force_append_only = 'true') FORMAT PLAIN ENCODE JSON")),
        &retracting,
    )
    .unwrap();
}
