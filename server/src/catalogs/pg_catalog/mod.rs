//! `pg_catalog` for drivers and BI tools: the tables and functions of `datafusion-pg-catalog`,
//! with Eddy's own objects told apart (materialized views, sources) and the functions tools
//! call on connect that the crate lacks ([`crate::catalogs::pg_catalog::functions`]).

pub mod derived;
pub mod foreign;
pub mod functions;
pub mod indexes;
pub mod keys;
pub mod sizes;
pub mod views;

use std::collections::HashMap;
use std::sync::{Arc, RwLock, Weak};

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::planner::TypePlanner;
use datafusion::sql::sqlparser::ast::{DataType as SqlDataType, TimezoneInfo};
use datafusion_pg_catalog::pg_catalog::context::{PgCatalogContextProvider, Role};
use datafusion_pg_catalog::pg_catalog::oid_type_planner::PgOidTypePlanner;
use datafusion_pg_catalog::pg_catalog::PgCatalogStaticTables;
use datafusion_pg_catalog::setup_pg_catalog;

use crate::catalogs::information_schema::InformationSchema;
use crate::catalogs::pg_catalog::derived::{
    column, with_reloptions, Derived, DerivedTable, DATABASE_OWNER,
};
use crate::database::{Database, DATABASE};
use crate::error::ServerError;

/// Relations of the last `pg_class` read by OID, as (schema, name): what
/// `pg_get_viewdef(oid)` and `pg_table_is_visible(oid)` look up.
pub(crate) type RelationOids = Arc<RwLock<HashMap<i32, (String, String)>>>;

/// Installs `pg_catalog` and the Postgres functions into the database's SQL context.
pub fn install(db: &Arc<Database>) -> Result<(), ServerError> {
    setup_pg_catalog(&db.ctx, DATABASE, Roles).map_err(|e| ServerError::from(*e))?;
    let catalog = db
        .ctx
        .catalog(DATABASE)
        .ok_or_else(|| ServerError::internal("default catalog missing"))?;
    let inner = catalog
        .schema("pg_catalog")
        .ok_or_else(|| ServerError::internal("pg_catalog was not registered"))?;
    let oids: RelationOids = Arc::default();
    catalog.register_schema(
        "pg_catalog",
        Arc::new(EddyPgCatalog {
            inner,
            db: Arc::downgrade(db),
            oids: oids.clone(),
        }),
    )?;
    crate::catalogs::pg_catalog::sizes::register(&db.ctx, Arc::downgrade(db), oids.clone());
    crate::query::activity::register(&db.ctx);
    crate::catalogs::pg_catalog::functions::register(
        &db.ctx,
        Arc::downgrade(db),
        oids,
        type_oids()?,
    );
    Ok(())
}

/// After every function is in place: Eddy's information_schema, the type planner, and no
/// stale alias of a replaced function.
pub fn finish(db: &Arc<Database>) -> Result<(), ServerError> {
    let catalog = db
        .ctx
        .catalog(DATABASE)
        .ok_or_else(|| ServerError::internal("default catalog missing"))?;
    // Eddy's own information_schema (Postgres type names, materialized views) replaces the
    // one DataFusion answers when its flag is on.
    let catalogs = db.ctx.state().catalog_list().clone();
    catalog.register_schema(
        "information_schema",
        Arc::new(InformationSchema::new(catalogs, Arc::downgrade(db))),
    )?;
    drop_shadowed_functions(&db.ctx);
    let state = db.ctx.state_ref();
    let existing = state.read().clone();
    let mut new_state = SessionStateBuilder::new_from_existing(existing)
        .with_type_planner(Arc::new(EddyTypePlanner))
        .build();
    new_state
        .config_mut()
        .options_mut()
        .catalog
        .information_schema = false;
    *state.write() = new_state;
    Ok(())
}

/// Removes each function name that still leads to a DataFusion function Eddy replaced under
/// another of its names (`datepart`, an alias of DataFusion's `date_part`, after Eddy's
/// `date_part` took that name). Every state built from this one registers the functions it
/// finds again, names and aliases, in a random order: a stale alias would bring the replaced
/// function back under its name in some runs.
fn drop_shadowed_functions(ctx: &datafusion::prelude::SessionContext) {
    use datafusion::execution::FunctionRegistry;
    let functions = ctx.state().scalar_functions().clone();
    let current = |name: &str| functions.get(name).cloned();
    let stale: Vec<String> = functions
        .iter()
        .filter(|(_, udf)| current(udf.name()).is_none_or(|now| !Arc::ptr_eq(&now, udf)))
        .map(|(key, _)| key.clone())
        .collect();
    if stale.is_empty() {
        return;
    }
    let state = ctx.state_ref();
    let mut state = state.write();
    for key in &stale {
        // Removes the replaced function's other aliases too.
        let _ = state.deregister_udf(key);
    }
    // Put back what those aliases may have shared with the functions in place.
    for (key, udf) in &functions {
        if !stale.contains(key) && state.scalar_functions().get(key).is_none() {
            let _ = state.register_udf(udf.clone());
        }
    }
}

/// The one role `pg_roles` lists (psql's `\du`, JDBC's privileges): the owner every relation
/// has (`pg_get_userbyid` names it `postgres`), with Postgres' bootstrap superuser's OID
/// ([`OWNER_OID`]), which the catalogs' rows name as owner.
#[derive(Debug, Clone)]
struct Roles;

pub(crate) const OWNER: &str = "postgres";

/// The OID of Postgres' bootstrap superuser, owner of every object.
pub(crate) const OWNER_OID: i32 = 10;

#[async_trait]
impl PgCatalogContextProvider for Roles {
    async fn roles(&self) -> Vec<String> {
        vec![OWNER.to_string(), DATABASE_OWNER.to_string()]
    }

    async fn role(&self, name: &str) -> Option<Role> {
        let owner = name == OWNER;
        (owner || name == DATABASE_OWNER).then(|| Role {
            name: name.to_string(),
            is_superuser: owner,
            can_login: owner,
            can_create_db: owner,
            can_create_role: owner,
            can_create_user: owner,
            can_replication: false,
            grants: vec![],
            inherited_roles: vec![],
        })
    }
}

/// Type OIDs by name (`int4`, `text`, ...), from the crate's copy of `pg_type`.
fn type_oids() -> Result<HashMap<String, i32>> {
    let tables = PgCatalogStaticTables::try_new()?;
    let mut map = HashMap::new();
    for batch in tables.pg_type.data() {
        let names = column(batch, "typname")?;
        let oids = column(batch, "oid")?;
        for i in 0..batch.num_rows() {
            let name = ScalarValue::try_from_array(names, i)?;
            let oid = ScalarValue::try_from_array(oids, i)?.cast_to(&DataType::Int32)?;
            if let (ScalarValue::Utf8(Some(name)), ScalarValue::Int32(Some(oid))) = (name, oid) {
                map.insert(name, oid);
            }
        }
    }
    Ok(map)
}

/// Postgres type names DataFusion lacks: the crate's (`regclass`, `pg_catalog.text`, ...)
/// plus `"char"`, kept as text, and the types [`crate::pg::types::column_types`] marks.
#[derive(Debug)]
struct EddyTypePlanner;

impl TypePlanner for EddyTypePlanner {
    fn plan_type_field(&self, sql_type: &SqlDataType) -> Result<Option<FieldRef>> {
        // `varchar(n)`, `numeric(p, s)`, `json`, `jsonb`: a marked Arrow type.
        if let Some(field) = crate::pg::types::column_types::planned_field(sql_type) {
            return Ok(Some(field));
        }
        match sql_type {
            // `"char"`, the catalogs' one-byte type (`relkind`), held as text.
            SqlDataType::Custom(name, modifiers)
                if modifiers.is_empty() && name.to_string() == "\"char\"" =>
            {
                Ok(Some(Arc::new(Field::new("", DataType::Utf8, true))))
            }
            // TIMESTAMPTZ: an instant, kept in UTC (DataFusion would drop the zone).
            SqlDataType::Timestamp(precision, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz)
                if precision.is_none_or(|p| p == 6) =>
            {
                Ok(Some(Arc::new(Field::new(
                    "",
                    DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
                    true,
                ))))
            }
            other => PgOidTypePlanner.plan_type_field(other),
        }
    }
}

/// The crate's `pg_catalog` with Eddy's relation kinds and views.
struct EddyPgCatalog {
    inner: Arc<dyn SchemaProvider>,
    db: Weak<Database>,
    oids: RelationOids,
}

impl std::fmt::Debug for EddyPgCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EddyPgCatalog")
    }
}

#[async_trait]
impl SchemaProvider for EddyPgCatalog {
    fn table_names(&self) -> Vec<String> {
        let mut names = self.inner.table_names();
        names.extend(EDDYS_TABLES.iter().map(|name| name.to_string()));
        names.extend(crate::pg::empty_catalogs::names().map(str::to_string));
        names
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        if name.eq_ignore_ascii_case("pg_stat_activity") {
            return Ok(Some(Arc::new(crate::query::activity::ActivityTable)));
        }
        if name.eq_ignore_ascii_case("pg_indexes") {
            return Ok(Some(Arc::new(
                crate::catalogs::pg_catalog::indexes::IndexesView {
                    db: self.db.clone(),
                },
            )));
        }
        let Some(table) = self.inner.table(name).await? else {
            return Ok(crate::pg::empty_catalogs::table(name));
        };
        let kind = match name.to_ascii_lowercase().as_str() {
            "pg_class" => Derived::Class,
            "pg_matviews" => Derived::MatViews,
            "pg_views" => Derived::Views,
            "pg_settings" => Derived::Settings,
            "pg_foreign_table" => Derived::ForeignTables,
            "pg_foreign_server" => Derived::ForeignServers,
            "pg_tables" => Derived::Tables,
            "pg_index" => Derived::Keys("pg_index"),
            "pg_constraint" => Derived::Keys("pg_constraint"),
            "pg_attribute" => Derived::Attributes,
            "pg_roles" => Derived::Roles,
            "pg_namespace" => Derived::Namespaces,
            "pg_rewrite" => Derived::NoRows,
            "pg_init_privs" => Derived::TablePrivileges,
            "pg_extension" => Derived::Extensions,
            "pg_depend" => Derived::Dependencies,
            _ => return Ok(Some(table)),
        };
        let schema = match kind {
            Derived::Keys(name) => {
                crate::catalogs::pg_catalog::keys::with_key_array(&table.schema(), name)
            }
            Derived::Class => with_reloptions(&table.schema()),
            _ => table.schema(),
        };
        Ok(Some(Arc::new(DerivedTable {
            inner: table,
            schema,
            kind,
            catalog: self.inner.clone(),
            db: self.db.clone(),
            oids: self.oids.clone(),
        })))
    }

    fn table_exist(&self, name: &str) -> bool {
        EDDYS_TABLES.iter().any(|t| name.eq_ignore_ascii_case(t))
            || crate::pg::empty_catalogs::names().any(|t| name.eq_ignore_ascii_case(t))
            || self.inner.table_exist(name)
    }
}

/// The `pg_catalog` tables of Eddy's own (the crate has none of these).
const EDDYS_TABLES: &[&str] = &["pg_stat_activity", "pg_indexes"];
