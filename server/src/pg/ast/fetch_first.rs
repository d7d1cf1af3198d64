//! `FETCH FIRST n ROWS ONLY` (the standard's LIMIT, which JDBC tools and SQL:2008 scripts
//! write) read as `LIMIT n`: DataFusion parses it but refuses to plan it. `WITH TIES` and
//! `PERCENT` stay refused.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Fetch, LimitClause, Query, Statement, Value, VisitMut, VisitorMut,
};

/// Rewrites every plain FETCH FIRST of `statement` as a LIMIT.
pub fn rewrite(statement: &mut Statement) {
    let _ = statement.visit(&mut FetchAsLimit);
}

struct FetchAsLimit;

impl VisitorMut for FetchAsLimit {
    type Break = ();

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let Some(Fetch {
            with_ties: false,
            percent: false,
            quantity,
        }) = &query.fetch
        else {
            return ControlFlow::Continue(());
        };
        // `FETCH FIRST ROW ONLY` is one row.
        let limit = quantity
            .clone()
            .unwrap_or_else(|| Expr::value(Value::Number("1".into(), false)));
        let offset = match query.limit_clause.take() {
            None => None,
            Some(LimitClause::LimitOffset {
                limit: None,
                offset,
                limit_by,
            }) if limit_by.is_empty() => offset,
            // A LIMIT and a FETCH together: Postgres refuses them too; let the planner say so.
            Some(other) => {
                query.limit_clause = Some(other);
                return ControlFlow::Continue(());
            }
        };
        query.fetch = None;
        query.limit_clause = Some(LimitClause::LimitOffset {
            limit: Some(limit),
            offset,
            limit_by: vec![],
        });
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    use super::*;

    fn rewritten(sql: &str) -> String {
        let mut statement = Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .unwrap()
            .remove(0);
        rewrite(&mut statement);
        statement.to_string()
    }

    #[test]
    fn fetch_first_is_a_limit() {
        assert_eq!(
            rewritten("SELECT x FROM t ORDER BY x FETCH FIRST 2 ROWS ONLY"),
            "SELECT x FROM t ORDER BY x LIMIT 2"
        );
        assert_eq!(
            rewritten("SELECT x FROM t OFFSET 1 ROWS FETCH NEXT ROW ONLY"),
            "SELECT x FROM t LIMIT 1 OFFSET 1 ROWS"
        );
        assert!(rewritten("SELECT x FROM t FETCH FIRST 2 ROWS WITH TIES").contains("WITH TIES"));
    }
}
