//! The DataFusion session Eddy plans in, assembled in one place: Postgres' configuration, the
//! stream functions (window TVFs, join markers, the wall clock), every function family and
//! plan rule of [`crate::pg`], and the catalogs — then the database's objects are brought back.
//!
//! Order matters where names meet: a function registered later replaces one of the same name,
//! and `datafusion-pg-catalog` (set up with the catalogs) brings functions of its own, which
//! the families after it replace.

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, RwLock};

use datafusion::execution::context::{SessionConfig, SessionContext};
use eddy_executor::EngineHandle;
use eddy_planner::window::TableLookup;
use eddy_planner::{SessionPartitionRule, WindowFunction, WindowTableFunction};
use eddy_storage::Store;

use crate::database::{Database, PlanningSession, DATABASE, SCHEMA};
use crate::error::{Result, ServerError};
use crate::pg::{functions, plan, types};

/// The database over `store` and `engine`, with every object of the catalog back.
pub async fn open_database(store: Arc<dyn Store>, engine: EngineHandle) -> Result<Arc<Database>> {
    let session = planning_session()?;
    install_before_catalogs(&session)?;
    crate::catalogs::eddy_catalog::register(&session.ctx, &engine, &store)?;
    let db = Database::new(session, store, engine);
    // Before the restore: stored statements may use the Postgres types the catalogs add
    // (JSONB) and any function.
    crate::catalogs::install(&db)?;
    install_after_catalogs(&db.ctx)?;
    crate::catalogs::finish(&db)?;
    db.restore().await?;
    Ok(db)
}

/// Postgres' configuration, and what stream queries plan with.
fn planning_session() -> Result<PlanningSession> {
    let config = SessionConfig::new()
        .with_default_catalog_and_schema(DATABASE, SCHEMA)
        .with_information_schema(true)
        .set_bool("datafusion.sql_parser.map_string_types_to_utf8view", false)
        // `1.5` is a NUMERIC literal in Postgres, never a float that rounds.
        .set_bool("datafusion.sql_parser.parse_float_as_decimal", true)
        // now() is an instant (timestamptz), shown in the session's TimeZone.
        .set_str("datafusion.execution.time_zone", "+00:00");
    let ctx = SessionContext::new_with_config(config);
    let window_tables: TableLookup = Arc::new(RwLock::new(HashMap::new()));
    for function in WindowFunction::ALL {
        let upper = function.name();
        let mut capitalized = upper[..1].to_string();
        capitalized.push_str(&upper[1..].to_lowercase());
        for name in [upper.to_lowercase(), upper.to_string(), capitalized] {
            let udtf = WindowTableFunction::new(function, window_tables.clone());
            ctx.register_udtf(&name, Arc::new(udtf));
        }
    }
    // Temporal and ASOF joins' markers (see eddy_planner::temporal_joins).
    for marker in eddy_planner::temporal_joins::JoinMarker::all() {
        ctx.register_udf(marker);
    }
    // PROCTIME(), and the marker a view's now() becomes (see eddy_planner::wall_clock).
    for function in eddy_planner::wall_clock::WallClockFunction::all() {
        ctx.register_udf(function);
    }
    // Sessions are kept apart by the GROUP BY keys, in batch as in views.
    ctx.add_analyzer_rule(Arc::new(SessionPartitionRule));
    Ok(PlanningSession {
        ctx,
        window_tables,
        query_memory_limit: Arc::new(AtomicUsize::new(
            crate::query::query_memory::DEFAULT_QUERY_MEMORY_LIMIT,
        )),
    })
}

/// The families and rules that replace DataFusion's own functions and operators.
fn install_before_catalogs(session: &PlanningSession) -> Result<()> {
    let ctx = &session.ctx;
    functions::caps::install(ctx, session.query_memory_limit.clone())?;
    plan::operator_types::install(ctx);
    plan::checked_arithmetic::install(ctx);
    plan::integer_casts::install(ctx);
    functions::extract::install(ctx);
    types::interval_input::install(ctx);
    types::bytea_input::install(ctx);
    plan::session_calendar::install(ctx);
    plan::similar_to::install(ctx);
    plan::interval_order::install(ctx);
    types::numeric_division::install(ctx).map_err(ServerError::from)?;
    plan::quotient_markings::install(ctx);
    plan::using_joins::install(ctx);
    Ok(())
}

/// The families that take the place of `datafusion-pg-catalog`'s functions of the same names,
/// and Postgres' functions DataFusion lacks.
fn install_after_catalogs(ctx: &SessionContext) -> Result<()> {
    functions::text::register(ctx);
    functions::json_build::register(ctx);
    functions::json_sets::register(ctx);
    types::uuid::register(ctx);
    functions::to_char::register(ctx);
    functions::json::register(ctx)?;
    functions::json_operators::register(ctx)?;
    plan::oid_markings::register(ctx);
    functions::json_agg::register(ctx);
    functions::interval_arithmetic::register(ctx)?;
    functions::scalar::register(ctx)?;
    functions::encode::register(ctx);
    ctx.register_udf(functions::type_of::pg_typeof());
    Ok(())
}
