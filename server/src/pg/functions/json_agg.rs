//! `json_agg(x)` and `jsonb_agg(x)`: a group's values as one JSON array (`[1, 2]`);
//! `json_object_agg(k, v)` and `jsonb_object_agg(k, v)`: as one object (`{ "a" : 1 }`,
//! `{"a": 1}`). NULL for no rows, typed `json` or `jsonb` as in Postgres; values keep their
//! input order.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, ListArray, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};
use serde_json::Value;

use crate::error::ServerError;
use crate::pg::functions::json::jsonb_text;
use crate::pg::functions::text::json_value;
use crate::pg::functions::text_arg;
use crate::pg::types::column_types::PG_TYPE_KEY;

pub fn register(ctx: &SessionContext) {
    for jsonb in [false, true] {
        for object in [false, true] {
            let arguments = if object { 2 } else { 1 };
            ctx.register_udaf(AggregateUDF::new_from_impl(JsonAgg {
                jsonb,
                object,
                signature: Signature::any(arguments, Volatility::Immutable),
            }));
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonAgg {
    jsonb: bool,
    object: bool,
    signature: Signature,
}

impl AggregateUDFImpl for JsonAgg {
    fn name(&self) -> &str {
        match (self.jsonb, self.object) {
            (false, false) => "json_agg",
            (true, false) => "jsonb_agg",
            (false, true) => "json_object_agg",
            (true, true) => "jsonb_object_agg",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field(&self, _arg_fields: &[FieldRef]) -> Result<FieldRef> {
        let pg_type = if self.jsonb { "jsonb" } else { "json" };
        let metadata = HashMap::from([(PG_TYPE_KEY.to_string(), pg_type.to_string())]);
        Ok(Arc::new(
            Field::new(self.name(), DataType::Utf8, true).with_metadata(metadata),
        ))
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(JsonAggAccumulator {
            jsonb: self.jsonb,
            object: self.object,
            values: Vec::new(),
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        // The values so far, each as JSON text.
        Ok(vec![Arc::new(Field::new_list(
            format!("{}_values", args.name),
            Field::new_list_field(DataType::Utf8, true),
            true,
        ))])
    }
}

#[derive(Debug)]
struct JsonAggAccumulator {
    jsonb: bool,
    object: bool,
    /// The values, or for an object each `[key, value]`.
    values: Vec<Value>,
}

impl Accumulator for JsonAggAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        for row in 0..values[0].len() {
            if !self.object {
                self.values.push(json_value(&values[0], row)?);
                continue;
            }
            let key = text_arg(&values[0], row)
                .ok_or_else(|| ServerError::new("22004", "field name must not be null"))?;
            let value = json_value(&values[1], row)?;
            self.values
                .push(Value::Array(vec![Value::String(key), value]));
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists: &ListArray = states[0].as_list();
        for list in lists.iter().flatten() {
            let texts = list.as_string::<i32>();
            for text in texts.iter().flatten() {
                self.values
                    .push(serde_json::from_str(text).unwrap_or(Value::Null));
            }
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let texts: StringArray = self.values.iter().map(|v| Some(v.to_string())).collect();
        Ok(vec![ScalarValue::List(Arc::new(ListArray::new(
            Arc::new(Field::new_list_field(DataType::Utf8, true)),
            datafusion::arrow::buffer::OffsetBuffer::from_lengths([texts.len()]),
            Arc::new(texts),
            None,
        )))])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        if self.values.is_empty() {
            return Ok(ScalarValue::Utf8(None));
        }
        if !self.object {
            return Ok(ScalarValue::Utf8(Some(jsonb_text(&Value::Array(
                self.values.clone(),
            )))));
        }
        let pairs = self.values.iter().filter_map(|pair| match pair {
            Value::Array(kv) => Some((kv.first()?.as_str()?.to_string(), kv.get(1)?.clone())),
            _ => None,
        });
        Ok(ScalarValue::Utf8(Some(if self.jsonb {
            // Last one wins, as jsonb keeps one value a key.
            jsonb_text(&Value::Object(pairs.collect()))
        } else {
            let fields: Vec<String> = pairs
                .map(|(k, v)| format!("{} : {}", Value::String(k), jsonb_text(&v)))
                .collect();
            format!("{{ {} }}", fields.join(", "))
        })))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self
                .values
                .iter()
                .map(|v| v.to_string().len() + std::mem::size_of::<Value>())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_group_becomes_one_array_and_no_rows_null() {
        let ctx = SessionContext::new();
        register(&ctx);
        let sql = "SELECT k, json_agg(v) AS j, jsonb_agg(s) AS b FROM \
                   (VALUES (1, 1, 'a'), (1, 2, NULL), (2, 3, 'c')) t(k, v, s) GROUP BY k ORDER BY k";
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap()
            .to_string();
        assert!(text.contains(r#"| 1 | [1, 2] | ["a", null] |"#), "{text}");
        assert!(text.contains(r#"| 2 | [3]    | ["c"]       |"#), "{text}");
        let empty = ctx
            .sql("SELECT json_agg(v) FROM (VALUES (1)) t(v) WHERE v > 1")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert!(empty[0].column(0).is_null(0));
    }
}
