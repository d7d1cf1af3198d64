//! Object sizes as psql's `\l+`, `\dt+`, `\dm+` and monitoring tools ask for them:
//! `pg_database_size` (the store on disk), `pg_total_relation_size`, `pg_table_size` and
//! `pg_relation_size` (the bytes of an object's rows, or of an index's entries, and for the
//! total, its operators' state), `pg_indexes_size` (the entries of a relation's indexes; a
//! primary key is the rows' own order, with none), and `pg_size_pretty`.

use std::sync::{Arc, Weak};

use datafusion::arrow::array::{Array, ArrayRef, Int64Array, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use eddy_storage::CatalogEntry;

use crate::catalogs::pg_catalog::RelationOids;
use crate::database::Database;

/// Which size a function reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Size {
    Database,
    /// Rows and operator state.
    Total,
    /// Rows only.
    Rows,
    Indexes,
}

struct SizeFunction {
    name: &'static str,
    size: Size,
    signature: Signature,
    db: Weak<Database>,
    oids: RelationOids,
}

impl std::fmt::Debug for SizeFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for SizeFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for SizeFunction {}

impl std::hash::Hash for SizeFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state)
    }
}

impl SizeFunction {
    /// The bytes of an object's rows (and with `Total`, of its state tables).
    fn object_size(&self, db: &Database, name: &str) -> Result<Option<i64>> {
        let entries = CatalogEntry::load_all(db.store.as_ref())
            .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
        let Some(entry) = entries.into_iter().find(|e| e.name == name) else {
            return Ok(None);
        };
        let tables = match self.size {
            Size::Total => entry.table_ids.clone(),
            _ => entry.table_ids.iter().take(1).copied().collect(),
        };
        let mut bytes = 0i64;
        for table in tables {
            let rows = db
                .store
                .scan_table(table)
                .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
            bytes += rows
                .iter()
                .map(|(k, v)| (k.len() + v.len()) as i64)
                .sum::<i64>();
        }
        Ok(Some(bytes))
    }

    fn size_of(&self, db: &Database, argument: &ArrayRef, i: usize) -> Result<Option<i64>> {
        if argument.is_null(i) {
            return Ok(None);
        }
        let value = ScalarValue::try_from_array(argument, i)?;
        if self.size == Size::Database {
            return Ok(Some(db.store.size_on_disk() as i64));
        }
        let name = match value {
            ScalarValue::Utf8(Some(name)) => Some(name),
            other => other
                .cast_to(&DataType::Int64)
                .ok()
                .and_then(|oid| match oid {
                    ScalarValue::Int64(Some(oid)) => self
                        .oids
                        .read()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(&(oid as i32))
                        .map(|(_, name)| name.clone()),
                    _ => None,
                }),
        };
        let Some(name) = name else {
            return Ok(None);
        };
        // The entries of the relation's indexes (a primary key is the rows' own order).
        let mut indexes = 0;
        if matches!(self.size, Size::Indexes | Size::Total) {
            for index in db.indexes.all() {
                if index.relation == name {
                    indexes += self.object_size(db, &index.name)?.unwrap_or(0);
                }
            }
        }
        if self.size == Size::Indexes {
            return Ok(Some(indexes));
        }
        Ok(Some(self.object_size(db, &name)?.unwrap_or(0) + indexes))
    }
}

impl ScalarUDFImpl for SizeFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let Some(db) = self.db.upgrade() else {
            return Ok(ColumnarValue::Array(Arc::new(Int64Array::new_null(rows))));
        };
        let sizes = (0..rows)
            .map(|i| self.size_of(&db, &arrays[0], i))
            .collect::<Result<Int64Array>>()?;
        Ok(ColumnarValue::Array(Arc::new(sizes)))
    }
}

/// `pg_size_pretty(bytes)`: Postgres' units and rounding (`10 kB` from 10,240 bytes on, each
/// unit up to 20,479 before the next, halves rounded away from zero).
pub fn size_pretty(bytes: i64) -> String {
    // (name, limit, rounded, bits)
    const UNITS: [(&str, i64, bool, u32); 6] = [
        ("bytes", 10 * 1024, false, 0),
        ("kB", 20 * 1024 - 1, true, 10),
        ("MB", 20 * 1024 - 1, true, 20),
        ("GB", 20 * 1024 - 1, true, 30),
        ("TB", 20 * 1024 - 1, true, 40),
        ("PB", 20 * 1024 - 1, true, 50),
    ];
    let half_rounded = |x: i64| (x + if x < 0 { -1 } else { 1 }) / 2;
    let mut size = bytes;
    for (index, (name, limit, rounded, bits)) in UNITS.iter().enumerate() {
        let last = index + 1 == UNITS.len();
        if last || size.abs() < *limit {
            if *rounded {
                size = half_rounded(size);
            }
            return format!("{size} {name}");
        }
        let (_, _, next_rounded, next_bits) = UNITS[index + 1];
        let shift = next_bits - bits - u32::from(next_rounded) + u32::from(*rounded);
        size /= 1i64 << shift;
    }
    format!("{bytes} bytes")
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SizePretty {
    signature: Signature,
}

impl ScalarUDFImpl for SizePretty {
    fn name(&self) -> &str {
        "pg_size_pretty"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let bytes = datafusion::arrow::compute::cast(&arrays[0], &DataType::Int64)?;
        let bytes = bytes
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| datafusion::error::DataFusionError::Internal("not int64".into()))?;
        let text: StringArray = bytes.iter().map(|b| b.map(size_pretty)).collect();
        Ok(ColumnarValue::Array(Arc::new(text)))
    }
}

/// Registers the size functions.
pub fn register(ctx: &SessionContext, db: Weak<Database>, oids: RelationOids) {
    ctx.register_udf(ScalarUDF::new_from_impl(SizePretty {
        signature: Signature::any(1, Volatility::Immutable),
    }));
    for (name, size) in [
        ("pg_database_size", Size::Database),
        ("pg_total_relation_size", Size::Total),
        ("pg_table_size", Size::Rows),
        ("pg_relation_size", Size::Rows),
        ("pg_indexes_size", Size::Indexes),
    ] {
        ctx.register_udf(ScalarUDF::new_from_impl(SizeFunction {
            name,
            size,
            signature: Signature::one_of(
                vec![TypeSignature::Any(1), TypeSignature::Any(2)],
                Volatility::Volatile,
            ),
            db: db.clone(),
            oids: oids.clone(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_as_postgres_prints_them() {
        // What PostgreSQL 15 prints for the same numbers.
        assert_eq!(size_pretty(0), "0 bytes");
        assert_eq!(size_pretty(10239), "10239 bytes");
        assert_eq!(size_pretty(10240), "10 kB");
        assert_eq!(size_pretty(123456789), "118 MB");
        assert_eq!(size_pretty(-10240), "-10 kB");
    }
}
