//! Plain views' catalog entries and `ALTER ... RENAME TO`.
//!
//! A plain view keeps no rows and runs no graph: the engine only keeps its definition in the
//! catalog (committed with the epoch like any other change) and its name among the taken
//! ones. The server plans its query where it is read.

use eddy_storage::keys::{LATE_ROWS_TABLE, VIEW_ERRORS_TABLE};
use eddy_storage::{CatalogEntry, ObjectKind};

use super::Engine;
use crate::{ExecError, Result};

impl Engine {
    /// `CREATE [OR REPLACE] VIEW`: a new entry, or the definition of the existing one replaced
    /// in place (its sequence kept, so it is restored before the objects that read it).
    pub(super) fn put_plain_view(
        &mut self,
        name: String,
        sql: String,
        replace: bool,
    ) -> Result<()> {
        if let Some(entry) = self.plain_views.get_mut(&name) {
            if !replace {
                return Err(ExecError::DuplicateObject(format!(
                    "relation \"{name}\" already exists"
                )));
            }
            entry.sql = sql;
            entry.write(&mut self.epoch_writes)?;
            return Ok(());
        }
        if self.name_taken(&name) {
            return Err(ExecError::DuplicateObject(format!(
                "relation \"{name}\" already exists"
            )));
        }
        let entry = self.new_entry(ObjectKind::View, name.clone(), sql, 0)?;
        self.plain_views.insert(name, entry);
        Ok(())
    }

    /// `ALTER ... RENAME TO`: the object's entry takes the new name (its definition is
    /// restored under the entry's name); `rewrites` replace the definitions of the plain views
    /// that read it. A materialized view's graph reads its inputs by name, so an object a
    /// materialized view reads, and objects a connector feeds, are not renamed.
    pub(super) fn rename(
        &mut self,
        old: &str,
        new: &str,
        rewrites: Vec<(String, String)>,
    ) -> Result<()> {
        if !self.name_taken(old) {
            return Err(ExecError::UndefinedObject(format!(
                "relation \"{old}\" does not exist"
            )));
        }
        if self.name_taken(new) {
            return Err(ExecError::DuplicateObject(format!(
                "relation \"{new}\" already exists"
            )));
        }
        let readers: Vec<String> = self
            .views
            .values()
            .filter(|v| v.plan.reads(old))
            .map(|v| format!("\"{}\"", v.entry.name))
            .collect();
        if !readers.is_empty() {
            return Err(ExecError::NotSupported(format!(
                "cannot rename \"{old}\": materialized view {} reads it (drop the view, rename, and create it again)",
                readers.join(", ")
            )));
        }
        let sinks = self.sinks_reading(old);
        if !sinks.is_empty() {
            return Err(ExecError::NotSupported(format!(
                "cannot rename \"{old}\": sink {} reads it (drop the sink, rename, and create it again)",
                sinks.join(", ")
            )));
        }
        let indexes = self.indexes_of(old);
        if !indexes.is_empty() {
            return Err(ExecError::NotSupported(format!(
                "cannot rename \"{old}\": index {} is on it (drop the index, rename, and create it again)",
                indexes.join(", ")
            )));
        }
        let fed = self.feeds.contains_key(old)
            || self.views.get(old).is_some_and(|v| !v.readers.is_empty());
        if fed {
            return Err(ExecError::NotSupported(format!(
                "cannot rename \"{old}\": a connector feeds it under its name"
            )));
        }
        for (view, _) in &rewrites {
            if !self.plain_views.contains_key(view) {
                return Err(ExecError::UndefinedObject(format!(
                    "view \"{view}\" does not exist"
                )));
            }
        }
        let rename = |entry: &mut CatalogEntry| entry.name = new.to_string();
        let entry = if let Some((mut entry, mut table)) = self.tables.remove(old) {
            rename(&mut entry);
            table.def.name = new.to_string();
            let copy = entry.clone();
            self.tables.insert(new.to_string(), (entry, table));
            copy
        } else if let Some(mut view) = self.views.remove(old) {
            rename(&mut view.entry);
            let copy = view.entry.clone();
            self.views.insert(new.to_string(), view);
            copy
        } else if let Some((mut entry, mut def)) = self.sources.remove(old) {
            rename(&mut entry);
            def.table.name = new.to_string();
            let copy = entry.clone();
            self.sources.insert(new.to_string(), (entry, def));
            copy
        } else if let Some(mut entry) = self.plain_views.remove(old) {
            rename(&mut entry);
            self.plain_views.insert(new.to_string(), entry.clone());
            entry
        } else {
            return Err(ExecError::UndefinedObject(format!(
                "relation \"{old}\" does not exist"
            )));
        };
        entry.write(&mut self.epoch_writes)?;
        for (view, sql) in rewrites {
            if let Some(entry) = self.plain_views.get_mut(&view) {
                entry.sql = sql;
                entry.write(&mut self.epoch_writes)?;
            }
        }
        self.rename_rows_of(old, new)?;
        self.publish_stats();
        Ok(())
    }

    /// Late rows and failed rows name the object they belong to: they follow it.
    fn rename_rows_of(&mut self, old: &str, new: &str) -> Result<()> {
        for (key, value) in self.store.scan_table(LATE_ROWS_TABLE)? {
            let Ok(mut late) = serde_json::from_slice::<crate::table::LateRow>(&value) else {
                continue;
            };
            if late.object != old && late.source != old {
                continue;
            }
            for name in [&mut late.object, &mut late.source] {
                if name == old {
                    *name = new.to_string();
                }
            }
            let bytes = serde_json::to_vec(&late).map_err(eddy_storage::StorageError::from)?;
            self.epoch_writes.put(LATE_ROWS_TABLE, &key, bytes);
        }
        for (key, value) in self.store.scan_table(VIEW_ERRORS_TABLE)? {
            let Ok(mut failed) =
                serde_json::from_slice::<crate::view_errors::StoredViewError>(&value)
            else {
                continue;
            };
            if failed.view != old {
                continue;
            }
            failed.view = new.to_string();
            let bytes = serde_json::to_vec(&failed).map_err(eddy_storage::StorageError::from)?;
            self.epoch_writes.put(VIEW_ERRORS_TABLE, &key, bytes);
        }
        Ok(())
    }
}
