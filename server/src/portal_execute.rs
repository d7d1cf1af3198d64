//! Execute of a portal with no row limit, streamed. pgwire 0.41 gathers every row of such a
//! portal into one vector before it sends the first (`Portal::fetch(0)`), so one large result
//! held the whole of it in memory; here the rows go to the client as the query produces them.
//! An Execute with a row limit (a portal fetched a few rows at a time) stays pgwire's.

use std::fmt::Debug;

use futures::{Sink, SinkExt, StreamExt};
use pgwire::api::copy::send_copy_out_response;
use pgwire::api::portal::PortalExecutionState;
use pgwire::api::query::{send_execution_response, ExtendedQueryHandler};
use pgwire::api::results::{Response, Tag};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{ClientInfo, ClientPortalStore, PgWireConnectionState, DEFAULT_NAME};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::extendedquery::Execute;
use pgwire::messages::response::EmptyQueryResponse;
use pgwire::messages::PgWireBackendMessage;

/// Runs an Execute: streamed when it asks for every row of a portal not started yet, else as
/// pgwire does.
pub async fn execute<H, C>(handler: &H, client: &mut C, message: Execute) -> PgWireResult<()>
where
    H: ExtendedQueryHandler,
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore<Statement = H::Statement>,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
    let portal = match client.portal_store().get_portal(name) {
        Some(Entry::Value(portal)) => Some(portal),
        _ => None,
    };
    let fresh = match &portal {
        Some(portal) => matches!(*portal.state().lock().await, PortalExecutionState::Initial),
        None => false,
    };
    let ready = matches!(client.state(), PgWireConnectionState::ReadyForQuery);
    let (Some(portal), true, true, 0) = (portal, fresh, ready, message.max_rows) else {
        return handler._on_execute(client, message).await;
    };
    let mut transaction = client.transaction_status();
    client.set_state(PgWireConnectionState::QueryInProgress);
    *portal.state().lock().await = PortalExecutionState::Finished;
    match handler.do_query(client, portal.as_ref(), 0).await? {
        Response::Query(mut results) => {
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
        Response::EmptyQuery => {
            client
                .feed(PgWireBackendMessage::EmptyQueryResponse(
                    EmptyQueryResponse::new(),
                ))
                .await?;
        }
        Response::Execution(tag) => send_execution_response(client, tag).await?,
        Response::TransactionStart(tag) => {
            send_execution_response(client, tag).await?;
            transaction = transaction.to_in_transaction_state();
        }
        Response::TransactionEnd(tag) => {
            send_execution_response(client, tag).await?;
            transaction = transaction.to_idle_state();
            client.portal_store().rm_portal(DEFAULT_NAME);
        }
        Response::Error(error) => {
            client
                .send(PgWireBackendMessage::ErrorResponse((*error).into()))
                .await?;
            transaction = transaction.to_error_state();
        }
        Response::CopyOut(copy) => send_copy_out_response(client, copy).await?,
        Response::CopyIn(_) | Response::CopyBoth(_) => {
            return Err(PgWireError::ApiError(
                "COPY FROM is not supported in the extended protocol".into(),
            ))
        }
    }
    client.set_state(PgWireConnectionState::ReadyForQuery);
    client.set_transaction_status(transaction);
    Ok(())
}
