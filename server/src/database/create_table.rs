//! `CREATE TABLE`: a table's definition from its statement (columns, key, watermark, connector).

use super::*;

impl Database {
    /// Plans a `CREATE TABLE` (with Eddy's clauses already cut out) into a table definition.
    pub(crate) async fn table_def(
        &self,
        name: String,
        statement: Statement,
        watermark: Option<WatermarkDef>,
        append_only: bool,
    ) -> Result<TableDef> {
        if let Statement::CreateTable(create) = &statement {
            if create.query.is_some() {
                return Err(ServerError::not_supported(
                    "CREATE TABLE ... AS SELECT: use CREATE MATERIALIZED VIEW",
                ));
            }
            if create.columns.is_empty() {
                return Err(ServerError::new(
                    "42601",
                    "a table needs at least one column",
                ));
            }
        }
        let state = self.ctx.state();
        let plan = state
            .statement_to_plan(DfStatement::Statement(Box::new(statement)))
            .await?;
        let plan = crate::pg::ast::decimal_literals::rescale_exponent_literals(plan)?;
        let plan = crate::pg::ast::int_literals::narrow_integer_literals(plan)?;
        let plan = crate::pg::types::interval_input::type_text_compared_with_intervals(plan)?;
        let plan = crate::pg::plan::casts::as_postgres_casts(plan)?;
        let LogicalPlan::Ddl(DdlStatement::CreateMemoryTable(create)) = plan else {
            return Err(ServerError::not_supported("this form of CREATE TABLE"));
        };
        let fields: Vec<Field> = create
            .input
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let mut key = TableKey::RowId;
        for constraint in create.constraints.iter() {
            if let datafusion::common::Constraint::PrimaryKey(columns) = constraint {
                key = TableKey::PrimaryKey(columns.clone());
            }
        }
        // A primary key is never NULL.
        let schema = match &key {
            TableKey::PrimaryKey(columns) => Arc::new(Schema::new(
                schema
                    .fields()
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        f.as_ref()
                            .clone()
                            .with_nullable(f.is_nullable() && !columns.contains(&i))
                    })
                    .collect::<Vec<_>>(),
            )),
            TableKey::RowId => schema,
        };
        let watermark = match watermark {
            None => None,
            Some(def) => {
                let column = schema.index_of(&def.column).map_err(|_| {
                    ServerError::new(
                        "42703",
                        format!("watermark column \"{}\" does not exist", def.column),
                    )
                })?;
                if !matches!(schema.field(column).data_type(), DataType::Timestamp(_, _)) {
                    return Err(ServerError::new(
                        "42804",
                        format!(
                            "watermark column \"{}\" must be a TIMESTAMP, not {}",
                            def.column,
                            schema.field(column).data_type()
                        ),
                    ));
                }
                let delay = match &def.delay_sql {
                    None => 0,
                    Some(sql) => {
                        let expr = state.create_logical_expr(sql, &DFSchema::empty())?;
                        let value = match datafusion::optimizer::simplify_expressions::ExprSimplifier::new(
                            datafusion::optimizer::simplify_expressions::SimplifyContext::default(),
                        )
                        .simplify(expr)?
                        {
                            datafusion::logical_expr::Expr::Literal(value, _) => interval_micros(&value),
                            _ => None,
                        };
                        value.filter(|v| *v >= 0).ok_or_else(|| {
                            ServerError::new("22023", format!("the watermark delay must be a fixed INTERVAL (no months), got {sql}"))
                        })?
                    }
                };
                Some((column, delay))
            }
        };
        Ok(TableDef {
            name,
            schema,
            key,
            append_only,
            watermark,
            stored: true,
            processing_time: Vec::new(),
        })
    }
}
