//! The engine thread: its start, the loop that drains commands and runs barriers, and each
//! command's handling.

use super::*;

/// The most source work one epoch takes in before its barrier while statements are being
/// made: a statement's epoch waits for the epoch before it to be written, so what a heavy view
/// takes into one epoch bounds how long another's writes wait for it (connectors send smaller
/// batches meanwhile, see `INTERACTIVE_BATCH_ROWS`). With no statement for [`INTERACTIVE`],
/// epochs run to the checkpoint interval (fewer, larger writes).
const EPOCH_WORK: Duration = Duration::from_millis(5);
const INTERACTIVE: Duration = Duration::from_secs(2);
/// The most at any time: while an epoch is written the engine goes on with the next, so this
/// bounds the memory two epochs' writes take.
const EPOCH_WORK_MAX: Duration = Duration::from_millis(250);
/// How often the store's write buffer is measured again while it holds the sources back.
const WRITE_BUFFER_CHECK: Duration = Duration::from_millis(5);

impl Engine {
    pub(super) fn new(store: Arc<dyn Store>, stats: Arc<RwLock<EngineStats>>) -> Result<Self> {
        let counters = Self::load_counters(store.as_ref())?;
        let committer = committer::PipelinedStore::start(store)?;
        Ok(Self {
            store: committer.clone(),
            committer,
            in_flight: None,
            stats,
            counters,
            tables: BTreeMap::new(),
            views: BTreeMap::new(),
            sources: BTreeMap::new(),
            plain_views: BTreeMap::new(),
            indexes: BTreeMap::new(),
            sinks: BTreeMap::new(),
            held: Default::default(),
            feeds: BTreeMap::new(),
            epoch_writes: EpochBatch::default(),
            dirty: false,
            acks: Vec::new(),
            reach: Default::default(),
            statements_since: None,
            flushes: Vec::new(),
            interactive: Arc::default(),
            commit_observer: Arc::new(OnceLock::new()),
            state_budget: Arc::new(StateBudget::default()),
            state_cache: Arc::new(StateCache::default()),
            workers: Arc::default(),
            unrestored: Vec::new(),
            subscriptions: Default::default(),
        })
    }

    /// Where operators open their state tables.
    pub(super) fn state_context(&self) -> StateContext {
        StateContext::new(self.store.clone(), self.state_cache.clone())
            .with_workers(self.workers.clone())
    }

    pub(super) fn load_counters(store: &dyn Store) -> Result<Counters> {
        Ok(match store.get(&meta_key(COUNTERS))? {
            Some(bytes) => {
                serde_json::from_slice(&bytes).map_err(eddy_storage::StorageError::from)?
            }
            None => Counters {
                next_table_id: FIRST_USER_TABLE,
                ..Counters::default()
            },
        })
    }

    pub(super) fn run(&mut self, rx: Receiver<Command>, interval: Duration) {
        let mut last_commit = Instant::now();
        // Time spent on source rows since the last barrier (see EPOCH_WORK), and when the last
        // statement came: epochs are short only while statements are being made.
        let mut feed_work = Duration::ZERO;
        let mut last_statement: Option<Instant> = None;
        let mut last_tick = Instant::now();
        // Whether the last epoch was scoped to statements (see below).
        let mut last_scoped = false;
        // An epoch is due but the one before is still being written: until it is, the loop
        // takes statements (into the coming epoch) and no source rows.
        let mut commit_waiting = false;
        loop {
            // An index build goes on epoch after epoch, a chunk each, with no idle wait.
            let building = self.building_indexes();
            let write_buffer_full = self.update_write_buffer_hold();
            let wait = if commit_waiting {
                // The write's completion wakes the loop.
                Duration::from_millis(200)
            } else if building {
                Duration::ZERO
            } else if write_buffer_full {
                // Flushes free it without telling the loop.
                WRITE_BUFFER_CHECK
            } else {
                interval
                    .saturating_sub(last_commit.elapsed())
                    .min(Duration::from_millis(200))
            };
            // Wait for a command or a batch from any feed, whichever comes first; feeds a full
            // sink log or watermark alignment holds back are left waiting.
            self.update_held_back();
            self.update_alignment();
            self.run_waiting();
            let feeds: Vec<(String, Receiver<SourceEvent>)> = self
                .feeds
                .iter()
                .filter(|(name, _)| !commit_waiting && !self.feed_held(name))
                .map(|(name, feed)| (name.clone(), feed.events.clone()))
                .collect();
            let mut select = Select::new();
            let commands = select.recv(&rx);
            for (_, events) in &feeds {
                select.recv(events);
            }
            // The epoch in flight: its completion hands its changes to sinks and subscriptions.
            let written = self.in_flight.as_ref().map(|f| f.done.clone());
            let written_index = written.as_ref().map(|done| select.recv(done));
            let mut stop = None;
            match select.select_timeout(wait) {
                Ok(operation) if Some(operation.index()) == written_index => {
                    let done = written.as_ref().expect("selected");
                    let outcome = operation.recv(done).unwrap_or_else(|_| {
                        Err(ExecError::Internal("the committer stopped".into()))
                    });
                    if let Some(in_flight) = self.in_flight.take() {
                        self.guarded(|engine| {
                            let _ = engine.complete(in_flight, outcome);
                        });
                    }
                }
                Ok(operation) if operation.index() == commands => match operation.recv(&rx) {
                    Ok(Command::Shutdown { reply }) => stop = Some(reply),
                    Ok(command) => self.guarded(|engine| engine.handle(command)),
                    Err(_) => {
                        let _ = self.commit();
                        return;
                    }
                },
                Ok(operation) => {
                    let (name, events) = &feeds[operation.index() - 1];
                    match operation.recv(events) {
                        Ok(event) => feed_work += self.timed_source_event(name, event),
                        // Its connector ended and all it sent is taken: a disconnected channel
                        // is always ready, so waiting on it again would spin.
                        Err(_) => self.stop_waiting_on(name, events),
                    }
                }
                Err(_) => {}
            }
            // Group commit: take everything already queued into this epoch.
            while stop.is_none() {
                match rx.try_recv() {
                    Ok(Command::Shutdown { reply }) => stop = Some(reply),
                    Ok(command) => self.guarded(|engine| engine.handle(command)),
                    Err(_) => break,
                }
            }
            // A statement waits for this epoch (a read of the catalog does not count).
            if !self.acks.is_empty() {
                last_statement = Some(Instant::now());
            }
            // Bounded work per round, so commands and commits are never starved; none while a
            // statement waits for its epoch, and no more than EPOCH_WORK in one epoch.
            let interactive = last_statement.is_some_and(|at| at.elapsed() < INTERACTIVE);
            self.interactive
                .store(interactive, std::sync::atomic::Ordering::Relaxed);
            let full =
                |work: Duration| work >= EPOCH_WORK_MAX || (interactive && work >= EPOCH_WORK);
            'feeding: for (name, events) in &feeds {
                for _ in 0..crate::connector::CHANNEL_BATCHES {
                    if !self.acks.is_empty() || full(feed_work) {
                        break 'feeding;
                    }
                    if self.feed_held(name) {
                        break;
                    }
                    match events.try_recv() {
                        Ok(event) => feed_work += self.timed_source_event(name, event),
                        Err(_) => break,
                    }
                }
            }
            self.check_flushes();
            if last_tick.elapsed() >= Duration::from_millis(200) {
                self.tick_feeds();
                last_tick = Instant::now();
            }
            let due = last_commit.elapsed() >= interval;
            // Views on the wall clock change with no row arriving: a barrier every interval.
            let clocked = self
                .views
                .values()
                .any(|v| v.graph.is_some() && v.plan.uses_wall_clock());
            let checkpoint = (self.dirty || clocked || self.sinks_need_commit()) && due;
            let full_due = full(feed_work) || checkpoint;
            let must_be_full = building || self.subscriptions.starting() || stop.is_some();
            let wanted = !self.acks.is_empty() || full_due || must_be_full;
            // Blocking on the write in flight would leave statements queued behind it.
            commit_waiting = wanted && stop.is_none() && self.writing();
            if wanted && !commit_waiting {
                // Statements first, in an epoch of their own that commits only what they
                // reach (see `scope`): the source work taken in so far waits for the next
                // full epoch, which comes right after (never two scoped epochs while one is
                // due, so statements cannot hold the sources' commits back).
                let scope = match must_be_full || (full_due && last_scoped) {
                    true => None,
                    false => self.statement_scope(),
                };
                last_scoped = scope.is_some();
                self.guarded(|engine| engine.commit_and_ack(scope));
                if !last_scoped {
                    last_commit = Instant::now();
                    feed_work = Duration::ZERO;
                }
            } else if due && !commit_waiting {
                self.publish_stats();
                last_commit = Instant::now();
            }
            if let Some(reply) = stop {
                let _ = self.finish_in_flight();
                self.feeds.clear();
                let _ = reply.send(Ok(()));
                return;
            }
        }
    }

    /// Applies a batch from a feed; how long it took counts towards the epoch's bound.
    fn timed_source_event(&mut self, name: &str, event: SourceEvent) -> Duration {
        let started = Instant::now();
        let logged = tracing::enabled!(target: "eddy::epochs", tracing::Level::DEBUG);
        let before = logged.then(thread_schedule).flatten();
        self.guarded(|engine| engine.on_source_event(name, event));
        // The batch moved its source's watermark: a source may now be ahead, or caught up.
        self.update_alignment();
        let took = started.elapsed();
        let slow = before.filter(|_| took >= SLOW_SOURCE_EVENT);
        if let (Some(before), Some(after)) = (slow, slow.and_then(|_| thread_schedule())) {
            // Time on a core, time waiting for one; the rest was waiting on something else
            // (the disk, a worker, a lock).
            tracing::debug!(
                target: "eddy::epochs",
                feed = name,
                wall_ms = took.as_secs_f64() * 1e3,
                cpu_ms = after.0.saturating_sub(before.0) as f64 / 1e6,
                runnable_ms = after.1.saturating_sub(before.1) as f64 / 1e6,
                "slow source batch"
            );
        }
        took
    }

    /// Runs `work`, turning a panic (a bug, here or in a library) into an abandoned epoch:
    /// the statements in it fail, state reloads from the last commit, and the engine lives on.
    pub(super) fn guarded(&mut self, work: impl FnOnce(&mut Self)) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(self)));
        if let Err(panic) = outcome {
            let what = panic_message(panic.as_ref());
            tracing::error!(%what, "internal error in the engine; reloading the last committed epoch");
            self.fail_pending(&what);
            if let Err(error) = self.reload() {
                tracing::error!(%error, "reloading after an internal error failed");
            }
        }
    }

    /// Runs a command. Its reply waits for the commit when it changed anything.
    pub(super) fn handle(&mut self, command: Command) {
        if let Err(error) = self.restore_unrestored() {
            command.fail(error);
            return;
        }
        if self.must_wait(&command) {
            // A change reaching a sink whose log is full waits, in order with the others.
            self.held.waiting.push_back(command);
            return;
        }
        match command {
            Command::CreateTable {
                def,
                feed,
                sql,
                reply,
            } => {
                let result = self.create_table(def, feed, sql);
                self.ack_after_commit(reply, result);
            }
            Command::CreateSource { def, sql, reply } => {
                let result = self.create_source(def, sql);
                self.ack_after_commit(reply, result);
            }
            Command::CreateView {
                name,
                sql,
                plan,
                reply,
            } => {
                let result = self.create_view(name, sql, plan);
                self.ack_after_commit(reply, result);
            }
            Command::CreateSink {
                spec,
                meta,
                sql,
                reply,
            } => {
                let result = self.create_sink(spec, meta, sql);
                self.ack_after_commit(reply, result);
            }
            Command::Restore {
                entry,
                object,
                reply,
            } => {
                let _ = reply.send(self.restore(*entry, *object));
            }
            Command::Drop { kind, name, reply } => {
                let result = self.drop_object(kind, &name);
                self.ack_after_commit(reply, result);
            }
            Command::PutPlainView {
                name,
                sql,
                replace,
                reply,
            } => {
                let result = self.put_plain_view(name, sql, replace);
                self.ack_after_commit(reply, result);
            }
            Command::CreateIndex {
                name,
                sql,
                relation,
                columns,
                include,
                reply,
            } => {
                self.create_index(name, sql, relation, columns, include, reply);
            }
            Command::CatalogEntry { name, reply } => {
                let entry = self
                    .tables
                    .get(&name)
                    .map(|(entry, _)| entry)
                    .or_else(|| self.views.get(&name).map(|view| &view.entry))
                    .or_else(|| self.plain_views.get(&name));
                let _ = reply.send(Ok(entry.cloned()));
            }
            Command::Rename {
                old,
                new,
                rewrites,
                reply,
            } => {
                let result = self.rename(&old, &new, rewrites);
                self.ack_after_commit(reply, result);
            }
            Command::Insert {
                table,
                batches,
                reply,
            } => {
                let result = self.insert(&table, batches);
                self.ack_rows_after_commit(&table, reply, result);
            }
            Command::Delete {
                table,
                predicate,
                reply,
            } => {
                let result =
                    self.change(&table, |t, store| t.delete_where(predicate.as_ref(), store));
                self.ack_rows_after_commit(&table, reply, result);
            }
            Command::Update {
                table,
                predicate,
                assignments,
                reply,
            } => {
                let result = self.change(&table, |t, store| {
                    t.update_where(predicate.as_ref(), &assignments, store)
                });
                self.ack_rows_after_commit(&table, reply, result);
            }
            Command::Flush { reply } => {
                self.dirty = true;
                if self.feeds.is_empty() {
                    let epoch = self.counters.epoch + 1;
                    self.ack_after_commit(reply, Ok(epoch));
                } else {
                    // Wait until every feed has taken in what its source held at this moment
                    // (for Kafka, once the connector has reported the current ends).
                    let targets = self
                        .feeds
                        .iter()
                        .map(|(name, feed)| {
                            let target = match feed.request_refresh() {
                                Some(generation) => FlushWait::Refresh(generation),
                                None => FlushWait::Target(feed.flush_target()),
                            };
                            (name.clone(), target)
                        })
                        .collect();
                    self.flushes.push(PendingFlush {
                        reply,
                        targets,
                        since: Instant::now(),
                    });
                }
            }
            Command::Subscribe {
                relation,
                as_of,
                reply,
            } => self.subscribe(relation, as_of, reply),
            Command::Recover { reply } => {
                self.fail_pending("the epoch was abandoned by RECOVER");
                let _ = reply.send(self.reload());
            }
            Command::Shutdown { .. } => unreachable!("handled by the loop"),
        }
    }
}

/// A source batch taking longer is logged (`eddy::epochs` at debug).
const SLOW_SOURCE_EVENT: Duration = Duration::from_millis(20);

/// The calling thread's time on a core and waiting for one, in nanoseconds (Linux's
/// `schedstat`; `None` elsewhere).
fn thread_schedule() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some((fields.next()??, fields.next()??))
}

/// What a caught panic said.
pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}
