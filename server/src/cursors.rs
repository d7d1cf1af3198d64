//! Server-side cursors: `DECLARE name [BINARY] CURSOR [WITH[OUT] HOLD] FOR query`, `FETCH`,
//! `MOVE` and `CLOSE` (psycopg2's named cursors, SQLAlchemy's `stream_results`). A cursor
//! holds the query's running batch stream: each FETCH pulls only the batches it needs.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::sql::sqlparser::ast::{CloseCursor, DeclareType, Statement};
use eddy_planner::cursor_statement::{FetchCount, FetchStatement};
use futures::StreamExt;
use pgwire::api::ClientInfo;
use pgwire::messages::response::TransactionStatus;
use tokio::sync::Mutex;

use crate::database::{Database, Outcome};
use crate::error::{Result, ServerError};

/// One open cursor.
struct Cursor {
    schema: SchemaRef,
    stream: SendableRecordBatchStream,
    /// Rows of the last batch that a FETCH did not take yet.
    pending: Option<RecordBatch>,
    binary: bool,
    /// WITH HOLD: survives the end of its transaction.
    hold: bool,
}

/// A connection's cursors by name, kept in its session extensions.
#[derive(Default)]
struct Cursors(Mutex<HashMap<String, Cursor>>);

fn cursors<C: ClientInfo>(client: &C) -> Arc<Cursors> {
    client
        .session_extensions()
        .get_or_insert_with(Cursors::default)
}

/// Whether this statement opens or closes a cursor (FETCH and MOVE are Eddy statements).
pub fn is_cursor_statement(statement: &Statement) -> bool {
    match statement {
        Statement::Declare { stmts } => stmts
            .iter()
            .all(|d| matches!(d.declare_type, Some(DeclareType::Cursor))),
        Statement::Close { .. } => true,
        _ => false,
    }
}

/// Runs DECLARE ... CURSOR or CLOSE.
pub async fn execute<C: ClientInfo>(
    db: &Database,
    client: &C,
    statement: &Statement,
) -> Result<Outcome> {
    match statement {
        Statement::Declare { stmts } => {
            for declare in stmts {
                let Some(query) = &declare.for_query else {
                    return Err(ServerError::new("42601", "DECLARE CURSOR needs FOR query"));
                };
                if declare.scroll == Some(true) {
                    return Err(ServerError::not_supported(
                        "SCROLL cursors: Eddy's cursors only move forward",
                    ));
                }
                let hold = declare.hold == Some(true);
                if !hold && client.transaction_status() == TransactionStatus::Idle {
                    return Err(ServerError::new(
                        "25P01",
                        "DECLARE CURSOR can only be used in transaction blocks",
                    ));
                }
                let plan = db
                    .plan_statement(&Statement::Query(query.clone()), None)
                    .await?;
                let frame = crate::query_memory::dataframe(&db.ctx, db.query_memory_limit(), plan)?;
                let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
                let stream = frame.execute_stream().await?;
                let cursor = Cursor {
                    schema,
                    stream,
                    pending: None,
                    binary: declare.binary == Some(true),
                    hold,
                };
                let Some(name) = declare.names.first().map(identifier) else {
                    return Err(ServerError::new("42601", "DECLARE needs a cursor name"));
                };
                let all = cursors(client);
                let mut open = all.0.lock().await;
                if open.contains_key(&name) {
                    return Err(ServerError::new(
                        "42P03",
                        format!("cursor \"{name}\" already exists"),
                    ));
                }
                open.insert(name, cursor);
            }
            Ok(Outcome::command("DECLARE CURSOR"))
        }
        Statement::Close { cursor } => {
            let all = cursors(client);
            let mut open = all.0.lock().await;
            match cursor {
                CloseCursor::All => open.clear(),
                CloseCursor::Specific { name } => {
                    let name = identifier(name);
                    if open.remove(&name).is_none() {
                        return Err(missing(&name));
                    }
                }
            }
            Ok(Outcome::command("CLOSE CURSOR"))
        }
        other => Err(ServerError::internal(format!(
            "not a cursor statement: {other}"
        ))),
    }
}

fn identifier(name: &datafusion::sql::sqlparser::ast::Ident) -> String {
    match name.quote_style {
        Some(_) => name.value.clone(),
        None => name.value.to_lowercase(),
    }
}

fn missing(name: &str) -> ServerError {
    ServerError::new("34000", format!("cursor \"{name}\" does not exist"))
}

/// The rows of a FETCH (or the count of a MOVE), and whether they are sent in binary.
pub async fn fetch<C: ClientInfo>(client: &C, fetch: &FetchStatement) -> Result<(Outcome, bool)> {
    let all = cursors(client);
    let mut open = all.0.lock().await;
    let cursor = open
        .get_mut(&fetch.cursor)
        .ok_or_else(|| missing(&fetch.cursor))?;
    let mut wanted = match fetch.count {
        FetchCount::Rows(n) => n,
        FetchCount::All => u64::MAX,
        FetchCount::Backward => {
            return Err(ServerError::new("55000", "cursor can only scan forward"))
        }
    };
    let mut batches = Vec::new();
    let mut rows = 0u64;
    while wanted > 0 {
        let batch = match cursor.pending.take() {
            Some(batch) => batch,
            None => match cursor.stream.next().await {
                Some(batch) => batch?,
                None => break,
            },
        };
        let available = batch.num_rows() as u64;
        if available > wanted {
            let take = wanted as usize;
            cursor.pending = Some(batch.slice(take, batch.num_rows() - take));
            batches.push(batch.slice(0, take));
            rows += wanted;
            break;
        }
        wanted -= available;
        rows += available;
        batches.push(batch);
    }
    if fetch.move_only {
        return Ok((Outcome::with_rows("MOVE", Some(rows as usize)), false));
    }
    let outcome = Outcome::Rows {
        schema: cursor.schema.clone(),
        batches,
    };
    Ok((outcome, cursor.binary))
}

/// The columns a FETCH returns, for Describe (none for a MOVE or an unknown cursor).
pub fn fetch_schema<C: ClientInfo>(client: &C, fetch: &FetchStatement) -> Option<SchemaRef> {
    if fetch.move_only {
        return None;
    }
    let all = client.session_extensions().get::<Cursors>()?;
    let open = all.0.try_lock().ok()?;
    open.get(&fetch.cursor).map(|cursor| cursor.schema.clone())
}

/// The end of a transaction closes the cursors declared without HOLD.
pub async fn end_transaction<C: ClientInfo>(client: &C) {
    if let Some(all) = client.session_extensions().get::<Cursors>() {
        all.0.lock().await.retain(|_, cursor| cursor.hold);
    }
}

/// `DISCARD ALL`: every cursor is closed.
pub fn close_all<C: ClientInfo>(client: &C) {
    if let Some(all) = client.session_extensions().get::<Cursors>() {
        if let Ok(mut open) = all.0.try_lock() {
            open.clear();
        }
    }
}
