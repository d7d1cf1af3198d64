//! `ALTER TABLE | VIEW | MATERIALIZED VIEW | SOURCE [IF EXISTS] name RENAME TO new_name`, read
//! at the token level (sqlparser knows only some of these forms).

use datafusion::sql::sqlparser::tokenizer::Token;

use crate::{PlanError, Result};

/// The kind of relation an `ALTER ... RENAME` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelationKind {
    /// `ALTER TABLE`: in Postgres it renames a relation of any kind.
    Table,
    View,
    MaterializedView,
    Source,
}

impl RelationKind {
    /// The statement's tag, as Postgres answers it.
    pub fn tag(self) -> &'static str {
        match self {
            RelationKind::Table => "ALTER TABLE",
            RelationKind::View => "ALTER VIEW",
            RelationKind::MaterializedView => "ALTER MATERIALIZED VIEW",
            RelationKind::Source => "ALTER SOURCE",
        }
    }
}

/// `ALTER ... name RENAME TO new_name`.
#[derive(Debug, Clone, PartialEq)]
pub struct RenameStatement {
    pub kind: RelationKind,
    pub if_exists: bool,
    pub name: String,
    pub new_name: String,
}

fn keyword(token: Option<&Token>) -> Option<String> {
    match token {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.to_uppercase()),
        _ => None,
    }
}

fn identifier(token: &Token) -> Option<String> {
    match token {
        Token::Word(w) if w.quote_style.is_some() => Some(w.value.clone()),
        Token::Word(w) => Some(w.value.to_lowercase()),
        _ => None,
    }
}

/// Reads a rename from the significant tokens of an `ALTER` statement; `None` when the
/// statement is another `ALTER` (left to sqlparser).
pub fn parse_rename(tokens: &[Token]) -> Result<Option<RenameStatement>> {
    let word = |i: usize| keyword(tokens.get(i));
    if word(0).as_deref() != Some("ALTER") {
        return Ok(None);
    }
    let (kind, mut i) = match (word(1).as_deref(), word(2).as_deref()) {
        (Some("TABLE"), _) => (RelationKind::Table, 2),
        (Some("VIEW"), _) => (RelationKind::View, 2),
        (Some("MATERIALIZED"), Some("VIEW")) => (RelationKind::MaterializedView, 3),
        (Some("SOURCE"), _) => (RelationKind::Source, 2),
        _ => return Ok(None),
    };
    let if_exists = word(i).as_deref() == Some("IF") && word(i + 1).as_deref() == Some("EXISTS");
    if if_exists {
        i += 2;
    }
    // `ONLY` (ALTER TABLE ONLY t) changes nothing for a rename.
    if kind == RelationKind::Table && word(i).as_deref() == Some("ONLY") {
        i += 1;
    }
    let mut parts = Vec::new();
    loop {
        let Some(part) = tokens.get(i).and_then(identifier) else {
            return Ok(None);
        };
        parts.push(part);
        i += 1;
        if tokens.get(i) == Some(&Token::Period) {
            i += 1;
        } else {
            break;
        }
    }
    if word(i).as_deref() != Some("RENAME") || word(i + 1).as_deref() != Some("TO") {
        return Ok(None);
    }
    let Some(new_name) = tokens.get(i + 2).and_then(identifier) else {
        return Err(PlanError::Syntax("RENAME TO needs a new name".into()));
    };
    if let Some(extra) = tokens.get(i + 3) {
        return Err(PlanError::Syntax(format!(
            "unexpected {extra} after the new name (RENAME TO takes a name without a schema)"
        )));
    }
    Ok(Some(RenameStatement {
        kind,
        if_exists,
        name: crate::names::resolve_parts(&parts)?,
        new_name,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    fn parse(sql: &str) -> Result<Option<RenameStatement>> {
        let tokens: Vec<Token> = Tokenizer::new(&PostgreSqlDialect {}, sql)
            .tokenize()
            .unwrap()
            .into_iter()
            .filter(|t| !matches!(t, Token::Whitespace(_) | Token::EOF))
            .collect();
        parse_rename(&tokens)
    }

    #[test]
    fn renames_of_each_kind() {
        let rename = parse("alter table if exists public.\"T\" rename to t2")
            .unwrap()
            .unwrap();
        assert_eq!(
            rename,
            RenameStatement {
                kind: RelationKind::Table,
                if_exists: true,
                name: "T".into(),
                new_name: "t2".into(),
            }
        );
        let rename = parse("ALTER MATERIALIZED VIEW m RENAME TO \"M2\"")
            .unwrap()
            .unwrap();
        assert_eq!(rename.kind, RelationKind::MaterializedView);
        assert_eq!(rename.new_name, "M2");
        assert_eq!(
            parse("ALTER SOURCE s RENAME TO s2").unwrap().unwrap().kind,
            RelationKind::Source
        );
        assert_eq!(
            parse("ALTER VIEW v RENAME TO w").unwrap().unwrap().kind,
            RelationKind::View
        );
    }

    #[test]
    fn other_alters_are_left_alone_and_bad_renames_refused() {
        assert_eq!(parse("ALTER TABLE t RENAME COLUMN a TO b").unwrap(), None);
        assert_eq!(parse("ALTER TABLE t ADD COLUMN a INT").unwrap(), None);
        assert!(parse("ALTER TABLE t RENAME TO public.u").is_err());
        assert!(parse("ALTER TABLE other.t RENAME TO u").is_err());
    }
}
