//! A keyed operator run as one instance per worker: the exchange routes each row to the
//! instance owning its key's partition, the instances run in parallel, and their outputs are
//! merged back into the one stream the graph drives.
//!
//! Each instance is a whole operator with state tables of its own, and sees every row of the
//! keys it owns, in order: so it answers exactly what the single operator would for those
//! keys. The key is what the operator keeps its state by (a join's key on either input, a
//! GROUP BY's columns, a top-N or OVER partition), hashed as the state tables hash it
//! ([`crate::partition`]); instance `i` of `n` owns partitions `[256·i/n, 256·(i+1)/n)`.
//!
//! Merging keeps what the graph relies on:
//! - **Order per key.** Rows of one stream key can reach two instances only when a change
//!   moves a row to another key (an update of a join or GROUP BY column). The chunk is then
//!   cut there, and the part before is finished, output and all, before the part after
//!   starts; an update whose two halves go apart becomes a delete and an insert.
//! - **Watermarks.** Every instance gets every watermark; a clock's merged watermark is the
//!   lowest any instance has emitted, sent once it rises, after the instances' rows.
//! - **Two phases.** An aggregate's chunk (a windowed one's, or a GROUP BY's over an
//!   append-only input) is first aggregated on its own (one row per group with partial states,
//!   [`crate::aggregate::PartialAggregateOperator`]); the instances merge those, so a hot key
//!   or a HOP window's copies cross the exchange once per chunk.
//! - **Barriers.** Each instance writes its state into a batch of its own, appended to the
//!   epoch's in instance order: one atomic commit still.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{ArrayRef, UInt32Array};
use datafusion::arrow::compute::take_record_batch;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::physical_expr::PhysicalExpr;
use eddy_storage::EpochBatch;
use hashbrown::HashMap;

use crate::partition::{partition, PARTITIONS};
use crate::state_table::StateTableStats;
use crate::stats::JoinSideStats;
use crate::workers::Workers;
use crate::{Barrier, Message, Op, Operator, Result, StreamChunk, Watermark};

pub struct ExchangeOperator {
    instances: Vec<Mutex<Box<dyn Operator>>>,
    /// Applied to each chunk before it is routed (a partial aggregate: the first phase of two).
    local: Option<Box<dyn Operator>>,
    /// Per input: the key expressions over its visible columns, and their row encoder.
    routes: Vec<Route>,
    workers: Arc<Workers>,
    /// Per clock, each instance's newest watermark.
    clocks: BTreeMap<usize, Vec<Option<Watermark>>>,
    /// Per clock, the merged watermark last sent on.
    sent: BTreeMap<usize, Watermark>,
}

struct Route {
    keys: Vec<Arc<dyn PhysicalExpr>>,
    encoder: Option<RowConverter>,
}

impl ExchangeOperator {
    /// Runs `instances` (at least two) by the keys of each input (`keys[input]`).
    pub fn new(
        instances: Vec<Box<dyn Operator>>,
        keys: Vec<Vec<Arc<dyn PhysicalExpr>>>,
        workers: Arc<Workers>,
    ) -> Self {
        Self {
            instances: instances.into_iter().map(Mutex::new).collect(),
            local: None,
            routes: keys
                .into_iter()
                .map(|keys| Route {
                    keys,
                    encoder: None,
                })
                .collect(),
            workers,
            clocks: BTreeMap::new(),
            sent: BTreeMap::new(),
        }
    }

    /// Runs `local` on each chunk first, on the engine thread; the keys are then over its
    /// output.
    pub fn with_local(self, local: Box<dyn Operator>) -> Self {
        Self {
            local: Some(local),
            ..self
        }
    }

    /// The instance owning each row's key.
    fn targets(&mut self, input: usize, chunk: &StreamChunk) -> Result<Vec<usize>> {
        let visible = chunk
            .batch
            .project(&(0..chunk.visible_len()).collect::<Vec<_>>())?;
        let last = self.routes.len() - 1;
        let route = &mut self.routes[input.min(last)];
        let keys: Vec<ArrayRef> = route
            .keys
            .iter()
            .map(|key| key.evaluate(&visible)?.into_array(visible.num_rows()))
            .collect::<datafusion::error::Result<_>>()?;
        if route.encoder.is_none() {
            let fields = keys
                .iter()
                .map(|k| SortField::new(k.data_type().clone()))
                .collect();
            route.encoder = Some(RowConverter::new(fields)?);
        }
        let rows = route
            .encoder
            .as_ref()
            .expect("set above")
            .convert_columns(&keys)?;
        let n = self.instances.len();
        Ok(rows
            .iter()
            .map(|row| usize::from(partition(row.as_ref())) * n / usize::from(PARTITIONS))
            .collect())
    }

    /// Runs `work` on every instance with an input (`inputs[i]`), in parallel (instance `i` on
    /// worker `i`), and merges what they emit into `out`.
    fn run<T: Send>(
        &mut self,
        inputs: Vec<Option<T>>,
        work: impl Fn(&mut dyn Operator, T, &mut Vec<Message>) -> Result<()> + Sync,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        let inputs: Vec<Mutex<Option<T>>> = inputs.into_iter().map(Mutex::new).collect();
        let instances = &self.instances;
        let outputs = self.workers.run_each(instances.len(), |i| {
            let mut operator = instances[i].lock().unwrap_or_else(|e| e.into_inner());
            let input = inputs[i].lock().unwrap_or_else(|e| e.into_inner()).take();
            let mut emitted = Vec::new();
            match input {
                Some(input) => work(operator.as_mut(), input, &mut emitted).map(|_| emitted),
                None => Ok(emitted),
            }
        })?;
        let mut watermarks = Vec::new();
        for (i, emitted) in outputs.into_iter().enumerate() {
            for message in emitted? {
                match message {
                    Message::Watermark(watermark) => watermarks.push((i, watermark)),
                    other => out.push(other),
                }
            }
        }
        for (i, watermark) in watermarks {
            self.merge_watermark(i, watermark, out);
        }
        Ok(())
    }

    /// Records instance `i`'s watermark; sends the clock's lowest once every instance has one
    /// and it moved.
    fn merge_watermark(&mut self, i: usize, watermark: Watermark, out: &mut Vec<Message>) {
        let n = self.instances.len();
        let latest = self
            .clocks
            .entry(watermark.clock)
            .or_insert_with(|| vec![None; n]);
        latest[i] = Some(watermark);
        let Some(lowest) = latest
            .iter()
            .copied()
            .collect::<Option<Vec<_>>>()
            .and_then(|all| all.into_iter().min_by_key(|w| (w.value, w.idle)))
        else {
            return;
        };
        let moved = self.sent.get(&lowest.clock).is_none_or(|sent| {
            lowest.value > sent.value || (lowest.value == sent.value && lowest.idle != sent.idle)
        });
        if moved {
            self.sent.insert(lowest.clock, lowest);
            out.push(Message::Watermark(lowest));
        }
    }

    /// `f` of every instance, in order.
    fn each<'a, T>(&'a self, f: impl Fn(&dyn Operator) -> T + 'a) -> impl Iterator<Item = T> + 'a {
        self.instances.iter().map(move |instance| {
            let operator = instance.lock().unwrap_or_else(|e| e.into_inner());
            f(operator.as_ref())
        })
    }
}

/// `chunk` cut where a stream key moves to another instance, each part split by instance:
/// `parts[p][i]` holds part `p`'s rows for instance `i` (None when it has none).
fn split(chunk: StreamChunk, targets: &[usize], n: usize) -> Result<Vec<Vec<Option<StreamChunk>>>> {
    let mut cuts = vec![0];
    if chunk.ops.iter().any(|op| !op.is_insert()) {
        // No key columns: a relation of at most one row (a global aggregate), every row
        // under the same (empty) key.
        let keys = match chunk.key_len {
            0 => None,
            _ => {
                let key_columns = chunk.key_columns();
                let fields = key_columns
                    .iter()
                    .map(|k| SortField::new(k.data_type().clone()))
                    .collect();
                Some(RowConverter::new(fields)?.convert_columns(key_columns)?)
            }
        };
        // By a hash of the key: a collision only cuts where no cut was needed.
        let mut owner: HashMap<u64, usize> = HashMap::new();
        for (row, &target) in targets.iter().enumerate() {
            let key = keys
                .as_ref()
                .map_or(0, |keys| fnv64(keys.row(row).as_ref()));
            if owner.get(&key).is_some_and(|&other| other != target) {
                cuts.push(row);
                owner.clear();
            }
            owner.insert(key, target);
        }
    }
    cuts.push(chunk.len());
    if cuts.len() == 2 && targets.iter().all(|&t| t == targets[0]) {
        // Every row to one instance: the chunk goes as it is.
        let mut part: Vec<Option<StreamChunk>> = vec![None; n];
        part[targets[0]] = Some(chunk);
        return Ok(vec![part]);
    }
    let mut parts = Vec::with_capacity(cuts.len() - 1);
    for window in cuts.windows(2) {
        let (start, end) = (window[0], window[1]);
        let mut rows: Vec<Vec<u32>> = vec![Vec::new(); n];
        for row in start..end {
            rows[targets[row]].push(row as u32);
        }
        let part = rows
            .into_iter()
            .map(|rows| match rows.is_empty() {
                true => Ok(None),
                false => piece(&chunk, targets, start, end, rows).map(Some),
            })
            .collect::<Result<Vec<_>>>()?;
        parts.push(part);
    }
    Ok(parts)
}

fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Rows `rows` (all of one instance, within `start..end`) of `chunk`; an update whose other
/// half is elsewhere becomes a delete or an insert.
fn piece(
    chunk: &StreamChunk,
    targets: &[usize],
    start: usize,
    end: usize,
    rows: Vec<u32>,
) -> Result<StreamChunk> {
    let together = |a: usize, b: usize| a >= start && b < end && targets[a] == targets[b];
    let ops = rows
        .iter()
        .map(|&row| {
            let row = row as usize;
            match chunk.ops[row] {
                Op::UpdateDelete if !together(row, row + 1) => Op::Delete,
                Op::UpdateInsert if row == 0 || !together(row - 1, row) => Op::Insert,
                op => op,
            }
        })
        .collect();
    let indices = UInt32Array::from(rows);
    Ok(StreamChunk {
        ops,
        batch: take_record_batch(&chunk.batch, &indices)?,
        key_len: chunk.key_len,
    })
}

impl Operator for ExchangeOperator {
    fn name(&self) -> &'static str {
        self.each(|o| o.name()).next().unwrap_or("exchange")
    }

    fn process_chunk(&mut self, chunk: StreamChunk, out: &mut Vec<Message>) -> Result<()> {
        self.process_input_chunk(0, chunk, out)
    }

    fn process_input_chunk(
        &mut self,
        input: usize,
        chunk: StreamChunk,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        if chunk.is_empty() {
            return Ok(());
        }
        let chunk = match &mut self.local {
            Some(local) => {
                let mut partial = Vec::new();
                local.process_input_chunk(input, chunk, &mut partial)?;
                match partial.pop() {
                    Some(Message::Chunk(chunk)) if partial.is_empty() => chunk,
                    None => return Ok(()),
                    Some(_) => {
                        return Err(crate::ExecError::DataFusion(
                            datafusion::error::DataFusionError::Internal(
                                "a local phase before an exchange gives one chunk per chunk".into(),
                            ),
                        ))
                    }
                }
            }
            None => chunk,
        };
        if chunk.is_empty() {
            return Ok(());
        }
        let targets = self.targets(input, &chunk)?;
        for part in split(chunk, &targets, self.instances.len())? {
            // Held until the instances are done, so that the parts' buffers are freed here, on
            // the thread that allocated them: freed on a worker, the allocator could not reuse
            // them for the next chunk (the engine thread's copies then ran into fresh pages).
            let held: Vec<_> = part.iter().flatten().map(|c| c.batch.clone()).collect();
            self.run(
                part,
                |operator, chunk, out| operator.process_input_chunk(input, chunk, out),
                out,
            )?;
            drop(held);
        }
        Ok(())
    }

    fn process_watermark(&mut self, watermark: Watermark, out: &mut Vec<Message>) -> Result<()> {
        self.process_input_watermark(0, watermark, out)
    }

    fn process_input_watermark(
        &mut self,
        input: usize,
        watermark: Watermark,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        let each = vec![Some(watermark); self.instances.len()];
        self.run(
            each,
            |operator, watermark, out| operator.process_input_watermark(input, watermark, out),
            out,
        )
    }

    fn process_barrier(
        &mut self,
        barrier: Barrier,
        epoch: &mut EpochBatch,
        out: &mut Vec<Message>,
    ) -> Result<()> {
        let batches: Vec<Mutex<EpochBatch>> = (0..self.instances.len())
            .map(|_| Mutex::new(EpochBatch::default()))
            .collect();
        let each = (0..self.instances.len()).map(Some).collect();
        self.run(
            each,
            |operator, i: usize, out| {
                let mut batch = batches[i].lock().unwrap_or_else(|e| e.into_inner());
                operator.process_barrier(barrier, &mut batch, out)
            },
            out,
        )?;
        for batch in batches {
            epoch.append(batch.into_inner().unwrap_or_else(|e| e.into_inner()));
        }
        Ok(())
    }

    fn max_input_rows(&self) -> Option<usize> {
        self.each(|o| o.max_input_rows()).next().flatten()
    }

    fn state_rows(&self) -> usize {
        self.each(|o| o.state_rows()).sum()
    }

    fn state_bytes(&self) -> usize {
        self.each(|o| o.state_bytes()).sum()
    }

    /// Windows open in any instance, each once (every instance has its keys' share of a window).
    fn open_windows(&self) -> usize {
        let ends: std::collections::BTreeSet<i64> =
            self.each(|o| o.open_window_ends()).flatten().collect();
        match ends.is_empty() {
            true => self.each(|o| o.open_windows()).sum(),
            false => ends.len(),
        }
    }

    fn open_window_ends(&self) -> Vec<i64> {
        let ends: std::collections::BTreeSet<i64> =
            self.each(|o| o.open_window_ends()).flatten().collect();
        ends.into_iter().collect()
    }

    fn take_failed_rows(&mut self) -> Vec<crate::operators::FailedRow> {
        self.instances
            .iter_mut()
            .flat_map(|i| {
                let operator = i.get_mut().unwrap_or_else(|e| e.into_inner());
                operator.take_failed_rows()
            })
            .collect()
    }

    fn rows_failed(&self) -> u64 {
        self.each(|o| o.rows_failed()).sum()
    }

    /// Each side's figures over every instance.
    fn join_state(&self) -> Vec<JoinSideStats> {
        let mut sides: Vec<JoinSideStats> = Vec::new();
        for instance in self.each(|o| o.join_state()) {
            for (i, side) in instance.into_iter().enumerate() {
                match sides.get_mut(i) {
                    None => sides.push(side),
                    Some(total) => {
                        total.rows += side.rows;
                        total.distinct_keys += side.distinct_keys;
                        total.bytes += side.bytes;
                        total.rows_evicted += side.rows_evicted;
                        total.max_rows_per_key = total.max_rows_per_key.max(side.max_rows_per_key);
                        total.max_fan_out = total.max_fan_out.max(side.max_fan_out);
                        total.retention = total.retention.min(side.retention).or(side.retention);
                    }
                }
            }
        }
        sides
    }

    fn state_tables(&self) -> Vec<StateTableStats> {
        self.each(|o| o.state_tables()).flatten().collect()
    }
}
