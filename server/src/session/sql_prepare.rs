//! SQL-level prepared statements: `PREPARE name [(type, ...)] AS statement` and
//! `EXECUTE name [(value, ...)]` (pg_dump prepares its per-table catalog queries so). They
//! live with the connection, beside the protocol's named statements: DEALLOCATE and DISCARD
//! ALL forget them too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::physical_plan::collect;
use datafusion::sql::sqlparser::ast::Statement;
use eddy_planner::statement::ParsedStatement;
use eddy_planner::EddyStatement;
use pgwire::api::ClientInfo;

use crate::database::{Database, Outcome};
use crate::error::{Result, ServerError};

/// One statement of `PREPARE`: what it runs, and its parameters' types.
pub struct Prepared {
    pub parsed: ParsedStatement,
    /// Each parameter's type as declared (SQL text), else as DataFusion inferred it.
    parameters: Vec<ParameterType>,
}

pub enum ParameterType {
    Declared(String),
    Inferred(DataType),
    Unknown,
}

impl Prepared {
    pub fn new(parsed: ParsedStatement, parameters: Vec<ParameterType>) -> Self {
        Self { parsed, parameters }
    }
}

/// A connection's prepared statements by name, kept in its session extensions.
#[derive(Default)]
struct SqlPrepared(Mutex<HashMap<String, Arc<Prepared>>>);

fn prepared<C: ClientInfo>(client: &C) -> Arc<SqlPrepared> {
    client
        .session_extensions()
        .get_or_insert_with(SqlPrepared::default)
}

/// Runs `PREPARE`: parses and describes the statement once, as the protocol's Parse does.
pub async fn prepare<C: ClientInfo>(
    shapes: &crate::session::statement_shape::StatementShapes,
    client: &C,
    parsed: &ParsedStatement,
    statement: &Statement,
) -> Result<Outcome> {
    let Statement::Prepare { name, .. } = statement else {
        return Err(ServerError::internal(format!("not a PREPARE: {statement}")));
    };
    let name = eddy_planner::names::fold(name);
    if exists(client, &name) {
        return Err(taken(&name));
    }
    let mut inner = shapes.parse(prepared_text(&parsed.sql)?)?;
    if inner.len() != 1 {
        return Err(ServerError::new(
            "42601",
            "cannot insert multiple commands into a prepared statement",
        ));
    }
    let inner = crate::pg::ast::rewrite_for_datafusion(inner.remove(0));
    let inferred = match &inner.statement {
        EddyStatement::Fetch(_) => vec![],
        _ => shapes.describe(&inner).await?.0,
    };
    let inferred: Vec<Option<DataType>> = inferred
        .into_iter()
        .map(|field| field.map(|f| f.data_type().clone()))
        .collect();
    let declared = declared_types(statement);
    let parameters = (0..declared.len().max(inferred.len()))
        .map(
            |i| match (declared.get(i), inferred.get(i).cloned().flatten()) {
                (Some(sql_type), _) => ParameterType::Declared(sql_type.clone()),
                (None, Some(data_type)) => ParameterType::Inferred(data_type),
                (None, None) => ParameterType::Unknown,
            },
        )
        .collect();
    store(client, &name, Prepared::new(inner, parameters))?;
    Ok(Outcome::command("PREPARE"))
}

fn taken(name: &str) -> ServerError {
    ServerError::new(
        "42P05",
        format!("prepared statement \"{name}\" already exists"),
    )
}

/// The statement text after `PREPARE name [(types)] AS`, as the client wrote it.
pub fn prepared_text(sql: &str) -> Result<&str> {
    let syntax = || ServerError::new("42601", "syntax error in PREPARE: expected AS statement");
    let lower = sql.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut at = lower.find("prepare").ok_or_else(syntax)? + "prepare".len();
    let mut depth = 0usize;
    let mut quoted = false;
    while at < bytes.len() {
        let c = bytes[at];
        if quoted {
            quoted = c != b'"';
        } else if c == b'"' {
            quoted = true;
        } else if c == b'(' {
            depth += 1;
        } else if c == b')' {
            depth = depth.saturating_sub(1);
        } else if depth == 0
            && lower[at..].starts_with("as")
            && (bytes[at - 1].is_ascii_whitespace() || bytes[at - 1] == b')')
            && bytes.get(at + 2).is_some_and(|c| c.is_ascii_whitespace())
        {
            let rest = sql[at + 2..].trim();
            return if rest.is_empty() {
                Err(syntax())
            } else {
                Ok(rest)
            };
        }
        at += 1;
    }
    Err(syntax())
}

/// The declared parameter types of a PREPARE statement, as SQL text.
pub fn declared_types(statement: &Statement) -> Vec<String> {
    match statement {
        Statement::Prepare { data_types, .. } => data_types.iter().map(|t| t.to_string()).collect(),
        _ => vec![],
    }
}

/// Keeps a prepared statement under its name (42P05 if the name is taken).
fn store<C: ClientInfo>(client: &C, name: &str, statement: Prepared) -> Result<()> {
    let all = prepared(client);
    let mut all = all.0.lock().unwrap_or_else(|e| e.into_inner());
    if all.contains_key(name) {
        return Err(taken(name));
    }
    all.insert(name.to_string(), Arc::new(statement));
    Ok(())
}

pub fn exists<C: ClientInfo>(client: &C, name: &str) -> bool {
    let all = prepared(client);
    let exists = all
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains_key(name);
    exists
}

/// Forgets one statement; false if there was none of that name.
pub fn deallocate<C: ClientInfo>(client: &C, name: &str) -> bool {
    let all = prepared(client);
    let removed = all
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(name)
        .is_some();
    removed
}

pub fn deallocate_all<C: ClientInfo>(client: &C) {
    prepared(client)
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
}

/// The statement `EXECUTE name (values)` runs, with its parameters' values.
pub async fn bind<C: ClientInfo>(
    db: &Database,
    client: &C,
    statement: &Statement,
) -> Result<(ParsedStatement, Option<ParamValues>)> {
    let Statement::Execute {
        name: Some(name),
        parameters: values,
        ..
    } = statement
    else {
        return Err(ServerError::new("42601", "EXECUTE needs a statement name"));
    };
    let name = eddy_planner::names::resolve_object_name(name)?;
    let found = prepared(client)
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&name)
        .cloned();
    let Some(found) = found else {
        return Err(ServerError::new(
            "26000",
            format!("prepared statement \"{name}\" does not exist"),
        ));
    };
    if values.len() != found.parameters.len() {
        return Err(ServerError::new(
            "42601",
            format!(
                "wrong number of parameters for prepared statement \"{name}\": expected {}, got {}",
                found.parameters.len(),
                values.len()
            ),
        ));
    }
    if values.is_empty() {
        return Ok((found.parsed.clone(), None));
    }
    let select_list: Vec<String> = values
        .iter()
        .zip(&found.parameters)
        .map(|(value, t)| match t {
            ParameterType::Declared(sql_type) => format!("CAST({value} AS {sql_type})"),
            _ => value.to_string(),
        })
        .collect();
    let frame = db
        .ctx
        .sql(&format!("SELECT {}", select_list.join(", ")))
        .await?;
    let plan = frame.create_physical_plan().await?;
    let batches = collect(plan, db.ctx.task_ctx()).await?;
    let row = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .ok_or_else(|| ServerError::internal("EXECUTE's values gave no row"))?;
    let mut params = Vec::with_capacity(values.len());
    for (i, t) in found.parameters.iter().enumerate() {
        let value = ScalarValue::try_from_array(row.column(i), 0)?;
        let value = match t {
            ParameterType::Inferred(data_type) => value.cast_to(data_type)?,
            _ => value,
        };
        params.push(value.into());
    }
    Ok((found.parsed.clone(), Some(ParamValues::List(params))))
}

#[cfg(test)]
mod tests {
    use super::prepared_text;

    #[test]
    fn the_statement_follows_as() {
        assert_eq!(
            prepared_text("PREPARE q(pg_catalog.oid) AS\n\tSELECT $1 AS x").unwrap(),
            "SELECT $1 AS x"
        );
        assert_eq!(prepared_text("prepare q as select 1").unwrap(), "select 1");
        assert_eq!(
            prepared_text("PREPARE \"as (\" (int)AS SELECT 2").unwrap(),
            "SELECT 2"
        );
        assert!(prepared_text("PREPARE q AS").is_err());
        assert!(prepared_text("PREPARE q SELECT 1").is_err());
    }
}
