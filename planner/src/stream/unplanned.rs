//! The plan a view is kept with when its query no longer plans at a restart.

use datafusion::arrow::datatypes::{Field, SchemaRef};

use super::{NodeKind, StreamNode, StreamPlan};

impl StreamPlan {
    /// What a view whose query no longer plans (at a restart) is kept as: the columns, key and
    /// appends it had, no inputs, nothing to run; the view is failed and reading it answers
    /// why.
    pub fn unplanned(
        schema: SchemaRef,
        key_columns: Option<Vec<usize>>,
        append_only: bool,
    ) -> Self {
        let key_fields: Vec<Field> = (key_columns.iter().flatten())
            .filter_map(|&c| schema.fields().get(c).map(|f| f.as_ref().clone()))
            .collect();
        Self {
            root: StreamNode {
                kind: NodeKind::Input {
                    input: 0,
                    projection: None,
                },
                inputs: Vec::new(),
                schema: schema.clone(),
                key_fields: key_fields.clone(),
                key_columns,
                append_only,
                watermarks: Vec::new(),
                windows: Vec::new(),
            },
            inputs: Vec::new(),
            schema,
            key_fields,
            append_only,
            emit_on_window_close: false,
            watermarks: Vec::new(),
        }
    }
}
