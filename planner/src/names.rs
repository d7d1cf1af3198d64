//! Object names as Postgres resolves them: `name`, `schema.name` or `database.schema.name`,
//! unquoted parts folded to lower case and quoted ones kept as written. User objects live in
//! the one schema `public` (of whatever database the connection named), so a qualified name
//! resolves to its last part when its schema is `public`.

use datafusion::sql::sqlparser::ast::{Ident, ObjectName};

use crate::{PlanError, Result};

/// The schema of user objects.
pub const USER_SCHEMA: &str = "public";

/// An identifier as Postgres folds it: quoted kept, unquoted lower-cased.
pub fn fold(ident: &Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

/// The object a user's (possibly qualified) name refers to, or an error naming a schema other
/// than `public` (3F000 in Postgres' terms, reported as a plan error).
pub fn resolve_object_name(name: &ObjectName) -> Result<String> {
    let parts: Vec<String> = name
        .0
        .iter()
        .filter_map(|part| part.as_ident())
        .map(fold)
        .collect();
    resolve_parts(&parts)
}

/// [`resolve_object_name`] over parts already folded.
pub fn resolve_parts(parts: &[String]) -> Result<String> {
    match parts {
        [name] => Ok(name.clone()),
        [schema, name] | [_, schema, name] if schema == USER_SCHEMA => Ok(name.clone()),
        [schema, _] | [_, schema, _] => Err(PlanError::UndefinedSchema(format!(
            "schema \"{schema}\" does not exist"
        ))),
        _ => Err(PlanError::Syntax(format!(
            "improper qualified name (too many dotted names): {}",
            parts.join(".")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::ObjectNamePart;

    fn name(parts: &[(&str, bool)]) -> ObjectName {
        ObjectName(
            parts
                .iter()
                .map(|(value, quoted)| {
                    ObjectNamePart::Identifier(if *quoted {
                        Ident::with_quote('"', *value)
                    } else {
                        Ident::new(*value)
                    })
                })
                .collect(),
        )
    }

    #[test]
    fn qualified_names_resolve_to_the_object_in_public() {
        assert_eq!(resolve_object_name(&name(&[("T2", false)])).unwrap(), "t2");
        assert_eq!(
            resolve_object_name(&name(&[("public", false), ("t2", false)])).unwrap(),
            "t2"
        );
        assert_eq!(
            resolve_object_name(&name(&[("dev", true), ("public", true), ("X", true)])).unwrap(),
            "X"
        );
        assert!(matches!(
            resolve_object_name(&name(&[("other", false), ("t", false)])),
            Err(PlanError::UndefinedSchema(_))
        ));
    }
}
