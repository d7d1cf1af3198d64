//! The OVER window operator (see `eddy_planner::OverWindowPlan`): each partition's rows in
//! order by the memcomparable encoding of their ORDER BY values (ties by the row's key), in
//! memory and in the store, with DataFusion's window functions evaluated over a partition's
//! rows in that order.
//!
//! In the final form a row is emitted once, when the watermark passes its time (and, for
//! `LEAD`, once the rows it looks ahead to are final too); emitted rows are then dropped as
//! soon as no later row's frame reaches back to them. In the general form every row stays, and
//! a change recomputes its partition: rows whose values changed are retracted and emitted again.
//!
//! In the store a row's key is `partition hash (u16) ++ partition ++ order ++ row key`; its
//! value is the partition's and the order's lengths, an emitted flag, then the row.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::compute::{cast, concat};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::arrow::row::{RowConverter, Rows, SortField};
use eddy_planner::{FinalRows, OverWindowPlan};
use eddy_storage::{EpochBatch, RowCodec, StorageError, Store, TableId};
use hashbrown::{HashMap, HashSet};

use crate::{Barrier, Message, Op, Operator, Result, StreamChunk, Watermark};

/// A row's place in its partition: (order, row key).
type Place = (Box<[u8]>, Box<[u8]>);

struct Held {
    /// The input row: visible columns, then stream key.
    row: Box<[u8]>,
    /// Its time in micros (the final form; `i64::MIN` for NULL, which is final at once).
    time: i64,
    /// The function values last emitted for the row, encoded; None while not emitted. After
    /// a restart the final form knows only that a row was emitted (an empty value).
    emitted: Option<Box<[u8]>>,
}

#[derive(Default)]
struct Partition {
    rows: BTreeMap<Place, Held>,
}

/// One output row change: (insert, row, function values).
type Change = (bool, Box<[u8]>, Box<[u8]>);

/// Per partition, the encoded function values of its evaluated rows, in order.
type Evaluated = Vec<(Box<[u8]>, Vec<Box<[u8]>>)>;

pub struct OverWindowOperator {
    plan: OverWindowPlan,
    table: TableId,
    /// The output's visible columns: the input's, then one per function.
    schema: SchemaRef,
    row_codec: RowCodec,
    values_codec: RowCodec,
    partition_codec: Option<RowCodec>,
    order: RowConverter,
    key_codec: RowCodec,
    partitions: HashMap<Box<[u8]>, Partition>,
    /// Final form: the partitions holding rows not emitted yet.
    waiting: HashSet<Box<[u8]>>,
    /// Rows changed since the last barrier: (partition, place).
    dirty: HashSet<(Box<[u8]>, Place)>,
    rows: usize,
    row_size: crate::state_size::SizeEstimate,
}

fn nullable(fields: impl IntoIterator<Item = Field>) -> SchemaRef {
    Arc::new(Schema::new(
        fields
            .into_iter()
            .map(|f| f.with_nullable(true))
            .collect::<Vec<_>>(),
    ))
}

impl OverWindowOperator {
    pub fn new(
        plan: OverWindowPlan,
        table: TableId,
        schema: SchemaRef,
        store: &dyn Store,
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
            table,
            schema,
            row_codec: RowCodec::new(nullable(row_fields))?,
            values_codec: RowCodec::new(nullable(value_fields))?,
            partition_codec,
            order: RowConverter::new(order_fields)?,
            key_codec: RowCodec::new(nullable(plan.input_key_fields.iter().cloned()))?,
            partitions: HashMap::new(),
            waiting: HashSet::new(),
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
        let corrupt = || StorageError::Corrupt(format!("OVER window state row in table {table}"));
        let mut loaded = Vec::new();
        for (key, value) in store.scan_table(table)? {
            let row = crate::partition::split_ordered(&key, &value).ok_or_else(corrupt)?;
            let Some((&emitted, row_bytes)) = row.rest.split_first() else {
                return Err(corrupt().into());
            };
            self.row_size.observe(
                key.len() + value.len() + crate::state_size::ENTRY_OVERHEAD,
                1,
            );
            loaded.push((
                Box::<[u8]>::from(row.partition),
                (Box::<[u8]>::from(row.order), Box::<[u8]>::from(row.row_key)),
                emitted != 0,
                Box::<[u8]>::from(row_bytes),
            ));
        }
        for rows in loaded.chunks(4096) {
            let times = match self.plan.final_rows {
                Some(f) => {
                    let batch = self.row_codec.decode(rows.iter().map(|r| &r.3[..]))?;
                    Some(self.times(batch.column(f.time_column))?)
                }
                None => None,
            };
            for (i, (partition, place, emitted, row)) in rows.iter().enumerate() {
                let held = Held {
                    row: row.clone(),
                    time: times.as_ref().map_or(i64::MIN, |t| t[i]),
                    emitted: emitted.then(|| Box::from(&[][..])),
                };
                if held.emitted.is_none() {
                    self.waiting.insert(partition.clone());
                }
                let entry = self.partitions.entry(partition.clone()).or_default();
                entry.rows.insert(place.clone(), held);
                self.rows += 1;
            }
        }
        if self.plan.final_rows.is_none() {
            // The general form compares new values with the emitted ones: recompute those.
            let all: Vec<Box<[u8]>> = self.partitions.keys().cloned().collect();
            for (partition, values) in self.evaluate(&all, |_| true)? {
                let rows = &mut self.partitions.get_mut(&partition).expect("evaluated").rows;
                for (held, value) in rows.values_mut().zip(values) {
                    held.emitted = Some(value);
                }
            }
        }
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
        include: impl Fn(&Held) -> bool,
    ) -> Result<Evaluated> {
        let mut rows: Vec<&[u8]> = Vec::new();
        let mut spans = Vec::new();
        for partition in partitions {
            let Some(p) = self.partitions.get(partition) else {
                continue;
            };
            let start = rows.len();
            rows.extend(p.rows.values().filter(|h| include(h)).map(|h| &h.row[..]));
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
    fn recompute(&mut self, partitions: &[Box<[u8]>], changes: &mut Vec<Change>) -> Result<()> {
        for (partition, values) in self.evaluate(partitions, |_| true)? {
            let Some(p) = self.partitions.get_mut(&partition) else {
                continue;
            };
            for (held, value) in p.rows.values_mut().zip(values) {
                if held.emitted.as_deref() == Some(&value[..]) {
                    continue;
                }
                if let Some(old) = held.emitted.take() {
                    changes.push((false, held.row.clone(), old));
                }
                changes.push((true, held.row.clone(), value.clone()));
                held.emitted = Some(value);
            }
        }
        Ok(())
    }

    /// Final form: emits the rows of the waiting partitions that are now final, then drops
    /// the rows no later frame reaches back to.
    fn emit_final(&mut self, f: FinalRows, bound: i64, changes: &mut Vec<Change>) -> Result<()> {
        let waiting: Vec<Box<[u8]>> = self.waiting.iter().cloned().collect();
        let final_row = |h: &Held| h.time < bound;
        let evaluated = self.evaluate(&waiting, final_row)?;
        for (partition, values) in evaluated {
            let Some(p) = self.partitions.get_mut(&partition) else {
                continue;
            };
            let ready = values.len().saturating_sub(f.following);
            let mut emitted_now = 0;
            for (i, (place, held)) in p.rows.iter_mut().filter(|(_, h)| final_row(h)).enumerate() {
                if i >= ready {
                    break;
                }
                if held.emitted.is_none() {
                    changes.push((true, held.row.clone(), values[i].clone()));
                    held.emitted = Some(values[i].clone());
                    self.dirty.insert((partition.clone(), place.clone()));
                    emitted_now += 1;
                }
            }
            let pending = p
                .rows
                .values()
                .find(|h| h.emitted.is_none())
                .map(|h| h.time);
            if pending.is_none() {
                self.waiting.remove(&partition);
            }
            if emitted_now > 0 && !f.history.all {
                // Later rows come after every emitted row: the next one's frame reaches back
                // over the last `rows` emitted rows and the rows within `micros` of its time.
                let horizon = pending.unwrap_or(bound).min(bound);
                let emitted: Vec<(&Place, i64)> = p
                    .rows
                    .iter()
                    .filter(|(_, h)| h.emitted.is_some())
                    .map(|(place, h)| (place, h.time))
                    .collect();
                let keep_from = emitted.len().saturating_sub(f.history.rows);
                let drop: Vec<Place> = emitted
                    .iter()
                    .enumerate()
                    .filter(|(i, (_, time))| {
                        *i < keep_from
                            && f.history
                                .micros
                                .is_none_or(|m| *time < horizon.saturating_sub(m))
                    })
                    .map(|(_, (place, _))| (*place).clone())
                    .collect();
                for place in drop {
                    p.rows.remove(&place);
                    self.rows -= 1;
                    self.dirty.insert((partition.clone(), place));
                }
                if p.rows.is_empty() {
                    self.partitions.remove(&partition);
                }
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
        let mut changes = Vec::new();
        let mut touched: Vec<Box<[u8]>> = Vec::new();
        let mut seen: HashSet<Box<[u8]>> = HashSet::new();
        for (i, partition) in partitions.into_iter().enumerate() {
            let place: Place = (orders.row(i).as_ref().into(), keys.row(i).as_ref().into());
            let entry = self.partitions.entry(partition.clone()).or_default();
            let old = if chunk.ops[i].is_insert() {
                let held = Held {
                    row: rows.row(i).as_ref().into(),
                    time: times.as_ref().map_or(i64::MIN, |t| t[i]),
                    emitted: None,
                };
                let old = entry.rows.insert(place.clone(), held);
                if old.is_none() {
                    self.rows += 1;
                }
                old
            } else {
                let old = entry.rows.remove(&place);
                if old.is_some() {
                    self.rows -= 1;
                }
                old
            };
            // A row that leaves (or is replaced) takes its emitted values with it.
            if let Some(Held {
                row,
                emitted: Some(values),
                ..
            }) = old
            {
                if !values.is_empty() {
                    changes.push((false, row, values));
                }
            }
            if entry.rows.is_empty() {
                self.partitions.remove(&partition);
            }
            self.dirty.insert((partition.clone(), place));
            if seen.insert(partition.clone()) {
                touched.push(partition);
            }
        }
        if self.plan.final_rows.is_some() {
            self.waiting.extend(
                touched
                    .into_iter()
                    .filter(|p| self.partitions.contains_key(p)),
            );
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
        let (mut measured, mut kept) = (0, 0);
        let general = self.plan.final_rows.is_none();
        for (partition, place) in self.dirty.drain() {
            let key = crate::partition::ordered_key(&partition, &place.0, &place.1);
            match self
                .partitions
                .get(&partition)
                .and_then(|p| p.rows.get(&place))
            {
                Some(held) => {
                    measured += key.len() + held.row.len() + crate::state_size::ENTRY_OVERHEAD;
                    kept += 1;
                    let mut value =
                        crate::partition::ordered_value(&partition, &place.0, 1 + held.row.len());
                    // The general form emits every row it holds at once.
                    value.push(u8::from(general || held.emitted.is_some()));
                    value.extend_from_slice(&held.row);
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
