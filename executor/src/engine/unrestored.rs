//! A reload that could not finish (the store could not be read: too many open files, an I/O
//! error) leaves the objects it did not restore here. They are restored before the next
//! command or commit; until that succeeds, commands and commits fail with the store's error
//! rather than acting on an engine missing some of its objects.

use super::{Command, Engine};
use crate::{ExecError, Result};

impl Engine {
    /// Restores what a reload left; on an error, what is still left waits for the next try.
    pub(super) fn restore_unrestored(&mut self) -> Result<()> {
        while let Some((entry, object)) = self.unrestored.first().cloned() {
            self.restore(entry, object)?;
            self.unrestored.remove(0);
        }
        Ok(())
    }
}

impl Command {
    /// Answers the command with `error`, without running it.
    pub(super) fn fail(self, error: ExecError) {
        match self {
            Command::CreateTable { reply, .. }
            | Command::CreateView { reply, .. }
            | Command::CreateIndex { reply, .. } => drop(reply.send(Err(error))),
            Command::CreateSource { reply, .. }
            | Command::CreateSink { reply, .. }
            | Command::Restore { reply, .. }
            | Command::Drop { reply, .. }
            | Command::PutPlainView { reply, .. }
            | Command::Rename { reply, .. }
            | Command::Recover { reply }
            | Command::Shutdown { reply } => drop(reply.send(Err(error))),
            Command::CatalogEntry { reply, .. } => drop(reply.send(Err(error))),
            Command::Insert { reply, .. }
            | Command::Delete { reply, .. }
            | Command::Update { reply, .. }
            | Command::Flush { reply } => drop(reply.send(Err(error))),
            Command::Subscribe { reply, .. } => drop(reply.send(Err(error))),
        }
    }
}
