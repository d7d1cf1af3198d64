//! The top-N operator (see `eddy_planner::TopNPlan`): each partition's rows in order by the
//! memcomparable encoding of their ORDER BY values (ties by the row's key), in memory and in
//! the store, and the changes of each partition's top as they happen (or once, when the
//! partition closes, under `EMIT ON WINDOW CLOSE`).
//!
//! In the store a row's key is `partition hash (u16) ++ partition ++ order ++ row key` (the
//! hash leaves room to split the state across threads by key later); its value is the
//! partition's and the order's lengths, then the row (visible columns and stream key).

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::row::{RowConverter, SortField};
use eddy_planner::{RankKind, TopNPlan};
use eddy_storage::{EpochBatch, RowCodec, StorageError, Store, TableId};
use hashbrown::{HashMap, HashSet};

use crate::{Barrier, Message, Op, Operator, Result, StreamChunk, Watermark};

/// A row's place in its partition: (order, row key).
type Place = (Box<[u8]>, Box<[u8]>);

#[derive(Default)]
struct Partition {
    rows: BTreeMap<Place, Box<[u8]>>,
    /// The partition's value in the closing column (micros), when the plan closes partitions.
    close_time: Option<i64>,
}

/// A row of a partition's top: its place, rank and encoded row.
type Ranked = (Place, u64, Box<[u8]>);

pub struct TopNOperator {
    plan: TopNPlan,
    table: TableId,
    /// The output's visible columns (the input's, then the rank when it is output).
    schema: SchemaRef,
    row_codec: RowCodec,
    partition_codec: Option<RowCodec>,
    order: RowConverter,
    key_codec: RowCodec,
    partitions: HashMap<Box<[u8]>, Partition>,
    /// Rows changed since the last barrier: (partition, place).
    dirty: HashSet<(Box<[u8]>, Place)>,
    rows: usize,
    row_size: crate::state_size::SizeEstimate,
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
        store: &dyn Store,
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
            table,
            schema,
            row_codec: RowCodec::new(nullable(&Schema::new(row_fields)))?,
            partition_codec,
            order: RowConverter::new(order_fields)?,
            key_codec: RowCodec::new(nullable(&Schema::new(plan.input_key_fields.clone())))?,
            partitions: HashMap::new(),
            dirty: HashSet::new(),
            rows: 0,
            row_size: Default::default(),
            plan,
        };
        operator.load(store)?;
        Ok(operator)
    }

    fn load(&mut self, store: &dyn Store) -> Result<()> {
        let table = self.table;
        let corrupt = || StorageError::Corrupt(format!("top-N state row in table {table}"));
        let mut loaded = Vec::new();
        for (key, value) in store.scan_table(table)? {
            let row = crate::partition::split_ordered(&key, &value).ok_or_else(corrupt)?;
            let bytes = key.len() + value.len() + crate::state_size::ENTRY_OVERHEAD;
            self.row_size.observe(bytes, 1);
            loaded.push((
                row.partition.to_vec(),
                row.order.to_vec(),
                row.row_key.to_vec(),
                row.rest.to_vec(),
            ));
        }
        for rows in loaded.chunks(4096) {
            let times = match self.plan.close {
                Some(close) => {
                    let batch = self.row_codec.decode(rows.iter().map(|r| r.3.as_slice()))?;
                    let value = self.plan.partition_by[close.partition].evaluate(&batch)?;
                    Some(eddy_planner::window::to_micros(
                        &value.into_array(batch.num_rows())?,
                    )?)
                }
                None => None,
            };
            for (i, (partition, order, row_key, row)) in rows.iter().enumerate() {
                let entry = self
                    .partitions
                    .entry(partition.as_slice().into())
                    .or_default();
                if let Some(times) = &times {
                    entry.close_time = times.is_valid(i).then(|| times.value(i));
                }
                entry.rows.insert(
                    (order.as_slice().into(), row_key.as_slice().into()),
                    row.as_slice().into(),
                );
                self.rows += 1;
            }
        }
        Ok(())
    }

    /// A partition's top, in order, with ranks.
    fn top(&self, partition: &Partition) -> Vec<Ranked> {
        let (offset, limit) = (self.plan.offset as u64, self.plan.limit as u64);
        let mut top = Vec::new();
        let (mut position, mut rank, mut dense) = (0u64, 0u64, 0u64);
        let mut previous: Option<&[u8]> = None;
        for (place, row) in &partition.rows {
            position += 1;
            if previous != Some(&place.0[..]) {
                previous = Some(&place.0);
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
            top.push((place.clone(), r, row.clone()));
        }
        top
    }

    /// Over an append-only input, rows below the top can never rise: they leave the state.
    fn prune(&mut self, partition: &[u8], top: &[Ranked]) {
        let Some(last) = top.last() else { return };
        if !self.plan.input_append_only || top.len() < self.plan.limit {
            return;
        }
        let Some(entry) = self.partitions.get_mut(partition) else {
            return;
        };
        let below: Vec<Place> = entry
            .rows
            .range((
                std::ops::Bound::Excluded(last.0.clone()),
                std::ops::Bound::Unbounded,
            ))
            .filter(|(place, _)| self.plan.rank == RankKind::RowNumber || place.0 != last.0 .0)
            .map(|(place, _)| place.clone())
            .collect();
        for place in below {
            entry.rows.remove(&place);
            self.rows -= 1;
            self.dirty.insert((partition.into(), place));
        }
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
        // Each touched partition's top before this chunk, in the order first touched.
        let mut before: Vec<(Box<[u8]>, Vec<Ranked>)> = Vec::new();
        let mut seen: HashSet<Box<[u8]>> = HashSet::new();
        for (i, partition) in partitions.into_iter().enumerate() {
            if !seen.contains(&partition) {
                let old = self
                    .partitions
                    .get(&partition)
                    .map(|p| self.top(p))
                    .unwrap_or_default();
                seen.insert(partition.clone());
                before.push((partition.clone(), old));
            }
            let place: Place = (orders.row(i).as_ref().into(), keys.row(i).as_ref().into());
            let entry = self.partitions.entry(partition.clone()).or_default();
            if let Some(times) = &close_times {
                entry.close_time = times.is_valid(i).then(|| times.value(i));
            }
            let changed = if chunk.ops[i].is_insert() {
                let added = entry
                    .rows
                    .insert(place.clone(), rows.row(i).as_ref().into())
                    .is_none();
                if added {
                    self.rows += 1;
                }
                true
            } else if entry.rows.remove(&place).is_some() {
                self.rows -= 1;
                true
            } else {
                false
            };
            if changed {
                self.dirty.insert((partition, place));
            }
        }
        let mut changes = Vec::new();
        for (partition, old) in before {
            let new = self
                .partitions
                .get(&partition)
                .map(|p| self.top(p))
                .unwrap_or_default();
            self.prune(&partition, &new);
            if self
                .partitions
                .get(&partition)
                .is_some_and(|p| p.rows.is_empty())
            {
                self.partitions.remove(&partition);
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
            let closed: Vec<Box<[u8]>> = self
                .partitions
                .iter()
                .filter(|(_, p)| p.close_time.is_some_and(|t| t < bound))
                .map(|(k, _)| k.clone())
                .collect();
            let mut changes = Vec::new();
            for key in closed {
                let Some(partition) = self.partitions.remove(&key) else {
                    continue;
                };
                if self.plan.emit_on_close {
                    changes.extend(
                        self.top(&partition)
                            .into_iter()
                            .map(|(_, r, row)| (true, row, r)),
                    );
                }
                // Dropping a closed partition emits nothing: its rows are not deleted.
                for place in partition.rows.into_keys() {
                    self.rows -= 1;
                    self.dirty.insert((key.clone(), place));
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
        let (mut measured, mut kept) = (0, 0);
        for (partition, place) in self.dirty.drain() {
            let key = crate::partition::ordered_key(&partition, &place.0, &place.1);
            match self
                .partitions
                .get(&partition)
                .and_then(|p| p.rows.get(&place))
            {
                Some(row) => {
                    measured += place.0.len()
                        + place.1.len()
                        + row.len()
                        + crate::state_size::ENTRY_OVERHEAD;
                    kept += 1;
                    let mut value =
                        crate::partition::ordered_value(&partition, &place.0, row.len());
                    value.extend_from_slice(row);
                    epoch.put(self.table, &key, value);
                }
                None => epoch.delete(self.table, &key),
            }
        }
        self.row_size.observe(measured, kept);
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.rows
    }

    fn state_bytes(&self) -> usize {
        self.row_size.total(self.rows)
    }
}
