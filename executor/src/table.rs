//! A table as a source of changes.
//!
//! DML arrives as Arrow batches; the table decides lateness against its watermark, assigns
//! stream keys (primary key, or a hidden row id), turns upserts into update pairs, keeps its
//! rows, and hands the resulting changelog chunk to the views that read it.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch};
use datafusion::arrow::compute::{concat_batches, filter_record_batch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::physical_expr::PhysicalExpr;
use eddy_planner::window::to_micros;
use eddy_storage::keys::{table_key, LATE_ROWS_TABLE};
use eddy_storage::{EpochBatch, RowCodec, Store, TableId};
use serde::{Deserialize, Serialize};

use crate::late_rows::rows_as_json;
pub use refusals::RefusedRow;

#[path = "table_refusals.rs"]
mod refusals;
pub use crate::late_rows::{LateRow, LATE_ROWS_RETENTION};
use crate::watermark::{LateArrival, WatermarkTracker};
use crate::{ExecError, Op, Result, StreamChunk, Watermark};

/// How a table's rows are keyed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableKey {
    /// Upsert by these columns: a later row with the same key replaces the earlier one.
    PrimaryKey(Vec<usize>),
    /// A hidden, increasing row id (append-only tables and tables with no primary key).
    RowId,
}

/// A table's definition, as planned from its `CREATE TABLE`.
#[derive(Debug, Clone)]
pub struct TableDef {
    pub name: String,
    pub schema: SchemaRef,
    pub key: TableKey,
    pub append_only: bool,
    /// The watermark column and its delay in microseconds.
    pub watermark: Option<(usize, i64)>,
    /// Whether rows are kept (tables) or only streamed on (a view's reader of a source).
    pub stored: bool,
    /// Columns the engine fills with the wall clock as rows arrive (`AS PROCTIME()`).
    pub processing_time: Vec<usize>,
}

impl TableDef {
    /// The fields of the stream key the table's chunks carry after the visible columns.
    pub fn key_fields(&self) -> Vec<Field> {
        match &self.key {
            TableKey::PrimaryKey(columns) => columns
                .iter()
                .map(|&i| self.schema.field(i).clone().with_nullable(true))
                .collect(),
            TableKey::RowId => vec![Field::new("_row_id", DataType::Int64, true)],
        }
    }
}

/// What survives a restart besides the rows (written in every epoch that changed it).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct TableProgress {
    watermark: WatermarkTracker,
    next_row_id: i64,
    rows_in: u64,
    rows_late: u64,
}

pub struct TableRuntime {
    pub id: TableId,
    pub def: TableDef,
    /// The name late rows are reported under (the table, or the view reading a source).
    pub object_name: String,
    key_codec: RowCodec,
    value_codec: RowCodec,
    progress: TableProgress,
    progress_dirty: bool,
    /// Whether the last watermark passed on said the source is idle.
    reported_idle: bool,
    /// Row writes since the last commit: key → row (None: deleted).
    pending: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    late: Vec<LateRow>,
    /// A source's rows its key refused, until the engine takes them as dead letters.
    refused: Vec<RefusedRow>,
}

fn progress_key(id: TableId) -> String {
    format!("table_progress/{id}")
}

impl TableRuntime {
    pub fn open(id: TableId, def: TableDef, store: &dyn Store) -> Result<Self> {
        let key_codec = RowCodec::new(Arc::new(Schema::new(def.key_fields())))?;
        let value_codec = RowCodec::new(def.schema.clone())?;
        let progress = match store.get(&eddy_storage::keys::meta_key(&progress_key(id)))? {
            Some(bytes) => {
                serde_json::from_slice(&bytes).map_err(eddy_storage::StorageError::from)?
            }
            None => TableProgress::default(),
        };
        Ok(Self {
            id,
            object_name: def.name.clone(),
            def,
            key_codec,
            value_codec,
            progress,
            progress_dirty: false,
            reported_idle: false,
            pending: BTreeMap::new(),
            late: Vec::new(),
            refused: Vec::new(),
        })
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The table's watermark: its clock 0 (on the column it is declared on).
    /// Whether the table's rows carry a watermark (a WATERMARK clause).
    pub fn has_watermark(&self) -> bool {
        self.def.watermark.is_some()
    }

    pub fn watermark(&self) -> Option<Watermark> {
        self.def.watermark?;
        self.progress
            .watermark
            .current()
            .map(|value| Watermark::at(0, value))
    }

    pub fn rows_in(&self) -> u64 {
        self.progress.rows_in
    }

    pub fn rows_late(&self) -> u64 {
        self.progress.rows_late
    }

    /// Applies a source's upserts and, where `deletes[i]`, deletions by key (`FORMAT UPSERT`).
    /// Rows the key refuses are set aside ([`Self::take_refused`]).
    pub fn apply(
        &mut self,
        batch: RecordBatch,
        deletes: Option<Vec<bool>>,
        split: &str,
        store: &dyn Store,
    ) -> Result<(Option<StreamChunk>, Option<Watermark>)> {
        let (batch, deletes) = self.refuse_null_keys(batch, deletes)?;
        self.progress.rows_in += batch.num_rows() as u64;
        let (batch, watermark, kept) = self.drop_late_rows(batch, split)?;
        // Keep the deletion flags aligned with the rows that stay.
        let deletes = match (deletes, kept) {
            (Some(deletes), Some(kept)) => Some(
                deletes
                    .into_iter()
                    .zip(kept)
                    .filter(|(_, k)| *k)
                    .map(|(d, _)| d)
                    .collect(),
            ),
            (deletes, _) => deletes,
        };
        self.progress_dirty = true;
        if batch.num_rows() == 0 {
            return Ok((None, watermark));
        }
        Ok((self.upsert(batch, deletes, store, true)?, watermark))
    }

    /// Writes rows that passed the lateness check: keys, upserts, deletions by key. A key an
    /// append-only table already holds fails the statement, or, for a source (`refuse`), sets
    /// its row aside.
    fn upsert(
        &mut self,
        batch: RecordBatch,
        deletes: Option<Vec<bool>>,
        store: &dyn Store,
        refuse: bool,
    ) -> Result<Option<StreamChunk>> {
        let chunk = match &self.def.key {
            TableKey::RowId => {
                let start = self.progress.next_row_id;
                let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(
                    start..start + batch.num_rows() as i64,
                ));
                self.progress.next_row_id += batch.num_rows() as i64;
                if self.def.stored {
                    let keys = self
                        .key_codec
                        .encode(std::slice::from_ref(&ids), batch.num_rows())?;
                    let values = self.value_codec.encode(batch.columns(), batch.num_rows())?;
                    for (key, value) in keys.iter().zip(values.iter()) {
                        self.pending
                            .insert(key.as_ref().to_vec(), Some(value.as_ref().to_vec()));
                    }
                }
                StreamChunk::new(
                    vec![Op::Insert; batch.num_rows()],
                    &self.def.schema,
                    batch.columns().to_vec(),
                    vec![ids],
                )?
            }
            TableKey::PrimaryKey(columns) => {
                let key_columns: Vec<ArrayRef> =
                    columns.iter().map(|&i| batch.column(i).clone()).collect();
                let keys = self.key_codec.encode(&key_columns, batch.num_rows())?;
                let values = self.value_codec.encode(batch.columns(), batch.num_rows())?;
                // Upsert: each row replaces what its key held before (possibly a row of this
                // same statement), so lookups go row by row through the pending writes.
                let mut ops = Vec::with_capacity(batch.num_rows());
                let mut out_keys: Vec<Vec<u8>> = Vec::with_capacity(batch.num_rows());
                let mut out_values: Vec<Vec<u8>> = Vec::with_capacity(batch.num_rows());
                for (i, (key, value)) in keys.iter().zip(values.iter()).enumerate() {
                    let key = key.as_ref().to_vec();
                    let value = value.as_ref().to_vec();
                    if deletes.as_ref().is_some_and(|d| d[i]) {
                        if let Some(old) = self.lookup(&key, store)? {
                            ops.push(Op::Delete);
                            out_keys.push(key.clone());
                            out_values.push(old);
                            self.pending.insert(key, None);
                        }
                        continue;
                    }
                    match self.lookup(&key, store)? {
                        Some(_) if self.def.append_only => {
                            let error = format!(
                                "duplicate key value violates primary key of append-only table \"{}\"",
                                self.def.name
                            );
                            if !refuse {
                                return Err(ExecError::Constraint(error));
                            }
                            self.refuse_row(&batch, i, error)?;
                            continue;
                        }
                        Some(old) => {
                            ops.push(Op::UpdateDelete);
                            out_keys.push(key.clone());
                            out_values.push(old);
                            ops.push(Op::UpdateInsert);
                        }
                        None => ops.push(Op::Insert),
                    }
                    out_keys.push(key.clone());
                    out_values.push(value.clone());
                    self.pending.insert(key, Some(value));
                }
                if ops.is_empty() {
                    return Ok(None);
                }
                let visible = self
                    .value_codec
                    .decode(out_values.iter().map(|v| v.as_slice()))?;
                let key = self
                    .key_codec
                    .decode(out_keys.iter().map(|k| k.as_slice()))?;
                StreamChunk::new(
                    ops,
                    &self.def.schema,
                    visible.columns().to_vec(),
                    key.columns().to_vec(),
                )?
            }
        };
        Ok(Some(chunk))
    }

    fn check_not_null_key(&self, batch: &RecordBatch) -> Result<()> {
        if let TableKey::PrimaryKey(columns) = &self.def.key {
            for &i in columns {
                if batch.column(i).null_count() > 0 {
                    return Err(ExecError::Constraint(format!(
                        "null value in column \"{}\" of table \"{}\" violates not-null constraint",
                        self.def.schema.field(i).name(),
                        self.def.name
                    )));
                }
            }
        }
        Ok(())
    }

    /// Splits off rows below the watermark (judged row by row, in arrival order, per split).
    fn drop_late_rows(
        &mut self,
        batch: RecordBatch,
        split: &str,
    ) -> Result<(RecordBatch, Option<Watermark>, Option<Vec<bool>>)> {
        let Some((column, delay)) = self.def.watermark else {
            return Ok((batch, None, None));
        };
        let times = to_micros(batch.column(column))?;
        let before = self.progress.watermark.current();
        let late_rows = self.progress.watermark.observe(split, &times, delay);
        let after = self.progress.watermark.current();
        // A source that was idle and delivers again is waited for again.
        let resumed = std::mem::take(&mut self.reported_idle);
        let advanced = (after != before || resumed)
            .then_some(after)
            .flatten()
            .map(|value| Watermark::at(0, value));
        let (kept, keep) = self.set_aside(batch, late_rows)?;
        Ok((kept, advanced, keep))
    }

    /// Applies one INSERT statement's rows. They are judged against the watermark as it stood
    /// when the statement began, so that the order DataFusion delivers a statement's batches
    /// in (which varies from run to run) cannot change which rows are late; the watermark then
    /// advances to the statement's largest event time. Returns the chunks (one per batch) and
    /// the watermark reached, to be delivered after them.
    pub fn insert_statement(
        &mut self,
        batches: Vec<RecordBatch>,
        split: &str,
        store: &dyn Store,
    ) -> Result<(Vec<StreamChunk>, Option<Watermark>)> {
        let Some((column, delay)) = self.def.watermark else {
            let mut chunks = Vec::new();
            for batch in batches {
                chunks.extend(self.apply(batch, None, split, store)?.0);
            }
            return Ok((chunks, None));
        };
        let started = self.progress.watermark.current();
        let mut latest: Option<i64> = None;
        let mut chunks = Vec::new();
        for batch in batches {
            self.check_not_null_key(&batch)?;
            self.progress.rows_in += batch.num_rows() as u64;
            let times = to_micros(batch.column(column))?;
            let mut late = Vec::new();
            for (row, time) in times.iter().enumerate() {
                let Some(time) = time else { continue };
                match started {
                    Some(watermark) if time < watermark => late.push(LateArrival {
                        row,
                        event_time: time,
                        watermark,
                    }),
                    _ => latest = Some(latest.map_or(time, |l| l.max(time))),
                }
            }
            let (kept, _) = self.set_aside(batch, late)?;
            self.progress_dirty = true;
            if kept.num_rows() > 0 {
                chunks.extend(self.upsert(kept, None, store, false)?);
            }
        }
        let Some(latest) = latest else {
            return Ok((chunks, None));
        };
        // The statement's largest event time, as if it had arrived last: never late, so this
        // only moves the watermark.
        self.progress.watermark.observe(
            split,
            &datafusion::arrow::array::Int64Array::from(vec![latest]),
            delay,
        );
        let after = self.progress.watermark.current();
        let watermark = (after != started)
            .then_some(after)
            .flatten()
            .map(|value| Watermark::at(0, value));
        Ok((chunks, watermark))
    }

    /// Records `late` rows of `batch` for `eddy_catalog.late_rows` and returns the others, with
    /// which rows were kept (`None`: all of them).
    fn set_aside(
        &mut self,
        batch: RecordBatch,
        late_rows: Vec<LateArrival>,
    ) -> Result<(RecordBatch, Option<Vec<bool>>)> {
        if late_rows.is_empty() {
            return Ok((batch, None));
        }
        self.progress.rows_late += late_rows.len() as u64;
        let mut keep = vec![true; batch.num_rows()];
        for late in &late_rows {
            keep[late.row] = false;
        }
        let late_mask = BooleanArray::from(keep.iter().map(|k| !k).collect::<Vec<_>>());
        let late_batch = filter_record_batch(&batch, &late_mask)?;
        let json = rows_as_json(&late_batch)?;
        for (late, row) in late_rows.into_iter().zip(json) {
            self.late.push(LateRow {
                object: self.object_name.clone(),
                source: self.def.name.clone(),
                event_time: late.event_time,
                watermark: late.watermark,
                row,
            });
        }
        let kept = filter_record_batch(&batch, &BooleanArray::from(keep.clone()))?;
        Ok((kept, Some(keep)))
    }

    /// The row a key holds now, including uncommitted writes.
    fn lookup(&self, key: &[u8], store: &dyn Store) -> Result<Option<Vec<u8>>> {
        if let Some(pending) = self.pending.get(key) {
            return Ok(pending.clone());
        }
        Ok(store.get(&table_key(self.id, key))?)
    }

    /// Every row the table holds now (visible columns then key columns), with the keys.
    fn scan(&self, store: &dyn Store) -> Result<(RecordBatch, RecordBatch)> {
        let mut rows: BTreeMap<Vec<u8>, Vec<u8>> = store.scan_table(self.id)?.into_iter().collect();
        for (key, value) in &self.pending {
            match value {
                Some(value) => rows.insert(key.clone(), value.clone()),
                None => rows.remove(key),
            };
        }
        let keys = self.key_codec.decode(rows.keys().map(|k| k.as_slice()))?;
        let values = self
            .value_codec
            .decode(rows.values().map(|v| v.as_slice()))?;
        Ok((values, keys))
    }

    /// Declares a split (a partition) that holds the watermark back until it delivers or idles.
    pub fn register_split(&mut self, split: &str) {
        if self.def.watermark.is_some() {
            self.progress.watermark.register_split(split);
        }
    }

    /// Marks a split idle or active; returns the watermark to pass on when that advanced it,
    /// or when the source as a whole went idle or active again (a join stops or starts
    /// waiting for it).
    pub fn set_split_idle(&mut self, split: &str, idle: bool) -> Option<Watermark> {
        let (_, delay) = self.def.watermark?;
        let advanced = self.progress.watermark.set_idle(split, idle, delay);
        if advanced.is_some() {
            self.progress_dirty = true;
        }
        let all_idle = self.progress.watermark.all_idle();
        if advanced.is_none() && all_idle == self.reported_idle {
            return None;
        }
        self.reported_idle = all_idle;
        let value = self.progress.watermark.current().unwrap_or(i64::MIN);
        Some(Watermark {
            clock: 0,
            value,
            idle: all_idle,
        })
    }

    /// Every row as a changelog of inserts, for backfilling a new view.
    pub fn snapshot(&self, store: &dyn Store) -> Result<Option<StreamChunk>> {
        let (values, keys) = self.scan(store)?;
        if values.num_rows() == 0 {
            return Ok(None);
        }
        Ok(Some(StreamChunk::new(
            vec![Op::Insert; values.num_rows()],
            &self.def.schema,
            values.columns().to_vec(),
            keys.columns().to_vec(),
        )?))
    }

    /// Applies `DELETE ... WHERE predicate` (no predicate: every row).
    pub fn delete_where(
        &mut self,
        predicate: Option<&Arc<dyn PhysicalExpr>>,
        store: &dyn Store,
    ) -> Result<Option<StreamChunk>> {
        self.refuse_changes_if_append_only("DELETE")?;
        let (values, keys) = self.select(predicate, store)?;
        if values.num_rows() == 0 {
            return Ok(None);
        }
        let encoded = self.key_codec.encode(keys.columns(), keys.num_rows())?;
        for key in encoded.iter() {
            self.pending.insert(key.as_ref().to_vec(), None);
        }
        Ok(Some(StreamChunk::new(
            vec![Op::Delete; values.num_rows()],
            &self.def.schema,
            values.columns().to_vec(),
            keys.columns().to_vec(),
        )?))
    }

    /// Applies `UPDATE ... SET ... WHERE predicate`; `assignments` give every visible column's
    /// new value (the unchanged ones as plain column references).
    pub fn update_where(
        &mut self,
        predicate: Option<&Arc<dyn PhysicalExpr>>,
        assignments: &[Arc<dyn PhysicalExpr>],
        store: &dyn Store,
    ) -> Result<Option<StreamChunk>> {
        self.refuse_changes_if_append_only("UPDATE")?;
        let (old_values, old_keys) = self.select(predicate, store)?;
        let rows = old_values.num_rows();
        if rows == 0 {
            return Ok(None);
        }
        let new_columns = assignments
            .iter()
            .zip(self.def.schema.fields())
            .map(|(e, field)| {
                let array = e.evaluate(&old_values)?.into_array(rows)?;
                Ok(if array.data_type() == field.data_type() {
                    array
                } else {
                    datafusion::arrow::compute::cast(&array, field.data_type())?
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let new_values = RecordBatch::try_new(self.def.schema.clone(), new_columns)?;
        self.check_not_null_key(&new_values)?;
        let new_keys = match &self.def.key {
            TableKey::RowId => old_keys.clone(),
            TableKey::PrimaryKey(columns) => {
                let key_columns: Vec<ArrayRef> = columns
                    .iter()
                    .map(|&i| new_values.column(i).clone())
                    .collect();
                RecordBatch::try_new(self.key_codec.schema().clone(), key_columns)?
            }
        };
        let old_encoded = self
            .key_codec
            .encode(old_keys.columns(), old_keys.num_rows())?;
        let new_encoded = self
            .key_codec
            .encode(new_keys.columns(), new_keys.num_rows())?;
        let new_rows = self
            .value_codec
            .encode(new_values.columns(), new_values.num_rows())?;
        let old_set: std::collections::HashSet<&[u8]> =
            old_encoded.iter().map(|k| k.data()).collect();
        for key in new_encoded.iter() {
            if !old_set.contains(key.data()) && self.lookup(key.data(), store)?.is_some() {
                return Err(ExecError::Constraint(format!(
                    "duplicate key value violates primary key of table \"{}\"",
                    self.def.name
                )));
            }
        }
        for key in old_encoded.iter() {
            self.pending.insert(key.as_ref().to_vec(), None);
        }
        for (key, value) in new_encoded.iter().zip(new_rows.iter()) {
            self.pending
                .insert(key.as_ref().to_vec(), Some(value.as_ref().to_vec()));
        }
        // Interleave old and new rows: each UpdateDelete directly followed by its UpdateInsert.
        let both_values = concat_batches(&self.def.schema, [&old_values, &new_values])?;
        let both_keys = concat_batches(self.key_codec.schema(), [&old_keys, &new_keys])?;
        let order: Vec<u32> = (0..rows as u32)
            .flat_map(|i| [i, i + rows as u32])
            .collect();
        let order = datafusion::arrow::array::UInt32Array::from(order);
        let values = datafusion::arrow::compute::take_record_batch(&both_values, &order)?;
        let keys = datafusion::arrow::compute::take_record_batch(&both_keys, &order)?;
        let ops = (0..rows)
            .flat_map(|_| [Op::UpdateDelete, Op::UpdateInsert])
            .collect();
        Ok(Some(StreamChunk::new(
            ops,
            &self.def.schema,
            values.columns().to_vec(),
            keys.columns().to_vec(),
        )?))
    }

    fn refuse_changes_if_append_only(&self, what: &str) -> Result<()> {
        if self.def.append_only {
            return Err(ExecError::NotSupported(format!(
                "{what} is not allowed on append-only table \"{}\"",
                self.def.name
            )));
        }
        Ok(())
    }

    fn select(
        &self,
        predicate: Option<&Arc<dyn PhysicalExpr>>,
        store: &dyn Store,
    ) -> Result<(RecordBatch, RecordBatch)> {
        let (values, keys) = self.scan(store)?;
        let Some(predicate) = predicate else {
            return Ok((values, keys));
        };
        let mask = predicate.evaluate(&values)?.into_array(values.num_rows())?;
        let mask = mask.as_boolean();
        Ok((
            filter_record_batch(&values, mask)?,
            filter_record_batch(&keys, mask)?,
        ))
    }

    /// Writes the epoch's row changes, late rows and progress into `epoch`.
    pub fn commit(&mut self, epoch: &mut EpochBatch, late_seq: &mut u64) -> Result<()> {
        for (key, value) in std::mem::take(&mut self.pending) {
            match value {
                Some(value) => epoch.put(self.id, &key, value),
                None => epoch.delete(self.id, &key),
            }
        }
        for late in std::mem::take(&mut self.late) {
            epoch.put(
                LATE_ROWS_TABLE,
                &late_seq.to_be_bytes(),
                serde_json::to_vec(&late).map_err(eddy_storage::StorageError::from)?,
            );
            if *late_seq >= LATE_ROWS_RETENTION {
                epoch.delete(
                    LATE_ROWS_TABLE,
                    &(*late_seq - LATE_ROWS_RETENTION).to_be_bytes(),
                );
            }
            *late_seq += 1;
        }
        if std::mem::take(&mut self.progress_dirty) {
            epoch.put_meta(
                &progress_key(self.id),
                serde_json::to_vec(&self.progress).map_err(eddy_storage::StorageError::from)?,
            );
        }
        Ok(())
    }

    /// Forgets this table's progress record (on DROP).
    pub fn drop_progress(&self, epoch: &mut EpochBatch) {
        epoch.delete_meta(&progress_key(self.id));
    }
}
