//! Helpers over a statement's tokens: splitting at top-level semicolons, the significant
//! words, matching brackets.

use datafusion::sql::sqlparser::tokenizer::Token;

pub(super) fn is_trivia(token: &Token) -> bool {
    matches!(token, Token::Whitespace(_) | Token::EOF)
}

pub(super) fn render(tokens: &[Token]) -> String {
    tokens.iter().map(|t| t.to_string()).collect()
}

pub(super) fn split_statements(tokens: Vec<Token>) -> Vec<Vec<Token>> {
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
pub(super) fn words(tokens: &[Token]) -> Vec<(usize, String)> {
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

pub(super) fn starts_with(words: &[(usize, String)], expected: &[&str]) -> bool {
    words.len() >= expected.len() && words.iter().zip(expected).all(|((_, w), e)| w == e)
}

pub(super) fn ends_with(words: &[(usize, String)], expected: &[&str]) -> bool {
    words.len() >= expected.len()
        && words[words.len() - expected.len()..]
            .iter()
            .zip(expected)
            .all(|((_, w), e)| w == e)
}

/// The index of the parenthesis closing the one at `open`.
pub(crate) fn matching_paren(tokens: &[Token], open: usize) -> Option<usize> {
    let mut depth = 0;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        match token {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}
