//! A parse that ends in bounded time, whatever the text.
//!
//! sqlparser backtracks: where a construct fails it tries another reading of the same tokens
//! (a keyword as an identifier, a parenthesis as a subquery). Nested inside each other, those
//! retries multiply: a malformed `CASE WHEN true THEN` nested 24 levels took 13 s to refuse,
//! every level doubling it. So a parse gets a budget of steps, a few per token, counted where
//! sqlparser asks its dialect about each expression (its prefix, its infix operators) and each
//! statement; once spent, every such question fails and the parse unwinds at once. The same
//! check stops it at a deadline (the statement's timeout).
//!
//! The dialect is PostgreSQL's, wrapped: every method PostgreSQL's dialect defines is passed on
//! to it, and the parser still sees a PostgreSQL dialect.

use std::any::TypeId;
use std::cell::Cell;
use std::time::Instant;

use datafusion::sql::sqlparser::ast::{Expr, Statement};
use datafusion::sql::sqlparser::dialect::{Dialect, PostgreSqlDialect, Precedence};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};

use crate::PlanError;

/// Steps a parse may take per significant token, and in all at least: a statement that
/// parses without backtracking takes about two per token (measured over the test suites).
pub const STEPS_PER_TOKEN: u64 = 8;
pub const MIN_STEPS: u64 = 10_000;

/// What a parse may spend.
#[derive(Debug, Clone, Copy, Default)]
pub struct ParseBudget {
    /// Steps in all (`None`: no limit, for SQL Eddy wrote itself, read back from its catalog).
    pub steps: Option<u64>,
    /// When the statement's time is up.
    pub deadline: Option<Instant>,
}

impl ParseBudget {
    /// No limit: for SQL that was accepted before (a view's definition, read back).
    pub fn unlimited() -> Self {
        Self::default()
    }

    /// The budget for a statement of `tokens` significant tokens, to end by `deadline`.
    pub fn for_tokens(tokens: usize, deadline: Option<Instant>) -> Self {
        let steps = (tokens as u64)
            .saturating_mul(STEPS_PER_TOKEN)
            .max(MIN_STEPS);
        Self {
            steps: Some(steps),
            deadline,
        }
    }
}

/// Why a parse stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhausted {
    /// It took more steps than its budget.
    Steps(u64),
    /// Its deadline passed.
    Deadline,
}

/// The error a stopped parse answers: 54001 for a spent budget, 57014 for a deadline.
pub fn refusal(reason: Exhausted) -> PlanError {
    match reason {
        Exhausted::Steps(limit) => PlanError::TooComplex(format!(
            "statement is too complex to parse: it needs more than {limit} parser steps \
             ({STEPS_PER_TOKEN} per token); check it for unbalanced CASE ... END or parentheses"
        )),
        Exhausted::Deadline => {
            PlanError::Canceled("canceling statement due to statement timeout".into())
        }
    }
}

/// How often (in steps) the clock is read.
const CLOCK_EVERY: u64 = 1024;

/// PostgreSQL's dialect, counting the parser's steps against a budget.
#[derive(Debug)]
pub struct BudgetedDialect {
    inner: PostgreSqlDialect,
    budget: ParseBudget,
    steps: Cell<u64>,
    exhausted: Cell<Option<Exhausted>>,
}

impl BudgetedDialect {
    pub fn new(budget: ParseBudget) -> Self {
        Self {
            inner: PostgreSqlDialect {},
            budget,
            steps: Cell::new(0),
            exhausted: Cell::new(None),
        }
    }

    /// Why the parse was stopped, if it was.
    pub fn exhausted(&self) -> Option<Exhausted> {
        self.exhausted.get()
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.steps.get()
    }

    /// Counts a step; an error once the budget is spent. The error is the one sqlparser
    /// passes through its retries untouched (a recursion limit), so the parse unwinds.
    fn step(&self) -> Result<(), ParserError> {
        if self.exhausted.get().is_some() {
            return Err(ParserError::RecursionLimitExceeded);
        }
        let steps = self.steps.get() + 1;
        self.steps.set(steps);
        let over = match self.budget.steps {
            Some(limit) if steps > limit => Some(Exhausted::Steps(limit)),
            _ => None,
        };
        let late = || {
            steps.is_multiple_of(CLOCK_EVERY)
                && self.budget.deadline.is_some_and(|d| Instant::now() >= d)
        };
        match over.or_else(|| late().then_some(Exhausted::Deadline)) {
            Some(reason) => {
                self.exhausted.set(Some(reason));
                Err(ParserError::RecursionLimitExceeded)
            }
            None => Ok(()),
        }
    }
}

impl Dialect for BudgetedDialect {
    // The parser's `dialect_of!(self is PostgreSqlDialect)` checks see PostgreSQL.
    fn dialect(&self) -> TypeId {
        TypeId::of::<PostgreSqlDialect>()
    }

    fn parse_prefix(&self, parser: &mut Parser) -> Option<Result<Expr, ParserError>> {
        if let Err(error) = self.step() {
            return Some(Err(error));
        }
        self.inner.parse_prefix(parser)
    }

    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        if let Err(error) = self.step() {
            return Some(Err(error));
        }
        self.inner.parse_infix(parser, expr, precedence)
    }

    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        if let Err(error) = self.step() {
            return Some(Err(error));
        }
        self.inner.get_next_precedence(parser)
    }

    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        if let Err(error) = self.step() {
            return Some(Err(error));
        }
        self.inner.parse_statement(parser)
    }

    // Everything else PostgreSQL's dialect defines, passed on.

    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        self.inner.identifier_quote_style(identifier)
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        self.inner.is_delimited_identifier_start(ch)
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        self.inner.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        self.inner.is_identifier_part(ch)
    }

    fn supports_unicode_string_literal(&self) -> bool {
        self.inner.supports_unicode_string_literal()
    }

    fn is_reserved_for_identifier(&self, kw: Keyword) -> bool {
        self.inner.is_reserved_for_identifier(kw)
    }

    fn is_custom_operator_part(&self, ch: char) -> bool {
        self.inner.is_custom_operator_part(ch)
    }

    fn supports_filter_during_aggregation(&self) -> bool {
        self.inner.supports_filter_during_aggregation()
    }

    fn supports_group_by_expr(&self) -> bool {
        self.inner.supports_group_by_expr()
    }

    fn prec_value(&self, prec: Precedence) -> u8 {
        self.inner.prec_value(prec)
    }

    fn allow_extract_custom(&self) -> bool {
        self.inner.allow_extract_custom()
    }

    fn allow_extract_single_quotes(&self) -> bool {
        self.inner.allow_extract_single_quotes()
    }

    fn supports_create_index_with_clause(&self) -> bool {
        self.inner.supports_create_index_with_clause()
    }

    fn supports_explain_with_utility_options(&self) -> bool {
        self.inner.supports_explain_with_utility_options()
    }

    fn supports_listen_notify(&self) -> bool {
        self.inner.supports_listen_notify()
    }

    fn supports_factorial_operator(&self) -> bool {
        self.inner.supports_factorial_operator()
    }

    fn supports_bitwise_shift_operators(&self) -> bool {
        self.inner.supports_bitwise_shift_operators()
    }

    fn supports_comment_on(&self) -> bool {
        self.inner.supports_comment_on()
    }

    fn supports_load_extension(&self) -> bool {
        self.inner.supports_load_extension()
    }

    fn supports_named_fn_args_with_colon_operator(&self) -> bool {
        self.inner.supports_named_fn_args_with_colon_operator()
    }

    fn supports_named_fn_args_with_expr_name(&self) -> bool {
        self.inner.supports_named_fn_args_with_expr_name()
    }

    fn supports_empty_projections(&self) -> bool {
        self.inner.supports_empty_projections()
    }

    fn supports_nested_comments(&self) -> bool {
        self.inner.supports_nested_comments()
    }

    fn supports_string_escape_constant(&self) -> bool {
        self.inner.supports_string_escape_constant()
    }

    fn supports_numeric_literal_underscores(&self) -> bool {
        self.inner.supports_numeric_literal_underscores()
    }

    fn supports_array_typedef_with_brackets(&self) -> bool {
        self.inner.supports_array_typedef_with_brackets()
    }

    fn supports_geometric_types(&self) -> bool {
        self.inner.supports_geometric_types()
    }

    fn supports_set_names(&self) -> bool {
        self.inner.supports_set_names()
    }

    fn supports_alter_column_type_using(&self) -> bool {
        self.inner.supports_alter_column_type_using()
    }

    fn supports_notnull_operator(&self) -> bool {
        self.inner.supports_notnull_operator()
    }

    fn supports_interval_options(&self) -> bool {
        self.inner.supports_interval_options()
    }

    fn supports_insert_table_alias(&self) -> bool {
        self.inner.supports_insert_table_alias()
    }

    fn supports_create_table_like_parenthesized(&self) -> bool {
        self.inner.supports_create_table_like_parenthesized()
    }

    fn supports_select_wildcard_with_alias(&self) -> bool {
        self.inner.supports_select_wildcard_with_alias()
    }

    fn supports_comma_separated_trim(&self) -> bool {
        self.inner.supports_comma_separated_trim()
    }

    fn supports_xml_expressions(&self) -> bool {
        self.inner.supports_xml_expressions()
    }

    fn supports_comment_optimizer_hint(&self) -> bool {
        self.inner.supports_comment_optimizer_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

    use super::*;

    /// The statements of the .slt suites: each record's SQL, from the line after `statement`
    /// or `query` up to a blank line or `----`.
    fn suite_statements() -> Vec<String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sqllogictest/slt");
        let mut files = Vec::new();
        let mut folders = vec![root];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|e| e == "slt") {
                    files.push(path);
                }
            }
        }
        let mut statements = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(file).unwrap();
            let mut current: Option<String> = None;
            for line in text.lines() {
                match &mut current {
                    Some(sql) if line.trim().is_empty() || line.starts_with("----") => {
                        statements.push(std::mem::take(sql));
                        current = None;
                    }
                    Some(sql) => {
                        sql.push_str(line);
                        sql.push('\n');
                    }
                    None if line.starts_with("statement ") || line.starts_with("query ") => {
                        current = Some(String::new())
                    }
                    None => {}
                }
            }
            statements.extend(current);
        }
        statements
    }

    fn significant(tokens: &[Token]) -> usize {
        tokens
            .iter()
            .filter(|t| !matches!(t, Token::Whitespace(_) | Token::EOF))
            .count()
    }

    /// Every statement of the suites that sqlparser reads (Eddy's own statements are cut out
    /// before it) parses alike through the wrapped dialect, in a small part of its budget.
    #[test]
    fn the_suites_parse_alike_and_well_within_the_budget() {
        let statements = suite_statements();
        assert!(statements.len() > 1000, "{}", statements.len());
        let mut compared = 0;
        let mut worst = (0.0f64, String::new());
        for sql in &statements {
            let Ok(tokens) = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize() else {
                continue;
            };
            let plain = Parser::new(&PostgreSqlDialect {})
                .with_tokens(tokens.clone())
                .parse_statements();
            let dialect = BudgetedDialect::new(ParseBudget::unlimited());
            let wrapped = Parser::new(&dialect)
                .with_tokens(tokens.clone())
                .parse_statements();
            assert_eq!(
                format!("{plain:?}"),
                format!("{wrapped:?}"),
                "the wrapped dialect read this differently:\n{sql}"
            );
            if wrapped.is_ok() {
                compared += 1;
                let per_token = dialect.steps() as f64 / significant(&tokens).max(1) as f64;
                if per_token > worst.0 {
                    worst = (per_token, sql.clone());
                }
            }
        }
        assert!(compared > 1000, "{compared}");
        println!(
            "{compared} statements, at most {:.1} steps per token",
            worst.0
        );
        assert!(
            worst.0 * 4.0 <= STEPS_PER_TOKEN as f64,
            "{:.1} steps per token:\n{}",
            worst.0,
            worst.1
        );
    }

    #[test]
    fn backtracking_stops_at_the_budget() {
        // Each level doubles sqlparser's retries: 24 levels took 13 s unbounded.
        let n = 24;
        let sql = format!(
            "SELECT {}{}",
            "CASE WHEN true THEN ".repeat(n),
            "CASE true THEN 1 END ".repeat(n + 1)
        );
        let tokens = Tokenizer::new(&PostgreSqlDialect {}, &sql)
            .tokenize()
            .unwrap();
        let budget = ParseBudget::for_tokens(significant(&tokens), None);
        let dialect = BudgetedDialect::new(budget);
        let started = Instant::now();
        let outcome = Parser::new(&dialect).with_tokens(tokens).parse_statements();
        assert!(outcome.is_err());
        assert_eq!(dialect.exhausted(), Some(Exhausted::Steps(MIN_STEPS)));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn a_deadline_stops_the_parse() {
        let sql = format!(
            "SELECT {}{}",
            "CASE WHEN true THEN ".repeat(30),
            "CASE true THEN 1 END ".repeat(31)
        );
        let tokens = Tokenizer::new(&PostgreSqlDialect {}, &sql)
            .tokenize()
            .unwrap();
        let dialect = BudgetedDialect::new(ParseBudget {
            steps: None,
            deadline: Some(Instant::now() + std::time::Duration::from_millis(50)),
        });
        let started = Instant::now();
        assert!(Parser::new(&dialect)
            .with_tokens(tokens)
            .parse_statements()
            .is_err());
        assert_eq!(dialect.exhausted(), Some(Exhausted::Deadline));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}
