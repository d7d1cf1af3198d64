//! Values in Postgres' own text forms, where the wire library's differ: floats in their
//! shortest form (`21`, `1e+15`, `Infinity`), timestamps and times without trailing zeros
//! (`2026-01-01 00:00:00`, `12:00:00.5`), `timestamptz` in the session's TimeZone with its
//! offset (`2025-12-31 19:00:00-05`), intervals as `1 day 02:03:04`, and unconstrained
//! `NUMERIC` without the padding of its fixed scale.
//!
//! Each function formats a whole column, returning `None` when the column's type is one the
//! wire library already prints as Postgres does.

use std::str::FromStr;

use chrono::{DateTime, Datelike, NaiveDateTime, Offset, TimeZone, Timelike, Utc};
use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{
    DataType, Decimal128Type, DecimalType, DurationMicrosecondType, DurationMillisecondType,
    DurationNanosecondType, DurationSecondType, Field, Float16Type, Float32Type, Float64Type,
    IntervalDayTimeType, IntervalMonthDayNanoType, IntervalUnit, IntervalYearMonthType,
    Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};
use pgwire::types::format::FormatOptions;

/// The precision and scale DataFusion gives a `NUMERIC` declared without them.
pub(crate) const UNCONSTRAINED_NUMERIC: (u8, i8) = (38, 10);

/// The column as Postgres prints it, or `None` when the wire library's text is right.
/// `field` is the column's (its metadata tells how a decimal prints).
pub fn column_text(
    array: &ArrayRef,
    field: &Field,
    options: &FormatOptions,
) -> Option<Vec<Option<String>>> {
    let iso = options.date_style.to_ascii_uppercase().starts_with("ISO");
    let postgres_intervals = options.interval_style.eq_ignore_ascii_case("postgres");
    let extra_digits = options.extra_float_digits;
    let values: Box<dyn Fn(usize) -> String + '_> = match array.data_type() {
        DataType::Float64 => {
            let a = array.as_primitive::<Float64Type>();
            Box::new(move |i| float8_text(a.value(i), extra_digits))
        }
        DataType::Float32 => {
            let a = array.as_primitive::<Float32Type>();
            Box::new(move |i| float4_text(a.value(i), extra_digits))
        }
        DataType::Float16 => {
            let a = array.as_primitive::<Float16Type>();
            Box::new(move |i| float4_text(a.value(i).to_f32(), extra_digits))
        }
        DataType::Decimal128(precision, scale) => {
            let a = array.as_primitive::<Decimal128Type>();
            let (precision, scale) = (*precision, *scale);
            let form = NumericForm::of(field);
            Box::new(move |i| numeric_text(a.value(i), precision, scale, form))
        }
        DataType::Timestamp(unit, zone) if iso => {
            let micros = timestamp_micros(array, *unit)?;
            match zone {
                None => Box::new(move |i| timestamp_text(micros(i), None)),
                Some(_) => {
                    let session = session_zone(&options.time_zone);
                    Box::new(move |i| timestamp_text(micros(i), Some(&session)))
                }
            }
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            let a = array.as_primitive::<Time64MicrosecondType>();
            Box::new(move |i| time_text(a.value(i)))
        }
        DataType::Time64(TimeUnit::Nanosecond) => {
            let a = array.as_primitive::<Time64NanosecondType>();
            Box::new(move |i| time_text(a.value(i) / 1_000))
        }
        DataType::Time32(TimeUnit::Second) => {
            let a = array.as_primitive::<Time32SecondType>();
            Box::new(move |i| time_text(a.value(i) as i64 * 1_000_000))
        }
        DataType::Time32(TimeUnit::Millisecond) => {
            let a = array.as_primitive::<Time32MillisecondType>();
            Box::new(move |i| time_text(a.value(i) as i64 * 1_000))
        }
        DataType::Interval(unit) if postgres_intervals => match unit {
            IntervalUnit::MonthDayNano => {
                let a = array.as_primitive::<IntervalMonthDayNanoType>();
                Box::new(move |i| {
                    let v = a.value(i);
                    interval_text(v.months as i64, v.days as i64, v.nanoseconds / 1_000)
                })
            }
            IntervalUnit::DayTime => {
                let a = array.as_primitive::<IntervalDayTimeType>();
                Box::new(move |i| {
                    let v = a.value(i);
                    interval_text(0, v.days as i64, v.milliseconds as i64 * 1_000)
                })
            }
            IntervalUnit::YearMonth => {
                let a = array.as_primitive::<IntervalYearMonthType>();
                Box::new(move |i| interval_text(a.value(i) as i64, 0, 0))
            }
        },
        DataType::Duration(unit) if postgres_intervals => {
            let micros: Box<dyn Fn(usize) -> i64> = match unit {
                TimeUnit::Second => {
                    let a = array.as_primitive::<DurationSecondType>();
                    Box::new(move |i| a.value(i).saturating_mul(1_000_000))
                }
                TimeUnit::Millisecond => {
                    let a = array.as_primitive::<DurationMillisecondType>();
                    Box::new(move |i| a.value(i).saturating_mul(1_000))
                }
                TimeUnit::Microsecond => {
                    let a = array.as_primitive::<DurationMicrosecondType>();
                    Box::new(move |i| a.value(i))
                }
                TimeUnit::Nanosecond => {
                    let a = array.as_primitive::<DurationNanosecondType>();
                    Box::new(move |i| a.value(i) / 1_000)
                }
            };
            Box::new(move |i| interval_text(0, 0, micros(i)))
        }
        _ => return None,
    };
    Some(
        (0..array.len())
            .map(|i| (!array.is_null(i)).then(|| values(i)))
            .collect(),
    )
}

/// Whether a decimal type is the one an unconstrained `NUMERIC` gets (or arithmetic on it,
/// which keeps precision 38 and a scale of 10 or more).
pub fn unconstrained(precision: u8, scale: i8) -> bool {
    precision == UNCONSTRAINED_NUMERIC.0 && scale >= UNCONSTRAINED_NUMERIC.1
}

/// How a decimal column's values print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumericForm {
    /// At the column's scale, as a declared `numeric(p, s)`.
    Declared,
    /// Without the trailing zeros of the column's scale: an unconstrained `numeric`, whose
    /// values' own scales Arrow does not keep (`21.0000000000` is `21`, as Postgres prints
    /// `21::numeric`).
    Trimmed,
    /// With the digits Postgres gives a quotient of the value's size, and at least
    /// `least_scale` ([`crate::pg::types::numeric_division::quotient_display_scale`]).
    Quotient { least_scale: i32 },
}

impl NumericForm {
    /// The form of a decimal `field`'s values.
    pub fn of(field: &Field) -> Self {
        if let Some(least_scale) = crate::pg::types::numeric_division::quotient_least_scale(field) {
            return Self::Quotient { least_scale };
        }
        match field.data_type() {
            DataType::Decimal128(p, s) if unconstrained(*p, *s) => Self::Trimmed,
            _ => Self::Declared,
        }
    }
}

/// A decimal's text, in `form`.
pub fn numeric_text(value: i128, precision: u8, scale: i8, form: NumericForm) -> String {
    let text = Decimal128Type::format_decimal(value, precision, scale);
    if !text.contains('.') {
        return text;
    }
    match form {
        NumericForm::Declared => text,
        NumericForm::Trimmed => text.trim_end_matches('0').trim_end_matches('.').to_string(),
        NumericForm::Quotient { least_scale } => {
            let shown = crate::pg::types::numeric_division::quotient_display_scale(
                value,
                scale,
                least_scale,
            );
            // The digits left out are zeros: the display scale is at least the value's own.
            let cut = (i32::from(scale) - shown) as usize + usize::from(shown == 0);
            text[..text.len() - cut].to_string()
        }
    }
}

/// `float8` text: the shortest digits that read back as the same value (or, with
/// `extra_float_digits` below 1, 15 + extra significant digits), as Postgres 12+ prints.
pub fn float8_text(value: f64, extra_digits: i8) -> String {
    if let Some(special) = special_float(value.is_nan(), value.is_infinite(), value < 0.0) {
        return special;
    }
    if extra_digits >= 1 {
        render_float(&format!("{value:e}"), 15)
    } else {
        let digits = (15 + extra_digits as i32).max(1);
        render_float(&format!("{:.*e}", (digits - 1) as usize, value), digits)
    }
}

/// `float4` text: as [`float8_text`] with 6 digits (FLT_DIG) in place of 15.
pub fn float4_text(value: f32, extra_digits: i8) -> String {
    if let Some(special) = special_float(value.is_nan(), value.is_infinite(), value < 0.0) {
        return special;
    }
    if extra_digits >= 1 {
        render_float(&format!("{value:e}"), 6)
    } else {
        let digits = (6 + extra_digits as i32).max(1);
        render_float(&format!("{:.*e}", (digits - 1) as usize, value), digits)
    }
}

fn special_float(nan: bool, infinite: bool, negative: bool) -> Option<String> {
    match (nan, infinite, negative) {
        (true, _, _) => Some("NaN".into()),
        (_, true, false) => Some("Infinity".into()),
        (_, true, true) => Some("-Infinity".into()),
        _ => None,
    }
}

/// Renders Rust's scientific form (`-1.2345e-5`) the way C's `%g` does with `precision`:
/// scientific when the exponent is below -4 or at least `precision` (`1e+15`, `1.5e-07`),
/// plain digits otherwise (`21`, `0.0001`), trailing zeros dropped.
fn render_float(scientific: &str, precision: i32) -> String {
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    if exponent < -4 || exponent >= precision {
        let (first, rest) = digits.split_at(1);
        let point = if rest.is_empty() { "" } else { "." };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{sign}{first}{point}{rest}e{exponent_sign}{:02}",
            exponent.abs()
        );
    }
    if exponent < 0 {
        let zeros = "0".repeat((-exponent - 1) as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let integer_digits = exponent as usize + 1;
    if digits.len() <= integer_digits {
        let zeros = "0".repeat(integer_digits - digits.len());
        format!("{sign}{digits}{zeros}")
    } else {
        let (integer, fraction) = digits.split_at(integer_digits);
        format!("{sign}{integer}.{fraction}")
    }
}

/// A timestamp column's values as microseconds since the epoch.
fn timestamp_micros(array: &ArrayRef, unit: TimeUnit) -> Option<Box<dyn Fn(usize) -> i64 + '_>> {
    Some(match unit {
        TimeUnit::Second => {
            let a = array.as_primitive::<TimestampSecondType>();
            Box::new(move |i| a.value(i).saturating_mul(1_000_000))
        }
        TimeUnit::Millisecond => {
            let a = array.as_primitive::<TimestampMillisecondType>();
            Box::new(move |i| a.value(i).saturating_mul(1_000))
        }
        TimeUnit::Microsecond => {
            let a = array.as_primitive::<TimestampMicrosecondType>();
            Box::new(move |i| a.value(i))
        }
        TimeUnit::Nanosecond => {
            let a = array.as_primitive::<TimestampNanosecondType>();
            Box::new(move |i| a.value(i).div_euclid(1_000))
        }
    })
}

/// The session's TimeZone (`Etc/UTC`, `America/New_York`, `+05:30`); UTC when unknown.
pub fn session_zone(name: &str) -> Tz {
    crate::pg::types::session_time_zone::zone_named(name, false)
        .unwrap_or_else(|_| Tz::from_str("+00:00").expect("a fixed offset"))
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff]`, with `+HH[:MM]` in `zone` for a `timestamptz` and ` BC`
/// for years before 1.
pub fn timestamp_text(micros: i64, zone: Option<&Tz>) -> String {
    let Some(utc) = DateTime::<Utc>::from_timestamp_micros(micros) else {
        return micros.to_string();
    };
    match zone {
        None => datetime_text(&utc.naive_utc(), None),
        Some(zone) => {
            let local = zone.from_utc_datetime(&utc.naive_utc());
            let offset = local.offset().fix().local_minus_utc();
            datetime_text(&local.naive_local(), Some(offset))
        }
    }
}

fn datetime_text(value: &NaiveDateTime, offset_seconds: Option<i32>) -> String {
    let year = value.year();
    let (shown_year, era) = if year <= 0 {
        (1 - year, " BC")
    } else {
        (year, "")
    };
    let mut text = format!(
        "{shown_year:04}-{:02}-{:02} {}",
        value.month(),
        value.day(),
        clock_text(
            value.hour() as i64,
            value.minute() as i64,
            value.second() as i64,
            (value.nanosecond() / 1_000) as i64
        )
    );
    if let Some(offset) = offset_seconds {
        let sign = if offset < 0 { '-' } else { '+' };
        let offset = offset.abs();
        text.push_str(&format!("{sign}{:02}", offset / 3600));
        if offset % 3600 != 0 {
            text.push_str(&format!(":{:02}", offset % 3600 / 60));
            if offset % 60 != 0 {
                text.push_str(&format!(":{:02}", offset % 60));
            }
        }
    }
    text.push_str(era);
    text
}

/// `HH:MM:SS` and the fraction of a second without trailing zeros (`.5`), if any.
fn clock_text(hours: i64, minutes: i64, seconds: i64, micros: i64) -> String {
    let mut text = format!("{hours:02}:{minutes:02}:{seconds:02}");
    if micros != 0 {
        let fraction = format!("{micros:06}");
        text.push('.');
        text.push_str(fraction.trim_end_matches('0'));
    }
    text
}

/// A `time` (microseconds since midnight).
pub fn time_text(micros: i64) -> String {
    clock_text(
        micros / 3_600_000_000,
        micros / 60_000_000 % 60,
        micros / 1_000_000 % 60,
        micros % 1_000_000,
    )
}

/// An interval in IntervalStyle `postgres`: `1 year 2 mons 3 days 04:05:06.789`,
/// `-1 days +02:00:00`, `00:00:00` for zero.
pub fn interval_text(months: i64, days: i64, micros: i64) -> String {
    let mut text = String::new();
    let mut negative_before = false;
    for (value, unit) in [(months / 12, "year"), (months % 12, "mon"), (days, "day")] {
        if value == 0 {
            continue;
        }
        if !text.is_empty() {
            text.push(' ');
        }
        if negative_before && value > 0 {
            text.push('+');
        }
        let plural = if value == 1 { "" } else { "s" };
        text.push_str(&format!("{value} {unit}{plural}"));
        negative_before = value < 0;
    }
    if text.is_empty() || micros != 0 {
        if !text.is_empty() {
            text.push(' ');
        }
        if micros < 0 {
            text.push('-');
        } else if negative_before {
            text.push('+');
        }
        let micros = micros.unsigned_abs() as i64;
        text.push_str(&clock_text(
            micros / 3_600_000_000,
            micros / 60_000_000 % 60,
            micros / 1_000_000 % 60,
            micros % 1_000_000,
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    // Every expected value below is what PostgreSQL 15 prints for the same input.

    #[test]
    fn floats_as_postgres_prints_them() {
        let cases = [
            (21.0, "21"),
            (1e15, "1e+15"),
            (1e14, "100000000000000"),
            (123456789012345.6, "123456789012345.6"),
            (0.1, "0.1"),
            (0.0001, "0.0001"),
            (1e-5, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (123456789.125, "123456789.125"),
            (1e100, "1e+100"),
            (-0.0, "-0"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (f64::NAN, "NaN"),
        ];
        for (value, expected) in cases {
            assert_eq!(float8_text(value, 1), expected, "{value}");
        }
        assert_eq!(float4_text(1.25, 1), "1.25");
        assert_eq!(float4_text(16777216.0, 1), "1.6777216e+07");
        assert_eq!(float4_text(123456.7, 1), "123456.7");
        assert_eq!(float4_text(1e6, 1), "1e+06");
        // extra_float_digits = 0: 15 significant digits, %g style.
        assert_eq!(float8_text(0.1 + 0.2, 0), "0.3");
        assert_eq!(float8_text(0.1 + 0.2, 1), "0.30000000000000004");
    }

    #[test]
    fn timestamps_and_times_without_trailing_zeros() {
        let noon_and_a_half = 1_767_268_800_500_000; // 2026-01-01 12:00:00.5 UTC
        assert_eq!(
            timestamp_text(noon_and_a_half, None),
            "2026-01-01 12:00:00.5"
        );
        assert_eq!(
            timestamp_text(1_767_225_600_000_000, None),
            "2026-01-01 00:00:00"
        );
        assert_eq!(time_text(43_200_500_000), "12:00:00.5");
        assert_eq!(time_text(0), "00:00:00");
    }

    #[test]
    fn timestamptz_in_the_session_zone() {
        let midnight = 1_767_225_600_000_000; // 2026-01-01 00:00:00+00
        let utc = session_zone("Etc/UTC");
        assert_eq!(
            timestamp_text(midnight, Some(&utc)),
            "2026-01-01 00:00:00+00"
        );
        let new_york = session_zone("America/New_York");
        assert_eq!(
            timestamp_text(midnight, Some(&new_york)),
            "2025-12-31 19:00:00-05"
        );
        let kolkata = session_zone("Asia/Kolkata");
        assert_eq!(
            timestamp_text(midnight, Some(&kolkata)),
            "2026-01-01 05:30:00+05:30"
        );
    }

    #[test]
    fn intervals_in_postgres_style() {
        let hour = 3_600_000_000;
        assert_eq!(
            interval_text(0, 1, 2 * hour + 3 * 60_000_000 + 4_000_000),
            "1 day 02:03:04"
        );
        assert_eq!(
            interval_text(14, 3, 4 * hour + 5 * 60_000_000 + 6_789_000),
            "1 year 2 mons 3 days 04:05:06.789"
        );
        assert_eq!(interval_text(0, -1, -2 * hour), "-1 days -02:00:00");
        assert_eq!(interval_text(0, 0, 0), "00:00:00");
        assert_eq!(interval_text(0, 0, -1_500_000), "-00:00:01.5");
        assert_eq!(interval_text(0, 0, 25 * hour), "25:00:00");
        assert_eq!(interval_text(1, -1, 0), "1 mon -1 days");
        assert_eq!(interval_text(0, -1, 2 * hour), "-1 days +02:00:00");
    }

    #[test]
    fn unconstrained_numeric_without_padding() {
        assert_eq!(
            numeric_text(210_000_000_000, 38, 10, NumericForm::Trimmed),
            "21"
        );
        assert_eq!(
            numeric_text(15_000_000_000, 38, 10, NumericForm::Trimmed),
            "1.5"
        );
        assert_eq!(numeric_text(150, 10, 2, NumericForm::Declared), "1.50");
    }
}
