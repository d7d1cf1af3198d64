//! Statements too large or too deeply nested to handle safely, refused before they are parsed.
//!
//! sqlparser builds `1 + 1 + ... + 1` as a left-deep tree in a loop, without the recursion its
//! own limit counts, and everything that walks the tree afterwards (planning, cloning, printing,
//! even dropping it) recurses once per level: a few hundred thousand levels overflow a thread's
//! stack and abort the process. The depth is therefore measured on the tokens, where it costs
//! one pass and no recursion: the nesting of brackets plus the longest chain of operators
//! within one bracket level.

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::Token;

use crate::{PlanError, Result};

/// How large and how deep a statement may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatementLimits {
    /// Bytes of SQL text.
    pub max_bytes: usize,
    /// Expression depth, as [`expression_depth`] measures it.
    pub max_depth: usize,
}

/// Expressions may nest this deep by default: far beyond what people or tools write, and far
/// below what overflows a thread's stack.
pub const DEFAULT_MAX_DEPTH: usize = 1_000;

/// sqlparser's own recursion limit, above what any statement within [`DEFAULT_MAX_DEPTH`]
/// needs (a level of nesting is up to three of sqlparser's: a subquery in brackets), so that
/// the depth check above, which names its limit, is the one that refuses. sqlparser grows its
/// stack as it recurses.
pub const PARSER_RECURSION_LIMIT: usize = 3 * DEFAULT_MAX_DEPTH + 100;

impl Default for StatementLimits {
    fn default() -> Self {
        Self {
            max_bytes: 4 << 20,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

/// Refuses SQL text longer than the limit.
pub fn check_size(sql: &str, limits: &StatementLimits) -> Result<()> {
    if sql.len() > limits.max_bytes {
        return Err(PlanError::TooComplex(format!(
            "statement is too long: {} bytes (the limit is {} bytes)",
            sql.len(),
            limits.max_bytes
        )));
    }
    Ok(())
}

/// Refuses tokens whose expressions nest deeper than the limit.
pub fn check_depth(tokens: &[Token], limits: &StatementLimits) -> Result<()> {
    let depth = expression_depth(tokens);
    if depth > limits.max_depth {
        return Err(PlanError::TooComplex(format!(
            "statement is too complex: its expressions nest {depth} levels deep (the limit is {})",
            limits.max_depth
        )));
    }
    Ok(())
}

/// What opened a level of nesting.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Opener {
    Bracket,
    Case,
}

/// An upper bound on the depth of the expression trees the tokens parse into: the nesting of
/// brackets and of `CASE ... END`, plus the most operators chained at one level (a chain
/// restarts at a comma, a semicolon and the keywords that start a clause).
pub fn expression_depth(tokens: &[Token]) -> usize {
    // What opened each level and the operators chained so far in it (the statement itself is
    // level 0, opened by nothing).
    let mut levels: Vec<(Option<Opener>, usize)> = vec![(None, 0)];
    let mut deepest = 0;
    for token in tokens {
        match token {
            Token::LParen | Token::LBracket | Token::LBrace => {
                levels.push((Some(Opener::Bracket), 0))
            }
            // A closing bracket also closes the CASEs left open inside it (the parser will
            // refuse those); one without its opening bracket is the parser's to refuse too.
            Token::RParen | Token::RBracket | Token::RBrace => {
                if let Some(open) = levels
                    .iter()
                    .rposition(|(o, _)| *o == Some(Opener::Bracket))
                {
                    levels.truncate(open);
                }
            }
            Token::Word(word) if word.keyword == Keyword::CASE => {
                levels.push((Some(Opener::Case), 0))
            }
            Token::Word(word)
                if word.keyword == Keyword::END
                    && levels.last().is_some_and(|(o, _)| *o == Some(Opener::Case)) =>
            {
                levels.pop();
            }
            Token::Comma | Token::SemiColon => {
                if let Some((_, chain)) = levels.last_mut() {
                    *chain = 0;
                }
            }
            Token::Word(word) if starts_clause(word.keyword) => {
                if let Some((_, chain)) = levels.last_mut() {
                    *chain = 0;
                }
            }
            token if chains_expression(token) => {
                if let Some((_, chain)) = levels.last_mut() {
                    *chain += 1;
                }
            }
            _ => {}
        }
        let depth = levels.len() - 1 + levels.last().map_or(0, |(_, chain)| *chain);
        deepest = deepest.max(depth);
    }
    deepest
}

fn starts_clause(keyword: Keyword) -> bool {
    matches!(
        keyword,
        Keyword::SELECT
            | Keyword::FROM
            | Keyword::WHERE
            | Keyword::GROUP
            | Keyword::HAVING
            | Keyword::ORDER
            | Keyword::LIMIT
            | Keyword::OFFSET
            | Keyword::ON
            | Keyword::USING
            | Keyword::JOIN
            | Keyword::WHEN
            | Keyword::THEN
            | Keyword::ELSE
            | Keyword::END
            | Keyword::VALUES
            | Keyword::SET
            | Keyword::UNION
            | Keyword::INTERSECT
            | Keyword::EXCEPT
            | Keyword::RETURNING
            | Keyword::WITH
    )
}

/// A token that adds a level to the expression it continues: an infix or postfix operator.
fn chains_expression(token: &Token) -> bool {
    match token {
        Token::Word(word) => matches!(
            word.keyword,
            Keyword::AND
                | Keyword::OR
                | Keyword::IS
                | Keyword::LIKE
                | Keyword::ILIKE
                | Keyword::SIMILAR
                | Keyword::BETWEEN
                | Keyword::IN
                | Keyword::COLLATE
                | Keyword::AT
                | Keyword::NOT
        ),
        Token::Whitespace(_)
        | Token::EOF
        | Token::Number(..)
        | Token::Char(_)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::TripleSingleQuotedString(_)
        | Token::TripleDoubleQuotedString(_)
        | Token::DollarQuotedString(_)
        | Token::SingleQuotedByteStringLiteral(_)
        | Token::DoubleQuotedByteStringLiteral(_)
        | Token::TripleSingleQuotedByteStringLiteral(_)
        | Token::TripleDoubleQuotedByteStringLiteral(_)
        | Token::SingleQuotedRawStringLiteral(_)
        | Token::DoubleQuotedRawStringLiteral(_)
        | Token::TripleSingleQuotedRawStringLiteral(_)
        | Token::TripleDoubleQuotedRawStringLiteral(_)
        | Token::NationalStringLiteral(_)
        | Token::QuoteDelimitedStringLiteral(_)
        | Token::NationalQuoteDelimitedStringLiteral(_)
        | Token::EscapedStringLiteral(_)
        | Token::UnicodeStringLiteral(_)
        | Token::HexStringLiteral(_)
        | Token::Placeholder(_)
        | Token::Period
        | Token::Colon
        | Token::Backslash => false,
        // Every other symbol is an operator (`+`, `||`, `::`, `->>`, `=`, ...).
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    fn depth(sql: &str) -> usize {
        let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
            .tokenize()
            .unwrap();
        expression_depth(&tokens)
    }

    #[test]
    fn depth_counts_chains_and_brackets() {
        assert_eq!(depth("SELECT 1"), 0);
        assert_eq!(depth("SELECT 1 + 2 + 3"), 2);
        // Commas and clauses start new chains; brackets add a level.
        assert_eq!(depth("SELECT a + b, c + d FROM t WHERE x = 1"), 1);
        assert_eq!(depth("SELECT ((1 + 2))"), 3);
        assert_eq!(depth("SELECT f(g(h(1)))"), 3);
        let long = format!("SELECT 1{}", "+1".repeat(5000));
        assert_eq!(depth(&long), 5000);
        // A long list of values stays shallow.
        let values = format!("INSERT INTO t VALUES {}", vec!["(1, -2)"; 5000].join(", "));
        assert!(depth(&values) <= 3, "{}", depth(&values));
    }

    #[test]
    fn depth_counts_case_nesting() {
        let nested = |n: usize| {
            format!(
                "SELECT {}1{}",
                "CASE WHEN true THEN ".repeat(n),
                " END".repeat(n)
            )
        };
        assert_eq!(depth(&nested(48)), 48);
        assert_eq!(depth(&nested(3000)), 3000);
        // CASEs after one another stay shallow; an END of a block is a clause.
        let flat = format!(
            "SELECT {}",
            vec!["CASE WHEN a THEN 1 ELSE 2 END"; 500].join(", ")
        );
        assert!(depth(&flat) <= 2, "{}", depth(&flat));
        // A bracket closes the CASEs left open inside it.
        assert_eq!(depth("SELECT (CASE WHEN (CASE x) THEN 1 END) + 1"), 4);
    }

    #[test]
    fn limits_refuse_with_too_complex() {
        let limits = StatementLimits {
            max_bytes: 10,
            max_depth: 2,
        };
        assert!(matches!(
            check_size("SELECT 1 + 1", &limits),
            Err(PlanError::TooComplex(_))
        ));
        let tokens = Tokenizer::new(&PostgreSqlDialect {}, "SELECT 1+1+1+1")
            .tokenize()
            .unwrap();
        assert!(matches!(
            check_depth(&tokens, &limits),
            Err(PlanError::TooComplex(_))
        ));
    }
}
