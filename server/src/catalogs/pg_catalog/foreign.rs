//! Sources and sinks as Postgres' foreign tables: `pg_foreign_table` has a row for each (psql's
//! `\d` of one needs it), `pg_foreign_server` one server per connector (`Server: nexmark`).

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use datafusion::arrow::array::{new_null_array, ArrayRef, Int32Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::error::Result;

use crate::catalogs::pg_catalog::RelationOids;
use crate::database::{Database, Object, SCHEMA};

/// The first OID given to a connector's server.
const FIRST_SERVER_OID: i32 = 91_000;

/// Each source and sink with a `pg_class` OID: (its OID, its connector), and the connectors'
/// servers.
fn sources(
    db: &Weak<Database>,
    oids: &RelationOids,
) -> (Vec<(i32, String)>, BTreeMap<String, i32>) {
    let Some(db) = db.upgrade() else {
        return (vec![], BTreeMap::new());
    };
    let stats = db.engine().stats();
    let connectors: BTreeMap<String, String> = stats
        .sources
        .into_iter()
        .map(|s| (s.name, s.connector))
        .chain(stats.sinks.into_iter().map(|s| (s.name, s.connector)))
        .collect();
    let mut servers = BTreeMap::new();
    for connector in connectors.values() {
        let next = FIRST_SERVER_OID + servers.len() as i32;
        servers.entry(connector.clone()).or_insert(next);
    }
    let mut rows: Vec<(i32, String)> = oids
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|(_, (schema, name))| {
            schema == SCHEMA && matches!(db.object(name), Some(Object::Source(_) | Object::Sink))
        })
        .filter_map(|(oid, (_, name))| Some((*oid, connectors.get(name)?.clone())))
        .collect();
    rows.sort();
    (rows, servers)
}

fn column(
    schema: &SchemaRef,
    n: usize,
    fill: impl Fn(&str, &DataType) -> Option<ArrayRef>,
) -> Vec<ArrayRef> {
    schema
        .fields()
        .iter()
        .map(|f| fill(f.name(), f.data_type()).unwrap_or_else(|| new_null_array(f.data_type(), n)))
        .collect()
}

pub(crate) fn foreign_tables(
    schema: SchemaRef,
    db: &Weak<Database>,
    oids: &RelationOids,
) -> Result<RecordBatch> {
    let (rows, servers) = sources(db, oids);
    let n = rows.len();
    let columns = column(&schema, n, |name, data_type| match (name, data_type) {
        ("ftrelid", DataType::Int32) => Some(Arc::new(Int32Array::from_iter_values(
            rows.iter().map(|(oid, _)| *oid),
        )) as ArrayRef),
        ("ftserver", DataType::Int32) => Some(Arc::new(Int32Array::from_iter_values(
            rows.iter()
                .map(|(_, connector)| servers.get(connector).copied().unwrap_or(0)),
        ))),
        _ => None,
    });
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// The OIDs of the connectors' servers.
pub(crate) fn server_oids(db: &Weak<Database>, oids: &RelationOids) -> Vec<i32> {
    sources(db, oids).1.into_values().collect()
}

pub(crate) fn foreign_servers(
    schema: SchemaRef,
    db: &Weak<Database>,
    oids: &RelationOids,
) -> Result<RecordBatch> {
    let (_, servers) = sources(db, oids);
    let n = servers.len();
    let columns = column(&schema, n, |name, data_type| match (name, data_type) {
        ("oid", DataType::Int32) => {
            Some(Arc::new(Int32Array::from_iter_values(servers.values().copied())) as ArrayRef)
        }
        ("srvname", DataType::Utf8) => {
            Some(Arc::new(StringArray::from_iter_values(servers.keys())) as ArrayRef)
        }
        // Owned by the one role (its OID in Postgres: 10); no foreign-data wrapper.
        ("srvowner", DataType::Int32) => Some(Arc::new(Int32Array::from(vec![10; n])) as ArrayRef),
        ("srvfdw", DataType::Int32) => Some(Arc::new(Int32Array::from(vec![0; n])) as ArrayRef),
        _ => None,
    });
    Ok(RecordBatch::try_new(schema, columns)?)
}
