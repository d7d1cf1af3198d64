//! The session's `TimeZone` in a query's calendar. Eddy keeps a `timestamptz` as a UTC
//! instant (typed with the zone `+00:00`); Postgres reads and splits one in the session's
//! zone: `'2026-01-01 03:00'::timestamptz` is 03:00 there, and its date, its hour, its
//! midnight (`date_trunc`), its `::timestamp` and `::date` are those of the local clock.
//!
//! A query, a write or a cursor runs within [`within`], which makes the session's zone known
//! to the analyzer rule below (a task-local: the rule has no other way to see the
//! session). A materialized view is planned outside it: its results must not depend on who
//! created it or on replay, so it computes in UTC.

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;

use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Cast, Expr, ExprSchemable, LogicalPlan, ScalarUDF};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionContext;

use crate::error::ServerError;
use crate::pg::functions::at_time_zone::AtTimeZone;
use crate::pg::types::text_cast::TextCast;
use crate::pg::types::timestamp_input::{TimestampIn, UTC};

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

pub fn install(ctx: &SessionContext) {
    ctx.register_udf(ScalarUDF::new_from_impl(TimestampIn::default()));
    ctx.register_udf(ScalarUDF::new_from_impl(AtTimeZone::postgres()));
    ctx.register_udf(ScalarUDF::new_from_impl(AtTimeZone::local_time()));
    ctx.register_udf(ScalarUDF::new_from_impl(TextCast::default()));
    ctx.add_analyzer_rule(Arc::new(SessionCalendar));
}

/// Functions that split a timestamp into calendar fields: given a `timestamptz`, they
/// compute in the zone its type names, which becomes the session's.
const CALENDAR_FUNCTIONS: [&str; 3] = ["date_part", "pg_extract", "date_trunc"];

/// Functions that format a timestamp as it is, ignoring its zone: given a `timestamptz`,
/// they are given the session's wall clock.
const WALL_CLOCK_FUNCTIONS: [&str; 1] = ["to_char"];

#[derive(Debug)]
struct SessionCalendar;

impl AnalyzerRule for SessionCalendar {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let zone = current();
        let timestamp_in = Arc::new(ScalarUDF::new_from_impl(TimestampIn::default()));
        let local_time = Arc::new(ScalarUDF::new_from_impl(AtTimeZone::local_time()));
        let text = Arc::new(ScalarUDF::new_from_impl(TextCast::default()));
        plan.transform_up_with_subqueries(|plan| {
            let schema: DFSchema = merge_schema(&plan.inputs());
            let names = NamePreserver::new(&plan);
            plan.map_expressions(|expr| {
                let name = names.save(&expr);
                let rewritten = expr.transform_up(|e| {
                    let rewriter = Rewriter {
                        schema: &schema,
                        zone: zone.as_deref(),
                        timestamp_in: &timestamp_in,
                        local_time: &local_time,
                        text: &text,
                    };
                    rewriter.rewrite(e)
                })?;
                Ok(rewritten.update_data(|e| name.restore(e)))
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "eddy_session_calendar"
    }
}

struct Rewriter<'a> {
    schema: &'a DFSchema,
    zone: Option<&'a str>,
    timestamp_in: &'a Arc<ScalarUDF>,
    local_time: &'a Arc<ScalarUDF>,
    text: &'a Arc<ScalarUDF>,
}

impl Rewriter<'_> {
    fn rewrite(&self, expr: Expr) -> Result<Transformed<Expr>> {
        match expr {
            Expr::Cast(Cast { expr: inner, field }) => {
                let from = inner.get_type(self.schema)?;
                match self.cast(*inner, &from, field.data_type())? {
                    Ok(rewritten) => Ok(Transformed::yes(rewritten)),
                    Err(inner) => Ok(Transformed::no(Expr::Cast(Cast {
                        expr: Box::new(inner),
                        field,
                    }))),
                }
            }
            Expr::ScalarFunction(mut call) if self.zone.is_some() => {
                let name = call.func.name();
                let (relabel, wall_clock) = (
                    CALENDAR_FUNCTIONS.contains(&name),
                    WALL_CLOCK_FUNCTIONS.contains(&name),
                );
                let zone = self.zone.unwrap_or(UTC);
                let mut changed = false;
                for arg in call.args.iter_mut() {
                    let DataType::Timestamp(unit, Some(own)) = arg.get_type(self.schema)? else {
                        continue;
                    };
                    if relabel && own.as_ref() != zone {
                        let retyped = DataType::Timestamp(unit, Some(zone.into()));
                        *arg = Expr::Cast(Cast::new(Box::new(arg.clone()), retyped));
                        changed = true;
                    } else if wall_clock {
                        *arg = self.wall_clock(arg.clone(), zone);
                        changed = true;
                    }
                }
                let expr = Expr::ScalarFunction(call);
                Ok(if changed {
                    Transformed::yes(expr)
                } else {
                    Transformed::no(expr)
                })
            }
            e => Ok(Transformed::no(e)),
        }
    }

    /// The cast of `inner` from `from` to `to` as Postgres makes it, or `inner` back when
    /// Arrow's cast already does.
    fn cast(&self, inner: Expr, from: &DataType, to: &DataType) -> Result<Result<Expr, Expr>> {
        let cast = |e: Expr, to: DataType| Expr::Cast(Cast::new(Box::new(e), to));
        let text = matches!(
            from,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        );
        Ok(match (from, to, self.zone) {
            (_, DataType::Timestamp(_, zoned), _) if text => {
                let zone = match zoned {
                    Some(_) => ScalarValue::Utf8(Some(self.zone.unwrap_or(UTC).to_string())),
                    None => ScalarValue::Null,
                };
                let call = ScalarFunction::new_udf(
                    self.timestamp_in.clone(),
                    vec![inner, Expr::Literal(zone, None)],
                );
                Ok(cast(Expr::ScalarFunction(call), to.clone()))
            }
            // Wall-clock time (a timestamp, a date's midnight) in the session's zone.
            (
                DataType::Timestamp(_, None) | DataType::Date32,
                DataType::Timestamp(_, Some(_)),
                Some(zone),
            ) => {
                let wall = cast(inner, DataType::Timestamp(TimeUnit::Microsecond, None));
                let local = cast(
                    wall,
                    DataType::Timestamp(TimeUnit::Microsecond, Some(zone.into())),
                );
                Ok(cast(local, to.clone()))
            }
            // The session's wall clock at an instant.
            (
                DataType::Timestamp(_, Some(_)),
                DataType::Timestamp(_, None)
                | DataType::Date32
                | DataType::Date64
                | DataType::Time32(_)
                | DataType::Time64(_),
                Some(zone),
            ) => Ok(cast(self.wall_clock(inner, zone), to.clone())),
            (_, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View, _)
                if crate::pg::types::text_cast::differs(from) =>
            {
                let zone = ScalarValue::Utf8(Some(self.zone.unwrap_or(UTC).to_string()));
                let call = ScalarFunction::new_udf(
                    self.text.clone(),
                    vec![inner, Expr::Literal(zone, None)],
                );
                Ok(cast(Expr::ScalarFunction(call), to.clone()))
            }
            _ => Err(inner),
        })
    }

    /// The wall clock of `zone` at the instants of `instants`, a `timestamp`.
    fn wall_clock(&self, instants: Expr, zone: &str) -> Expr {
        let zone = Expr::Literal(ScalarValue::Utf8(Some(zone.to_string())), None);
        Expr::ScalarFunction(ScalarFunction::new_udf(
            self.local_time.clone(),
            vec![zone, instants],
        ))
    }
}
