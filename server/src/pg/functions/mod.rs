//! Postgres' function families that DataFusion lacks or computes differently, a family per
//! file, each registered from [`crate::context`].

pub mod at_time_zone;
pub mod caps;
pub mod date;
pub mod encode;
pub mod extract;
pub mod interval_arithmetic;
pub mod json;
pub mod json_agg;
pub mod json_build;
pub mod json_operators;
pub mod json_sets;
pub mod ordered_set_aggregates;
pub mod scalar;
pub mod text;
pub mod to_char;
pub mod to_timestamp;
pub mod type_of;

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};

type Body = dyn Fn(&[ArrayRef], usize) -> Result<ArrayRef> + Send + Sync;

/// A scalar function given by its name, accepted argument lists and a body over arrays.
struct PgFunction {
    name: &'static str,
    signature: Signature,
    returns: DataType,
    body: Box<Body>,
}

impl std::fmt::Debug for PgFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for PgFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for PgFunction {}

impl std::hash::Hash for PgFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state)
    }
}

impl ScalarUDFImpl for PgFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(self.returns.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        Ok(ColumnarValue::Array((self.body)(&arrays, rows)?))
    }
}

pub(crate) fn function(
    name: &'static str,
    arities: &[Vec<DataType>],
    returns: DataType,
    body: impl Fn(&[ArrayRef], usize) -> Result<ArrayRef> + Send + Sync + 'static,
) -> ScalarUDF {
    // By arity only: clients pass OIDs as int4 or int8 and untyped NULL parameters; the
    // bodies read every argument as text or a number.
    let mut counts: Vec<usize> = arities.iter().map(Vec::len).collect();
    counts.sort_unstable();
    counts.dedup();
    let signature = if counts.is_empty() || counts == [0] {
        Signature::nullary(Volatility::Stable)
    } else {
        Signature::one_of(
            counts
                .into_iter()
                .map(|n| {
                    if n == 0 {
                        TypeSignature::Nullary
                    } else {
                        TypeSignature::Any(n)
                    }
                })
                .collect(),
            Volatility::Stable,
        )
    };
    ScalarUDF::new_from_impl(PgFunction {
        name,
        signature,
        returns,
        body: Box::new(body),
    })
}

pub(crate) fn texts(rows: usize, value: impl Fn(usize) -> Option<String>) -> ArrayRef {
    Arc::new((0..rows).map(value).collect::<StringArray>())
}

pub(crate) fn text_arg(array: &ArrayRef, i: usize) -> Option<String> {
    if is_null(array, i) {
        return None;
    }
    ScalarValue::try_from_array(array, i).ok().map(|v| match v {
        ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) => s,
        ScalarValue::Utf8View(Some(s)) => s,
        other => other.to_string(),
    })
}

/// Whether row `i` is NULL; an untyped NULL's array has no validity bits to say so.
pub(crate) fn is_null(array: &ArrayRef, i: usize) -> bool {
    array.is_null(i) || array.data_type() == &DataType::Null
}

pub(crate) fn int_arg(array: &ArrayRef, i: usize) -> Option<i64> {
    text_arg(array, i).and_then(|s| s.parse().ok())
}
