//! JSON's set-returning functions: `json[b]_object_keys`, `json[b]_array_elements` and
//! `json[b]_array_elements_text`, a row per key or element. Each has an array form here
//! (`eddy_json_object_keys`, ...) that [`crate::pg::ast::set_returning_selects`] and
//! [`crate::pg::ast::from_functions`] expand with `unnest`, in a select list or in FROM. An element
//! is given as its JSON text (`"a"`, `1`, `null`), as Postgres prints a `jsonb` element, typed
//! `jsonb` for `jsonb_array_elements` (a cast of each, [`element_type`]); `json_array_elements`'
//! are `text`: Postgres keeps a `json` element's spacing as written, which this text does not.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, ListBuilder, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::error::Result;
use datafusion::execution::context::SessionContext;
use serde_json::Value;

use crate::error::ServerError;
use crate::pg::functions::json::jsonb_text;
use crate::pg::functions::{function, text_arg};

/// The type a set-returning function's elements are cast to: a jsonb's are jsonb.
pub fn element_type(name: &str) -> Option<&'static str> {
    (name == "jsonb_array_elements").then_some("JSONB")
}

/// Each set-returning function, with the name of its array form.
pub const JSON_SETS: &[(&str, &str)] = &[
    ("json_object_keys", "eddy_json_object_keys"),
    ("jsonb_object_keys", "eddy_json_object_keys"),
    ("json_array_elements", "eddy_json_array_elements"),
    ("jsonb_array_elements", "eddy_json_array_elements"),
    ("json_array_elements_text", "eddy_json_array_elements_text"),
    ("jsonb_array_elements_text", "eddy_json_array_elements_text"),
];

#[derive(Clone, Copy)]
enum Elements {
    Keys,
    AsJson,
    AsText,
}

pub(crate) fn register(ctx: &SessionContext) {
    for (name, elements) in [
        ("eddy_json_object_keys", Elements::Keys),
        ("eddy_json_array_elements", Elements::AsJson),
        ("eddy_json_array_elements_text", Elements::AsText),
    ] {
        let list = DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)));
        ctx.register_udf(function(
            name,
            &[vec![DataType::Null]],
            list,
            move |args, rows| {
                let mut lists = ListBuilder::new(StringBuilder::new());
                for row in 0..rows {
                    match text_arg(&args[0], row) {
                        None => lists.append_null(),
                        Some(text) => {
                            for item in items(&text, elements)? {
                                lists.values().append_option(item);
                            }
                            lists.append(true);
                        }
                    }
                }
                Ok(Arc::new(lists.finish()) as ArrayRef)
            },
        ));
    }
}

/// The keys or elements of one JSON text.
fn items(text: &str, elements: Elements) -> Result<Vec<Option<String>>> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        ServerError::new("22P02", format!("invalid input syntax for type json: {e}"))
    })?;
    Ok(match (elements, value) {
        (Elements::Keys, Value::Object(map)) => {
            // jsonb's key order: shortest first, then by bytes.
            let mut keys: Vec<String> = map.keys().cloned().collect();
            keys.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
            keys.into_iter().map(Some).collect()
        }
        (Elements::Keys, value) => {
            return Err(ServerError::new(
                "22023",
                format!("cannot call json_object_keys on {}", kind(&value)),
            )
            .into())
        }
        (Elements::AsJson, Value::Array(items)) => {
            items.iter().map(|item| Some(jsonb_text(item))).collect()
        }
        (Elements::AsText, Value::Array(items)) => items
            .into_iter()
            .map(|item| match item {
                Value::Null => None,
                Value::String(s) => Some(s),
                other => Some(jsonb_text(&other)),
            })
            .collect(),
        (_, value) => {
            return Err(ServerError::new(
                "22023",
                format!("cannot extract elements from {}", kind(&value)),
            )
            .into())
        }
    })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "an object",
        Value::Array(_) => "an array",
        _ => "a scalar",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_elements_as_postgres_gives_them() {
        let some = |v: &[&str]| v.iter().map(|s| Some(s.to_string())).collect::<Vec<_>>();
        assert_eq!(
            items(r#"{"bb": 1, "a": 2, "c": 3}"#, Elements::Keys).unwrap(),
            some(&["a", "c", "bb"])
        );
        assert_eq!(
            items(r#"[1, "a", {"b": null}]"#, Elements::AsJson).unwrap(),
            some(&["1", "\"a\"", "{\"b\": null}"])
        );
        assert_eq!(
            items(r#"["a", 2, null]"#, Elements::AsText).unwrap(),
            vec![Some("a".to_string()), Some("2".to_string()), None]
        );
        assert!(items("[1]", Elements::Keys).is_err());
        assert!(items("{}", Elements::AsJson).is_err());
    }
}
