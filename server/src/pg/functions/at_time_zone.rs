//! `x AT TIME ZONE zone` and `timezone(zone, x)` as Postgres computes them: a `timestamptz`
//! becomes the wall-clock `timestamp` in `zone`, a `timestamp` the `timestamptz` at which
//! `zone`'s clocks show it. DataFusion plans `AT TIME ZONE` as a cast that only relabels the
//! zone, so `now() AT TIME ZONE 'UTC'` stayed a `timestamptz` printed in the session's zone.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, Offset, TimeZone};
use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, TimestampMicrosecondArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::ServerError;
use crate::pg::types::timestamp_input::{local_to_utc, UTC};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct AtTimeZone {
    /// Postgres' `timezone(zone, x)`, whose `'+05'` is west of Greenwich; else Eddy's own
    /// `eddy_local_time`, given a zone as Arrow names it.
    posix: bool,
    signature: Signature,
}

impl AtTimeZone {
    pub fn postgres() -> Self {
        Self {
            posix: true,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    pub fn local_time() -> Self {
        Self {
            posix: false,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

const WALL_CLOCK: DataType = DataType::Timestamp(TimeUnit::Microsecond, None);

fn result_type(input: &DataType) -> DataType {
    match input {
        DataType::Timestamp(_, Some(_)) => WALL_CLOCK,
        _ => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
    }
}

impl ScalarUDFImpl for AtTimeZone {
    fn name(&self) -> &str {
        if self.posix {
            "timezone"
        } else {
            "eddy_local_time"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The zone is text; text or a date is read as a `timestamptz` (Postgres' choice for an
    /// untyped literal), a timestamp keeps whether it has a zone.
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [_, input] = arg_types else {
            return Err(
                ServerError::new("42883", "timezone(zone, timestamp) takes two arguments").into(),
            );
        };
        let input = match input {
            DataType::Timestamp(_, Some(_))
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Date32
            | DataType::Null => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
            DataType::Timestamp(_, None) => DataType::Timestamp(TimeUnit::Microsecond, None),
            other => {
                return Err(ServerError::new(
                    "42883",
                    format!(
                        "function timezone(text, {}) does not exist",
                        crate::pg::types::names::pg_type_name(other)
                    ),
                )
                .into())
            }
        };
        Ok(vec![DataType::Utf8, input])
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(result_type(&arg_types[1]))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let data_type = result_type(args.arg_fields[1].data_type());
        Ok(Arc::new(Field::new(self.name(), data_type, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let rows = if scalar { 1 } else { args.number_rows };
        let zones = args.args[0].to_array(rows)?;
        let zones = datafusion::arrow::compute::cast(&zones, &DataType::Utf8)?;
        let input = args.args[1].to_array(rows)?;
        let to_local = matches!(input.data_type(), DataType::Timestamp(_, Some(_)));
        let micros = datafusion::arrow::compute::cast(
            &input,
            &DataType::Timestamp(TimeUnit::Microsecond, None),
        )?;
        let micros =
            micros.as_primitive::<datafusion::arrow::datatypes::TimestampMicrosecondType>();
        let mut known: HashMap<&str, Tz> = HashMap::new();
        let mut out = Vec::with_capacity(rows);
        for (zone, value) in zones.as_string::<i32>().iter().zip(micros.iter()) {
            let (Some(zone), Some(value)) = (zone, value) else {
                out.push(None);
                continue;
            };
            let tz = match known.get(zone) {
                Some(tz) => *tz,
                None => {
                    let tz = crate::pg::types::session_time_zone::zone_named(zone, self.posix)?;
                    known.insert(zone, tz);
                    tz
                }
            };
            out.push(Some(shift(value, &tz, to_local)?));
        }
        let array = TimestampMicrosecondArray::from(out);
        let array: ArrayRef = Arc::new(if to_local {
            array
        } else {
            array.with_timezone(UTC)
        });
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?)
        } else {
            ColumnarValue::Array(array)
        })
    }
}

/// An instant's wall clock in `zone` (`to_local`), or the instant of a wall clock there.
fn shift(micros: i64, zone: &Tz, to_local: bool) -> Result<i64, ServerError> {
    let out_of_range = || ServerError::new("22008", "timestamp out of range");
    let time = DateTime::from_timestamp_micros(micros).ok_or_else(out_of_range)?;
    let naive = time.naive_utc();
    let shifted = if to_local {
        let offset = zone
            .offset_from_utc_datetime(&naive)
            .fix()
            .local_minus_utc();
        naive + Duration::seconds(i64::from(offset))
    } else {
        local_to_utc(zone, &naive)
    };
    Ok(shifted.and_utc().timestamp_micros())
}
