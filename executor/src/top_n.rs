//! The top-N operator (see `eddy_planner::TopNPlan`): each partition's rows in order by the
//! memcomparable encoding of their ORDER BY values (ties by the row's key), in a state table,
//! and the changes of each partition's top as they happen (or once, when the partition closes,
//! under `EMIT ON WINDOW CLOSE`).
//!
//! A partition is a state table group, and a row's row key is its order then its stream key,
//! so that a group's rows are in rank order: in the store a row's key is `partition hash (u16)
//! ++ partition ++ order ++ row key`; its value is the partition's and the order's lengths,
//! then the row (visible columns and stream key). Partitions that close are also indexed by
//! their close time (auxiliary rows), which is all a restart reads.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::row::{RowConverter, SortField};
use eddy_planner::{RankKind, TopNPlan};
use eddy_storage::{EpochBatch, KeyRange, RowCodec, StorageError, TableId};
use hashbrown::{HashMap, HashSet};

use crate::state_table::{
    KeyedStateTable, StateContext, StateRow, StateTableStats, StateValue, AUX_PREFIX,
};
use crate::{Barrier, Message, Op, Operator, Result, StreamChunk, Watermark};

/// A row's place in its partition: (order, row key).
type Place = (Box<[u8]>, Box<[u8]>);

/// A row of a partition: where its order ends in its row key (order ++ stream key), and the
/// row itself.
struct TopRow {
    order_len: u32,
    row: Box<[u8]>,
}

impl StateValue for TopRow {
    fn memory(&self) -> usize {
        4 + self.row.len()
    }

    fn stored_len(&self) -> usize {
        8 + self.row.len()
    }
}

impl StateRow for TopRow {
    fn encode(&self, group: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(&(group.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.order_len.to_le_bytes());
        out.extend_from_slice(&self.row);
    }

    fn decode(_group: &[u8], stored: &[u8]) -> Result<Self> {
        let order_len = stored
            .get(4..8)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or_else(|| StorageError::Corrupt("top-N state row".into()))?;
        Ok(Self {
            order_len,
            row: stored[8..].into(),
        })
    }
}

/// A row of a partition's top: its place, rank and encoded row.
type Ranked = (Place, u64, Box<[u8]>);

pub struct TopNOperator {
    plan: TopNPlan,
    table: KeyedStateTable<TopRow>,
    /// The output's visible columns (the input's, then the rank when it is output).
    schema: SchemaRef,
    row_codec: RowCodec,
    partition_codec: Option<RowCodec>,
    order: RowConverter,
    key_codec: RowCodec,
    /// Close time (micros) → partitions, and each partition's close time, when the plan
    /// closes partitions.
    closing: BTreeMap<i64, HashSet<Box<[u8]>>>,
    close_of: HashMap<Box<[u8]>, i64>,
}

/// The auxiliary key of a partition in the index by close time.
fn close_key(time: i64, partition: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(10 + partition.len());
    key.extend_from_slice(&AUX_PREFIX);
    key.extend_from_slice(&((time as u64) ^ (1 << 63)).to_be_bytes());
    key.extend_from_slice(partition);
    key
}

/// A row key split into its place.
fn place_of(row_key: &[u8], row: &TopRow) -> Place {
    let (order, key) = row_key.split_at((row.order_len as usize).min(row_key.len()));
    (order.into(), key.into())
}

fn row_key_of(place: &Place) -> Vec<u8> {
    [&place.0[..], &place.1[..]].concat()
}

fn nullable(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
    ))
}

impl TopNOperator {
    pub fn new(
        plan: TopNPlan,
        table: TableId,
        schema: SchemaRef,
        state: &StateContext,
    ) -> Result<Self> {
        let input = &plan.input_schema;
        let row_fields: Vec<_> = input
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .chain(plan.input_key_fields.iter().cloned())
            .collect();
        let types = |exprs: &mut dyn Iterator<
            Item = &Arc<dyn datafusion::physical_expr::PhysicalExpr>,
        >|
         -> Result<Vec<_>> { exprs.map(|e| Ok(e.data_type(input)?)).collect() };
        let partition_types = types(&mut plan.partition_by.iter())?;
        let partition_codec = (!partition_types.is_empty())
            .then(|| {
                RowCodec::new(nullable(&Schema::new(
                    partition_types
                        .iter()
                        .enumerate()
                        .map(|(i, t)| {
                            datafusion::arrow::datatypes::Field::new(
                                format!("p{i}"),
                                t.clone(),
                                true,
                            )
                        })
                        .collect::<Vec<_>>(),
                )))
            })
            .transpose()?;
        let order_fields = plan
            .order_by
            .iter()
            .map(|e| {
                Ok(SortField::new_with_options(
                    e.expr.data_type(input)?,
                    e.options,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut operator = Self {
            table: state.open(table, "top-N")?,
            schema,
            row_codec: RowCodec::new(nullable(&Schema::new(row_fields)))?,
            partition_codec,
            order: RowConverter::new(order_fields)?,
            key_codec: RowCodec::new(nullable(&Schema::new(plan.input_key_fields.clone())))?,
            closing: BTreeMap::new(),
            close_of: HashMap::new(),
            plan,
        };
        if operator.plan.close.is_some() {
            if operator.table.is_legacy() {
                operator.index_legacy()?;
            }
            for (key, _) in operator.table.read_aux(&KeyRange::prefix(&AUX_PREFIX))? {
                let corrupt = || StorageError::Corrupt("top-N close index row".into());
                let time = key.get(2..10).ok_or_else(corrupt)?;
                let time = (u64::from_be_bytes(time.try_into().map_err(|_| corrupt())?) ^ (1 << 63))
                    as i64;
                operator.index(&key[10..], time, false);
            }
        }
        Ok(operator)
    }

    /// Puts a partition in the index by close time (and its auxiliary row, when `write`).
    fn index(&mut self, partition: &[u8], time: i64, write: bool) {
        self.closing
            .entry(time)
            .or_default()
            .insert(partition.into());
        self.close_of.insert(partition.into(), time);
        if write {
            self.table
                .write_aux(close_key(time, partition), Some(Vec::new()));
        }
    }

    /// Takes a partition out of the index by close time.
    fn unindex(&mut self, partition: &[u8]) {
        if let Some(time) = self.close_of.remove(partition) {
            if let Some(set) = self.closing.get_mut(&time) {
                set.remove(partition);
                if set.is_empty() {
                    self.closing.remove(&time);
                }
            }
            self.table.write_aux(close_key(time, partition), None);
        }
    }

    /// A table written before state tables kept an index by close time: it is built once
    /// from the rows.
    fn index_legacy(&mut self) -> Result<()> {
        let Some(close) = self.plan.close else {
            return Ok(());
        };
        let table = self.table.table();
        let corrupt = || StorageError::Corrupt(format!("top-N state row in table {table}"));
        let stored = self.table.store().scan_table(table)?;
        let mut rows = Vec::new();
        for (key, value) in &stored {
            if key.first() == Some(&0xFF) {
                continue;
            }
            let row = crate::partition::split_ordered(key, value).ok_or_else(corrupt)?;
            rows.push((row.partition.to_vec(), row.rest.to_vec()));
        }
        for part in rows.chunks(4096) {
            let batch = self.row_codec.decode(part.iter().map(|r| r.1.as_slice()))?;
            let value = self.plan.partition_by[close.partition].evaluate(&batch)?;
            let times = eddy_planner::window::to_micros(&value.into_array(batch.num_rows())?)?;
            for (i, (partition, _)) in part.iter().enumerate() {
                if times.is_valid(i) && !self.close_of.contains_key(partition.as_slice()) {
                    self.index(partition, times.value(i), true);
                }
            }
        }
        Ok(())
    }

    /// A partition's top, in order, with ranks (the partition is loaded).
    fn top(&self, partition: &[u8]) -> Vec<Ranked> {
        let Some(rows) = self.table.group(partition) else {
            return Vec::new();
        };
        let (offset, limit) = (self.plan.offset as u64, self.plan.limit as u64);
        let mut top = Vec::new();
        let (mut position, mut rank, mut dense) = (0u64, 0u64, 0u64);
        let mut previous: Option<Box<[u8]>> = None;
        for (row_key, stored) in rows {
            let place = place_of(row_key, stored);
            let row = &stored.row;
            position += 1;
            if previous.as_deref() != Some(&place.0[..]) {
                previous = Some(place.0.clone());
                rank = position;
                dense += 1;
            }
            let r = match self.plan.rank {
                RankKind::RowNumber => position,
                RankKind::Rank => rank,
                RankKind::DenseRank => dense,
            };
            if r <= offset {
                continue;
            }
            if r > offset + limit {
                break;
            }
            top.push((place, r, row.clone()));
        }
        top
    }

    /// Over an append-only input, rows below the top can never rise: they leave the state.
    fn prune(&mut self, partition: &[u8], top: &[Ranked]) -> Result<()> {
        let Some(last) = top.last() else {
            return Ok(());
        };
        if !self.plan.input_append_only || top.len() < self.plan.limit {
            return Ok(());
        }
        let Some(rows) = self.table.group(partition) else {
            return Ok(());
        };
        let last_key: Box<[u8]> = row_key_of(&last.0).into();
        let below: Vec<Box<[u8]>> = rows
            .range::<Box<[u8]>, _>((
                std::ops::Bound::Excluded(&last_key),
                std::ops::Bound::Unbounded,
            ))
            .filter(|(key, row)| {
                self.plan.rank == RankKind::RowNumber || place_of(key, row).0 != last.0 .0
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in below {
            self.table.remove(partition, &key)?;
        }
        Ok(())
    }

    /// The output chunk of `changes`: (insert, row, rank).
    fn emit(&self, changes: Vec<(bool, Box<[u8]>, u64)>, out: &mut Vec<Message>) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let batch = self.row_codec.decode(changes.iter().map(|c| &c.1[..]))?;
        let visible_len = self.plan.input_schema.fields().len();
        let mut visible: Vec<ArrayRef> = batch.columns()[..visible_len].to_vec();
        if self.plan.outputs_rank {
            let ranks: ArrayRef =
                Arc::new(UInt64Array::from_iter_values(changes.iter().map(|c| c.2)));
            let field = self.schema.field(visible_len);
            visible.push(cast(&ranks, field.data_type())?);
        }
        let key = batch.columns()[visible_len..].to_vec();
        let ops = changes
            .iter()
            .map(|c| if c.0 { Op::Insert } else { Op::Delete })
            .collect();
        out.push(Message::Chunk(StreamChunk::new(
            ops,
            &self.schema,
            visible,
            key,
        )?));
        Ok(())
    }

    fn partition_keys(&self, chunk: &StreamChunk) -> Result<Vec<Box<[u8]>>> {
        let Some(codec) = &self.partition_codec else {
            return Ok(vec![Box::from(&[][..]); chunk.len()]);
        };
        let columns = self
            .plan
            .partition_by
            .iter()
            .map(|e| Ok(e.evaluate(&chunk.batch)?.into_array(chunk.len())?))
            .collect::<Result<Vec<_>>>()?;
        let rows = codec.encode(&columns, chunk.len())?;
        Ok(rows.iter().map(|r| Box::from(r.as_ref())).collect())
    }
}

/// The changes between a partition's old and new top: deletes of rows that left or changed
/// (rank or values: an UPDATE of a column outside the ORDER BY keeps the place), then inserts
/// of rows that entered or changed.
fn top_changes(old: Vec<Ranked>, new: &[Ranked]) -> Vec<(bool, Box<[u8]>, u64)> {
    let new_rows: HashMap<&Place, (u64, &[u8])> =
        new.iter().map(|(p, r, row)| (p, (*r, &row[..]))).collect();
    let old_rows: HashMap<Place, (u64, Box<[u8]>)> = old
        .iter()
        .map(|(p, r, row)| (p.clone(), (*r, row.clone())))
        .collect();
    let mut changes = Vec::new();
    for (place, rank, row) in old {
        if new_rows.get(&place) != Some(&(rank, &row[..])) {
            changes.push((false, row, rank));
        }
    }
    for (place, rank, row) in new {
        if old_rows.get(place).map(|(r, b)| (*r, &b[..])) != Some((*rank, &row[..])) {
            changes.push((true, row.clone(), *rank));
        }
    }
    changes
}

impl Operator for TopNOperator {
    fn name(&self) -> &'static str {
        "TopN"
    }

    fn process_chunk(&mut self, chunk: StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        if chunk.is_empty() {
            return Ok(());
        }
        let partitions = self.partition_keys(&chunk)?;
        let order_columns = self
            .plan
            .order_by
            .iter()
            .map(|e| Ok(e.expr.evaluate(&chunk.batch)?.into_array(chunk.len())?))
            .collect::<Result<Vec<_>>>()?;
        let orders = self.order.convert_columns(&order_columns)?;
        let keys = self.key_codec.encode(chunk.key_columns(), chunk.len())?;
        let rows = self.row_codec.encode(chunk.batch.columns(), chunk.len())?;
        let close_times = match self.plan.close {
            Some(close) => {
                let value = self.plan.partition_by[close.partition].evaluate(&chunk.batch)?;
                Some(eddy_planner::window::to_micros(
                    &value.into_array(chunk.len())?,
                )?)
            }
            None => None,
        };
        // The chunk's partitions, read from the store at once when not cached.
        self.table.begin_chunk();
        self.table.load(partitions.iter().map(|p| &p[..]))?;
        // Each touched partition's top before this chunk, in the order first touched.
        let mut before: Vec<(Box<[u8]>, Vec<Ranked>)> = Vec::new();
        let mut seen: HashSet<Box<[u8]>> = HashSet::new();
        for (i, partition) in partitions.into_iter().enumerate() {
            if !seen.contains(&partition) {
                let old = self.top(&partition);
                seen.insert(partition.clone());
                before.push((partition.clone(), old));
            }
            let order = orders.row(i);
            let row_key = [order.as_ref(), keys.row(i).as_ref()].concat();
            if chunk.ops[i].is_insert() {
                let row = TopRow {
                    order_len: order.as_ref().len() as u32,
                    row: rows.row(i).as_ref().into(),
                };
                self.table.insert(&partition, &row_key, row)?;
                if let Some(times) = &close_times {
                    if times.is_valid(i) && !self.close_of.contains_key(&partition) {
                        self.index(&partition, times.value(i), true);
                    }
                }
            } else {
                self.table.remove(&partition, &row_key)?;
            }
        }
        let mut changes = Vec::new();
        for (partition, old) in before {
            let new = self.top(&partition);
            self.prune(&partition, &new)?;
            if self.table.group(&partition).is_none_or(|g| g.is_empty()) {
                self.unindex(&partition);
            }
            if !self.plan.emit_on_close {
                changes.extend(top_changes(old, &new));
            }
        }
        // Output rows are keyed by the input's key: a row that moved to another partition
        // (an UPDATE of a PARTITION BY column) must leave before it arrives.
        changes.sort_by_key(|c| c.0);
        self.emit(changes, out)
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Vec<Message>) -> Result<()> {
        if let Some(close) = self.plan.close.filter(|c| c.clock == watermark.clock) {
            let bound = watermark.value.saturating_add(close.shift);
            let still_open = self.closing.split_off(&bound);
            let closed: Vec<Box<[u8]>> = std::mem::replace(&mut self.closing, still_open)
                .into_values()
                .flatten()
                .collect();
            self.table.begin_chunk();
            self.table.load(closed.iter().map(|p| &p[..]))?;
            let mut changes = Vec::new();
            for key in closed {
                if self.plan.emit_on_close {
                    changes.extend(self.top(&key).into_iter().map(|(_, r, row)| (true, row, r)));
                }
                // Dropping a closed partition emits nothing: its rows are not deleted.
                let row_keys: Vec<Box<[u8]>> = self
                    .table
                    .group(&key)
                    .map(|g| g.keys().cloned().collect())
                    .unwrap_or_default();
                for row_key in row_keys {
                    self.table.remove(&key, &row_key)?;
                }
                if let Some(time) = self.close_of.remove(&key) {
                    self.table.write_aux(close_key(time, &key), None);
                }
            }
            self.emit(changes, out)?;
        }
        out.push(Message::Watermark(watermark));
        Ok(())
    }

    fn process_barrier(
        &mut self,
        _barrier: Barrier,
        epoch: &mut EpochBatch,
        _out: &mut Vec<Message>,
    ) -> Result<()> {
        self.table.persist(epoch)
    }

    fn state_rows(&self) -> usize {
        self.table.rows() as usize
    }

    fn state_bytes(&self) -> usize {
        self.table.cache_bytes()
    }

    fn state_tables(&self) -> Vec<StateTableStats> {
        vec![self.table.stats()]
    }
}
