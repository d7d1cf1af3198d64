//! Bound parameters as DataFusion values. `arrow-pg` decodes them, except JSON and JSONB
//! (Postgres.js and others send `sql.json(...)` as `jsonb`), which it cannot read: those are
//! decoded as the text they are (binary jsonb: a version byte, then the text).

use std::sync::Arc;

use arrow_pg::datatypes::df::deserialize_parameters;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ParamValues;
use pgwire::api::portal::Portal;
use pgwire::api::stmt::StoredStatement;
use pgwire::api::Type;
use pgwire::error::PgWireResult;

fn is_json(t: &Option<Type>) -> bool {
    matches!(t, Some(t) if *t == Type::JSON || *t == Type::JSONB)
}

/// The portal's parameters, typed by the client's declared types or DataFusion's inference.
pub fn decode<S: Clone>(
    portal: &Portal<S>,
    inferred: &[Option<&DataType>],
) -> PgWireResult<ParamValues> {
    let declared = &portal.statement.parameter_types;
    if !declared.iter().any(is_json) {
        return deserialize_parameters(portal, inferred);
    }
    let mut types = declared.clone();
    let mut values = portal.parameters.clone();
    for (i, t) in types.iter_mut().enumerate() {
        if !is_json(t) {
            continue;
        }
        if *t == Some(Type::JSONB) && portal.parameter_format.is_binary(i) {
            if let Some(Some(bytes)) = values.get_mut(i) {
                // jsonb's binary form: version 1, then the JSON text.
                *bytes = bytes.slice(1.min(bytes.len())..);
            }
        }
        *t = Some(Type::TEXT);
    }
    // The statement itself plays no part in decoding.
    let mut as_text: Portal<()> = Portal::default();
    as_text.name = portal.name.clone();
    as_text.statement = Arc::new(StoredStatement::new(portal.statement.id.clone(), (), types));
    as_text.parameter_format = portal.parameter_format.clone();
    as_text.parameters = values;
    deserialize_parameters(&as_text, inferred)
}

/// Parameters cast to `oid` or `oid[]` (`$1::oid[]`), which Postgres describes as those types.
/// Eddy holds oids as `int4`, but a driver that knows `oid[]` and not `int4[]` must hear `oid[]`:
/// asyncpg's type introspection binds `$1::oid[]`, and told `int4[]` it would introspect `int4[]`
/// with itself, without end.
pub fn oid_casts(sql: &str) -> Vec<(usize, Type)> {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

    // Most statements have no such cast: no second tokenizing for them.
    if !sql.contains("::") || !sql.to_ascii_lowercase().contains("oid") {
        return Vec::new();
    }
    let Ok(tokens) = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize() else {
        return Vec::new();
    };
    let tokens: Vec<&Token> = tokens
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let mut casts = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let Token::Placeholder(placeholder) = token else {
            continue;
        };
        let Some(position) = placeholder
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n > 0)
        else {
            continue;
        };
        let is_oid = matches!(tokens.get(i + 2), Some(Token::Word(w)) if w.value.eq_ignore_ascii_case("oid"));
        if tokens.get(i + 1) != Some(&&Token::DoubleColon) || !is_oid {
            continue;
        }
        let array = tokens.get(i + 3) == Some(&&Token::LBracket)
            && tokens.get(i + 4) == Some(&&Token::RBracket);
        casts.push((
            position - 1,
            if array { Type::OID_ARRAY } else { Type::OID },
        ));
    }
    casts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_cast_to_oid_are_described_as_oid() {
        assert_eq!(
            oid_casts("SELECT * FROM t WHERE t.oid = any($1::oid[]) AND x = $2 :: OID"),
            vec![(0, Type::OID_ARRAY), (1, Type::OID)]
        );
        assert!(oid_casts("SELECT $1::int[], '$1::oid'").is_empty());
    }
}
