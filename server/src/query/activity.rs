//! `pg_stat_activity` (one row per connection: who, since when, its state and its current or
//! last query) and `pg_cancel_backend(pid)`, which cancels the statement a connection is
//! running (`57014`, as Postgres answers).
//!
//! A connection appears once it has run its first statement; it leaves when it closes (its
//! entry is dropped with the connection's session state). One server per process, so the
//! registry is process-wide.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Int32Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::{MemTable, Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::context::SessionContext;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::ExecutionPlan;
use futures::StreamExt;
use pgwire::api::ClientInfo;
use tokio::sync::Notify;

use crate::error::{Result, ServerError};

/// One connection as `pg_stat_activity` shows it.
struct Connection {
    user: String,
    database: String,
    application_name: String,
    client_addr: String,
    client_port: i32,
    backend_start: i64,
    state: &'static str,
    query: String,
    query_start: Option<i64>,
    state_change: i64,
    cancel: Arc<Notify>,
}

#[derive(Default)]
struct Registry(Mutex<BTreeMap<i32, Connection>>);

static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::default);

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or_default()
}

fn connections() -> std::sync::MutexGuard<'static, BTreeMap<i32, Connection>> {
    REGISTRY.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes its connection from the registry when the connection's session state is dropped.
struct Registered(i32);

impl Drop for Registered {
    fn drop(&mut self) {
        connections().remove(&self.0);
    }
}

/// Registers the connection (once) and returns its pid and cancel signal.
fn connection_entry<C: ClientInfo>(client: &C) -> (i32, Arc<Notify>) {
    let (pid, _) = client.pid_and_secret_key();
    let _guard = client
        .session_extensions()
        .get_or_insert_with(|| Registered(pid));
    let metadata = client.metadata();
    let get = |key: &str| metadata.get(key).cloned().unwrap_or_default();
    let mut all = connections();
    let connection = all.entry(pid).or_insert_with(|| Connection {
        user: get("user"),
        database: get("database"),
        application_name: get("application_name"),
        client_addr: client.socket_addr().ip().to_string(),
        client_port: i32::from(client.socket_addr().port()),
        backend_start: now_micros(),
        state: "idle",
        query: String::new(),
        query_start: None,
        state_change: now_micros(),
        cancel: Arc::new(Notify::new()),
    });
    (pid, connection.cancel.clone())
}

fn set_state(pid: i32, state: &'static str, query: Option<&str>) {
    if let Some(connection) = connections().get_mut(&pid) {
        let now = now_micros();
        connection.state = state;
        connection.state_change = now;
        if let Some(query) = query {
            connection.query = query.to_string();
            connection.query_start = Some(now);
        }
    }
}

/// Runs one statement as this connection's current query: `active` while it runs, `idle`
/// after, cancelled by `pg_cancel_backend`.
pub async fn track<C, F, T>(client: &C, sql: &str, statement: F) -> Result<T>
where
    C: ClientInfo,
    F: Future<Output = Result<T>>,
{
    let (pid, cancel) = connection_entry(client);
    set_state(pid, "active", Some(sql));
    let result = tokio::select! {
        result = statement => result,
        () = cancel.notified() => Err(ServerError::new(
            "57014",
            "canceling statement due to user request",
        )),
    };
    set_state(pid, "idle", None);
    result
}

/// A query's rows still belong to its statement while they stream to the client: the
/// connection stays `active` until the last batch (or until the client drops the result), and
/// `pg_cancel_backend` ends the stream with `57014`.
pub fn track_stream<C: ClientInfo>(
    client: &C,
    rows: SendableRecordBatchStream,
) -> SendableRecordBatchStream {
    let (pid, cancel) = connection_entry(client);
    set_state(pid, "active", None);
    let schema = rows.schema();
    let state = (rows, cancel, IdleWhenDone(pid), false);
    let batches = futures::stream::unfold(state, |(mut rows, cancel, idle, done)| async move {
        if done {
            return None;
        }
        let next = tokio::select! {
            next = rows.next() => next,
            () = cancel.notified() => Some(Err(DataFusionError::External(Box::new(Cancelled)))),
        };
        let done = !matches!(next, Some(Ok(_)));
        next.map(|batch| (batch, (rows, cancel, idle, done)))
    });
    Box::pin(RecordBatchStreamAdapter::new(schema, batches))
}

/// Marks its connection idle when its result stream ends or is dropped.
struct IdleWhenDone(i32);

impl Drop for IdleWhenDone {
    fn drop(&mut self) {
        set_state(self.0, "idle", None);
    }
}

/// The error a cancelled result stream ends with (`57014`).
#[derive(Debug)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("canceling statement due to user request")
    }
}

impl std::error::Error for Cancelled {}

fn schema() -> SchemaRef {
    let time = || DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()));
    Arc::new(Schema::new(vec![
        Field::new("datid", DataType::Int32, true),
        Field::new("datname", DataType::Utf8, true),
        Field::new("pid", DataType::Int32, false),
        Field::new("leader_pid", DataType::Int32, true),
        Field::new("usesysid", DataType::Int32, true),
        Field::new("usename", DataType::Utf8, true),
        Field::new("application_name", DataType::Utf8, true),
        Field::new("client_addr", DataType::Utf8, true),
        Field::new("client_hostname", DataType::Utf8, true),
        Field::new("client_port", DataType::Int32, true),
        Field::new("backend_start", time(), true),
        Field::new("xact_start", time(), true),
        Field::new("query_start", time(), true),
        Field::new("state_change", time(), true),
        Field::new("wait_event_type", DataType::Utf8, true),
        Field::new("wait_event", DataType::Utf8, true),
        Field::new("state", DataType::Utf8, true),
        Field::new("backend_xid", DataType::Utf8, true),
        Field::new("backend_xmin", DataType::Utf8, true),
        Field::new("query", DataType::Utf8, true),
        Field::new("backend_type", DataType::Utf8, true),
        Field::new("waiting", DataType::Boolean, true),
    ]))
}

fn snapshot() -> DfResult<RecordBatch> {
    let all = connections();
    let rows: Vec<(&i32, &Connection)> = all.iter().collect();
    let n = rows.len();
    let text = |f: &dyn Fn(&Connection) -> Option<String>| -> ArrayRef {
        Arc::new(rows.iter().map(|(_, c)| f(c)).collect::<StringArray>())
    };
    let time = |f: &dyn Fn(&Connection) -> Option<i64>| -> ArrayRef {
        Arc::new(
            rows.iter()
                .map(|(_, c)| f(c))
                .collect::<TimestampMicrosecondArray>()
                .with_timezone("+00:00"),
        )
    };
    let nulls_int = || -> ArrayRef { Arc::new(Int32Array::new_null(n)) };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![Some(1); n])),
        text(&|c| Some(c.database.clone())),
        Arc::new(rows.iter().map(|(pid, _)| **pid).collect::<Int32Array>()),
        nulls_int(),
        Arc::new(Int32Array::from(vec![Some(10); n])),
        text(&|c| Some(c.user.clone())),
        text(&|c| Some(c.application_name.clone())),
        text(&|c| Some(c.client_addr.clone())),
        text(&|_| None),
        Arc::new(
            rows.iter()
                .map(|(_, c)| c.client_port)
                .collect::<Int32Array>(),
        ),
        time(&|c| Some(c.backend_start)),
        time(&|_| None),
        time(&|c| c.query_start),
        time(&|c| Some(c.state_change)),
        text(&|c| (c.state == "idle").then(|| "Client".to_string())),
        text(&|c| (c.state == "idle").then(|| "ClientRead".to_string())),
        text(&|c| Some(c.state.to_string())),
        text(&|_| None),
        text(&|_| None),
        text(&|c| Some(c.query.clone())),
        text(&|_| Some("client backend".to_string())),
        Arc::new(BooleanArray::from(vec![false; n])),
    ];
    Ok(RecordBatch::try_new(schema(), columns)?)
}

/// `pg_stat_activity`, computed at each scan.
#[derive(Debug)]
pub struct ActivityTable;

#[async_trait]
impl TableProvider for ActivityTable {
    fn schema(&self) -> SchemaRef {
        schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        MemTable::try_new(schema(), vec![vec![snapshot()?]])?
            .scan(state, projection, filters, limit)
            .await
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct CancelBackend {
    signature: Signature,
}

impl ScalarUDFImpl for CancelBackend {
    fn name(&self) -> &str {
        "pg_cancel_backend"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let pids = datafusion::arrow::compute::cast(&arrays[0], &DataType::Int32)?;
        let pids = pids
            .as_any()
            .downcast_ref::<Int32Array>()
            .ok_or_else(|| datafusion::error::DataFusionError::Internal("not int4".into()))?;
        let cancelled: BooleanArray = pids
            .iter()
            .map(|pid| {
                let pid = pid?;
                let all = connections();
                let connection = all.get(&pid)?;
                // A connection between statements has nothing to cancel (a stored signal
                // would cancel its next statement); Postgres answers true all the same.
                if connection.state == "active" {
                    connection.cancel.notify_one();
                }
                Some(true)
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(cancelled)))
    }
}

/// Registers `pg_cancel_backend`.
pub fn register(ctx: &SessionContext) {
    ctx.register_udf(ScalarUDF::new_from_impl(CancelBackend {
        signature: Signature::any(1, Volatility::Volatile),
    }));
}
