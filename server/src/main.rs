//! `eddy`: the streaming SQL database server.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use eddy_executor::EngineHandle;
use eddy_server::wire::auth::{tls_acceptor, Authentication, Credentials};
use eddy_server::wire::connection::{self, ConnectionOptions};
use eddy_server::wire::handler::EddyServerHandlers;
use eddy_storage::{FjallStore, Store};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

mod allocator;

#[derive(Debug, Parser)]
#[command(
    name = "eddy",
    version,
    about = "Eddy: a streaming SQL database speaking the Postgres protocol"
)]
struct Args {
    /// Address to listen on for Postgres clients.
    #[arg(long, env = "EDDY_LISTEN", default_value = "127.0.0.1:4566")]
    listen: String,
    /// Directory holding Eddy's data (created if missing).
    #[arg(long, env = "EDDY_DATA_DIR", default_value = "./eddy-data")]
    data_dir: PathBuf,
    /// How often an epoch is committed while changes are pending (e.g. `1s`, `250ms`).
    #[arg(long, env = "EDDY_CHECKPOINT_INTERVAL", default_value = "1s", value_parser = humantime::parse_duration)]
    checkpoint_interval: Duration,
    /// Memory for the store's block cache, in MiB (more keeps more of large views and state in
    /// memory; less lowers the server's footprint).
    #[arg(long, env = "EDDY_STORE_CACHE_MIB", default_value_t = eddy_storage::fjall_store::DEFAULT_CACHE_MIB)]
    store_cache_mib: u64,
    /// Memory for writes the store has not yet written to table files, in MiB: past it,
    /// sources wait for the store's flushes to catch up (statements do not). 0: no bound.
    #[arg(long, env = "EDDY_STORE_WRITE_BUFFER_MIB", default_value_t = eddy_executor::engine::DEFAULT_WRITE_BUFFER_MIB)]
    store_write_buffer_mib: u64,
    /// Create (unless present) a Nexmark `bid` source and a live `hot_auctions` view.
    #[arg(long, env = "EDDY_DEMO")]
    demo: bool,
    /// With --password: the only user name accepted (any name when not given).
    #[arg(long, env = "EDDY_USER", requires = "password")]
    user: Option<String>,
    /// Require this password (SCRAM-SHA-256). Without it, every client is trusted.
    #[arg(long, env = "EDDY_PASSWORD", hide_env_values = true)]
    password: Option<String>,
    /// PEM certificate (chain) for TLS; needs --tls-key.
    #[arg(long, env = "EDDY_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for TLS; needs --tls-cert.
    #[arg(long, env = "EDDY_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Clients connected at once at most; the next one is refused with 53300.
    #[arg(long, env = "EDDY_MAX_CONNECTIONS", default_value_t = 300)]
    max_connections: usize,
    /// The longest statement (and protocol message) accepted, e.g. `4MiB`, `512KiB` or bytes;
    /// a longer one is refused with 54001.
    #[arg(long, env = "EDDY_MAX_STATEMENT_SIZE", default_value = "4MiB", value_parser = eddy_server::limits::parse_size)]
    max_statement_size: usize,
    /// The memory one query may use (sorts and aggregations spill to disk beyond it; what
    /// cannot is refused with 53200), e.g. `1GiB`.
    #[arg(long, env = "EDDY_QUERY_MEMORY_LIMIT", default_value = "1GiB", value_parser = eddy_server::limits::parse_size)]
    query_memory_limit: usize,
    /// The memory one materialized view's state may hold (estimated), e.g. `4GiB`: past it
    /// the view fails alone (53200 on reads; see `eddy_catalog.materialized_views`).
    #[arg(long, env = "EDDY_VIEW_STATE_MEMORY_LIMIT", default_value = "4GiB", value_parser = eddy_server::limits::parse_size)]
    view_state_memory_limit: usize,
    /// Full scans (reads of every row of a table or view: no key or index range, no LIMIT)
    /// that read at once; the others wait their turn, while narrowed reads never wait.
    /// Default: one per four cores, at least one.
    #[arg(long, env = "EDDY_MAX_CONCURRENT_SCANS")]
    max_concurrent_scans: Option<usize>,
    /// Worker threads a materialized view's joins, GROUP BYs, top-N and OVER run on, each
    /// owning a share of the keys (a view keeps the count it was created with). Default: the
    /// machine's cores less two (the source decoders, the committer and the store's
    /// compactions keep about two busy under load), at least one.
    #[arg(long, env = "EDDY_WORKERS", value_parser = clap::value_parser!(u32).range(1..=256))]
    workers: Option<u32>,
    /// The memory operators' state caches hold together, in MiB (fractions allowed: `0.004` is
    /// 4 KiB). State beyond it stays in the store and is read back as keys need it.
    #[arg(long, env = "EDDY_STATE_CACHE_MIB", default_value_t = 1024.0)]
    state_cache_mib: f64,
    /// The changes one subscription's client may leave unread (`SUBSCRIBE`); past it the
    /// subscription ends with 53200.
    #[arg(long, env = "EDDY_SUBSCRIBE_BUFFER", default_value = "64MiB", value_parser = eddy_server::limits::parse_size)]
    subscribe_buffer: usize,
    /// The recent changes kept per subscribed table or view, for `SUBSCRIBE ... AS OF`.
    #[arg(long, env = "EDDY_SUBSCRIBE_HISTORY", default_value = "64MiB", value_parser = eddy_server::limits::parse_size)]
    subscribe_history: usize,
    /// The memory all views' state may hold together: past it the largest view fails.
    #[arg(long, env = "EDDY_STATE_MEMORY_LIMIT", default_value = "8GiB", value_parser = eddy_server::limits::parse_size)]
    state_memory_limit: usize,
    /// Address to serve Prometheus metrics on (`GET /metrics`), e.g. `127.0.0.1:9466`. Off
    /// when not given.
    #[arg(long, env = "EDDY_METRICS_LISTEN")]
    metrics_listen: Option<String>,
    /// Log lines as human-readable text (coloured only on a terminal) or as JSON objects.
    #[arg(long, env = "EDDY_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Logs to stderr, filtered by `EDDY_LOG` (default `info`).
fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("EDDY_LOG").unwrap_or_else(|_| "info".into());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => logs.json().with_ansi(false).init(),
        // Colour codes only where a person reads them: not in files, pipes or journald.
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}

/// Stack of each runtime worker (and blocking thread): planning and evaluating a statement as
/// deep as the depth limit allows recurses once per level (DataFusion's planner and
/// evaluators), with frames of kilobytes: 1,000 set operations or derived tables nested 600
/// deep overflowed 16 MiB in a debug build. Only what a statement touches is ever resident.
const WORKER_STACK_BYTES: usize = 64 << 20;

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(WORKER_STACK_BYTES)
        .on_thread_park(allocator::return_idle_memory)
        .build()?
        // On a worker, not the main thread: restoring plans every view's SQL again, as deep
        // as any statement, and the main thread has only the system's default stack.
        .block_on(async { tokio::spawn(serve()).await? })
}

/// The bound on the store's write buffer: 0 for none, else at least what the store's active
/// memtables hold before they are flushed.
fn store_write_buffer_bytes(mib: u64) -> u64 {
    let floor = eddy_storage::fjall_store::MIN_WRITE_BUFFER_BYTES;
    match mib.saturating_mul(1 << 20) {
        0 => 0,
        bytes if bytes < floor => {
            tracing::warn!(
                asked_mib = mib,
                used_mib = floor >> 20,
                "--store-write-buffer-mib is below what the store's memtables hold before they \
                 are flushed; using the least that works"
            );
            floor
        }
        bytes => bytes,
    }
}

async fn serve() -> anyhow::Result<()> {
    let args = Args::parse();
    init_logging(args.log_format);
    allocator::spawn_idle_purge();

    let started_at = std::time::SystemTime::now();
    let opening = std::time::Instant::now();
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("cannot create data directory {}", args.data_dir.display()))?;
    let store: Arc<dyn Store> = Arc::new(
        FjallStore::open_with_cache(&args.data_dir, args.store_cache_mib.saturating_mul(1 << 20))
            .with_context(|| format!("cannot open the store in {}", args.data_dir.display()))?,
    );
    let open_store = opening.elapsed();
    let store_bytes = store.size_on_disk();
    let objects = eddy_storage::CatalogEntry::load_all(store.as_ref())
        .map_or(0, |entries| entries.len() as u64);
    let restoring = std::time::Instant::now();
    let engine = EngineHandle::start(store.clone(), args.checkpoint_interval)?;
    engine.set_state_budget(args.view_state_memory_limit, args.state_memory_limit);
    engine.set_workers(args.workers.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(2).max(1)),
        |n| n as usize,
    ));
    engine.set_state_cache((args.state_cache_mib.max(0.0) * 1048576.0) as usize);
    engine.set_store_write_buffer_limit(store_write_buffer_bytes(args.store_write_buffer_mib));
    engine.set_subscribe_limits(args.subscribe_buffer, args.subscribe_history);
    let db = eddy_server::context::open_database(store, engine.clone())
        .await
        .map_err(|e| anyhow::anyhow!("cannot restore the catalog: {e}"))?;
    eddy_server::restore::record(eddy_server::restore::RestoreReport {
        started_at_micros: started_at
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64),
        open_store,
        restore_catalog: restoring.elapsed(),
        objects,
        store_bytes,
        epoch: db.engine().committed_epoch(),
    });
    db.set_query_memory_limit(args.query_memory_limit);
    if let Some(scans) = args.max_concurrent_scans {
        db.set_max_concurrent_scans(scans);
    }
    if args.demo {
        eddy_server::demo::install(&db)
            .await
            .map_err(|e| anyhow::anyhow!("cannot create the demo: {e}"))?;
    }

    if let Some(address) = &args.metrics_listen {
        let registry = eddy_server::metrics::registry(&engine)
            .map_err(|e| anyhow::anyhow!("cannot set up the metrics: {e}"))?;
        let listener = TcpListener::bind(address)
            .await
            .with_context(|| format!("cannot listen for metrics on {address}"))?;
        tracing::info!(address = %address, "serving metrics at /metrics");
        tokio::spawn(async move {
            if let Err(error) = eddy_server::metrics::http::serve(listener, registry).await {
                tracing::error!(%error, "the metrics listener failed");
            }
        });
    }

    let listener = TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    tracing::info!(address = %args.listen, data_dir = %args.data_dir.display(), "eddy is accepting connections");
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls_acceptor(cert, key).map_err(|e| anyhow::anyhow!(e))?),
        _ => None,
    };
    let credentials = args.password.clone().map(|password| Credentials {
        user: args.user.clone(),
        password,
    });
    let authentication = Authentication::new(credentials.as_ref());
    tracing::info!(
        auth = if credentials.is_some() {
            "scram-sha-256"
        } else {
            "trust"
        },
        tls = tls.is_some(),
        "client authentication"
    );
    let limits = eddy_planner::limits::StatementLimits {
        max_bytes: args.max_statement_size,
        ..Default::default()
    };
    let handlers = Arc::new(
        EddyServerHandlers::with_authentication(db, authentication).with_statement_limits(limits),
    );
    let options = Arc::new(ConnectionOptions::new(tls, args.max_statement_size));
    let max_connections = eddy_server::wire::file_limit::connections_served(args.max_connections)
        .map_err(|e| anyhow::anyhow!(e))?;
    let connections = Arc::new(Semaphore::new(max_connections));
    let mut backoff = eddy_server::wire::accept_backoff::AcceptBackoff::default();
    // Refusals are cheap but not free: beyond this many at once, a connection is just closed.
    let refusals = Arc::new(Semaphore::new(64));

    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                match accepted {
                    Ok((socket, _)) => {
                        backoff.accepted();
                        let options = options.clone();
                        match connections.clone().try_acquire_owned() {
                            Ok(permit) => {
                                let handlers = handlers.clone();
                                // A connection's failure (garbage bytes, a dropped client) ends
                                // that connection only.
                                tokio::spawn(async move {
                                    let _open = eddy_server::metrics::queries::ConnectionGuard::open();
                                    if let Err(error) = connection::serve(socket, handlers.as_ref(), &options).await {
                                        tracing::debug!(%error, "connection closed with an error");
                                    }
                                    drop(permit);
                                });
                            }
                            Err(_) => {
                                if let Ok(permit) = refusals.clone().try_acquire_owned() {
                                    tokio::spawn(async move {
                                        let message = "sorry, too many clients already".to_string();
                                        let _ = connection::refuse(socket, &options, "53300", message).await;
                                        drop(permit);
                                    });
                                }
                            }
                        }
                    }
                    Err(error) => {
                        let pause = backoff.failed(&error);
                        tokio::select! {
                            () = tokio::time::sleep(pause) => {}
                            () = &mut shutdown => break,
                        }
                    }
                }
            }
            () = &mut shutdown => break,
        }
    }
    tracing::info!("shutting down: committing the current epoch");
    // Every acknowledged statement is already durable: a last commit that cannot finish (a
    // dead disk) must not keep the process from stopping.
    match tokio::time::timeout(SHUTDOWN_COMMIT_TIMEOUT, engine.shutdown()).await {
        Ok(Ok(())) => tracing::info!("stopped"),
        Ok(Err(error)) => tracing::warn!(%error, "stopped; the last epoch was not committed"),
        Err(_) => tracing::warn!(
            seconds = SHUTDOWN_COMMIT_TIMEOUT.as_secs(),
            "stopped without the last epoch's commit, which did not finish in time"
        ),
    }
    // Not waiting for the store's background threads either: what they write is rebuilt from
    // the journal at the next start.
    std::process::exit(0)
}

/// How long the last commit may take at shutdown.
const SHUTDOWN_COMMIT_TIMEOUT: Duration = Duration::from_secs(3);

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

#[cfg(test)]
mod tests {
    use super::store_write_buffer_bytes;
    use eddy_storage::fjall_store::MIN_WRITE_BUFFER_BYTES;

    /// 0 turns the bound off, too small a bound is raised to the least that works, and a huge
    /// one saturates rather than wrapping to a small number.
    #[test]
    fn the_write_buffer_bound_is_off_raised_or_saturated() {
        assert_eq!(store_write_buffer_bytes(0), 0);
        assert_eq!(store_write_buffer_bytes(1), MIN_WRITE_BUFFER_BYTES);
        assert_eq!(store_write_buffer_bytes(1024), 1 << 30);
        assert_eq!(store_write_buffer_bytes(u64::MAX), u64::MAX);
        assert_eq!(store_write_buffer_bytes(1 << 44), u64::MAX);
    }
}
