//! Execute of a portal, its rows streamed. pgwire 0.41 gathers a portal's rows into a vector
//! before it sends the first, reserved by the row limit the client named: every row of a
//! portal without a limit held in memory, and a limit of 2^31 - 1 a reservation of tens of
//! gigabytes. Here the rows go to the client one by one as the query produces them, up to the
//! limit (then PortalSuspended, and the next Execute goes on). A cursor declared in SQL is
//! executed as a portal too ([`crate::wire::cursor_portals`]).

use std::fmt::Debug;

use futures::{Sink, SinkExt, StreamExt};
use pgwire::api::copy::send_copy_out_response;
use pgwire::api::portal::{Portal, PortalExecutionState};
use pgwire::api::query::{send_execution_response, ExtendedQueryHandler};
use pgwire::api::results::{Response, Tag};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{ClientInfo, ClientPortalStore, PgWireConnectionState, DEFAULT_NAME};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::extendedquery::{Execute, PortalSuspended};
use pgwire::messages::response::{EmptyQueryResponse, TransactionStatus};
use pgwire::messages::PgWireBackendMessage;

/// Runs an Execute: a protocol portal's rows streamed up to its row limit, or an SQL cursor's.
pub async fn execute<H, C>(handler: &H, client: &mut C, message: Execute) -> PgWireResult<()>
where
    H: ExtendedQueryHandler,
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore<Statement = H::Statement>,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
    // The connection loop makes a negative limit 0 (no limit), as Postgres reads it.
    let max_rows = usize::try_from(message.max_rows).unwrap_or(0);
    let ready = matches!(client.state(), PgWireConnectionState::ReadyForQuery);
    let portal = match client.portal_store().get_portal(name) {
        Some(Entry::Value(portal)) => portal,
        // An empty query's portal, a missing one, a connection busy: as pgwire answers them,
        // unless the name is an SQL cursor's.
        _ => {
            if ready
                && !matches!(client.portal_store().get_portal(name), Some(Entry::Empty))
                && crate::wire::cursor_portals::execute(client, name, max_rows).await?
            {
                return Ok(());
            }
            return handler._on_execute(client, message).await;
        }
    };
    if !ready {
        return handler._on_execute(client, message).await;
    }
    let mut transaction = client.transaction_status();
    client.set_state(PgWireConnectionState::QueryInProgress);
    let fresh = matches!(*portal.state().lock().await, PortalExecutionState::Initial);
    if fresh {
        if max_rows == 0 {
            // Every row at once: nothing to keep for a later Execute.
            *portal.state().lock().await = PortalExecutionState::Finished;
        }
        match handler.do_query(client, portal.as_ref(), max_rows).await? {
            Response::Query(mut results) if max_rows == 0 => {
                let tag = results.command_tag().to_owned();
                let mut rows = 0;
                while let Some(row) = results.data_rows().next().await {
                    client.feed(PgWireBackendMessage::DataRow(row?)).await?;
                    rows += 1;
                }
                let tag = Tag::new(&tag).with_rows(rows);
                client
                    .send(PgWireBackendMessage::CommandComplete(tag.into()))
                    .await?;
            }
            Response::Query(results) => {
                portal.start(results).await;
                send_rows(client, &portal, max_rows).await?;
            }
            other => transaction = respond(client, other, transaction).await?,
        }
    } else {
        send_rows(client, &portal, max_rows).await?;
    }
    client.set_state(PgWireConnectionState::ReadyForQuery);
    client.set_transaction_status(transaction);
    Ok(())
}

/// Sends the next `max_rows` rows of a started portal, one at a time, then PortalSuspended
/// when the limit stopped them or CommandComplete at the end.
async fn send_rows<S: Clone, C>(
    client: &mut C,
    portal: &Portal<S>,
    max_rows: usize,
) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let state = portal.state();
    let mut state = state.lock().await;
    let PortalExecutionState::Suspended(results) = &mut *state else {
        // Run to its end before: nothing more.
        let tag = Tag::new("SELECT").with_rows(0);
        client
            .send(PgWireBackendMessage::CommandComplete(tag.into()))
            .await?;
        return Ok(());
    };
    let tag = results.command_tag().to_owned();
    let mut rows = 0;
    while max_rows == 0 || rows < max_rows {
        let Some(row) = results.data_rows().next().await else {
            *state = PortalExecutionState::Finished;
            let tag = Tag::new(&tag).with_rows(rows);
            client
                .send(PgWireBackendMessage::CommandComplete(tag.into()))
                .await?;
            return Ok(());
        };
        client.feed(PgWireBackendMessage::DataRow(row?)).await?;
        rows += 1;
    }
    client
        .send(PgWireBackendMessage::PortalSuspended(PortalSuspended::new()))
        .await?;
    Ok(())
}

/// Answers a statement that returns no rows; returns the transaction status after it.
async fn respond<C>(
    client: &mut C,
    response: Response,
    transaction: TransactionStatus,
) -> PgWireResult<TransactionStatus>
where
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    Ok(match response {
        Response::Query(_) => transaction,
        Response::EmptyQuery => {
            client
                .feed(PgWireBackendMessage::EmptyQueryResponse(
                    EmptyQueryResponse::new(),
                ))
                .await?;
            transaction
        }
        Response::Execution(tag) => {
            send_execution_response(client, tag).await?;
            transaction
        }
        Response::TransactionStart(tag) => {
            send_execution_response(client, tag).await?;
            transaction.to_in_transaction_state()
        }
        Response::TransactionEnd(tag) => {
            send_execution_response(client, tag).await?;
            client.portal_store().rm_portal(DEFAULT_NAME);
            transaction.to_idle_state()
        }
        Response::Error(error) => {
            client
                .send(PgWireBackendMessage::ErrorResponse((*error).into()))
                .await?;
            transaction.to_error_state()
        }
        Response::CopyOut(copy) => {
            send_copy_out_response(client, copy).await?;
            transaction
        }
        Response::CopyIn(_) | Response::CopyBoth(_) => {
            return Err(PgWireError::ApiError(
                "COPY FROM is not supported in the extended protocol".into(),
            ))
        }
    })
}
