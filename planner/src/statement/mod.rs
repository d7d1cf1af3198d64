//! Splitting SQL text into statements and parsing Eddy's extensions.
//!
//! Eddy's clauses (`WATERMARK FOR` inside a column list, a trailing `APPEND ONLY` or
//! `EMIT ON WINDOW CLOSE`) are cut out at the token level, so everything else is parsed by
//! sqlparser exactly as Postgres would read it.

use datafusion::sql::sqlparser::ast::{ObjectType, Query, Statement};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use crate::flink_windows::rewrite_flink_windows;
use crate::parse_budget::{BudgetedDialect, ParseBudget};
use crate::temporal_joins::rewrite_temporal_joins;
use crate::{PlanError, Result};

mod create_sink;
mod create_source;
mod subscribe;
#[cfg(test)]
mod tests;
mod tokens;

pub use create_sink::SinkDef;
use create_sink::*;
use create_source::*;
pub use subscribe::{SubscribeOutput, SubscribeStatement};
pub(crate) use tokens::matching_paren;
use tokens::*;

/// `WATERMARK FOR column AS column - INTERVAL ...`.
#[derive(Debug, Clone, PartialEq)]
pub struct WatermarkDef {
    pub column: String,
    /// The interval subtracted from the column, as SQL text (`None`: no delay).
    pub delay_sql: Option<String>,
}

/// One statement, as Eddy dispatches it.
#[derive(Debug, Clone)]
pub enum EddyStatement {
    CreateTable {
        /// The `CREATE TABLE` with Eddy's clauses removed.
        statement: Box<Statement>,
        watermark: Option<WatermarkDef>,
        append_only: bool,
        name: String,
        if_not_exists: bool,
    },
    /// `CREATE SOURCE` (and `CREATE TABLE ... WITH (connector = ...)`): a table fed by a
    /// connector instead of INSERTs.
    CreateSource(Box<SourceDef>),
    CreateMaterializedView {
        name: String,
        if_not_exists: bool,
        query: Box<Query>,
        emit_on_window_close: bool,
    },
    /// `CREATE [OR REPLACE] VIEW name [(columns)] AS query`: a plain view, expanded where it
    /// is read.
    CreateView {
        name: String,
        or_replace: bool,
        columns: Vec<String>,
        query: Box<Query>,
    },
    /// `CREATE INDEX name ON relation (columns) [INCLUDE (columns)]`.
    CreateIndex(crate::index_statement::CreateIndexStatement),
    /// `ALTER TABLE | VIEW | MATERIALIZED VIEW | SOURCE name RENAME TO new_name`.
    Rename(crate::alter_statement::RenameStatement),
    /// `ALTER ... name OWNER TO role`.
    AlterOwner(crate::alter_statement::OwnerStatement),
    /// `ALTER TABLE name ADD [CONSTRAINT c] PRIMARY KEY (columns)`.
    AddPrimaryKey(crate::alter_statement::PrimaryKeyStatement),
    Drop {
        object_type: ObjectType,
        names: Vec<String>,
        if_exists: bool,
        cascade: bool,
    },
    /// `DROP SOURCE [IF EXISTS] a, b`.
    DropSource {
        names: Vec<String>,
        if_exists: bool,
    },
    /// `CREATE SINK name FROM relation WITH (...) FORMAT ... ENCODE ...`.
    CreateSink(Box<SinkDef>),
    /// `DROP SINK [IF EXISTS] a, b`.
    DropSink {
        names: Vec<String>,
        if_exists: bool,
    },
    /// `EXPLAIN CREATE MATERIALIZED VIEW ...` or `EXPLAIN CREATE SINK ...`: the streaming
    /// plan, nothing created.
    ExplainView(Box<EddyStatement>),
    Flush,
    /// `REFRESH MATERIALIZED VIEW name`: a view is always current; this waits for it as FLUSH.
    RefreshMaterializedView {
        name: String,
    },
    Recover,
    ShowTables,
    ShowMaterializedViews,
    ShowSources,
    ShowSinks,
    /// `SUBSCRIBE ...`, bare, in `COPY (...) TO STDOUT` or in `DECLARE ... CURSOR FOR`.
    Subscribe {
        subscribe: Box<SubscribeStatement>,
        output: SubscribeOutput,
    },
    /// `FETCH` or `MOVE` on a cursor.
    Fetch(crate::cursor_statement::FetchStatement),
    /// Anything else: handed to DataFusion (queries, DML, SET, SHOW, EXPLAIN, ...).
    Sql(Box<Statement>),
}

/// A column a connector adds from message metadata: `INCLUDE partition AS p`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeKind {
    Key,
    Partition,
    Offset,
    Timestamp,
    /// `name TIMESTAMPTZ AS PROCTIME()`: the wall-clock time the row entered Eddy.
    ProcessingTime,
}

impl IncludeKind {
    pub fn name(self) -> &'static str {
        match self {
            IncludeKind::Key => "key",
            IncludeKind::Partition => "partition",
            IncludeKind::Offset => "offset",
            IncludeKind::Timestamp => "timestamp",
            IncludeKind::ProcessingTime => "proctime",
        }
    }
}

/// `CREATE SOURCE name (columns) [INCLUDE ...] WITH (...) FORMAT ... ENCODE ...`.
#[derive(Debug, Clone)]
pub struct SourceDef {
    pub name: String,
    pub if_not_exists: bool,
    /// The column list as a `CREATE TABLE` (Eddy's clauses removed).
    pub table: Box<Statement>,
    pub watermark: Option<WatermarkDef>,
    /// Metadata columns, in order, with their names.
    pub includes: Vec<(IncludeKind, String)>,
    /// `WITH (...)`, keys lower-cased.
    pub options: std::collections::BTreeMap<String, String>,
    /// `FORMAT x` (upper-cased; PLAIN when absent).
    pub format: String,
    /// `ENCODE y` (upper-cased; JSON when absent).
    pub encode: String,
    /// Options after `ENCODE y (...)`.
    pub encode_options: std::collections::BTreeMap<String, String>,
    /// Whether rows are also stored and queryable (`CREATE TABLE ... WITH (connector=...)`).
    pub stored: bool,
}

/// A statement together with its own SQL text (kept in the catalog).
#[derive(Debug, Clone)]
pub struct ParsedStatement {
    pub sql: String,
    pub statement: EddyStatement,
}

/// Splits `sql` at top-level semicolons and parses each statement. Empty statements are
/// skipped. For SQL Eddy wrote or accepted before (its catalog): no step budget.
pub fn parse_statements(sql: &str) -> Result<Vec<ParsedStatement>> {
    let dialect = PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql).tokenize()?;
    parse_tokens(tokens, None)
}

/// [`parse_statements`] for text from a client: too long or too deeply nested text is refused
/// before it is parsed, and each statement's parse has a budget of steps.
pub fn parse_statements_within(
    sql: &str,
    limits: &crate::limits::StatementLimits,
) -> Result<Vec<ParsedStatement>> {
    parse_statements_by(sql, limits, None)
}

/// [`parse_statements_within`], stopped with 57014 if it is still parsing at `deadline`.
pub fn parse_statements_by(
    sql: &str,
    limits: &crate::limits::StatementLimits,
    deadline: Option<std::time::Instant>,
) -> Result<Vec<ParsedStatement>> {
    crate::limits::check_size(sql, limits)?;
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize()?;
    crate::limits::check_depth(&tokens, limits)?;
    parse_tokens(tokens, Some(deadline))
}

/// `bounded`: `Some(deadline)` for a client's statements (a step budget and the deadline),
/// `None` for Eddy's own.
fn parse_tokens(
    tokens: Vec<Token>,
    bounded: Option<Option<std::time::Instant>>,
) -> Result<Vec<ParsedStatement>> {
    let mut statements = Vec::new();
    for chunk in split_statements(tokens) {
        if chunk.iter().all(is_trivia) {
            continue;
        }
        let text = render(&chunk).trim().to_string();
        let budget = match bounded {
            Some(deadline) => {
                let significant = chunk.iter().filter(|t| !is_trivia(t)).count();
                ParseBudget::for_tokens(significant, deadline)
            }
            None => ParseBudget::unlimited(),
        };
        let chunk = crate::between_symmetric::mark_symmetric(rewrite_flink_windows(chunk));
        let mut statement = parse_one(rewrite_temporal_joins(chunk)?, &budget)?;
        normalize_literals(&mut statement);
        statements.push(ParsedStatement {
            statement,
            sql: text,
        });
    }
    Ok(statements)
}

/// Postgres' literal forms DataFusion reads otherwise ([`crate::pg_literals`]).
fn normalize_literals(statement: &mut EddyStatement) {
    match statement {
        EddyStatement::Sql(statement) | EddyStatement::CreateTable { statement, .. } => {
            crate::pg_literals::normalize_literals(statement)
        }
        EddyStatement::CreateMaterializedView { query, .. }
        | EddyStatement::CreateView { query, .. } => {
            crate::pg_literals::normalize_query_literals(query)
        }
        EddyStatement::ExplainView(inner) => normalize_literals(inner),
        _ => {}
    }
}

fn parse_one(mut tokens: Vec<Token>, budget: &ParseBudget) -> Result<EddyStatement> {
    let w = words(&tokens);
    let only = |expected: &[&str]| w.len() == expected.len() && starts_with(&w, expected);
    if only(&["FLUSH"]) {
        return Ok(EddyStatement::Flush);
    }
    if only(&["RECOVER"]) {
        return Ok(EddyStatement::Recover);
    }
    if starts_with(&w, &["REFRESH", "MATERIALIZED", "VIEW"]) {
        return parse_refresh(tokens, &w, budget);
    }
    if only(&["SHOW", "TABLES"]) {
        return Ok(EddyStatement::ShowTables);
    }
    if only(&["SHOW", "MATERIALIZED", "VIEWS"]) {
        return Ok(EddyStatement::ShowMaterializedViews);
    }
    if only(&["SHOW", "SOURCES"]) {
        return Ok(EddyStatement::ShowSources);
    }
    if only(&["SHOW", "SINKS"]) {
        return Ok(EddyStatement::ShowSinks);
    }
    if starts_with(&w, &["SUBSCRIBE"]) {
        return Ok(EddyStatement::Subscribe {
            subscribe: Box::new(subscribe::parse_subscribe(&tokens)?),
            output: SubscribeOutput::Rows,
        });
    }
    if let Some(wrapped) = subscribe::parse_wrapped(&tokens, budget)? {
        return Ok(wrapped);
    }
    if starts_with(&w, &["FETCH"]) || starts_with(&w, &["MOVE"]) {
        let significant: Vec<Token> = tokens.into_iter().filter(|t| !is_trivia(t)).collect();
        return Ok(EddyStatement::Fetch(crate::cursor_statement::parse_fetch(
            &significant,
        )?));
    }
    if starts_with(&w, &["EXPLAIN", "CREATE", "MATERIALIZED", "VIEW"])
        || starts_with(&w, &["EXPLAIN", "CREATE", "SINK"])
    {
        let view = parse_one(tokens.split_off(w[1].0), budget)?;
        return Ok(EddyStatement::ExplainView(Box::new(view)));
    }
    if starts_with(&w, &["ALTER"]) {
        let significant: Vec<Token> = tokens.iter().filter(|t| !is_trivia(t)).cloned().collect();
        if let Some(rename) = crate::alter_statement::parse_rename(&significant)? {
            return Ok(EddyStatement::Rename(rename));
        }
        if let Some(owner) = crate::alter_statement::parse_owner(&significant)? {
            return Ok(EddyStatement::AlterOwner(owner));
        }
        if let Some(key) = crate::alter_statement::parse_add_primary_key(&significant)? {
            return Ok(EddyStatement::AddPrimaryKey(key));
        }
    }
    if starts_with(&w, &["DROP", "SOURCE"]) || starts_with(&w, &["DROP", "SINK"]) {
        let if_exists = starts_with(&w[2..], &["IF", "EXISTS"]);
        let rest = &w[if if_exists { 4 } else { 2 }..];
        let sink = w[1].1 == "SINK";
        let what = if sink { "DROP SINK" } else { "DROP SOURCE" };
        let names = name_list(&tokens, rest, what)?;
        return Ok(match sink {
            true => EddyStatement::DropSink { names, if_exists },
            false => EddyStatement::DropSource { names, if_exists },
        });
    }
    if starts_with(&w, &["CREATE", "SINK"]) {
        return parse_create_sink(&tokens);
    }
    if starts_with(&w, &["CREATE", "SOURCE"]) {
        return parse_create_source(tokens, &w, false, budget);
    }
    if starts_with(&w, &["CREATE", "TABLE"]) && has_top_level_with_connector(&tokens) {
        return parse_create_source(tokens, &w, true, budget);
    }
    if starts_with(&w, &["CREATE", "TABLE"]) {
        let append_only = ends_with(&w, &["APPEND", "ONLY"]);
        if append_only {
            tokens.truncate(w[w.len() - 2].0);
        }
        let watermark = take_watermark(&mut tokens)?;
        if !crate::proctime_column::take_proctime_columns(&mut tokens)?.is_empty() {
            return Err(PlanError::NotSupported(
                "AS PROCTIME() on a table without a connector: its rows arrive by INSERT; select PROCTIME() in the view that reads it".into(),
            ));
        }
        let statement = parse_sql(tokens, budget)?;
        let Statement::CreateTable(create) = &statement else {
            return Err(PlanError::Syntax("expected CREATE TABLE".into()));
        };
        return Ok(EddyStatement::CreateTable {
            name: crate::names::resolve_object_name(&create.name)?,
            if_not_exists: create.if_not_exists,
            statement: Box::new(statement),
            watermark,
            append_only,
        });
    }
    if starts_with(&w, &["CREATE", "MATERIALIZED", "VIEW"]) {
        let mut w = w;
        // `WITH [NO] DATA` (pg_dump writes WITH NO DATA): a materialized view is filled as it
        // is created and kept current, so either means the same here.
        for tail in [&["WITH", "NO", "DATA"][..], &["WITH", "DATA"]] {
            if ends_with(&w, tail) {
                tokens.truncate(w[w.len() - tail.len()].0);
                w.truncate(w.len() - tail.len());
                break;
            }
        }
        let emit_on_window_close = ends_with(&w, &["EMIT", "ON", "WINDOW", "CLOSE"]);
        if emit_on_window_close {
            tokens.truncate(w[w.len() - 4].0);
        }
        return match parse_sql(tokens, budget)? {
            Statement::CreateView(view) if view.materialized => {
                Ok(EddyStatement::CreateMaterializedView {
                    name: crate::names::resolve_object_name(&view.name)?,
                    if_not_exists: view.if_not_exists,
                    query: view.query,
                    emit_on_window_close,
                })
            }
            _ => Err(PlanError::Syntax(
                "expected CREATE MATERIALIZED VIEW".into(),
            )),
        };
    }
    if w.iter().any(|(_, word)| word == "EMIT") && ends_with(&w, &["CLOSE"]) {
        return Err(PlanError::Syntax(
            "EMIT ON WINDOW CLOSE belongs at the end of CREATE MATERIALIZED VIEW".into(),
        ));
    }
    match parse_sql(tokens, budget)? {
        Statement::CreateView(view) if !view.materialized => {
            if view.temporary {
                return Err(PlanError::NotSupported(
                    "temporary views (a view is visible to every session)".into(),
                ));
            }
            Ok(EddyStatement::CreateView {
                name: crate::names::resolve_object_name(&view.name)?,
                or_replace: view.or_replace,
                columns: view
                    .columns
                    .iter()
                    .map(|c| crate::names::fold(&c.name))
                    .collect(),
                query: view.query,
            })
        }
        Statement::CreateIndex(create) => Ok(EddyStatement::CreateIndex(
            crate::index_statement::create_index(&create)?,
        )),
        Statement::Drop {
            object_type,
            if_exists,
            names,
            cascade,
            ..
        } => Ok(EddyStatement::Drop {
            object_type,
            if_exists,
            cascade,
            names: names
                .iter()
                .map(crate::names::resolve_object_name)
                .collect::<Result<_>>()?,
        }),
        other => Ok(EddyStatement::Sql(Box::new(other))),
    }
}

/// `REFRESH MATERIALIZED VIEW [CONCURRENTLY] name [WITH DATA]` (dbt refreshes a view model's
/// materialized view on every run).
fn parse_refresh(
    tokens: Vec<Token>,
    w: &[(usize, String)],
    budget: &ParseBudget,
) -> Result<EddyStatement> {
    let mut at = 3;
    if w.get(at).is_some_and(|(_, word)| word == "CONCURRENTLY") {
        at += 1;
    }
    let Some(&(start, _)) = w.get(at) else {
        return Err(PlanError::Syntax(
            "REFRESH MATERIALIZED VIEW needs a name".into(),
        ));
    };
    let mut rest: Vec<Token> = tokens[start..]
        .iter()
        .filter(|t| !is_trivia(t))
        .cloned()
        .collect();
    let tail: Vec<String> = rest
        .iter()
        .rev()
        .take(3)
        .map(|t| t.to_string().to_uppercase())
        .collect();
    if tail.len() == 3 && tail[2] == "WITH" && tail[1] == "NO" && tail[0] == "DATA" {
        return Err(PlanError::NotSupported(
            "REFRESH MATERIALIZED VIEW ... WITH NO DATA: a materialized view is always kept up to date".into(),
        ));
    }
    if tail.len() >= 2 && tail[1] == "WITH" && tail[0] == "DATA" {
        rest.truncate(rest.len() - 2);
    }
    let dialect = BudgetedDialect::new(*budget);
    let mut parser = Parser::new(&dialect).with_tokens(rest);
    let name = parser.parse_object_name(false);
    if let Some(reason) = dialect.exhausted() {
        return Err(crate::parse_budget::refusal(reason));
    }
    let name = name?;
    let next = parser.peek_token();
    if next.token != Token::EOF {
        return Err(PlanError::Syntax(format!(
            "unexpected {} after the name in REFRESH MATERIALIZED VIEW",
            next.token
        )));
    }
    Ok(EddyStatement::RefreshMaterializedView {
        name: crate::names::resolve_object_name(&name)?,
    })
}

fn parse_sql(tokens: Vec<Token>, budget: &ParseBudget) -> Result<Statement> {
    let dialect = BudgetedDialect::new(*budget);
    let mut parser = Parser::new(&dialect)
        .with_recursion_limit(crate::limits::PARSER_RECURSION_LIMIT)
        .with_tokens(tokens);
    let statement = parser.parse_statement();
    // A spent budget may surface as any error (or none) after sqlparser's retries: it wins.
    if let Some(reason) = dialect.exhausted() {
        return Err(crate::parse_budget::refusal(reason));
    }
    let statement = statement?;
    // Anything left over (other than trivia) is a syntax error, as Postgres would say.
    let next = parser.peek_token();
    if next.token != Token::EOF {
        return Err(PlanError::Syntax(format!(
            "unexpected {} after the end of the statement",
            next.token
        )));
    }
    Ok(statement)
}
