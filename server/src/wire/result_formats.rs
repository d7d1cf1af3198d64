//! A Bind's result format codes: none (all text), one for every column, or one per column.
//! pgwire and arrow-pg index the codes by column and would panic past their end, so a count
//! that fits neither is refused first, with Postgres' error (08P01).

use pgwire::api::portal::Format;
use pgwire::error::PgWireResult;

use crate::error::ServerError;

/// Checks the codes of `format` against a result of `columns` columns.
pub fn check(format: &Format, columns: usize) -> PgWireResult<()> {
    match format {
        Format::Individual(codes) if codes.len() != columns => Err(ServerError::new(
            "08P01",
            format!(
                "bind message has {} result formats but query has {columns} columns",
                codes.len()
            ),
        )
        .into_pgwire()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_code_each_or_one_for_all() {
        assert!(check(&Format::UnifiedText, 3).is_ok());
        assert!(check(&Format::UnifiedBinary, 3).is_ok());
        assert!(check(&Format::Individual(vec![0, 1, 0]), 3).is_ok());
        for codes in [vec![0, 1], vec![0, 1, 1, 0]] {
            let error = check(&Format::Individual(codes), 3).unwrap_err();
            assert!(
                error
                    .to_string()
                    .contains("result formats but query has 3 columns"),
                "{error}"
            );
        }
    }
}
