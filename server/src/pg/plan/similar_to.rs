//! `SIMILAR TO` as Postgres reads it. DataFusion matches the pattern as a regular expression
//! anywhere in the text (`'abc' SIMILAR TO 'a%'` was false, `'abc' SIMILAR TO '(a|b)c'`
//! true); Postgres matches the whole text, with `%` and `_` as in LIKE and `|`, `*`, `+`, `?`,
//! `{m,n}`, `()` and `[]` as in regular expressions. Each pattern is
//! wrapped in `similar_to_regex(pattern[, escape])`, Postgres' translation to an anchored
//! regular expression (its `similar_to_escape`). The rule runs after type coercion, when the
//! pattern is text.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::Result;
use datafusion::logical_expr::expr::{Like, ScalarFunction};
use datafusion::logical_expr::{lit, Expr, LogicalPlan, ScalarUDF};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionContext;

use crate::pg::functions::{function, text_arg};

const FUNCTION: &str = "similar_to_regex";

pub fn install(ctx: &SessionContext) {
    ctx.register_udf(translation());
    ctx.add_analyzer_rule(Arc::new(SimilarToPatterns));
}

fn translation() -> ScalarUDF {
    let text = DataType::Utf8;
    function(
        FUNCTION,
        &[vec![text.clone()], vec![text.clone(), text]],
        DataType::Utf8,
        |args: &[ArrayRef], rows| {
            let regexes = (0..rows).map(|i| {
                let escape = match args.get(1) {
                    // An empty escape turns escaping off, as `ESCAPE ''` does.
                    Some(escape) => text_arg(escape, i).map(|e| e.chars().next()),
                    None => Some(Some('\\')),
                };
                Some(to_regex(&text_arg(&args[0], i)?, escape?))
            });
            Ok(Arc::new(regexes.collect::<StringArray>()))
        },
    )
}

#[derive(Debug)]
struct SimilarToPatterns;

impl AnalyzerRule for SimilarToPatterns {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let function = Arc::new(translation());
        crate::pg::plan::expr_rewrites::rewrite_keeping_names(plan, |expr, _| {
            let Expr::SimilarTo(like) = expr else {
                return Ok(Transformed::no(expr));
            };
            let translated =
                |e: &Expr| matches!(e, Expr::ScalarFunction(c) if c.func.name() == FUNCTION);
            if translated(like.pattern.as_ref()) {
                return Ok(Transformed::no(Expr::SimilarTo(like)));
            }
            let escape = lit(like.escape_char.unwrap_or('\\').to_string());
            let pattern = Expr::ScalarFunction(ScalarFunction::new_udf(
                function.clone(),
                vec![*like.pattern, escape],
            ));
            Ok(Transformed::yes(Expr::SimilarTo(Like {
                pattern: Box::new(pattern),
                escape_char: None,
                ..like
            })))
        })
    }

    fn name(&self) -> &str {
        "eddy_similar_to_patterns"
    }
}

/// Postgres' translation of a SIMILAR TO pattern into an anchored regular expression.
fn to_regex(pattern: &str, escape: Option<char>) -> String {
    let mut out = String::from("^(?:");
    let (mut after_escape, mut in_brackets) = (false, 0usize);
    for c in pattern.chars() {
        if after_escape {
            out.push('\\');
            out.push(c);
            after_escape = false;
        } else if Some(c) == escape {
            after_escape = true;
        } else if in_brackets > 0 {
            match c {
                '\\' => out.push_str("\\\\"),
                ']' => {
                    in_brackets -= 1;
                    out.push(c);
                }
                _ => out.push(c),
            }
        } else {
            match c {
                '[' => {
                    in_brackets += 1;
                    out.push(c);
                }
                '%' => out.push_str(".*"),
                '_' => out.push('.'),
                '(' => out.push_str("(?:"),
                '\\' | '.' | '^' | '$' => {
                    out.push('\\');
                    out.push(c);
                }
                _ => out.push(c),
            }
        }
    }
    out.push_str(")$");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn similar(text: &str, pattern: &str) -> bool {
        let ctx = SessionContext::new();
        install(&ctx);
        let sql = format!("SELECT '{text}' SIMILAR TO '{pattern}'");
        let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        let column = batches[0].column(0);
        let answer = column
            .as_any()
            .downcast_ref::<datafusion::arrow::array::BooleanArray>()
            .unwrap();
        answer.value(0)
    }

    #[tokio::test]
    async fn whole_text_with_like_wildcards_and_regex_operators() {
        let cases = [
            ("abc", "a%", true),
            ("abc", "(a|b)c", false),
            ("bc", "(a|b)c", true),
            ("abc", "%(b|d)%", true),
            ("abc", "_b", false),
            ("a.c", "a\\.c", true),
            ("abc", "a.c", false),
            ("aaa", "a{2,3}", true),
            ("x%", "x\\%", true),
            ("b", "[a-c]", true),
        ];
        for (text, pattern, expected) in cases {
            assert_eq!(
                similar(text, pattern).await,
                expected,
                "{text} SIMILAR TO {pattern}"
            );
        }
    }

    #[test]
    fn translation_is_anchored() {
        assert_eq!(to_regex("a%_(b|c).", Some('\\')), "^(?:a.*.(?:b|c)\\.)$");
    }
}
