//! `EXTRACT(field FROM x)` and `date_part('field', x)` as Postgres answers them. `EXTRACT` is a
//! `numeric` whose scale depends on the field (`second` 5.500000, `milliseconds` 5500.000,
//! `epoch` of a timestamp 1767323045.500000, whole fields scale 0); `date_part` is the same
//! value as a `double precision`. DataFusion's `date_part` cut the fraction off
//! (`second` of `05.5` was 5) and typed both as integers.
//!
//! The planner writes `EXTRACT(f FROM x)` as `pg_extract('f', x)` (see
//! `eddy_planner::pg_literals`), so views and queries answer alike.

use std::sync::Arc;

use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Decimal128Array, Float64Array, PrimitiveArray,
};
use datafusion::arrow::compute::kernels::temporal::{date_part, DatePart};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Field, FieldRef, Int32Type, IntervalMonthDayNanoType, IntervalUnit,
    Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::prelude::SessionContext;

use crate::error::ServerError;

const MICROS_PER_SECOND: i128 = 1_000_000;
const SECONDS_PER_DAY: i128 = 86_400;

pub fn install(ctx: &SessionContext) {
    // DataFusion's, with its alias `datepart`.
    ctx.deregister_udf("date_part");
    ctx.register_udf(ScalarUDF::new_from_impl(Extract::new(false)));
    ctx.register_udf(ScalarUDF::new_from_impl(Extract::new(true)));
}

/// The fields Postgres extracts, under their canonical names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Milliseconds,
    Microseconds,
    Epoch,
    Dow,
    Isodow,
    Doy,
    Week,
    Quarter,
    Isoyear,
    Decade,
    Century,
    Millennium,
    /// The offset from UTC in seconds (then its hours, its minutes), of a `timestamptz`.
    Timezone,
    TimezoneHour,
    TimezoneMinute,
}

impl Unit {
    /// Postgres' spellings of each field (`secs`, `mon`, `ms`...).
    fn parse(text: &str) -> Option<Unit> {
        use Unit::*;
        Some(match text.trim().to_ascii_lowercase().as_str() {
            "year" | "years" | "y" | "yr" | "yrs" => Year,
            "month" | "months" | "mon" | "mons" => Month,
            "day" | "days" | "d" => Day,
            "hour" | "hours" | "h" | "hr" | "hrs" => Hour,
            "minute" | "minutes" | "m" | "min" | "mins" => Minute,
            "second" | "seconds" | "s" | "sec" | "secs" => Second,
            "millisecond" | "milliseconds" | "ms" | "msec" | "msecs" | "mseconds" => Milliseconds,
            "microsecond" | "microseconds" | "us" | "usec" | "usecs" | "useconds" => Microseconds,
            "epoch" => Epoch,
            "dow" => Dow,
            "isodow" => Isodow,
            "doy" => Doy,
            "week" | "weeks" | "w" => Week,
            "quarter" | "qtr" => Quarter,
            "isoyear" => Isoyear,
            "decade" | "decades" => Decade,
            "century" | "centuries" => Century,
            "millennium" | "millennia" | "millenniums" => Millennium,
            "timezone" => Timezone,
            "timezone_h" | "timezone_hour" => TimezoneHour,
            "timezone_m" | "timezone_minute" => TimezoneMinute,
            _ => return None,
        })
    }

    /// Digits after the decimal point of the `numeric` result.
    fn scale(self, input: &DataType) -> i8 {
        match (self, input) {
            (Unit::Epoch, DataType::Date32) => 0,
            (Unit::Second | Unit::Epoch, _) => 6,
            (Unit::Milliseconds, _) => 3,
            _ => 0,
        }
    }

    fn is_time_of_day(self) -> bool {
        matches!(
            self,
            Unit::Hour | Unit::Minute | Unit::Second | Unit::Milliseconds | Unit::Microseconds
        )
    }
}

/// `pg_extract` (numeric) or `date_part` (double precision).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Extract {
    float8: bool,
    signature: Signature,
}

impl Extract {
    fn new(float8: bool) -> Self {
        Self {
            float8,
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for Extract {
    fn name(&self) -> &str {
        if self.float8 {
            "date_part"
        } else {
            "pg_extract"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let input = args.arg_fields[1].data_type();
        let unit = match args.scalar_arguments[0] {
            Some(scalar) => unit_for(scalar, input)?,
            None => return Err(field_not_constant()),
        };
        let data_type = if self.float8 {
            DataType::Float64
        } else {
            DataType::Decimal128(38, unit.scale(input))
        };
        Ok(Arc::new(Field::new(self.name(), data_type, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let ColumnarValue::Scalar(field) = &args.args[0] else {
            return Err(field_not_constant());
        };
        let scalar_input = matches!(args.args[1], ColumnarValue::Scalar(_));
        let input = args.args[1].to_array(if scalar_input { 1 } else { args.number_rows })?;
        let unit = unit_for(field, input.data_type())?;
        let scale = unit.scale(input.data_type());
        let values = extract(unit, &input)?;
        let result: ArrayRef = if self.float8 {
            let divisor = 10f64.powi(i32::from(scale));
            Arc::new(
                values
                    .iter()
                    .map(|v| v.map(|v| v as f64 / divisor))
                    .collect::<Float64Array>(),
            )
        } else {
            Arc::new(values.with_precision_and_scale(38, scale)?)
        };
        Ok(if scalar_input {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?)
        } else {
            ColumnarValue::Array(result)
        })
    }
}

fn field_not_constant() -> datafusion::error::DataFusionError {
    ServerError::new(
        "0A000",
        "the field of EXTRACT and date_part must be a constant",
    )
    .into()
}

/// The field named by `field` if Postgres extracts it from `input`.
fn unit_for(field: &ScalarValue, input: &DataType) -> Result<Unit> {
    let text = field.try_as_str().flatten().unwrap_or_default();
    let type_name = crate::pg::types::names::pg_type_name(input);
    let unit = Unit::parse(text).ok_or_else(|| {
        ServerError::new(
            "22023",
            format!("unit \"{text}\" not recognized for type {type_name}"),
        )
    })?;
    let zoned = matches!(
        unit,
        Unit::Timezone | Unit::TimezoneHour | Unit::TimezoneMinute
    );
    let supported = match input {
        _ if zoned => matches!(input, DataType::Timestamp(_, Some(_)) | DataType::Null),
        DataType::Date32 => !unit.is_time_of_day(),
        DataType::Time32(_) | DataType::Time64(_) => unit.is_time_of_day() || unit == Unit::Epoch,
        DataType::Timestamp(..) => true,
        DataType::Interval(_) => !matches!(
            unit,
            Unit::Dow | Unit::Isodow | Unit::Doy | Unit::Week | Unit::Isoyear
        ),
        DataType::Null => true,
        _ => {
            return Err(ServerError::new(
                "42883",
                format!("function extract(unknown, {type_name}) does not exist"),
            )
            .into())
        }
    };
    if !supported {
        return Err(ServerError::new(
            "0A000",
            format!(
                "unit \"{}\" not supported for type {type_name}",
                text.to_lowercase()
            ),
        )
        .into());
    }
    Ok(unit)
}

/// The unscaled values (at the unit's scale) of `unit` for each row of `input`.
fn extract(
    unit: Unit,
    input: &ArrayRef,
) -> Result<PrimitiveArray<datafusion::arrow::datatypes::Decimal128Type>> {
    let nulls = || Decimal128Array::new_null(input.len());
    Ok(match input.data_type() {
        DataType::Null => nulls(),
        DataType::Interval(unit_kind) => {
            let intervals = match unit_kind {
                IntervalUnit::MonthDayNano => input.clone(),
                _ => datafusion::arrow::compute::cast(
                    input,
                    &DataType::Interval(IntervalUnit::MonthDayNano),
                )?,
            };
            intervals
                .as_primitive::<IntervalMonthDayNanoType>()
                .iter()
                .map(|v| v.map(|v| interval_part(unit, v.months, v.days, v.nanoseconds / 1000)))
                .collect()
        }
        DataType::Date32 => {
            let days = input.as_primitive::<Date32Type>();
            match unit {
                Unit::Epoch => days
                    .iter()
                    .map(|d| d.map(|d| i128::from(d) * SECONDS_PER_DAY))
                    .collect(),
                _ => calendar_part(unit, input)?,
            }
        }
        DataType::Time32(_) | DataType::Time64(_) => {
            let micros = time_micros(input)?;
            micros
                .iter()
                .map(|m| m.map(|m| clock_part(unit, i128::from(m))))
                .collect()
        }
        DataType::Timestamp(..) => match unit {
            Unit::Timezone | Unit::TimezoneHour | Unit::TimezoneMinute => {
                zone_offsets(unit, input)?
            }
            Unit::Second | Unit::Milliseconds | Unit::Microseconds | Unit::Epoch => {
                let micros = timestamp_micros(input)?;
                micros
                    .iter()
                    .map(|m| {
                        m.map(|m| {
                            let m = i128::from(m);
                            match unit {
                                Unit::Epoch => m,
                                _ => m.rem_euclid(60 * MICROS_PER_SECOND),
                            }
                        })
                    })
                    .collect()
            }
            _ => calendar_part(unit, input)?,
        },
        other => {
            return Err(ServerError::new(
                "42883",
                format!(
                    "function extract(unknown, {}) does not exist",
                    crate::pg::types::names::pg_type_name(other)
                ),
            )
            .into())
        }
    })
}

/// A whole field of a date or timestamp, by arrow's calendar (in the timestamp's time zone).
fn calendar_part(
    unit: Unit,
    input: &ArrayRef,
) -> Result<PrimitiveArray<datafusion::arrow::datatypes::Decimal128Type>> {
    let part = match unit {
        Unit::Year | Unit::Decade | Unit::Century | Unit::Millennium => DatePart::Year,
        Unit::Month => DatePart::Month,
        Unit::Day => DatePart::Day,
        Unit::Hour => DatePart::Hour,
        Unit::Minute => DatePart::Minute,
        Unit::Dow => DatePart::DayOfWeekSunday0,
        Unit::Isodow => DatePart::DayOfWeekMonday0,
        Unit::Doy => DatePart::DayOfYear,
        Unit::Week => DatePart::Week,
        Unit::Quarter => DatePart::Quarter,
        Unit::Isoyear => DatePart::YearISO,
        Unit::Second
        | Unit::Milliseconds
        | Unit::Microseconds
        | Unit::Epoch
        | Unit::Timezone
        | Unit::TimezoneHour
        | Unit::TimezoneMinute => unreachable!("extracted from the clock or the zone"),
    };
    let parts = date_part(input.as_ref(), part)?;
    Ok(parts
        .as_primitive::<Int32Type>()
        .iter()
        .map(|v| {
            v.map(|v| {
                let v = i128::from(v);
                match unit {
                    // Monday is 1 and Sunday 7.
                    Unit::Isodow => v + 1,
                    Unit::Decade => v.div_euclid(10),
                    Unit::Century if v > 0 => (v + 99) / 100,
                    Unit::Century => -((99 - (v - 1)) / 100),
                    Unit::Millennium if v > 0 => (v + 999) / 1000,
                    Unit::Millennium => -((999 - (v - 1)) / 1000),
                    _ => v,
                }
            })
        })
        .collect())
}

/// The UTC offset of each instant in the timestamps' own time zone (Eddy keeps a
/// `timestamptz` in UTC: 0), in seconds, whole hours or the minutes past them.
fn zone_offsets(
    unit: Unit,
    input: &ArrayRef,
) -> Result<PrimitiveArray<datafusion::arrow::datatypes::Decimal128Type>> {
    use chrono::{Offset, TimeZone};
    let DataType::Timestamp(_, Some(zone)) = input.data_type() else {
        return Ok(Decimal128Array::new_null(input.len()));
    };
    let zone: Tz = zone.parse()?;
    let micros = timestamp_micros(input)?;
    Ok(micros
        .iter()
        .map(|m| {
            m.and_then(chrono::DateTime::from_timestamp_micros)
                .map(|instant| {
                    let seconds = i128::from(
                        zone.offset_from_utc_datetime(&instant.naive_utc())
                            .fix()
                            .local_minus_utc(),
                    );
                    match unit {
                        Unit::TimezoneHour => seconds / 3600,
                        Unit::TimezoneMinute => seconds / 60 % 60,
                        _ => seconds,
                    }
                })
        })
        .collect())
}

/// A field of a time of day, in microseconds since midnight.
fn clock_part(unit: Unit, micros: i128) -> i128 {
    match unit {
        Unit::Hour => micros / (3600 * MICROS_PER_SECOND),
        Unit::Minute => micros / (60 * MICROS_PER_SECOND) % 60,
        Unit::Epoch => micros,
        _ => micros % (60 * MICROS_PER_SECOND),
    }
}

/// A field of an interval, as Postgres 15 reads one (`epoch` counts a year as 365.25 days
/// and a month as 30).
fn interval_part(unit: Unit, months: i32, days: i32, micros: i64) -> i128 {
    let (months, days, micros) = (i128::from(months), i128::from(days), i128::from(micros));
    let years = months / 12;
    match unit {
        Unit::Year => years,
        Unit::Decade => years / 10,
        Unit::Century => years / 100,
        Unit::Millennium => years / 1000,
        Unit::Quarter => (months % 12) / 3 + 1,
        Unit::Month => months % 12,
        Unit::Day => days,
        Unit::Epoch => {
            let seconds =
                31_557_600 * years + 30 * SECONDS_PER_DAY * (months % 12) + SECONDS_PER_DAY * days;
            seconds * MICROS_PER_SECOND + micros
        }
        _ => clock_part(unit, micros),
    }
}

fn time_micros(input: &ArrayRef) -> Result<Vec<Option<i64>>> {
    Ok(match input.data_type() {
        DataType::Time32(TimeUnit::Second) => input
            .as_primitive::<Time32SecondType>()
            .iter()
            .map(|v| v.map(|v| i64::from(v) * 1_000_000))
            .collect(),
        DataType::Time32(_) => input
            .as_primitive::<Time32MillisecondType>()
            .iter()
            .map(|v| v.map(|v| i64::from(v) * 1000))
            .collect(),
        DataType::Time64(TimeUnit::Nanosecond) => input
            .as_primitive::<Time64NanosecondType>()
            .iter()
            .map(|v| v.map(|v| v.div_euclid(1000)))
            .collect(),
        _ => input
            .as_primitive::<Time64MicrosecondType>()
            .iter()
            .collect(),
    })
}

fn timestamp_micros(input: &ArrayRef) -> Result<Vec<Option<i64>>> {
    let DataType::Timestamp(unit, _) = input.data_type() else {
        return Ok(vec![None; input.len()]);
    };
    Ok(match unit {
        TimeUnit::Second => input
            .as_primitive::<TimestampSecondType>()
            .iter()
            .map(|v| v.map(|v| v * 1_000_000))
            .collect(),
        TimeUnit::Millisecond => input
            .as_primitive::<TimestampMillisecondType>()
            .iter()
            .map(|v| v.map(|v| v * 1000))
            .collect(),
        TimeUnit::Microsecond => input
            .as_primitive::<TimestampMicrosecondType>()
            .iter()
            .collect(),
        TimeUnit::Nanosecond => input
            .as_primitive::<TimestampNanosecondType>()
            .iter()
            .map(|v| v.map(|v| v.div_euclid(1000)))
            .collect(),
    })
}
