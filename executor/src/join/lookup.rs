//! Lookup joins (`JOIN t FOR SYSTEM_TIME AS OF PROCTIME()`): each left row is joined with the
//! row of `t` its key finds now, read from `t`'s own stored rows. The join keeps no state of
//! its own: changes to `t` in the current epoch (not yet in the store) are kept until the
//! epoch commits, and emit nothing. The answer depends on when rows arrive: a replay joins
//! with the rows of the replay's time.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use eddy_planner::LookupPlan;
use eddy_storage::keys::table_key;
use eddy_storage::{EpochBatch, RowCodec, Store, TableId};
use hashbrown::HashMap;

use super::pairs::PairRows;
use crate::{Barrier, Message, Operator, Result, StreamChunk};

/// Where a looked-up table keeps its rows: its id, key fields and stored columns.
#[derive(Debug, Clone)]
pub struct StoredRelation {
    pub table: TableId,
    pub key_fields: Vec<Field>,
    pub schema: SchemaRef,
}

pub struct LookupJoinOperator {
    plan: LookupPlan,
    store: Arc<dyn Store>,
    table: TableId,
    /// The looked-up table's key and stored rows.
    key_codec: RowCodec,
    stored_codec: RowCodec,
    /// The right side as the plan reads it (projected columns, then its key), and the left.
    right_codec: RowCodec,
    left_codec: RowCodec,
    /// The table's changes of this epoch: key → row as the plan reads it (None: deleted).
    pending: HashMap<Box<[u8]>, Option<Box<[u8]>>>,
    output: PairRows,
}

fn nullable(fields: impl IntoIterator<Item = Field>) -> SchemaRef {
    Arc::new(Schema::new(
        fields
            .into_iter()
            .map(|f| f.with_nullable(true))
            .collect::<Vec<_>>(),
    ))
}

fn row_schema(visible: &Schema, key: &[Field]) -> SchemaRef {
    nullable(
        visible
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .chain(key.iter().cloned()),
    )
}

impl LookupJoinOperator {
    pub fn new(
        plan: LookupPlan,
        relation: StoredRelation,
        schema: SchemaRef,
        store: Arc<dyn Store>,
    ) -> Result<Self> {
        let output = PairRows::new(
            schema,
            plan.left.schema.fields().len(),
            plan.left.key_fields.len(),
            plan.right.schema.fields().len(),
        );
        Ok(Self {
            key_codec: RowCodec::new(nullable(relation.key_fields.iter().cloned()))?,
            stored_codec: RowCodec::new(nullable(
                relation.schema.fields().iter().map(|f| f.as_ref().clone()),
            ))?,
            right_codec: RowCodec::new(row_schema(&plan.right.schema, &plan.right.key_fields))?,
            left_codec: RowCodec::new(row_schema(&plan.left.schema, &plan.left.key_fields))?,
            table: relation.table,
            plan,
            store,
            pending: HashMap::new(),
            output,
        })
    }

    /// The stored rows of `keys` (the table's encoding), projected and keyed as the plan reads
    /// them: `(columns, key)` of the right side.
    fn as_read(&self, stored: Vec<Vec<u8>>, keys: &[Box<[u8]>]) -> Result<Vec<Box<[u8]>>> {
        if stored.is_empty() {
            return Ok(Vec::new());
        }
        let batch = self
            .stored_codec
            .decode(stored.iter().map(|r| r.as_slice()))?;
        let mut columns: Vec<ArrayRef> = match &self.plan.projection {
            Some(projection) => projection
                .iter()
                .map(|&i| batch.column(i).clone())
                .collect(),
            None => batch.columns().to_vec(),
        };
        let key = self.key_codec.decode(keys.iter().map(|k| k.as_ref()))?;
        columns.extend(key.columns().iter().cloned());
        let rows = self.right_codec.encode(&columns, batch.num_rows())?;
        Ok(rows.iter().map(|r| r.as_ref().into()).collect())
    }

    fn apply_left(&mut self, chunk: &StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let n = chunk.len();
        let keys = self
            .plan
            .lookup_keys
            .iter()
            .map(|e| e.evaluate(&chunk.batch)?.into_array(n))
            .collect::<Result<Vec<_>, _>>()?;
        let encoded = self.key_codec.encode(&keys, n)?;
        // Each row's match: this epoch's change of the table, else its stored row.
        let mut found: Vec<Option<Box<[u8]>>> = vec![None; n];
        let mut from_store: Vec<(usize, Box<[u8]>, Vec<u8>)> = Vec::new();
        for (i, slot) in found.iter_mut().enumerate() {
            if keys.iter().any(|k| k.is_null(i)) {
                continue;
            }
            let row = encoded.row(i);
            let key = row.as_ref();
            match self.pending.get(key) {
                Some(row) => *slot = row.clone(),
                None => {
                    if let Some(row) = self.store.get(&table_key(self.table, key))? {
                        from_store.push((i, key.into(), row));
                    }
                }
            }
        }
        let rows: Vec<Vec<u8>> = from_store.iter().map(|(_, _, r)| r.clone()).collect();
        let read_keys: Vec<Box<[u8]>> = from_store.iter().map(|(_, k, _)| k.clone()).collect();
        for ((i, _, _), row) in from_store.iter().zip(self.as_read(rows, &read_keys)?) {
            found[*i] = Some(row);
        }
        let left_rows = self.left_codec.encode(chunk.batch.columns(), chunk.len())?;
        let passed = self.filter(chunk, &found)?;
        for (i, right) in found.iter().enumerate() {
            let right = right
                .as_deref()
                .filter(|_| passed.as_ref().is_none_or(|p| p[i]));
            if right.is_some() || self.plan.outer {
                self.output
                    .push(chunk.ops[i].is_insert(), left_rows.row(i).as_ref(), right);
            }
        }
        self.output.emit(&self.left_codec, &self.right_codec, out)
    }

    /// The residual predicate on each row and its match (rows without one fail).
    fn filter(
        &self,
        chunk: &StreamChunk,
        found: &[Option<Box<[u8]>>],
    ) -> Result<Option<Vec<bool>>> {
        let Some(filter) = &self.plan.filter else {
            return Ok(None);
        };
        let present: Vec<&[u8]> = found.iter().filter_map(|r| r.as_deref()).collect();
        let rights = self.right_codec.decode(present)?;
        let mut next = 0u32;
        let indices: datafusion::arrow::array::UInt32Array = found
            .iter()
            .map(|r| {
                r.as_ref().map(|_| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        let width = self.plan.right.schema.fields().len();
        let mut columns: Vec<ArrayRef> = chunk.visible_columns().to_vec();
        for column in &rights.columns()[..width] {
            columns.push(datafusion::arrow::compute::take(
                column.as_ref(),
                &indices,
                None,
            )?);
        }
        let fields: Vec<Field> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| Field::new(format!("c{i}"), c.data_type().clone(), true))
            .collect();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
        let mask = filter.evaluate(&batch)?.into_array(batch.num_rows())?;
        let mask = mask.as_boolean();
        Ok(Some(
            (0..mask.len())
                .map(|i| found[i].is_some() && mask.is_valid(i) && mask.value(i))
                .collect(),
        ))
    }

    /// The table's changes: kept for lookups until they are committed.
    fn apply_right(&mut self, chunk: &StreamChunk) -> Result<()> {
        let keys = self.key_codec.encode(chunk.key_columns(), chunk.len())?;
        let rows = self
            .right_codec
            .encode(chunk.batch.columns(), chunk.len())?;
        for (i, op) in chunk.ops.iter().enumerate() {
            let row = op.is_insert().then(|| rows.row(i).as_ref().into());
            self.pending.insert(keys.row(i).as_ref().into(), row);
        }
        Ok(())
    }
}

impl Operator for LookupJoinOperator {
    fn name(&self) -> &'static str {
        "LookupJoin"
    }

    fn process_chunk(&mut self, _chunk: StreamChunk, _out: &mut Vec<Message>) -> Result<()> {
        Err(super::internal(
            "a lookup join's chunks come with the input they are from",
        ))
    }

    fn process_input_chunk(
        &mut self,
        input: usize,
        chunk: StreamChunk,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        if input == 0 {
            self.apply_left(&chunk, out)
        } else {
            self.apply_right(&chunk)
        }
    }

    fn process_input_watermark(
        &mut self,
        input: usize,
        watermark: crate::Watermark,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        // Output rows keep the left row's times: its clocks pass on.
        if input == 0 {
            out.push(Message::Watermark(watermark));
        }
        Ok(())
    }

    fn process_barrier(
        &mut self,
        _barrier: Barrier,
        _epoch: &mut EpochBatch,
        _out: &mut Vec<Message>,
    ) -> Result<()> {
        // The table's rows of this epoch are committed with it: read from the store next.
        self.pending.clear();
        Ok(())
    }
}
