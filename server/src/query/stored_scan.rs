//! Reading a stored table or view: rows in key order, a chunk at a time, from one snapshot.
//!
//! The scan holds at most one chunk of rows (and what its consumer keeps), whatever the size
//! of the table. It reads only its key ranges (see `key_ranges`), stops at its LIMIT, and
//! decodes as little as the query needs: nothing for `count(*)`, the keys alone when every
//! column it reads is a key column, the whole row otherwise. Through an index it reads ranges
//! of the index's entries, then the rows they point to (or only the columns the index
//! includes, when those are all it reads).

use std::ops::Bound;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::Result;
use datafusion::error::DataFusionError;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    ReplaceChildrenOptions,
};
use eddy_storage::{IndexDef, KeyRange, RowCodec, Snapshot, Store, TableId};

use crate::query::scan_admission::ScanAdmission;

/// Rows read from the store per chunk.
pub const SCAN_CHUNK_ROWS: usize = 8192;

/// How the scan turns stored rows into its columns.
#[derive(Debug, Clone)]
pub enum Decode {
    /// No column is read (`count(*)`): only the number of rows.
    Nothing,
    /// Every column read is a key column: these key fields, in output order.
    Keys(Vec<usize>),
    /// The whole row, then these columns of it (all of them when `None`).
    Rows(Option<Vec<usize>>),
    /// Read through an index and every column read is in its entries: these columns, in
    /// output order.
    Included(Vec<EntryColumn>),
}

/// Where an index entry holds a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryColumn {
    /// Among the indexed and included columns (see `IndexDef::stored_columns`), at this place.
    Stored(usize),
    /// In the base row's key, at this field.
    BaseKey(usize),
}

pub struct StoredScanExec {
    store: Arc<dyn Store>,
    snapshot: Arc<Snapshot>,
    table: TableId,
    row_codec: Arc<RowCodec>,
    key_codec: Option<Arc<RowCodec>>,
    ranges: Vec<KeyRange>,
    /// Reads the ranges of this index's entries, then the rows they point to.
    index: Option<Arc<IndexDef>>,
    decode: Decode,
    limit: Option<usize>,
    admission: Option<Arc<ScanAdmission>>,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

pub struct ScanSpec {
    pub store: Arc<dyn Store>,
    pub snapshot: Arc<Snapshot>,
    pub table: TableId,
    pub row_codec: Arc<RowCodec>,
    pub key_codec: Option<Arc<RowCodec>>,
    /// `None`: the whole table.
    pub ranges: Option<Vec<KeyRange>>,
    /// Ranges of this index's entries instead of the table's rows.
    pub index: Option<Arc<IndexDef>>,
    pub decode: Decode,
    pub limit: Option<usize>,
    /// For a full scan: where it waits for its turn before reading.
    pub admission: Option<Arc<ScanAdmission>>,
    /// The scan's output columns.
    pub schema: SchemaRef,
}

impl StoredScanExec {
    pub fn new(spec: ScanSpec) -> Self {
        let properties = PlanProperties::new(
            EquivalenceProperties::new(spec.schema.clone()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Self {
            store: spec.store,
            snapshot: spec.snapshot,
            table: spec.table,
            row_codec: spec.row_codec,
            key_codec: spec.key_codec,
            ranges: spec.ranges.unwrap_or_else(|| vec![KeyRange::all()]),
            index: spec.index,
            decode: spec.decode,
            limit: spec.limit,
            admission: spec.admission,
            schema: spec.schema,
            properties: Arc::new(properties),
        }
    }
}

impl std::fmt::Debug for StoredScanExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoredScanExec({})", self.table)
    }
}

impl DisplayAs for StoredScanExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let full = self.ranges == [KeyRange::all()];
        write!(f, "StoredScan: table={}", self.table)?;
        if let Some(index) = &self.index {
            write!(f, ", index={}", index.index)?;
        }
        if full {
            write!(f, ", ranges=all")?;
        } else {
            write!(f, ", ranges={}", self.ranges.len())?;
        }
        let decode = match &self.decode {
            Decode::Nothing => "none",
            Decode::Keys(_) => "keys",
            Decode::Rows(_) => "rows",
            Decode::Included(_) => "included",
        };
        write!(f, ", decode={decode}")?;
        if let Some(limit) = self.limit {
            write!(f, ", limit={limit}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for StoredScanExec {
    fn name(&self) -> &str {
        "StoredScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        _partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let mut ranges = self.ranges.clone();
        ranges.reverse();
        let scan = ScanStream {
            store: self.store.clone(),
            snapshot: self.snapshot.clone(),
            table: self.table,
            row_codec: self.row_codec.clone(),
            key_codec: self.key_codec.clone(),
            pending: ranges,
            index: self.index.clone(),
            decode: self.decode.clone(),
            remaining: self.limit.unwrap_or(usize::MAX),
            schema: self.schema.clone(),
        };
        // A chunk is a blocking read of the store (it waits for a commit in progress) and its
        // decode: both run on the blocking pool, so that a long scan never holds a runtime
        // worker, and the other connections (lookups, the writer's INSERTs) go on meanwhile.
        // A full scan waits for its turn before each chunk (see `scan_admission`) and gives
        // it back after: full scans take turns chunk by chunk, and one whose client is slow
        // to read (a cursor) holds no turn meanwhile.
        let admission = self.admission.clone();
        let chunks = futures::stream::unfold(Some((scan, admission)), |state| async move {
            let (mut scan, admission) = state?;
            let permit = match &admission {
                Some(admission) => admission.admit().await,
                None => None,
            };
            let read = tokio::task::spawn_blocking(move || {
                let chunk = scan.next_chunk();
                (scan, chunk)
            })
            .await;
            drop(permit);
            match read {
                Ok((scan, Ok(Some(batch)))) => Some((Ok(batch), Some((scan, admission)))),
                Ok((_, Ok(None))) => None,
                Ok((_, Err(error))) => Some((Err(error), None)),
                Err(error) => Some((Err(DataFusionError::External(Box::new(error))), None)),
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            chunks,
        )))
    }
}

struct ScanStream {
    store: Arc<dyn Store>,
    snapshot: Arc<Snapshot>,
    table: TableId,
    row_codec: Arc<RowCodec>,
    key_codec: Option<Arc<RowCodec>>,
    /// Ranges still to read, the next one last; the first is narrowed as it is read.
    pending: Vec<KeyRange>,
    index: Option<Arc<IndexDef>>,
    decode: Decode,
    remaining: usize,
    schema: SchemaRef,
}

impl ScanStream {
    /// The next chunk, or `None` at the end.
    fn next_chunk(&mut self) -> Result<Option<RecordBatch>> {
        let external = |e: eddy_storage::StorageError| DataFusionError::External(Box::new(e));
        while self.remaining > 0 {
            let Some(range) = self.pending.last_mut() else {
                return Ok(None);
            };
            let limit = SCAN_CHUNK_ROWS.min(self.remaining);
            let read_from = self.index.as_ref().map_or(self.table, |index| index.index);
            let rows = self
                .store
                .read_range(&self.snapshot, read_from, range, limit)
                .map_err(external)?;
            match rows.last() {
                Some((last, _)) if rows.len() == limit => {
                    range.start = Bound::Excluded(last.clone());
                }
                _ => {
                    self.pending.pop();
                }
            }
            if rows.is_empty() {
                continue;
            }
            self.remaining -= rows.len();
            let rows = match &self.index {
                Some(_) => self.indexed_rows(rows)?,
                None => rows,
            };
            return Ok(Some(self.decode_rows(&rows)?));
        }
        Ok(None)
    }

    /// Index entries as the `(row key, value)` pairs the decode needs: the included columns'
    /// bytes when they suffice, else the rows themselves (from the same snapshot).
    fn indexed_rows(&self, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let external = |e: eddy_storage::StorageError| DataFusionError::External(Box::new(e));
        let mut split = Vec::with_capacity(entries.len());
        for (_, value) in &entries {
            split.push(IndexDef::split_value(value).map_err(external)?);
        }
        if !matches!(self.decode, Decode::Rows(_)) {
            return Ok(split
                .into_iter()
                .map(|(key, included)| (key.to_vec(), included.to_vec()))
                .collect());
        }
        // The whole chunk's rows in one multi-key read (in key order within the store).
        let keys: Vec<&[u8]> = split.iter().map(|(key, _)| *key).collect();
        let values = self
            .store
            .read_keys(&self.snapshot, self.table, &keys)
            .map_err(external)?;
        // An entry and its row commit together, so a snapshot holds both or neither.
        keys.into_iter()
            .zip(values)
            .map(|(key, value)| {
                let key = key.to_vec();
                value.map(|value| (key, value)).ok_or_else(|| {
                    DataFusionError::Internal("an index entry without its row".into())
                })
            })
            .collect()
    }

    fn decode_rows(&self, rows: &[(Vec<u8>, Vec<u8>)]) -> Result<RecordBatch> {
        let external = |e: eddy_storage::StorageError| DataFusionError::External(Box::new(e));
        let columns = match &self.decode {
            Decode::Nothing => {
                let options = RecordBatchOptions::new().with_row_count(Some(rows.len()));
                return Ok(RecordBatch::try_new_with_options(
                    self.schema.clone(),
                    vec![],
                    &options,
                )?);
            }
            Decode::Keys(fields) => {
                let codec = self.key_codec.as_ref().ok_or_else(|| {
                    DataFusionError::Internal("a key decode without a key codec".into())
                })?;
                let keys = codec
                    .decode(rows.iter().map(|(k, _)| k.as_slice()))
                    .map_err(external)?;
                fields.iter().map(|&i| keys.column(i).clone()).collect()
            }
            Decode::Rows(projection) => {
                let batch = self
                    .row_codec
                    .decode(rows.iter().map(|(_, v)| v.as_slice()))
                    .map_err(external)?;
                match projection {
                    Some(columns) => columns.iter().map(|&i| batch.column(i).clone()).collect(),
                    None => batch.columns().to_vec(),
                }
            }
            Decode::Included(columns) => {
                let index = self.index.as_ref().ok_or_else(|| {
                    DataFusionError::Internal("an included decode without an index".into())
                })?;
                let included = index
                    .decode_included(rows.iter().map(|(_, v)| v.as_slice()))
                    .map_err(external)?;
                let keys = match (
                    columns.iter().any(|c| matches!(c, EntryColumn::BaseKey(_))),
                    &self.key_codec,
                ) {
                    (false, _) => None,
                    (true, Some(codec)) => Some(
                        codec
                            .decode(rows.iter().map(|(k, _)| k.as_slice()))
                            .map_err(external)?,
                    ),
                    (true, None) => {
                        return Err(DataFusionError::Internal(
                            "a base key column without a key codec".into(),
                        ))
                    }
                };
                columns
                    .iter()
                    .map(|column| match (column, &keys) {
                        (EntryColumn::Stored(i), _) => Ok(included.column(*i).clone()),
                        (EntryColumn::BaseKey(i), Some(keys)) => Ok(keys.column(*i).clone()),
                        (EntryColumn::BaseKey(_), None) => Err(DataFusionError::Internal(
                            "base key columns not decoded".into(),
                        )),
                    })
                    .collect::<Result<Vec<_>>>()?
            }
        };
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}

/// `schema` narrowed to `projection`.
pub fn projected_schema(schema: &SchemaRef, projection: Option<&Vec<usize>>) -> Result<SchemaRef> {
    Ok(match projection {
        Some(columns) => Arc::new(schema.project(columns)?),
        None => schema.clone(),
    })
}
