//! The OVER window operator (see `eddy_planner::OverWindowPlan`): each partition's rows in
//! order by the memcomparable encoding of their ORDER BY values (ties by the row's key), in a
//! state table, with DataFusion's window functions evaluated over a partition's rows in that
//! order.
//!
//! In the final form a row is emitted once, when the watermark passes its time (and, for
//! `LEAD`, once the rows it looks ahead to are final too); emitted rows are then dropped as
//! soon as no later row's frame reaches back to them. In the general form every row stays, and
//! a change recomputes its partition: rows whose values changed are retracted and emitted again.
//!
//! A partition is a state table group and a row's row key is its order then its stream key, so
//! a group's rows are in order: in the store a row's key is `partition hash (u16) ++ partition
//! ++ order ++ row key`; its value is the partition's and the order's lengths, an emitted flag,
//! then the row. A partition read back gets what its stored rows leave out computed again: the
//! rows' times (final form) and the values emitted for them (general form, by evaluating the
//! partition). In the final form the partitions with rows not emitted yet are indexed
//! (auxiliary rows), which is all a restart reads.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::compute::{cast, concat};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::arrow::row::{RowConverter, Rows, SortField};
use eddy_planner::{FinalRows, OverWindowPlan};
use eddy_storage::{EpochBatch, KeyRange, RowCodec, StorageError, TableId};
use hashbrown::HashSet;

use crate::state_table::{
    KeyedStateTable, StateContext, StateRow, StateTableStats, StateValue, AUX_PREFIX,
};
use crate::{Barrier, Message, Op, Operator, Result, StreamChunk, Watermark};

/// A row of a partition.
struct OverRow {
    /// Where its order ends in its row key (order ++ stream key).
    order_len: u32,
    /// Its time in micros (the final form; `i64::MIN` for NULL, which is final at once). Not
    /// stored: computed when its partition is read.
    time: i64,
    /// The function values last emitted for the row, encoded; None while not emitted. Stored
    /// as a flag only: empty when read back, until the general form evaluates the partition
    /// again (the final form only needs to know that a row was emitted).
    emitted: Option<Box<[u8]>>,
    /// The input row: visible columns, then stream key.
    row: Box<[u8]>,
}

impl StateValue for OverRow {
    fn memory(&self) -> usize {
        12 + self.row.len() + self.emitted.as_ref().map_or(0, |e| 16 + e.len())
    }

    fn stored_len(&self) -> usize {
        9 + self.row.len()
    }
}

impl StateRow for OverRow {
    fn encode(&self, group: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(&(group.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.order_len.to_le_bytes());
        out.push(u8::from(self.emitted.is_some()));
        out.extend_from_slice(&self.row);
    }

    fn decode(_group: &[u8], stored: &[u8]) -> Result<Self> {
        let corrupt = || StorageError::Corrupt("OVER window state row".into());
        let order_len = stored
            .get(4..8)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or_else(corrupt)?;
        let emitted = *stored.get(8).ok_or_else(corrupt)? != 0;
        Ok(Self {
            order_len,
            time: i64::MIN,
            emitted: emitted.then(|| Box::from(&[][..])),
            row: stored[9..].into(),
        })
    }
}

/// One output row change: (insert, row, function values).
type Change = (bool, Box<[u8]>, Box<[u8]>);

/// A row final now: (row key, row, function values).
type Emission = (Box<[u8]>, Box<[u8]>, Box<[u8]>);

/// Per partition, the encoded function values of its evaluated rows, in order.
type Evaluated = Vec<(Box<[u8]>, Vec<Box<[u8]>>)>;

pub struct OverWindowOperator {
    plan: OverWindowPlan,
    table: KeyedStateTable<OverRow>,
    /// The output's visible columns: the input's, then one per function.
    schema: SchemaRef,
    row_codec: RowCodec,
    values_codec: RowCodec,
    partition_codec: Option<RowCodec>,
    order: RowConverter,
    key_codec: RowCodec,
    /// Final form: the partitions holding rows not emitted yet (indexed in the store too).
    waiting: HashSet<Box<[u8]>>,
}

fn nullable(fields: impl IntoIterator<Item = Field>) -> SchemaRef {
    Arc::new(Schema::new(
        fields
            .into_iter()
            .map(|f| f.with_nullable(true))
            .collect::<Vec<_>>(),
    ))
}

/// The auxiliary key of a partition waiting for the watermark.
fn waiting_key(partition: &[u8]) -> Vec<u8> {
    [&AUX_PREFIX[..], partition].concat()
}

impl OverWindowOperator {
    pub fn new(
        plan: OverWindowPlan,
        table: TableId,
        schema: SchemaRef,
        state: &StateContext,
    ) -> Result<Self> {
        let input = &plan.input_schema;
        let row_fields = input
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .chain(plan.input_key_fields.iter().cloned());
        let value_fields = plan
            .functions
            .iter()
            .map(|f| Ok(f.field()?.as_ref().clone()))
            .collect::<Result<Vec<_>>>()?;
        let partition_fields = plan
            .partition_by
            .iter()
            .enumerate()
            .map(|(i, e)| Ok(Field::new(format!("p{i}"), e.data_type(input)?, true)))
            .collect::<Result<Vec<_>>>()?;
        let partition_codec = (!partition_fields.is_empty())
            .then(|| RowCodec::new(nullable(partition_fields)))
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
            table: state.open(table, "OVER window")?,
            schema,
            row_codec: RowCodec::new(nullable(row_fields))?,
            values_codec: RowCodec::new(nullable(value_fields))?,
            partition_codec,
            order: RowConverter::new(order_fields)?,
            key_codec: RowCodec::new(nullable(plan.input_key_fields.iter().cloned()))?,
            waiting: HashSet::new(),
            plan,
        };
        if operator.plan.final_rows.is_some() {
            if operator.table.is_legacy() {
                operator.index_legacy()?;
            }
            for (key, _) in operator.table.read_aux(&KeyRange::prefix(&AUX_PREFIX))? {
                operator.waiting.insert(key[AUX_PREFIX.len()..].into());
            }
        }
        Ok(operator)
    }

    /// A table written before state tables kept no index of waiting partitions: it is built
    /// once from the rows.
    fn index_legacy(&mut self) -> Result<()> {
        let table = self.table.table();
        let corrupt = || StorageError::Corrupt(format!("OVER window state row in table {table}"));
        for (key, value) in self.table.store().scan_table(table)? {
            if key.first() == Some(&0xFF) {
                continue;
            }
            let row = crate::partition::split_ordered(&key, &value).ok_or_else(corrupt)?;
            if row.rest.first() == Some(&0) {
                self.wait(row.partition);
            }
        }
        Ok(())
    }

    fn wait(&mut self, partition: &[u8]) {
        if !self.waiting.contains(partition) {
            self.waiting.insert(partition.into());
            self.table
                .write_aux(waiting_key(partition), Some(Vec::new()));
        }
    }

    fn unwait(&mut self, partition: &[u8]) {
        if self.waiting.remove(partition) {
            self.table.write_aux(waiting_key(partition), None);
        }
    }

    /// Makes `partitions` cached, completing those read from the store.
    fn load(&mut self, partitions: &[Box<[u8]>]) -> Result<()> {
        let read: Vec<Box<[u8]>> = partitions
            .iter()
            .filter(|p| self.table.group(p).is_none())
            .cloned()
            .collect();
        self.table.load(partitions.iter().map(|p| &p[..]))?;
        for partition in read {
            self.complete(&partition)?;
        }
        Ok(())
    }

    /// Fills in what a partition read from the store leaves out: its rows' times (final form)
    /// and the values emitted for them (general form: its rows were all emitted).
    fn complete(&mut self, partition: &[u8]) -> Result<()> {
        let Some(rows) = self.table.group(partition).filter(|r| !r.is_empty()) else {
            return Ok(());
        };
        let (times, values) = match self.plan.final_rows {
            Some(f) => {
                let batch = self.row_codec.decode(rows.values().map(|r| &r.row[..]))?;
                (Some(self.times(batch.column(f.time_column))?), None)
            }
            None => {
                let evaluated = self.evaluate(&[partition.into()], |_| true)?;
                (None, evaluated.into_iter().next().map(|(_, v)| v))
            }
        };
        self.table.complete(partition, |rows| {
            for (i, row) in rows.values_mut().enumerate() {
                if let Some(times) = &times {
                    row.time = times[i];
                }
                if let Some(values) = &values {
                    row.emitted = Some(values[i].clone());
                }
            }
        });
        Ok(())
    }

    fn times(&self, column: &ArrayRef) -> Result<Vec<i64>> {
        let micros = eddy_planner::window::to_micros(column)?;
        Ok((0..micros.len())
            .map(|i| {
                if micros.is_valid(i) {
                    micros.value(i)
                } else {
                    i64::MIN
                }
            })
            .collect())
    }

    /// The function values of each partition's rows that `include` admits (in order),
    /// evaluated over those rows alone; encoded, one per admitted row.
    fn evaluate(
        &self,
        partitions: &[Box<[u8]>],
        include: impl Fn(&OverRow) -> bool,
    ) -> Result<Evaluated> {
        let mut rows: Vec<&[u8]> = Vec::new();
        let mut spans = Vec::new();
        for partition in partitions {
            let Some(p) = self.table.group(partition) else {
                continue;
            };
            let start = rows.len();
            rows.extend(p.values().filter(|h| include(h)).map(|h| &h.row[..]));
            spans.push((partition.clone(), start, rows.len() - start));
        }
        if rows.is_empty() {
            return Ok(spans.into_iter().map(|(p, _, _)| (p, Vec::new())).collect());
        }
        let batch = self.row_codec.decode(rows.iter().copied())?;
        let mut columns: Vec<Vec<ArrayRef>> = vec![Vec::new(); self.plan.functions.len()];
        for (_, start, len) in spans.iter().filter(|s| s.2 > 0) {
            let slice = batch.slice(*start, *len);
            for (function, column) in self.plan.functions.iter().zip(&mut columns) {
                column.push(function.evaluate(&slice)?);
            }
        }
        let columns = columns
            .iter()
            .map(|parts| {
                let parts: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
                Ok(concat(&parts)?)
            })
            .collect::<Result<Vec<_>>>()?;
        let encoded = self.values_codec.encode(&columns, batch.num_rows())?;
        Ok(spans
            .into_iter()
            .map(|(partition, start, len)| {
                let values = (start..start + len)
                    .map(|i| Box::from(encoded.row(i).as_ref()))
                    .collect();
                (partition, values)
            })
            .collect())
    }

    /// General form: recomputes `partitions` and returns the changes of their rows' values.
    /// The values are not stored (the rows' emitted flags stay set), so nothing is written.
    fn recompute(&mut self, partitions: &[Box<[u8]>], changes: &mut Vec<Change>) -> Result<()> {
        for (partition, values) in self.evaluate(partitions, |_| true)? {
            self.table.complete(&partition, |rows| {
                for (held, value) in rows.values_mut().zip(values) {
                    if held.emitted.as_deref() == Some(&value[..]) {
                        continue;
                    }
                    if let Some(old) = held.emitted.take() {
                        changes.push((false, held.row.clone(), old));
                    }
                    changes.push((true, held.row.clone(), value.clone()));
                    held.emitted = Some(value);
                }
            });
        }
        Ok(())
    }

    /// Final form: emits the rows of the waiting partitions that are now final, then drops
    /// the rows no later frame reaches back to.
    fn emit_final(&mut self, f: FinalRows, bound: i64, changes: &mut Vec<Change>) -> Result<()> {
        let waiting: Vec<Box<[u8]>> = self.waiting.iter().cloned().collect();
        self.table.begin_chunk();
        self.load(&waiting)?;
        let final_row = |h: &OverRow| h.time < bound;
        let evaluated = self.evaluate(&waiting, final_row)?;
        for (partition, values) in evaluated {
            let Some(rows) = self.table.group(&partition) else {
                self.unwait(&partition);
                continue;
            };
            let ready = values.len().saturating_sub(f.following);
            let emit: Vec<Emission> = rows
                .iter()
                .filter(|(_, h)| final_row(h))
                .take(ready)
                .zip(values)
                .filter(|((_, held), _)| held.emitted.is_none())
                .map(|((row_key, held), value)| (row_key.clone(), held.row.clone(), value))
                .collect();
            let emitted_now = emit.len();
            for (row_key, row, value) in emit {
                changes.push((true, row, value.clone()));
                self.table
                    .modify(&partition, &row_key, |held| held.emitted = Some(value))?;
            }
            let rows = self.table.group(&partition).expect("loaded");
            let pending = rows.values().find(|h| h.emitted.is_none()).map(|h| h.time);
            let mut drop: Vec<Box<[u8]>> = Vec::new();
            if emitted_now > 0 && !f.history.all {
                // Later rows come after every emitted row: the next one's frame reaches back
                // over the last `rows` emitted rows and the rows within `micros` of its time.
                let horizon = pending.unwrap_or(bound).min(bound);
                let emitted: Vec<(&Box<[u8]>, i64)> = rows
                    .iter()
                    .filter(|(_, h)| h.emitted.is_some())
                    .map(|(row_key, h)| (row_key, h.time))
                    .collect();
                let keep_from = emitted.len().saturating_sub(f.history.rows);
                drop = emitted
                    .iter()
                    .enumerate()
                    .filter(|(i, (_, time))| {
                        *i < keep_from
                            && f.history
                                .micros
                                .is_none_or(|m| *time < horizon.saturating_sub(m))
                    })
                    .map(|(_, (row_key, _))| (*row_key).clone())
                    .collect();
            }
            if pending.is_none() {
                self.unwait(&partition);
            }
            for row_key in drop {
                self.table.remove(&partition, &row_key)?;
            }
        }
        Ok(())
    }

    /// The output chunk of `changes`: deletes first (rows are keyed by the input's key, and a
    /// row's old values leave before its new ones arrive).
    fn emit(&self, mut changes: Vec<Change>, out: &mut Vec<Message>) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        changes.sort_by_key(|c| c.0);
        let rows = self.row_codec.decode(changes.iter().map(|c| &c.1[..]))?;
        let values = self.values_codec.decode(changes.iter().map(|c| &c.2[..]))?;
        let visible_len = self.plan.input_schema.fields().len();
        let mut visible: Vec<ArrayRef> = rows.columns()[..visible_len].to_vec();
        for (i, column) in values.columns().iter().enumerate() {
            let wanted = self.schema.field(visible_len + i).data_type();
            visible.push(if column.data_type() == wanted {
                column.clone()
            } else {
                cast(column, wanted)?
            });
        }
        let key = rows.columns()[visible_len..].to_vec();
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

impl Operator for OverWindowOperator {
    fn name(&self) -> &'static str {
        "OverWindow"
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
        let orders = convert_order(&self.order, &order_columns, chunk.len())?;
        let keys = self.key_codec.encode(chunk.key_columns(), chunk.len())?;
        let rows = self.row_codec.encode(chunk.batch.columns(), chunk.len())?;
        let times = match self.plan.final_rows {
            Some(f) => Some(self.times(chunk.batch.column(f.time_column))?),
            None => None,
        };
        let mut touched: Vec<Box<[u8]>> = Vec::new();
        let mut seen: HashSet<&[u8]> = HashSet::new();
        for partition in &partitions {
            if seen.insert(partition) {
                touched.push(partition.clone());
            }
        }
        self.table.begin_chunk();
        self.load(&touched)?;
        let mut changes = Vec::new();
        for (i, partition) in partitions.iter().enumerate() {
            let order = orders.row(i);
            let row_key = [order.as_ref(), keys.row(i).as_ref()].concat();
            let old = if chunk.ops[i].is_insert() {
                let held = OverRow {
                    order_len: order.as_ref().len() as u32,
                    time: times.as_ref().map_or(i64::MIN, |t| t[i]),
                    emitted: None,
                    row: rows.row(i).as_ref().into(),
                };
                self.table.insert(partition, &row_key, held)?
            } else {
                self.table.remove(partition, &row_key)?
            };
            // A row that leaves (or is replaced) takes its emitted values with it.
            if let Some(OverRow {
                row,
                emitted: Some(values),
                ..
            }) = old
            {
                if !values.is_empty() {
                    changes.push((false, row, values));
                }
            }
        }
        if self.plan.final_rows.is_some() {
            for partition in &touched {
                if self.table.group(partition).is_some_and(|r| !r.is_empty()) {
                    self.wait(partition);
                }
            }
        } else {
            self.recompute(&touched, &mut changes)?;
        }
        self.emit(changes, out)
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Vec<Message>) -> Result<()> {
        if let Some(f) = self.plan.final_rows.filter(|f| f.clock == watermark.clock) {
            let bound = watermark.value.saturating_add(f.shift);
            let mut changes = Vec::new();
            self.emit_final(f, bound, &mut changes)?;
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

/// The rows' places in the ORDER BY. Arrow's converter gives no rows for no columns, and an
/// OVER without ORDER BY still needs one (empty) place per row.
fn convert_order(converter: &RowConverter, columns: &[ArrayRef], num_rows: usize) -> Result<Rows> {
    if !columns.is_empty() {
        return Ok(converter.convert_columns(columns)?);
    }
    let mut rows = converter.empty_rows(num_rows, 0);
    let parser = converter.parser();
    for _ in 0..num_rows {
        rows.push(parser.parse(&[]));
    }
    Ok(rows)
}
