//! `CREATE SINK name FROM relation WITH (...) FORMAT ... ENCODE ... [(...)]` (RisingWave's
//! form), `DROP SINK` and the names lists they share with `DROP SOURCE`.

use super::create_source::{format_clause, parse_options};
use super::tokens::*;
use super::*;

/// `CREATE SINK`: what it reads and where it writes. Options are checked by the executor,
/// which knows each connector's.
#[derive(Debug, Clone)]
pub struct SinkDef {
    pub name: String,
    pub if_not_exists: bool,
    /// The table or materialized view whose changes the sink writes.
    pub from: String,
    /// `WITH (...)`, keys lower-cased.
    pub options: std::collections::BTreeMap<String, String>,
    /// `FORMAT x` (upper-cased).
    pub format: String,
    /// `ENCODE y` (upper-cased).
    pub encode: String,
    /// Options after `ENCODE y (...)`.
    pub encode_options: std::collections::BTreeMap<String, String>,
}

/// A possibly dotted name at `rest[at]`: its resolved name and the index after it.
fn dotted_name(rest: &[Token], at: usize, what: &str) -> Result<(String, usize)> {
    let mut parts = Vec::new();
    let mut i = at;
    loop {
        match rest.get(i) {
            Some(Token::Word(word)) if word.quote_style.is_some() => parts.push(word.value.clone()),
            Some(Token::Word(word)) => parts.push(word.value.to_lowercase()),
            _ => {
                return Err(PlanError::Syntax(format!("{what} needs a name")));
            }
        }
        i += 1;
        if rest.get(i) == Some(&Token::Period) {
            i += 1;
            continue;
        }
        return Ok((crate::names::resolve_parts(&parts)?, i));
    }
}

pub(super) fn parse_create_sink(tokens: &[Token]) -> Result<EddyStatement> {
    let rest: Vec<Token> = tokens.iter().filter(|t| !is_trivia(t)).cloned().collect();
    let word = |t: Option<&Token>| match t {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.to_uppercase()),
        _ => None,
    };
    // CREATE SINK [IF NOT EXISTS]
    let mut i = 2;
    let if_not_exists = word(rest.get(2)).as_deref() == Some("IF")
        && word(rest.get(3)).as_deref() == Some("NOT")
        && word(rest.get(4)).as_deref() == Some("EXISTS");
    if if_not_exists {
        i = 5;
    }
    let (name, next) = dotted_name(&rest, i, "CREATE SINK")?;
    i = next;
    match word(rest.get(i)).as_deref() {
        Some("FROM") => {}
        Some("AS") => {
            return Err(PlanError::NotSupported(
                "CREATE SINK ... AS SELECT: create a materialized view of the query, then CREATE SINK ... FROM it".into(),
            ))
        }
        Some("INTO") => {
            return Err(PlanError::NotSupported(
                "CREATE SINK ... INTO a table: a sink writes outside Eddy (connector = 'kafka' or 'file')".into(),
            ))
        }
        _ => {
            return Err(PlanError::Syntax(
                "expected FROM after the sink's name: CREATE SINK name FROM view WITH (connector = ...) FORMAT ... ENCODE ..."
                    .into(),
            ))
        }
    }
    let (from, next) = dotted_name(&rest, i + 1, "CREATE SINK ... FROM")?;
    i = next;
    let mut def = SinkDef {
        name,
        if_not_exists,
        from,
        options: Default::default(),
        format: String::new(),
        encode: String::new(),
        encode_options: Default::default(),
    };
    while i < rest.len() {
        match word(rest.get(i)).as_deref() {
            Some("WITH") => {
                let (options, next) = parse_options(&rest, i + 1)?;
                def.options = options;
                i = next;
            }
            Some("FORMAT") => {
                let clause;
                (clause, i) = format_clause(&rest, i)?;
                (def.format, def.encode) = (clause.format, clause.encode);
                def.encode_options = clause.options;
            }
            _ => {
                return Err(PlanError::Syntax(format!(
                    "unexpected {} in CREATE SINK: expected WITH (...) or FORMAT ... ENCODE ...",
                    rest[i]
                )))
            }
        }
    }
    if !def.options.contains_key("connector") {
        return Err(PlanError::Syntax(
            "CREATE SINK needs WITH (connector = 'kafka' | 'file', ...)".into(),
        ));
    }
    if def.format.is_empty() {
        return Err(PlanError::Syntax(
            "CREATE SINK needs FORMAT PLAIN | UPSERT | DEBEZIUM ENCODE JSON (or FORMAT PLAIN ENCODE PARQUET for files)"
                .into(),
        ));
    }
    Ok(EddyStatement::CreateSink(Box::new(def)))
}

/// `a, public.b` after a `DROP kind [IF EXISTS]`: each name resolved from its dotted parts.
pub(super) fn name_list(
    tokens: &[Token],
    rest: &[(usize, String)],
    what: &str,
) -> Result<Vec<String>> {
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
        return Err(PlanError::Syntax(format!("{what} needs a name")));
    }
    Ok(names)
}
