//! Postgres functions that drivers and BI tools call on connect and while browsing, beyond
//! those `datafusion-pg-catalog` brings: `version()`, `current_setting()`, `set_config()`,
//! `obj_description()`, `col_description()`, `pg_get_viewdef()`, `to_regclass()`, ... (and
//! [`crate::pg::functions::text`]: `format()`, `json_build_object()`).

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Int32Array, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::context::SessionContext;
use eddy_planner::statement::parse_statements;
use eddy_planner::EddyStatement;

use crate::catalogs::pg_catalog::RelationOids;
use crate::database::Database;
use crate::pg::functions::{function, int_arg, text_arg, texts};

/// Every view, plain or materialized, by name: (name, its query, whether it is materialized).
pub(crate) fn view_definitions(db: &Database) -> Vec<(String, Option<String>, bool)> {
    let mut views: Vec<(String, Option<String>, bool)> = db
        .engine()
        .stats()
        .views
        .iter()
        .map(|v| (v.name.clone(), view_query(&v.sql), true))
        .collect();
    for (name, object) in db.objects.read().unwrap_or_else(|e| e.into_inner()).iter() {
        if let crate::database::Object::PlainView(view) = object {
            views.push((name.clone(), Some(view.query.clone()), false));
        }
    }
    views.sort();
    views
}

/// The version string `version()` returns; drivers parse the `PostgreSQL x.y` part.
pub fn version_string() -> String {
    format!(
        "PostgreSQL {} (Eddy {}) on {}-linux, a streaming SQL database",
        crate::pg::settings::SERVER_VERSION,
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH
    )
}

/// Registers the functions into the SQL context.
pub(crate) fn register(
    ctx: &SessionContext,
    db: Weak<Database>,
    oids: RelationOids,
    type_oids: HashMap<String, i32>,
) {
    use DataType::{Boolean, Int32, Int64, Utf8};
    ctx.register_udf(function(
        crate::pg::ast::regtype::REGTYPE_NAMES,
        &[vec![Utf8]],
        DataType::List(Arc::new(
            datafusion::arrow::datatypes::Field::new_list_field(Utf8, true),
        )),
        |args, rows| crate::pg::ast::regtype::type_names(&args[0], rows),
    ));
    ctx.register_udf(function(
        crate::pg::ast::domain_base::DOMAIN_BASE_TYPE,
        &[vec![Int32]],
        Int32,
        |args, rows| crate::pg::ast::domain_base::domain_base_type(&args[0], rows),
    ));
    ctx.register_udf(function("version", &[], Utf8, |_, rows| {
        Ok(texts(rows, |_| Some(version_string())))
    }));
    // The server's defaults: a literal name is replaced by the connection's value before
    // planning (`rewrite::with_session_settings`); this answers computed names.
    ctx.register_udf(function(
        "current_setting",
        &[vec![Utf8], vec![Utf8, Boolean], vec![Utf8, Boolean, Utf8]],
        Utf8,
        |args, rows| {
            // The third argument is the connection's value, put there by the rewrite.
            if let Some(value) = args.get(2) {
                return Ok(value.clone());
            }
            let mut out = Vec::with_capacity(rows);
            for i in 0..rows {
                let Some(name) = text_arg(&args[0], i) else {
                    out.push(None);
                    continue;
                };
                let missing_ok = args
                    .get(1)
                    .is_some_and(|a| text_arg(a, i).as_deref() == Some("true"));
                match crate::pg::settings::default_setting(&name) {
                    Some(value) => out.push(Some(value.to_string())),
                    None if missing_ok => out.push(None),
                    None => {
                        return Err(DataFusionError::Execution(format!(
                            "unrecognized configuration parameter \"{name}\""
                        )))
                    }
                }
            }
            Ok(Arc::new(StringArray::from(out)) as ArrayRef)
        },
    ));
    ctx.register_udf(function(
        "set_config",
        &[vec![Utf8, Utf8, Boolean]],
        Utf8,
        |args, rows| Ok(texts(rows, |i| text_arg(&args[1], i))),
    ));
    // Eddy has no COMMENT ON: every object's description is NULL, as in Postgres without one.
    let no_comment = |args: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
        let _ = args;
        Ok(texts(rows, |_| None))
    };
    ctx.register_udf(function(
        "obj_description",
        &[
            vec![Int32],
            vec![Int32, Utf8],
            vec![Int64],
            vec![Int64, Utf8],
        ],
        Utf8,
        no_comment,
    ));
    ctx.register_udf(function(
        "col_description",
        &[vec![Int32, Int32], vec![Int64, Int64]],
        Utf8,
        no_comment,
    ));
    ctx.register_udf(function(
        "shobj_description",
        &[vec![Int32, Utf8], vec![Int64, Utf8]],
        Utf8,
        no_comment,
    ));
    let viewdef_db = db.clone();
    let visible_oids = oids.clone();
    let key_oids_for_index = oids.clone();
    let key_oids_for_constraint = oids.clone();
    let regclass_oids = oids.clone();
    let viewdef = move |args: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
        let Some(db) = viewdef_db.upgrade() else {
            return Ok(texts(rows, |_| None));
        };
        let views = view_definitions(&db);
        Ok(texts(rows, |i| {
            let name = match args[0].data_type() {
                DataType::Utf8 => text_arg(&args[0], i),
                _ => int_arg(&args[0], i).and_then(|oid| {
                    oids.read()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(&(oid as i32))
                        .map(|(_, name)| name.clone())
                }),
            }?;
            views
                .iter()
                .find(|(view, _, _)| *view == name)
                .and_then(|(_, query, _)| query.clone())
        }))
    };
    ctx.register_udf(function(
        "pg_get_viewdef",
        &[
            vec![Int32],
            vec![Int32, Boolean],
            vec![Int64],
            vec![Int64, Boolean],
            vec![Utf8],
            vec![Utf8, Boolean],
        ],
        Utf8,
        viewdef,
    ));
    // Visible means on the search path: `public` and `pg_catalog`.
    ctx.register_udf(function(
        "pg_table_is_visible",
        &[vec![Int32], vec![Int64]],
        Boolean,
        move |args, rows| {
            let relations = visible_oids.read().unwrap_or_else(|e| e.into_inner());
            Ok(Arc::new(
                (0..rows)
                    .map(|i| {
                        let oid = int_arg(&args[0], i)?;
                        Some(relations.get(&(oid as i32)).is_none_or(|(schema, _)| {
                            schema == crate::database::SCHEMA || schema == "pg_catalog"
                        }))
                    })
                    .collect::<BooleanArray>(),
            ) as ArrayRef)
        },
    ));
    // A type's OID by name, NULL when there is no such type (drivers probe for hstore).
    ctx.register_udf(function(
        "to_regtype",
        &[vec![Utf8]],
        Int32,
        move |args, rows| {
            Ok(Arc::new(
                (0..rows)
                    .map(|i| {
                        let name = text_arg(&args[0], i)?.to_ascii_lowercase();
                        let name = name.trim_start_matches("pg_catalog.");
                        type_oids.get(type_alias(name)).copied()
                    })
                    .collect::<Int32Array>(),
            ) as ArrayRef)
        },
    ));
    // Eddy stores no expression trees (defaults, index predicates): NULL in, NULL out, as in
    // Postgres (tools test `pg_get_expr(indpred, indrelid) IS NULL`).
    ctx.register_udf(function(
        "pg_get_expr",
        &[vec![Utf8, Int32], vec![Utf8, Int32, Boolean]],
        Utf8,
        |args, rows| Ok(texts(rows, |i| text_arg(&args[0], i))),
    ));
    // A relation's OID by (optionally qualified, optionally quoted) name; NULL when unknown.
    ctx.register_udf(function(
        "to_regclass",
        &[vec![Utf8]],
        Int32,
        move |args, rows| {
            let relations = regclass_oids.read().unwrap_or_else(|e| e.into_inner());
            Ok(Arc::new(
                (0..rows)
                    .map(|i| {
                        let name = text_arg(&args[0], i)?;
                        let (schema, table) = split_relation_name(&name);
                        relations
                            .iter()
                            .find(|(_, (s, t))| {
                                *t == table && schema.as_ref().is_none_or(|schema| schema == s)
                            })
                            .map(|(oid, _)| *oid)
                    })
                    .collect::<Int32Array>(),
            ) as ArrayRef)
        },
    ));
    ctx.register_udf(function("pg_is_in_recovery", &[], Boolean, |_, rows| {
        Ok(Arc::new(BooleanArray::from(vec![false; rows])) as ArrayRef)
    }));
    // One schema search path for everything: every function and type is visible.
    for name in [
        "pg_function_is_visible",
        "pg_type_is_visible",
        "pg_collation_is_visible",
    ] {
        ctx.register_udf(function(
            name,
            &[vec![Int32], vec![Int64]],
            Boolean,
            |_, rows| Ok(Arc::new(BooleanArray::from(vec![true; rows])) as ArrayRef),
        ));
    }
    // Indexes (primary keys' and of `CREATE INDEX`) and primary keys' constraints, by the
    // OIDs `pg_class`/`pg_constraint` give them.
    let key_db = db.clone();
    let key_oids = key_oids_for_index;
    ctx.register_udf(function(
        "pg_get_indexdef",
        &[vec![Int32], vec![Int32, Int32, Boolean]],
        Utf8,
        move |args, rows| {
            Ok(texts(rows, |i| {
                let oid = int_arg(&args[0], i)? as i32;
                let column = args.get(1).and_then(|a| int_arg(a, i)).unwrap_or(0);
                let db = key_db.upgrade()?;
                if let Some(def) =
                    crate::catalogs::pg_catalog::indexes::secondary_indexdef(&db, oid, column)
                {
                    return Some(def);
                }
                let (schema, table, columns) = primary_key(
                    &key_db,
                    &key_oids,
                    oid - crate::catalogs::pg_catalog::keys::index_oid(0),
                )?;
                match column {
                    0 => Some(
                        crate::catalogs::pg_catalog::indexes::primary_key_definition(
                            &schema, &table, &columns,
                        ),
                    ),
                    n => columns.get(usize::try_from(n - 1).ok()?).cloned(),
                }
            }))
        },
    ));
    let key_db = db.clone();
    let key_oids = key_oids_for_constraint;
    ctx.register_udf(function(
        "pg_get_constraintdef",
        &[vec![Int32], vec![Int32, Boolean]],
        Utf8,
        move |args, rows| {
            Ok(texts(rows, |i| {
                let oid = int_arg(&args[0], i)? as i32;
                let (_, _, columns) = primary_key(
                    &key_db,
                    &key_oids,
                    oid - crate::catalogs::pg_catalog::keys::constraint_oid(0),
                )?;
                Some(format!("PRIMARY KEY ({})", columns.join(", ")))
            }))
        },
    ));
    // Eddy has no functions of its own in pg_proc; the builtins' signatures are not kept.
    for name in [
        "pg_get_function_result",
        "pg_get_function_arguments",
        "pg_get_function_identity_arguments",
        "pg_get_function_sqlbody",
    ] {
        ctx.register_udf(function(
            name,
            &[vec![Int32], vec![Int64]],
            Utf8,
            no_comment,
        ));
    }
    // Every object has the default privileges, which Eddy gives as a NULL ACL (pg_dump then
    // grants nothing).
    ctx.register_udf(function(
        "acldefault",
        &[vec![Utf8, Int32]],
        Utf8,
        no_comment,
    ));
    // Eddy has no triggers (pg_trigger is empty).
    ctx.register_udf(function(
        "pg_get_triggerdef",
        &[vec![Int32], vec![Int32, Boolean]],
        Utf8,
        no_comment,
    ));
    ctx.register_udf(function(
        "pg_get_serial_sequence",
        &[vec![Utf8, Utf8]],
        Utf8,
        no_comment,
    ));
}

/// The schema, name and key columns of the table with this OID, if it has a primary key.
fn primary_key(
    db: &Weak<Database>,
    oids: &RelationOids,
    table_oid: i32,
) -> Option<(String, String, Vec<String>)> {
    let (schema, table) = oids
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&table_oid)
        .cloned()?;
    match db.upgrade()?.object(&table)? {
        crate::database::Object::Table(def) => match &def.key {
            eddy_executor::TableKey::PrimaryKey(columns) => Some((
                schema,
                table,
                columns
                    .iter()
                    .map(|&c| def.schema.field(c).name().clone())
                    .collect(),
            )),
            eddy_executor::TableKey::RowId => None,
        },
        _ => None,
    }
}

/// `schema.table`, `"Schema"."Table"` or `table` as (schema, table), unquoted.
fn split_relation_name(name: &str) -> (Option<String>, String) {
    let unquote = |part: &str| -> String {
        let part = part.trim();
        match part.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
            Some(quoted) => quoted.replace("\"\"", "\""),
            None => part.to_ascii_lowercase(),
        }
    };
    match name.split_once('.') {
        Some((schema, table)) => (Some(unquote(schema)), unquote(table)),
        None => (None, unquote(name)),
    }
}

/// The `pg_type` name of an SQL type name.
fn type_alias(name: &str) -> &str {
    match name {
        "integer" | "int" => "int4",
        "bigint" => "int8",
        "smallint" => "int2",
        "real" => "float4",
        "double precision" => "float8",
        "boolean" => "bool",
        "character varying" => "varchar",
        "character" | "char" => "bpchar",
        "timestamp without time zone" => "timestamp",
        "timestamp with time zone" => "timestamptz",
        "time without time zone" => "time",
        "decimal" => "numeric",
        other => other,
    }
}

/// The query of a `CREATE MATERIALIZED VIEW` statement, as `pg_get_viewdef` shows it.
pub(crate) fn view_query(sql: &str) -> Option<String> {
    let statement = parse_statements(sql).ok()?.into_iter().next()?;
    match statement.statement {
        EddyStatement::CreateMaterializedView { query, .. } => Some(format!(" {query};")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_query_is_the_select_of_the_view() {
        let query =
            view_query("CREATE MATERIALIZED VIEW v AS SELECT a, count(*) FROM t GROUP BY a")
                .unwrap();
        assert_eq!(query, " SELECT a, count(*) FROM t GROUP BY a;");
        assert_eq!(view_query("CREATE TABLE t (a INT)"), None);
    }

    #[test]
    fn relation_names_split_and_unquote() {
        assert_eq!(
            split_relation_name("\"public\".\"My T\""),
            (Some("public".into()), "My T".into())
        );
        assert_eq!(split_relation_name("Readings"), (None, "readings".into()));
    }

    #[test]
    fn version_names_postgres_first() {
        assert!(version_string().starts_with("PostgreSQL "));
    }
}
