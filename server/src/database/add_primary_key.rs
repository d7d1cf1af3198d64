//! `ALTER TABLE name ADD [CONSTRAINT c] PRIMARY KEY (columns)`: how pg_dump gives a table its
//! key, after creating the table and the views on it. A table's key decides how its rows are
//! stored, so the key is added only where nothing is lost by making the table again: the table
//! is empty, and the views that read it (directly or through each other) read nothing else.
//! The table is then dropped with those views and created from its own statement with the key
//! added, and the views from theirs, in the order they were first made; any other table
//! answers why not (0A000).

use datafusion::common::TableReference;
use datafusion::sql::sqlparser::ast::{Ident, ObjectName, ObjectNamePart, Statement};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use eddy_executor::TableKey;
use eddy_planner::alter_statement::{PrimaryKeyStatement, RelationKind};
use eddy_planner::statement::parse_statements;
use eddy_planner::EddyStatement;

use crate::database::create_table_as::quoted;
use crate::database::{Database, Object, Outcome};
use crate::error::{Result, ServerError};

const TAG: &str = "ALTER TABLE";

impl Database {
    pub(crate) async fn add_primary_key(&self, statement: &PrimaryKeyStatement) -> Result<Outcome> {
        let PrimaryKeyStatement {
            if_exists,
            name,
            constraint,
            columns,
        } = statement;
        let Some(object) = self.altered(RelationKind::Table, *if_exists, name)? else {
            return Ok(crate::database::ddl::skipped(TAG, name));
        };
        let Object::Table(def) = object else {
            return Err(ServerError::new(
                "42809",
                format!("\"{name}\" is not a table"),
            ));
        };
        if matches!(def.key, TableKey::PrimaryKey(_)) {
            return Err(ServerError::new(
                "42P16",
                format!("multiple primary keys for table \"{name}\" are not allowed"),
            ));
        }
        for column in columns {
            if def.schema.index_of(column).is_err() {
                return Err(ServerError::new(
                    "42703",
                    format!("column \"{column}\" of relation \"{name}\" does not exist"),
                ));
            }
        }
        let refuse = |why: String| {
            Err(ServerError::not_supported(format!(
                "cannot add a primary key to table \"{name}\": {why}; a table's key decides how \
                 its rows are stored, so declare it in CREATE TABLE"
            )))
        };
        let readers = self.readers_through_views(name);
        for reader in &readers {
            let reads = self.reads_of(reader);
            if let Some(other) = reads.iter().find(|r| *r != name && !readers.contains(r)) {
                return refuse(format!("view \"{reader}\" on it also reads \"{other}\""));
            }
        }
        let frame = self.ctx.table(TableReference::bare(name.as_str())).await?;
        let rows = frame.limit(0, Some(1))?.collect().await?;
        if rows.iter().any(|batch| batch.num_rows() > 0) {
            return refuse("it has rows".to_string());
        }
        let Some(old_sql) = self
            .engine
            .catalog_entry(name.clone())
            .await?
            .map(|e| e.sql)
        else {
            return Err(ServerError::internal(format!(
                "no statement for table {name}"
            )));
        };
        // The views, each after what it reads (their catalog entries are in creation order).
        let mut views = Vec::new();
        for reader in &readers {
            match self.engine.catalog_entry(reader.clone()).await? {
                Some(entry) => views.push((entry.seq, entry.sql)),
                None => return refuse(format!("\"{reader}\" on it cannot be made again")),
            }
        }
        views.sort();
        let new_sql = match with_primary_key(&old_sql, name, constraint.as_deref(), columns)? {
            Ok(sql) => sql,
            Err(why) => return refuse(why),
        };
        // (Boxed: these statements run through `execute`, which runs this one.)
        Box::pin(self.execute_sql(&format!("DROP TABLE {} CASCADE", quoted(name)))).await?;
        let made = Box::pin(self.execute_sql(&new_sql)).await;
        if made.is_err() {
            // Put the table back as it was: it had no rows to lose.
            Box::pin(self.execute_sql(&old_sql)).await?;
        }
        for (_, sql) in &views {
            Box::pin(self.execute_sql(sql)).await?;
        }
        made?;
        Ok(Outcome::command(TAG))
    }
}

/// The table's `CREATE TABLE` with the key added and its current name, or why it cannot be
/// made again that way.
fn with_primary_key(
    sql: &str,
    name: &str,
    constraint: Option<&str>,
    columns: &[String],
) -> Result<std::result::Result<String, String>> {
    let mut statements = parse_statements(sql)?;
    let Some(parsed) = statements.pop() else {
        return Err(ServerError::internal(format!("no statement in {sql}")));
    };
    let EddyStatement::CreateTable {
        statement,
        watermark,
        append_only,
        ..
    } = parsed.statement
    else {
        return Ok(Err("it is fed by a connector".to_string()));
    };
    if watermark.is_some() || append_only {
        return Ok(Err("it has a watermark or is append-only".to_string()));
    }
    let Statement::CreateTable(mut create) = *statement else {
        return Ok(Err("it was not made by CREATE TABLE".to_string()));
    };
    if create.query.is_some() || !create.table_options.to_string().is_empty() {
        return Ok(Err("it was made with options or from a query".to_string()));
    }
    // The constraint as sqlparser reads it, from a statement of its own.
    let column_list: Vec<String> = columns.iter().map(|c| quoted(c)).collect();
    let named = constraint.map_or(String::new(), |c| format!("CONSTRAINT {} ", quoted(c)));
    let key_sql = format!(
        "CREATE TABLE t (x INT, {named}PRIMARY KEY ({}))",
        column_list.join(", ")
    );
    let parsed = Parser::parse_sql(&PostgreSqlDialect {}, &key_sql)
        .map_err(|e| ServerError::internal(e.to_string()))?;
    let key = match parsed.into_iter().next() {
        Some(Statement::CreateTable(key)) => key.constraints,
        _ => return Err(ServerError::internal(format!("cannot read {key_sql}"))),
    };
    create.constraints.extend(key);
    create.name = ObjectName(vec![ObjectNamePart::Identifier(Ident::with_quote(
        '"', name,
    ))]);
    Ok(Ok(Statement::CreateTable(create).to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_added_to_the_tables_statement() {
        let sql = with_primary_key(
            "CREATE TABLE old_name (id INT NOT NULL, name VARCHAR(20))",
            "t",
            Some("t_pkey"),
            &["id".to_string()],
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            sql,
            "CREATE TABLE \"t\" (id INT NOT NULL, name VARCHAR(20), CONSTRAINT \"t_pkey\" PRIMARY KEY (\"id\"))"
        );
        let refused = with_primary_key(
            "CREATE TABLE t (ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)",
            "t",
            None,
            &["ts".to_string()],
        )
        .unwrap();
        assert!(refused.is_err());
    }
}
