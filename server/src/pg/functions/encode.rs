//! `encode(bytea, format)` and `decode(text, format)` with Postgres' formats: `escape` (which
//! DataFusion lacks: zero bytes and bytes with the high bit set as `\ooo`, a backslash doubled,
//! read back as `bytea`'s escape input), and `base64` as Postgres writes it (padded, a line
//! break every 76 characters; whitespace ignored when read). `hex` is DataFusion's own. The
//! functions wrap DataFusion's, keeping their signatures and types.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BinaryBuilder, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

use crate::pg::types::bytea_input::parse_bytea;

/// Characters per line of Postgres' base64 output.
const BASE64_LINE: usize = 76;

pub fn register(ctx: &SessionContext) {
    for inner in [
        datafusion::functions::encoding::encode(),
        datafusion::functions::encoding::decode(),
    ] {
        ctx.register_udf(ScalarUDF::new_from_impl(PostgresFormats { inner }));
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct PostgresFormats {
    inner: Arc<ScalarUDF>,
}

impl PostgresFormats {
    fn encodes(&self) -> bool {
        self.inner.name() == "encode"
    }
}

impl ScalarUDFImpl for PostgresFormats {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        self.inner.return_type(args)
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(args)
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let format = match args.args.get(1) {
            Some(ColumnarValue::Scalar(format)) => {
                format.try_as_str().flatten().map(str::to_string)
            }
            _ => None,
        };
        match format.as_deref() {
            Some("escape") => {
                let rows = args.number_rows;
                let values = args.args[0].clone().into_array(rows)?;
                let out = if self.encodes() {
                    escape_encode(&values)?
                } else {
                    escape_decode(&values)?
                };
                Ok(ColumnarValue::Array(out))
            }
            Some("base64") if self.encodes() => {
                args.args[1] = ColumnarValue::Scalar(ScalarValue::Utf8(Some("base64pad".into())));
                let rows = args.number_rows;
                let encoded = self.inner.invoke_with_args(args)?.into_array(rows)?;
                Ok(ColumnarValue::Array(broken_into_lines(&encoded)?))
            }
            Some("base64") => {
                args.args[1] = ColumnarValue::Scalar(ScalarValue::Utf8(Some("base64pad".into())));
                let rows = args.number_rows;
                let text = args.args[0].clone().into_array(rows)?;
                let kept = without_whitespace(&text)?;
                // Back to the type coercion gave the argument, which DataFusion's decode reads.
                let kept = datafusion::arrow::compute::cast(&kept, text.data_type())?;
                args.args[0] = ColumnarValue::Array(kept);
                self.inner.invoke_with_args(args)
            }
            _ => self.inner.invoke_with_args(args),
        }
    }
}

fn escape_encode(values: &ArrayRef) -> Result<ArrayRef> {
    let bytes = datafusion::arrow::compute::cast(values, &DataType::Binary)?;
    let bytes = bytes.as_binary::<i32>();
    let mut out = StringBuilder::with_capacity(bytes.len(), bytes.value_data().len());
    for i in 0..bytes.len() {
        if bytes.is_null(i) {
            out.append_null();
            continue;
        }
        let mut text = String::with_capacity(bytes.value(i).len());
        for &b in bytes.value(i) {
            match b {
                0 | 0x80..=0xff => text.push_str(&format!("\\{b:03o}")),
                b'\\' => text.push_str("\\\\"),
                _ => text.push(b as char),
            }
        }
        out.append_value(text);
    }
    Ok(Arc::new(out.finish()))
}

fn escape_decode(values: &ArrayRef) -> Result<ArrayRef> {
    let text = datafusion::arrow::compute::cast(values, &DataType::Utf8)?;
    let text = text.as_string::<i32>();
    let mut out = BinaryBuilder::with_capacity(text.len(), text.value_data().len());
    for i in 0..text.len() {
        if text.is_null(i) {
            out.append_null();
        } else {
            let bytes =
                parse_bytea(text.value(i)).map_err(|e| DataFusionError::External(Box::new(e)))?;
            out.append_value(bytes);
        }
    }
    Ok(Arc::new(out.finish()))
}

fn broken_into_lines(encoded: &ArrayRef) -> Result<ArrayRef> {
    let encoded = datafusion::arrow::compute::cast(encoded, &DataType::Utf8)?;
    let encoded = encoded.as_string::<i32>();
    let mut out = StringBuilder::with_capacity(encoded.len(), encoded.value_data().len());
    for i in 0..encoded.len() {
        if encoded.is_null(i) {
            out.append_null();
            continue;
        }
        let value = encoded.value(i);
        // base64 is ASCII: every chunk boundary is a character boundary.
        let lines: Vec<&str> = value
            .as_bytes()
            .chunks(BASE64_LINE)
            .map(|chunk| std::str::from_utf8(chunk).unwrap_or_default())
            .collect();
        out.append_value(lines.join("\n"));
    }
    Ok(Arc::new(out.finish()))
}

fn without_whitespace(values: &ArrayRef) -> Result<ArrayRef> {
    let text = datafusion::arrow::compute::cast(values, &DataType::Utf8)?;
    let text = text.as_string::<i32>();
    let mut out = StringBuilder::with_capacity(text.len(), text.value_data().len());
    for i in 0..text.len() {
        if text.is_null(i) {
            out.append_null();
        } else {
            let kept: String = text
                .value(i)
                .chars()
                .filter(|c| !c.is_ascii_whitespace())
                .collect();
            out.append_value(kept);
        }
    }
    Ok(Arc::new(out.finish()))
}
