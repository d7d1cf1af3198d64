//! Postgres operators and keywords DataFusion parses but cannot plan, as the function calls
//! they stand for (rewritten with the literals, right after parsing, so that a view's SQL
//! plans the same at restart): `|/ x` is `sqrt(x)`, `||/ x` `cbrt(x)`, `@ x` `abs(x)`, `~ x`
//! (bitwise not) `-x - 1`, `a ^@ b` `starts_with(a, b)`; `LOCALTIMESTAMP` and `LOCALTIME` are
//! `now()` as a `timestamp` and a `time` (the session's clock, as a cast of `now()` is).
//!
//! `array_agg(DISTINCT x)` and `string_agg(DISTINCT x, ...)` are ordered by `x`: Postgres
//! sorts a DISTINCT aggregate's input to remove the repeats, and clients see the values in
//! that order (`{1,2,3}`); DataFusion's hash set gave them in any order.

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, DuplicateTreatment, Expr, FunctionArg, FunctionArgExpr, FunctionArgumentClause,
    FunctionArguments, OrderByExpr, OrderByOptions, UnaryOperator,
};

pub(crate) fn normalize(expr: &mut Expr) {
    let sql = match expr {
        Expr::Between { .. } => return crate::between_symmetric::normalize(expr),
        Expr::Function(function) => {
            let name = function.name.to_string().to_ascii_lowercase();
            if matches!(function.args, FunctionArguments::None) {
                if let Some(clock) = local_clock(&name) {
                    if let Some(call) = crate::pg_literals::parse_expr(clock) {
                        *expr = call;
                    }
                }
                return;
            }
            if name != "array_agg" && name != "string_agg" {
                return;
            }
            let FunctionArguments::List(list) = &mut function.args else {
                return;
            };
            let ordered = list
                .clauses
                .iter()
                .any(|c| matches!(c, FunctionArgumentClause::OrderBy(_)));
            let first = match list.args.first() {
                Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(first))) => first.clone(),
                _ => return,
            };
            if list.duplicate_treatment == Some(DuplicateTreatment::Distinct) && !ordered {
                list.clauses
                    .push(FunctionArgumentClause::OrderBy(vec![OrderByExpr {
                        expr: first,
                        options: OrderByOptions {
                            asc: None,
                            nulls_first: None,
                        },
                        with_fill: None,
                    }]));
            }
            return;
        }
        Expr::UnaryOp { op, expr: operand } => match op {
            UnaryOperator::PGSquareRoot => format!("sqrt({operand})"),
            UnaryOperator::PGCubeRoot => format!("cbrt({operand})"),
            UnaryOperator::PGAbs => format!("abs({operand})"),
            UnaryOperator::BitwiseNot => format!("(-({operand}) - 1)"),
            _ => return,
        },
        Expr::BinaryOp {
            left,
            op: BinaryOperator::PGStartsWith,
            right,
        } => format!("starts_with({left}, {right})"),
        Expr::Identifier(ident) if ident.quote_style.is_none() => {
            match local_clock(&ident.value.to_ascii_lowercase()) {
                Some(clock) => clock.to_string(),
                None => return,
            }
        }
        _ => return,
    };
    if let Some(call) = crate::pg_literals::parse_expr(&sql) {
        *expr = call;
    }
}

/// `LOCALTIMESTAMP` and `LOCALTIME` (parsed as argument-less functions or as identifiers).
fn local_clock(name: &str) -> Option<&'static str> {
    match name {
        "localtimestamp" => Some("CAST(now() AS TIMESTAMP)"),
        "localtime" => Some("CAST(CAST(now() AS TIMESTAMP) AS TIME)"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::ast::{visit_expressions_mut, Statement};
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn normalized(sql: &str) -> String {
        let mut statement: Statement = Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .unwrap()
            .remove(0);
        let _ = visit_expressions_mut(&mut statement, |expr| {
            super::normalize(expr);
            std::ops::ControlFlow::<()>::Continue(())
        });
        statement.to_string()
    }

    #[test]
    fn operators_become_the_functions_they_stand_for() {
        assert_eq!(
            normalized("SELECT |/ 16.0, ||/ 27, @ -5, ~ 5, 'abc' ^@ 'ab'"),
            "SELECT sqrt(16.0), cbrt(27), abs(-5), (-(5) - 1), starts_with('abc', 'ab')"
        );
        assert_eq!(
            normalized("SELECT @ (x - 3) FROM t WHERE ~ x > 0"),
            "SELECT abs((x - 3)) FROM t WHERE (-(x) - 1) > 0"
        );
        assert_eq!(
            normalized("SELECT localtimestamp, \"localtime\""),
            "SELECT CAST(now() AS TIMESTAMP), \"localtime\""
        );
        assert_eq!(
            normalized("SELECT array_agg(DISTINCT x), string_agg(DISTINCT y, ','), array_agg(x)"),
            "SELECT array_agg(DISTINCT x ORDER BY x), string_agg(DISTINCT y, ',' ORDER BY y), array_agg(x)"
        );
    }
}
