//! Server-side cursors: `DECLARE name [BINARY] [[NO] SCROLL] CURSOR [WITH[OUT] HOLD] FOR query`,
//! `FETCH`, `MOVE` and `CLOSE` (psycopg2's named cursors, SQLAlchemy's `stream_results`). A
//! cursor holds the query's running batch stream: each FETCH pulls only the batches it needs.
//! A cursor without SCROLL moves forward only (`55000` for a way back, as Postgres answers a
//! NO SCROLL cursor) and keeps no rows it sent; a SCROLL cursor keeps the rows it has pulled,
//! so that it can go back to them (`PRIOR`, `BACKWARD`, `ABSOLUTE`, `RELATIVE`, `FIRST`,
//! `LAST`), with Postgres' positions: 0 before the first row, n + 1 after the last.
//! A cursor over a `SUBSCRIBE` never ends: a FETCH returns the rows ready once it has one,
//! waiting for the first up to `WITH (timeout = '...')`.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, UInt32Array};
use datafusion::arrow::compute::take_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::sql::sqlparser::ast::{CloseCursor, Declare, DeclareType, Statement};
use eddy_planner::cursor_statement::{FetchCount, FetchStatement};
use eddy_planner::statement::SubscribeStatement;
use futures::{FutureExt, StreamExt};
use pgwire::api::ClientInfo;
use pgwire::messages::response::TransactionStatus;
use tokio::sync::Mutex;

use crate::database::{Database, Outcome};
use crate::error::{Result, ServerError};

/// One open cursor.
struct Cursor {
    schema: SchemaRef,
    stream: SendableRecordBatchStream,
    /// Rows of the last batch that a FETCH did not take yet (forward-only cursors).
    pending: Option<RecordBatch>,
    binary: bool,
    /// WITH HOLD: survives the end of its transaction.
    hold: bool,
    /// SCROLL: keeps every row pulled, in `pulled`.
    scroll: bool,
    pulled: Vec<RecordBatch>,
    pulled_rows: u64,
    /// The query has no rows left to pull.
    exhausted: bool,
    /// The memory the rows a SCROLL cursor keeps may take (the query memory limit).
    memory_limit: usize,
    kept_bytes: usize,
    /// The current row (1-based; 0 before the first; rows + 1 after the last).
    position: u64,
    /// A forward-only cursor went past its last row.
    past_end: bool,
    /// Over a `SUBSCRIBE`: its rows never end, and a FETCH returns the rows that are ready
    /// once it has one (waiting for the first up to its timeout).
    subscription: bool,
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
                let frame =
                    crate::query::query_memory::dataframe(&db.ctx, db.query_memory_limit(), plan)?;
                let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
                let stream = crate::query::blocking_polls::future(frame.execute_stream()).await?;
                let stream = crate::query::blocking_polls::stream(stream);
                let cursor = Cursor {
                    schema,
                    stream,
                    pending: None,
                    binary: declare.binary == Some(true),
                    hold,
                    scroll: declare.scroll == Some(true),
                    pulled: Vec::new(),
                    pulled_rows: 0,
                    exhausted: false,
                    memory_limit: db.query_memory_limit(),
                    kept_bytes: 0,
                    position: 0,
                    past_end: false,
                    subscription: false,
                };
                open_cursor(client, declare, cursor).await?;
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

/// Opens `cursor` under the name `declare` gives it (42P03 when one is open by that name).
async fn open_cursor<C: ClientInfo>(client: &C, declare: &Declare, cursor: Cursor) -> Result<()> {
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
    Ok(())
}

/// `DECLARE c CURSOR FOR SUBSCRIBE ...`: each FETCH returns the subscription's next rows,
/// waiting for the first up to its `timeout`.
pub async fn declare_subscription<C: ClientInfo>(
    db: &Database,
    client: &C,
    declare: &Statement,
    subscribe: &SubscribeStatement,
) -> Result<Outcome> {
    let Statement::Declare { stmts } = declare else {
        return Err(ServerError::internal("not a DECLARE"));
    };
    let [declare] = stmts.as_slice() else {
        return Err(ServerError::not_supported("DECLARE of several cursors"));
    };
    let hold = declare.hold == Some(true);
    if !hold && client.transaction_status() == TransactionStatus::Idle {
        return Err(ServerError::new(
            "25P01",
            "DECLARE CURSOR can only be used in transaction blocks",
        ));
    }
    if declare.scroll == Some(true) {
        return Err(ServerError::not_supported(
            "a SCROLL cursor over SUBSCRIBE: its rows are not kept",
        ));
    }
    let rows = db.subscribe(subscribe).await?;
    let schema = rows.schema();
    let stream = futures::stream::unfold(rows, |mut rows| async move {
        let batch = rows
            .next()
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)));
        Some((batch, rows))
    });
    let cursor = Cursor {
        stream: Box::pin(RecordBatchStreamAdapter::new(schema.clone(), stream)),
        schema,
        pending: None,
        binary: declare.binary == Some(true),
        hold,
        scroll: false,
        pulled: Vec::new(),
        pulled_rows: 0,
        exhausted: false,
        memory_limit: db.query_memory_limit(),
        kept_bytes: 0,
        position: 0,
        past_end: false,
        subscription: true,
    };
    open_cursor(client, declare, cursor).await?;
    Ok(Outcome::command("DECLARE CURSOR"))
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
    let (batches, rows) = if cursor.scroll {
        cursor.scroll_to(fetch.count).await?
    } else if cursor.subscription {
        cursor.forward_live(fetch.count, fetch.timeout).await?
    } else {
        cursor.forward(fetch.count).await?
    };
    if fetch.move_only {
        return Ok((Outcome::with_rows("MOVE", Some(rows as usize)), false));
    }
    let outcome = Outcome::Rows {
        schema: cursor.schema.clone(),
        batches,
    };
    Ok((outcome, cursor.binary))
}

fn only_forward() -> ServerError {
    ServerError::new(
        "55000",
        "cursor can only scan forward: declare it with SCROLL to move back",
    )
}

impl Cursor {
    /// Pulls the next batch of the query (`None` at its end).
    async fn pull(&mut self) -> Result<Option<RecordBatch>> {
        if self.exhausted {
            return Ok(None);
        }
        match self.stream.next().await {
            Some(batch) => Ok(Some(batch?)),
            None => {
                self.exhausted = true;
                Ok(None)
            }
        }
    }

    /// A forward-only cursor: the next rows, pulled as they are needed and not kept.
    async fn forward(&mut self, count: FetchCount) -> Result<(Vec<RecordBatch>, u64)> {
        // RELATIVE n and ABSOLUTE n ahead of the cursor skip to one row.
        let (skip, mut wanted) = match count {
            FetchCount::Forward(n) => (0, n),
            FetchCount::ForwardAll => (0, u64::MAX),
            FetchCount::Relative(n) if n > 0 => (n as u64 - 1, 1),
            FetchCount::Absolute(n) if n > 0 && n as u64 > self.position => {
                (n as u64 - self.position - 1, 1)
            }
            _ => return Err(only_forward()),
        };
        let mut skipping = skip;
        let mut batches = Vec::new();
        let mut rows = 0u64;
        while wanted > 0 {
            let batch = match self.pending.take() {
                Some(batch) => batch,
                None => match self.pull().await? {
                    Some(batch) => batch,
                    None => break,
                },
            };
            let mut batch = batch;
            if skipping > 0 {
                let skipped = skipping.min(batch.num_rows() as u64);
                skipping -= skipped;
                self.position += skipped;
                batch = batch.slice(skipped as usize, batch.num_rows() - skipped as usize);
                if batch.num_rows() == 0 {
                    continue;
                }
            }
            let available = batch.num_rows() as u64;
            if available > wanted {
                let take = wanted as usize;
                self.pending = Some(batch.slice(take, batch.num_rows() - take));
                batches.push(batch.slice(0, take));
                rows += wanted;
                self.position += wanted;
                wanted = 0;
                break;
            }
            wanted -= available;
            rows += available;
            self.position += available;
            batches.push(batch);
        }
        if wanted > 0 && !self.past_end {
            // Past the last row.
            self.position += 1;
            self.past_end = true;
        }
        Ok((batches, rows))
    }

    /// A cursor over a `SUBSCRIBE`: up to `count` rows, those ready once there is one; the
    /// first waited for up to `timeout` (none: until it comes).
    async fn forward_live(
        &mut self,
        count: FetchCount,
        timeout: Option<std::time::Duration>,
    ) -> Result<(Vec<RecordBatch>, u64)> {
        let mut wanted = match count {
            FetchCount::Forward(n) => n,
            FetchCount::ForwardAll => u64::MAX,
            _ => return Err(only_forward()),
        };
        let mut batches = Vec::new();
        let mut rows = 0u64;
        while wanted > 0 {
            let batch = match self.pending.take() {
                Some(batch) => batch,
                None if rows > 0 => match self.stream.next().now_or_never() {
                    Some(Some(batch)) => batch?,
                    _ => break,
                },
                None => {
                    let next = self.stream.next();
                    let next = match timeout {
                        Some(limit) => match tokio::time::timeout(limit, next).await {
                            Ok(next) => next,
                            Err(_) => break,
                        },
                        None => next.await,
                    };
                    match next {
                        Some(batch) => batch?,
                        None => break,
                    }
                }
            };
            let available = batch.num_rows() as u64;
            if available > wanted {
                let take = wanted as usize;
                self.pending = Some(batch.slice(take, batch.num_rows() - take));
                batches.push(batch.slice(0, take));
                rows += wanted;
                break;
            }
            wanted -= available;
            rows += available;
            batches.push(batch);
        }
        self.position += rows;
        Ok((batches, rows))
    }

    /// Keeps pulling until `rows` rows are kept (or every row, for `u64::MAX`).
    async fn keep_to(&mut self, rows: u64) -> Result<()> {
        while self.pulled_rows < rows {
            let Some(batch) = self.pull().await? else {
                break;
            };
            self.kept_bytes += batch.get_array_memory_size();
            if self.kept_bytes > self.memory_limit {
                return Err(ServerError::new(
                    "53200",
                    format!(
                        "a SCROLL cursor keeps the rows it has read, and they passed the query \
                         memory limit ({} bytes): read fewer rows, or use a cursor without SCROLL",
                        self.memory_limit
                    ),
                ));
            }
            self.pulled_rows += batch.num_rows() as u64;
            self.pulled.push(batch);
        }
        Ok(())
    }

    /// Kept rows `from..=to` (1-based), in that order or, `backward`, the last first.
    fn kept(&self, from: u64, to: u64, backward: bool) -> Result<Vec<RecordBatch>> {
        let mut batches = Vec::new();
        let mut first = 1u64;
        for batch in &self.pulled {
            let last = first + batch.num_rows() as u64 - 1;
            if batch.num_rows() > 0 && last >= from && first <= to {
                let start = from.max(first) - first;
                let end = to.min(last) - first;
                batches.push(batch.slice(start as usize, (end - start + 1) as usize));
            }
            first = last + 1;
        }
        if backward {
            batches.reverse();
            batches = batches
                .into_iter()
                .map(|batch| {
                    let reversed: Vec<u32> = (0..batch.num_rows() as u32).rev().collect();
                    take_record_batch(&batch, &UInt32Array::from(reversed))
                        .map_err(|e| ServerError::from(DataFusionError::from(e)))
                })
                .collect::<Result<Vec<_>>>()?;
        }
        Ok(batches)
    }

    /// A SCROLL cursor: any direction, over the rows it keeps.
    async fn scroll_to(&mut self, count: FetchCount) -> Result<(Vec<RecordBatch>, u64)> {
        let p = self.position;
        match count {
            // FETCH 0 is the current row again, as RELATIVE 0.
            FetchCount::Forward(0) => self.one_row(p).await,
            FetchCount::Forward(n) => {
                self.keep_to(p.saturating_add(n)).await?;
                let total = self.pulled_rows;
                let end = p.saturating_add(n).min(total);
                let rows = end.saturating_sub(p);
                self.position = if p.saturating_add(n) > total {
                    total + 1
                } else {
                    end
                };
                Ok((self.kept(p + 1, end, false)?, rows))
            }
            FetchCount::ForwardAll => {
                self.keep_to(u64::MAX).await?;
                let total = self.pulled_rows;
                self.position = total + 1;
                Ok((self.kept(p + 1, total, false)?, total.saturating_sub(p)))
            }
            FetchCount::Backward(n) => {
                let from = p.saturating_sub(n).max(1);
                let to = p.saturating_sub(1);
                self.position = p.saturating_sub(n);
                let rows = (to + 1).saturating_sub(from);
                Ok((self.kept(from, to, true)?, rows))
            }
            FetchCount::BackwardAll => {
                self.position = 0;
                Ok((
                    self.kept(1, p.saturating_sub(1), true)?,
                    p.saturating_sub(1),
                ))
            }
            FetchCount::Absolute(n) if n >= 0 => self.one_row(n as u64).await,
            FetchCount::Absolute(n) => {
                self.keep_to(u64::MAX).await?;
                let target = (self.pulled_rows as i64 + 1).saturating_add(n);
                self.one_row(target.max(0) as u64).await
            }
            FetchCount::Relative(n) => {
                let target = (p as i64).saturating_add(n);
                self.one_row(target.max(0) as u64).await
            }
        }
    }

    /// Moves to row `target` and returns it; before the first or after the last, none.
    async fn one_row(&mut self, target: u64) -> Result<(Vec<RecordBatch>, u64)> {
        if target == 0 {
            self.position = 0;
            return Ok((vec![], 0));
        }
        self.keep_to(target).await?;
        if target > self.pulled_rows {
            self.position = self.pulled_rows + 1;
            return Ok((vec![], 0));
        }
        self.position = target;
        Ok((self.kept(target, target, false)?, 1))
    }
}

/// The columns of cursor `name` and whether it is BINARY, if it is open: a Describe of the
/// cursor as a portal (Postgres' cursors are the connection's portals; psycopg 3 describes a
/// named cursor so).
pub async fn columns<C: ClientInfo>(client: &C, name: &str) -> Option<(SchemaRef, bool)> {
    let all = client.session_extensions().get::<Cursors>()?;
    let open = all.0.lock().await;
    open.get(name)
        .map(|cursor| (cursor.schema.clone(), cursor.binary))
}

/// The next `max_rows` rows of cursor `name` (all that are left for 0), as an Execute of the
/// cursor as a portal takes them: the columns, whether they go in binary, the rows, and
/// whether the count stopped them (the portal is suspended, as Postgres says when it sent all
/// it was asked). `None` when no such cursor is open.
pub async fn next_rows<C: ClientInfo>(
    client: &C,
    name: &str,
    max_rows: usize,
) -> Option<Result<(SchemaRef, bool, Vec<RecordBatch>, bool)>> {
    let all = client.session_extensions().get::<Cursors>()?;
    let mut open = all.0.lock().await;
    let cursor = open.get_mut(name)?;
    let count = match max_rows {
        0 => FetchCount::ForwardAll,
        n => FetchCount::Forward(n as u64),
    };
    let fetched = if cursor.scroll {
        cursor.scroll_to(count).await
    } else if cursor.subscription {
        cursor.forward_live(count, None).await
    } else {
        cursor.forward(count).await
    };
    Some(fetched.map(|(batches, rows)| {
        let suspended = max_rows > 0 && rows == max_rows as u64;
        (cursor.schema.clone(), cursor.binary, batches, suspended)
    }))
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
