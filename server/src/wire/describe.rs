//! The answer to a Describe of a prepared statement. pgwire answers a statement with
//! parameters and no result columns (an `INSERT ... VALUES ($1, $2)`) with an empty
//! RowDescription; Postgres answers NoData, and JDBC's `executeBatch` relies on it ("A result
//! was returned when none was expected").

use std::fmt::Debug;

use futures::{Sink, SinkExt};
use pgwire::api::results::DescribeStatementResponse;
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::data::{FieldDescription, NoData, ParameterDescription, RowDescription};
use pgwire::messages::PgWireBackendMessage;

/// Sends ParameterDescription, then RowDescription or NoData.
pub async fn send_statement_description<C>(
    client: &mut C,
    description: &DescribeStatementResponse,
) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    client
        .send(PgWireBackendMessage::ParameterDescription(
            ParameterDescription::new(description.parameters.iter().map(|t| t.oid()).collect()),
        ))
        .await?;
    if description.fields.is_empty() {
        client
            .send(PgWireBackendMessage::NoData(NoData::new()))
            .await?;
    } else {
        let fields: Vec<FieldDescription> = description.fields.iter().map(Into::into).collect();
        client
            .send(PgWireBackendMessage::RowDescription(RowDescription::new(
                fields,
            )))
            .await?;
    }
    Ok(())
}
