//! Assigns each row to its TUMBLE, HOP or CUMULATE windows (or its own one-row SESSION),
//! adding `window_start` and `window_end`.

use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::SchemaRef;
use eddy_planner::window::{apply_windows, VaryingColumn};
use eddy_planner::WindowSpec;

use crate::{Message, Operator, Result, StreamChunk};

/// About how many rows one piece of input expands to, when a row is in several windows.
const OUTPUT_ROWS: usize = 8192;

pub struct WindowOperator {
    time_column: usize,
    spec: WindowSpec,
    /// HOP puts `window_start` into the stream key: one row is in several windows.
    adds_key: bool,
    schema: SchemaRef,
}

impl WindowOperator {
    pub fn new(time_column: usize, spec: WindowSpec, adds_key: bool, schema: SchemaRef) -> Self {
        Self {
            time_column,
            spec,
            adds_key,
            schema,
        }
    }
}

impl Operator for WindowOperator {
    fn name(&self) -> &'static str {
        "Window"
    }

    fn max_input_rows(&self) -> Option<usize> {
        let per_row = usize::try_from(self.spec.windows_per_row()).unwrap_or(usize::MAX);
        (per_row > 1).then(|| (OUTPUT_ROWS / per_row).max(1))
    }

    fn process_chunk(&mut self, chunk: StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let (columns, indices) =
            apply_windows(chunk.visible_columns(), self.time_column, &self.spec)?;
        let mut key = chunk
            .key_columns()
            .iter()
            .map(|k| take(k.as_ref(), &indices, None))
            .collect::<Result<Vec<_>, _>>()?;
        if self.adds_key {
            // A row in several windows: the varying bound tells its copies apart.
            let last = columns.len() - 1;
            let index = match self.spec.varying_column() {
                Some(VaryingColumn::End) => last,
                _ => last - 1,
            };
            key.push(columns[index].clone());
        }
        let ops = indices
            .values()
            .iter()
            .map(|&i| chunk.ops[i as usize])
            .collect();
        let windowed = StreamChunk::new(ops, &self.schema, columns, key)?;
        if !windowed.is_empty() {
            out.push(Message::Chunk(windowed));
        }
        Ok(())
    }
}
