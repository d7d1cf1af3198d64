//! Text read as a `timestamp` or `timestamptz` in Postgres' forms. Arrow's parser wants
//! seconds (`'2026-01-01 00:00'` was refused), knows no `epoch`, `today` or ` BC`, reads
//! `24:00:00` and `+05:30:15` as errors, and applies an offset to a `timestamp` (Postgres
//! ignores it there). After type coercion, each cast of text to a timestamp reads the text
//! here; a `timestamptz` written without an offset is in the session's `TimeZone`
//! ([`crate::pg::types::session_time_zone`]), as in Postgres.

use std::sync::Arc;

use chrono::{Duration, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone, Utc};
use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{ArrayRef, AsArray, TimestampMicrosecondArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::ServerError;

/// Eddy's `timestamptz`: a UTC instant.
pub const UTC: &str = "+00:00";

/// `eddy_timestamp_in(text, zone)`: a `timestamp` when `zone` is NULL, else a `timestamptz`
/// whose text without an offset is local time in `zone`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TimestampIn {
    signature: Signature,
}

impl Default for TimestampIn {
    fn default() -> Self {
        Self {
            signature: Signature::any(2, Volatility::Stable),
        }
    }
}

impl ScalarUDFImpl for TimestampIn {
    fn name(&self) -> &str {
        "eddy_timestamp_in"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Timestamp(TimeUnit::Microsecond, None))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let zoned = args.arg_fields[1].data_type() != &DataType::Null;
        let data_type = DataType::Timestamp(TimeUnit::Microsecond, zoned.then(|| UTC.into()));
        Ok(Arc::new(Field::new(self.name(), data_type, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let zone = match &args.args[1] {
            ColumnarValue::Scalar(zone) if zone.is_null() => None,
            ColumnarValue::Scalar(zone) => {
                let name = zone.try_as_str().flatten().unwrap_or(UTC);
                Some(crate::pg::types::session_time_zone::zone_named(
                    name, false,
                )?)
            }
            ColumnarValue::Array(_) => {
                return Err(ServerError::new("0A000", "the zone must be a constant").into())
            }
        };
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let texts = args.args[0].to_array(if scalar { 1 } else { args.number_rows })?;
        let texts = datafusion::arrow::compute::cast(&texts, &DataType::Utf8)?;
        let micros = texts
            .as_string::<i32>()
            .iter()
            .map(|text| {
                text.map(|text| parse_timestamp(text, zone.as_ref()))
                    .transpose()
            })
            .collect::<Result<TimestampMicrosecondArray, ServerError>>()?;
        let micros: ArrayRef = Arc::new(match zone {
            Some(_) => micros.with_timezone(UTC),
            None => micros,
        });
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&micros, 0)?)
        } else {
            ColumnarValue::Array(micros)
        })
    }
}

/// Microseconds since 1970 of `text`: local time in `zone` (a `timestamptz`) unless the text
/// gives its own offset or zone; wall-clock time when `zone` is None (a `timestamp`, whose
/// text's offset Postgres ignores).
pub fn parse_timestamp(text: &str, zone: Option<&Tz>) -> Result<i64, ServerError> {
    let type_name = match zone {
        Some(_) => "timestamp with time zone",
        None => "timestamp",
    };
    let syntax = || {
        ServerError::new(
            "22007",
            format!("invalid input syntax for type {type_name}: \"{text}\""),
        )
    };
    let range = || {
        ServerError::new(
            "22008",
            format!("date/time field value out of range: \"{text}\""),
        )
    };
    let trimmed = text.trim();
    if let Some(local) = special_value(trimmed, zone)? {
        return Ok(local);
    }
    let mut rest = Cursor(trimmed);
    let date = rest.date().ok_or_else(syntax)?;
    let time = if rest.separator() {
        rest.time().ok_or_else(syntax)?
    } else {
        Clock::default()
    };
    let given_zone = rest.zone().map_err(|_| syntax())?;
    let before_christ = rest.era().ok_or_else(syntax)?;
    if !rest.0.trim().is_empty() {
        return Err(syntax());
    }
    let (year, month, day) = date;
    let year = if before_christ { 1 - year } else { year };
    let date = NaiveDate::from_ymd_opt(year, month, day).ok_or_else(range)?;
    let wall = time.to_naive(date).ok_or_else(range)?;
    let Some(zone) = zone else {
        return Ok(wall.and_utc().timestamp_micros());
    };
    let instant = match given_zone {
        Some(GivenZone::Offset(seconds)) => wall - Duration::seconds(i64::from(seconds)),
        Some(GivenZone::Named(name)) => {
            let named = crate::pg::types::session_time_zone::zone_named(&name, false)?;
            local_to_utc(&named, &wall)
        }
        None => local_to_utc(zone, &wall),
    };
    Ok(instant.and_utc().timestamp_micros())
}

/// The UTC time of wall-clock time `wall` in `zone`: the earlier of two in a repeated hour,
/// and in a skipped hour the time as if the offset before it still held (as Postgres does).
pub fn local_to_utc(zone: &Tz, wall: &NaiveDateTime) -> NaiveDateTime {
    match zone.from_local_datetime(wall).earliest() {
        Some(local) => local.naive_utc(),
        None => {
            let before = *wall - Duration::hours(3);
            let offset = zone
                .offset_from_utc_datetime(&before)
                .fix()
                .local_minus_utc();
            *wall - Duration::seconds(i64::from(offset))
        }
    }
}

/// `epoch`, `now`, `today`, `tomorrow`, `yesterday`; `infinity` cannot be held.
fn special_value(text: &str, zone: Option<&Tz>) -> Result<Option<i64>, ServerError> {
    let now = Utc::now();
    let midnight = |days: i64| {
        let today = match zone {
            Some(zone) => zone.from_utc_datetime(&now.naive_utc()).date_naive(),
            None => now.date_naive(),
        };
        let wall = (today + Duration::days(days)).and_time(NaiveTime::MIN);
        match zone {
            Some(zone) => local_to_utc(zone, &wall),
            None => wall,
        }
        .and_utc()
        .timestamp_micros()
    };
    Ok(Some(match text.to_ascii_lowercase().as_str() {
        "epoch" => 0,
        "now" => match zone {
            Some(_) => now.timestamp_micros(),
            None => now.naive_utc().and_utc().timestamp_micros(),
        },
        "today" => midnight(0),
        "tomorrow" => midnight(1),
        "yesterday" => midnight(-1),
        "infinity" | "+infinity" | "-infinity" => {
            return Err(ServerError::not_supported(
                "infinite timestamps are not supported",
            ))
        }
        _ => return Ok(None),
    }))
}

/// A time of day as written, before it is checked.
#[derive(Default)]
struct Clock {
    hour: u32,
    minute: u32,
    second: u32,
    micros: u32,
}

impl Clock {
    /// Hour 24 is midnight at the end of the day; second 60 is the next minute's first.
    fn to_naive(&self, date: NaiveDate) -> Option<NaiveDateTime> {
        if self.hour == 24 && self.minute == 0 && self.second == 0 && self.micros == 0 {
            return Some(date.succ_opt()?.and_time(NaiveTime::MIN));
        }
        if self.hour > 23 || self.minute > 59 || self.second > 60 {
            return None;
        }
        let time = NaiveTime::from_hms_micro_opt(self.hour, self.minute, 0, 0)?;
        Some(
            date.and_time(time)
                + Duration::seconds(i64::from(self.second))
                + Duration::microseconds(i64::from(self.micros)),
        )
    }
}

enum GivenZone {
    /// Seconds east of UTC.
    Offset(i32),
    Named(String),
}

/// What is left of the text to read.
struct Cursor<'a>(&'a str);

impl<'a> Cursor<'a> {
    fn digits(&mut self, max: usize) -> Option<&'a str> {
        let end = self
            .0
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(self.0.len())
            .min(max);
        let text: &'a str = self.0;
        (end > 0).then(|| {
            let (digits, rest) = text.split_at(end);
            self.0 = rest;
            digits
        })
    }

    fn eat(&mut self, c: char) -> bool {
        match self.0.strip_prefix(c) {
            Some(rest) => {
                self.0 = rest;
                true
            }
            None => false,
        }
    }

    /// `YYYY-MM-DD` (months and days of one digit too) or `YYYYMMDD`.
    fn date(&mut self) -> Option<(i32, u32, u32)> {
        let first = self.digits(9)?;
        if first.len() == 8 && !self.0.starts_with('-') {
            let (y, md) = first.split_at(4);
            let (m, d) = md.split_at(2);
            return Some((y.parse().ok()?, m.parse().ok()?, d.parse().ok()?));
        }
        let year = first.parse().ok()?;
        if !self.eat('-') {
            return None;
        }
        let month = self.digits(2)?.parse().ok()?;
        if !self.eat('-') {
            return None;
        }
        let day = self.digits(2)?.parse().ok()?;
        Some((year, month, day))
    }

    /// The `T` or spaces between a date and its time, when a time follows.
    fn separator(&mut self) -> bool {
        let rest = self.0;
        let after = rest
            .strip_prefix(['T', 't'])
            .unwrap_or_else(|| rest.trim_start());
        if after.starts_with(|c: char| c.is_ascii_digit()) {
            self.0 = after;
            true
        } else {
            false
        }
    }

    /// `HH:MM[:SS[.ffffff]]` or `HHMMSS[.ffffff]`.
    fn time(&mut self) -> Option<Clock> {
        let mut clock = Clock::default();
        let hour = self.digits(6)?;
        if hour.len() == 6 {
            clock.hour = hour[0..2].parse().ok()?;
            clock.minute = hour[2..4].parse().ok()?;
            clock.second = hour[4..6].parse().ok()?;
        } else {
            clock.hour = hour.parse().ok()?;
            if !self.eat(':') {
                return None;
            }
            clock.minute = self.digits(2)?.parse().ok()?;
            if self.eat(':') {
                clock.second = self.digits(2)?.parse().ok()?;
            }
        }
        if self.eat('.') {
            // Rounded to the microsecond as Postgres rounds it: through a double.
            let fraction = self.digits(usize::MAX).unwrap_or("0");
            let fraction: f64 = format!("0.{fraction}").parse().ok()?;
            let micros = (fraction * 1e6).round_ties_even() as u32;
            if micros >= 1_000_000 {
                clock.second += 1;
            } else {
                clock.micros = micros;
            }
        }
        Some(clock)
    }

    /// `Z`, `+HH`, `+HH:MM`, `+HHMM`, `+HH:MM:SS`, or a zone's name after a space.
    fn zone(&mut self) -> Result<Option<GivenZone>, ()> {
        let rest = self.0.trim_start();
        if let Some(after) = rest.strip_prefix(['Z', 'z']) {
            if !after.starts_with(|c: char| c.is_ascii_alphabetic()) {
                self.0 = after;
                return Ok(Some(GivenZone::Offset(0)));
            }
        }
        if let Some(sign) = rest.chars().next().filter(|c| *c == '+' || *c == '-') {
            self.0 = &rest[1..];
            let first = self.digits(6).ok_or(())?;
            let (hours, mut minutes, mut seconds) = match first.len() {
                1 | 2 => (first, "0", "0"),
                4 => (&first[0..2], &first[2..4], "0"),
                6 => (&first[0..2], &first[2..4], &first[4..6]),
                _ => return Err(()),
            };
            if first.len() <= 2 && self.eat(':') {
                minutes = self.digits(2).ok_or(())?;
                if self.eat(':') {
                    seconds = self.digits(2).ok_or(())?;
                }
            }
            let parse = |s: &str| s.parse::<i32>().map_err(|_| ());
            let (h, m, s) = (parse(hours)?, parse(minutes)?, parse(seconds)?);
            if h > 15 || m > 59 || s > 59 {
                return Err(());
            }
            let total = h * 3600 + m * 60 + s;
            return Ok(Some(GivenZone::Offset(if sign == '-' {
                -total
            } else {
                total
            })));
        }
        let word_end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
        let word = &rest[..word_end];
        if word.is_empty() || word.eq_ignore_ascii_case("bc") || word.eq_ignore_ascii_case("ad") {
            return Ok(None);
        }
        if !word.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return Err(());
        }
        self.0 = &rest[word_end..];
        Ok(Some(GivenZone::Named(word.to_string())))
    }

    /// ` BC` (true) or ` AD` (false) or nothing; None when something else follows.
    fn era(&mut self) -> Option<bool> {
        let rest = self.0.trim_start();
        if rest.is_empty() {
            self.0 = rest;
            return Some(false);
        }
        let (word, after) = rest.split_at(rest.len().min(2));
        let bc = word.eq_ignore_ascii_case("bc");
        if bc || word.eq_ignore_ascii_case("ad") {
            self.0 = after;
            return Some(bc);
        }
        None
    }
}

/// The instant as text in the ISO form, for error messages and tests.
#[cfg(test)]
fn utc_text(micros: i64) -> String {
    chrono::DateTime::from_timestamp_micros(micros)
        .map(|t| t.naive_utc().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn naive(text: &str) -> Result<String, String> {
        parse_timestamp(text, None)
            .map(utc_text)
            .map_err(|e| e.to_string())
    }

    fn zoned(text: &str, zone: &str) -> Result<String, String> {
        parse_timestamp(text, Some(&Tz::from_str(zone).unwrap()))
            .map(utc_text)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn reads_postgres_timestamp_forms() {
        assert_eq!(naive("2026-01-01 00:00").unwrap(), "2026-01-01 00:00:00");
        assert_eq!(naive(" 2026-1-5T10:11:12 ").unwrap(), "2026-01-05 10:11:12");
        assert_eq!(naive("2026-01-01").unwrap(), "2026-01-01 00:00:00");
        assert_eq!(naive("20260101 101112").unwrap(), "2026-01-01 10:11:12");
        assert_eq!(
            naive("2026-01-01 10:00:00.123456789").unwrap(),
            "2026-01-01 10:00:00.123457"
        );
        // 0.1234565 is a little under it as a double.
        assert_eq!(
            naive("2026-01-01 10:00:00.1234565").unwrap(),
            "2026-01-01 10:00:00.123456"
        );
        assert_eq!(
            naive("2026-01-01 23:59:59.9999996").unwrap(),
            "2026-01-02 00:00:00"
        );
        assert_eq!(naive("2026-01-01 24:00:00").unwrap(), "2026-01-02 00:00:00");
        // A timestamp ignores the offset its text gives, as Postgres does.
        assert_eq!(
            naive("2026-01-01 10:00:00+02").unwrap(),
            "2026-01-01 10:00:00"
        );
        assert_eq!(
            naive("0044-03-15 12:00:00 BC").unwrap(),
            "-0043-03-15 12:00:00"
        );
        assert_eq!(naive("epoch").unwrap(), "1970-01-01 00:00:00");
    }

    #[test]
    fn a_timestamptz_without_offset_is_in_the_given_zone() {
        let ny = "America/New_York";
        assert_eq!(
            zoned("2026-01-01 03:00", ny).unwrap(),
            "2026-01-01 08:00:00"
        );
        assert_eq!(
            zoned("2026-07-01 03:00", ny).unwrap(),
            "2026-07-01 07:00:00"
        );
        assert_eq!(
            zoned("2026-01-01 10:00:00+02", ny).unwrap(),
            "2026-01-01 08:00:00"
        );
        assert_eq!(
            zoned("2026-01-01 10:00:00Z", ny).unwrap(),
            "2026-01-01 10:00:00"
        );
        assert_eq!(
            zoned("2026-01-01 10:00:00+05:30:15", UTC).unwrap(),
            "2026-01-01 04:29:45"
        );
        assert_eq!(
            zoned("2026-01-01 10:00:00 -0330", UTC).unwrap(),
            "2026-01-01 13:30:00"
        );
        assert_eq!(
            zoned("2026-01-01 10:00:00 America/New_York", UTC).unwrap(),
            "2026-01-01 15:00:00"
        );
        assert_eq!(
            zoned("2026-01-01 10:00:00 UTC", ny).unwrap(),
            "2026-01-01 10:00:00"
        );
        // 02:30 does not exist on 2026-03-08 in New York: read with the offset before it.
        assert_eq!(
            zoned("2026-03-08 02:30", ny).unwrap(),
            "2026-03-08 07:30:00"
        );
    }

    #[test]
    fn bad_text_is_an_error_with_postgres_code() {
        let code = |r: Result<i64, ServerError>| r.unwrap_err().code.to_string();
        assert_eq!(code(parse_timestamp("garbage", None)), "22007");
        assert_eq!(code(parse_timestamp("2026-01-01 10", None)), "22007");
        assert_eq!(
            code(parse_timestamp("2026-01-01 10:00 xyz zz", None)),
            "22007"
        );
        assert_eq!(code(parse_timestamp("2026-02-30 00:00:00", None)), "22008");
        assert_eq!(code(parse_timestamp("2026-01-01 25:00:00", None)), "22008");
        assert_eq!(code(parse_timestamp("infinity", None)), "0A000");
        let ny = Tz::from_str("America/New_York").unwrap();
        assert_eq!(
            code(parse_timestamp("2026-01-01 10:00 Mars/Olympus", Some(&ny))),
            "22023"
        );
    }
}
