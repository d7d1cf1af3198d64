//! Lookup joins (`JOIN t FOR SYSTEM_TIME AS OF PROCTIME()`): each left row is joined with the
//! rows of `t` its key finds now. When the join names `t`'s whole primary key, the one row is
//! read from `t`'s own stored rows, and changes to `t` in the current epoch (not yet in the
//! store) are kept until the epoch commits. Otherwise (no primary key: several version rows
//! per key) the operator indexes `t`'s rows by the join key in a state table of its own,
//! built from `t`'s stored rows when the view is created and kept up to date by `t`'s changes,
//! committed with them (so a restart reads it as the keys need it, not the whole table); each
//! match is an output row. Views created before the index was stored build it in memory at
//! every start. Changes to `t` emit nothing. Over a left input that retracts, each left row's output rows are kept (a state
//! table) so that its retraction retracts exactly them. The answer depends on when rows arrive:
//! a replay joins with the rows of the replay's time.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use eddy_planner::LookupPlan;
use eddy_storage::keys::table_key;
use eddy_storage::{EpochBatch, RowCodec, Store, TableId};
use hashbrown::HashMap;

use super::pairs::PairRows;
use super::state::{nullable, SideState};
use crate::state_table::StateContext;
use crate::{Barrier, Message, Operator, Result, StreamChunk};

/// The table's rows by join key: join key → row key → row as the plan reads it.
type Index = HashMap<Box<[u8]>, BTreeMap<Box<[u8]>, Box<[u8]>>>;

/// `by_index`: the looked-up table's rows by join key, and the join key's and right key's
/// encodings.
struct JoinKeyIndex {
    rows: IndexRows,
    join_key_codec: RowCodec,
    right_key_codec: RowCodec,
}

enum IndexRows {
    /// Rebuilt at every start (views created before the index was stored).
    Memory(Index),
    /// A state table: join key → row key → row, cached within the node's bound.
    Stored(Box<SideState>),
}

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
    index: Option<JoinKeyIndex>,
    /// A left input that retracts: left row key → (ordinal → the right row it was output
    /// with; empty for a row padded with NULLs), and the left key's encoding.
    emitted: Option<(SideState, RowCodec)>,
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
    /// `index_table`: where a lookup by other columns than the table's primary key keeps its
    /// index (None: in memory, rebuilt at every start).
    pub fn new(
        plan: LookupPlan,
        relation: StoredRelation,
        emitted_table: Option<TableId>,
        index_table: Option<TableId>,
        schema: SchemaRef,
        state: &StateContext,
    ) -> Result<Self> {
        let store = state.store.clone();
        let mut output = PairRows::new(
            schema,
            plan.left.schema.fields().len(),
            plan.left.key_fields.len(),
            plan.right.schema.fields().len(),
        );
        if plan.by_index {
            output = output.keyed_by_both(plan.right.key_fields.len());
        }
        let emitted = match emitted_table {
            Some(table) => Some((
                SideState::open(
                    state,
                    table,
                    "lookup join emitted",
                    &plan.right.schema,
                    &plan.right.key_fields,
                    &[],
                    None,
                )?,
                RowCodec::new(nullable(plan.left.key_fields.iter().cloned()))?,
            )),
            None => None,
        };
        let mut operator = Self {
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
            index: None,
            emitted,
        };
        if operator.plan.by_index {
            operator.open_index(index_table, state)?;
        }
        Ok(operator)
    }

    /// Opens the index by join key: a stored one as it is, a new or in-memory one filled with
    /// the table's stored rows.
    fn open_index(&mut self, table: Option<TableId>, state: &StateContext) -> Result<()> {
        let right = &self.plan.right;
        let types = right
            .keys
            .iter()
            .map(|k| k.data_type(&right.schema))
            .collect::<Result<Vec<_>, _>>()?;
        let join_key_codec = RowCodec::new(nullable(
            types
                .iter()
                .enumerate()
                .map(|(i, t)| Field::new(format!("k{i}"), t.clone(), true)),
        ))?;
        let right_key_codec = RowCodec::new(nullable(right.key_fields.iter().cloned()))?;
        let (rows, fill) = match table {
            Some(table) => {
                let index = SideState::open(
                    state,
                    table,
                    "lookup join index",
                    &right.schema,
                    &right.key_fields,
                    &types,
                    None,
                )?;
                // Written with the table's rows ever since the view was created: a table
                // never written has held no row, and starts from the table's rows now.
                let fill = !index.table.was_stored();
                (IndexRows::Stored(Box::new(index)), fill)
            }
            None => (IndexRows::Memory(Index::new()), true),
        };
        self.index = Some(JoinKeyIndex {
            rows,
            join_key_codec,
            right_key_codec,
        });
        if fill {
            self.fill_index()?;
        }
        Ok(())
    }

    /// Indexes the table's stored rows by the join key.
    fn fill_index(&mut self) -> Result<()> {
        let (keys, rows): (Vec<Box<[u8]>>, Vec<Vec<u8>>) = self
            .store
            .scan_table(self.table)?
            .into_iter()
            .map(|(k, v)| (k.into_boxed_slice(), v))
            .unzip();
        for (keys, rows) in keys.chunks(4096).zip(rows.chunks(4096)) {
            let read = self.as_read(rows.to_vec(), keys)?;
            let batch = self.right_codec.decode(read.iter().map(|r| r.as_ref()))?;
            let ops = vec![crate::Op::Insert; batch.num_rows()];
            self.index_rows(&batch, &ops)?;
        }
        Ok(())
    }

    /// Applies rows of the right side (visible columns, then its key) to the index.
    fn index_rows(&mut self, batch: &RecordBatch, ops: &[crate::Op]) -> Result<()> {
        let Some(index) = &mut self.index else {
            return Ok(());
        };
        let n = batch.num_rows();
        let width = self.plan.right.schema.fields().len();
        let keys = self
            .plan
            .right
            .keys
            .iter()
            .map(|e| e.evaluate(batch)?.into_array(n))
            .collect::<Result<Vec<_>, _>>()?;
        let join_keys = index.join_key_codec.encode(&keys, n)?;
        let row_keys = index.right_key_codec.encode(&batch.columns()[width..], n)?;
        let rows = self.right_codec.encode(batch.columns(), n)?;
        // A NULL join key matches nothing.
        let indexed = (0..n).filter(|&i| keys.iter().all(|k| k.is_valid(i)));
        match &mut index.rows {
            IndexRows::Memory(index) => {
                for i in indexed {
                    let join_key = join_keys.row(i);
                    let row_key: Box<[u8]> = row_keys.row(i).as_ref().into();
                    if ops[i].is_insert() {
                        index
                            .entry_ref(join_key.as_ref())
                            .or_default()
                            .insert(row_key, rows.row(i).as_ref().into());
                    } else if let Some(bucket) = index.get_mut(join_key.as_ref()) {
                        bucket.remove(&row_key);
                        if bucket.is_empty() {
                            index.remove(join_key.as_ref());
                        }
                    }
                }
            }
            IndexRows::Stored(index) => {
                let indexed: Vec<usize> = indexed.collect();
                index.table.begin_chunk();
                index.load(indexed.iter().map(|&i| join_keys.row(i).data()))?;
                for i in indexed {
                    let (join_key, row_key) = (join_keys.row(i), row_keys.row(i));
                    if ops[i].is_insert() {
                        let row = rows.row(i).as_ref().into();
                        index.insert(join_key.as_ref(), row_key.as_ref(), row, 0, None)?;
                    } else {
                        index.remove(join_key.as_ref(), row_key.as_ref(), None)?;
                    }
                }
            }
        }
        Ok(())
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

    /// Each inserted left row's matches (as the plan reads the right side); none for others.
    fn matches(&mut self, chunk: &StreamChunk) -> Result<Vec<Vec<Box<[u8]>>>> {
        let n = chunk.len();
        let mut found: Vec<Vec<Box<[u8]>>> = vec![Vec::new(); n];
        if let Some(index) = &mut self.index {
            let keys = self
                .plan
                .left
                .keys
                .iter()
                .map(|e| e.evaluate(&chunk.batch)?.into_array(n))
                .collect::<Result<Vec<_>, _>>()?;
            let encoded = index.join_key_codec.encode(&keys, n)?;
            let looked_up: Vec<usize> = (0..n)
                .filter(|&i| chunk.ops[i].is_insert() && keys.iter().all(|k| k.is_valid(i)))
                .collect();
            match &mut index.rows {
                IndexRows::Memory(index) => {
                    for i in looked_up {
                        if let Some(bucket) = index.get(encoded.row(i).as_ref()) {
                            found[i].extend(bucket.values().cloned());
                        }
                    }
                }
                IndexRows::Stored(index) => {
                    index.table.begin_chunk();
                    index.load(looked_up.iter().map(|&i| encoded.row(i).data()))?;
                    for i in looked_up {
                        if let Some(bucket) = index.table.group(encoded.row(i).as_ref()) {
                            found[i].extend(bucket.values().map(|entry| entry.row.clone()));
                        }
                    }
                }
            }
            return Ok(found);
        }
        let keys = self
            .plan
            .lookup_keys
            .iter()
            .map(|e| e.evaluate(&chunk.batch)?.into_array(n))
            .collect::<Result<Vec<_>, _>>()?;
        let encoded = self.key_codec.encode(&keys, n)?;
        // Each row's match: this epoch's change of the table, else its stored row.
        let mut from_store: Vec<(usize, Box<[u8]>, Vec<u8>)> = Vec::new();
        for (i, slot) in found.iter_mut().enumerate() {
            if !chunk.ops[i].is_insert() || keys.iter().any(|k| k.is_null(i)) {
                continue;
            }
            let row = encoded.row(i);
            let key = row.as_ref();
            match self.pending.get(key) {
                Some(row) => slot.extend(row.clone()),
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
            found[*i].push(row);
        }
        Ok(found)
    }

    fn apply_left(&mut self, chunk: &StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        let mut found = self.matches(chunk)?;
        self.filter(chunk, &mut found)?;
        let left_rows = self.left_codec.encode(chunk.batch.columns(), chunk.len())?;
        let left_keys = match &self.emitted {
            Some((_, codec)) => Some(codec.encode(chunk.key_columns(), chunk.len())?),
            None => None,
        };
        if let (Some((emitted, _)), Some(keys)) = (&mut self.emitted, &left_keys) {
            emitted.table.begin_chunk();
            emitted
                .table
                .load((0..chunk.len()).map(|i| keys.row(i).data()))?;
        }
        for (i, rights) in found.into_iter().enumerate() {
            let left = left_rows.row(i);
            let insert = chunk.ops[i].is_insert();
            // The output rows of this left row: its matches now, or those it was output with.
            let rights: Vec<Option<Box<[u8]>>> = match &left_keys {
                Some(keys) if !insert => self.take_emitted(keys.row(i).as_ref())?,
                _ if rights.is_empty() && self.plan.outer => vec![None],
                _ => rights.into_iter().map(Some).collect(),
            };
            if insert {
                if let (Some((emitted, _)), Some(keys)) = (&mut self.emitted, &left_keys) {
                    for (ordinal, right) in rights.iter().enumerate() {
                        let row = right.clone().unwrap_or_default();
                        let ordinal = (ordinal as u32).to_be_bytes();
                        emitted.insert(keys.row(i).as_ref(), &ordinal, row, 0, None)?;
                    }
                }
            }
            for right in rights {
                self.output.push(insert, left.as_ref(), right.as_deref());
            }
            if self.output.len() >= super::SLICE_ROWS {
                self.output.emit(&self.left_codec, &self.right_codec, out)?;
            }
        }
        self.output.emit(&self.left_codec, &self.right_codec, out)
    }

    /// The right rows a left row was output with (None: padded with NULLs), forgotten.
    fn take_emitted(&mut self, left_key: &[u8]) -> Result<Vec<Option<Box<[u8]>>>> {
        let Some((emitted, _)) = &mut self.emitted else {
            return Ok(Vec::new());
        };
        let Some(bucket) = emitted.table.group(left_key) else {
            return Ok(Vec::new());
        };
        let kept: Vec<_> = bucket
            .iter()
            .map(|(ordinal, entry)| (ordinal.clone(), entry.row.clone()))
            .collect();
        kept.into_iter()
            .map(|(ordinal, row)| {
                emitted.remove(left_key, &ordinal, None)?;
                Ok((!row.is_empty()).then_some(row))
            })
            .collect()
    }

    /// Keeps the matches that pass the residual predicate (evaluated on all pairs at once).
    fn filter(&self, chunk: &StreamChunk, found: &mut [Vec<Box<[u8]>>]) -> Result<()> {
        let Some(filter) = &self.plan.filter else {
            return Ok(());
        };
        let lefts: UInt32Array = found
            .iter()
            .enumerate()
            .flat_map(|(i, rights)| std::iter::repeat_n(i as u32, rights.len()))
            .collect();
        if lefts.is_empty() {
            return Ok(());
        }
        let rights = self
            .right_codec
            .decode(found.iter().flatten().map(|r| r.as_ref()))?;
        let width = self.plan.right.schema.fields().len();
        let mut columns: Vec<ArrayRef> = chunk
            .visible_columns()
            .iter()
            .map(|c| take(c.as_ref(), &lefts, None))
            .collect::<Result<_, _>>()?;
        columns.extend(rights.columns()[..width].iter().cloned());
        let fields: Vec<Field> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| Field::new(format!("c{i}"), c.data_type().clone(), true))
            .collect();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
        let mask = filter.evaluate(&batch)?.into_array(batch.num_rows())?;
        let mask = mask.as_boolean();
        let mut pair = 0;
        for rights in found.iter_mut() {
            let mut kept = Vec::with_capacity(rights.len());
            for right in rights.drain(..) {
                if mask.is_valid(pair) && mask.value(pair) {
                    kept.push(right);
                }
                pair += 1;
            }
            *rights = kept;
        }
        Ok(())
    }

    /// The state tables: the left rows' output rows and the stored index, those there are.
    fn state_sides(&self) -> impl Iterator<Item = &SideState> {
        let index = match &self.index {
            Some(JoinKeyIndex {
                rows: IndexRows::Stored(index),
                ..
            }) => Some(index.as_ref()),
            _ => None,
        };
        self.emitted.iter().map(|(emitted, _)| emitted).chain(index)
    }

    fn stored_index(&mut self) -> Option<&mut SideState> {
        match &mut self.index {
            Some(JoinKeyIndex {
                rows: IndexRows::Stored(index),
                ..
            }) => Some(index.as_mut()),
            _ => None,
        }
    }

    /// The table's changes: kept for lookups until they are committed (or in the index).
    fn apply_right(&mut self, chunk: &StreamChunk) -> Result<()> {
        if self.index.is_some() {
            return self.index_rows(&chunk.batch, &chunk.ops);
        }
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
        epoch: &mut EpochBatch,
        _out: &mut Vec<Message>,
    ) -> Result<()> {
        // The table's rows of this epoch are committed with it: read from the store next.
        self.pending.clear();
        if let Some((emitted, _)) = &mut self.emitted {
            emitted.persist(epoch)?;
        }
        if let Some(index) = self.stored_index() {
            index.persist(epoch)?;
        }
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.state_sides()
            .map(|side| side.table.rows() as usize)
            .sum()
    }

    fn state_bytes(&self) -> usize {
        self.state_sides().map(SideState::memory_bytes).sum()
    }

    fn state_tables(&self) -> Vec<crate::state_table::StateTableStats> {
        self.state_sides().map(SideState::stats).collect()
    }
}
