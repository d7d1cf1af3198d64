//! Joins neither the Postgres dialect nor DataFusion plans, rewritten on tokens before parsing
//! into ordinary joins whose `ON` condition is wrapped in a marker function the stream planner
//! recognises:
//!
//! - `JOIN r FOR SYSTEM_TIME AS OF PROCTIME() [AS] a ON cond` (RisingWave's and Flink's lookup
//!   join) → `JOIN r [AS] a ON eddy_proctime((cond))`;
//! - `JOIN r FOR SYSTEM_TIME AS OF l.ts [AS] a ON cond` (an event-time temporal join) →
//!   `JOIN r [AS] a ON eddy_temporal((cond), l.ts)`;
//! - `ASOF [LEFT] JOIN r [AS] a MATCH_CONDITION (m) ON cond` → `[LEFT] JOIN r [AS] a ON
//!   eddy_asof((cond) AND (m))`, and RisingWave's `ASOF [LEFT] JOIN r a ON cond` (the inequality
//!   among the conjuncts of `cond`) → `[LEFT] JOIN r a ON eddy_asof((cond))`.
//!
//! Inside a function DataFusion finds no equality to split out, so the join reaches the stream
//! planner whole. In a plain query `eddy_proctime` is its condition (a lookup now is an ordinary
//! join over the current rows); the event-time forms are for materialized views and say so.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{exec_err, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::tokenizer::{Token, Whitespace};

use crate::statement::matching_paren;
use crate::{PlanError, Result};

/// The marker functions' names.
pub const PROCTIME: &str = "eddy_proctime";
pub const TEMPORAL: &str = "eddy_temporal";
pub const ASOF: &str = "eddy_asof";

fn is_word(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

/// A word token as the tokenizer makes it (a keyword is known as one: the parser needs that).
fn word(value: &str) -> Token {
    Token::make_word(value, None)
}

fn space() -> Token {
    Token::Whitespace(Whitespace::Space)
}

fn significant(tokens: &[Token]) -> Vec<usize> {
    (0..tokens.len())
        .filter(|&i| !matches!(tokens[i], Token::Whitespace(_) | Token::EOF))
        .collect()
}

/// Words that end a join's `ON` condition at its own depth.
const AFTER_ON: [&str; 18] = [
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "FULL",
    "CROSS",
    "NATURAL",
    "ASOF",
    "WHERE",
    "GROUP",
    "ORDER",
    "LIMIT",
    "HAVING",
    "WINDOW",
    "EMIT",
    "UNION",
    "EXCEPT",
    "INTERSECT",
];

/// The token index just past the `ON` condition starting at `from` (the first token of it).
fn end_of_condition(tokens: &[Token], from: usize) -> usize {
    let mut depth = 0i32;
    for (i, token) in tokens.iter().enumerate().skip(from) {
        match token {
            Token::LParen => depth += 1,
            Token::RParen if depth == 0 => return i,
            Token::RParen => depth -= 1,
            Token::Comma | Token::SemiColon if depth == 0 => return i,
            t if depth == 0 && AFTER_ON.iter().any(|w| is_word(t, w)) => return i,
            _ => {}
        }
    }
    tokens.len()
}

/// Rewrites every temporal and ASOF join of `tokens`.
pub fn rewrite_temporal_joins(mut tokens: Vec<Token>) -> Result<Vec<Token>> {
    while let Some(rewritten) = system_time(&tokens)? {
        tokens = rewritten;
    }
    while let Some(rewritten) = asof(&tokens)? {
        tokens = rewritten;
    }
    Ok(tokens)
}

/// Where the `ON` keyword after position `from` is, at depth 0 (before the condition ends).
fn find_on(tokens: &[Token], from: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (i, token) in tokens.iter().enumerate().skip(from) {
        match token {
            Token::LParen => depth += 1,
            Token::RParen if depth == 0 => return None,
            Token::RParen => depth -= 1,
            t if depth == 0 && is_word(t, "ON") => return Some(i),
            t if depth == 0 && (is_word(t, "WHERE") || is_word(t, "JOIN")) => return None,
            Token::Comma | Token::SemiColon if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

/// `ON cond` → `ON name((cond)[, extra])`: the condition from `on + 1`.
fn wrap_condition(tokens: &[Token], on: usize, name: &str, extra: &[Token]) -> Vec<Token> {
    let start = on + 1;
    let end = end_of_condition(tokens, start);
    let mut out = Vec::with_capacity(tokens.len() + 8);
    out.extend_from_slice(&tokens[..start]);
    out.extend([space(), word(name), Token::LParen, Token::LParen]);
    out.extend_from_slice(&tokens[start..end]);
    out.push(Token::RParen);
    if !extra.is_empty() {
        out.push(Token::Comma);
        out.push(space());
        out.extend_from_slice(extra);
    }
    out.push(Token::RParen);
    out.push(space());
    out.extend_from_slice(&tokens[end..]);
    out
}

/// `FOR SYSTEM_TIME AS OF expr`, one at a time.
fn system_time(tokens: &[Token]) -> Result<Option<Vec<Token>>> {
    let sig = significant(tokens);
    let Some(at) = sig.windows(4).position(|w| {
        is_word(&tokens[w[0]], "FOR")
            && is_word(&tokens[w[1]], "SYSTEM_TIME")
            && is_word(&tokens[w[2]], "AS")
            && is_word(&tokens[w[3]], "OF")
    }) else {
        return Ok(None);
    };
    let for_at = sig[at];
    // The time: PROCTIME(), or a (qualified) column.
    let first = *sig
        .get(at + 4)
        .ok_or_else(|| PlanError::Syntax("FOR SYSTEM_TIME AS OF needs a time".into()))?;
    let (expr_end, proctime) = if is_word(&tokens[first], "PROCTIME") {
        let open = *sig
            .get(at + 5)
            .ok_or_else(|| PlanError::Syntax("FOR SYSTEM_TIME AS OF PROCTIME needs ()".into()))?;
        let close = matching_paren(tokens, open)
            .ok_or_else(|| PlanError::Syntax("unbalanced parentheses after PROCTIME".into()))?;
        (close + 1, true)
    } else {
        let mut end = first + 1;
        while end + 1 < tokens.len() && tokens[end] == Token::Period {
            end += 2;
        }
        (end, false)
    };
    let expr = tokens[first..expr_end].to_vec();
    let Some(on) = find_on(tokens, expr_end) else {
        return Err(PlanError::NotSupported(
            "FOR SYSTEM_TIME AS OF outside a JOIN ... ON (a temporal join joins on the table's key)".into(),
        ));
    };
    let mut out = tokens[..for_at].to_vec();
    out.extend_from_slice(&tokens[expr_end..]);
    let on = on - (expr_end - for_at);
    Ok(Some(if proctime {
        wrap_condition(&out, on, PROCTIME, &[])
    } else {
        wrap_condition(&out, on, TEMPORAL, &expr)
    }))
}

/// `ASOF [LEFT] JOIN r [a] [MATCH_CONDITION (m)] ON cond`, one at a time.
fn asof(tokens: &[Token]) -> Result<Option<Vec<Token>>> {
    let sig = significant(tokens);
    let Some(at) = sig.iter().position(|&i| is_word(&tokens[i], "ASOF")) else {
        return Ok(None);
    };
    let asof_at = sig[at];
    let mut next = at + 1;
    if sig.get(next).is_some_and(|&i| is_word(&tokens[i], "LEFT")) {
        next += 1;
        if sig.get(next).is_some_and(|&i| is_word(&tokens[i], "OUTER")) {
            next += 1;
        }
    }
    if !sig.get(next).is_some_and(|&i| is_word(&tokens[i], "JOIN")) {
        return Err(PlanError::Syntax(
            "ASOF must be followed by [LEFT] JOIN".into(),
        ));
    }
    let join_at = sig[next];
    // Drop `ASOF`, keep `[LEFT] JOIN`.
    let mut out = tokens[..asof_at].to_vec();
    out.extend_from_slice(&tokens[asof_at + 1..]);
    let join_at = join_at - 1;
    let mut match_condition = Vec::new();
    let sig = significant(&out);
    if let Some(m) = sig
        .iter()
        .copied()
        .filter(|&i| i > join_at)
        .find(|&i| is_word(&out[i], "MATCH_CONDITION"))
    {
        let open = *sig
            .iter()
            .find(|&&i| i > m)
            .ok_or_else(|| PlanError::Syntax("MATCH_CONDITION needs (condition)".into()))?;
        let close = matching_paren(&out, open)
            .ok_or_else(|| PlanError::Syntax("unbalanced MATCH_CONDITION".into()))?;
        match_condition = out[open..=close].to_vec();
        out.drain(m..=close);
    }
    let Some(on) = find_on(&out, join_at + 1) else {
        return Err(PlanError::NotSupported(
            "ASOF JOIN without ON: it needs an equality between the inputs (ON l.k = r.k)".into(),
        ));
    };
    let mut extra = Vec::new();
    if !match_condition.is_empty() {
        // `eddy_asof((cond) AND (m))`: the match condition joins the ON conjuncts.
        extra = match_condition;
    }
    Ok(Some(if extra.is_empty() {
        wrap_condition(&out, on, ASOF, &[])
    } else {
        let start = on + 1;
        let end = end_of_condition(&out, start);
        let mut with_match = out[..start].to_vec();
        with_match.extend([space(), Token::LParen]);
        with_match.extend_from_slice(&out[start..end]);
        with_match.extend([Token::RParen, space(), word("AND"), space()]);
        with_match.extend(extra);
        with_match.push(space());
        with_match.extend_from_slice(&out[end..]);
        wrap_condition(&with_match, on, ASOF, &[])
    }))
}

/// The marker functions, as DataFusion scalar functions.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct JoinMarker {
    name: &'static str,
    signature: Signature,
}

impl JoinMarker {
    pub fn all() -> Vec<ScalarUDF> {
        [PROCTIME, TEMPORAL, ASOF]
            .into_iter()
            .map(|name| {
                ScalarUDF::new_from_impl(Self {
                    name,
                    signature: Signature::variadic_any(Volatility::Immutable),
                })
            })
            .collect()
    }
}

impl ScalarUDFImpl for JoinMarker {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        match self.name {
            // A lookup join now, in a query, is the join over the table's current rows.
            PROCTIME => Ok(args.args[0].clone()),
            TEMPORAL => exec_err!(
                "FOR SYSTEM_TIME AS OF a column is a temporal join of a materialized view (a query sees only the current rows: join without it)"
            ),
            _ => exec_err!(
                "ASOF JOIN is supported in materialized views (CREATE MATERIALIZED VIEW ... AS SELECT ... ASOF JOIN ...)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    use super::*;

    fn rewrite(sql: &str) -> String {
        let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
            .tokenize()
            .unwrap();
        let out = rewrite_temporal_joins(tokens).unwrap();
        let text: String = out.iter().map(|t| t.to_string()).collect();
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn proctime_lookups_wrap_their_condition() {
        assert_eq!(
            rewrite("SELECT * FROM o JOIN r FOR SYSTEM_TIME AS OF PROCTIME() AS x ON o.k = x.k WHERE o.v > 1"),
            "SELECT * FROM o JOIN r AS x ON eddy_proctime(( o.k = x.k )) WHERE o.v > 1"
        );
        assert_eq!(
            rewrite("SELECT * FROM o LEFT JOIN r FOR SYSTEM_TIME AS OF o.ts ON o.k = r.k"),
            "SELECT * FROM o LEFT JOIN r ON eddy_temporal(( o.k = r.k), o.ts)"
        );
    }

    #[test]
    fn asof_forms_become_one_marker() {
        assert_eq!(
            rewrite("SELECT * FROM t ASOF JOIN q MATCH_CONDITION (t.ts >= q.ts) ON t.s = q.s"),
            "SELECT * FROM t JOIN q ON eddy_asof(( ( t.s = q.s) AND (t.ts >= q.ts) ))"
        );
        assert_eq!(
            rewrite("SELECT * FROM t ASOF LEFT JOIN q ON t.s = q.s AND t.ts >= q.ts GROUP BY 1"),
            "SELECT * FROM t LEFT JOIN q ON eddy_asof(( t.s = q.s AND t.ts >= q.ts )) GROUP BY 1"
        );
        let tokens = Tokenizer::new(
            &PostgreSqlDialect {},
            "SELECT * FROM t ASOF JOIN q MATCH_CONDITION (t.ts >= q.ts)",
        )
        .tokenize()
        .unwrap();
        assert!(rewrite_temporal_joins(tokens).is_err());
    }
}
