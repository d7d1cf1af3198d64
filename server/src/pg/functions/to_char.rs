//! `to_char(timestamp | timestamptz | date, template)` with Postgres' template patterns
//! (`YYYY-MM-DD HH24:MI:SS`, `Mon`, `Day`, `FM`...), where DataFusion's own `to_char` reads
//! chrono's `%Y-%m-%d` and prints a Postgres template back unchanged.

use std::sync::Arc;

use chrono::{Datelike, NaiveDateTime, Timelike};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, TimeUnit, TimestampMicrosecondType};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// The longest template accepted: each row's text is a few times its template's length, so a
/// bound on the template bounds a batch's output.
const MAX_TEMPLATE: usize = 4096;

pub(crate) fn register(ctx: &SessionContext) {
    ctx.register_udf(ScalarUDF::new_from_impl(ToChar {
        signature: Signature::any(2, Volatility::Immutable),
    }));
    // DataFusion's to_char stays registered under its alias: a session state rebuilt from the
    // registry would register it again, under both names, over this one.
    ctx.deregister_udf("date_format");
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ToChar {
    signature: Signature,
}

impl ScalarUDFImpl for ToChar {
    fn name(&self) -> &str {
        "to_char"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match &args[0] {
            DataType::Timestamp(_, _) | DataType::Date32 | DataType::Date64 | DataType::Null => {
                Ok(DataType::Utf8)
            }
            other => Err(DataFusionError::NotImplemented(format!(
                "to_char of {other} (Eddy formats dates, timestamps and timestamptz)"
            ))),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let values = args.args[0].clone().into_array(rows)?;
        let templates = args.args[1].clone().into_array(rows)?;
        let templates = cast(&templates, &DataType::Utf8)?;
        let templates = templates.as_string::<i32>();
        if let Some(long) = templates.iter().flatten().find(|t| t.len() > MAX_TEMPLATE) {
            return Err(DataFusionError::External(Box::new(
                crate::error::ValueTooLarge(format!(
                    "to_char's template is {} bytes, more than the {MAX_TEMPLATE} it accepts",
                    long.len()
                )),
            )));
        }
        let micros = cast(&values, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
        let micros = micros.as_primitive::<TimestampMicrosecondType>();
        // A constant template (the usual case) is read once.
        let constant = (templates.len() > 0 && templates.is_valid(0))
            .then(|| parse_template(templates.value(0)));
        let same = |i: usize| templates.is_valid(i) && templates.value(i) == templates.value(0);
        let out: StringArray = (0..rows)
            .map(|i| {
                if micros.is_null(i) || templates.is_null(i) {
                    return None;
                }
                let time = chrono::DateTime::from_timestamp_micros(micros.value(i))?.naive_utc();
                Some(match &constant {
                    Some(parts) if same(i) => render(parts, &time),
                    _ => render(&parse_template(templates.value(i)), &time),
                })
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out) as ArrayRef))
    }
}

/// One piece of a template.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Part {
    Literal(String),
    /// A pattern, its case as written (for names), and whether `FM` came before it.
    Field(Field, Case, bool),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Field {
    Year4,
    Year3,
    Year2,
    Year1,
    Month,
    MonthName,
    MonthAbbrev,
    Day,
    DayOfYear,
    DayOfWeek,
    DayName,
    DayAbbrev,
    Hour24,
    Hour12,
    Minute,
    Second,
    Millis,
    Micros,
    Meridiem,
    MeridiemDots,
    Quarter,
    IsoWeek,
    Week,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Case {
    Upper,
    Capital,
    Lower,
}

/// Patterns, longest first so that `HH24` wins over `HH` and `MONTH` over `MON`.
const PATTERNS: &[(&str, Field)] = &[
    ("HH24", Field::Hour24),
    ("HH12", Field::Hour12),
    ("MONTH", Field::MonthName),
    ("A.M.", Field::MeridiemDots),
    ("P.M.", Field::MeridiemDots),
    ("YYYY", Field::Year4),
    ("YYY", Field::Year3),
    ("MON", Field::MonthAbbrev),
    ("DAY", Field::DayName),
    ("DDD", Field::DayOfYear),
    ("HH", Field::Hour12),
    ("MI", Field::Minute),
    ("SS", Field::Second),
    ("MS", Field::Millis),
    ("US", Field::Micros),
    ("YY", Field::Year2),
    ("MM", Field::Month),
    ("DD", Field::Day),
    ("DY", Field::DayAbbrev),
    ("AM", Field::Meridiem),
    ("PM", Field::Meridiem),
    ("IW", Field::IsoWeek),
    ("WW", Field::Week),
    ("Y", Field::Year1),
    ("D", Field::DayOfWeek),
    ("Q", Field::Quarter),
];

pub(crate) fn parse_template(template: &str) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut rest = template;
    let mut fill_mode = false;
    while let Some(c) = rest.chars().next() {
        if c == '"' {
            // Quoted text is copied as it is; a backslash escapes a quote inside it.
            let mut chars = rest[1..].char_indices();
            let mut end = rest.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            literal.push(escaped);
                        }
                    }
                    '"' => {
                        end = i + 2;
                        break;
                    }
                    c => literal.push(c),
                }
            }
            rest = &rest[end.min(rest.len())..];
            continue;
        }
        let upper = rest.get(..2).map(str::to_ascii_uppercase);
        if upper.as_deref() == Some("FM") {
            fill_mode = true;
            rest = &rest[2..];
            continue;
        }
        let found = PATTERNS.iter().find(|(pattern, _)| {
            rest.get(..pattern.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(pattern))
        });
        match found {
            Some((pattern, field)) => {
                if !literal.is_empty() {
                    parts.push(Part::Literal(std::mem::take(&mut literal)));
                }
                let written = &rest[..pattern.len()];
                parts.push(Part::Field(*field, case_of(written), fill_mode));
                fill_mode = false;
                rest = &rest[pattern.len()..];
            }
            None => {
                literal.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    if !literal.is_empty() {
        parts.push(Part::Literal(literal));
    }
    parts
}

fn case_of(written: &str) -> Case {
    let mut letters = written.chars().filter(char::is_ascii_alphabetic);
    match (letters.next(), letters.next()) {
        (Some(first), Some(second)) if first.is_ascii_uppercase() => {
            if second.is_ascii_uppercase() {
                Case::Upper
            } else {
                Case::Capital
            }
        }
        (Some(first), None) if first.is_ascii_uppercase() => Case::Upper,
        _ => Case::Lower,
    }
}

pub(crate) const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
pub(crate) const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

fn render(parts: &[Part], time: &NaiveDateTime) -> String {
    let mut out = String::new();
    for part in parts {
        match part {
            Part::Literal(text) => out.push_str(text),
            Part::Field(field, case, fill) => field_text(*field, *case, *fill, time, &mut out),
        }
    }
    out
}

fn field_text(field: Field, case: Case, fill: bool, t: &NaiveDateTime, out: &mut String) {
    let number = |out: &mut String, value: i64, width: usize| {
        if fill {
            out.push_str(&value.to_string());
        } else {
            out.push_str(&format!("{value:0width$}"));
        }
    };
    // Names are padded to the longest name (9 letters), as Postgres does without FM.
    let name = |out: &mut String, text: &str, pad: usize| {
        let text = match case {
            Case::Upper => text.to_uppercase(),
            Case::Capital => text.to_string(),
            Case::Lower => text.to_lowercase(),
        };
        if fill {
            out.push_str(&text);
        } else {
            out.push_str(&format!("{text:<pad$}"));
        }
    };
    let hour12 = match t.hour() % 12 {
        0 => 12,
        h => h,
    };
    let month = t.month0() as usize;
    let weekday = t.weekday().num_days_from_sunday() as usize;
    let year = t.year() as i64;
    match field {
        Field::Year4 => number(out, year, 4),
        Field::Year3 => number(out, year % 1000, 3),
        Field::Year2 => number(out, year % 100, 2),
        Field::Year1 => number(out, year % 10, 1),
        Field::Month => number(out, month as i64 + 1, 2),
        Field::MonthName => name(out, MONTHS[month], 9),
        Field::MonthAbbrev => name(out, &MONTHS[month][..3], 3),
        Field::Day => number(out, t.day() as i64, 2),
        Field::DayOfYear => number(out, t.ordinal() as i64, 3),
        Field::DayOfWeek => number(out, weekday as i64 + 1, 1),
        Field::DayName => name(out, DAYS[weekday], 9),
        Field::DayAbbrev => name(out, &DAYS[weekday][..3], 3),
        Field::Hour24 => number(out, t.hour() as i64, 2),
        Field::Hour12 => number(out, hour12 as i64, 2),
        Field::Minute => number(out, t.minute() as i64, 2),
        Field::Second => number(out, t.second() as i64, 2),
        Field::Millis => number(out, (t.nanosecond() / 1_000_000) as i64, 3),
        Field::Micros => number(out, (t.nanosecond() / 1_000) as i64, 6),
        Field::Meridiem | Field::MeridiemDots => {
            let pm = t.hour() >= 12;
            let text = match (field == Field::MeridiemDots, pm) {
                (false, false) => "AM",
                (false, true) => "PM",
                (true, false) => "A.M.",
                (true, true) => "P.M.",
            };
            out.push_str(&if case == Case::Lower {
                text.to_lowercase()
            } else {
                text.to_string()
            });
        }
        Field::Quarter => number(out, month as i64 / 3 + 1, 1),
        Field::IsoWeek => number(out, t.iso_week().week() as i64, 2),
        Field::Week => number(out, (t.ordinal0() / 7 + 1) as i64, 2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(template: &str, time: &str) -> String {
        let time = NaiveDateTime::parse_from_str(time, "%Y-%m-%d %H:%M:%S%.f").unwrap();
        render(&parse_template(template), &time)
    }

    // Expected texts are what PostgreSQL 15 prints for the same template and timestamp.
    #[test]
    fn formats_as_postgres_does() {
        let t = "2026-03-05 14:07:09.123456";
        assert_eq!(format("YYYY-MM-DD", t), "2026-03-05");
        assert_eq!(format("yyyy-MM-dd", t), "2026-03-05");
        assert_eq!(format("HH24:MI:SS.MS", t), "14:07:09.123");
        assert_eq!(format("HH:MI AM", t), "02:07 PM");
        assert_eq!(format("HH12:MI a.m.", t), "02:07 p.m.");
        assert_eq!(format("US", t), "123456");
        assert_eq!(
            format("Month|Mon|MONTH|month", t),
            "March    |Mar|MARCH    |march    "
        );
        assert_eq!(format("FMMonth FMDD, YYYY", t), "March 5, 2026");
        assert_eq!(format("Day Dy D", t), "Thursday  Thu 5");
        assert_eq!(format("DDD Q IW", t), "064 1 10");
        assert_eq!(format("\"day\" DD \"of\" Mon", t), "day 05 of Mar");
        assert_eq!(format("YYYY\"Q\"Q WW", t), "2026Q1 10");
        assert_eq!(format("HH:mm", t), "02:03");
        assert_eq!(format("HH12", "2026-03-05 00:30:00.0"), "12");
    }
}
