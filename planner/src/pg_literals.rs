//! Literals in the forms Postgres reads that DataFusion reads otherwise, rewritten right after
//! parsing (so that a view's stored SQL plans the same at restart):
//!
//! - intervals as Postgres prints them (`'1 day 02:03:04'`, `'-1 days +02:00:00'`,
//!   `'1 year 2 mons'`) in the unit words arrow parses;
//! - `1e15::float8`: a float parsed from the digits, not a decimal cast to a float (which
//!   rounds);
//! - `EXTRACT(field FROM x)` as `pg_extract('field', x)`: Postgres' `numeric` with the
//!   fraction of a second (DataFusion's `date_part` drops it), a function the server
//!   registers;
//! - `x AT TIME ZONE zone` as `timezone(zone, x)`, Postgres' function (DataFusion's cast
//!   only relabels the zone), which the server registers too;
//! - Postgres' prefix operators, `^@` and `LOCALTIMESTAMP` ([`crate::pg_operators`]).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, CastKind, DataType, Expr, Statement, Value, ValueWithSpan,
};

/// Rewrites the literals of one statement in place.
pub fn normalize_literals(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        normalize_expr(expr);
        ControlFlow::<()>::Continue(())
    });
}

/// Rewrites the literals of one query in place (a materialized view's).
pub fn normalize_query_literals(query: &mut datafusion::sql::sqlparser::ast::Query) {
    let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(query, |expr| {
        normalize_expr(expr);
        ControlFlow::<()>::Continue(())
    });
}

fn string_value(value: &ValueWithSpan) -> Option<&str> {
    match &value.value {
        Value::SingleQuotedString(s) => Some(s),
        _ => None,
    }
}

fn normalize_expr(expr: &mut Expr) {
    match expr {
        Expr::Extract {
            field, expr: from, ..
        } => {
            let field = field.to_string().to_ascii_lowercase().replace('\'', "''");
            if let Some(call) = parse_expr(&format!("pg_extract('{field}', {from})")) {
                *expr = call;
            }
        }
        Expr::AtTimeZone {
            timestamp,
            time_zone,
        } => {
            if let Some(call) = parse_expr(&format!("timezone({time_zone}, {timestamp})")) {
                *expr = call;
            }
        }
        Expr::Interval(interval) if interval.leading_field.is_none() => {
            if let Expr::Value(value) = interval.value.as_mut() {
                if let Some(text) = string_value(value).and_then(interval_words) {
                    value.value = Value::SingleQuotedString(text);
                }
            }
        }
        Expr::Cast {
            expr: inner,
            data_type,
            kind,
            ..
        } => {
            let Expr::Value(value) = inner.as_mut() else {
                return;
            };
            match data_type {
                DataType::Interval { .. } => {
                    if let Some(text) = string_value(value).and_then(interval_words) {
                        value.value = Value::SingleQuotedString(text);
                    }
                }
                DataType::Float(_)
                | DataType::Float4
                | DataType::Float8
                | DataType::Float64
                | DataType::Real
                | DataType::Double(_)
                | DataType::DoublePrecision => {
                    if let Value::Number(digits, _) = &value.value {
                        value.value = Value::SingleQuotedString(digits.clone());
                        *kind = CastKind::Cast;
                    }
                }
                _ => {}
            }
        }
        _ => crate::pg_operators::normalize(expr),
    }
}

pub(crate) fn parse_expr(sql: &str) -> Option<Expr> {
    datafusion::sql::sqlparser::parser::Parser::new(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
    )
    .try_with_sql(sql)
    .and_then(|mut parser| parser.parse_expr())
    .ok()
}

/// Postgres' interval text in arrow's unit words: `02:03:04` becomes
/// `2 hours 3 minutes 4 seconds` (signed as written), `mon`/`mons` become `months`. `None` when
/// the text needs no change.
pub fn interval_words(text: &str) -> Option<String> {
    let mut out = Vec::new();
    let mut changed = false;
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut i = 0;
    while i < words.len() {
        let word = words[i];
        if word.contains(':') {
            let (sign, clock) = match word.as_bytes().first() {
                Some(b'-') => ("-", &word[1..]),
                Some(b'+') => ("", &word[1..]),
                _ => ("", word),
            };
            let parts: Vec<&str> = clock.split(':').collect();
            let (hours, minutes, seconds) = match parts.as_slice() {
                [h, m] => (*h, *m, "0"),
                [h, m, s] => (*h, *m, *s),
                _ => return None,
            };
            let numeric =
                |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == '.');
            if !(numeric(hours) && numeric(minutes) && numeric(seconds)) {
                return None;
            }
            out.push(format!(
                "{sign}{hours} hours {sign}{minutes} minutes {sign}{seconds} seconds"
            ));
            changed = true;
        } else if let Some(unit) = words.get(i + 1).filter(|_| word.parse::<f64>().is_ok()) {
            let unit_word = match unit.to_ascii_lowercase().as_str() {
                "mon" | "mons" => Some("months"),
                _ => None,
            };
            match unit_word {
                Some(unit_word) => {
                    out.push(format!("{} {unit_word}", word.trim_start_matches('+')));
                    changed = true;
                }
                None => out.push(format!("{} {unit}", word.trim_start_matches('+'))),
            }
            i += 1;
        } else {
            out.push(word.to_string());
        }
        i += 1;
    }
    changed.then(|| out.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_as_postgres_prints_them_read_back() {
        assert_eq!(
            interval_words("1 day 02:03:04").as_deref(),
            Some("1 day 02 hours 03 minutes 04 seconds")
        );
        assert_eq!(
            interval_words("-1 days -02:00:00").as_deref(),
            Some("-1 days -02 hours -00 minutes -00 seconds")
        );
        assert_eq!(
            interval_words("1 year 2 mons").as_deref(),
            Some("1 year 2 months")
        );
        assert_eq!(
            interval_words("00:00:01.5").as_deref(),
            Some("00 hours 00 minutes 01.5 seconds")
        );
        assert_eq!(interval_words("5 seconds"), None);
    }
}
