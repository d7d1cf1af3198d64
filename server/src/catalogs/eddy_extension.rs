//! Eddy's own schema, `eddy_catalog` (late rows, errors, progress), is built in as
//! `pg_catalog` is. Postgres holds built-in objects outside `pg_catalog` as the members of an
//! extension created at initdb (an OID below 16384), and tools leave those out of what they
//! treat as the user's: pg_dump dumps neither such an extension nor its members. So
//! `pg_extension` lists `eddy`, and `pg_depend` makes the schema and its relations its members.
//! `pg_depend` also has each view's dependencies on what it reads.

use std::sync::Arc;

use datafusion::arrow::array::{new_null_array, ArrayRef, BooleanArray, Int32Array, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::error::Result;

/// The schema of Eddy's built-in relations.
pub(crate) const SCHEMA: &str = "eddy_catalog";

/// The extension's OID: below `FirstNormalObjectId` (16384), as for those made at initdb.
const EXTENSION_OID: i32 = 13_700;

const PG_NAMESPACE: i32 = 2615;
const PG_CLASS: i32 = 1259;
const PG_EXTENSION: i32 = 3079;
const PG_FOREIGN_SERVER: i32 = 1417;

/// `pg_extension`'s row for `eddy`.
pub(crate) fn extension_row(schema: &SchemaRef, namespace_oid: i32) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|field| match field.name().as_str() {
            "oid" => Arc::new(Int32Array::from(vec![EXTENSION_OID])) as ArrayRef,
            "extname" => Arc::new(StringArray::from(vec!["eddy"])),
            "extowner" => Arc::new(Int32Array::from(vec![10])),
            "extnamespace" => Arc::new(Int32Array::from(vec![namespace_oid])),
            "extrelocatable" => Arc::new(BooleanArray::from(vec![false])),
            "extversion" => Arc::new(StringArray::from(vec![env!("CARGO_PKG_VERSION")])),
            _ => new_null_array(field.data_type(), 1),
        })
        .zip(schema.fields())
        .map(|(array, field)| cast(&array, field.data_type()))
        .collect::<std::result::Result<_, _>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// One row of `pg_depend`: `(classid, objid)` depends on `(refclassid, refobjid)`.
pub(crate) struct Dependency {
    pub class: i32,
    pub object: i32,
    pub referenced_class: i32,
    pub referenced: i32,
    /// `e` for an extension's member, `n` for a view on what it reads.
    pub kind: &'static str,
}

/// The schema, each of its relations and the connectors' foreign servers (Eddy's own, as
/// built in as the connectors: pg_dump leaves them out) as members of `eddy`.
pub(crate) fn extension_members(
    namespace_oid: i32,
    relation_oids: &[i32],
    server_oids: &[i32],
) -> Vec<Dependency> {
    std::iter::once((PG_NAMESPACE, namespace_oid))
        .chain(relation_oids.iter().map(|&oid| (PG_CLASS, oid)))
        .chain(server_oids.iter().map(|&oid| (PG_FOREIGN_SERVER, oid)))
        .map(|(class, object)| Dependency {
            class,
            object,
            referenced_class: PG_EXTENSION,
            referenced: EXTENSION_OID,
            kind: "e",
        })
        .collect()
}

/// A view (plain or materialized) on a relation it reads: pg_dump creates the relation first.
pub(crate) fn view_reads(view_oid: i32, read_oid: i32) -> Dependency {
    Dependency {
        class: PG_CLASS,
        object: view_oid,
        referenced_class: PG_CLASS,
        referenced: read_oid,
        kind: "n",
    }
}

/// `pg_depend`'s rows for these dependencies.
pub(crate) fn dependency_rows(schema: &SchemaRef, rows: &[Dependency]) -> Result<RecordBatch> {
    let n = rows.len();
    let ints = |value: &dyn Fn(&Dependency) -> i32| {
        Arc::new(Int32Array::from_iter_values(rows.iter().map(value))) as ArrayRef
    };
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|field| match field.name().as_str() {
            "classid" => ints(&|d| d.class),
            "objid" => ints(&|d| d.object),
            "objsubid" | "refobjsubid" => ints(&|_| 0),
            "refclassid" => ints(&|d| d.referenced_class),
            "refobjid" => ints(&|d| d.referenced),
            "deptype" => Arc::new(StringArray::from_iter_values(rows.iter().map(|d| d.kind))),
            _ => new_null_array(field.data_type(), n),
        })
        .zip(schema.fields())
        .map(|(array, field)| cast(&array, field.data_type()))
        .collect::<std::result::Result<_, _>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}
