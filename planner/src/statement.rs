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
    /// `EXPLAIN CREATE MATERIALIZED VIEW ...`: the streaming plan, nothing created.
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

fn is_trivia(token: &Token) -> bool {
    matches!(token, Token::Whitespace(_) | Token::EOF)
}

fn render(tokens: &[Token]) -> String {
    tokens.iter().map(|t| t.to_string()).collect()
}

fn split_statements(tokens: Vec<Token>) -> Vec<Vec<Token>> {
    let mut out = vec![Vec::new()];
    let mut depth = 0i32;
    for token in tokens {
        match &token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::SemiColon if depth <= 0 => {
                out.push(Vec::new());
                continue;
            }
            _ => {}
        }
        if let Some(last) = out.last_mut() {
            last.push(token);
        }
    }
    out
}

/// Upper-cased keywords/identifiers of the significant tokens, with their positions.
fn words(tokens: &[Token]) -> Vec<(usize, String)> {
    tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| !is_trivia(t))
        .map(|(i, t)| match t {
            Token::Word(w) if w.quote_style.is_none() => (i, w.value.to_uppercase()),
            other => (i, other.to_string()),
        })
        .collect()
}

fn starts_with(words: &[(usize, String)], expected: &[&str]) -> bool {
    words.len() >= expected.len() && words.iter().zip(expected).all(|((_, w), e)| w == e)
}

fn ends_with(words: &[(usize, String)], expected: &[&str]) -> bool {
    words.len() >= expected.len()
        && words[words.len() - expected.len()..]
            .iter()
            .zip(expected)
            .all(|((_, w), e)| w == e)
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
    if starts_with(&w, &["FETCH"]) || starts_with(&w, &["MOVE"]) {
        let significant: Vec<Token> = tokens.into_iter().filter(|t| !is_trivia(t)).collect();
        return Ok(EddyStatement::Fetch(crate::cursor_statement::parse_fetch(
            &significant,
        )?));
    }
    if starts_with(&w, &["EXPLAIN", "CREATE", "MATERIALIZED", "VIEW"]) {
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
    if starts_with(&w, &["DROP", "SOURCE"]) {
        let if_exists = starts_with(&w[2..], &["IF", "EXISTS"]);
        let rest = &w[if if_exists { 4 } else { 2 }..];
        // `a, public.b`: names split at commas, each resolved from its dotted parts.
        let mut names = Vec::new();
        let mut parts = Vec::new();
        for (i, word) in rest
            .iter()
            .chain(std::iter::once(&(usize::MAX, ",".to_string())))
        {
            match (word.as_str(), tokens.get(*i)) {
                (",", _) => {
                    if !parts.is_empty() {
                        names.push(crate::names::resolve_parts(&std::mem::take(&mut parts))?);
                    }
                }
                (".", _) => {}
                (_, Some(Token::Word(word))) if word.quote_style.is_some() => {
                    parts.push(word.value.clone())
                }
                (_, Some(Token::Word(word))) => parts.push(word.value.to_lowercase()),
                (_, Some(other)) => parts.push(other.to_string()),
                (_, None) => {}
            }
        }
        if names.is_empty() {
            return Err(PlanError::Syntax("DROP SOURCE needs a name".into()));
        }
        return Ok(EddyStatement::DropSource { names, if_exists });
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

fn has_top_level_with_connector(tokens: &[Token]) -> bool {
    let mut depth = 0;
    let mut after_with = false;
    for token in tokens.iter().filter(|t| !is_trivia(t)) {
        match token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Word(w) if depth == 0 && w.value.eq_ignore_ascii_case("WITH") => {
                after_with = true
            }
            Token::Word(w)
                if depth == 1 && after_with && w.value.eq_ignore_ascii_case("connector") =>
            {
                return true
            }
            _ => {}
        }
    }
    false
}

/// Splits `CREATE SOURCE|TABLE name (columns) rest...` into the column list (parsed as a
/// `CREATE TABLE`) and Eddy's source clauses.
fn parse_create_source(
    tokens: Vec<Token>,
    w: &[(usize, String)],
    stored: bool,
    budget: &ParseBudget,
) -> Result<EddyStatement> {
    let kind = if stored {
        "CREATE TABLE"
    } else {
        "CREATE SOURCE"
    };
    let mut position = 2;
    let if_not_exists = w.len() > 4 && w[2].1 == "IF" && w[3].1 == "NOT" && w[4].1 == "EXISTS";
    if if_not_exists {
        position = 5;
    }
    let Some((name_at, _)) = w.get(position) else {
        return Err(PlanError::Syntax(format!("{kind} needs a name")));
    };
    // The column list: the parenthesised group right after the name (dotted names allowed).
    let mut open = None;
    for (i, token) in tokens.iter().enumerate().skip(*name_at) {
        match token {
            Token::LParen => {
                open = Some(i);
                break;
            }
            Token::Word(_) | Token::Period => continue,
            t if is_trivia(t) => continue,
            _ => break,
        }
    }
    let Some(open) = open else {
        return Err(PlanError::Syntax(format!(
            "{kind} needs a column list: {kind} name (col TYPE, ...)"
        )));
    };
    let close = matching_paren(&tokens, open)
        .ok_or_else(|| PlanError::Syntax("unbalanced parentheses in the column list".into()))?;
    let mut table_tokens: Vec<Token> =
        Tokenizer::new(&PostgreSqlDialect {}, "CREATE TABLE ").tokenize()?;
    table_tokens.retain(|t| *t != Token::EOF);
    table_tokens.extend_from_slice(&tokens[*name_at..=close]);
    let watermark = take_watermark(&mut table_tokens)?;
    let proctime_columns = crate::proctime_column::take_proctime_columns(&mut table_tokens)?;
    let table = parse_sql(table_tokens, budget)?;
    let Statement::CreateTable(create) = &table else {
        return Err(PlanError::Syntax(format!("expected {kind}")));
    };
    let name = crate::names::resolve_object_name(&create.name)?;

    let rest: Vec<Token> = tokens[close + 1..]
        .iter()
        .filter(|t| !is_trivia(t))
        .cloned()
        .collect();
    let mut def = SourceDef {
        name,
        if_not_exists,
        table: Box::new(table),
        watermark,
        includes: Vec::new(),
        options: Default::default(),
        format: "PLAIN".into(),
        encode: "JSON".into(),
        encode_options: Default::default(),
        stored,
    };
    let mut i = 0;
    let word = |t: Option<&Token>| match t {
        Some(Token::Word(w)) => Some(w.value.to_uppercase()),
        _ => None,
    };
    while i < rest.len() {
        match word(rest.get(i)).as_deref() {
            Some("INCLUDE") => {
                let kind = match word(rest.get(i + 1)).as_deref() {
                    Some("KEY") => IncludeKind::Key,
                    Some("PARTITION") => IncludeKind::Partition,
                    Some("OFFSET") => IncludeKind::Offset,
                    Some("TIMESTAMP") => IncludeKind::Timestamp,
                    _ => {
                        return Err(PlanError::Syntax(
                            "INCLUDE takes key, partition, offset or timestamp".into(),
                        ))
                    }
                };
                i += 2;
                let column = if word(rest.get(i)).as_deref() == Some("AS") {
                    let Some(Token::Word(alias)) = rest.get(i + 1) else {
                        return Err(PlanError::Syntax(
                            "INCLUDE ... AS needs a column name".into(),
                        ));
                    };
                    i += 2;
                    match alias.quote_style {
                        Some(_) => alias.value.clone(),
                        None => alias.value.to_lowercase(),
                    }
                } else {
                    format!("_rw_kafka_{}", kind.name())
                };
                def.includes.push((kind, column));
            }
            Some("WITH") => {
                let (options, next) = parse_options(&rest, i + 1)?;
                def.options = options;
                i = next;
            }
            Some("FORMAT") => {
                def.format = word(rest.get(i + 1))
                    .ok_or_else(|| PlanError::Syntax("FORMAT needs PLAIN or UPSERT".into()))?;
                if word(rest.get(i + 2)).as_deref() != Some("ENCODE") {
                    return Err(PlanError::Syntax("expected ENCODE after FORMAT".into()));
                }
                def.encode = word(rest.get(i + 3))
                    .ok_or_else(|| PlanError::Syntax("ENCODE needs JSON or CSV".into()))?;
                i += 4;
                if rest.get(i) == Some(&Token::LParen) {
                    let (options, next) = parse_options(&rest, i)?;
                    def.encode_options = options;
                    i = next;
                }
            }
            _ => {
                return Err(PlanError::Syntax(format!(
                "unexpected {} in {kind}: expected INCLUDE, WITH (...) or FORMAT ... ENCODE ...",
                rest[i]
            )))
            }
        }
    }
    if !def.options.contains_key("connector") {
        return Err(PlanError::Syntax(format!(
            "{kind} needs WITH (connector = '...')"
        )));
    }
    def.includes.extend(
        proctime_columns
            .into_iter()
            .map(|name| (IncludeKind::ProcessingTime, name)),
    );
    Ok(EddyStatement::CreateSource(Box::new(def)))
}

/// The index of the parenthesis closing the one at `open`.
pub(crate) fn matching_paren(tokens: &[Token], open: usize) -> Option<usize> {
    let mut depth = 0;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        match token {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `( key.with.dots = 'value', ... )` starting at `rest[start]` (the open paren); returns the
/// options and the index after the closing paren.
fn parse_options(
    rest: &[Token],
    start: usize,
) -> Result<(std::collections::BTreeMap<String, String>, usize)> {
    if rest.get(start) != Some(&Token::LParen) {
        return Err(PlanError::Syntax("expected ( after WITH".into()));
    }
    let mut options = std::collections::BTreeMap::new();
    let mut i = start + 1;
    loop {
        if rest.get(i) == Some(&Token::RParen) {
            return Ok((options, i + 1));
        }
        let mut key = String::new();
        while let Some(token) = rest.get(i) {
            match token {
                Token::Word(w) => key.push_str(&w.value.to_lowercase()),
                Token::Period => key.push('.'),
                Token::SingleQuotedString(s) => key.push_str(s),
                _ => break,
            }
            i += 1;
        }
        if key.is_empty() || rest.get(i) != Some(&Token::Eq) {
            return Err(PlanError::Syntax(
                "expected key = 'value' in the option list".into(),
            ));
        }
        let value = match rest.get(i + 1) {
            Some(Token::SingleQuotedString(s)) => s.clone(),
            Some(Token::Number(n, _)) => n.clone(),
            Some(Token::Word(w)) => w.value.clone(),
            other => {
                return Err(PlanError::Syntax(format!(
                    "expected a value for option {key}, found {}",
                    other.map_or("the end".to_string(), |t| t.to_string())
                )))
            }
        };
        options.insert(key, value);
        i += 2;
        match rest.get(i) {
            Some(Token::Comma) => i += 1,
            Some(Token::RParen) => return Ok((options, i + 1)),
            _ => {
                return Err(PlanError::Syntax(
                    "expected , or ) in the option list".into(),
                ))
            }
        }
    }
}

/// Removes `[,] WATERMARK FOR col AS expr` from a column list and returns it.
fn take_watermark(tokens: &mut Vec<Token>) -> Result<Option<WatermarkDef>> {
    let mut depth = 0;
    let mut start = None;
    for (i, token) in tokens.iter().enumerate() {
        match token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Word(w)
                if depth == 1
                    && w.quote_style.is_none()
                    && w.value.eq_ignore_ascii_case("WATERMARK") =>
            {
                start = Some(i);
                break;
            }
            _ => {}
        }
    }
    let Some(start) = start else {
        return Ok(None);
    };
    // The clause runs to the next comma at the column-list level or to its closing paren.
    let mut depth = 0;
    let mut end = tokens.len();
    for (i, token) in tokens.iter().enumerate().skip(start) {
        match token {
            Token::LParen => depth += 1,
            Token::RParen if depth == 0 => {
                end = i;
                break;
            }
            Token::RParen => depth -= 1,
            Token::Comma if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let clause: Vec<Token> = tokens[start..end].to_vec();
    // Remove the comma before the clause too (or the one after it, if it came first).
    let before = tokens[..start].iter().rposition(|t| !is_trivia(t));
    let (cut_from, cut_to) = match before {
        Some(i) if tokens[i] == Token::Comma => (i, end),
        _ if end < tokens.len() && tokens[end] == Token::Comma => (start, end + 1),
        _ => (start, end),
    };
    tokens.drain(cut_from..cut_to);

    let w = words(&clause);
    if !starts_with(&w, &["WATERMARK", "FOR"]) || w.len() < 5 || w[3].1 != "AS" {
        return Err(PlanError::Syntax(
            "expected WATERMARK FOR column AS column - INTERVAL '...'".into(),
        ));
    }
    let column = match &clause[w[2].0] {
        Token::Word(word) if word.quote_style.is_some() => word.value.clone(),
        Token::Word(word) => word.value.to_lowercase(),
        other => {
            return Err(PlanError::Syntax(format!(
                "expected a column name after WATERMARK FOR, found {other}"
            )))
        }
    };
    let expr_tokens = &w[4..];
    let expr_column = match &clause[expr_tokens[0].0] {
        Token::Word(word) if word.quote_style.is_some() => word.value.clone(),
        Token::Word(word) => word.value.to_lowercase(),
        _ => String::new(),
    };
    if expr_column != column {
        return Err(PlanError::Syntax(format!(
            "a watermark must be `{column}` or `{column} - INTERVAL '...'`"
        )));
    }
    if expr_tokens.len() == 1 {
        return Ok(Some(WatermarkDef {
            column,
            delay_sql: None,
        }));
    }
    // `column -` and nothing after it (the clause ends at a comma) is as wrong as `column +`.
    if expr_tokens[1].1 != "-" || expr_tokens.len() < 3 {
        return Err(PlanError::Syntax(format!(
            "a watermark must be `{column}` or `{column} - INTERVAL '...'`"
        )));
    }
    Ok(Some(WatermarkDef {
        column,
        delay_sql: Some(render(&clause[expr_tokens[2].0..]).trim().to_string()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermark_and_append_only_are_cut_out() {
        let parsed = parse_statements(
            "CREATE TABLE r (sensor INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) APPEND ONLY;",
        )
        .unwrap();
        assert_eq!(parsed.len(), 1);
        let EddyStatement::CreateTable {
            statement,
            watermark,
            append_only,
            name,
            ..
        } = &parsed[0].statement
        else {
            panic!("not a create table: {:?}", parsed[0]);
        };
        assert!(append_only);
        assert_eq!(name, "r");
        assert_eq!(
            watermark,
            &Some(WatermarkDef {
                column: "ts".into(),
                delay_sql: Some("INTERVAL '2' SECOND".into())
            })
        );
        assert_eq!(
            statement.to_string(),
            "CREATE TABLE r (sensor INT, ts TIMESTAMP)"
        );
    }

    #[test]
    fn a_watermark_minus_nothing_is_a_syntax_error() {
        // Found by the SQL fuzzer: `ts - ,` left no delay after the minus and panicked.
        for sql in [
            "CREATE TABLE r (ts TIMESTAMP, WATERMARK FOR ts AS ts - , x INT)",
            "CREATE TABLE r (ts TIMESTAMP, WATERMARK FOR ts AS ts -)",
        ] {
            match parse_statements(sql) {
                Err(PlanError::Syntax(message)) => {
                    assert!(message.contains("a watermark must be"), "{sql}: {message}")
                }
                other => panic!("{sql}: {other:?}"),
            }
        }
    }

    #[test]
    fn watermark_first_in_list() {
        let parsed =
            parse_statements("create table r (WATERMARK FOR ts AS ts, ts timestamp)").unwrap();
        let EddyStatement::CreateTable { statement, .. } = &parsed[0].statement else {
            panic!()
        };
        assert_eq!(statement.to_string(), "CREATE TABLE r (ts TIMESTAMP)");
    }

    #[test]
    fn splits_and_recognises_eddy_statements() {
        let parsed = parse_statements(
            "FLUSH; ; show tables; SHOW MATERIALIZED VIEWS; create materialized view v as select 1 emit on window close; select ';'",
        )
        .unwrap();
        assert_eq!(parsed.len(), 5);
        assert!(matches!(parsed[0].statement, EddyStatement::Flush));
        assert!(matches!(parsed[1].statement, EddyStatement::ShowTables));
        assert!(matches!(
            parsed[2].statement,
            EddyStatement::ShowMaterializedViews
        ));
        assert!(matches!(
            parsed[3].statement,
            EddyStatement::CreateMaterializedView {
                emit_on_window_close: true,
                ..
            }
        ));
        assert_eq!(parsed[4].sql, "select ';'");
    }

    #[test]
    fn create_source_with_includes_options_and_format() {
        let parsed = parse_statements(
            "CREATE SOURCE bids (auction BIGINT, date_time TIMESTAMP, WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND) \
             INCLUDE partition AS p INCLUDE offset \
             WITH (connector = 'kafka', topic = 'bids', properties.bootstrap.server = '127.0.0.1:9092', nexmark.event.rate = 10) \
             FORMAT PLAIN ENCODE CSV (delimiter = ';', without_header = 'true')",
        )
        .unwrap();
        let EddyStatement::CreateSource(def) = &parsed[0].statement else {
            panic!("not a source: {:?}", parsed[0]);
        };
        assert_eq!(def.name, "bids");
        assert_eq!(
            def.table.to_string(),
            "CREATE TABLE bids (auction BIGINT, date_time TIMESTAMP)"
        );
        assert_eq!(
            def.watermark.as_ref().map(|w| w.column.as_str()),
            Some("date_time")
        );
        assert_eq!(
            def.includes,
            vec![
                (IncludeKind::Partition, "p".to_string()),
                (IncludeKind::Offset, "_rw_kafka_offset".to_string())
            ]
        );
        assert_eq!(def.options["properties.bootstrap.server"], "127.0.0.1:9092");
        assert_eq!(def.options["nexmark.event.rate"], "10");
        assert_eq!((def.format.as_str(), def.encode.as_str()), ("PLAIN", "CSV"));
        assert_eq!(def.encode_options["delimiter"], ";");
        assert!(!def.stored);

        let parsed = parse_statements(
            "create table t (id int primary key, v int) with (connector='kafka', topic='t') format upsert encode json",
        )
        .unwrap();
        let EddyStatement::CreateSource(def) = &parsed[0].statement else {
            panic!("not a source table");
        };
        assert!(def.stored);
        assert_eq!(def.format, "UPSERT");
        assert!(parse_statements("CREATE SOURCE s (a INT) WITH (topic = 'x')").is_err());
        assert!(parse_statements(
            "CREATE SOURCE s (a INT) WITH (connector = 'kafka') FORMAT PLAIN"
        )
        .is_err());
    }

    #[test]
    fn bad_sql_is_a_syntax_error() {
        assert!(matches!(
            parse_statements("SELEC 1"),
            Err(PlanError::Syntax(_))
        ));
        assert!(matches!(
            parse_statements("CREATE TABLE t (a INT, WATERMARK FOR a AS b - INTERVAL '1' SECOND)"),
            Err(PlanError::Syntax(_))
        ));
    }
}
