//! Splitting SQL text into statements and parsing Eddy's extensions.
//!
//! Eddy's clauses (`WATERMARK FOR` inside a column list, a trailing `APPEND ONLY` or
//! `EMIT ON WINDOW CLOSE`) are cut out at the token level, so everything else is parsed by
//! sqlparser exactly as Postgres would read it.

use datafusion::sql::sqlparser::ast::{ObjectType, Query, Statement};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

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
    CreateMaterializedView {
        name: String,
        if_not_exists: bool,
        query: Box<Query>,
        emit_on_window_close: bool,
    },
    Drop {
        object_type: ObjectType,
        names: Vec<String>,
        if_exists: bool,
    },
    Flush,
    Recover,
    ShowTables,
    ShowMaterializedViews,
    /// Anything else: handed to DataFusion (queries, DML, SET, SHOW, EXPLAIN, ...).
    Sql(Box<Statement>),
}

/// A statement together with its own SQL text (kept in the catalog).
#[derive(Debug, Clone)]
pub struct ParsedStatement {
    pub sql: String,
    pub statement: EddyStatement,
}

/// Splits `sql` at top-level semicolons and parses each statement. Empty statements are
/// skipped.
pub fn parse_statements(sql: &str) -> Result<Vec<ParsedStatement>> {
    let dialect = PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql).tokenize()?;
    let mut statements = Vec::new();
    for chunk in split_statements(tokens) {
        if chunk.iter().all(is_trivia) {
            continue;
        }
        let text = render(&chunk).trim().to_string();
        statements.push(ParsedStatement {
            statement: parse_one(chunk)?,
            sql: text,
        });
    }
    Ok(statements)
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

fn parse_one(mut tokens: Vec<Token>) -> Result<EddyStatement> {
    let w = words(&tokens);
    let only = |expected: &[&str]| w.len() == expected.len() && starts_with(&w, expected);
    if only(&["FLUSH"]) {
        return Ok(EddyStatement::Flush);
    }
    if only(&["RECOVER"]) {
        return Ok(EddyStatement::Recover);
    }
    if only(&["SHOW", "TABLES"]) {
        return Ok(EddyStatement::ShowTables);
    }
    if only(&["SHOW", "MATERIALIZED", "VIEWS"]) {
        return Ok(EddyStatement::ShowMaterializedViews);
    }
    if starts_with(&w, &["CREATE", "TABLE"]) {
        let append_only = ends_with(&w, &["APPEND", "ONLY"]);
        if append_only {
            tokens.truncate(w[w.len() - 2].0);
        }
        let watermark = take_watermark(&mut tokens)?;
        let statement = parse_sql(tokens)?;
        let Statement::CreateTable(create) = &statement else {
            return Err(PlanError::Syntax("expected CREATE TABLE".into()));
        };
        return Ok(EddyStatement::CreateTable {
            name: object_name(&create.name),
            if_not_exists: create.if_not_exists,
            statement: Box::new(statement),
            watermark,
            append_only,
        });
    }
    if starts_with(&w, &["CREATE", "MATERIALIZED", "VIEW"]) {
        let emit_on_window_close = ends_with(&w, &["EMIT", "ON", "WINDOW", "CLOSE"]);
        if emit_on_window_close {
            tokens.truncate(w[w.len() - 4].0);
        }
        return match parse_sql(tokens)? {
            Statement::CreateView(view) if view.materialized => {
                Ok(EddyStatement::CreateMaterializedView {
                    name: object_name(&view.name),
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
    match parse_sql(tokens)? {
        Statement::Drop {
            object_type,
            if_exists,
            names,
            ..
        } => Ok(EddyStatement::Drop {
            object_type,
            if_exists,
            names: names.iter().map(object_name).collect(),
        }),
        other => Ok(EddyStatement::Sql(Box::new(other))),
    }
}

fn parse_sql(tokens: Vec<Token>) -> Result<Statement> {
    let dialect = PostgreSqlDialect {};
    let mut parser = Parser::new(&dialect).with_tokens(tokens);
    let statement = parser.parse_statement()?;
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

/// The unquoted, lower-cased (unless quoted) name of an object.
pub fn object_name(name: &datafusion::sql::sqlparser::ast::ObjectName) -> String {
    name.0
        .iter()
        .filter_map(|part| part.as_ident())
        .map(|ident| match ident.quote_style {
            Some(_) => ident.value.clone(),
            None => ident.value.to_lowercase(),
        })
        .collect::<Vec<_>>()
        .join(".")
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
    if expr_tokens[1].1 != "-" {
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
