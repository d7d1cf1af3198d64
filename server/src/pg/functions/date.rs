//! Postgres' date and interval functions that DataFusion lacks: `isfinite`, `age` (years,
//! months and days, as Postgres' `timestamp_age`), `make_timestamp`, `clock_timestamp` and
//! the `justify_*` family.

use std::sync::Arc;

use chrono::{Datelike, NaiveDateTime, Timelike};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, IntervalMonthDayNanoArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, IntervalMonthDayNano, IntervalMonthDayNanoType, TimeUnit, TimestampMicrosecondType,
};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;

use crate::error::ServerError;
use crate::pg::functions::function;

const NANOS_PER_DAY: i64 = 86_400_000_000_000;
const DAYS_PER_MONTH: i32 = 30;

pub(crate) fn register(ctx: &SessionContext) {
    let any_args = |n: usize| vec![vec![DataType::Null; n]];
    // The time now, as the clock reads it when called (a `timestamptz`, as in Postgres).
    ctx.register_udf(function(
        "clock_timestamp",
        &[vec![]],
        DataType::Timestamp(
            datafusion::arrow::datatypes::TimeUnit::Microsecond,
            Some(crate::pg::types::timestamp_input::UTC.into()),
        ),
        |_, rows| {
            let now = chrono::Utc::now().timestamp_micros();
            Ok(Arc::new(
                datafusion::arrow::array::TimestampMicrosecondArray::from(vec![now; rows])
                    .with_timezone(crate::pg::types::timestamp_input::UTC),
            ))
        },
    ));
    // Eddy's dates and timestamps have no infinities: every value is finite.
    ctx.register_udf(function(
        "isfinite",
        &any_args(1),
        DataType::Boolean,
        |args, _| {
            let column = &args[0];
            Ok(Arc::new(
                (0..column.len())
                    .map(|i| column.is_valid(i).then_some(true))
                    .collect::<BooleanArray>(),
            ))
        },
    ));
    for (name, justify) in [
        (
            "justify_hours",
            justify_hours as fn(IntervalMonthDayNano) -> _,
        ),
        ("justify_days", justify_days),
        ("justify_interval", justify_interval),
    ] {
        ctx.register_udf(function(
            name,
            &any_args(1),
            interval_type(),
            move |args, _| {
                let intervals = cast(&args[0], &interval_type())?;
                let intervals = intervals.as_primitive::<IntervalMonthDayNanoType>();
                Ok(Arc::new(
                    intervals.unary::<_, IntervalMonthDayNanoType>(justify),
                ))
            },
        ));
    }
    ctx.register_udf(function(
        "make_timestamp",
        &any_args(6),
        DataType::Timestamp(TimeUnit::Microsecond, None),
        make_timestamp,
    ));
    ctx.register_udf(function(
        "age",
        &[vec![DataType::Null], vec![DataType::Null; 2]],
        interval_type(),
        age,
    ));
}

fn interval_type() -> DataType {
    DataType::Interval(datafusion::arrow::datatypes::IntervalUnit::MonthDayNano)
}

/// `justify_hours`: whole days of the time part become days.
fn justify_hours(span: IntervalMonthDayNano) -> IntervalMonthDayNano {
    let mut days = span
        .days
        .saturating_add((span.nanoseconds / NANOS_PER_DAY) as i32);
    let mut time = span.nanoseconds % NANOS_PER_DAY;
    if days > 0 && time < 0 {
        time += NANOS_PER_DAY;
        days -= 1;
    } else if days < 0 && time > 0 {
        time -= NANOS_PER_DAY;
        days += 1;
    }
    IntervalMonthDayNano::new(span.months, days, time)
}

/// `justify_days`: each 30 days become a month.
fn justify_days(span: IntervalMonthDayNano) -> IntervalMonthDayNano {
    let mut months = span.months.saturating_add(span.days / DAYS_PER_MONTH);
    let mut days = span.days % DAYS_PER_MONTH;
    if months > 0 && days < 0 {
        days += DAYS_PER_MONTH;
        months -= 1;
    } else if months < 0 && days > 0 {
        days -= DAYS_PER_MONTH;
        months += 1;
    }
    IntervalMonthDayNano::new(months, days, span.nanoseconds)
}

/// `justify_interval`: both, with one sign throughout (Postgres' order of steps).
fn justify_interval(span: IntervalMonthDayNano) -> IntervalMonthDayNano {
    let (mut months, mut days, mut time) = (span.months, span.days, span.nanoseconds);
    days = days.saturating_add((time / NANOS_PER_DAY) as i32);
    time %= NANOS_PER_DAY;
    months = months.saturating_add(days / DAYS_PER_MONTH);
    days %= DAYS_PER_MONTH;
    if months > 0 && (days < 0 || (days == 0 && time < 0)) {
        days += DAYS_PER_MONTH;
        months -= 1;
    } else if months < 0 && (days > 0 || (days == 0 && time > 0)) {
        days -= DAYS_PER_MONTH;
        months += 1;
    }
    if days > 0 && time < 0 {
        time += NANOS_PER_DAY;
        days -= 1;
    } else if days < 0 && time > 0 {
        time -= NANOS_PER_DAY;
        days += 1;
    }
    IntervalMonthDayNano::new(months, days, time)
}

/// `age(a, b)`: the symbolic difference in years, months and days (not 30-day months), as
/// Postgres' `timestamp_age`; `age(a)` is from today's midnight.
fn age(args: &[ArrayRef], rows: usize) -> Result<ArrayRef> {
    let micros = DataType::Timestamp(TimeUnit::Microsecond, None);
    let later = match args {
        [_, _] => cast(&args[0], &micros)?,
        _ => {
            let midnight = chrono::Utc::now().date_naive().and_hms_opt(0, 0, 0);
            let value = midnight.map(|m| m.and_utc().timestamp_micros());
            ScalarValue::TimestampMicrosecond(value, None).to_array_of_size(rows)?
        }
    };
    let earlier = cast(args.last().expect("age has an argument"), &micros)?;
    let (later, earlier) = (
        later.as_primitive::<TimestampMicrosecondType>(),
        earlier.as_primitive::<TimestampMicrosecondType>(),
    );
    let spans = later.iter().zip(earlier.iter()).map(|pair| match pair {
        (Some(a), Some(b)) => symbolic_difference(a, b),
        _ => Ok(None),
    });
    Ok(Arc::new(
        spans.collect::<Result<IntervalMonthDayNanoArray>>()?,
    ))
}

/// `make_timestamp(year, month, day, hour, min, sec)`: a `timestamp` from its fields.
fn make_timestamp(args: &[ArrayRef], rows: usize) -> Result<ArrayRef> {
    let ints = args[..5]
        .iter()
        .map(|a| cast(a, &DataType::Int64))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let ints: Vec<_> = ints
        .iter()
        .map(|a| a.as_primitive::<datafusion::arrow::datatypes::Int64Type>())
        .collect();
    let seconds = cast(&args[5], &DataType::Float64)?;
    let seconds = seconds.as_primitive::<datafusion::arrow::datatypes::Float64Type>();
    let values = (0..rows).map(|i| {
        if ints.iter().any(|a| a.is_null(i)) || seconds.is_null(i) {
            return Ok(None);
        }
        let [year, month, day, hour, minute] = [0, 1, 2, 3, 4].map(|f| ints[f].value(i));
        let second = seconds.value(i);
        let date = i32::try_from(year)
            .ok()
            .filter(|y| *y != 0)
            // Postgres' negative years are BC: -44 is 44 BC, the proleptic year -43.
            .map(|y| if y < 0 { y + 1 } else { y })
            .and_then(|y| {
                chrono::NaiveDate::from_ymd_opt(
                    y,
                    u32::try_from(month).ok()?,
                    u32::try_from(day).ok()?,
                )
            })
            .ok_or_else(|| {
                ServerError::new(
                    "22008",
                    format!("date field value out of range: {year}-{month:02}-{day:02}"),
                )
            })?;
        let whole = second.trunc();
        let time = (0..24)
            .contains(&hour)
            .then_some(())
            .filter(|_| (0..60).contains(&minute) && (0.0..60.0).contains(&second))
            .and_then(|_| {
                chrono::NaiveTime::from_hms_micro_opt(
                    hour as u32,
                    minute as u32,
                    whole as u32,
                    ((second - whole) * 1e6).round() as u32,
                )
            })
            .ok_or_else(|| {
                ServerError::new(
                    "22008",
                    format!("time field value out of range: {hour}:{minute:02}:{second:02}"),
                )
            })?;
        Ok(Some(date.and_time(time).and_utc().timestamp_micros()))
    });
    Ok(Arc::new(values.collect::<Result<
        datafusion::arrow::array::TimestampMicrosecondArray,
    >>()?))
}

fn symbolic_difference(a: i64, b: i64) -> Result<Option<IntervalMonthDayNano>> {
    let moment = |micros: i64| {
        chrono::DateTime::from_timestamp_micros(micros)
            .map(|t| t.naive_utc())
            .ok_or_else(|| DataFusionError::Execution("timestamp out of range".into()))
    };
    let (t1, t2) = (moment(a)?, moment(b)?);
    let fields = |t: &NaiveDateTime| {
        [
            i64::from(t.year()),
            i64::from(t.month0()),
            i64::from(t.day()),
            i64::from(t.hour()),
            i64::from(t.minute()),
            i64::from(t.second()),
            i64::from(t.nanosecond() / 1000),
        ]
    };
    let (f1, f2) = (fields(&t1), fields(&t2));
    let sign = if a < b { -1 } else { 1 };
    let mut d: Vec<i64> = f1.iter().zip(&f2).map(|(x, y)| (x - y) * sign).collect();
    // Borrow from the next field up; a month borrows the length of the earlier one's month.
    let limits = [0, 12, 0, 24, 60, 60, 1_000_000];
    for field in (1..7).rev() {
        while d[field] < 0 {
            d[field] += if field == 2 {
                let base = if a < b { &t1 } else { &t2 };
                i64::from(days_in_month(base.year(), base.month()))
            } else {
                limits[field]
            };
            d[field - 1] -= 1;
        }
    }
    let months = (d[0] * 12 + d[1]) * sign;
    let days = d[2] * sign;
    let micros = ((d[3] * 60 + d[4]) * 60 + d[5]) * 1_000_000 + d[6];
    Ok(Some(IntervalMonthDayNano::new(
        i32::try_from(months)
            .map_err(|_| DataFusionError::Execution("interval out of range".into()))?,
        days as i32,
        micros * sign * 1000,
    )))
}

fn days_in_month(year: i32, month: u32) -> u32 {
    let next = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    chrono::NaiveDate::from_ymd_opt(next.0, next.1, 1)
        .and_then(|d| d.pred_opt())
        .map_or(31, |d| d.day())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(months: i32, days: i32, hours: i64) -> IntervalMonthDayNano {
        IntervalMonthDayNano::new(months, days, hours * 3_600_000_000_000)
    }

    #[test]
    fn justify_as_postgres() {
        assert_eq!(justify_hours(span(0, 0, 27)), span(0, 1, 3));
        assert_eq!(justify_hours(span(0, 1, -3)), span(0, 0, 21));
        assert_eq!(justify_days(span(0, 35, 0)), span(1, 5, 0));
        assert_eq!(justify_days(span(1, -5, 0)), span(0, 25, 0));
        assert_eq!(justify_interval(span(1, -1, -1)), span(0, 28, 23));
    }

    #[test]
    fn age_borrows_the_earlier_month() {
        let at = |s: &str| {
            NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S")
                .unwrap()
                .and_utc()
                .timestamp_micros()
        };
        let d = symbolic_difference(at("2026-03-01 00:00:00"), at("2025-01-15 00:00:00"))
            .unwrap()
            .unwrap();
        assert_eq!(d, span(13, 17, 0));
        let back = symbolic_difference(at("2025-01-15 00:00:00"), at("2026-03-01 00:00:00"))
            .unwrap()
            .unwrap();
        assert_eq!(back, span(-13, -17, 0));
    }
}
