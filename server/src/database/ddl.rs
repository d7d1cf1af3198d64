//! `DROP TABLE | VIEW | MATERIALIZED VIEW [IF EXISTS] ... [CASCADE]` and `ALTER ... RENAME
//! TO`, with the dependencies between objects: what each view reads (plain views through the
//! relations of their query, materialized views through theirs).

use datafusion::sql::sqlparser::ast::ObjectType;
use eddy_planner::alter_statement::{OwnerStatement, RelationKind, RenameStatement};
use eddy_storage::ObjectKind;

use crate::database::{Database, Object, Outcome};
use crate::error::{Result, ServerError};

/// An object's kind as DROP and its messages name it.
fn describe(object: &Object) -> (ObjectKind, &'static str) {
    match object {
        Object::Table(_) => (ObjectKind::Table, "table"),
        Object::View(_) => (ObjectKind::MaterializedView, "materialized view"),
        Object::Source(_) => (ObjectKind::Source, "source"),
        Object::PlainView(_) => (ObjectKind::View, "view"),
        Object::Sink => (ObjectKind::Sink, "sink"),
    }
}

/// The names `OWNER TO` takes for the one role.
const OWNER_NAMES: &[&str] = &["postgres", "current_user", "session_user", "current_role"];

/// `ALTER TABLE` takes any relation, as in Postgres; the others only their own kind (42809).
fn check_kind(kind: RelationKind, name: &str, object: &Object) -> Result<()> {
    let (object_kind, actual) = describe(object);
    let expected = match kind {
        RelationKind::Table => None,
        RelationKind::View => Some((ObjectKind::View, "a view")),
        RelationKind::MaterializedView => {
            Some((ObjectKind::MaterializedView, "a materialized view"))
        }
        RelationKind::Source => Some((ObjectKind::Source, "a source")),
    };
    match expected {
        Some((expected, article)) if expected != object_kind => Err(ServerError::new(
            "42809",
            format!("\"{name}\" is not {article} (it is a {actual})"),
        )),
        _ => Ok(()),
    }
}

/// An `ALTER ... IF EXISTS` of a relation that does not exist.
pub(crate) fn skipped(tag: &str, name: &str) -> Outcome {
    Outcome::Command {
        tag: tag.to_string(),
        rows: None,
        notices: vec![format!("relation \"{name}\" does not exist, skipping")],
    }
}

impl Database {
    /// Records what view `name` reads (replacing what it read before).
    pub(crate) fn set_reads(&self, name: &str, reads: Vec<String>) {
        self.reads
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), reads);
    }

    fn forget_reads(&self, name: &str) {
        self.reads
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    /// The views that read `name`, directly or through other views.
    pub(crate) fn readers_through_views(&self, name: &str) -> Vec<String> {
        let mut found: Vec<String> = Vec::new();
        let mut next = vec![name.to_string()];
        while let Some(relation) = next.pop() {
            for reader in self.readers(&relation) {
                if !found.contains(&reader) {
                    found.push(reader.clone());
                    next.push(reader);
                }
            }
        }
        found
    }

    /// What view `name` reads.
    pub(crate) fn reads_of(&self, name: &str) -> Vec<String> {
        self.reads
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
            .unwrap_or_default()
    }

    /// The views that read `name` directly.
    pub(crate) fn readers(&self, name: &str) -> Vec<String> {
        self.reads
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(view, reads)| view.as_str() != name && reads.iter().any(|r| r == name))
            .map(|(view, _)| view.clone())
            .collect()
    }

    /// Every view that reads `name`, directly or through others, each after the views it
    /// reads (the order to plan them in; dropping goes the other way).
    pub(crate) fn dependents(&self, name: &str) -> Vec<String> {
        fn visit(db: &Database, name: &str, out: &mut Vec<String>, path: &mut Vec<String>) {
            for reader in db.readers(name) {
                if out.contains(&reader) || path.contains(&reader) {
                    continue;
                }
                path.push(reader.clone());
                visit(db, &reader, out, path);
                path.pop();
                out.push(reader);
            }
        }
        let mut out = Vec::new();
        visit(self, name, &mut out, &mut vec![name.to_string()]);
        out.reverse();
        out
    }

    /// The 2BP01 error for dropping `name`, which `readers` read.
    fn has_dependents(&self, what: &str, name: &str, readers: &[String]) -> ServerError {
        let list: Vec<String> = readers
            .iter()
            .map(|reader| {
                let kind = self.object(reader).map_or("view", |o| describe(&o).1);
                format!("{kind} \"{reader}\"")
            })
            .collect();
        ServerError::new(
            "2BP01",
            format!(
                "cannot drop {what} \"{name}\" because {} depends on it (DROP ... CASCADE drops it too)",
                list.join(", ")
            ),
        )
    }

    /// Refuses to drop a source that views read.
    pub(crate) fn check_no_readers(&self, what: &str, name: &str) -> Result<()> {
        let readers = self.readers(name);
        if readers.is_empty() {
            Ok(())
        } else {
            Err(self.has_dependents(what, name, &readers))
        }
    }

    async fn drop_one(&self, kind: ObjectKind, name: &str) -> Result<()> {
        self.engine.drop_object(kind, name.to_string()).await?;
        self.deregister(name)?;
        self.forget_reads(name);
        // The engine dropped the relation's indexes with it.
        self.indexes.remove_relation(name);
        Ok(())
    }

    pub(crate) async fn drop(
        &self,
        object_type: ObjectType,
        names: &[String],
        if_exists: bool,
        cascade: bool,
    ) -> Result<Outcome> {
        if object_type == ObjectType::Index {
            return self.drop_indexes(names, if_exists).await;
        }
        let (tag, what) = match object_type {
            ObjectType::Table => ("DROP TABLE", "table"),
            ObjectType::MaterializedView => ("DROP MATERIALIZED VIEW", "materialized view"),
            ObjectType::View => ("DROP VIEW", "view"),
            other => return Err(ServerError::not_supported(format!("DROP {other}"))),
        };
        let mut notices = Vec::new();
        for name in names {
            let Some(object) = self.object(name) else {
                if if_exists {
                    notices.push(format!("{what} \"{name}\" does not exist, skipping"));
                    continue;
                }
                return Err(ServerError::new(
                    "42P01",
                    format!("{what} \"{name}\" does not exist"),
                ));
            };
            let (kind, actual) = describe(&object);
            // DROP VIEW also drops a materialized view (tools drop every view kind with it).
            let fits = match object_type {
                ObjectType::Table => kind == ObjectKind::Table,
                ObjectType::MaterializedView => kind == ObjectKind::MaterializedView,
                _ => matches!(kind, ObjectKind::View | ObjectKind::MaterializedView),
            };
            if !fits {
                let statement = match kind {
                    ObjectKind::Table => "DROP TABLE",
                    ObjectKind::MaterializedView => "DROP MATERIALIZED VIEW",
                    ObjectKind::Source => "DROP SOURCE",
                    ObjectKind::View => "DROP VIEW",
                    ObjectKind::Index => "DROP INDEX",
                    ObjectKind::Sink => "DROP SINK",
                };
                return Err(ServerError::new(
                    "42809",
                    format!("\"{name}\" is a {actual}: use {statement}"),
                ));
            }
            let dependents = self.dependents(name);
            if !dependents.is_empty() && !cascade {
                return Err(self.has_dependents(actual, name, &self.readers(name)));
            }
            for dependent in dependents.iter().rev() {
                let Some(object) = self.object(dependent) else {
                    continue;
                };
                let (kind, actual) = describe(&object);
                self.drop_one(kind, dependent).await?;
                notices.push(format!("drop cascades to {actual} {dependent}"));
            }
            self.drop_one(kind, name).await?;
        }
        Ok(Outcome::Command {
            tag: tag.to_string(),
            rows: None,
            notices,
        })
    }

    /// The relation an `ALTER` names, of the kind it names (42809 otherwise); `None` for a
    /// missing one under `IF EXISTS` (42P01 without).
    pub(crate) fn altered(
        &self,
        kind: RelationKind,
        if_exists: bool,
        name: &str,
    ) -> Result<Option<Object>> {
        let Some(object) = self.object(name) else {
            if if_exists {
                return Ok(None);
            }
            return Err(ServerError::new(
                "42P01",
                format!("relation \"{name}\" does not exist"),
            ));
        };
        check_kind(kind, name, &object)?;
        Ok(Some(object))
    }

    /// `ALTER TABLE | VIEW | MATERIALIZED VIEW | SOURCE name RENAME TO new_name`.
    pub(crate) async fn rename(&self, rename: &RenameStatement) -> Result<Outcome> {
        let RenameStatement {
            kind,
            if_exists,
            name,
            new_name,
        } = rename;
        let tag = kind.tag();
        let Some(object) = self.altered(*kind, *if_exists, name)? else {
            return Ok(skipped(tag, name));
        };
        if self.exists(new_name) {
            return Err(ServerError::new(
                "42P07",
                format!("relation \"{new_name}\" already exists"),
            ));
        }
        // Plain views that read it follow it: their definitions name the new name.
        let readers = self.readers(name);
        let mut rewrites = Vec::new();
        for reader in &readers {
            if let Some(Object::PlainView(_)) = self.object(reader) {
                rewrites.push((
                    reader.clone(),
                    self.renamed_definition(reader, name, new_name)?,
                ));
            }
        }
        self.engine
            .rename(name.clone(), new_name.clone(), rewrites.clone())
            .await?;
        self.rename_registered(name, new_name, object).await?;
        for (reader, sql) in rewrites {
            if let Some(Object::PlainView(mut view)) = self.object(&reader) {
                view.sql = sql;
                self.objects
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(reader, Object::PlainView(view));
            }
        }
        self.replan_readers_of(new_name).await?;
        Ok(Outcome::command(kind.tag()))
    }

    /// `ALTER ... name OWNER TO role`: every object is owned by the one role, `postgres`
    /// (pg_dump names it after each relation it dumps); naming it changes nothing.
    pub(crate) fn alter_owner(&self, statement: &OwnerStatement) -> Result<Outcome> {
        let OwnerStatement {
            kind,
            if_exists,
            name,
            owner,
        } = statement;
        if self.altered(*kind, *if_exists, name)?.is_none() {
            return Ok(skipped(kind.tag(), name));
        }
        if !OWNER_NAMES.contains(&owner.as_str()) {
            return Err(ServerError::new(
                "42704",
                format!("role \"{owner}\" does not exist"),
            ));
        }
        Ok(Outcome::command(kind.tag()))
    }

    /// Moves an object's registration (its provider, its reads, and the names other views
    /// read) from `old` to `new`.
    async fn rename_registered(&self, old: &str, new: &str, object: Object) -> Result<()> {
        let provider = self
            .ctx
            .table_provider(datafusion::common::TableReference::bare(old))
            .await?;
        self.deregister(old)?;
        let object = match object {
            Object::Table(mut def) => {
                def.name = new.to_string();
                Object::Table(def)
            }
            Object::Source(mut def) => {
                // A new provider: a source's names its errors.
                def.name = new.to_string();
                self.register_source(def)?;
                return self.rename_reads(old, new);
            }
            Object::View(mut info) => {
                info.name = new.to_string();
                Object::View(info)
            }
            other => other,
        };
        self.register_readable(new, provider, object)?;
        self.rename_reads(old, new)
    }

    fn rename_reads(&self, old: &str, new: &str) -> Result<()> {
        let mut reads = self.reads.write().unwrap_or_else(|e| e.into_inner());
        if let Some(own) = reads.remove(old) {
            reads.insert(new.to_string(), own);
        }
        for list in reads.values_mut() {
            for read in list.iter_mut() {
                if read == old {
                    *read = new.to_string();
                }
            }
        }
        Ok(())
    }
}
