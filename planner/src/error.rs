//! The planner's error type. The server maps each variant to a SQLSTATE.

use datafusion::error::DataFusionError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PlanError {
    /// The text is not valid SQL (42601).
    #[error("syntax error: {0}")]
    Syntax(String),
    /// Valid SQL that Eddy does not support (0A000).
    #[error("not supported: {0}")]
    NotSupported(String),
    /// A statement that is well-formed but wrong for these objects (42P17 / 22023 family).
    #[error("{0}")]
    Invalid(String),
    /// A statement too long or too deeply nested to handle (54001).
    #[error("{0}")]
    TooComplex(String),
    /// A statement that would build more than a limit allows, e.g. a row in too many windows
    /// (54000).
    #[error("{0}")]
    LimitExceeded(String),
    /// A date or time out of the range a timestamp holds (22008), e.g. a window's end.
    #[error("{0}")]
    OutOfRange(String),
    /// The statement's time ran out (57014), e.g. while it was parsed.
    #[error("{0}")]
    Canceled(String),
    /// An option with a value it does not take, or an option it does not know (22023).
    #[error("{0}")]
    InvalidParameter(String),
    /// A qualified name whose schema is not one of Eddy's (3F000).
    #[error("{0}")]
    UndefinedSchema(String),
    #[error(transparent)]
    DataFusion(#[from] DataFusionError),
}

pub type Result<T, E = PlanError> = std::result::Result<T, E>;

impl From<datafusion::sql::sqlparser::parser::ParserError> for PlanError {
    fn from(e: datafusion::sql::sqlparser::parser::ParserError) -> Self {
        match e {
            datafusion::sql::sqlparser::parser::ParserError::RecursionLimitExceeded => {
                PlanError::TooComplex(format!(
                    "statement is too complex: its expressions nest too deeply (the limit is {} levels)",
                    crate::limits::DEFAULT_MAX_DEPTH
                ))
            }
            e => PlanError::Syntax(e.to_string()),
        }
    }
}

impl From<datafusion::sql::sqlparser::tokenizer::TokenizerError> for PlanError {
    fn from(e: datafusion::sql::sqlparser::tokenizer::TokenizerError) -> Self {
        PlanError::Syntax(e.to_string())
    }
}

/// An error Eddy's own functions raise inside DataFusion, with the SQLSTATE the server gave it
/// (a bigint out of range is 22003): DataFusion carries it as an external error, and whoever
/// meets it (the server answering a query, the executor failing a view) reads its code back.
#[derive(Debug, Error)]
#[error("{message}")]
pub struct CodedError {
    pub code: &'static str,
    pub message: String,
}
