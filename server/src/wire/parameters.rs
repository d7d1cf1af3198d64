//! Bound parameters as DataFusion values. `arrow-pg` decodes them, except JSON, JSONB
//! (Postgres.js and others send `sql.json(...)` as `jsonb`) and UUID, which it cannot read:
//! those are decoded as the text Eddy holds them as (binary jsonb: a version byte, then the
//! text; binary uuid: 16 bytes, as canonical text).

use std::sync::Arc;

use arrow_pg::datatypes::df::deserialize_parameters;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ParamValues;
use pgwire::api::portal::Portal;
use pgwire::api::stmt::StoredStatement;
use pgwire::api::Type;
use pgwire::error::PgWireResult;

fn is_text_held(t: &Option<Type>) -> bool {
    matches!(t, Some(t) if *t == Type::JSON || *t == Type::JSONB || *t == Type::UUID)
}

/// The portal's parameters, typed by the client's declared types or DataFusion's inference
/// (`marked`: the types Describe gave where a marking says more, as for `id = $1` of a `uuid`
/// column: a client that left a type out sends the value in the type it was told).
pub fn decode<S: Clone>(
    portal: &Portal<S>,
    inferred: &[Option<&DataType>],
    marked: &[Option<Type>],
) -> PgWireResult<ParamValues> {
    let declared = &portal.statement.parameter_types;
    let count = declared.len().max(marked.len());
    let mut types: Vec<Option<Type>> = (0..count)
        .map(|i| match declared.get(i).cloned().flatten() {
            Some(t) if t != Type::UNKNOWN => Some(t),
            _ => marked
                .get(i)
                .cloned()
                .flatten()
                .filter(|t| is_text_held(&Some(t.clone()))),
        })
        .collect();
    if !types.iter().any(is_text_held) {
        return deserialize_parameters(portal, inferred);
    }
    types.truncate(portal.parameters.len().max(declared.len()));
    let mut values = portal.parameters.clone();
    for (i, t) in types.iter_mut().enumerate() {
        if !is_text_held(t) {
            continue;
        }
        let binary = portal.parameter_format.is_binary(i);
        if *t == Some(Type::JSONB) && binary {
            if let Some(Some(bytes)) = values.get_mut(i) {
                // jsonb's binary form: version 1, then the JSON text.
                *bytes = bytes.slice(1.min(bytes.len())..);
            }
        }
        if *t == Some(Type::UUID) {
            if let Some(Some(bytes)) = values.get_mut(i) {
                *bytes = uuid_text(bytes, binary)?.into();
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

/// A uuid parameter as its canonical text: from its 16 bytes, or from text in any form
/// Postgres reads.
fn uuid_text(bytes: &[u8], binary: bool) -> PgWireResult<String> {
    let text = if binary {
        let bytes: [u8; 16] = bytes.try_into().map_err(|_| {
            crate::error::ServerError::new(
                "22P03",
                format!("a binary uuid has 16 bytes, not {}", bytes.len()),
            )
            .into_pgwire()
        })?;
        crate::pg::types::uuid::text(&bytes)
    } else {
        let text = String::from_utf8_lossy(bytes);
        crate::pg::types::uuid::canonical(&text).map_err(|e| e.into_pgwire())?
    };
    Ok(text)
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
