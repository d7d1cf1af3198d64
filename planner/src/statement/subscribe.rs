//! `SUBSCRIBE [TO] relation | (query) [WITH (snapshot = .., progress = ..)] [AS OF epoch]`,
//! and the two ways a client reads one: `COPY (SUBSCRIBE ...) TO STDOUT [options]` and
//! `DECLARE c CURSOR FOR SUBSCRIBE ...` (then `FETCH`).

use datafusion::sql::sqlparser::tokenizer::Word;

use super::tokens::*;
use super::*;

/// A `SUBSCRIBE`: what it reads and how it starts.
#[derive(Debug, Clone)]
pub struct SubscribeStatement {
    /// `SUBSCRIBE TO name`: the table or materialized view.
    pub relation: Option<String>,
    /// `SUBSCRIBE TO (SELECT ...)`: a query over one table or view.
    pub query: Option<Box<Query>>,
    /// `snapshot`: the rows it holds first (default: true, false with `AS OF`).
    pub snapshot: Option<bool>,
    /// `progress`: a row after each committed epoch.
    pub progress: bool,
    /// `AS OF epoch`: every change after that epoch, no snapshot.
    pub as_of: Option<u64>,
}

/// How the client reads the subscription.
#[derive(Debug, Clone)]
pub enum SubscribeOutput {
    /// A bare `SUBSCRIBE`.
    Rows,
    /// `COPY (SUBSCRIBE ...) TO STDOUT ...`: the `COPY` with `SELECT 1` in its place (its
    /// target and options).
    Copy(Box<Statement>),
    /// `DECLARE c CURSOR FOR SUBSCRIBE ...`: the `DECLARE` with `SELECT 1` in its place.
    Cursor(Box<Statement>),
}

fn upper(token: Option<&Token>) -> Option<String> {
    match token {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.to_uppercase()),
        _ => None,
    }
}

/// `SELECT 1`, as tokens.
fn select_one() -> Vec<Token> {
    vec![
        Token::Word(Word {
            value: "SELECT".into(),
            quote_style: None,
            keyword: datafusion::sql::sqlparser::keywords::Keyword::SELECT,
        }),
        Token::Whitespace(datafusion::sql::sqlparser::tokenizer::Whitespace::Space),
        Token::Number("1".into(), false),
    ]
}

/// `COPY (SUBSCRIBE ...) ...` or `DECLARE ... FOR SUBSCRIBE ...`: the subscription and the
/// statement around it; `None` when `tokens` hold no subscription.
pub(super) fn parse_wrapped(
    tokens: &[Token],
    budget: &ParseBudget,
) -> Result<Option<EddyStatement>> {
    let w = words(tokens);
    if starts_with(&w, &["COPY", "(", "SUBSCRIBE"]) {
        let open = w[1].0;
        let close = matching_paren(tokens, open)
            .ok_or_else(|| PlanError::Syntax("unclosed ( in COPY".into()))?;
        let subscribe = parse_subscribe(&tokens[open + 1..close])?;
        let mut copy = tokens[..=open].to_vec();
        copy.extend(select_one());
        copy.extend_from_slice(&tokens[close..]);
        let copy = parse_sql(copy, budget)?;
        return Ok(Some(EddyStatement::Subscribe {
            subscribe: Box::new(subscribe),
            output: SubscribeOutput::Copy(Box::new(copy)),
        }));
    }
    if starts_with(&w, &["DECLARE"]) {
        let Some(at) = w
            .windows(2)
            .position(|pair| pair[0].1 == "FOR" && pair[1].1 == "SUBSCRIBE")
        else {
            return Ok(None);
        };
        let subscribe = parse_subscribe(&tokens[w[at + 1].0..])?;
        let mut declare = tokens[..=w[at].0].to_vec();
        declare.push(Token::Whitespace(
            datafusion::sql::sqlparser::tokenizer::Whitespace::Space,
        ));
        declare.extend(select_one());
        let declare = parse_sql(declare, budget)?;
        return Ok(Some(EddyStatement::Subscribe {
            subscribe: Box::new(subscribe),
            output: SubscribeOutput::Cursor(Box::new(declare)),
        }));
    }
    Ok(None)
}

/// `SUBSCRIBE [TO] ...` from its tokens (the first significant one is `SUBSCRIBE`).
pub(super) fn parse_subscribe(tokens: &[Token]) -> Result<SubscribeStatement> {
    let syntax = |what: &str| PlanError::Syntax(format!("{what} in SUBSCRIBE"));
    let rest: Vec<Token> = tokens.iter().filter(|t| !is_trivia(t)).cloned().collect();
    let mut i = 1;
    if upper(rest.get(i)).as_deref() == Some("TO") {
        i += 1;
    }
    let mut statement = SubscribeStatement {
        relation: None,
        query: None,
        snapshot: None,
        progress: false,
        as_of: None,
    };
    if rest.get(i) == Some(&Token::LParen) {
        let close = matching_paren(&rest, i).ok_or_else(|| syntax("an unclosed ("))?;
        let mut parser = Parser::new(&PostgreSqlDialect {})
            .with_recursion_limit(crate::limits::PARSER_RECURSION_LIMIT)
            .with_tokens(rest[i + 1..close].to_vec());
        let query = parser.parse_query()?;
        if parser.peek_token().token != Token::EOF {
            return Err(syntax("unexpected words after the query"));
        }
        statement.query = Some(query);
        i = close + 1;
    } else {
        let mut parts = Vec::new();
        loop {
            match rest.get(i) {
                Some(Token::Word(w)) if w.quote_style.is_some() => parts.push(w.value.clone()),
                Some(Token::Word(w)) => parts.push(w.value.to_lowercase()),
                _ => return Err(syntax("a relation name or a (SELECT ...) is missing")),
            }
            i += 1;
            if rest.get(i) != Some(&Token::Period) {
                break;
            }
            i += 1;
        }
        statement.relation = Some(crate::names::resolve_parts(&parts)?);
    }
    while i < rest.len() {
        match upper(rest.get(i)).as_deref() {
            Some("WITH") => i = parse_options(&rest, i + 1, &mut statement)?,
            Some("AS") if upper(rest.get(i + 1)).as_deref() == Some("OF") => {
                i += 2;
                if upper(rest.get(i)).as_deref() == Some("AT")
                    && upper(rest.get(i + 1)).as_deref() == Some("LEAST")
                {
                    i += 2;
                }
                let epoch = match rest.get(i) {
                    Some(Token::Number(n, _)) => n.parse::<u64>().ok(),
                    Some(Token::SingleQuotedString(s)) => s.trim().parse::<u64>().ok(),
                    _ => None,
                };
                statement.as_of =
                    Some(epoch.ok_or_else(|| syntax("AS OF needs an epoch (a number)"))?);
                i += 1;
            }
            _ => {
                return Err(syntax(&format!(
                    "unexpected {} (expected WITH (...) or AS OF epoch)",
                    rest[i]
                )))
            }
        }
    }
    Ok(statement)
}

/// `(name [= value], ...)` at `rest[start]`: a bare name is true. The index after it.
fn parse_options(
    rest: &[Token],
    start: usize,
    statement: &mut SubscribeStatement,
) -> Result<usize> {
    let syntax = |what: String| PlanError::Syntax(format!("{what} in SUBSCRIBE ... WITH (...)"));
    if rest.get(start) != Some(&Token::LParen) {
        return Err(syntax("expected (".into()));
    }
    let mut i = start + 1;
    loop {
        let key = match rest.get(i) {
            Some(Token::Word(w)) => w.value.to_lowercase(),
            Some(Token::RParen) if i == start + 1 => return Ok(i + 1),
            other => {
                return Err(syntax(format!(
                    "expected an option name, found {}",
                    other.map_or("the end".to_string(), |t| t.to_string())
                )))
            }
        };
        if !matches!(key.as_str(), "snapshot" | "progress") {
            return Err(PlanError::InvalidParameter(format!(
                "unrecognized SUBSCRIBE option \"{key}\" (known: snapshot, progress)"
            )));
        }
        i += 1;
        let value = if rest.get(i) == Some(&Token::Eq) {
            let value = match rest.get(i + 1) {
                Some(Token::SingleQuotedString(s)) => s.to_lowercase(),
                Some(Token::Word(w)) => w.value.to_lowercase(),
                Some(Token::Number(n, _)) => n.clone(),
                _ => return Err(syntax(format!("option {key} needs a value"))),
            };
            i += 2;
            value
        } else {
            "true".to_string()
        };
        let flag = match value.as_str() {
            "true" | "on" | "1" => true,
            "false" | "off" | "0" => false,
            other => {
                return Err(PlanError::InvalidParameter(format!(
                    "SUBSCRIBE option {key} = '{other}': expected true or false"
                )))
            }
        };
        match key.as_str() {
            "snapshot" => statement.snapshot = Some(flag),
            _ => statement.progress = flag,
        }
        match rest.get(i) {
            Some(Token::Comma) => i += 1,
            Some(Token::RParen) => return Ok(i + 1),
            _ => return Err(syntax("expected , or )".into())),
        }
    }
}
