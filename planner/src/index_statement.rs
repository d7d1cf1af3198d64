//! `CREATE INDEX [IF NOT EXISTS] name ON relation (column, ...) [INCLUDE (column, ...)]`.
//!
//! An index orders a table's or a materialized view's rows by plain columns, ascending; the
//! forms an ordered key cannot serve (expressions, DESC, partial and unique indexes, access
//! methods other than btree) are refused by name.

use datafusion::sql::sqlparser::ast::{CreateIndex, Expr, IndexType};

use crate::names::{fold, resolve_object_name};
use crate::{PlanError, Result};

#[derive(Debug, Clone, PartialEq)]
pub struct CreateIndexStatement {
    pub name: String,
    pub if_not_exists: bool,
    /// The table or materialized view indexed.
    pub relation: String,
    pub columns: Vec<String>,
    pub include: Vec<String>,
}

pub fn create_index(create: &CreateIndex) -> Result<CreateIndexStatement> {
    let refuse = |what: &str| Err(PlanError::NotSupported(format!("{what} in CREATE INDEX")));
    let Some(name) = &create.name else {
        return Err(PlanError::NotSupported(
            "CREATE INDEX without a name: name the index".into(),
        ));
    };
    if create.unique {
        return refuse("UNIQUE (a table's PRIMARY KEY is its unique key)");
    }
    if create.predicate.is_some() {
        return refuse("a WHERE clause (partial indexes)");
    }
    if create.concurrently {
        return refuse("CONCURRENTLY");
    }
    if let Some(using) = &create.using {
        if !matches!(using, IndexType::BTree) {
            return refuse(&format!("USING {using}"));
        }
    }
    if !create.with.is_empty() {
        return refuse("WITH (storage parameters)");
    }
    let mut columns = Vec::with_capacity(create.columns.len());
    for column in &create.columns {
        if column.operator_class.is_some() {
            return refuse("an operator class");
        }
        let order = &column.column;
        if order.options.asc == Some(false) || order.options.nulls_first.is_some() {
            return refuse("DESC or NULLS FIRST/LAST (entries are in ascending order)");
        }
        match &order.expr {
            Expr::Identifier(ident) => columns.push(fold(ident)),
            other => return refuse(&format!("the expression {other} (index plain columns)")),
        }
    }
    if columns.is_empty() {
        return Err(PlanError::Syntax(
            "an index needs at least one column".into(),
        ));
    }
    Ok(CreateIndexStatement {
        name: resolve_object_name(name)?,
        if_not_exists: create.if_not_exists,
        relation: resolve_object_name(&create.table_name)?,
        columns,
        include: create.include.iter().map(fold).collect(),
    })
}
