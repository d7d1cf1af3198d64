//! Mutations that know a little grammar, for what blind token swaps rarely reach:
//!
//! - the arguments of windows and intervals: an `INTERVAL '<n>' <unit>` literal given an
//!   extreme count or unit (a HOP of one microsecond over two billion days, a negative step),
//!   the two intervals of a HOP or CUMULATE swapped;
//! - deep nesting in broken statements: `CASE WHEN ... THEN` or brackets nested hundreds or
//!   thousands deep with a token left out or the wrong closer, where a parser that backtracks
//!   multiplies its retries level by level.

use rand::rngs::StdRng;
use rand::Rng;
use sqlparser::tokenizer::Token;

/// Interval counts, from nothing to more than any window can hold.
const COUNTS: &[&str] = &[
    "0",
    "-1",
    "1",
    "2147483647",
    "-2147483648",
    "9223372036854775807",
    "99999999999999999999",
    "0.000001",
    "1e9",
    "",
    "1 day 99999999 hours",
];

const UNITS: &[&str] = &[
    "MICROSECOND",
    "MILLISECOND",
    "SECOND",
    "MINUTE",
    "HOUR",
    "DAY",
    "MONTH",
    "YEAR",
];

/// Changes one `INTERVAL '<n>' [unit]` literal of `tokens` (or swaps a window's two intervals);
/// false when there is none.
pub fn mutate_interval(rng: &mut StdRng, tokens: &mut [Token]) -> bool {
    let literals: Vec<(usize, Option<usize>)> = (0..tokens.len())
        .filter(|&i| is_word(&tokens[i], "INTERVAL"))
        .filter_map(|i| {
            let value = next_significant(tokens, i)?;
            if !matches!(tokens[value], Token::SingleQuotedString(_)) {
                return None;
            }
            let unit = next_significant(tokens, value).filter(|&u| {
                UNITS.iter().any(|unit| {
                    is_word(&tokens[u], unit) || is_word(&tokens[u], &format!("{unit}S"))
                })
            });
            Some((value, unit))
        })
        .collect();
    if literals.is_empty() {
        return false;
    }
    if literals.len() >= 2 && rng.random_bool(0.2) {
        // A HOP's slide and size (or a CUMULATE's step and size) the other way round.
        let at = rng.random_range(0..literals.len() - 1);
        let (a, b) = (literals[at].0, literals[at + 1].0);
        tokens.swap(a, b);
        return true;
    }
    let (value, unit) = literals[rng.random_range(0..literals.len())];
    tokens[value] = Token::SingleQuotedString(COUNTS[rng.random_range(0..COUNTS.len())].into());
    if let Some(unit) = unit {
        if rng.random_bool(0.5) {
            tokens[unit] = Token::make_keyword(UNITS[rng.random_range(0..UNITS.len())]);
        }
    }
    true
}

/// A statement whose expression at a random place is nested `depth` levels deep and broken:
/// one opener too many or too few, a token of the nesting left out, or the wrong closer.
pub fn broken_nesting(rng: &mut StdRng) -> (String, String) {
    let depth = if rng.random_bool(0.7) {
        rng.random_range(5..48)
    } else {
        rng.random_range(500..3_000)
    };
    broken_nesting_of(rng, depth)
}

/// [`broken_nesting`] `depth` levels deep: the text before the expression and after it.
pub fn broken_nesting_of(rng: &mut StdRng, depth: usize) -> (String, String) {
    let (open, close) = match rng.random_range(0..4) {
        0 => ("CASE WHEN true THEN ".to_string(), " END".to_string()),
        1 => ("CASE 1 WHEN 1 THEN ".to_string(), " ELSE 0 END".to_string()),
        2 => ("(".to_string(), ")".to_string()),
        _ => ("(SELECT ".to_string(), ")".to_string()),
    };
    let mut opening: Vec<String> = vec![open.clone(); depth];
    let mut closing: Vec<String> = vec![close.clone(); depth];
    match rng.random_range(0..5) {
        // The form: the closers written as `CASE true THEN 1 END`, one more of them.
        0 => {
            closing = vec![" CASE true THEN 1 END".to_string(); depth + 1];
        }
        1 => {
            let at = rng.random_range(0..depth);
            opening[at] = opening[at].replacen("THEN", "", 1).replacen('(', "", 1);
        }
        2 => {
            closing.pop();
        }
        // One too many: a bracket closed once more, a CASE opened once more (an END more
        // reads as an alias to sqlparser).
        3 if close == ")" => closing.push(close),
        3 => opening.push(open),
        _ => {
            // A closer of the other kind, a stray keyword, or none.
            let at = rng.random_range(0..depth);
            let others = if close.ends_with("END") {
                [")", " THEN", ""]
            } else {
                [" END", " THEN", ""]
            };
            closing[at] = others[rng.random_range(0..others.len())].to_string();
        }
    }
    (opening.concat(), closing.concat())
}

fn is_word(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

fn next_significant(tokens: &[Token], after: usize) -> Option<usize> {
    (after + 1..tokens.len()).find(|&i| !matches!(tokens[i], Token::Whitespace(_)))
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::tokenizer::Tokenizer;

    use super::*;

    #[test]
    fn interval_arguments_are_changed() {
        let sql = "SELECT * FROM HOP(t, ts, INTERVAL '2' SECOND, INTERVAL '10' SECOND)";
        let mut changed = 0;
        for seed in 0..50 {
            let mut tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
                .tokenize()
                .unwrap();
            let mut rng = StdRng::seed_from_u64(seed);
            assert!(mutate_interval(&mut rng, &mut tokens));
            let text: String = tokens.iter().map(|t| t.to_string()).collect();
            changed += usize::from(text != sql);
        }
        assert!(changed > 40, "{changed}");
        let mut tokens = Tokenizer::new(&PostgreSqlDialect {}, "SELECT 1")
            .tokenize()
            .unwrap();
        assert!(!mutate_interval(&mut StdRng::seed_from_u64(1), &mut tokens));
    }

    #[test]
    fn nested_statements_are_broken() {
        // Shallow enough for sqlparser to refuse quickly without a step budget.
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..200 {
            let depth = rng.random_range(2..7);
            let (opening, closing) = broken_nesting_of(&mut rng, depth);
            let sql = format!("SELECT {opening}1{closing}");
            assert!(
                sqlparser::parser::Parser::parse_sql(&PostgreSqlDialect {}, &sql).is_err(),
                "{sql}"
            );
        }
    }
}
