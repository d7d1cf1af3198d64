//! A connection's own settings: `SET`, `SHOW`, `RESET` of the parameters drivers use, kept in
//! the connection's metadata (where the startup parameters are too).

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::sql::sqlparser::ast::{Expr, Reset, Set, Statement, Value};
use pgwire::types::format::FormatOptions;

use crate::database::Outcome;
use crate::error::{Result, ServerError};
use crate::pg::settings::{default_setting, DEFAULTS};

/// Prefix of the metadata keys holding values set in this connection.
const KEY: &str = "setting.";

/// A setting's value in this connection: what SET chose, else what the client sent at
/// startup, else the default.
pub fn setting(metadata: &HashMap<String, String>, name: &str) -> Option<String> {
    let name = name.to_ascii_lowercase();
    if let Some(value) = metadata.get(&format!("{KEY}{name}")) {
        return Some(value.clone());
    }
    metadata
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(&name))
        .map(|(_, v)| v.clone())
        .or_else(|| default_setting(&name).map(str::to_string))
}

/// How values are printed in text results (DateStyle, extra_float_digits, ...).
pub fn format_options(metadata: &HashMap<String, String>) -> Arc<FormatOptions> {
    let lowered: HashMap<String, String> = [
        "datestyle",
        "intervalstyle",
        "bytea_output",
        "extra_float_digits",
    ]
    .iter()
    .filter_map(|name| setting(metadata, name).map(|v| (name.to_string(), v)))
    .collect();
    let mut options = FormatOptions::from_client_metadata(&lowered);
    if let Some(zone) = setting(metadata, "timezone") {
        options.time_zone = zone;
    }
    Arc::new(options)
}

/// The statement timeout set in this connection, if any.
pub fn statement_timeout(metadata: &HashMap<String, String>) -> Option<std::time::Duration> {
    let value = setting(metadata, "statement_timeout")?;
    let millis = parse_duration_millis(&value)?;
    (millis > 0).then(|| std::time::Duration::from_millis(millis))
}

/// `500`, `500ms`, `2s`, `1min`: Postgres' forms of a duration (plain numbers are ms).
fn parse_duration_millis(value: &str) -> Option<u64> {
    let value = value.trim().trim_matches('\'');
    let split = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let number: u64 = number.parse().ok()?;
    let factor = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "ms" => 1,
        "s" => 1_000,
        "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    Some(number * factor)
}

/// Whether this statement is about settings (and is answered here, not by the database).
pub fn is_session_statement(statement: &Statement) -> bool {
    match statement {
        Statement::Set(_) | Statement::Reset(_) => true,
        Statement::Savepoint { .. } | Statement::ReleaseSavepoint { .. } => true,
        Statement::Rollback { savepoint, .. } => savepoint.is_some(),
        Statement::ShowVariable { variable } => !is_datafusion_variable(variable),
        _ => false,
    }
}

fn is_datafusion_variable(variable: &[datafusion::sql::sqlparser::ast::Ident]) -> bool {
    variable
        .first()
        .is_some_and(|v| v.value.to_ascii_lowercase().starts_with("datafusion"))
}

/// The result columns of a session statement, for Describe.
pub fn result_schema(statement: &Statement) -> Option<SchemaRef> {
    match statement {
        Statement::ShowVariable { variable } if is_all(variable) => Some(show_all_schema()),
        Statement::ShowVariable { variable } => Some(Arc::new(Schema::new(vec![Field::new(
            variable_name(variable),
            DataType::Utf8,
            true,
        )]))),
        _ => None,
    }
}

fn is_all(variable: &[datafusion::sql::sqlparser::ast::Ident]) -> bool {
    variable.len() == 1 && variable[0].value.eq_ignore_ascii_case("all")
}

fn show_all_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("setting", DataType::Utf8, true),
    ]))
}

fn variable_name(variable: &[datafusion::sql::sqlparser::ast::Ident]) -> String {
    let words: Vec<String> = variable.iter().map(|v| v.value.to_lowercase()).collect();
    match words.join(" ").as_str() {
        "time zone" => "timezone".to_string(),
        "transaction isolation level" => "transaction_isolation".to_string(),
        other => other.to_string(),
    }
}

/// The text of a SET value: `'x'`, `x`, `1`, `DEFAULT`, or a list (`a, b`).
fn value_text(values: &[Expr]) -> Option<String> {
    let parts: Vec<String> = values
        .iter()
        .map(|e| match e {
            Expr::Value(v) => match &v.value {
                Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => s.clone(),
                other => other.to_string(),
            },
            Expr::Identifier(ident) => ident.value.clone(),
            other => other.to_string(),
        })
        .collect();
    if parts.len() == 1 && parts[0].eq_ignore_ascii_case("default") {
        return None;
    }
    Some(parts.join(", "))
}

/// Runs SET / SHOW / RESET against the connection's settings.
pub fn execute(metadata: &mut HashMap<String, String>, statement: &Statement) -> Result<Outcome> {
    match statement {
        Statement::Set(set) => {
            match set {
                Set::SingleAssignment {
                    variable, values, ..
                } => {
                    let name = variable.to_string().to_ascii_lowercase();
                    assign(metadata, &name, value_text(values))?;
                }
                Set::SetTimeZone { value, .. } => {
                    assign(
                        metadata,
                        "timezone",
                        value_text(std::slice::from_ref(value)),
                    )?;
                }
                Set::SetNames { charset_name, .. } => {
                    assign(
                        metadata,
                        "client_encoding",
                        Some(charset_name.value.clone()),
                    )?;
                }
                // Roles, transaction characteristics: one user, every statement its own
                // transaction, so there is nothing to change.
                _ => {}
            }
            Ok(Outcome::command("SET"))
        }
        Statement::Reset(reset) => {
            match &reset.reset {
                Reset::ALL => reset_all(metadata),
                Reset::ConfigurationParameter(name) => {
                    assign(metadata, &name.to_string().to_ascii_lowercase(), None)?;
                }
            }
            Ok(Outcome::command("RESET"))
        }
        // Every statement commits on its own: savepoints have nothing to keep or undo, and
        // drivers (psycopg, SQLAlchemy) send them around their catalog queries.
        Statement::Savepoint { .. } => Ok(Outcome::command("SAVEPOINT")),
        Statement::ReleaseSavepoint { .. } => Ok(Outcome::command("RELEASE")),
        Statement::Rollback { .. } => Ok(Outcome::command("ROLLBACK TO SAVEPOINT")),
        Statement::ShowVariable { variable } if is_all(variable) => {
            let mut names: Vec<String> = DEFAULTS.iter().map(|(n, _)| n.to_string()).collect();
            names.extend(
                metadata
                    .keys()
                    .filter_map(|k| k.strip_prefix(KEY))
                    .filter(|k| default_setting(k).is_none())
                    .map(str::to_string),
            );
            names.sort();
            names.dedup();
            let values: Vec<Option<String>> = names.iter().map(|n| setting(metadata, n)).collect();
            rows(
                show_all_schema(),
                vec![
                    Arc::new(StringArray::from(names)),
                    Arc::new(StringArray::from(values)),
                ],
            )
        }
        Statement::ShowVariable { variable } => {
            let name = variable_name(variable);
            let value = setting(metadata, &name).ok_or_else(|| {
                ServerError::new(
                    "42704",
                    format!("unrecognized configuration parameter \"{name}\""),
                )
            })?;
            let schema = Arc::new(Schema::new(vec![Field::new(name, DataType::Utf8, true)]));
            rows(schema, vec![Arc::new(StringArray::from(vec![value]))])
        }
        other => Err(ServerError::internal(format!(
            "not a session statement: {other}"
        ))),
    }
}

fn rows(schema: SchemaRef, columns: Vec<datafusion::arrow::array::ArrayRef>) -> Result<Outcome> {
    let batch = RecordBatch::try_new(schema.clone(), columns)
        .map_err(|e| ServerError::internal(e.to_string()))?;
    Ok(Outcome::Rows {
        schema,
        batches: vec![batch],
    })
}

/// `RESET ALL`: every setting back to its startup value.
pub fn reset_all(metadata: &mut HashMap<String, String>) {
    metadata.retain(|k, _| !k.starts_with(KEY));
}

/// Sets (or with `None` resets) one setting, checking the values Eddy cannot honour.
fn assign(metadata: &mut HashMap<String, String>, name: &str, value: Option<String>) -> Result<()> {
    let name = match name {
        "time zone" => "timezone",
        other => other,
    };
    let key = format!("{KEY}{name}");
    let Some(value) = value else {
        metadata.remove(&key);
        return Ok(());
    };
    match name {
        "client_encoding"
            if !matches!(
                value.to_ascii_uppercase().replace('-', "").as_str(),
                "UTF8" | "UNICODE"
            ) =>
        {
            return Err(ServerError::new(
                "22023",
                format!("client_encoding {value} is not supported: Eddy speaks UTF8"),
            ));
        }
        "statement_timeout" | "lock_timeout" | "idle_in_transaction_session_timeout"
            if parse_duration_millis(&value).is_none() =>
        {
            return Err(ServerError::new(
                "22023",
                format!("invalid value for parameter \"{name}\": \"{value}\""),
            ));
        }
        "extra_float_digits"
            if value
                .parse::<i8>()
                .map_or(true, |v| !(-15..=3).contains(&v)) =>
        {
            return Err(ServerError::new(
                "22023",
                format!(
                    "invalid value for parameter \"extra_float_digits\": \"{value}\" (-15 to 3)"
                ),
            ));
        }
        _ => {}
    }
    metadata.insert(key, value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_postgres_units() {
        assert_eq!(parse_duration_millis("250"), Some(250));
        assert_eq!(parse_duration_millis("2s"), Some(2_000));
        assert_eq!(parse_duration_millis("1min"), Some(60_000));
        assert_eq!(parse_duration_millis("soon"), None);
    }

    #[test]
    fn set_then_show_then_reset() {
        let mut metadata = HashMap::new();
        assign(&mut metadata, "application_name", Some("grafana".into())).unwrap();
        assert_eq!(
            setting(&metadata, "APPLICATION_NAME").as_deref(),
            Some("grafana")
        );
        assign(&mut metadata, "application_name", None).unwrap();
        assert_eq!(setting(&metadata, "application_name").as_deref(), Some(""));
        let err = assign(&mut metadata, "client_encoding", Some("LATIN1".into())).unwrap_err();
        assert_eq!(err.code, "22023");
    }
}
