//! The plan a view is kept with when its query no longer plans at a restart.

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;

use super::{NodeKind, StreamNode, StreamPlan};

impl StreamPlan {
    /// What a view whose query no longer plans (at a restart) is kept as: no columns, no
    /// inputs, nothing to run; the view is failed and reading it answers why.
    pub fn unplanned() -> Self {
        let schema = Arc::new(Schema::empty());
        Self {
            root: StreamNode {
                kind: NodeKind::Input {
                    input: 0,
                    projection: None,
                },
                inputs: Vec::new(),
                schema: schema.clone(),
                key_fields: Vec::new(),
                key_columns: None,
                append_only: true,
                watermarks: Vec::new(),
                windows: Vec::new(),
            },
            inputs: Vec::new(),
            schema,
            key_fields: Vec::new(),
            append_only: true,
            emit_on_window_close: false,
            watermarks: Vec::new(),
        }
    }
}
