//! `FETCH` and `MOVE` on a cursor, parsed here: sqlparser has no `MOVE` and needs a count
//! before `FROM` (`FETCH FROM c` and `FETCH c` are Postgres too).

use datafusion::sql::sqlparser::tokenizer::Token;

use crate::{PlanError, Result};

/// How many rows a `FETCH` or `MOVE` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchCount {
    /// The next `n` rows (`NEXT` is 1, `FORWARD` without a count is 1).
    Rows(u64),
    /// Every row left (`ALL`, `FORWARD ALL`).
    All,
    /// A direction a forward-only cursor cannot take (`PRIOR`, `BACKWARD`, `ABSOLUTE`, ...).
    Backward,
}

/// `FETCH [direction] [FROM | IN] cursor` or `MOVE ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchStatement {
    pub cursor: String,
    pub count: FetchCount,
    /// `MOVE`: skip the rows instead of returning them.
    pub move_only: bool,
}

/// Parses a `FETCH` or `MOVE` from its significant tokens (the first one is the verb).
pub(crate) fn parse_fetch(tokens: &[Token]) -> Result<FetchStatement> {
    let syntax = |what: &str| PlanError::Syntax(format!("{what} in FETCH or MOVE"));
    let word = |t: &Token| match t {
        Token::Word(w) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
        _ => None,
    };
    let number = |t: Option<&Token>| match t {
        Some(Token::Number(n, _)) => n.parse::<i64>().ok(),
        _ => None,
    };
    let move_only = tokens.first().and_then(word).as_deref() == Some("MOVE");
    let mut rest = &tokens[1..];
    let count_of = |n: i64| {
        if n < 0 {
            FetchCount::Backward
        } else {
            FetchCount::Rows(n as u64)
        }
    };
    let (count, used) = match rest.first().and_then(word).as_deref() {
        Some("NEXT") => (FetchCount::Rows(1), 1),
        Some("ALL") => (FetchCount::All, 1),
        Some("PRIOR" | "FIRST" | "LAST" | "BACKWARD") => (FetchCount::Backward, 1),
        Some("ABSOLUTE") => (FetchCount::Backward, 2),
        Some("RELATIVE") => match number(rest.get(1)) {
            Some(0) => (FetchCount::Rows(0), 2),
            Some(n) if n > 0 => (FetchCount::Rows(n as u64), 2),
            _ => (FetchCount::Backward, 2),
        },
        Some("FORWARD") => match (rest.get(1).and_then(word).as_deref(), number(rest.get(1))) {
            (Some("ALL"), _) => (FetchCount::All, 2),
            (_, Some(n)) => (count_of(n), 2),
            _ => (FetchCount::Rows(1), 1),
        },
        _ => match (rest.first(), number(rest.first())) {
            (_, Some(n)) => (count_of(n), 1),
            (Some(Token::Minus), _) => (FetchCount::Backward, 2),
            _ => (FetchCount::Rows(1), 0),
        },
    };
    rest = &rest[used.min(rest.len())..];
    if matches!(rest.first().and_then(word).as_deref(), Some("FROM" | "IN")) {
        rest = &rest[1..];
    }
    let cursor = match rest {
        [Token::Word(w)] if w.quote_style.is_some() => w.value.clone(),
        [Token::Word(w)] => w.value.to_lowercase(),
        [] => return Err(syntax("a cursor name is missing")),
        _ => return Err(syntax("unexpected words after the cursor name")),
    };
    Ok(FetchStatement {
        cursor,
        count,
        move_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    fn parse(sql: &str) -> FetchStatement {
        let tokens: Vec<Token> = Tokenizer::new(&PostgreSqlDialect {}, sql)
            .tokenize()
            .unwrap()
            .into_iter()
            .filter(|t| !matches!(t, Token::Whitespace(_) | Token::EOF))
            .collect();
        parse_fetch(&tokens).unwrap()
    }

    #[test]
    fn fetch_forms() {
        let rows = |n| FetchCount::Rows(n);
        assert_eq!(parse("FETCH c").count, rows(1));
        assert_eq!(parse("FETCH FROM c").count, rows(1));
        assert_eq!(parse("FETCH 10 FROM c").count, rows(10));
        assert_eq!(parse("FETCH FORWARD 2000 FROM \"Cur\"").cursor, "Cur");
        assert_eq!(parse("FETCH FORWARD 2000 FROM \"Cur\"").count, rows(2000));
        assert_eq!(parse("FETCH ALL IN c").count, FetchCount::All);
        assert_eq!(parse("FETCH FORWARD ALL FROM c").count, FetchCount::All);
        assert_eq!(parse("FETCH PRIOR FROM c").count, FetchCount::Backward);
        assert_eq!(parse("FETCH -1 FROM c").count, FetchCount::Backward);
        let moved = parse("MOVE 5 IN C");
        assert!(moved.move_only);
        assert_eq!(moved.cursor, "c");
    }
}
