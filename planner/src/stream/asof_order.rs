//! The values an ASOF join orders its rows by: any orderable column (integers, decimals,
//! floats, dates, times, timestamps) as an `i128` that sorts like it, so that the join's state
//! is one ordered map whatever the column's type, and "the next value" is `+ 1`.

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Date64Type, Decimal128Type, DurationMicrosecondType,
    DurationMillisecondType, DurationNanosecondType, DurationSecondType, Float16Type, Float32Type,
    Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, Time32MillisecondType,
    Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimeUnit, UInt16Type,
    UInt32Type, UInt64Type, UInt8Type,
};
use datafusion::common::{plan_err, Result as DfResult};

use crate::window::to_micros;

/// Whether an ASOF join can order its rows by values of `data_type`.
pub fn orderable(data_type: &DataType) -> bool {
    use DataType::*;
    matches!(
        data_type,
        Boolean
            | Int8
            | Int16
            | Int32
            | Int64
            | UInt8
            | UInt16
            | UInt32
            | UInt64
            | Float16
            | Float32
            | Float64
            | Decimal128(_, _)
            | Date32
            | Date64
            | Time32(_)
            | Time64(_)
            | Timestamp(_, _)
            | Duration(_)
    )
}

/// Bytes a stored order value takes: 8 when every value fits an `i64` (timestamps are stored as
/// microseconds, as they always were), 16 otherwise.
pub fn stored_width(data_type: &DataType) -> usize {
    match data_type {
        DataType::UInt64 => 16,
        DataType::Decimal128(precision, _) if *precision > 18 => 16,
        _ => 8,
    }
}

/// A float's place in IEEE 754's total order (`-0` taken as `0`, as SQL compares them).
fn float_order(value: f64) -> i128 {
    let value = if value == 0.0 { 0.0 } else { value };
    let bits = value.to_bits() as i64;
    // Negative floats sort backwards by their bits: flip all but the sign bit.
    (bits ^ (((bits >> 63) as u64) >> 1) as i64) as i128
}

/// Each row's order value (None for NULL). `array` is cast to `order_type` first, so both
/// sides of the join compare on one scale (INT with BIGINT, decimals of different scales).
pub fn order_values(array: &ArrayRef, order_type: &DataType) -> DfResult<Vec<Option<i128>>> {
    let array = if array.data_type() == order_type {
        array.clone()
    } else {
        cast(array, order_type)?
    };
    macro_rules! ints {
        ($t:ty) => {
            array
                .as_primitive::<$t>()
                .iter()
                .map(|v| v.map(|v| v as i128))
                .collect()
        };
    }
    macro_rules! floats {
        ($t:ty) => {
            array
                .as_primitive::<$t>()
                .iter()
                .map(|v| v.map(|v| float_order(f64::from(v))))
                .collect()
        };
    }
    Ok(match order_type {
        DataType::Boolean => array
            .as_boolean()
            .iter()
            .map(|v| v.map(i128::from))
            .collect(),
        DataType::Int8 => ints!(Int8Type),
        DataType::Int16 => ints!(Int16Type),
        DataType::Int32 => ints!(Int32Type),
        DataType::Int64 => ints!(Int64Type),
        DataType::UInt8 => ints!(UInt8Type),
        DataType::UInt16 => ints!(UInt16Type),
        DataType::UInt32 => ints!(UInt32Type),
        DataType::UInt64 => ints!(UInt64Type),
        DataType::Float16 => floats!(Float16Type),
        DataType::Float32 => floats!(Float32Type),
        DataType::Float64 => floats!(Float64Type),
        DataType::Decimal128(_, _) => array.as_primitive::<Decimal128Type>().iter().collect(),
        DataType::Date32 => ints!(Date32Type),
        DataType::Date64 => ints!(Date64Type),
        DataType::Time32(TimeUnit::Second) => ints!(Time32SecondType),
        DataType::Time32(_) => ints!(Time32MillisecondType),
        DataType::Time64(TimeUnit::Microsecond) => ints!(Time64MicrosecondType),
        DataType::Time64(_) => ints!(Time64NanosecondType),
        DataType::Duration(TimeUnit::Second) => ints!(DurationSecondType),
        DataType::Duration(TimeUnit::Millisecond) => ints!(DurationMillisecondType),
        DataType::Duration(TimeUnit::Microsecond) => ints!(DurationMicrosecondType),
        DataType::Duration(TimeUnit::Nanosecond) => ints!(DurationNanosecondType),
        // Microseconds whatever the unit: the clocks that close temporal joins count them.
        DataType::Timestamp(_, _) => to_micros(&array)?
            .iter()
            .map(|v| v.map(i128::from))
            .collect(),
        other => return plan_err!("an ASOF join cannot order rows by {other}"),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Decimal128Array, Float64Array, Int32Array};

    use super::*;

    #[test]
    fn floats_sort_like_their_values() {
        let values = [f64::NEG_INFINITY, -2.5, -1.0, -0.0, 0.0, 1e-300, 1.0, 2.5];
        let array: ArrayRef = Arc::new(Float64Array::from(values.to_vec()));
        let order: Vec<i128> = order_values(&array, &DataType::Float64)
            .unwrap()
            .into_iter()
            .map(Option::unwrap)
            .collect();
        assert!(order.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(order[3], order[4], "-0 and 0 are equal");
    }

    #[test]
    fn integers_are_cast_to_the_common_type() {
        let array: ArrayRef = Arc::new(Int32Array::from(vec![Some(-3), None, Some(7)]));
        let decimal = DataType::Decimal128(12, 2);
        assert_eq!(
            order_values(&array, &decimal).unwrap(),
            vec![Some(-300), None, Some(700)]
        );
        let wide: ArrayRef = Arc::new(
            Decimal128Array::from(vec![i128::MAX / 10])
                .with_precision_and_scale(38, 0)
                .unwrap(),
        );
        assert_eq!(stored_width(wide.data_type()), 16);
        assert_eq!(
            order_values(&wide, wide.data_type()).unwrap(),
            vec![Some(i128::MAX / 10)]
        );
    }
}
