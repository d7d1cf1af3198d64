//! `p_time TIMESTAMPTZ AS PROCTIME()` in a source's column list (RisingWave's and Flink's form
//! of Nexmark q12): a column the connector does not read, filled with the wall-clock time at
//! which each row enters Eddy. The clause is taken out of the column list before it is parsed
//! (Postgres' grammar has no such column), and the column becomes one more metadata column of
//! the source, as `INCLUDE ...` ones are.

use datafusion::sql::sqlparser::tokenizer::Token;

use crate::{PlanError, Result};

fn is_word(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

fn is_trivia(token: &Token) -> bool {
    matches!(token, Token::Whitespace(_) | Token::EOF)
}

/// The top-level items of the first parenthesised list in `tokens`, as `[start, end)` ranges
/// (`end` at the comma or the closing paren).
fn column_items(tokens: &[Token]) -> Vec<(usize, usize)> {
    let Some(open) = tokens.iter().position(|t| *t == Token::LParen) else {
        return Vec::new();
    };
    let mut items = Vec::new();
    let mut depth = 0;
    let mut start = open + 1;
    for (i, token) in tokens.iter().enumerate().skip(open + 1) {
        match token {
            Token::LParen => depth += 1,
            Token::RParen if depth == 0 => {
                items.push((start, i));
                break;
            }
            Token::RParen => depth -= 1,
            Token::Comma if depth == 0 => {
                items.push((start, i));
                start = i + 1;
            }
            _ => {}
        }
    }
    items
}

/// Removes every `name TIMESTAMPTZ AS PROCTIME()` column from a column list and returns the
/// names, in order.
pub fn take_proctime_columns(tokens: &mut Vec<Token>) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let mut cuts = Vec::new();
    let items = column_items(tokens);
    for (index, &(start, end)) in items.iter().enumerate() {
        let significant: Vec<&Token> = tokens[start..end]
            .iter()
            .filter(|t| !is_trivia(t))
            .collect();
        let n = significant.len();
        let generated = n >= 5
            && is_word(significant[n - 4], "AS")
            && is_word(significant[n - 3], "PROCTIME")
            && *significant[n - 2] == Token::LParen
            && *significant[n - 1] == Token::RParen;
        if !generated {
            continue;
        }
        let name = match significant[0] {
            Token::Word(word) if word.quote_style.is_some() => word.value.clone(),
            Token::Word(word) => word.value.to_lowercase(),
            other => {
                return Err(PlanError::Syntax(format!(
                    "expected a column name before AS PROCTIME(), found {other}"
                )))
            }
        };
        let type_words: Vec<String> = significant[1..n - 4]
            .iter()
            .map(|t| t.to_string().to_uppercase())
            .collect();
        let timestamptz = matches!(
            type_words.iter().map(String::as_str).collect::<Vec<_>>()[..],
            ["TIMESTAMPTZ"] | ["TIMESTAMP", "WITH", "TIME", "ZONE"]
        );
        if !timestamptz {
            return Err(PlanError::Invalid(format!(
                "column \"{name}\" AS PROCTIME() must be TIMESTAMPTZ (the wall clock is an instant), not {}",
                type_words.join(" ")
            )));
        }
        found.push(name);
        // Cut the item with the comma before it (or after it, for the first item).
        cuts.push(if index > 0 {
            (items[index - 1].1, end)
        } else if items.len() > 1 {
            let (next, next_end) = items[1];
            let next_word = (next..next_end)
                .find(|&i| !is_trivia(&tokens[i]))
                .unwrap_or(next);
            (start, next_word)
        } else {
            (start, end)
        });
    }
    if !found.is_empty() && found.len() == items.len() {
        return Err(PlanError::Syntax(
            "a source needs a column its connector reads besides its PROCTIME() column".into(),
        ));
    }
    for (from, to) in cuts.into_iter().rev() {
        tokens.drain(from..to);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    use super::*;

    fn take(sql: &str) -> Result<(Vec<String>, String)> {
        let mut tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
            .tokenize()
            .unwrap();
        let names = take_proctime_columns(&mut tokens)?;
        let rest: String = tokens.iter().map(ToString::to_string).collect();
        Ok((names, rest))
    }

    #[test]
    fn proctime_columns_leave_the_column_list() {
        let (names, rest) =
            take("CREATE TABLE bid (auction BIGINT, p_time TIMESTAMPTZ AS PROCTIME(), price INT)")
                .unwrap();
        assert_eq!(names, vec!["p_time"]);
        assert_eq!(rest, "CREATE TABLE bid (auction BIGINT, price INT)");
        let (names, rest) = take(
            "CREATE TABLE bid (\"P\" TIMESTAMP WITH TIME ZONE AS proctime ( ), auction BIGINT)",
        )
        .unwrap();
        assert_eq!(names, vec!["P"]);
        assert_eq!(rest, "CREATE TABLE bid (auction BIGINT)");
        let (names, rest) = take("CREATE TABLE bid (a INT, b INT)").unwrap();
        assert!(names.is_empty());
        assert_eq!(rest, "CREATE TABLE bid (a INT, b INT)");
    }

    #[test]
    fn a_proctime_column_must_be_timestamptz() {
        let error = take("CREATE TABLE bid (a INT, p TIMESTAMP AS PROCTIME())").unwrap_err();
        assert!(error.to_string().contains("TIMESTAMPTZ"), "{error}");
        let error = take("CREATE TABLE bid (p TIMESTAMPTZ AS PROCTIME())").unwrap_err();
        assert!(error.to_string().contains("besides"), "{error}");
    }
}
