//! SQL statements about the connection's protocol state that drivers and poolers send:
//! `DEALLOCATE [PREPARE] name | ALL` (psycopg 3 after a ROLLBACK, a DROP or an ALTER) and
//! `DISCARD ALL` (pgbouncer between clients), and `LOCK TABLE` (pg_dump locks what it dumps).

use datafusion::sql::sqlparser::ast::{DiscardObject, Lock, Statement};
use pgwire::api::store::PortalStore;
use pgwire::api::ClientPortalStore;

use crate::database::{Database, Outcome};
use crate::error::{Result, ServerError};

/// Whether this statement is answered here.
pub fn is_protocol_statement(statement: &Statement) -> bool {
    matches!(
        statement,
        Statement::Deallocate { .. } | Statement::Discard { .. }
    )
}

/// Runs DEALLOCATE or DISCARD against the connection's prepared statements, portals,
/// settings and cursors.
pub fn execute<C>(client: &mut C, statement: &Statement) -> Result<Outcome>
where
    C: ClientPortalStore + pgwire::api::ClientInfo,
    C::PortalStore: PortalStore,
{
    match statement {
        // pgwire's store cannot list its statements; every Parse replaces the statement of its
        // name, so a client that re-prepares after DEALLOCATE ALL gets its new statements.
        Statement::Deallocate { name, .. }
            if name.quote_style.is_none() && name.value.eq_ignore_ascii_case("all") =>
        {
            crate::session::sql_prepare::deallocate_all(client);
            Ok(Outcome::command("DEALLOCATE ALL"))
        }
        Statement::Deallocate { name, .. }
            if crate::session::sql_prepare::deallocate(
                client,
                &eddy_planner::names::fold(name),
            ) =>
        {
            Ok(Outcome::command("DEALLOCATE"))
        }
        Statement::Deallocate { name, .. } => {
            let store = client.portal_store();
            if store.get_statement(&name.value).is_none() {
                return Err(ServerError::new(
                    "26000",
                    format!("prepared statement \"{}\" does not exist", name.value),
                ));
            }
            store.rm_statement(&name.value);
            Ok(Outcome::command("DEALLOCATE"))
        }
        Statement::Discard { object_type } => {
            match object_type {
                DiscardObject::ALL => {
                    client.portal_store().clear_portals();
                    crate::session::sql_prepare::deallocate_all(client);
                    crate::session::settings::reset_all(client.metadata_mut());
                    crate::session::cursors::close_all(client);
                }
                // No plan cache, sequences or temporary tables: nothing to forget.
                DiscardObject::PLANS | DiscardObject::SEQUENCES | DiscardObject::TEMP => {}
            }
            Ok(Outcome::command(&format!("DISCARD {object_type}")))
        }
        other => Err(ServerError::internal(format!(
            "not a protocol statement: {other}"
        ))),
    }
}

/// `LOCK TABLE`: reads see one snapshot each and writes are serialized by the engine, so
/// there is nothing to take; the tables must exist, and as in Postgres it needs a transaction.
pub fn lock<C: pgwire::api::ClientInfo>(db: &Database, client: &C, lock: &Lock) -> Result<Outcome> {
    use pgwire::messages::response::TransactionStatus;
    if client.transaction_status() == TransactionStatus::Idle {
        return Err(ServerError::new(
            "25P01",
            "LOCK TABLE can only be used in transaction blocks",
        ));
    }
    for target in &lock.tables {
        let name = eddy_planner::names::resolve_object_name(&target.name)?;
        if !db.exists(&name) {
            return Err(ServerError::new(
                "42P01",
                format!("relation \"{name}\" does not exist"),
            ));
        }
    }
    Ok(Outcome::command("LOCK TABLE"))
}
