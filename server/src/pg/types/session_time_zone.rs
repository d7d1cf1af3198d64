//! The session's `TimeZone` in a query's calendar. Eddy keeps a `timestamptz` as a UTC
//! instant (typed with the zone `+00:00`); Postgres reads and splits one in the session's
//! zone: `'2026-01-01 03:00'::timestamptz` is 03:00 there, and its date, its hour, its
//! midnight (`date_trunc`), its `::timestamp` and `::date` are those of the local clock.
//!
//! A query, a write or a cursor runs within [`within`], which makes the session's zone known
//! to the analyzer rule ([`crate::pg::plan::session_calendar`]) (a task-local: the rule has no other way to see the
//! session). A materialized view is planned outside it: its results must not depend on who
//! created it or on replay, so it computes in UTC.

use std::future::Future;
use std::str::FromStr;

use datafusion::arrow::array::timezone::Tz;
use datafusion::common::Result;

use crate::error::ServerError;
use crate::pg::types::timestamp_input::UTC;

tokio::task_local! {
    /// The session's zone, as Arrow names it, while a statement runs; None when UTC.
    static SESSION_ZONE: Option<String>;
}

/// Runs `work` with `zone` (the session's `TimeZone` setting) as the zone of its queries.
pub async fn within<F: Future>(zone: Option<String>, work: F) -> F::Output {
    let zone = zone
        .and_then(|name| arrow_zone_name(&name, false).ok())
        .filter(|name| name != UTC);
    SESSION_ZONE.scope(zone, work).await
}

/// The session's zone while a statement runs within [`within`], if it is not UTC.
pub fn current() -> Option<String> {
    SESSION_ZONE.try_with(|zone| zone.clone()).ok().flatten()
}

/// Whether `statement` reads or writes in the session's zone: queries, writes and a table
/// filled once from a query; not the definitions of materialized views and sources.
pub fn applies_to(statement: &eddy_planner::EddyStatement) -> bool {
    use datafusion::sql::sqlparser::ast::Statement;
    match statement {
        eddy_planner::EddyStatement::Sql(statement) => match statement.as_ref() {
            Statement::Query(_)
            | Statement::Insert(_)
            | Statement::Update { .. }
            | Statement::Delete(_)
            | Statement::Explain { .. } => true,
            Statement::CreateTable(create) => create.query.is_some(),
            _ => false,
        },
        _ => false,
    }
}

/// A zone as Postgres names it: `UTC`, a tz database name in any case, or an offset.
/// With `posix` (AT TIME ZONE), `'+05'` is five hours west of Greenwich, as in Postgres;
/// a session's `SET TimeZone = '+05'` is five hours east.
pub fn zone_named(name: &str, posix: bool) -> Result<Tz, ServerError> {
    let arrow_name = arrow_zone_name(name, posix)?;
    Tz::from_str(&arrow_name).map_err(|_| unknown_zone(name))
}

fn unknown_zone(name: &str) -> ServerError {
    ServerError::new(
        "22023",
        format!("time zone \"{}\" not recognized", name.to_lowercase()),
    )
}

/// The name Arrow's types carry for the zone Postgres calls `name`.
pub fn arrow_zone_name(name: &str, posix: bool) -> Result<String, ServerError> {
    let trimmed = name.trim().trim_matches('\'');
    let lower = trimmed.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "utc" | "gmt" | "z" | "zulu" | "etc/utc" | "etc/gmt" | "universal" | "uct" | "greenwich"
    ) {
        return Ok(UTC.to_string());
    }
    // `UTC+3`, `GMT-2`: POSIX, hours west.
    let (posix, offset) = match lower
        .strip_prefix("utc")
        .or_else(|| lower.strip_prefix("gmt"))
    {
        Some(rest) if rest.starts_with(['+', '-']) => (true, rest),
        _ => (posix, lower.as_str()),
    };
    if let Some(seconds) = offset_seconds(offset) {
        let east = if posix { -seconds } else { seconds };
        let sign = if east < 0 { '-' } else { '+' };
        let east = east.abs();
        return Ok(format!("{sign}{:02}:{:02}", east / 3600, east / 60 % 60));
    }
    chrono_tz::TZ_VARIANTS
        .iter()
        .find(|zone| zone.name().eq_ignore_ascii_case(trimmed))
        .map(|zone| zone.name().to_string())
        .ok_or_else(|| unknown_zone(name))
}

/// `+5`, `-03`, `+05:30`, `+0530`: seconds, east when the sign is `+`.
fn offset_seconds(text: &str) -> Option<i32> {
    let (sign, digits) = match text.chars().next()? {
        '+' => (1, &text[1..]),
        '-' => (-1, &text[1..]),
        _ => return None,
    };
    let (hours, minutes) = match digits.split_once(':') {
        Some((h, m)) => (h, m),
        None if digits.len() == 4 => digits.split_at(2),
        None => (digits, "0"),
    };
    let hours: i32 = hours.parse().ok().filter(|h| *h <= 15)?;
    let minutes: i32 = minutes.parse().ok().filter(|m| *m < 60)?;
    Some(sign * (hours * 3600 + minutes * 60))
}
