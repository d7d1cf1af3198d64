//! Timestamps a source reads as text: epoch milliseconds (all digits) or a date-time, parsed
//! column at a time. The common form (`YYYY-MM-DD HH:MM:SS[.f][Z|±HH:MM]`) is read here
//! without chrono; anything else goes through arrow's parser, which gives the same values.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Int64Array, PrimitiveArray, StringArray,
};
use datafusion::arrow::compute::{cast_with_options, CastOptions};
use datafusion::arrow::datatypes::{
    ArrowTimestampType, DataType, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use datafusion::arrow::error::ArrowError;

/// Text → timestamp: all digits (optionally signed) are epoch milliseconds, anything else is
/// parsed as a date-time; unparseable values become NULL (the caller reports them).
pub fn parse_timestamp_column(
    strings: &StringArray,
    unit: &TimeUnit,
    zone: Option<Arc<str>>,
) -> Result<ArrayRef, ArrowError> {
    let is_millis = |s: &str| {
        let digits = s.strip_prefix('-').unwrap_or(s);
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    };
    if let Some(parsed) = parse_plain_timestamps(strings, unit, &zone) {
        return Ok(parsed);
    }
    let target = DataType::Timestamp(*unit, zone.clone());
    let safe = CastOptions {
        safe: true,
        ..Default::default()
    };
    if strings.iter().flatten().any(is_millis) {
        // Per-row choice between two parsers: build the millis column, cast the rest.
        let millis: Int64Array = strings
            .iter()
            .map(|s| {
                s.filter(|s| is_millis(s))
                    .and_then(|s| s.parse::<i64>().ok())
            })
            .collect();
        let texts: StringArray = strings
            .iter()
            .map(|s| s.filter(|s| !is_millis(s)))
            .collect();
        let from_millis = cast_with_options(
            &cast_with_options(
                &millis,
                &DataType::Timestamp(TimeUnit::Millisecond, zone),
                &safe,
            )?,
            &target,
            &safe,
        )?;
        let from_text = cast_with_options(&texts, &target, &safe)?;
        let choose_millis: BooleanArray = strings
            .iter()
            .map(|s| Some(s.is_some_and(is_millis)))
            .collect();
        return datafusion::arrow::compute::kernels::zip::zip(
            &choose_millis,
            &from_millis,
            &from_text,
        );
    }
    cast_with_options(strings, &target, &safe)
}

/// The common case without chrono: every value a plain date-time that [`plain_timestamp`]
/// reads. `None` when any value is not (epoch millis, other forms, bad values): the caller
/// then takes the general path for the whole column, so results never depend on which path
/// ran.
fn parse_plain_timestamps(
    strings: &StringArray,
    unit: &TimeUnit,
    zone: &Option<Arc<str>>,
) -> Option<ArrayRef> {
    // A value without an offset is in the column's zone; read it here only when that is UTC.
    let naive_is_utc = match zone.as_deref() {
        None => true,
        Some(zone) => matches!(zone, "+00:00" | "UTC"),
    };
    match unit {
        TimeUnit::Second => plain_column::<TimestampSecondType>(strings, naive_is_utc, zone),
        TimeUnit::Millisecond => {
            plain_column::<TimestampMillisecondType>(strings, naive_is_utc, zone)
        }
        TimeUnit::Microsecond => {
            plain_column::<TimestampMicrosecondType>(strings, naive_is_utc, zone)
        }
        TimeUnit::Nanosecond => {
            plain_column::<TimestampNanosecondType>(strings, naive_is_utc, zone)
        }
    }
}

fn plain_column<T: ArrowTimestampType>(
    strings: &StringArray,
    naive_is_utc: bool,
    zone: &Option<Arc<str>>,
) -> Option<ArrayRef> {
    let per_second: i64 = match T::UNIT {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    };
    let mut values = Vec::with_capacity(strings.len());
    let mut last_minute = None;
    for row in 0..strings.len() {
        if strings.is_null(row) {
            values.push(0);
            continue;
        }
        let text = strings.value(row).as_bytes();
        let (seconds, nanos) = plain_timestamp(text, naive_is_utc, &mut last_minute)?;
        let sub = i64::from(nanos) / (1_000_000_000 / per_second);
        values.push(seconds.checked_mul(per_second)?.checked_add(sub)?);
    }
    let array = PrimitiveArray::<T>::new(values.into(), strings.nulls().cloned());
    Some(Arc::new(array.with_timezone_opt(zone.clone())))
}

/// A minute read before: `YYYY-MM-DD?HH:MM` and its seconds since the epoch. Consecutive
/// values mostly share it, and then only the seconds need reading.
struct Minute {
    text: [u8; 16],
    seconds: i64,
}

/// Reads `YYYY-MM-DD[T| ]HH:MM:SS[.f{1,9}][Z|±HH:MM]` as seconds since the epoch (UTC) and
/// nanoseconds, the way arrow's parser does; `None` for anything else or anything arrow might
/// read differently (leap seconds, odd offsets, a value without offset when `naive_is_utc` is
/// false), which the general path then handles.
fn plain_timestamp(
    s: &[u8],
    naive_is_utc: bool,
    last_minute: &mut Option<Minute>,
) -> Option<(i64, u32)> {
    fn digits(s: &[u8]) -> Option<u32> {
        s.iter().try_fold(0u32, |n, &b| {
            b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0'))
        })
    }
    if s.len() < 19 || s[16] != b':' {
        return None;
    }
    let minute = match last_minute {
        Some(minute) if minute.text == s[..16] => minute.seconds,
        _ => {
            if s[4] != b'-' || s[7] != b'-' || !matches!(s[10], b'T' | b't' | b' ') || s[13] != b':'
            {
                return None;
            }
            let year = digits(&s[0..4])?;
            let month = digits(&s[5..7])?;
            let day = digits(&s[8..10])?;
            let hour = digits(&s[11..13])?;
            let minute = digits(&s[14..16])?;
            if !(1..=12).contains(&month)
                || day == 0
                || day > days_in_month(year, month)
                || hour > 23
                || minute > 59
            {
                return None;
            }
            let seconds =
                days_since_epoch(year, month, day) * 86_400 + i64::from(hour * 3600 + minute * 60);
            let text = s[..16].try_into().ok()?;
            *last_minute = Some(Minute { text, seconds });
            seconds
        }
    };
    let second = digits(&s[17..19])?;
    if second > 59 {
        return None;
    }
    let mut rest = &s[19..];
    let mut nanos = 0;
    if let Some(fraction) = rest.strip_prefix(b".") {
        let count = fraction.iter().take_while(|b| b.is_ascii_digit()).count();
        if count == 0 || count > 9 {
            return None;
        }
        nanos = digits(&fraction[..count])? * 10u32.pow(9 - count as u32);
        rest = &fraction[count..];
    }
    let offset = match rest {
        [] if naive_is_utc => 0,
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let hours = digits(&[*h1, *h2])?;
            let minutes = digits(&[*m1, *m2])?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            let offset = i64::from(hours * 3600 + minutes * 60);
            if *sign == b'+' {
                offset
            } else {
                -offset
            }
        }
        _ => return None,
    };
    Some((minute + i64::from(second) - offset, nanos))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a (valid, proleptic Gregorian) date.
fn days_since_epoch(year: u32, month: u32, day: u32) -> i64 {
    // Years counted from March, so that February (and its leap day) ends the year.
    let (year, month) = if month <= 2 {
        (i64::from(year) - 1, i64::from(month) + 9)
    } else {
        (i64::from(year), i64::from(month) - 3)
    };
    let leap_days = year.div_euclid(4) - year.div_euclid(100) + year.div_euclid(400);
    // Days before each month from March: 31, 30, 31, 30, 31 repeating, which (153m + 2) / 5
    // gives.
    let before_month = (153 * month + 2) / 5;
    // 719_468: days from 0000-03-01 to 1970-01-01.
    year * 365 + leap_days + before_month + i64::from(day) - 1 - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;

    fn numbers(timestamps: &ArrayRef) -> Int64Array {
        let numbers = cast_with_options(timestamps, &DataType::Int64, &CastOptions::default());
        numbers.unwrap().as_primitive::<Int64Type>().clone()
    }

    #[test]
    fn the_plain_timestamp_path_agrees_with_arrow() {
        let mut texts = Vec::new();
        for year in [
            "0000", "0001", "0004", "1600", "1899", "1900", "1969", "1970", "2000", "2024", "2100",
            "2262", "9999",
        ] {
            for month in ["00", "01", "02", "03", "04", "12", "13"] {
                for day in ["00", "01", "28", "29", "30", "31", "32"] {
                    for time in ["00:00:00", "23:59:59", "12:34:56", "24:00:00", "23:59:60"] {
                        for separator in ["T", "t", " ", "x"] {
                            for fraction in ["", ".5", ".123", ".123456", ".123456789", "."] {
                                for suffix in
                                    ["", "Z", "z", "+05:30", "-08:00", "+23:59", "+0530", " Z"]
                                {
                                    texts.push(format!(
                                        "{year}-{month}-{day}{separator}{time}{fraction}{suffix}"
                                    ));
                                }
                            }
                        }
                    }
                }
            }
        }
        texts.extend(
            [
                "2024-01-01",
                "2024-01-01T00:00:00.1234567891Z",
                "2024-01-01T00:00:00+24:00",
                "2024-01-01T00:00:00-00:60",
                "2024-01-01T000000",
                " 2024-01-01T00:00:00",
                "+024-01-01T00:00:00",
                "1704067200000",
            ]
            .map(String::from),
        );
        let strings = StringArray::from_iter_values(&texts);
        let safe = CastOptions {
            safe: true,
            ..Default::default()
        };
        let mut quick = 0;
        for unit in [
            TimeUnit::Second,
            TimeUnit::Millisecond,
            TimeUnit::Microsecond,
            TimeUnit::Nanosecond,
        ] {
            for zone in [None, Some(Arc::<str>::from("+00:00"))] {
                let target = DataType::Timestamp(unit, zone.clone());
                let arrow = numbers(&cast_with_options(&strings, &target, &safe).unwrap());
                let mut accepted = Vec::new();
                for (row, text) in texts.iter().enumerate() {
                    let one = StringArray::from(vec![text.as_str()]);
                    let Some(ours) = parse_plain_timestamps(&one, &unit, &zone) else {
                        continue;
                    };
                    assert_eq!(ours.data_type(), &target);
                    let ours = numbers(&ours);
                    assert!(arrow.is_valid(row), "{text} ({unit:?}): arrow refuses it");
                    assert_eq!(ours.value(0), arrow.value(row), "{text} ({unit:?})");
                    accepted.push((text.as_str(), arrow.value(row)));
                }
                // The same values in one column, where neighbours share their minute.
                let column = StringArray::from_iter_values(accepted.iter().map(|(t, _)| t));
                let ours = numbers(&parse_plain_timestamps(&column, &unit, &zone).unwrap());
                for (row, (text, value)) in accepted.iter().enumerate() {
                    assert_eq!(ours.value(row), *value, "{text} ({unit:?}) in a column");
                }
                quick += accepted.len();
            }
        }
        // Most well-formed values take the quick path (so this test compares something).
        assert!(quick > 100_000, "{quick}");
    }
}
