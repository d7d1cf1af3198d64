//! Parsing a client's SQL without holding up anyone else. Each statement's parse has a budget of
//! steps (see `eddy_planner::parse_budget`) and stops at the connection's `statement_timeout`;
//! text longer than a few lines is parsed on the blocking pool, so that even the slowest parse
//! the budget allows never holds a runtime worker that other connections' statements need.

use std::time::{Duration, Instant};

use eddy_planner::limits::StatementLimits;
use eddy_planner::statement::{parse_statements_by, ParsedStatement};

use crate::error::ServerError;

/// Text up to this long is parsed where it arrived: its whole budget takes milliseconds.
const INLINE_BYTES: usize = 1024;

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
    let parsed = tokio::task::spawn_blocking(move || parse_statements_by(&sql, &limits, deadline))
        .await
        .map_err(|error| ServerError::internal(format!("parsing the statement failed: {error}")))?;
    Ok(parsed?)
}
