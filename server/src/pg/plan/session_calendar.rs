//! Timestamps read and split in the session's `TimeZone` (see
//! [`crate::pg::types::session_time_zone`]): a cast between `timestamp`, `timestamptz`,
//! `date` and text, and the calendar functions (`date_part`, `EXTRACT`, `date_trunc`,
//! `to_char`) given a `timestamptz`, compute on the session's local clock. A materialized view
//! is planned outside a session: it computes in UTC.

use std::sync::Arc;

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

use crate::pg::functions::at_time_zone::AtTimeZone;
use crate::pg::types::session_time_zone::current;
use crate::pg::types::text_cast::TextCast;
use crate::pg::types::timestamp_input::{TimestampIn, UTC};

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
