//! `INSERT`, `UPDATE` and `DELETE` of a table's rows, through the engine.

use super::*;

impl Database {
    pub(crate) fn table_for_dml(&self, table: &TableReference) -> Result<TableDef> {
        match self
            .objects
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(table.table())
        {
            Some(Object::Table(def)) => Ok(def.clone()),
            Some(Object::View(_)) => Err(ServerError::new(
                "42809",
                format!(
                    "cannot change materialized view \"{}\": change the tables it reads",
                    table.table()
                ),
            )),
            Some(Object::PlainView(_)) => Err(ServerError::not_supported(format!(
                "cannot change view \"{}\": views are not updatable, change the tables it reads",
                table.table()
            ))),
            Some(Object::Source(_)) => Err(ServerError::new(
                "42809",
                format!(
                    "cannot write to source \"{}\": its rows come from its connector",
                    table.table()
                ),
            )),
            Some(Object::Sink) => Err(ServerError::new(
                "42809",
                format!(
                    "cannot write to sink \"{}\": it writes the changes of the relation it reads",
                    table.table()
                ),
            )),
            None => Err(ServerError::new(
                "42P01",
                format!("table \"{}\" does not exist", table.table()),
            )),
        }
    }

    pub(crate) async fn execute_dml(&self, dml: DmlStatement) -> Result<Outcome> {
        let def = self.table_for_dml(&dml.table_name)?;
        let name = def.name.clone();
        match &dml.op {
            WriteOp::Insert(_) => {
                let started = std::time::Instant::now();
                let limit = self.query_memory_limit();
                let frame =
                    crate::query::query_memory::dataframe(&self.ctx, limit, (*dml.input).clone())?;
                let batches = crate::query::query_memory::collect_within(
                    frame.execute_stream().await?,
                    limit,
                )
                .await?;
                // Same columns, in the table's order; only names and metadata can differ.
                let batches = batches
                    .into_iter()
                    .filter(|b| b.num_rows() > 0)
                    .map(|b| conform(b, &def.schema))
                    .collect::<Result<Vec<_>>>()?;
                let planned = started.elapsed();
                let rows = self.engine.insert(name, batches).await?;
                // `EDDY_LOG=eddy::statements=debug`: where an INSERT's time goes.
                tracing::debug!(
                    target: "eddy::statements",
                    plan_ms = planned.as_secs_f64() * 1e3,
                    committed_ms = (started.elapsed() - planned).as_secs_f64() * 1e3,
                    rows,
                    "INSERT"
                );
                Ok(Outcome::with_rows("INSERT 0", Some(rows as usize)))
            }
            WriteOp::Delete => {
                let predicate = self.dml_predicate(&dml.input)?;
                let rows = self.engine.delete(name, predicate).await?;
                Ok(Outcome::with_rows("DELETE", Some(rows as usize)))
            }
            WriteOp::Update => {
                let LogicalPlan::Projection(projection) = dml.input.as_ref() else {
                    return Err(ServerError::not_supported("this form of UPDATE"));
                };
                let assignments = projection
                    .expr
                    .iter()
                    .zip(def.schema.fields())
                    .map(|(e, field)| {
                        // A new value for a `uuid` column is stored in canonical form.
                        let e = match e {
                            Expr::Column(_) => e.clone(),
                            _ if crate::pg::types::uuid::is_uuid(field) => {
                                crate::pg::types::uuid::checked(e.clone())
                            }
                            _ => e.clone(),
                        };
                        crate::database::dml_exprs::physical(
                            &self.ctx,
                            e,
                            projection.input.schema(),
                        )
                    })
                    .collect::<Result<Vec<_>>>()?;
                let predicate = self.dml_predicate(&projection.input)?;
                let rows = self.engine.update(name, predicate, assignments).await?;
                Ok(Outcome::with_rows("UPDATE", Some(rows as usize)))
            }
            other => Err(ServerError::not_supported(format!("{other}"))),
        }
    }

    /// The WHERE of an UPDATE/DELETE over one table scan, as a physical predicate.
    pub(crate) fn dml_predicate(
        &self,
        input: &LogicalPlan,
    ) -> Result<Option<Arc<dyn PhysicalExpr>>> {
        match input {
            LogicalPlan::TableScan(_) => Ok(None),
            LogicalPlan::Filter(filter)
                if matches!(filter.input.as_ref(), LogicalPlan::TableScan(_)) =>
            {
                if datafusion::common::tree_node::TreeNode::exists(&filter.predicate, |e| {
                    Ok(matches!(
                        e,
                        datafusion::logical_expr::Expr::ScalarSubquery(_)
                            | datafusion::logical_expr::Expr::InSubquery(_)
                            | datafusion::logical_expr::Expr::Exists(_)
                    ))
                })? {
                    return Err(ServerError::not_supported(
                        "subqueries in the WHERE of UPDATE or DELETE",
                    ));
                }
                Ok(Some(crate::database::dml_exprs::physical(
                    &self.ctx,
                    filter.predicate.clone(),
                    filter.input.schema(),
                )?))
            }
            _ => Err(ServerError::not_supported(
                "this form of UPDATE or DELETE (one table, a plain WHERE)",
            )),
        }
    }
}

/// Re-labels a batch with the table's schema (casting where DataFusion chose another type).
pub(crate) fn conform(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    if batch.num_columns() != schema.fields().len() {
        return Err(ServerError::new(
            "42601",
            "INSERT has the wrong number of columns",
        ));
    }
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c.clone())
            } else {
                datafusion::arrow::compute::cast(c, f.data_type())
            }
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| ServerError::new("22P02", e.to_string()))?;
    let batch = RecordBatch::try_new(schema.clone(), columns).map_err(|e| {
        let code = if e.to_string().contains("non-nullable") {
            "23502"
        } else {
            "XX000"
        };
        ServerError::new(code, e.to_string())
    })?;
    crate::pg::types::column_types::check_values(&batch, schema)?;
    crate::pg::types::column_types::canonical_values(batch)
}
