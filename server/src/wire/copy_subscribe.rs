//! `COPY (SUBSCRIBE ...) TO STDOUT`: the subscription's rows as COPY data, sent as they
//! come and flushed after each batch (psql prints them as they arrive). It ends only with
//! an error (the relation dropped, the client too far behind), a cancel, or the client
//! leaving; an idle subscription sends an empty CopyData every second (clients skip them),
//! so that a client that left is noticed and its subscription released.

use std::fmt::Debug;
use std::time::Duration;

use datafusion::sql::sqlparser::ast::Statement;
use eddy_planner::statement::SubscribeStatement;
use futures::{FutureExt, Sink, SinkExt};
use pgwire::api::results::Response;
use pgwire::api::ClientInfo;
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyOutResponse};
use pgwire::messages::PgWireBackendMessage;

use crate::database::Database;
use crate::error::ServerError;
use crate::query::subscription_rows::SubscriptionRows;
use crate::wire::copy::CopyWriter;

/// How long an idle subscription waits before checking that its client is there.
const KEEPALIVE: Duration = Duration::from_secs(1);

/// Runs the subscription until it fails or the client leaves (an error of the connection).
pub async fn run<C>(
    db: &Database,
    client: &mut C,
    subscribe: &SubscribeStatement,
    copy: &Statement,
) -> PgWireResult<Response>
where
    C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let error = |e: ServerError| Ok(Response::Error(Box::new(e.into_error_info())));
    let mut rows = match db.subscribe(subscribe).await {
        Ok(rows) => rows,
        Err(e) => return error(e),
    };
    let mut writer = match CopyWriter::new(copy, &rows.schema(), client.metadata()) {
        Ok(writer) => writer,
        Err(e) => return error(e),
    };
    let columns = writer.columns();
    let formats = vec![i16::from(writer.format_code()); columns];
    client
        .feed(PgWireBackendMessage::CopyOutResponse(CopyOutResponse::new(
            writer.format_code(),
            columns as i16,
            formats,
        )))
        .await?;
    if let Some(header) = writer.take_header() {
        client.feed(PgWireBackendMessage::CopyData(header)).await?;
    }
    client.flush().await?;
    loop {
        let batch = match tokio::time::timeout(KEEPALIVE, rows.next()).await {
            Err(_) => {
                client
                    .send(PgWireBackendMessage::CopyData(CopyData::new(
                        Default::default(),
                    )))
                    .await?;
                continue;
            }
            Ok(Err(e)) => return error(e),
            Ok(Ok(batch)) => batch,
        };
        if let Err(e) = send_rows(client, &mut writer, &batch).await? {
            return error(e);
        }
        // What else is ready goes in the same flush.
        while let Some(ready) = next_ready(&mut rows) {
            match ready {
                Ok(batch) => {
                    if let Err(e) = send_rows(client, &mut writer, &batch).await? {
                        return error(e);
                    }
                }
                Err(e) => return error(e),
            }
        }
        client.flush().await?;
    }
}

fn next_ready(
    rows: &mut SubscriptionRows,
) -> Option<Result<datafusion::arrow::array::RecordBatch, ServerError>> {
    rows.next().now_or_never()
}

/// Feeds `batch`'s rows; the outer error is the connection's, the inner one the rows'.
async fn send_rows<C>(
    client: &mut C,
    writer: &mut CopyWriter,
    batch: &datafusion::arrow::array::RecordBatch,
) -> PgWireResult<Result<(), ServerError>>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let data = match writer.rows(batch) {
        Ok(data) => data,
        Err(e) => return Ok(Err(e)),
    };
    for data in data {
        client.feed(PgWireBackendMessage::CopyData(data)).await?;
    }
    Ok(Ok(()))
}
