//! Inputs: a table, source or view read whole or by some columns, and window TVFs over them
//! (TUMBLE, HOP, CUMULATE, SESSION), which add `window_start` and `window_end`.

use std::sync::Arc;

use datafusion::common::{DFSchema, TableReference};
use datafusion::datasource::{source_as_provider, ViewTable};
use datafusion::logical_expr::{Expr, TableScan};
use datafusion::physical_expr::PhysicalExpr;

use super::{
    key_field, NodeKind, Planned, Planner, SourceInfo, StreamInput, StreamNode, WatermarkColumn,
    WindowColumn,
};
use crate::window::WindowTableProvider;
use crate::{PlanError, Result};

impl Planner<'_> {
    pub(super) fn plan_scan(&mut self, scan: &TableScan) -> Result<Planned> {
        // A fetch is a LIMIT pushed down: DataFusion keeps the LIMIT above, planned as a top-N,
        // so the scan reads every row (a stream has no first rows to stop at).
        let provider = source_as_provider(&scan.source)?;
        let any: &dyn std::any::Any = provider.as_ref();
        let planned = if let Some(window) = any.downcast_ref::<WindowTableProvider>() {
            self.plan_window_scan(scan, window)?
        } else {
            let source = self.catalog.source(&scan.table_name).ok_or_else(|| {
                PlanError::NotSupported(format!(
                    "\"{}\" cannot feed a materialized view (tables, sources and materialized views can)",
                    scan.table_name
                ))
            })?;
            let source_name = source.name.clone();
            let schema = Arc::new(scan.projected_schema.as_arrow().clone());
            Planned {
                node: self.input_node(source, scan.projection.clone(), schema),
                window: None,
                session_keep: None,
                source_name,
            }
        };
        // Filters a provider took exactly are the scan's own: they still apply to every row.
        // Those it took inexactly are also kept in a Filter above the scan.
        let refs: Vec<&Expr> = scan.filters.iter().collect();
        let exact: Vec<Expr> = match provider.supports_filters_pushdown(&refs) {
            Ok(kinds) => scan
                .filters
                .iter()
                .zip(kinds)
                .filter(|(_, kind)| {
                    matches!(
                        kind,
                        datafusion::logical_expr::TableProviderFilterPushDown::Exact
                    )
                })
                .map(|(filter, _)| filter.clone())
                .collect(),
            Err(_) => scan.filters.clone(),
        };
        match exact.into_iter().reduce(Expr::and) {
            Some(predicate) => {
                let predicate = self.physical(&predicate, &scan.projected_schema)?;
                Ok(self.filter_rows(planned, predicate, &scan.projected_schema))
            }
            None => Ok(planned),
        }
    }

    /// A leaf reading `source` (its columns in `projection`, all when None).
    fn input_node(
        &mut self,
        source: SourceInfo,
        projection: Option<Vec<usize>>,
        schema: datafusion::arrow::datatypes::SchemaRef,
    ) -> StreamNode {
        let clock_base = self.next_clock;
        self.next_clock += source.clock_count();
        let renumbered = |w: &WatermarkColumn| WatermarkColumn {
            clock: w.clock + clock_base,
            ..*w
        };
        let (watermarks, key_columns) = match &projection {
            Some(projection) => {
                let position = |column: usize| projection.iter().position(|&p| p == column);
                let watermarks = source
                    .watermarks
                    .iter()
                    .filter_map(|w| {
                        Some(WatermarkColumn {
                            column: position(w.column)?,
                            ..renumbered(w)
                        })
                    })
                    .collect();
                let key_columns = source
                    .key_columns
                    .as_ref()
                    .and_then(|key| key.iter().map(|&k| position(k)).collect());
                (watermarks, key_columns)
            }
            None => (
                source.watermarks.iter().map(renumbered).collect(),
                source.key_columns.clone(),
            ),
        };
        let processing_time: Vec<usize> = source
            .processing_time
            .iter()
            .filter_map(|&column| match &projection {
                Some(projection) => projection.iter().position(|&p| p == column),
                None => Some(column),
            })
            .collect();
        let node = StreamNode {
            kind: NodeKind::Input {
                input: self.inputs.len(),
                projection,
            },
            inputs: Vec::new(),
            schema,
            key_fields: source.key_fields.iter().map(key_field).collect(),
            key_columns,
            append_only: source.append_only,
            watermarks,
            windows: Vec::new(),
        };
        self.inputs.push(StreamInput { source, clock_base });
        if processing_time.is_empty() {
            return node;
        }
        // Columns of the wall clock: a clock of their own, which the wall clock advances.
        let clock = self.new_clock();
        let mut node = node;
        node.watermarks
            .extend(processing_time.into_iter().map(|column| WatermarkColumn {
                column,
                clock,
                shift: 0,
            }));
        let schema = node.schema.clone();
        node.wrap(NodeKind::Proctime { clock }, schema)
    }

    fn plan_window_scan(
        &mut self,
        scan: &TableScan,
        window: &WindowTableProvider,
    ) -> Result<Planned> {
        let reference = TableReference::bare(window.table_name.clone());
        let inner: &dyn std::any::Any = window.inner.as_ref();
        let (input, source_name) = match (
            self.catalog.source(&reference),
            inner.downcast_ref::<ViewTable>(),
        ) {
            (Some(source), _) => {
                let source_name = source.name.clone();
                let table_schema = datafusion::catalog::TableProvider::schema(window.inner.as_ref());
                (self.input_node(source, None, table_schema), source_name)
            }
            // A plain view (Flink's `CREATE VIEW b AS SELECT *, PROCTIME() AS p_time FROM bid`):
            // its query streams, and the window is over its rows.
            (None, Some(view)) => {
                let planned = self.plan_node(view.logical_plan())?;
                if planned.window.is_some() {
                    return Err(PlanError::NotSupported(format!(
                        "a window over the plain view \"{}\", which has a window of its own",
                        window.table_name
                    )));
                }
                (planned.node, planned.source_name)
            }
            (None, None) => {
                return Err(PlanError::NotSupported(format!(
                    "a window over \"{}\": only tables, sources, plain views and materialized views can feed a materialized view",
                    window.table_name
                )))
            }
        };
        let time = input.watermark_on(window.time_column);
        let adds_key = window.spec.varying_column().is_some();
        let full = datafusion::catalog::TableProvider::schema(window);
        // The window operator appends window_start and window_end to the input's columns.
        let start = full.fields().len() - 2;
        let mut watermarks = input.watermarks.clone();
        if let Some(time) = time {
            // A session can start any time before the watermark: no bound on starts.
            if let Some(lag) = window.spec.start_lag() {
                watermarks.push(WatermarkColumn {
                    column: start,
                    shift: time.shift - lag,
                    ..time
                });
            }
            watermarks.push(WatermarkColumn {
                column: start + 1,
                ..time
            });
        }
        let mut key_fields = input.key_fields.clone();
        let mut key_columns = input.key_columns.clone();
        if let Some(varying) = window.spec.varying_column() {
            let index = match varying {
                crate::window::VaryingColumn::Start => start,
                crate::window::VaryingColumn::End => start + 1,
            };
            key_fields.push(key_field(full.field(index)));
            if let Some(columns) = &mut key_columns {
                columns.push(index);
            }
        }
        let mut node = StreamNode {
            kind: NodeKind::Window {
                time_column: window.time_column,
                spec: window.spec,
                adds_key,
            },
            schema: full.clone(),
            key_fields,
            key_columns,
            append_only: input.append_only,
            watermarks,
            // A session's bounds are not a window join's: only TUMBLE, HOP and CUMULATE count.
            windows: if window.spec.is_session() {
                Vec::new()
            } else {
                vec![
                    WindowColumn {
                        column: start,
                        spec: window.spec,
                    },
                    WindowColumn {
                        column: start + 1,
                        spec: window.spec,
                    },
                ]
            },
            inputs: vec![input],
        };
        if let Some(projection) = &scan.projection {
            let df_full = DFSchema::try_from(full.as_ref().clone())?;
            let exprs: Vec<Expr> = projection
                .iter()
                .map(|&i| Expr::Column(df_full.columns()[i].clone()))
                .collect();
            let physical = exprs
                .iter()
                .map(|e| self.physical(e, &df_full))
                .collect::<Result<Vec<Arc<dyn PhysicalExpr>>>>()?;
            let watermarks = super::project_watermarks(&node.watermarks, &exprs, &df_full);
            let key_columns = super::project_key_columns(&node.key_columns, &exprs, &df_full);
            let windows = super::project_windows(&node.windows, &exprs, &df_full);
            node = node.wrap(
                NodeKind::Project { exprs: physical },
                Arc::new(scan.projected_schema.as_arrow().clone()),
            );
            node.watermarks = watermarks;
            node.key_columns = key_columns;
            node.windows = windows;
        }
        Ok(Planned {
            node,
            window: Some((window.spec, time)),
            session_keep: None,
            source_name,
        })
    }
}
