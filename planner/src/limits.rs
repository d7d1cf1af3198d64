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

/// Subqueries in expressions (scalar ones, `IN`, `EXISTS`) may nest this deep: DataFusion's
/// planning of them takes time exponential in their nesting (10 levels 0.3 s, 15 levels 13 s,
/// 20 more than a minute, in a debug build). Subqueries in `FROM` and `WITH` are not counted.
pub const MAX_EXPRESSION_SUBQUERY_DEPTH: usize = 10;

/// Refuses tokens whose expressions nest deeper than the limit, or whose subqueries in
/// expressions nest deeper than [`MAX_EXPRESSION_SUBQUERY_DEPTH`].
pub fn check_depth(tokens: &[Token], limits: &StatementLimits) -> Result<()> {
    let depth = expression_depth(tokens);
    if depth > limits.max_depth {
        return Err(PlanError::TooComplex(format!(
            "statement is too complex: its expressions nest {depth} levels deep (the limit is {})",
            limits.max_depth
        )));
    }
    let subqueries = expression_subquery_depth(tokens);
    if subqueries > MAX_EXPRESSION_SUBQUERY_DEPTH {
        return Err(PlanError::TooComplex(format!(
            "statement is too complex: its subqueries in expressions nest {subqueries} levels \
             deep (the limit is {MAX_EXPRESSION_SUBQUERY_DEPTH}; a subquery in FROM or WITH is \
             not counted)"
        )));
    }
    Ok(())
}

/// One bracket level, for [`expression_subquery_depth`].
struct SubqueryFrame {
    /// A subquery in an expression opened it.
    counted: bool,
    /// The level is in a FROM clause (a subquery opened there is a derived table).
    in_from: bool,
}

/// How deep subqueries in expressions nest: a bracket opening a query (`SELECT`, `VALUES`,
/// `WITH`) counts unless it is in a FROM clause or follows `AS` (a CTE, `CREATE TABLE AS`).
pub fn expression_subquery_depth(tokens: &[Token]) -> usize {
    let significant: Vec<&Token> = tokens
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let opens_query = |token: Option<&&Token>| {
        matches!(token, Some(Token::Word(w))
            if matches!(w.keyword, Keyword::SELECT | Keyword::VALUES | Keyword::WITH))
    };
    let mut frames = vec![SubqueryFrame {
        counted: false,
        in_from: false,
    }];
    let (mut depth, mut deepest) = (0usize, 0usize);
    for (i, token) in significant.iter().enumerate() {
        match token {
            Token::LParen => {
                let query = opens_query(significant.get(i + 1));
                let after_as = i > 0
                    && matches!(significant[i - 1], Token::Word(w) if w.keyword == Keyword::AS);
                let parent_in_from = frames.last().is_some_and(|f| f.in_from);
                let counted = query && !parent_in_from && !after_as;
                if counted {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                frames.push(SubqueryFrame {
                    counted,
                    // A plain bracket in FROM (a parenthesized join) is still in FROM.
                    in_from: !query && parent_in_from,
                });
            }
            Token::RParen if frames.len() > 1 && frames.last().is_some_and(|f| f.counted) => {
                frames.pop();
                depth -= 1;
            }
            Token::RParen if frames.len() > 1 => {
                frames.pop();
            }
            Token::Word(word) => {
                if let Some(frame) = frames.last_mut() {
                    match word.keyword {
                        Keyword::FROM | Keyword::JOIN => frame.in_from = true,
                        Keyword::SELECT
                        | Keyword::WHERE
                        | Keyword::ON
                        | Keyword::USING
                        | Keyword::HAVING
                        | Keyword::GROUP
                        | Keyword::ORDER
                        | Keyword::LIMIT
                        | Keyword::SET
                        | Keyword::VALUES
                        | Keyword::RETURNING => frame.in_from = false,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    deepest
}

/// What opened a level of nesting.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Opener {
    Bracket,
    Case,
}

/// One level of nesting, for [`expression_depth`].
struct Level {
    /// What opened it (`None`: the statement itself).
    opener: Option<Opener>,
    /// Operators chained so far in it.
    chain: usize,
    /// Set operations in it: `SELECT ... UNION ALL SELECT ...` is a tree one level deeper per
    /// set operation, however its clauses restart the chains.
    set_operations: usize,
}

impl Level {
    fn opened_by(opener: Option<Opener>) -> Self {
        Self {
            opener,
            chain: 0,
            set_operations: 0,
        }
    }
}

/// An upper bound on the depth of the trees the tokens parse into: the nesting of brackets and
/// of `CASE ... END`, plus the most operators chained at one level (a chain restarts at a
/// comma, a semicolon and the keywords that start a clause) and the set operations at it.
pub fn expression_depth(tokens: &[Token]) -> usize {
    let mut levels = vec![Level::opened_by(None)];
    let mut deepest = 0;
    for token in tokens {
        match token {
            Token::LParen | Token::LBracket | Token::LBrace => {
                levels.push(Level::opened_by(Some(Opener::Bracket)))
            }
            // A closing bracket also closes the CASEs left open inside it (the parser will
            // refuse those); one without its opening bracket is the parser's to refuse too.
            Token::RParen | Token::RBracket | Token::RBrace => {
                if let Some(open) = levels
                    .iter()
                    .rposition(|l| l.opener == Some(Opener::Bracket))
                {
                    levels.truncate(open);
                }
            }
            Token::Word(word) if word.keyword == Keyword::CASE => {
                levels.push(Level::opened_by(Some(Opener::Case)))
            }
            Token::Word(word)
                if word.keyword == Keyword::END
                    && levels
                        .last()
                        .is_some_and(|l| l.opener == Some(Opener::Case)) =>
            {
                levels.pop();
            }
            Token::Word(word)
                if matches!(
                    word.keyword,
                    Keyword::UNION | Keyword::INTERSECT | Keyword::EXCEPT
                ) =>
            {
                if let Some(level) = levels.last_mut() {
                    level.chain = 0;
                    level.set_operations += 1;
                }
            }
            Token::SemiColon => {
                if let Some(level) = levels.last_mut() {
                    level.chain = 0;
                    level.set_operations = 0;
                }
            }
            Token::Comma => {
                if let Some(level) = levels.last_mut() {
                    level.chain = 0;
                }
            }
            Token::Word(word) if starts_clause(word.keyword) => {
                if let Some(level) = levels.last_mut() {
                    level.chain = 0;
                }
            }
            token if chains_expression(token) => {
                if let Some(level) = levels.last_mut() {
                    level.chain += 1;
                }
            }
            _ => {}
        }
        let depth = levels.len() - 1
            + levels
                .last()
                .map_or(0, |level| level.chain + level.set_operations);
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
    fn set_operations_chain() {
        let unions = vec!["SELECT 1"; 1_000].join(" UNION ALL ");
        assert_eq!(depth(&unions), 999);
        let nested = format!("SELECT * FROM ({unions}) t UNION SELECT 2");
        assert_eq!(depth(&nested), 1_000);
        // Statements after one another start afresh.
        assert_eq!(depth("SELECT 1 UNION SELECT 2; SELECT 3 UNION SELECT 4"), 1);
    }

    fn subqueries(sql: &str) -> usize {
        let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
            .tokenize()
            .unwrap();
        expression_subquery_depth(&tokens)
    }

    #[test]
    fn subqueries_in_expressions_are_counted_those_in_from_are_not() {
        let scalar = |n: usize| format!("SELECT {}1{}", "(SELECT ".repeat(n), ")".repeat(n));
        assert_eq!(subqueries(&scalar(11)), 11);
        assert_eq!(
            subqueries("SELECT 1 WHERE x IN (SELECT y FROM t WHERE EXISTS (SELECT 1))"),
            2
        );
        let mut derived = "SELECT 1 AS a".to_string();
        for i in 0..50 {
            derived = format!("SELECT a FROM ({derived}) t{i}");
        }
        assert_eq!(subqueries(&derived), 0);
        assert_eq!(
            subqueries("SELECT * FROM t JOIN (SELECT 1) u ON t.a = (SELECT 2)"),
            1
        );
        assert_eq!(
            subqueries("WITH a AS (SELECT 1), b AS (WITH c AS (SELECT 2) SELECT 3) SELECT 4"),
            0
        );
        assert_eq!(
            subqueries("INSERT INTO t VALUES (1, (SELECT (SELECT 2)))"),
            2
        );
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
