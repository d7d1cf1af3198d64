//! Text read as a `bytea` in Postgres' two input forms: hex (`\xdeadbeef`, whitespace allowed
//! between digit pairs) and escape (`abc\001\\`: a backslash and three octal digits is a byte,
//! two backslashes one backslash, anything else its own UTF-8 bytes). Arrow's cast keeps the
//! text's bytes as they are, so `'\xdeadbeef'::bytea` was ten bytes, not four, and an INSERT of
//! `'\x00ff'` into a `bytea` column stored six. After type coercion, each cast of text to a
//! binary type reads the text here; bad input fails with 22P02, as in Postgres.
//!
//! `length(bytea)` counts bytes, as Postgres' does (DataFusion's `length` reads text).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BinaryBuilder, Int32Array};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    Cast, ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionContext;

use crate::error::ServerError;

pub fn install(ctx: &SessionContext) {
    ctx.add_analyzer_rule(Arc::new(PostgresByteaInput));
    // `octet_length` of text or bytea: its bytes (DataFusion's takes text only).
    ctx.register_udf(ScalarUDF::new_from_impl(ByteaLength::named("octet_length")));
}

fn is_binary(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView
    )
}

fn is_text(data_type: Option<DataType>) -> bool {
    matches!(
        data_type,
        Some(DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
    )
}

#[derive(Debug)]
struct PostgresByteaInput;

impl AnalyzerRule for PostgresByteaInput {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let input = Arc::new(ScalarUDF::new_from_impl(ByteaIn::default()));
        let length = Arc::new(ScalarUDF::new_from_impl(ByteaLength::named("bytea_length")));
        plan.transform_up_with_subqueries(|plan| {
            let schema: DFSchema = merge_schema(&plan.inputs());
            let names = NamePreserver::new(&plan);
            plan.map_expressions(|expr| {
                let name = names.save(&expr);
                let rewritten = expr.transform_up(|e| match e {
                    Expr::Cast(Cast { expr, field })
                        if is_binary(field.data_type()) && is_text(expr.get_type(&schema).ok()) =>
                    {
                        let bytes = Expr::ScalarFunction(ScalarFunction::new_udf(
                            input.clone(),
                            vec![*expr],
                        ));
                        // `bytea_in` gives Binary; a LargeBinary or BinaryView column casts that.
                        Ok(Transformed::yes(
                            if field.data_type() == &DataType::Binary {
                                bytes
                            } else {
                                Expr::Cast(Cast::new(Box::new(bytes), field.data_type().clone()))
                            },
                        ))
                    }
                    // `decode(text, format)` reads its text as written: the cast coercion put
                    // on it is no bytea input.
                    Expr::ScalarFunction(mut call)
                        if call.func.name() == "decode"
                            && call.args.first().and_then(input_text).is_some() =>
                    {
                        if let Some(text) = call.args.first().and_then(input_text) {
                            call.args[0] = Expr::Cast(Cast::new(Box::new(text), DataType::Binary));
                        }
                        Ok(Transformed::yes(Expr::ScalarFunction(call)))
                    }
                    Expr::ScalarFunction(call)
                        if matches!(
                            call.func.name(),
                            "length" | "character_length" | "char_length"
                        ) && call.args.len() == 1 =>
                    {
                        match bytes_argument(&call.args[0], &schema) {
                            Some(bytes) => Ok(Transformed::yes(Expr::ScalarFunction(
                                ScalarFunction::new_udf(length.clone(), vec![bytes]),
                            ))),
                            None => Ok(Transformed::no(Expr::ScalarFunction(call))),
                        }
                    }
                    e => Ok(Transformed::no(e)),
                })?;
                Ok(rewritten.update_data(|e| name.restore(e)))
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "eddy_postgres_bytea_input"
    }
}

/// The text a `bytea_in(text)` (or a cast of one) reads.
fn input_text(expr: &Expr) -> Option<Expr> {
    match expr {
        Expr::ScalarFunction(call) if call.func.name() == "bytea_in" => call.args.first().cloned(),
        Expr::Cast(Cast { expr, .. }) => input_text(expr),
        _ => None,
    }
}

/// A `bytea` argument of a text function: the value itself, or the cast to text type
/// coercion put around it (Eddy's `eddy_text` where the session's rules rewrote that cast).
fn bytes_argument(arg: &Expr, schema: &DFSchema) -> Option<Expr> {
    let binary = |e: &Expr| e.get_type(schema).is_ok_and(|t| is_binary(&t));
    match arg {
        e if binary(e) => Some(e.clone()),
        Expr::Cast(Cast { expr, .. })
        | Expr::TryCast(datafusion::logical_expr::TryCast { expr, .. })
            if binary(expr) =>
        {
            Some(expr.as_ref().clone())
        }
        Expr::ScalarFunction(call)
            if call.func.name() == "eddy_text" && call.args.len() == 1 && binary(&call.args[0]) =>
        {
            Some(call.args[0].clone())
        }
        _ => None,
    }
}

/// `length(bytea)`, `octet_length(text | bytea)`: the bytes of a value.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ByteaLength {
    name: &'static str,
    signature: Signature,
}

impl ByteaLength {
    fn named(name: &'static str) -> Self {
        Self {
            name,
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ByteaLength {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let bytes = datafusion::arrow::compute::cast(&arrays[0], &DataType::Binary)?;
        let bytes = bytes.as_binary::<i32>();
        let lengths: Int32Array = (0..bytes.len())
            .map(|i| (!bytes.is_null(i)).then(|| bytes.value(i).len() as i32))
            .collect();
        Ok(ColumnarValue::Array(Arc::new(lengths) as ArrayRef))
    }
}

/// `bytea_in(text)`: the bytes a text in hex or escape form stands for.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ByteaIn {
    signature: Signature,
}

impl Default for ByteaIn {
    fn default() -> Self {
        Self {
            signature: Signature::string(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ByteaIn {
    fn name(&self) -> &str {
        "bytea_in"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Binary)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let text = datafusion::arrow::compute::cast(&arrays[0], &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let mut out = BinaryBuilder::with_capacity(rows, text.value_data().len());
        for i in 0..rows {
            if text.is_null(i) {
                out.append_null();
            } else {
                let bytes = parse_bytea(text.value(i))
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
                out.append_value(bytes);
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish()) as ArrayRef))
    }
}

/// The bytes of a `bytea` input text (Postgres' `byteain`).
pub fn parse_bytea(text: &str) -> Result<Vec<u8>, ServerError> {
    match text
        .strip_prefix("\\x")
        .or_else(|| text.strip_prefix("\\X"))
    {
        Some(hex) => parse_hex(hex),
        None => parse_escape(text),
    }
}

fn parse_hex(hex: &str) -> Result<Vec<u8>, ServerError> {
    let mut bytes = Vec::with_capacity(hex.len() / 2);
    let mut digits = hex.chars().filter(|c| !c.is_ascii_whitespace());
    while let Some(high) = digits.next() {
        let Some(low) = digits.next() else {
            return Err(ServerError::new(
                "22023",
                "invalid hexadecimal data: odd number of digits",
            ));
        };
        bytes.push((hex_digit(high)? << 4) | hex_digit(low)?);
    }
    Ok(bytes)
}

fn hex_digit(c: char) -> Result<u8, ServerError> {
    c.to_digit(16)
        .map(|d| d as u8)
        .ok_or_else(|| ServerError::new("22023", format!("invalid hexadecimal digit: \"{c}\"")))
}

fn parse_escape(text: &str) -> Result<Vec<u8>, ServerError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let octal = |b: Option<&u8>, max: u8| b.filter(|b| (b'0'..=max).contains(b)).copied();
        if bytes.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else if let (Some(a), Some(b), Some(c)) = (
            octal(bytes.get(i + 1), b'3'),
            octal(bytes.get(i + 2), b'7'),
            octal(bytes.get(i + 3), b'7'),
        ) {
            out.push(((a - b'0') << 6) | ((b - b'0') << 3) | (c - b'0'));
            i += 4;
        } else {
            return Err(ServerError::new(
                "22P02",
                "invalid input syntax for type bytea",
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_and_escape_forms_read_as_postgres_reads_them() {
        assert_eq!(
            parse_bytea("\\xdeadbeef").unwrap(),
            [0xde, 0xad, 0xbe, 0xef]
        );
        assert_eq!(parse_bytea("\\xDE AD").unwrap(), [0xde, 0xad]);
        assert_eq!(parse_bytea("\\x").unwrap(), Vec::<u8>::new());
        assert_eq!(parse_bytea("\\001abc").unwrap(), [1, b'a', b'b', b'c']);
        assert_eq!(parse_bytea("a\\\\b").unwrap(), [b'a', b'\\', b'b']);
        assert_eq!(parse_bytea("é").unwrap(), "é".as_bytes());
        assert_eq!(parse_bytea("\\xabc").unwrap_err().code, "22023");
        assert_eq!(parse_bytea("\\xzz").unwrap_err().code, "22023");
        assert_eq!(parse_bytea("\\9").unwrap_err().code, "22P02");
        assert_eq!(parse_bytea("a\\").unwrap_err().code, "22P02");
    }
}
