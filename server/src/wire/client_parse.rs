//! Parsing a client's SQL without holding up anyone else. Each statement's parse has a budget of
//! steps (see `eddy_planner::parse_budget`) and stops at the connection's `statement_timeout`;
//! text longer than a few lines is parsed on a thread of its own, so that even the slowest parse
//! the budget allows never holds a runtime worker that other connections' statements need.
//! That thread's stack is large: sqlparser recurses once per nested statement (`CASE ... END
//! CASE`, `IF ... END IF`, `BEGIN ... END`) with frames of tens of kilobytes and no stack
//! growth of its own, up to its recursion limit (850 nested `CASE` statements overflowed a
//! 16 MiB worker stack).

use std::time::{Duration, Instant};

use eddy_planner::limits::StatementLimits;
use eddy_planner::statement::{parse_statements_by, ParsedStatement};

use crate::error::ServerError;

/// Text up to this long is parsed where it arrived: its whole budget takes milliseconds, and
/// it cannot nest statements deep enough to need more than a worker's stack.
const INLINE_BYTES: usize = 1024;

/// The stack of a parse thread: room for sqlparser's recursion limit
/// (`PARSER_RECURSION_LIMIT` levels) at the largest frames a level takes, with a margin. Only
/// what a parse touches is ever resident.
const PARSE_STACK_BYTES: usize = 256 << 20;

/// Parses `sql` within `limits`, stopping with 57014 once `timeout` has passed.
pub async fn parse(
    sql: &str,
    limits: StatementLimits,
    timeout: Option<Duration>,
) -> Result<Vec<ParsedStatement>, ServerError> {
    let deadline = timeout.map(|timeout| Instant::now() + timeout);
    if sql.len() <= INLINE_BYTES {
        return Ok(parse_statements_by(sql, &limits, deadline)?);
    }
    let sql = sql.to_string();
    let (send, parsed) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("eddy-parse".into())
        .stack_size(PARSE_STACK_BYTES)
        .spawn(move || {
            let _ = send.send(parse_statements_by(&sql, &limits, deadline));
        })
        .map_err(|error| ServerError::internal(format!("cannot start a parse: {error}")))?;
    let parsed = parsed
        .await
        .map_err(|_| ServerError::internal("the parse of the statement stopped"))?;
    Ok(parsed?)
}
