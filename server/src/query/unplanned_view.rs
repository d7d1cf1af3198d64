//! A plain view whose query no longer plans when Eddy starts (something it reads failed, or
//! Eddy's planner changed): it keeps its name and definition, has no columns, and reading it
//! answers why, so that one such view does not keep Eddy from starting.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::Result;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

use crate::error::ServerError;

#[derive(Debug)]
pub struct UnplannedView {
    code: &'static str,
    message: String,
}

impl UnplannedView {
    pub fn new(name: &str, error: &ServerError) -> Self {
        Self {
            code: error.code,
            message: format!(
                "view \"{name}\" could not be restored when Eddy started: {}. DROP VIEW {name} and create it again",
                error.message
            ),
        }
    }

    pub fn error(&self) -> ServerError {
        ServerError::new(self.code, self.message.clone())
    }
}

#[async_trait]
impl TableProvider for UnplannedView {
    fn schema(&self) -> SchemaRef {
        Arc::new(Schema::empty())
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        _projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Err(self.error().into())
    }
}
