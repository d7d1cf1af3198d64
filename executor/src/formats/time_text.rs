//! Dates, times and intervals as text, the way Postgres writes them (ISO 8601): for values
//! in JSON messages.

use std::fmt::Write as _;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{
    DataType, DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType,
    DurationSecondType, IntervalDayTimeType, IntervalMonthDayNanoType, IntervalUnit,
    IntervalYearMonthType, TimeUnit,
};

/// A timestamp value in microseconds since 1970-01-01 (nanoseconds truncated).
pub(crate) fn timestamp_micros(array: &dyn Array, row: usize) -> i64 {
    use datafusion::arrow::datatypes::{
        TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
        TimestampSecondType,
    };
    match array.data_type() {
        DataType::Timestamp(TimeUnit::Second, _) => array
            .as_primitive::<TimestampSecondType>()
            .value(row)
            .saturating_mul(1_000_000),
        DataType::Timestamp(TimeUnit::Millisecond, _) => array
            .as_primitive::<TimestampMillisecondType>()
            .value(row)
            .saturating_mul(1_000),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => array
            .as_primitive::<TimestampNanosecondType>()
            .value(row)
            .div_euclid(1_000),
        _ => array.as_primitive::<TimestampMicrosecondType>().value(row),
    }
}

pub(crate) fn duration_micros(array: &dyn Array, row: usize) -> i64 {
    match array.data_type() {
        DataType::Duration(TimeUnit::Second) => array
            .as_primitive::<DurationSecondType>()
            .value(row)
            .saturating_mul(1_000_000),
        DataType::Duration(TimeUnit::Millisecond) => array
            .as_primitive::<DurationMillisecondType>()
            .value(row)
            .saturating_mul(1_000),
        DataType::Duration(TimeUnit::Nanosecond) => {
            array.as_primitive::<DurationNanosecondType>().value(row) / 1_000
        }
        _ => array.as_primitive::<DurationMicrosecondType>().value(row),
    }
}

/// An interval's months, days and nanoseconds.
pub(crate) fn interval_parts(array: &dyn Array, row: usize) -> (i64, i64, i64) {
    match array.data_type() {
        DataType::Interval(IntervalUnit::YearMonth) => (
            i64::from(array.as_primitive::<IntervalYearMonthType>().value(row)),
            0,
            0,
        ),
        DataType::Interval(IntervalUnit::DayTime) => {
            let value = array.as_primitive::<IntervalDayTimeType>().value(row);
            (
                0,
                i64::from(value.days),
                i64::from(value.milliseconds) * 1_000_000,
            )
        }
        _ => {
            let value = array.as_primitive::<IntervalMonthDayNanoType>().value(row);
            (
                i64::from(value.months),
                i64::from(value.days),
                value.nanoseconds,
            )
        }
    }
}

/// `YYYY-MM-DD` of a day number (days since 1970-01-01; proleptic Gregorian calendar).
pub(crate) fn write_date(days: i64, out: &mut String) {
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    if year < 0 {
        let _ = write!(out, "-{:04}-{month:02}-{day:02}", -year);
    } else {
        let _ = write!(out, "{year:04}-{month:02}-{day:02}");
    }
}

/// `HH:MM:SS[.ffffff]` of microseconds since midnight, the fraction without trailing zeros.
pub(crate) fn write_time_of_day(micros: i64, out: &mut String) {
    let seconds = micros / 1_000_000;
    let _ = write!(
        out,
        "{:02}:{:02}:{:02}",
        seconds / 3_600,
        seconds / 60 % 60,
        seconds % 60
    );
    write_fraction(micros % 1_000_000, out);
}

/// `.f` to `.ffffff` for a non-zero count of microseconds (below a second), trailing zeros cut.
pub(crate) fn write_fraction(micros: i64, out: &mut String) {
    if micros == 0 {
        return;
    }
    let digits = format!("{:06}", micros.unsigned_abs());
    out.push('.');
    out.push_str(digits.trim_end_matches('0'));
}

/// An ISO 8601 duration: `P1Y2M3DT4H5M6.5S`, each part with its own sign as Postgres writes
/// it (`P-1D`, `PT-0.5S`), `PT0S` for zero.
pub(crate) fn write_iso_duration(months: i64, days: i64, micros: i64, out: &mut String) {
    out.push('P');
    let (years, months) = (months / 12, months % 12);
    if years != 0 {
        let _ = write!(out, "{years}Y");
    }
    if months != 0 {
        let _ = write!(out, "{months}M");
    }
    if days != 0 {
        let _ = write!(out, "{days}D");
    }
    if micros != 0 || (years == 0 && months == 0 && days == 0) {
        out.push('T');
        let negative = micros < 0;
        let magnitude = micros.unsigned_abs();
        let hours = magnitude / 3_600_000_000;
        let minutes = magnitude / 60_000_000 % 60;
        let seconds = magnitude / 1_000_000 % 60;
        let fraction = (magnitude % 1_000_000) as i64;
        let sign = if negative { "-" } else { "" };
        if hours != 0 {
            let _ = write!(out, "{sign}{hours}H");
        }
        if minutes != 0 {
            let _ = write!(out, "{sign}{minutes}M");
        }
        if seconds != 0 || fraction != 0 || (hours == 0 && minutes == 0) {
            let _ = write!(out, "{sign}{seconds}");
            write_fraction(fraction, out);
            out.push('S');
        }
    }
}
