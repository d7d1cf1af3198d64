//! The transaction the statements of one simple Query run in, as Postgres runs them: several
//! statements sent in one Query string form an implicit transaction block (a cursor may be
//! declared there, and closes at its end) unless `BEGIN` opens an explicit one; `COMMIT` or
//! `ROLLBACK` ends that, and the statements after it are in an implicit block again.
//! (`psql -c "BEGIN; DECLARE c CURSOR FOR ...; FETCH 2 FROM c; COMMIT"` works as sent.)
//!
//! Each statement must see the block the ones before it opened: the wire library sets a
//! connection's transaction status only once the whole string has run, from its responses.

use pgwire::api::results::Response;
use pgwire::api::ClientInfo;
use pgwire::messages::response::TransactionStatus;

use crate::session::cursors;

/// The block the statements of one Query string are in.
pub struct QueryBlock {
    /// In an implicit block, which this Query string opened and closes.
    implicit: bool,
}

impl QueryBlock {
    /// Before the `count` statements of a Query string.
    pub fn open<C: ClientInfo>(client: &mut C, count: usize) -> Self {
        let implicit = count > 1 && client.transaction_status() == TransactionStatus::Idle;
        if implicit {
            client.set_transaction_status(TransactionStatus::Transaction);
        }
        Self { implicit }
    }

    /// After one statement's response: `BEGIN` makes the block explicit, `COMMIT` and
    /// `ROLLBACK` end it (the statements after them are in an implicit block again).
    pub fn after<C: ClientInfo>(&mut self, client: &mut C, response: &Response) {
        match response {
            Response::TransactionStart(_) => {
                self.implicit = false;
                client.set_transaction_status(TransactionStatus::Transaction);
            }
            Response::TransactionEnd(_) => {
                self.implicit = true;
                client.set_transaction_status(TransactionStatus::Transaction);
            }
            _ => {}
        }
    }

    /// After the string's last statement (or the first that failed): an implicit block ends
    /// there, closing the cursors declared in it.
    pub async fn close<C: ClientInfo>(self, client: &mut C) {
        if self.implicit {
            client.set_transaction_status(TransactionStatus::Idle);
            cursors::end_transaction(client).await;
        }
    }
}
