//! A cursor declared in SQL is a portal of the connection, as in Postgres: a Describe of the
//! portal by the cursor's name answers its columns, and an Execute of it sends its next rows
//! (suspended when the row limit stopped them). psycopg 3's named cursors describe the portal
//! right after their `DECLARE`.

use std::fmt::Debug;
use std::sync::Arc;

use futures::{Sink, SinkExt};
use pgwire::api::portal::Format;
use pgwire::api::query::send_describe_response;
use pgwire::api::results::{DescribePortalResponse, Tag};
use pgwire::api::ClientInfo;
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::extendedquery::PortalSuspended;
use pgwire::messages::PgWireBackendMessage;

use crate::session::{cursors, settings};
use crate::wire::{encoding, result_columns};

fn format(binary: bool) -> Format {
    if binary {
        Format::UnifiedBinary
    } else {
        Format::UnifiedText
    }
}

/// Describes cursor `name` as a portal; false when no such cursor is open.
pub async fn describe<C>(client: &mut C, name: &str) -> PgWireResult<bool>
where
    C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let Some((schema, binary)) = cursors::columns(client, name).await else {
        return Ok(false);
    };
    let options = settings::format_options(client.metadata());
    let fields = result_columns::pg_fields(&schema, &format(binary), Some(options))?;
    send_describe_response(client, &DescribePortalResponse::new(fields)).await?;
    Ok(true)
}

/// Sends the next `max_rows` rows of cursor `name` (0: all left), then PortalSuspended or
/// CommandComplete; false when no such cursor is open.
pub async fn execute<C>(client: &mut C, name: &str, max_rows: usize) -> PgWireResult<bool>
where
    C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let Some(fetched) = cursors::next_rows(client, name, max_rows).await else {
        return Ok(false);
    };
    let (schema, binary, batches, suspended) = fetched.map_err(|e| e.into_pgwire())?;
    let options = settings::format_options(client.metadata());
    let fields = Arc::new(result_columns::pg_fields(
        &schema,
        &format(binary),
        Some(options.clone()),
    )?);
    let mut rows = 0usize;
    for batch in &batches {
        for row in encoding::data_rows(fields.clone(), batch, &options) {
            client.feed(PgWireBackendMessage::DataRow(row?)).await?;
            rows += 1;
        }
    }
    if suspended {
        client
            .send(PgWireBackendMessage::PortalSuspended(PortalSuspended::new()))
            .await?;
    } else {
        let tag = Tag::new("SELECT").with_rows(rows);
        client
            .send(PgWireBackendMessage::CommandComplete(tag.into()))
            .await?;
    }
    Ok(true)
}
