//! `CREATE SOURCE` and `CREATE TABLE ... WITH (connector = ...)`: the column list as a
//! `CREATE TABLE`, then `INCLUDE`, `WITH (...)`, `FORMAT ... ENCODE ...`, and a `WATERMARK FOR`
//! clause cut out of a column list.

use super::tokens::*;
use super::*;

pub(super) fn has_top_level_with_connector(tokens: &[Token]) -> bool {
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
pub(super) fn parse_create_source(
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
    // It may be left out when the columns come from the message schema (Avro, Protobuf).
    let mut open = None;
    let mut name_end = *name_at;
    for (i, token) in tokens.iter().enumerate().skip(*name_at) {
        match token {
            Token::LParen => {
                open = Some(i);
                break;
            }
            Token::Word(w)
                if i > *name_at
                    && ["WITH", "INCLUDE", "FORMAT"]
                        .iter()
                        .any(|k| w.value.eq_ignore_ascii_case(k)) =>
            {
                break
            }
            Token::Word(_) | Token::Period => name_end = i,
            t if is_trivia(t) => continue,
            _ => break,
        }
    }
    let mut table_tokens: Vec<Token> =
        Tokenizer::new(&PostgreSqlDialect {}, "CREATE TABLE ").tokenize()?;
    table_tokens.retain(|t| *t != Token::EOF);
    let close = match open {
        Some(open) => {
            let close = matching_paren(&tokens, open).ok_or_else(|| {
                PlanError::Syntax("unbalanced parentheses in the column list".into())
            })?;
            table_tokens.extend_from_slice(&tokens[*name_at..=close]);
            close
        }
        None => {
            table_tokens.extend_from_slice(&tokens[*name_at..=name_end]);
            table_tokens.extend([Token::LParen, Token::RParen]);
            name_end
        }
    };
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
                let clause;
                (clause, i) = format_clause(&rest, i)?;
                (def.format, def.encode) = (clause.format, clause.encode);
                def.encode_options = clause.options;
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

/// `FORMAT f ENCODE e [( options )]`: the format and encoding upper-cased, and the options.
pub(super) struct FormatClause {
    pub format: String,
    pub encode: String,
    pub options: std::collections::BTreeMap<String, String>,
}

/// Reads a [`FormatClause`] starting at `rest[at]` (the FORMAT word), for sources and sinks;
/// returns it and the index after it.
pub(super) fn format_clause(rest: &[Token], at: usize) -> Result<(FormatClause, usize)> {
    let word = |t: Option<&Token>| match t {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.to_uppercase()),
        _ => None,
    };
    let format = word(rest.get(at + 1))
        .ok_or_else(|| PlanError::Syntax("FORMAT needs PLAIN, UPSERT or DEBEZIUM".into()))?;
    if word(rest.get(at + 2)).as_deref() != Some("ENCODE") {
        return Err(PlanError::Syntax("expected ENCODE after FORMAT ...".into()));
    }
    let encode = word(rest.get(at + 3)).ok_or_else(|| {
        PlanError::Syntax("ENCODE needs JSON, CSV, AVRO, PROTOBUF or PARQUET".into())
    })?;
    let mut next = at + 4;
    let mut options = Default::default();
    if rest.get(next) == Some(&Token::LParen) {
        (options, next) = parse_options(rest, next)?;
    }
    let clause = FormatClause {
        format,
        encode,
        options,
    };
    Ok((clause, next))
}

/// `( key.with.dots = 'value', ... )` starting at `rest[start]` (the open paren); returns the
/// options and the index after the closing paren.
pub(super) fn parse_options(
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
pub(super) fn take_watermark(tokens: &mut Vec<Token>) -> Result<Option<WatermarkDef>> {
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
