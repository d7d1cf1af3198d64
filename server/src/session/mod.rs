//! The statements a session answers itself, without the database: its settings (`SET`,
//! `SHOW`, `RESET`), SQL cursors (`DECLARE`, `FETCH`, `MOVE`, `CLOSE`; over a query or a
//! `SUBSCRIBE`), `PREPARE`/`EXECUTE`,
//! `DEALLOCATE`/`DISCARD`, `LOCK`, and the transaction a query string runs in
//! ([`transactions`]). Each kind is a [`Hook`]: the first hook that claims a statement
//! answers it; what no hook claims goes to the database.
//!
//! [`statement_shape`] describes statements (parameters, result columns) for the protocol's
//! Parse and for `PREPARE`.

pub mod cursors;
pub mod protocol_statements;
pub mod settings;
pub mod sql_prepare;
pub mod statement_shape;
pub mod transactions;

use datafusion::sql::sqlparser::ast::Statement;
use eddy_planner::statement::{ParsedStatement, SubscribeOutput};
use eddy_planner::EddyStatement;
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore};

use crate::database::{Database, Outcome};
use crate::error::Result;
use crate::pg::types::session_time_zone;
use statement_shape::StatementShapes;

/// What a session statement answered.
pub struct Answer {
    pub outcome: Outcome,
    /// Rows of a `BINARY` cursor: sent in binary whatever format the client asked for.
    pub binary: bool,
}

impl From<Outcome> for Answer {
    fn from(outcome: Outcome) -> Self {
        Self {
            outcome,
            binary: false,
        }
    }
}

/// A kind of statement the session answers, in the order they are tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    /// `FETCH` / `MOVE` from a cursor of this session.
    Fetch,
    /// `PREPARE name AS statement`.
    Prepare,
    /// `LOCK TABLE`: nothing to lock, checked like Postgres.
    Lock,
    /// `DEALLOCATE`, `DISCARD`.
    Protocol,
    /// `DECLARE`, `CLOSE`.
    Cursor,
    /// `SET`, `SHOW`, `RESET`, transactions' and savepoints' commands.
    Setting,
}

pub const HOOKS: [Hook; 6] = [
    Hook::Fetch,
    Hook::Prepare,
    Hook::Lock,
    Hook::Protocol,
    Hook::Cursor,
    Hook::Setting,
];

impl Hook {
    /// Whether this hook answers `statement`.
    pub fn claims(self, statement: &EddyStatement) -> bool {
        let sql = match statement {
            EddyStatement::Fetch(_) => return self == Hook::Fetch,
            EddyStatement::Subscribe {
                output: SubscribeOutput::Cursor(_),
                ..
            } => return self == Hook::Cursor,
            EddyStatement::Sql(sql) => sql.as_ref(),
            _ => return false,
        };
        match self {
            Hook::Fetch => false,
            Hook::Prepare => matches!(sql, Statement::Prepare { .. }),
            Hook::Lock => matches!(sql, Statement::Lock(_)),
            Hook::Protocol => protocol_statements::is_protocol_statement(sql),
            Hook::Cursor => cursors::is_cursor_statement(sql),
            Hook::Setting => settings::is_session_statement(sql),
        }
    }

    /// The hook that answers `statement`, if the session does.
    pub fn for_statement(statement: &EddyStatement) -> Option<Hook> {
        HOOKS.into_iter().find(|hook| hook.claims(statement))
    }
}

/// Answers `parsed` if the session does; `None` leaves it to the database.
pub async fn answer<C>(
    shapes: &StatementShapes,
    db: &Database,
    client: &mut C,
    parsed: &ParsedStatement,
) -> Option<Result<Answer>>
where
    C: ClientInfo + ClientPortalStore + Send + Sync,
    C::PortalStore: PortalStore,
{
    let hook = Hook::for_statement(&parsed.statement)?;
    let sql = match &parsed.statement {
        EddyStatement::Fetch(fetch) => {
            return Some(
                cursors::fetch(client, fetch)
                    .await
                    .map(|(outcome, binary)| Answer { outcome, binary }),
            )
        }
        EddyStatement::Subscribe {
            subscribe,
            output: SubscribeOutput::Cursor(declare),
        } => {
            let zone = settings::setting(client.metadata(), "timezone");
            let declared = cursors::declare_subscription(db, client, declare, subscribe);
            return Some(
                session_time_zone::within(zone, declared)
                    .await
                    .map(Answer::from),
            );
        }
        EddyStatement::Sql(sql) => sql.as_ref(),
        _ => return None,
    };
    let answered = match hook {
        Hook::Fetch => return None,
        Hook::Prepare => sql_prepare::prepare(shapes, client, parsed, sql).await,
        Hook::Lock => match sql {
            Statement::Lock(lock) => protocol_statements::lock(db, client, lock),
            _ => return None,
        },
        Hook::Protocol => protocol_statements::execute(client, sql),
        Hook::Cursor => {
            // A cursor's query reads timestamps in the session's zone.
            let zone = settings::setting(client.metadata(), "timezone");
            session_time_zone::within(zone, cursors::execute(db, client, sql)).await
        }
        Hook::Setting => settings::execute(client.metadata_mut(), sql),
    };
    Some(answered.map(Answer::from))
}
