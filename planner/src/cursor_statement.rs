//! `FETCH` and `MOVE` on a cursor, parsed here: sqlparser has no `MOVE` and needs a count
//! before `FROM` (`FETCH FROM c` and `FETCH c` are Postgres too).

use datafusion::sql::sqlparser::tokenizer::Token;

use crate::{PlanError, Result};

/// Where a `FETCH` or `MOVE` goes, as Postgres reads its direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchCount {
    /// The next `n` rows (`NEXT` and a bare `FETCH` are 1, `FORWARD n`, `n`).
    Forward(u64),
    /// Every row left (`ALL`, `FORWARD ALL`).
    ForwardAll,
    /// The `n` rows before the current one, nearest first (`PRIOR` is 1, `BACKWARD n`, `-n`).
    Backward(u64),
    /// Every row before the current one, nearest first (`BACKWARD ALL`).
    BackwardAll,
    /// The row at a position: `n` from the start, `-n` from the end (`FIRST` is 1, `LAST`
    /// -1); 0 is before the first row.
    Absolute(i64),
    /// The row `n` after (or before) the current one; 0 is the current row again.
    Relative(i64),
}

/// `FETCH [direction] [FROM | IN] cursor` or `MOVE ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchStatement {
    pub cursor: String,
    pub count: FetchCount,
    /// `MOVE`: skip the rows instead of returning them.
    pub move_only: bool,
    /// `WITH (timeout = '1s')`: on a cursor over a `SUBSCRIBE`, how long to wait for a row
    /// when none is ready (`None`: until one comes).
    pub timeout: Option<std::time::Duration>,
}

/// `WITH (timeout = '...')` at the end of a FETCH: the timeout, and the tokens before it.
fn take_timeout(tokens: &[Token]) -> Result<(Option<std::time::Duration>, &[Token])> {
    let syntax = |what: &str| PlanError::Syntax(format!("{what} in FETCH ... WITH (...)"));
    let Some(with) = tokens.iter().position(
        |t| matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("WITH")),
    ) else {
        return Ok((None, tokens));
    };
    let option = &tokens[with + 1..];
    let value = match option {
        [Token::LParen, Token::Word(key), Token::Eq, value, Token::RParen]
            if key.value.eq_ignore_ascii_case("timeout") =>
        {
            match value {
                Token::SingleQuotedString(s) => s.clone(),
                Token::Number(n, _) => n.clone(),
                _ => return Err(syntax("timeout needs a duration ('1s', '500ms')")),
            }
        }
        _ => return Err(syntax("expected (timeout = '...')")),
    };
    let timeout = parse_duration(&value).ok_or_else(|| {
        PlanError::InvalidParameter(format!(
            "FETCH timeout '{value}': expected a duration such as '1s', '500ms' or '2 minutes'"
        ))
    })?;
    Ok((Some(timeout), &tokens[..with]))
}

/// `'1s'`, `'500ms'`, `'2 minutes'`, `'0'` (seconds when no unit is given).
fn parse_duration(text: &str) -> Option<std::time::Duration> {
    let text = text.trim().to_ascii_lowercase();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let seconds = match unit.trim() {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => number,
        "ms" | "millisecond" | "milliseconds" => number / 1000.0,
        "us" | "microsecond" | "microseconds" => number / 1e6,
        "m" | "min" | "mins" | "minute" | "minutes" => number * 60.0,
        "h" | "hour" | "hours" => number * 3600.0,
        _ => return None,
    };
    std::time::Duration::try_from_secs_f64(seconds).ok()
}

/// Parses a `FETCH` or `MOVE` from its significant tokens (the first one is the verb).
pub(crate) fn parse_fetch(tokens: &[Token]) -> Result<FetchStatement> {
    let syntax = |what: &str| PlanError::Syntax(format!("{what} in FETCH or MOVE"));
    let word = |t: &Token| match t {
        Token::Word(w) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
        _ => None,
    };
    // A count, signed or not, and how many tokens it took.
    let signed = |at: &[Token]| -> Option<(i64, usize)> {
        match at {
            [Token::Minus, Token::Number(n, _), ..] => Some((-n.parse::<i64>().ok()?, 2)),
            [Token::Plus, Token::Number(n, _), ..] => Some((n.parse::<i64>().ok()?, 2)),
            [Token::Number(n, _), ..] => Some((n.parse::<i64>().ok()?, 1)),
            _ => None,
        }
    };
    let forward = |n: i64| {
        if n < 0 {
            FetchCount::Backward(n.unsigned_abs())
        } else {
            FetchCount::Forward(n as u64)
        }
    };
    let move_only = tokens.first().and_then(word).as_deref() == Some("MOVE");
    let (timeout, tokens) = take_timeout(tokens)?;
    let mut rest = &tokens[1..];
    let after = |n: usize| rest.get(n..).unwrap_or(&[]);
    let (count, used) = match rest.first().and_then(word).as_deref() {
        Some("NEXT") => (FetchCount::Forward(1), 1),
        Some("PRIOR") => (FetchCount::Backward(1), 1),
        Some("FIRST") => (FetchCount::Absolute(1), 1),
        Some("LAST") => (FetchCount::Absolute(-1), 1),
        Some("ALL") => (FetchCount::ForwardAll, 1),
        Some("ABSOLUTE") => match signed(after(1)) {
            Some((n, taken)) => (FetchCount::Absolute(n), 1 + taken),
            None => return Err(syntax("ABSOLUTE needs a position")),
        },
        Some("RELATIVE") => match signed(after(1)) {
            Some((n, taken)) => (FetchCount::Relative(n), 1 + taken),
            None => return Err(syntax("RELATIVE needs a count")),
        },
        Some("FORWARD") => match (after(1).first().and_then(word).as_deref(), signed(after(1))) {
            (Some("ALL"), _) => (FetchCount::ForwardAll, 2),
            (_, Some((n, taken))) => (forward(n), 1 + taken),
            _ => (FetchCount::Forward(1), 1),
        },
        Some("BACKWARD") => match (after(1).first().and_then(word).as_deref(), signed(after(1))) {
            (Some("ALL"), _) => (FetchCount::BackwardAll, 2),
            (_, Some((n, taken))) => (forward(-n), 1 + taken),
            _ => (FetchCount::Backward(1), 1),
        },
        _ => match signed(rest) {
            Some((n, taken)) => (forward(n), taken),
            None => (FetchCount::Forward(1), 0),
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
        timeout,
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
        use FetchCount::*;
        assert_eq!(parse("FETCH c").count, Forward(1));
        assert_eq!(parse("FETCH FROM c").count, Forward(1));
        assert_eq!(parse("FETCH 10 FROM c").count, Forward(10));
        assert_eq!(parse("FETCH FORWARD 2000 FROM \"Cur\"").cursor, "Cur");
        assert_eq!(
            parse("FETCH FORWARD 2000 FROM \"Cur\"").count,
            Forward(2000)
        );
        assert_eq!(parse("FETCH ALL IN c").count, ForwardAll);
        assert_eq!(parse("FETCH FORWARD ALL FROM c").count, ForwardAll);
        assert_eq!(parse("FETCH PRIOR FROM c").count, Backward(1));
        assert_eq!(parse("FETCH -1 FROM c").count, Backward(1));
        assert_eq!(parse("FETCH BACKWARD 3 c").count, Backward(3));
        assert_eq!(parse("FETCH BACKWARD -3 c").count, Forward(3));
        assert_eq!(parse("FETCH BACKWARD ALL IN c").count, BackwardAll);
        assert_eq!(parse("FETCH FIRST FROM c").count, Absolute(1));
        assert_eq!(parse("FETCH LAST FROM c").count, Absolute(-1));
        assert_eq!(parse("FETCH ABSOLUTE -2 FROM c").count, Absolute(-2));
        assert_eq!(parse("MOVE RELATIVE 0 IN c").count, Relative(0));
        assert_eq!(parse("FETCH RELATIVE +4 c").count, Relative(4));
        let moved = parse("MOVE 5 IN C");
        assert!(moved.move_only);
        assert_eq!(moved.cursor, "c");
    }

    #[test]
    fn fetch_timeouts() {
        use std::time::Duration;
        let fetch = parse("FETCH 100 FROM c WITH (timeout = '1s')");
        assert_eq!(fetch.count, FetchCount::Forward(100));
        assert_eq!(fetch.cursor, "c");
        assert_eq!(fetch.timeout, Some(Duration::from_secs(1)));
        assert_eq!(
            parse("FETCH ALL c WITH (TIMEOUT = '250ms')").timeout,
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            parse("FETCH c WITH (timeout = '0')").timeout,
            Some(Duration::ZERO)
        );
        assert_eq!(parse("FETCH c").timeout, None);
        assert_eq!(parse_duration("2 minutes"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("soon"), None);
    }
}
