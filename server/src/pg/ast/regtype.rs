//! `regtype` shown as text, as pgcli's completion queries read it:
//!
//! - `atttypid::regtype::text` is the type's name (`integer`), not its oid: `regtype` is an
//!   oid here (`datafusion-pg-catalog` keeps the oid through the cast), so the pair of casts
//!   becomes `format_type(x, NULL)`, which prints the names `regtype` prints.
//! - `proargtypes::regtype[]` (and `COALESCE(proallargtypes::regtype[], ...)`) cast to `text[]`
//!   is the list of the argument types' names. `pg_proc`'s type vectors are text here
//!   (`"25 23"`, `"[2276]"`), so each such cast becomes `eddy_regtype_names(x)`, which reads
//!   the oids out of the text and names each with `format_type`.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int32Array, ListArray};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs};
use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, ArrayElemTypeDef, DataType as SqlType, Expr, Statement,
};

use crate::pg::ast::catalog_rewrites::parse;

/// The function the `regtype[]`-to-`text[]` casts become.
pub(crate) const REGTYPE_NAMES: &str = "eddy_regtype_names";

fn is_regtype(data_type: &SqlType) -> bool {
    matches!(data_type, SqlType::Custom(name, modifiers)
        if modifiers.is_empty()
            && name.to_string().to_ascii_lowercase().trim_start_matches("pg_catalog.") == "regtype")
}

fn array_of(data_type: &SqlType) -> Option<&SqlType> {
    match data_type {
        SqlType::Array(ArrayElemTypeDef::SquareBracket(inner, _))
        | SqlType::Array(ArrayElemTypeDef::AngleBracket(inner)) => Some(inner),
        _ => None,
    }
}

fn is_text(data_type: &SqlType) -> bool {
    matches!(data_type, SqlType::Text)
        || matches!(data_type, SqlType::Custom(name, _)
            if name.to_string().eq_ignore_ascii_case("pg_catalog.text"))
}

/// Rewrites the `regtype` display casts of `statement` (see the module's comment).
pub(crate) fn apply(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        let Expr::Cast {
            expr: inner,
            data_type,
            ..
        } = expr
        else {
            return ControlFlow::<()>::Continue(());
        };
        if is_text(data_type) {
            if let Expr::Cast {
                expr: oid,
                data_type: inner_type,
                ..
            } = inner.as_ref()
            {
                if is_regtype(inner_type) {
                    if let Some(call) = parse(&format!("format_type({oid}, NULL)")) {
                        *expr = call;
                    }
                }
            }
            return ControlFlow::Continue(());
        }
        if array_of(data_type).is_some_and(is_text) {
            let mut names = (**inner).clone();
            let mut found = false;
            let _ = visit_expressions_mut(&mut names, |e| {
                if let Expr::Cast {
                    expr: oids,
                    data_type,
                    ..
                } = e
                {
                    if array_of(data_type).is_some_and(is_regtype) {
                        if let Some(call) = parse(&format!("{REGTYPE_NAMES}({oids})")) {
                            *e = call;
                            found = true;
                        }
                    }
                }
                ControlFlow::<()>::Continue(())
            });
            if found {
                *expr = names;
            }
        }
        ControlFlow::Continue(())
    });
}

/// `eddy_regtype_names(vector)`: the `format_type` names of the oids in a type vector's text.
pub(crate) fn type_names(vectors: &ArrayRef, rows: usize) -> Result<ArrayRef> {
    let text = datafusion::arrow::compute::cast(vectors, &DataType::Utf8)?;
    let text = text.as_string::<i32>();
    let mut oids: Vec<i32> = Vec::new();
    let mut offsets: Vec<usize> = Vec::with_capacity(rows);
    let mut valid: Vec<bool> = Vec::with_capacity(rows);
    for i in 0..rows {
        if text.is_null(i) {
            offsets.push(0);
            valid.push(false);
            continue;
        }
        let row: Vec<i32> = text
            .value(i)
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect();
        offsets.push(row.len());
        valid.push(true);
        oids.extend(row);
    }
    let count = oids.len();
    let format_type = datafusion_pg_catalog::pg_catalog::format_type::create_format_type_udf();
    let oids: ArrayRef = Arc::new(Int32Array::from(oids));
    let typmods: ArrayRef = Arc::new(Int32Array::new_null(count));
    let named = format_type.invoke_with_args(ScalarFunctionArgs {
        args: vec![ColumnarValue::Array(oids), ColumnarValue::Array(typmods)],
        arg_fields: vec![
            Arc::new(Field::new("oid", DataType::Int32, true)),
            Arc::new(Field::new("typmod", DataType::Int32, true)),
        ],
        number_rows: count,
        return_field: Arc::new(Field::new("name", DataType::Utf8, true)),
        config_options: Arc::new(ConfigOptions::default()),
    })?;
    let names = named.into_array(count)?;
    let names = datafusion::arrow::compute::cast(&names, &DataType::Utf8)?;
    Ok(Arc::new(ListArray::try_new(
        Arc::new(Field::new_list_field(DataType::Utf8, true)),
        OffsetBuffer::from_lengths(offsets),
        names,
        Some(valid.into()),
    )?))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::StringArray;

    use super::*;

    fn rewritten(sql: &str) -> String {
        crate::pg::ast::catalog_rewrites::rewritten_by(sql, apply)
    }

    #[test]
    fn regtype_display_casts_become_type_names() {
        assert_eq!(
            rewritten("SELECT att.atttypid::regtype::text AS t FROM pg_attribute att"),
            "SELECT format_type(att.atttypid, NULL) AS t FROM pg_attribute att"
        );
        assert_eq!(
            rewritten(
                "SELECT COALESCE(proallargtypes::regtype[], proargtypes::regtype[])::text[] FROM pg_proc WHERE prorettype::regtype != 'trigger'::regtype"
            ),
            "SELECT COALESCE(eddy_regtype_names(proallargtypes), eddy_regtype_names(proargtypes)) FROM pg_proc WHERE prorettype::regtype <> 'trigger'::regtype"
        );
    }

    #[test]
    fn type_vectors_are_named() {
        let vectors: ArrayRef = Arc::new(StringArray::from(vec![
            Some("25 23"),
            None,
            Some("[1007]"),
            Some(""),
        ]));
        let names = type_names(&vectors, 4).unwrap();
        let names = names.as_list::<i32>();
        let row = |i: usize| -> Vec<String> {
            let values = names.value(i);
            values
                .as_string::<i32>()
                .iter()
                .map(|v| v.unwrap_or_default().to_string())
                .collect()
        };
        assert_eq!(row(0), vec!["text", "integer"]);
        assert!(names.is_null(1));
        assert_eq!(row(2), vec!["integer[]"]);
        assert!(row(3).is_empty());
    }
}
