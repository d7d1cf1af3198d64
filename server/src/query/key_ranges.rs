//! A query's filters as ranges of a stored table's key.
//!
//! Rows are stored in the order of their key (a view's stream key, a table's primary key),
//! encoded so that bytes sort like values and the encoding of the first columns of a key is a
//! prefix of the whole key's. Conjuncts of `key_column = literal`, `IN (literals)` on the
//! leading key columns, and then `<`, `<=`, `>`, `>=` or `BETWEEN` on the next one, become byte
//! ranges: a point lookup reads one key, a prefix reads its rows and nothing else. The filters
//! stay in the plan (the pushdown is inexact), so a range only has to hold every matching row.

use std::ops::Bound;
use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};
use eddy_storage::snapshot::successor;
use eddy_storage::{KeyRange, RowCodec};

/// More ranges than this (an IN list per key column multiplies them) scan the whole table.
const MAX_RANGES: usize = 4096;

/// How a stored table's rows are keyed, as far as queries can use it.
#[derive(Debug, Clone)]
pub struct KeyLayout {
    /// The key's fields, in key order.
    pub fields: Vec<Field>,
    /// The visible column each key field repeats.
    pub columns: Vec<usize>,
}

impl KeyLayout {
    /// A layout whose key fields are `columns` of `schema`, when their types match.
    pub fn new(schema: &Schema, fields: Vec<Field>, columns: Vec<usize>) -> Option<Self> {
        let matches = fields.len() == columns.len()
            && fields.iter().zip(&columns).all(|(field, &column)| {
                column < schema.fields().len()
                    && schema.field(column).data_type() == field.data_type()
            });
        matches.then_some(Self { fields, columns })
    }
}

/// What the filters say about one key column.
#[derive(Default)]
struct ColumnBounds {
    /// The values an `=` or `IN` allows (the first such conjunct).
    values: Option<Vec<ScalarValue>>,
    lower: Option<(ScalarValue, bool)>,
    upper: Option<(ScalarValue, bool)>,
}

/// The key ranges that hold every row `filters` can accept, or `None` for the whole table.
pub fn key_ranges(
    filters: &[Expr],
    schema: &SchemaRef,
    layout: &KeyLayout,
) -> Option<Vec<KeyRange>> {
    let mut bounds: Vec<ColumnBounds> = layout.fields.iter().map(|_| Default::default()).collect();
    for filter in filters {
        for conjunct in split_conjunction(filter) {
            note_conjunct(conjunct, schema, layout, &mut bounds);
        }
    }
    // Prefixes of values for the leading key columns with `=` / `IN`.
    let mut prefixes: Vec<Vec<ScalarValue>> = vec![Vec::new()];
    let mut used = 0;
    for column in &bounds {
        let Some(values) = &column.values else { break };
        if prefixes.len() * values.len() > MAX_RANGES {
            break;
        }
        prefixes = prefixes
            .iter()
            .flat_map(|prefix| {
                values.iter().map(move |value| {
                    let mut longer = prefix.clone();
                    longer.push(value.clone());
                    longer
                })
            })
            .collect();
        used += 1;
    }
    let range_column = bounds
        .get(used)
        .filter(|c| c.values.is_none() && (c.lower.is_some() || c.upper.is_some()));
    if used == 0 && range_column.is_none() {
        return None;
    }
    let prefix_codec = codec(&layout.fields[..used])?;
    let bound_codec = match range_column {
        Some(_) => Some(codec(&layout.fields[..=used])?),
        None => None,
    };
    let mut ranges = Vec::with_capacity(prefixes.len());
    for prefix in &prefixes {
        let prefix_bytes = encode(&prefix_codec, prefix)?;
        let mut range = KeyRange::prefix(&prefix_bytes);
        if let (Some(column), Some(bound_codec)) = (range_column, &bound_codec) {
            if let Some((value, inclusive)) = &column.lower {
                let bytes = encode(bound_codec, &with(prefix, value))?;
                range.start = if *inclusive {
                    Bound::Included(bytes)
                } else {
                    // Past every key that starts with this value.
                    match successor(&bytes) {
                        Some(next) => Bound::Included(next),
                        None => continue,
                    }
                };
            }
            if let Some((value, inclusive)) = &column.upper {
                let bytes = encode(bound_codec, &with(prefix, value))?;
                range.end = if *inclusive {
                    match successor(&bytes) {
                        Some(next) => Bound::Excluded(next),
                        None => range.end,
                    }
                } else {
                    Bound::Excluded(bytes)
                };
            }
        }
        if !range.is_empty() {
            ranges.push(range);
        }
    }
    ranges.sort_by(|a, b| start_key(a).cmp(start_key(b)));
    ranges.dedup();
    Some(ranges)
}

fn start_key(range: &KeyRange) -> &[u8] {
    match &range.start {
        Bound::Included(key) | Bound::Excluded(key) => key,
        Bound::Unbounded => &[],
    }
}

fn with(prefix: &[ScalarValue], value: &ScalarValue) -> Vec<ScalarValue> {
    let mut values = prefix.to_vec();
    values.push(value.clone());
    values
}

fn codec(fields: &[Field]) -> Option<RowCodec> {
    RowCodec::new(Arc::new(Schema::new(fields.to_vec()))).ok()
}

fn encode(codec: &RowCodec, values: &[ScalarValue]) -> Option<Vec<u8>> {
    if values.is_empty() {
        return Some(Vec::new());
    }
    let columns = values
        .iter()
        .map(|value| value.to_array_of_size(1))
        .collect::<datafusion::common::Result<Vec<ArrayRef>>>()
        .ok()?;
    let rows = codec.encode(&columns, 1).ok()?;
    Some(rows.row(0).as_ref().to_vec())
}

/// `key = v1 OR key = v2 ...` (what small IN lists become): the key position and values.
fn equalities(
    expr: &Expr,
    schema: &SchemaRef,
    layout: &KeyLayout,
) -> Option<(usize, Vec<ScalarValue>)> {
    let mut column = None;
    let mut values = Vec::new();
    let mut disjuncts = Vec::new();
    split_disjunction(expr, &mut disjuncts);
    for disjunct in disjuncts {
        let Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) = disjunct
        else {
            return None;
        };
        let (position, value) = match (key_field(left, schema, layout), right.as_ref()) {
            (Some(position), Expr::Literal(value, _)) => (position, value),
            _ => match (key_field(right, schema, layout), left.as_ref()) {
                (Some(position), Expr::Literal(value, _)) => (position, value),
                _ => return None,
            },
        };
        if *column.get_or_insert(position) != position {
            return None;
        }
        values.push(key_value(value, &layout.fields[position])?);
    }
    Some((column?, values))
}

fn split_disjunction<'a>(expr: &'a Expr, out: &mut Vec<&'a Expr>) {
    match expr {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => {
            split_disjunction(left, out);
            split_disjunction(right, out);
        }
        other => out.push(other),
    }
}

fn note_conjunct(expr: &Expr, schema: &SchemaRef, layout: &KeyLayout, bounds: &mut [ColumnBounds]) {
    match expr {
        Expr::BinaryExpr(BinaryExpr {
            op: Operator::Or, ..
        }) => {
            if let Some((column, values)) = equalities(expr, schema, layout) {
                if bounds[column].values.is_none() {
                    bounds[column].values = Some(values);
                }
            }
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (column, value, op) = match (key_field(left, schema, layout), right.as_ref()) {
                (Some(column), Expr::Literal(value, _)) => (column, value, *op),
                _ => match (key_field(right, schema, layout), left.as_ref()) {
                    (Some(column), Expr::Literal(value, _)) => match op.swap() {
                        Some(op) => (column, value, op),
                        None => return,
                    },
                    _ => return,
                },
            };
            let Some(value) = key_value(value, &layout.fields[column]) else {
                return;
            };
            let bounds = &mut bounds[column];
            match op {
                Operator::Eq if bounds.values.is_none() => bounds.values = Some(vec![value]),
                Operator::Gt => bounds.lower = Some((value, false)),
                Operator::GtEq => bounds.lower = Some((value, true)),
                Operator::Lt => bounds.upper = Some((value, false)),
                Operator::LtEq => bounds.upper = Some((value, true)),
                _ => {}
            }
        }
        Expr::InList(list) if !list.negated => {
            let Some(column) = key_field(&list.expr, schema, layout) else {
                return;
            };
            let mut values = Vec::with_capacity(list.list.len());
            for item in &list.list {
                let Expr::Literal(value, _) = item else {
                    return;
                };
                // NULL matches nothing; a value of another type spoils the list.
                if value.is_null() {
                    continue;
                }
                match key_value(value, &layout.fields[column]) {
                    Some(value) => values.push(value),
                    None => return,
                }
            }
            if bounds[column].values.is_none() {
                bounds[column].values = Some(values);
            }
        }
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => {
            let Some(column) = key_field(expr, schema, layout) else {
                return;
            };
            let (Expr::Literal(low, _), Expr::Literal(high, _)) = (low.as_ref(), high.as_ref())
            else {
                return;
            };
            let field = &layout.fields[column];
            if let (Some(low), Some(high)) = (key_value(low, field), key_value(high, field)) {
                bounds[column].lower = Some((low, true));
                bounds[column].upper = Some((high, true));
            }
        }
        _ => {}
    }
}

/// The key position of a plain column reference, if it is a key column.
fn key_field(expr: &Expr, schema: &SchemaRef, layout: &KeyLayout) -> Option<usize> {
    let Expr::Column(column) = expr else {
        return None;
    };
    let index = schema.index_of(&column.name).ok()?;
    layout.columns.iter().position(|&c| c == index)
}

/// `value` as the key field's type, when that loses nothing and compares as SQL does.
fn key_value(value: &ScalarValue, field: &Field) -> Option<ScalarValue> {
    // Floats order -0 before 0 and NaN last in the key bytes, where SQL says -0 = 0.
    if matches!(
        field.data_type(),
        DataType::Float16 | DataType::Float32 | DataType::Float64
    ) || value.is_null()
    {
        return None;
    }
    let cast = value.cast_to(field.data_type()).ok()?;
    let back = cast.cast_to(&value.data_type()).ok()?;
    (back == *value && !cast.is_null()).then_some(cast)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{col, lit};

    fn layout() -> (SchemaRef, KeyLayout) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Utf8, true),
        ]));
        let fields = vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Utf8, true),
        ];
        let layout = KeyLayout::new(&schema, fields, vec![1, 2]).unwrap();
        (schema, layout)
    }

    fn key(a: i64, b: &str) -> Vec<u8> {
        let (_, layout) = layout();
        let codec = codec(&layout.fields).unwrap();
        encode(&codec, &[ScalarValue::from(a), ScalarValue::from(b)]).unwrap()
    }

    fn contains(range: &KeyRange, key: &[u8]) -> bool {
        let after_start = match &range.start {
            Bound::Included(s) => key >= s.as_slice(),
            Bound::Excluded(s) => key > s.as_slice(),
            Bound::Unbounded => true,
        };
        let before_end = match &range.end {
            Bound::Included(e) => key <= e.as_slice(),
            Bound::Excluded(e) => key < e.as_slice(),
            Bound::Unbounded => true,
        };
        after_start && before_end
    }

    #[test]
    fn a_full_key_is_one_point() {
        let (schema, layout) = layout();
        let ranges = key_ranges(
            &[col("a").eq(lit(5i64)).and(col("b").eq(lit("x")))],
            &schema,
            &layout,
        )
        .unwrap();
        assert_eq!(ranges.len(), 1);
        assert!(contains(&ranges[0], &key(5, "x")));
        assert!(!contains(&ranges[0], &key(5, "xy")));
        assert!(!contains(&ranges[0], &key(6, "x")));
    }

    #[test]
    fn a_prefix_with_a_range_on_the_next_column() {
        let (schema, layout) = layout();
        let filters = [
            lit(5i64).eq(col("a")),
            col("b").gt(lit("b")),
            col("b").lt_eq(lit("d")),
        ];
        let ranges = key_ranges(&filters, &schema, &layout).unwrap();
        assert_eq!(ranges.len(), 1);
        for (b, inside) in [
            ("a", false),
            ("b", false),
            ("ba", true),
            ("d", true),
            ("da", false),
        ] {
            assert_eq!(contains(&ranges[0], &key(5, b)), inside, "{b}");
        }
        assert!(!contains(&ranges[0], &key(4, "c")));
    }

    #[test]
    fn in_lists_and_between() {
        let (schema, layout) = layout();
        let filters = [col("a").in_list(vec![lit(3i64), lit(1i64), lit(3i64)], false)];
        let ranges = key_ranges(&filters, &schema, &layout).unwrap();
        assert_eq!(ranges.len(), 2);
        assert!(contains(&ranges[0], &key(1, "z")) && contains(&ranges[1], &key(3, "")));
        let filters = [col("a").between(lit(2i64), lit(4i64))];
        let ranges = key_ranges(&filters, &schema, &layout).unwrap();
        assert_eq!(ranges.len(), 1);
        assert!(contains(&ranges[0], &key(4, "zzz")));
        assert!(!contains(&ranges[0], &key(5, "")));
        assert!(!contains(&ranges[0], &key(1, "zzz")));
    }

    #[test]
    fn equalities_joined_by_or_are_an_in_list() {
        let (schema, layout) = layout();
        let filter = col("a")
            .eq(lit(1i64))
            .or(lit(2i64).eq(col("a")))
            .or(col("a").eq(lit(9i64)));
        let ranges = key_ranges(&[filter], &schema, &layout).unwrap();
        assert_eq!(ranges.len(), 3);
        assert!(contains(&ranges[2], &key(9, "k")));
    }

    #[test]
    fn what_cannot_narrow_the_scan() {
        let (schema, layout) = layout();
        // Not the leading key column, a non-key column, a lossy literal, an OR.
        for filter in [
            col("b").eq(lit("x")),
            col("n").eq(lit(1i64)),
            col("a").eq(lit(1.5f64)),
            col("a").eq(lit(1i64)).or(col("b").eq(lit("x"))),
        ] {
            assert!(
                key_ranges(std::slice::from_ref(&filter), &schema, &layout).is_none(),
                "{filter}"
            );
        }
        // A contradiction reads nothing.
        let ranges = key_ranges(
            &[col("a").gt(lit(5i64)), col("a").lt(lit(3i64))],
            &schema,
            &layout,
        )
        .unwrap();
        assert!(ranges.is_empty());
    }
}
