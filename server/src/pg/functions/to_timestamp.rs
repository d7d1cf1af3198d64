//! `to_timestamp(text, template)` and `to_date(text, template)` with Postgres' template
//! patterns (`YYYY-MM-DD HH24:MI:SS`, `DD Mon YYYY`, `HH12:MI AM`...), the same patterns
//! `to_char` prints ([`crate::pg::functions::to_char`]). DataFusion's functions of these names read
//! chrono's `%Y-%m-%d` and refused every Postgres template (`22000`).
//!
//! Each call becomes `CAST(pg_datetime_text(text, template) AS TIMESTAMPTZ)` (or `AS DATE`):
//! the function reads the text by the template, as Postgres does outside its `FX` mode (a
//! separator in the template matches any one separator, or none; spaces before a number are
//! skipped; what is missing is year 1, January, the 1st, midnight), and writes the time it
//! read in ISO form; the cast then reads that as any text is read, in the session's
//! `TimeZone` for a `timestamptz`.

use std::sync::Arc;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use datafusion::arrow::array::{ArrayRef, StringArray};
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result};
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::FunctionRewrite;
use datafusion::logical_expr::{Cast, Expr, ExprSchemable, ScalarUDF};
use datafusion::prelude::SessionContext;

use crate::error::ServerError;
use crate::pg::functions::to_char::{parse_template, Field, Part, DAYS, MONTHS};
use crate::pg::functions::{function, text_arg};

const FUNCTION: &str = "pg_datetime_text";

pub(crate) fn register(ctx: &SessionContext) -> Result<()> {
    ctx.register_udf(datetime_text());
    ctx.state_ref()
        .write()
        .register_function_rewrite(Arc::new(TemplateParsing))
}

fn datetime_text() -> ScalarUDF {
    function(
        FUNCTION,
        &[vec![DataType::Utf8, DataType::Utf8]],
        DataType::Utf8,
        |args: &[ArrayRef], rows| {
            let texts = (0..rows).map(|i| {
                let (Some(text), Some(template)) = (text_arg(&args[0], i), text_arg(&args[1], i))
                else {
                    return Ok(None);
                };
                let parts = parse_template(&template);
                let time = read(&text, &parts)?;
                Ok(Some(time.format("%Y-%m-%d %H:%M:%S%.6f").to_string()))
            });
            Ok(Arc::new(texts.collect::<Result<StringArray>>()?) as ArrayRef)
        },
    )
}

#[derive(Debug)]
struct TemplateParsing;

impl FunctionRewrite for TemplateParsing {
    fn name(&self) -> &str {
        "eddy_to_timestamp_templates"
    }

    fn rewrite(
        &self,
        expr: Expr,
        schema: &DFSchema,
        _config: &ConfigOptions,
    ) -> Result<Transformed<Expr>> {
        let Expr::ScalarFunction(call) = &expr else {
            return Ok(Transformed::no(expr));
        };
        let target = match call.func.name() {
            "to_timestamp" => DataType::Timestamp(
                TimeUnit::Microsecond,
                Some(crate::pg::types::timestamp_input::UTC.into()),
            ),
            "to_date" => DataType::Date32,
            _ => return Ok(Transformed::no(expr)),
        };
        let is_text = |e: &Expr| {
            e.get_type(schema).is_ok_and(|t| {
                matches!(
                    t,
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
                )
            })
        };
        if call.args.len() != 2 || !call.args.iter().all(is_text) {
            return Ok(Transformed::no(expr));
        }
        let text = Expr::ScalarFunction(ScalarFunction::new_udf(
            Arc::new(datetime_text()),
            call.args.clone(),
        ));
        Ok(Transformed::yes(Expr::Cast(Cast::new(
            Box::new(text),
            target,
        ))))
    }
}

/// What the text gave for each part of a date and time.
#[derive(Default)]
struct Read {
    year: Option<i32>,
    month: Option<u32>,
    day: Option<u32>,
    day_of_year: Option<u32>,
    hour: Option<u32>,
    twelve_hour: bool,
    after_noon: Option<bool>,
    minute: Option<u32>,
    second: Option<u32>,
    micros: u32,
}

fn bad_value(text: &str, pattern: &str) -> ServerError {
    ServerError::new(
        "22007",
        format!("invalid value \"{text}\" for \"{pattern}\""),
    )
}

/// `text` read by a template's parts.
fn read(text: &str, parts: &[Part]) -> std::result::Result<NaiveDateTime, ServerError> {
    let mut rest = text;
    let mut read = Read::default();
    for (i, part) in parts.iter().enumerate() {
        // A number followed by another with nothing between (`YYYYMMDD`) has its own width.
        let adjacent = matches!(parts.get(i + 1), Some(Part::Field(..)));
        match part {
            Part::Literal(literal) => {
                for c in literal.chars() {
                    if c.is_whitespace() {
                        rest = rest.trim_start();
                    } else if rest.starts_with(|r: char| !r.is_alphanumeric()) {
                        // A separator matches any one separator.
                        let next = rest.chars().next().map_or(0, char::len_utf8);
                        rest = &rest[next..];
                    }
                }
            }
            Part::Field(field, _, _) => {
                rest = rest.trim_start();
                rest = read_field(*field, rest, adjacent, &mut read)?;
            }
        }
    }
    let invalid = || {
        ServerError::new(
            "22008",
            format!("date/time field value out of range: \"{text}\""),
        )
    };
    let year = read.year.unwrap_or(1);
    let date = match (read.day_of_year, read.month, read.day) {
        (Some(ordinal), None, None) => NaiveDate::from_yo_opt(year, ordinal),
        (_, month, day) => NaiveDate::from_ymd_opt(year, month.unwrap_or(1), day.unwrap_or(1)),
    }
    .ok_or_else(invalid)?;
    let mut hour = read.hour.unwrap_or(0);
    if read.twelve_hour || read.after_noon.is_some() {
        if !(1..=12).contains(&hour) && read.hour.is_some() {
            return Err(ServerError::new(
                "22008",
                format!("hour \"{hour}\" is invalid for the 12-hour clock"),
            ));
        }
        hour = match (hour, read.after_noon.unwrap_or(false)) {
            (12, false) => 0,
            (12, true) => 12,
            (h, true) => h + 12,
            (h, false) => h,
        };
    }
    let time = NaiveTime::from_hms_micro_opt(
        hour,
        read.minute.unwrap_or(0),
        read.second.unwrap_or(0),
        read.micros,
    )
    .ok_or_else(invalid)?;
    Ok(date.and_time(time))
}

/// Up to `width` digits at the start of `rest`, as a number and how many digits there were.
fn digits<'a>(
    rest: &'a str,
    width: usize,
    pattern: &str,
) -> std::result::Result<(u32, usize, &'a str), ServerError> {
    let count = rest
        .chars()
        .take(width)
        .take_while(char::is_ascii_digit)
        .count();
    if count == 0 {
        let shown: String = rest.chars().take(width.max(1)).collect();
        return Err(bad_value(&shown, pattern));
    }
    let value = rest[..count]
        .parse()
        .map_err(|_| bad_value(&rest[..count], pattern))?;
    Ok((value, count, &rest[count..]))
}

/// One of `names` (or its first three letters) at the start of `rest`, any case.
fn name<'a>(
    rest: &'a str,
    names: &[&str],
    abbreviated: bool,
    pattern: &str,
) -> std::result::Result<(usize, &'a str), ServerError> {
    for (i, full) in names.iter().enumerate() {
        let written = if abbreviated { &full[..3] } else { full };
        if rest
            .get(..written.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(written))
        {
            return Ok((i, &rest[written.len()..]));
        }
    }
    let shown: String = rest.chars().take_while(|c| c.is_alphabetic()).collect();
    Err(bad_value(&shown, pattern))
}

fn read_field<'a>(
    field: Field,
    rest: &'a str,
    adjacent: bool,
    read: &mut Read,
) -> std::result::Result<&'a str, ServerError> {
    Ok(match field {
        Field::Year4 | Field::Year3 | Field::Year2 | Field::Year1 => {
            let (width, pattern) = match field {
                Field::Year4 if adjacent => (4, "YYYY"),
                Field::Year4 => (usize::MAX, "YYYY"),
                Field::Year3 => (3, "YYY"),
                Field::Year2 => (2, "YY"),
                _ => (1, "Y"),
            };
            let (value, count, rest) = digits(rest, width, pattern)?;
            let value = value as i32;
            // Fewer digits: the year nearest 2020, as Postgres picks it.
            read.year = Some(match count {
                1 => 2000 + value,
                2 if value < 70 => 2000 + value,
                2 => 1900 + value,
                3 if value < 100 => 2000 + value,
                3 => 1000 + value,
                _ => value,
            });
            rest
        }
        Field::Month => {
            let (value, _, rest) = digits(rest, 2, "MM")?;
            read.month = Some(value);
            rest
        }
        Field::MonthName | Field::MonthAbbrev => {
            let abbreviated = field == Field::MonthAbbrev;
            let pattern = if abbreviated { "MON" } else { "MONTH" };
            let (index, rest) = name(rest, &MONTHS, abbreviated, pattern)?;
            read.month = Some(index as u32 + 1);
            rest
        }
        Field::DayName | Field::DayAbbrev => {
            let abbreviated = field == Field::DayAbbrev;
            let pattern = if abbreviated { "DY" } else { "DAY" };
            // Read and checked, but the date comes from the other fields (as in Postgres).
            name(rest, &DAYS, abbreviated, pattern)?.1
        }
        Field::Day => {
            let (value, _, rest) = digits(rest, 2, "DD")?;
            read.day = Some(value);
            rest
        }
        Field::DayOfYear => {
            let (value, _, rest) = digits(rest, 3, "DDD")?;
            read.day_of_year = Some(value);
            rest
        }
        Field::Hour24 => {
            let (value, _, rest) = digits(rest, 2, "HH24")?;
            read.hour = Some(value);
            rest
        }
        Field::Hour12 => {
            let (value, _, rest) = digits(rest, 2, "HH12")?;
            read.hour = Some(value);
            read.twelve_hour = true;
            rest
        }
        Field::Minute => {
            let (value, _, rest) = digits(rest, 2, "MI")?;
            read.minute = Some(value);
            rest
        }
        Field::Second => {
            let (value, _, rest) = digits(rest, 2, "SS")?;
            read.second = Some(value);
            rest
        }
        Field::Millis | Field::Micros => {
            let (width, pattern) = if field == Field::Millis {
                (3, "MS")
            } else {
                (6, "US")
            };
            let (value, count, rest) = digits(rest, width, pattern)?;
            // Fewer digits are a fraction: `.5` of `MS` is 500 milliseconds.
            let scaled = value * 10u32.pow((width - count) as u32);
            read.micros += if field == Field::Millis {
                scaled * 1000
            } else {
                scaled
            };
            rest
        }
        Field::Meridiem | Field::MeridiemDots => {
            let upper = rest.to_ascii_uppercase();
            let (after_noon, length) = ["AM", "PM", "A.M.", "P.M."]
                .iter()
                .filter(|m| upper.starts_with(*m))
                .map(|m| (m.starts_with('P'), m.len()))
                .max_by_key(|(_, length)| *length)
                .ok_or_else(|| bad_value(&rest.chars().take(4).collect::<String>(), "AM"))?;
            read.after_noon = Some(after_noon);
            &rest[length..]
        }
        Field::DayOfWeek | Field::Quarter | Field::IsoWeek | Field::Week => {
            // Read and skipped: Postgres too ignores these when reading a date.
            let width = if matches!(field, Field::IsoWeek | Field::Week) {
                2
            } else {
                1
            };
            digits(rest, width, "D")?.2
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_by(text: &str, template: &str) -> std::result::Result<String, ServerError> {
        read(text, &parse_template(template)).map(|t| t.format("%Y-%m-%d %H:%M:%S%.f").to_string())
    }

    #[test]
    fn templates_read_as_postgres_reads_them() {
        for (text, template, expected) in [
            ("2026-03-05", "YYYY-MM-DD", "2026-03-05 00:00:00"),
            (
                "2026-03-05 10:11:12",
                "YYYY-MM-DD HH24:MI:SS",
                "2026-03-05 10:11:12",
            ),
            ("05 Mar 2026", "DD Mon YYYY", "2026-03-05 00:00:00"),
            ("March 5, 2026", "Month DD, YYYY", "2026-03-05 00:00:00"),
            ("20260305", "YYYYMMDD", "2026-03-05 00:00:00"),
            ("2026/03/05", "YYYY-MM-DD", "2026-03-05 00:00:00"),
            ("05.03.26", "DD.MM.YY", "2026-03-05 00:00:00"),
            ("07:30 PM", "HH12:MI AM", "0001-01-01 19:30:00"),
            ("12:15 am", "HH:MI AM", "0001-01-01 00:15:00"),
            ("12:00:00.5", "HH24:MI:SS.MS", "0001-01-01 12:00:00.500"),
            (
                "12:00:00.000123",
                "HH24:MI:SS.US",
                "0001-01-01 12:00:00.000123",
            ),
            ("2026 064", "YYYY DDD", "2026-03-05 00:00:00"),
            ("Thu 2026-03-05", "Dy YYYY-MM-DD", "2026-03-05 00:00:00"),
            ("  2026-3-5", "YYYY-MM-DD", "2026-03-05 00:00:00"),
        ] {
            assert_eq!(
                read_by(text, template).unwrap(),
                expected,
                "{text} / {template}"
            );
        }
    }

    #[test]
    fn bad_text_is_refused_with_postgres_codes() {
        assert_eq!(
            read_by("2026-xx-05", "YYYY-MM-DD").unwrap_err().code,
            "22007"
        );
        assert_eq!(
            read_by("2026-13-05", "YYYY-MM-DD").unwrap_err().code,
            "22008"
        );
        assert_eq!(
            read_by("2026-02-30", "YYYY-MM-DD").unwrap_err().code,
            "22008"
        );
        assert_eq!(read_by("13:00 PM", "HH12:MI AM").unwrap_err().code, "22008");
        assert_eq!(
            read_by("05 Foo 2026", "DD Mon YYYY").unwrap_err().code,
            "22007"
        );
    }
}
