//! The sink of every pipeline: upserts the view's rows by stream key and writes the changed
//! ones into the epoch's batch at each barrier.

use std::collections::BTreeMap;
use std::sync::Arc;

use hashbrown::HashMap;

use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use eddy_storage::{EpochBatch, RowCodec, Store, TableId};

use crate::{Barrier, Message, Op, Operator, Result, StreamChunk};

pub struct MaterializeOperator {
    table: TableId,
    schema: SchemaRef,
    key_codec: Option<RowCodec>,
    value_codec: RowCodec,
    /// Rows changed since the last barrier: key → new row (None: deleted).
    pending: HashMap<Vec<u8>, Option<Vec<u8>>>,
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
            schema: schema.clone(),
            key_codec,
            value_codec: RowCodec::new(schema)?,
            pending: HashMap::new(),
        })
    }
}

impl MaterializeOperator {
    /// Every row of the view now (committed, then this epoch's changes) as inserts, with the
    /// stream key after the visible columns.
    pub fn snapshot(&self, store: &dyn Store) -> Result<Option<StreamChunk>> {
        let mut rows: BTreeMap<Vec<u8>, Vec<u8>> =
            store.scan_table(self.table)?.into_iter().collect();
        for (key, value) in &self.pending {
            match value {
                Some(value) => rows.insert(key.clone(), value.clone()),
                None => rows.remove(key),
            };
        }
        if rows.is_empty() {
            return Ok(None);
        }
        let values = self
            .value_codec
            .decode(rows.values().map(|v| v.as_slice()))?;
        let keys = match &self.key_codec {
            Some(codec) => codec
                .decode(rows.keys().map(|k| k.as_slice()))?
                .columns()
                .to_vec(),
            None => Vec::new(),
        };
        Ok(Some(StreamChunk::new(
            vec![Op::Insert; values.num_rows()],
            &self.schema,
            values.columns().to_vec(),
            keys,
        )?))
    }
}

impl Operator for MaterializeOperator {
    fn name(&self) -> &'static str {
        "Materialize"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let values = self
            .value_codec
            .encode(chunk.visible_columns(), chunk.len())?;
        let keys = match &self.key_codec {
            Some(codec) => Some(codec.encode(chunk.key_columns(), chunk.len())?),
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
        // The view's changelog goes on to views that read this one.
        out.push(Message::Chunk(chunk));
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
                Some(value) => epoch.put_owned(self.table, key, value),
                None => epoch.delete_owned(self.table, key),
            }
        }
        Ok(())
    }
}
