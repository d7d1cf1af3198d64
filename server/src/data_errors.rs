//! Data errors that DataFusion and Arrow report in words, not kinds (an execution or compute
//! error): recognized by their text and given Postgres' SQLSTATE and wording, so that a bad
//! value is never answered as an internal error (XX000). Each was checked against PostgreSQL 15.

/// The SQLSTATE and message for an error whose text is one of these, if it is.
pub fn classify(message: &str) -> Option<(&'static str, String)> {
    if message.contains("cannot take square root of a negative number") {
        return Some((
            "2201F",
            "cannot take square root of a negative number".into(),
        ));
    }
    if let Some(at) = message.find("Regular expression did not compile") {
        let detail = message[at..]
            .lines()
            .find_map(|line| line.trim().strip_prefix("error: "))
            .unwrap_or("the pattern does not compile");
        return Some(("2201B", format!("invalid regular expression: {detail}")));
    }
    if message.contains("Timestamp out of range") {
        return Some(("22008", "timestamp out of range".into()));
    }
    // `date - 1000000`: the days become an interval of nanoseconds that does not fit.
    if message.contains("Cannot cast to Interval(") && message.contains("Overflowing on") {
        return Some(("22008", "date out of range".into()));
    }
    if let Some(text) = timestamp_beyond_nanoseconds(message) {
        return Some(("22008", text));
    }
    // An interval of days whose nanoseconds do not fit (a window of 9223372036854775807 days).
    if message.contains("Unable to represent") && message.contains("days in a signed") {
        return Some(("22015", "interval field value out of range".into()));
    }
    if message.contains("Encountered non UTF-8 data") {
        return Some((
            "22021",
            "invalid byte sequence for encoding \"UTF8\"".into(),
        ));
    }
    if message.contains("Unsupported Datatype Decimal256") {
        return Some((
            "0A000",
            "NUMERIC with a precision above 38 digits is not supported".into(),
        ));
    }
    None
}

/// A timestamp read as microseconds that nanoseconds cannot hold (Eddy's `TIMESTAMP` counts
/// nanoseconds, from 1677-09-21 to 2262-04-11): Postgres' "timestamp out of range", naming the
/// value.
fn timestamp_beyond_nanoseconds(message: &str) -> Option<String> {
    let rest = message.split("Cannot cast Timestamp(µs) value ").nth(1)?;
    if !rest.contains("to Timestamp(ns)") {
        return None;
    }
    let micros: i64 = rest.split_whitespace().next()?.parse().ok()?;
    let value = chrono::DateTime::from_timestamp_micros(micros)?;
    Some(format!(
        "timestamp out of range: \"{}\" (a TIMESTAMP holds nanoseconds: from 1677-09-21 to \
         2262-04-11)",
        value.naive_utc().format("%Y-%m-%d %H:%M:%S%.f")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_data_error_has_postgres_sqlstate() {
        let cases = [
            ("Compute error: Execution error: cannot take square root of a negative number", "2201F"),
            ("Compute error: Regular expression did not compile: Syntax(\nregex parse error:\n    (\n    ^\nerror: unclosed group\n)", "2201B"),
            ("Compute error: Timestamp out of range", "22008"),
            ("Compute error: Cannot cast to Interval(MonthDayNano). Overflowing on 86400000000", "22008"),
            ("Optimizer rule 'simplify_expressions' failed\ncaused by\nExecution error: Cannot cast Timestamp(µs) value 253402300799000000 to Timestamp(ns): converted value exceeds the representable i64 range", "22008"),
            ("Invalid argument error: Encountered non UTF-8 data: invalid utf-8 sequence of 1 bytes from index 0", "22021"),
            ("Unsupported Datatype Decimal256(76, 0)", "0A000"),
        ];
        for (message, code) in cases {
            assert_eq!(classify(message).map(|(c, _)| c), Some(code), "{message}");
        }
        assert_eq!(
            classify(cases[1].0).map(|(_, m)| m).as_deref(),
            Some("invalid regular expression: unclosed group")
        );
        assert_eq!(
            classify(cases[4].0).map(|(_, m)| m).unwrap_or_default(),
            "timestamp out of range: \"9999-12-31 23:59:59\" (a TIMESTAMP holds nanoseconds: \
             from 1677-09-21 to 2262-04-11)"
        );
        assert_eq!(
            classify("Cannot cast to Decimal128(5, 2). Overflowing on 1"),
            None
        );
        assert_eq!(classify("Divide by zero error"), None);
    }
}
