//! Errors as the client sees them: a SQLSTATE and a message.

use datafusion::arrow::error::ArrowError;
use datafusion::common::SchemaError;
use datafusion::error::DataFusionError;
use eddy_executor::ExecError;
use eddy_planner::{CodedError, PlanError};
use pgwire::error::{ErrorInfo, PgWireError};

#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ServerError {
    pub code: &'static str,
    pub message: String,
}

pub type Result<T, E = ServerError> = std::result::Result<T, E>;

impl ServerError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn not_supported(message: impl Into<String>) -> Self {
        Self::new("0A000", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new("XX000", message)
    }

    pub fn into_error_info(self) -> ErrorInfo {
        ErrorInfo::new("ERROR".to_owned(), self.code.to_owned(), self.message)
    }

    pub fn into_pgwire(self) -> PgWireError {
        PgWireError::UserError(Box::new(self.into_error_info()))
    }
}

impl From<PlanError> for ServerError {
    fn from(e: PlanError) -> Self {
        let code = plan_error_code(&e).unwrap_or("XX000");
        match e {
            PlanError::DataFusion(e) => e.into(),
            PlanError::Syntax(m)
            | PlanError::NotSupported(m)
            | PlanError::Invalid(m)
            | PlanError::TooComplex(m)
            | PlanError::LimitExceeded(m)
            | PlanError::Canceled(m)
            | PlanError::OutOfRange(m)
            | PlanError::InvalidParameter(m)
            | PlanError::UndefinedSchema(m) => Self::new(code, m),
        }
    }
}

/// The SQLSTATE of a planner error of Eddy's own (`None`: DataFusion's, mapped as such).
fn plan_error_code(e: &PlanError) -> Option<&'static str> {
    Some(match e {
        PlanError::Syntax(_) => "42601",
        PlanError::NotSupported(_) => "0A000",
        PlanError::Invalid(_) => "42P17",
        PlanError::TooComplex(_) => "54001",
        PlanError::LimitExceeded(_) => "54000",
        PlanError::Canceled(_) => "57014",
        PlanError::OutOfRange(_) => "22008",
        PlanError::UndefinedSchema(_) => "3F000",
        PlanError::InvalidParameter(_) => "22023",
        PlanError::DataFusion(_) => return None,
    })
}

impl From<ExecError> for ServerError {
    fn from(e: ExecError) -> Self {
        match e {
            ExecError::UndefinedObject(m) => Self::new("42P01", m),
            ExecError::DuplicateObject(m) => Self::new("42P07", m),
            ExecError::DependentObjects(m) => Self::new("2BP01", m),
            ExecError::Constraint(m) if m.contains("null value") => Self::new("23502", m),
            ExecError::Constraint(m) => Self::new("23505", m),
            ExecError::NotSupported(m) => Self::new("0A000", m),
            ExecError::OutOfMemory(m) => Self::new("53200", m),
            ExecError::SnapshotTooOld(m) => Self::new("72000", m),
            ExecError::Internal(_) => Self::new("XX000", e.to_string()),
            ExecError::InvalidOption(m) => Self::new("22023", m),
            ExecError::UndefinedColumn(m) => Self::new("42703", m),
            ExecError::InvalidDefinition(m) => Self::new("42P16", m),
            ExecError::UndefinedExternal(m) => Self::new("42704", m),
            ExecError::Unreachable(m) => Self::new("08001", m),
            ExecError::Stopped => Self::new("57P01", e.to_string()),
            ExecError::Storage(e) => storage_error(&e),
            ExecError::DataFusion(e) => e.into(),
            ExecError::Arrow(e) => arrow_error(&e),
            ExecError::Plan(e) => e.into(),
        }
    }
}

impl From<PgWireError> for ServerError {
    fn from(e: PgWireError) -> Self {
        match e {
            PgWireError::UserError(info) => Self::new(
                sqlstate(&info.code).unwrap_or("XX000"),
                info.message.clone(),
            ),
            other => Self::internal(other.to_string()),
        }
    }
}

/// What reading view `name` answers once it failed.
pub fn view_failed(name: &str, failure: &eddy_storage::ViewFailure) -> ServerError {
    let code = [
        "53200", "22012", "22003", "22P02", "0A000", "23000", "22000", "22008", "54000", "22023",
        "22007", "2201F", "2201B", "22021", "23502", "23505", "42883", "42804", "55000",
    ]
    .into_iter()
    .find(|known| *known == failure.sqlstate)
    .unwrap_or("XX000");
    ServerError::new(
        code,
        format!(
            "materialized view \"{name}\" failed after epoch {} and is no longer maintained: {}. DROP MATERIALIZED VIEW {name} and create it again",
            failure.epoch, failure.message
        ),
    )
}

impl From<ServerError> for DataFusionError {
    /// With its SQLSTATE, which a view failing on it keeps too (the executor reads it).
    fn from(e: ServerError) -> Self {
        DataFusionError::External(Box::new(CodedError {
            code: e.code,
            message: e.message,
        }))
    }
}

/// The SQLSTATE constant matching a code another library reported, if Eddy uses it.
fn sqlstate(code: &str) -> Option<&'static str> {
    [
        "22P02", "22003", "22023", "42601", "0A000", "28P01", "28000",
    ]
    .into_iter()
    .find(|known| *known == code)
}

impl From<eddy_storage::StorageError> for ServerError {
    fn from(e: eddy_storage::StorageError) -> Self {
        storage_error(&e)
    }
}

/// A storage error as Postgres classes a file access error (`errcode_for_file_access`).
fn storage_error(e: &eddy_storage::StorageError) -> ServerError {
    use eddy_storage::FaultKind;
    let code = match e.fault().map(|fault| fault.kind) {
        Some(FaultKind::DiskFull) => "53100",
        Some(FaultKind::Permission) => "42501",
        Some(FaultKind::TooManyFiles) => "53000",
        Some(FaultKind::OutOfMemory) => "53200",
        Some(FaultKind::Io) => "58030",
        None => match e {
            eddy_storage::StorageError::Read(_) | eddy_storage::StorageError::Io(_) => "58030",
            eddy_storage::StorageError::KeyTooLong { .. } => "54000",
            _ => "XX000",
        },
    };
    ServerError::new(code, e.to_string())
}

fn arrow_error(e: &ArrowError) -> ServerError {
    if let Some((code, message)) = crate::data_errors::classify(&e.to_string()) {
        return ServerError::new(code, message);
    }
    let code = match e {
        ArrowError::DivideByZero => "22012",
        ArrowError::CastError(_) | ArrowError::ParseError(_) => "22P02",
        ArrowError::ComputeError(m) if m.contains("overflow") => "22003",
        ArrowError::ArithmeticOverflow(_) => "22003",
        ArrowError::InvalidArgumentError(m) if m.contains("non-nullable") => "23502",
        // A value that does not fit a NUMERIC's precision (Postgres: numeric field overflow).
        ArrowError::InvalidArgumentError(m) if m.contains("too large to store in a Decimal") => {
            "22003"
        }
        ArrowError::NotYetImplemented(_) => "0A000",
        _ => "XX000",
    };
    ServerError::new(code, e.to_string())
}

impl From<DataFusionError> for ServerError {
    fn from(e: DataFusionError) -> Self {
        let message = e.strip_backtrace();
        if let Some((code, message)) = crate::data_errors::classify(&message) {
            return ServerError::new(code, message);
        }
        // current_setting() of a name that is not a setting, as Postgres words it.
        if let Some(at) = message.find("unrecognized configuration parameter") {
            return ServerError::new("42704", &message[at..]);
        }
        let code = match e.find_root() {
            DataFusionError::External(inner) if inner.is::<ValueTooLarge>() => {
                return ServerError::new("54000", inner.to_string());
            }
            DataFusionError::External(inner) if inner.is::<eddy_storage::StorageError>() => {
                if let Some(error) = inner.downcast_ref::<eddy_storage::StorageError>() {
                    return storage_error(error);
                }
                "XX000"
            }
            // A planner's own error raised inside DataFusion (a window table function's limit).
            DataFusionError::External(inner) if inner.is::<PlanError>() => {
                if let Some(error) = inner.downcast_ref::<PlanError>() {
                    if let Some(code) = plan_error_code(error) {
                        return ServerError::new(code, error.to_string());
                    }
                }
                "XX000"
            }
            DataFusionError::External(inner) if inner.is::<CodedError>() => {
                if let Some(error) = inner.downcast_ref::<CodedError>() {
                    return ServerError::new(error.code, error.message.clone());
                }
                "XX000"
            }
            DataFusionError::External(inner) if inner.is::<ServerError>() => {
                if let Some(error) = inner.downcast_ref::<ServerError>() {
                    return ServerError::new(error.code, error.message.clone());
                }
                "XX000"
            }
            DataFusionError::SQL(_, _) => "42601",
            DataFusionError::SchemaError(schema, _) => match schema.as_ref() {
                SchemaError::FieldNotFound { .. } => "42703",
                SchemaError::AmbiguousReference { .. } => "42702",
                SchemaError::DuplicateQualifiedField { .. }
                | SchemaError::DuplicateUnqualifiedField { .. } => "42701",
                #[allow(unreachable_patterns)]
                _ => "42000",
            },
            DataFusionError::Plan(m) if m.contains("not found") && m.contains("table") => "42P01",
            DataFusionError::Plan(m) if m.contains("unique expression names") => "42701",
            DataFusionError::Plan(m) if m.contains("operator does not exist") => "42883",
            DataFusionError::Plan(m) if m.contains("does not exist") => "42P01",
            DataFusionError::Plan(m) if m.contains("function") => "42883",
            DataFusionError::Plan(_) => "42000",
            DataFusionError::NotImplemented(_) => "0A000",
            DataFusionError::ResourcesExhausted(_) => "53200",
            DataFusionError::ArrowError(arrow, _) => return arrow_error(arrow),
            DataFusionError::Execution(m) if m.contains("Divide by zero") => "22012",
            DataFusionError::Execution(m) if m.contains("Cast error") => "22P02",
            DataFusionError::Execution(_) => "22000",
            // Operands no operator takes (`int BETWEEN timestamp AND ...`): DataFusion's
            // coercion reports it as an internal error; Postgres says the operator does not exist.
            DataFusionError::Internal(m) if m.starts_with("Failed to coerce types") => {
                return ServerError::new("42883", m.clone());
            }
            // An aggregate given arguments none of its signatures takes (`sum(text)`), found
            // when a view's plan is coerced: Postgres says the function does not exist.
            DataFusionError::Internal(m) if m.contains("failed to match any signature") => {
                return ServerError::new("42883", m.clone());
            }
            _ => "XX000",
        };
        ServerError::new(code, message)
    }
}

/// A value (a function call's whole output) over the limit: 54000.
#[derive(Debug)]
pub struct ValueTooLarge(pub String);

impl std::fmt::Display for ValueTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ValueTooLarge {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_no_operator_takes_are_42883_not_internal() {
        let error = ServerError::from(DataFusionError::Internal(
            "Failed to coerce types Int64 and Timestamp(ns) in BETWEEN expression".into(),
        ));
        assert_eq!(error.code, "42883");
        assert!(!error.message.contains("bug"), "{}", error.message);
        let error = ServerError::from(DataFusionError::Context(
            "type_coercion".into(),
            Box::new(DataFusionError::Internal(
                "Function 'sum' failed to match any signature, errors: Error during planning: Function 'sum' requires Decimal, but received String".into(),
            )),
        ));
        assert_eq!(error.code, "42883");
    }
}
