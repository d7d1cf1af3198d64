//! `x BETWEEN SYMMETRIC a AND b`, which sqlparser refuses: true when `x` lies between `a` and
//! `b` taken in either order, as Postgres reads it (`(a <= x AND x <= b) OR (b <= x AND x <=
//! a)`). Before parsing, `SYMMETRIC` becomes a marker call added to the lower bound
//! (`BETWEEN __eddy_symmetric() + a AND b`), which parses wherever the bound does; after,
//! each marked BETWEEN loses the marker and becomes the two ordinary ones. `ASYMMETRIC`, the
//! default, is dropped.

use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr, UnaryOperator};
use datafusion::sql::sqlparser::tokenizer::Token;

const MARKER: &str = "__eddy_symmetric";

fn is_word(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

/// Marks each `BETWEEN SYMMETRIC` of `tokens`, and drops `ASYMMETRIC`.
pub fn mark_symmetric(tokens: Vec<Token>) -> Vec<Token> {
    if !tokens
        .iter()
        .any(|t| is_word(t, "SYMMETRIC") || is_word(t, "ASYMMETRIC"))
    {
        return tokens;
    }
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len() + 4);
    for token in tokens {
        let after_between = out
            .iter()
            .rev()
            .find(|t| !matches!(t, Token::Whitespace(_)))
            .is_some_and(|t| is_word(t, "BETWEEN"));
        if after_between && is_word(&token, "SYMMETRIC") {
            out.extend([
                Token::make_word(MARKER, None),
                Token::LParen,
                Token::RParen,
                Token::Plus,
            ]);
        } else if !(after_between && is_word(&token, "ASYMMETRIC")) {
            out.push(token);
        }
    }
    out
}

/// Removes the marker from the leftmost place of `bound`; whether it was there.
fn strip_marker(bound: &mut Expr) -> bool {
    let Expr::BinaryOp { left, op, right } = bound else {
        return false;
    };
    let marked = *op == BinaryOperator::Plus
        && matches!(left.as_ref(), Expr::Function(f) if f.name.to_string() == MARKER);
    if marked {
        *bound = right.as_ref().clone();
        return true;
    }
    strip_marker(left)
}

/// A marked `BETWEEN` as the two ordinary ones.
pub(crate) fn normalize(expr: &mut Expr) {
    let Expr::Between {
        expr: value,
        negated,
        low,
        high,
    } = expr
    else {
        return;
    };
    if !strip_marker(low) {
        return;
    }
    let between = |low: &Expr, high: &Expr| Expr::Between {
        expr: value.clone(),
        negated: false,
        low: Box::new(low.clone()),
        high: Box::new(high.clone()),
    };
    let either = Expr::Nested(Box::new(Expr::BinaryOp {
        left: Box::new(between(low, high)),
        op: BinaryOperator::Or,
        right: Box::new(between(high, low)),
    }));
    *expr = if *negated {
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr: Box::new(either),
        }
    } else {
        either
    };
}

#[cfg(test)]
mod tests {
    use crate::statement::parse_statements;

    fn parsed(sql: &str) -> String {
        let mut statements = parse_statements(sql).unwrap();
        match statements.remove(0).statement {
            crate::EddyStatement::Sql(statement) => statement.to_string(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn symmetric_bounds_are_taken_in_either_order() {
        assert_eq!(
            parsed("SELECT 5 BETWEEN SYMMETRIC 10 AND 1"),
            "SELECT (5 BETWEEN 10 AND 1 OR 5 BETWEEN 1 AND 10)"
        );
        assert_eq!(
            parsed("SELECT x FROM t WHERE x NOT BETWEEN SYMMETRIC y - 1 AND -2 * y"),
            "SELECT x FROM t WHERE NOT (x BETWEEN y - 1 AND -2 * y OR x BETWEEN -2 * y AND y - 1)"
        );
        assert_eq!(
            parsed("SELECT x BETWEEN ASYMMETRIC 1 AND 2 FROM t"),
            "SELECT x BETWEEN 1 AND 2 FROM t"
        );
        // A column named symmetric is not a keyword elsewhere.
        assert_eq!(parsed("SELECT symmetric FROM t"), "SELECT symmetric FROM t");
    }
}
