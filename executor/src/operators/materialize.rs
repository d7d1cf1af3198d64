//! The sink of every pipeline: upserts the view's rows by stream key and writes the changed
//! ones into the epoch's batch at each barrier.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use eddy_storage::{EpochBatch, RowCodec, TableId};

use crate::{Barrier, Message, Operator, Result, StreamChunk};

pub struct MaterializeOperator {
    table: TableId,
    key_codec: Option<RowCodec>,
    value_codec: RowCodec,
    /// Rows changed since the last barrier: key → new row (None: deleted).
    pending: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl MaterializeOperator {
    pub fn new(table: TableId, schema: SchemaRef, key_types: Vec<Field>) -> Result<Self> {
        let key_codec = if key_types.is_empty() {
            None
        } else {
            Some(RowCodec::new(Arc::new(Schema::new(key_types)))?)
        };
        Ok(Self {
            table,
            key_codec,
            value_codec: RowCodec::new(schema)?,
            pending: BTreeMap::new(),
        })
    }
}

impl Operator for MaterializeOperator {
    fn name(&self) -> &'static str {
        "Materialize"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, _out: &mut Vec<Message>) -> Result<()> {
        let values = self.value_codec.encode(chunk.visible_columns())?;
        let keys = match &self.key_codec {
            Some(codec) => Some(codec.encode(chunk.key_columns())?),
            None => None,
        };
        // Changelog order matters (a delete then an insert of one key), so rows go in order.
        for (i, op) in chunk.ops.iter().enumerate() {
            let key = keys
                .as_ref()
                .map_or(Vec::new(), |k| k.row(i).as_ref().to_vec());
            let value = op.is_insert().then(|| values.row(i).as_ref().to_vec());
            self.pending.insert(key, value);
        }
        Ok(())
    }

    fn process_barrier(
        &mut self,
        _barrier: Barrier,
        epoch: &mut EpochBatch,
        _out: &mut Vec<Message>,
    ) -> Result<()> {
        for (key, value) in std::mem::take(&mut self.pending) {
            match value {
                Some(value) => epoch.put(self.table, &key, value),
                None => epoch.delete(self.table, &key),
            }
        }
        Ok(())
    }
}
