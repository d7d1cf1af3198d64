//! `CREATE TABLE name AS SELECT ...`: a table of the query's columns, filled once with its
//! rows. The catalog keeps the equivalent `CREATE TABLE name (columns)`, so a restart brings
//! the table back with its rows like any other.

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::sql::sqlparser::ast::{Query, Statement};
use eddy_planner::statement::parse_statements;
use eddy_planner::EddyStatement;

use crate::database::{Database, Outcome};
use crate::error::{Result, ServerError};

/// The SQL type of a column of the query's result.
fn sql_type(field: &Field) -> Result<String> {
    // A quotient's digits vary per value: its column is an unconstrained numeric, as in Postgres.
    if crate::pg::types::numeric_division::quotient_least_scale(field).is_some() {
        return Ok("NUMERIC".into());
    }
    Ok(match field.data_type() {
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => "SMALLINT".into(),
        DataType::Int32 | DataType::UInt16 => "INTEGER".into(),
        DataType::Int64 | DataType::UInt32 => "BIGINT".into(),
        DataType::Float16 | DataType::Float32 => "REAL".into(),
        DataType::Float64 => "DOUBLE PRECISION".into(),
        DataType::Decimal128(precision, scale) => format!("NUMERIC({precision}, {scale})"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "VARCHAR".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "BYTEA".into(),
        DataType::Date32 | DataType::Date64 => "DATE".into(),
        DataType::Time32(_) | DataType::Time64(_) => "TIME".into(),
        DataType::Timestamp(_, None) => "TIMESTAMP".into(),
        DataType::Timestamp(_, Some(_)) => "TIMESTAMPTZ".into(),
        DataType::Interval(_) | DataType::Duration(_) => "INTERVAL".into(),
        other => {
            return Err(ServerError::not_supported(format!(
                "CREATE TABLE ... AS SELECT with a column of type {other}"
            )))
        }
    })
}

pub(crate) fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `CREATE TABLE name (columns)` for a query's schema.
fn table_statement(name: &str, schema: &Schema) -> Result<String> {
    let columns = schema
        .fields()
        .iter()
        .map(|f| Ok(format!("{} {}", quoted(f.name()), sql_type(f)?)))
        .collect::<Result<Vec<_>>>()?;
    Ok(format!(
        "CREATE TABLE {} ({})",
        quoted(name),
        columns.join(", ")
    ))
}

impl Database {
    /// Creates the table and inserts the query's rows (`SELECT n` as Postgres answers).
    pub(crate) async fn create_table_as(
        &self,
        name: &str,
        if_not_exists: bool,
        query: &Query,
    ) -> Result<Outcome> {
        if self.exists(name) {
            if if_not_exists {
                return Ok(Outcome::command("CREATE TABLE AS"));
            }
            return Err(ServerError::new(
                "42P07",
                format!("relation \"{name}\" already exists"),
            ));
        }
        let plan = self
            .plan_statement(&Statement::Query(Box::new(query.clone())), None)
            .await?;
        let frame =
            crate::query::query_memory::dataframe(&self.ctx, self.query_memory_limit(), plan)?;
        // The analyzed plan's types: a quotient's (`/`, `avg`) are set there.
        let schema = frame
            .clone()
            .into_optimized_plan()?
            .schema()
            .as_arrow()
            .clone();
        let batches = frame.collect().await?;
        let sql = table_statement(name, &schema)?;
        let statement = parse_statements(&sql)?.into_iter().next();
        let Some(EddyStatement::CreateTable { statement, .. }) = statement.map(|s| s.statement)
        else {
            return Err(ServerError::internal(format!("cannot plan {sql}")));
        };
        let def = self
            .table_def(name.to_string(), *statement, None, false)
            .await?;
        let id = self.engine.create_table(def.clone(), None, sql).await?;
        let table_schema = def.schema.clone();
        self.register_table(def, id)?;
        let batches = batches
            .into_iter()
            .filter(|b| b.num_rows() > 0)
            .map(|b| crate::database::conform(b, &table_schema))
            .collect::<Result<Vec<_>>>()?;
        let rows = self.engine.insert(name.to_string(), batches).await?;
        Ok(Outcome::with_rows("SELECT", Some(rows as usize)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::TimeUnit;

    #[test]
    fn the_query_schema_as_a_create_table() {
        let schema = Schema::new(vec![
            Field::new("k", DataType::Int32, true),
            Field::new("Total", DataType::Decimal128(38, 10), true),
            Field::new("at", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        ]);
        assert_eq!(
            table_statement("t", &schema).unwrap(),
            "CREATE TABLE \"t\" (\"k\" INTEGER, \"Total\" NUMERIC(38, 10), \"at\" TIMESTAMP)"
        );
    }
}
