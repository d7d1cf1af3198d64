//! Flink's window table-valued-function forms, accepted as aliases of Eddy's:
//!
//! - `TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size [, offset]))` → `TUMBLE(t, ts, size [, offset])`
//! - `TABLE(HOP(TABLE t, DESCRIPTOR(ts), slide, size))` → `HOP(t, ts, slide, size)`
//! - `TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), step, size))` → `CUMULATE(t, ts, step, size)`
//! - `TABLE(SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), gap))` → `SESSION(t, ts, gap)`
//!   (Eddy keeps sessions apart by the GROUP BY keys, which in Flink must include `k`).
//!
//! The rewrite works on tokens, before the statement is parsed.

use datafusion::sql::sqlparser::tokenizer::Token;

use crate::statement::matching_paren;

const WINDOW_FUNCTIONS: [&str; 4] = ["TUMBLE", "HOP", "CUMULATE", "SESSION"];

fn is_word(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

fn is_window_function(token: &Token) -> bool {
    WINDOW_FUNCTIONS.iter().any(|f| is_word(token, f))
}

fn significant(tokens: &[Token]) -> Vec<usize> {
    (0..tokens.len())
        .filter(|&i| !matches!(tokens[i], Token::Whitespace(_) | Token::EOF))
        .collect()
}

/// Rewrites every Flink-form window call in `tokens` into Eddy's form.
pub fn rewrite_flink_windows(mut tokens: Vec<Token>) -> Vec<Token> {
    while let Some(rewritten) = unwrap_table_call(&tokens) {
        tokens = rewritten;
    }
    while let Some(rewritten) = plain_arguments(&tokens) {
        tokens = rewritten;
    }
    tokens
}

/// `TABLE ( FN ( ... ) )` → `FN ( ... )`, one at a time.
fn unwrap_table_call(tokens: &[Token]) -> Option<Vec<Token>> {
    let sig = significant(tokens);
    let at = sig.windows(4).find(|w| {
        is_word(&tokens[w[0]], "TABLE")
            && tokens[w[1]] == Token::LParen
            && is_window_function(&tokens[w[2]])
            && tokens[w[3]] == Token::LParen
    })?;
    let close = matching_paren(tokens, at[1])?;
    let mut out = Vec::with_capacity(tokens.len());
    out.extend_from_slice(&tokens[..at[0]]);
    out.extend_from_slice(&tokens[at[2]..close]);
    out.extend_from_slice(&tokens[close + 1..]);
    Some(out)
}

/// `FN ( TABLE t [PARTITION BY ...] , DESCRIPTOR ( c ) , ...` → `FN ( t , c , ...`, one call
/// at a time.
fn plain_arguments(tokens: &[Token]) -> Option<Vec<Token>> {
    let sig = significant(tokens);
    let at = sig.windows(3).position(|w| {
        is_window_function(&tokens[w[0]])
            && tokens[w[1]] == Token::LParen
            && is_word(&tokens[w[2]], "TABLE")
    })?;
    let table_keyword = sig[at + 2];
    let name = *sig.get(at + 3)?;
    // Everything from after the table name to the first comma at this depth is PARTITION BY.
    let mut comma = None;
    let mut depth = 0;
    for &i in &sig[at + 4..] {
        match &tokens[i] {
            Token::LParen => depth += 1,
            Token::RParen if depth == 0 => break,
            Token::RParen => depth -= 1,
            Token::Comma if depth == 0 => {
                comma = Some(i);
                break;
            }
            _ => {}
        }
    }
    let comma = comma?;
    let mut out = Vec::with_capacity(tokens.len());
    out.extend_from_slice(&tokens[..table_keyword]);
    out.push(tokens[name].clone());
    // `DESCRIPTOR ( c )` right after the comma becomes `c`.
    let after: Vec<usize> = significant(&tokens[comma + 1..])
        .into_iter()
        .map(|i| i + comma + 1)
        .take(4)
        .collect();
    let descriptor = after.len() == 4
        && is_word(&tokens[after[0]], "DESCRIPTOR")
        && tokens[after[1]] == Token::LParen
        && tokens[after[3]] == Token::RParen;
    out.push(Token::Comma);
    if descriptor {
        out.push(Token::Whitespace(
            datafusion::sql::sqlparser::tokenizer::Whitespace::Space,
        ));
        out.push(tokens[after[2]].clone());
        out.extend_from_slice(&tokens[after[3] + 1..]);
    } else {
        out.extend_from_slice(&tokens[comma + 1..]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    fn rewrite(sql: &str) -> String {
        let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
            .tokenize()
            .unwrap();
        rewrite_flink_windows(tokens)
            .iter()
            .map(|t| t.to_string())
            .collect()
    }

    #[test]
    fn flink_forms_become_eddy_calls() {
        assert_eq!(
            rewrite(
                "SELECT * FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) AS w"
            ),
            "SELECT * FROM TUMBLE(bid, ts, INTERVAL '1' MINUTE) AS w"
        );
        assert_eq!(
            rewrite("FROM TABLE( HOP( TABLE bid , DESCRIPTOR( ts ), INTERVAL '2' SECOND, INTERVAL '10' SECOND ) )"),
            "FROM HOP( bid, ts, INTERVAL '2' SECOND, INTERVAL '10' SECOND ) "
        );
        assert_eq!(
            rewrite("FROM TABLE(SESSION(TABLE bid PARTITION BY bidder, DESCRIPTOR(ts), INTERVAL '10' SECOND))"),
            "FROM SESSION(bid, ts, INTERVAL '10' SECOND)"
        );
        assert_eq!(
            rewrite("FROM TABLE(CUMULATE(TABLE s, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND))"),
            "FROM CUMULATE(s, ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND)"
        );
    }

    #[test]
    fn eddy_forms_and_other_sql_are_left_alone() {
        for sql in [
            "SELECT * FROM TUMBLE(bid, ts, INTERVAL '1' MINUTE)",
            "CREATE TABLE t (a INT)",
            "SELECT * FROM t WHERE x IN (SELECT y FROM u)",
        ] {
            assert_eq!(rewrite(sql), sql);
        }
    }
}
