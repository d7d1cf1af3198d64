//! One dispatch of every statement the database runs: each kind to the file that handles it.

use super::*;

impl Database {
    /// Runs every statement of a simple query, stopping at the first error.
    pub async fn execute_sql(&self, sql: &str) -> Result<Vec<Outcome>> {
        let mut outcomes = Vec::new();
        for statement in parse_statements(sql)? {
            outcomes.push(self.execute(&statement, None).await?);
        }
        Ok(outcomes)
    }

    pub async fn execute(
        &self,
        parsed: &ParsedStatement,
        params: Option<ParamValues>,
    ) -> Result<Outcome> {
        match &parsed.statement {
            EddyStatement::CreateTable {
                statement,
                watermark,
                append_only,
                name,
                if_not_exists,
            } => {
                if let Statement::CreateTable(create) = statement.as_ref() {
                    if let Some(query) = &create.query {
                        return self.create_table_as(name, *if_not_exists, query).await;
                    }
                }
                if self.exists(name) {
                    if *if_not_exists {
                        return Ok(Outcome::command("CREATE TABLE"));
                    }
                    return Err(ServerError::new(
                        "42P07",
                        format!("relation \"{name}\" already exists"),
                    ));
                }
                let def = self
                    .table_def(
                        name.clone(),
                        (**statement).clone(),
                        watermark.clone(),
                        *append_only,
                    )
                    .await?;
                let id = self
                    .engine
                    .create_table(def.clone(), None, parsed.sql.clone())
                    .await?;
                self.register_table(def, id)?;
                Ok(Outcome::command("CREATE TABLE"))
            }
            EddyStatement::CreateMaterializedView {
                name,
                if_not_exists,
                query,
                emit_on_window_close,
            } => {
                self.create_view(
                    name,
                    *if_not_exists,
                    query,
                    *emit_on_window_close,
                    &parsed.sql,
                )
                .await
            }
            EddyStatement::Drop {
                object_type,
                names,
                if_exists,
                cascade,
            } => self.drop(*object_type, names, *if_exists, *cascade).await,
            EddyStatement::CreateView {
                name,
                or_replace,
                columns,
                query,
            } => {
                self.create_plain_view(name, *or_replace, columns, query, &parsed.sql)
                    .await
            }
            EddyStatement::Rename(rename) => self.rename(rename).await,
            EddyStatement::AlterOwner(owner) => self.alter_owner(owner),
            EddyStatement::AddPrimaryKey(key) => self.add_primary_key(key).await,
            EddyStatement::CreateIndex(create) => self.create_index(create, &parsed.sql).await,
            EddyStatement::ExplainView(statement) => match statement.as_ref() {
                EddyStatement::CreateSink(def) => self.explain_sink(def),
                view => self.explain_view(view).await,
            },
            EddyStatement::CreateSink(def) => self.create_sink(def, &parsed.sql).await,
            EddyStatement::DropSink { names, if_exists } => {
                self.drop_sinks(names, *if_exists).await
            }
            EddyStatement::ShowSinks => Ok(self.show(|o| matches!(o, Object::Sink))),
            EddyStatement::Flush => {
                self.engine.flush().await?;
                Ok(Outcome::command("FLUSH"))
            }
            EddyStatement::RefreshMaterializedView { name } => {
                match self.object(name) {
                    Some(Object::View(_)) => {}
                    Some(_) => {
                        return Err(ServerError::new(
                            "42809",
                            format!("\"{name}\" is not a materialized view"),
                        ))
                    }
                    None => {
                        return Err(ServerError::new(
                            "42P01",
                            format!("relation \"{name}\" does not exist"),
                        ))
                    }
                }
                // Always current: refreshing waits until it has taken in what has arrived.
                self.engine.flush().await?;
                Ok(Outcome::command("REFRESH MATERIALIZED VIEW"))
            }
            EddyStatement::Recover => {
                self.engine.recover().await?;
                Ok(Outcome::command("RECOVER"))
            }
            EddyStatement::CreateSource(def) => self.create_source(def, &parsed.sql).await,
            EddyStatement::DropSource { names, if_exists } => {
                self.drop_sources(names, *if_exists).await
            }
            EddyStatement::ShowSources => Ok(self.show(|o| matches!(o, Object::Source(_)))),
            EddyStatement::ShowTables => Ok(self.show(|o| matches!(o, Object::Table(_)))),
            EddyStatement::ShowMaterializedViews => Ok(self.show(|o| matches!(o, Object::View(_)))),
            EddyStatement::Subscribe { .. } => Err(ServerError::not_supported(
                "SUBSCRIBE streams without end: read it with COPY (SUBSCRIBE ...) TO STDOUT (psql prints the rows as they come) or DECLARE c CURSOR FOR SUBSCRIBE ... then FETCH n FROM c [WITH (timeout = '1s')]",
            )),
            EddyStatement::Fetch(fetch) => Err(ServerError::new(
                "34000",
                format!("cursor \"{}\" does not exist", fetch.cursor),
            )),
            EddyStatement::Sql(statement) => self.execute_sql_statement(statement, params).await,
        }
    }

    pub(crate) fn show(&self, keep: impl Fn(&Object) -> bool) -> Outcome {
        let names: Vec<String> = self
            .objects
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, o)| keep(o))
            .map(|(n, _)| n.clone())
            .collect();
        let schema = Arc::new(Schema::new(vec![Field::new("Name", DataType::Utf8, false)]));
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(names))]);
        match batch {
            Ok(batch) => Outcome::Rows {
                schema,
                batches: vec![batch],
            },
            Err(e) => Outcome::Rows {
                schema: Arc::new(Schema::empty()),
                batches: {
                    tracing::error!(%e);
                    vec![]
                },
            },
        }
    }
}
