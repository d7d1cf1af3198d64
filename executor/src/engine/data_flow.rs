//! Rows into tables and from them through the views that read them, with their watermarks.

use super::*;

impl Engine {
    pub(super) fn insert(&mut self, name: &str, batches: Vec<RecordBatch>) -> Result<u64> {
        let (_, table) = self.tables.get_mut(name).ok_or_else(|| {
            ExecError::UndefinedObject(format!("table \"{name}\" does not exist"))
        })?;
        let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        let late_before = table.rows_late();
        // DML is one split of its own; the statement's rows are judged together.
        let outcome = table.insert_statement(batches, "", self.store.as_ref());
        let (chunks, watermark) = self.abandon_on_error(outcome)?;
        let late = self.tables[name].1.rows_late() - late_before;
        for chunk in chunks {
            self.fan_out(name, (Some(chunk), None))?;
        }
        self.fan_out(name, (None, watermark))?;
        Ok(rows - late)
    }

    pub(super) fn change(
        &mut self,
        name: &str,
        apply: impl FnOnce(&mut TableRuntime, &dyn Store) -> Result<Option<crate::StreamChunk>>,
    ) -> Result<u64> {
        let (_, table) = self.tables.get_mut(name).ok_or_else(|| {
            ExecError::UndefinedObject(format!("table \"{name}\" does not exist"))
        })?;
        let chunk = apply(table, self.store.as_ref());
        let chunk = self.abandon_on_error(chunk)?;
        let rows = chunk.as_ref().map_or(0, |c| {
            c.ops
                .iter()
                .filter(|op| !matches!(op, crate::Op::UpdateDelete))
                .count() as u64
        });
        self.fan_out(name, (chunk, None))?;
        Ok(rows)
    }

    /// Pushes a table's changes (and its new watermark) through every view reading it.
    pub(super) fn fan_out(
        &mut self,
        table: &str,
        (chunk, watermark): (Option<crate::StreamChunk>, Option<crate::Watermark>),
    ) -> Result<()> {
        let messages = chunk
            .map(Message::Chunk)
            .into_iter()
            .chain(watermark.map(Message::Watermark))
            .collect();
        let result = self.deliver(table, messages);
        self.abandon_on_error(result)
    }

    /// Pushes the changes of `upstream` (a table, or a view's own changelog) through every view
    /// reading it, and theirs on to the views reading them.
    pub(super) fn deliver(&mut self, upstream: &str, messages: Vec<Message>) -> Result<()> {
        if messages.is_empty() {
            return Ok(());
        }
        self.take_for_sinks(upstream, &messages);
        self.take_for_subscriptions(upstream, &messages);
        let readers: Vec<String> = self
            .views
            .values()
            .filter(|v| v.plan.reads(upstream))
            .map(|v| v.entry.name.clone())
            .collect();
        for reader in readers {
            let changes = self.push_into_view(&reader, upstream, &messages)?;
            self.deliver(&reader, changes)?;
        }
        Ok(())
    }

    /// The watermarks a table or view's changelog has reached (a view: each of its clocks).
    pub(super) fn watermarks_of(&self, name: &str) -> Vec<crate::Watermark> {
        if let Some((_, table)) = self.tables.get(name) {
            return table.watermark().into_iter().collect();
        }
        self.views
            .get(name)
            .and_then(|view| view.graph.as_ref())
            .map_or_else(Vec::new, Graph::watermarks)
    }

    /// On an error after state may have changed, abandons the epoch: every statement in it
    /// fails and everything reloads from the last commit.
    pub(super) fn abandon_on_error<T>(&mut self, result: Result<T>) -> Result<T> {
        if let Err(error) = &result {
            let message = error.to_string();
            self.fail_pending(&format!(
                "the epoch was abandoned after an error in another statement: {message}"
            ));
            if let Err(reload) = self.reload() {
                tracing::error!(%reload, "reloading the last committed epoch failed");
            }
        }
        result
    }
}
