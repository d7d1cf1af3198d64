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
