//! `ALTER TABLE | VIEW | MATERIALIZED VIEW | SOURCE [IF EXISTS] name RENAME TO new_name`,
//! `... OWNER TO role` and `ALTER TABLE ... ADD PRIMARY KEY (columns)`, read at the token level
//! (sqlparser knows only some of these forms).

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

/// `ALTER ... name OWNER TO role` (pg_dump writes one for every relation it dumps).
#[derive(Debug, Clone, PartialEq)]
pub struct OwnerStatement {
    pub kind: RelationKind,
    pub if_exists: bool,
    pub name: String,
    /// The role named, folded (`CURRENT_USER`, `SESSION_USER` and `CURRENT_ROLE` as written).
    pub owner: String,
}

/// `ALTER TABLE [ONLY] name ADD [CONSTRAINT constraint] PRIMARY KEY (columns)`, as pg_dump
/// writes a table's key after its rows.
#[derive(Debug, Clone, PartialEq)]
pub struct PrimaryKeyStatement {
    pub if_exists: bool,
    pub name: String,
    pub constraint: Option<String>,
    pub columns: Vec<String>,
}

/// The relation an `ALTER` names, and where its action starts.
struct AlterTarget {
    kind: RelationKind,
    if_exists: bool,
    parts: Vec<String>,
    action_at: usize,
}

fn alter_target(tokens: &[Token]) -> Option<AlterTarget> {
    let word = |i: usize| keyword(tokens.get(i));
    if word(0).as_deref() != Some("ALTER") {
        return None;
    }
    let (kind, mut i) = match (word(1).as_deref(), word(2).as_deref()) {
        (Some("TABLE"), _) => (RelationKind::Table, 2),
        (Some("VIEW"), _) => (RelationKind::View, 2),
        (Some("MATERIALIZED"), Some("VIEW")) => (RelationKind::MaterializedView, 3),
        (Some("SOURCE"), _) => (RelationKind::Source, 2),
        _ => return None,
    };
    let if_exists = word(i).as_deref() == Some("IF") && word(i + 1).as_deref() == Some("EXISTS");
    if if_exists {
        i += 2;
    }
    // `ONLY` (ALTER TABLE ONLY t) changes nothing without inheritance.
    if kind == RelationKind::Table && word(i).as_deref() == Some("ONLY") {
        i += 1;
    }
    let mut parts = Vec::new();
    loop {
        parts.push(tokens.get(i).and_then(identifier)?);
        i += 1;
        if tokens.get(i) == Some(&Token::Period) {
            i += 1;
        } else {
            break;
        }
    }
    Some(AlterTarget {
        kind,
        if_exists,
        parts,
        action_at: i,
    })
}

/// Reads a rename from the significant tokens of an `ALTER` statement; `None` when the
/// statement is another `ALTER` (left to sqlparser).
pub fn parse_rename(tokens: &[Token]) -> Result<Option<RenameStatement>> {
    let word = |i: usize| keyword(tokens.get(i));
    let Some(target) = alter_target(tokens) else {
        return Ok(None);
    };
    let i = target.action_at;
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
        kind: target.kind,
        if_exists: target.if_exists,
        name: crate::names::resolve_parts(&target.parts)?,
        new_name,
    }))
}

/// Reads `ALTER ... name OWNER TO role`; `None` for other `ALTER`s.
pub fn parse_owner(tokens: &[Token]) -> Result<Option<OwnerStatement>> {
    let word = |i: usize| keyword(tokens.get(i));
    let Some(target) = alter_target(tokens) else {
        return Ok(None);
    };
    let i = target.action_at;
    if word(i).as_deref() != Some("OWNER") || word(i + 1).as_deref() != Some("TO") {
        return Ok(None);
    }
    let Some(owner) = tokens.get(i + 2).and_then(identifier) else {
        return Err(PlanError::Syntax("OWNER TO needs a role".into()));
    };
    if let Some(extra) = tokens.get(i + 3) {
        return Err(PlanError::Syntax(format!(
            "unexpected {extra} after the role in OWNER TO"
        )));
    }
    Ok(Some(OwnerStatement {
        kind: target.kind,
        if_exists: target.if_exists,
        name: crate::names::resolve_parts(&target.parts)?,
        owner,
    }))
}

/// Reads `ALTER TABLE ... ADD [CONSTRAINT c] PRIMARY KEY (columns)`; `None` for other
/// `ALTER`s.
pub fn parse_add_primary_key(tokens: &[Token]) -> Result<Option<PrimaryKeyStatement>> {
    let word = |i: usize| keyword(tokens.get(i));
    let Some(target) = alter_target(tokens) else {
        return Ok(None);
    };
    let mut i = target.action_at;
    if target.kind != RelationKind::Table || word(i).as_deref() != Some("ADD") {
        return Ok(None);
    }
    i += 1;
    let mut constraint = None;
    if word(i).as_deref() == Some("CONSTRAINT") {
        constraint = tokens.get(i + 1).and_then(identifier);
        i += 2;
    }
    if word(i).as_deref() != Some("PRIMARY") || word(i + 1).as_deref() != Some("KEY") {
        return Ok(None);
    }
    i += 2;
    if tokens.get(i) != Some(&Token::LParen) {
        return Err(PlanError::Syntax(
            "PRIMARY KEY needs its columns in parentheses".into(),
        ));
    }
    let mut columns = Vec::new();
    loop {
        i += 1;
        let Some(column) = tokens.get(i).and_then(identifier) else {
            return Err(PlanError::Syntax("PRIMARY KEY needs column names".into()));
        };
        columns.push(column);
        i += 1;
        match tokens.get(i) {
            Some(Token::Comma) => continue,
            Some(Token::RParen) => break,
            _ => {
                return Err(PlanError::Syntax(
                    "PRIMARY KEY's columns end with \")\"".into(),
                ))
            }
        }
    }
    if let Some(extra) = tokens.get(i + 1) {
        return Err(PlanError::Syntax(format!(
            "unexpected {extra} after PRIMARY KEY's columns"
        )));
    }
    Ok(Some(PrimaryKeyStatement {
        if_exists: target.if_exists,
        name: crate::names::resolve_parts(&target.parts)?,
        constraint,
        columns,
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
        assert_eq!(parse("ALTER TABLE t OWNER TO postgres").unwrap(), None);
        assert_eq!(parse("ALTER TABLE t ADD COLUMN a INT").unwrap(), None);
        assert!(parse("ALTER TABLE t RENAME TO public.u").is_err());
        assert!(parse("ALTER TABLE other.t RENAME TO u").is_err());
    }

    #[test]
    fn owner_to() {
        let tokens: Vec<Token> = Tokenizer::new(
            &PostgreSqlDialect {},
            "ALTER TABLE ONLY public.t OWNER TO \"Postgres\"",
        )
        .tokenize()
        .unwrap()
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::EOF))
        .collect();
        let owner = parse_owner(&tokens).unwrap().unwrap();
        assert_eq!(owner.name, "t");
        assert_eq!(owner.owner, "Postgres");
        assert_eq!(owner.kind, RelationKind::Table);
    }

    #[test]
    fn add_primary_key() {
        let tokens = |sql: &str| -> Vec<Token> {
            Tokenizer::new(&PostgreSqlDialect {}, sql)
                .tokenize()
                .unwrap()
                .into_iter()
                .filter(|t| !matches!(t, Token::Whitespace(_) | Token::EOF))
                .collect()
        };
        let key = parse_add_primary_key(&tokens(
            "ALTER TABLE ONLY public.t\n    ADD CONSTRAINT t_pkey PRIMARY KEY (a, \"B\")",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(
            key,
            PrimaryKeyStatement {
                if_exists: false,
                name: "t".into(),
                constraint: Some("t_pkey".into()),
                columns: vec!["a".into(), "B".into()],
            }
        );
        let key = parse_add_primary_key(&tokens("alter table if exists t add primary key (id)"))
            .unwrap()
            .unwrap();
        assert!(key.if_exists);
        assert_eq!(key.constraint, None);
        assert_eq!(
            parse_add_primary_key(&tokens("ALTER TABLE t ADD COLUMN a INT")).unwrap(),
            None
        );
        assert_eq!(
            parse_add_primary_key(&tokens("ALTER VIEW v ADD PRIMARY KEY (a)")).unwrap(),
            None
        );
        assert!(parse_add_primary_key(&tokens("ALTER TABLE t ADD PRIMARY KEY a")).is_err());
        assert!(parse_add_primary_key(&tokens("ALTER TABLE t ADD PRIMARY KEY (a) x")).is_err());
    }
}
