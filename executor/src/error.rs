//! The executor's error type.

use datafusion::error::DataFusionError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ExecError {
    #[error(transparent)]
    Storage(#[from] eddy_storage::StorageError),
    #[error(transparent)]
    DataFusion(#[from] DataFusionError),
    #[error(transparent)]
    Arrow(#[from] datafusion::arrow::error::ArrowError),
    #[error(transparent)]
    Plan(#[from] eddy_planner::PlanError),
    /// A user object that does not exist (42P01).
    #[error("{0}")]
    UndefinedObject(String),
    /// A name already taken (42P07).
    #[error("{0}")]
    DuplicateObject(String),
    /// An object others depend on (2BP01).
    #[error("{0}")]
    DependentObjects(String),
    /// A row that breaks a constraint (23xxx).
    #[error("{0}")]
    Constraint(String),
    /// A statement that is not allowed on this object (0A000 / 42809).
    #[error("{0}")]
    NotSupported(String),
    /// An option a statement does not know (22023, as Postgres' "unrecognized parameter").
    #[error("{0}")]
    InvalidOption(String),
    /// A column a statement names that the relation does not have (42703).
    #[error("{0}")]
    UndefinedColumn(String),
    /// A definition that cannot work as written, e.g. an upsert sink with no key (42P16).
    #[error("{0}")]
    InvalidDefinition(String),
    /// Something outside Eddy that a statement names and that does not exist, e.g. a Kafka
    /// topic (42704).
    #[error("{0}")]
    UndefinedExternal(String),
    /// A system outside Eddy that could not be reached, e.g. a Kafka broker (08001).
    #[error("{0}")]
    Unreachable(String),
    /// More memory than a limit allows (53200), e.g. a view's state past its budget.
    #[error("{0}")]
    OutOfMemory(String),
    /// History that is no longer kept, e.g. `SUBSCRIBE ... AS OF` an epoch too old (72000).
    #[error("{0}")]
    SnapshotTooOld(String),
    /// A bug met while running the statement (XX000): its epoch was abandoned.
    #[error("internal error: {0}")]
    Internal(String),
    /// The engine has stopped (shutting down).
    #[error("the streaming engine dropped the statement (stopping, or an internal error: see the server log)")]
    Stopped,
}

pub type Result<T, E = ExecError> = std::result::Result<T, E>;
