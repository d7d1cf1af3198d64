//! Time bounds of a join: which rows of each side no future row of the other side can match,
//! read from the join's equalities and its residual predicate, and the output columns the
//! inputs' clocks still bound.
//!
//! A future row of side Y has `Y.d >= bound(Y.d)` (Y's clock on `d` plus its shift): rows below
//! the watermark never pass a source. So for `X.c = Y.d` an X row with `c < bound(Y.d)` can
//! never match again, and for `X.c >= Y.d + k` (from `BETWEEN`, `>=`, `>`, `<`, `<=`, with
//! interval literals on either side) one with `c < bound(Y.d) + k`. Only Y's watermark is needed:
//! in Nexmark q4 `B.date_time <= A.expires` lets bids' watermark evict auctions though `expires`
//! has no watermark of its own.
//!
//! Inputs that retract (a windowed aggregate's output) qualify when their changes, deletes too,
//! respect their watermarks (`StreamNode::respects_watermarks`): a window's groups never change once it has
//! closed. A retracting side's row also waits for its own clock to pass it, so that no delete of
//! it can follow its eviction. Then a row a delete of the other side could meet was never evicted
//! (the delete is a future row of that side, which the rule says cannot match it).

use datafusion::common::DFSchema;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};

use super::{StreamNode, WatermarkColumn};

/// Rows of a side whose `column` is below the other side's clock plus `shift` are evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Eviction {
    /// This side's column (a visible column index of the side).
    pub column: usize,
    /// The other side's clock and the shift added to its value (micros).
    pub clock: usize,
    pub shift: i64,
    /// The other side's column whose watermark bounds this one, and the constant between them
    /// (micros): rows go when `column < watermark(other_column) + offset` (for EXPLAIN).
    pub other_column: usize,
    pub offset: i64,
    /// For a side that retracts: its own clock on `column` (and the shift), which must also have
    /// passed a row before it goes, so that no delete of it can come after.
    pub own: Option<WatermarkColumn>,
}

/// One side of a comparison: a column of the left (0) or right (1) input plus a constant.
#[derive(Debug, Clone, Copy)]
struct Term {
    side: usize,
    column: usize,
    offset: i64,
}

/// `X.c >= Y.d + k`: rows of X with c below Y's bound on d plus k cannot match.
#[derive(Debug, Clone, Copy)]
struct AtLeast {
    larger: Term,
    smaller: Term,
    /// The constant in micros (`k`; a strict `>` adds 1).
    k: i64,
}

/// The eviction rule each side's rows can have, from equalities of columns (`on`) and the
/// residual predicate; None for a side no rule bounds. `sides` are the planned inputs.
pub fn evictions(
    on: &[(Option<usize>, Option<usize>)],
    filter: Option<&Expr>,
    schemas: [&DFSchema; 2],
    sides: [&StreamNode; 2],
) -> [Option<Eviction>; 2] {
    if !sides.iter().all(|side| side.respects_watermarks()) {
        return [None, None];
    }
    let mut rules: Vec<AtLeast> = Vec::new();
    for pair in on {
        if let (Some(l), Some(r)) = *pair {
            let (left, right) = (
                Term {
                    side: 0,
                    column: l,
                    offset: 0,
                },
                Term {
                    side: 1,
                    column: r,
                    offset: 0,
                },
            );
            rules.push(AtLeast {
                larger: left,
                smaller: right,
                k: 0,
            });
            rules.push(AtLeast {
                larger: right,
                smaller: left,
                k: 0,
            });
        }
    }
    if let Some(filter) = filter {
        for conjunct in split_conjunction(filter) {
            rules.extend(comparisons(conjunct, schemas));
        }
    }
    let mut out = [None, None];
    for rule in rules {
        let x = rule.larger.side;
        if out[x].is_some() {
            continue;
        }
        // Bounded by the other side's clock on its column.
        let Some(bound) = watermark(sides[rule.smaller.side], rule.smaller.column) else {
            continue;
        };
        let own = match sides[x].append_only {
            true => None,
            false => match watermark(sides[x], rule.larger.column) {
                Some(own) => Some(own),
                None => continue,
            },
        };
        out[x] = Some(Eviction {
            column: rule.larger.column,
            clock: bound.clock,
            shift: bound.shift + rule.k,
            other_column: rule.smaller.column,
            offset: rule.k,
            own,
        });
    }
    out
}

fn watermark(node: &StreamNode, column: usize) -> Option<WatermarkColumn> {
    node.watermarks.iter().find(|w| w.column == column).copied()
}

/// The `X.c >= Y.d + k` rules of one conjunct (a `BETWEEN` gives two).
fn comparisons(expr: &Expr, schemas: [&DFSchema; 2]) -> Vec<AtLeast> {
    match expr {
        Expr::Between(between) if !between.negated => {
            let low = Expr::BinaryExpr(BinaryExpr::new(
                between.expr.clone(),
                Operator::GtEq,
                between.low.clone(),
            ));
            let high = Expr::BinaryExpr(BinaryExpr::new(
                between.expr.clone(),
                Operator::LtEq,
                between.high.clone(),
            ));
            [low, high]
                .iter()
                .flat_map(|e| comparisons(e, schemas))
                .collect()
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (Some(a), Some(b)) = (term(left, schemas), term(right, schemas)) else {
                return Vec::new();
            };
            if a.side == b.side {
                return Vec::new();
            }
            // a.c + ka OP b.d + kb
            let rule = |larger: Term, smaller: Term, strict: bool| AtLeast {
                larger,
                smaller,
                k: smaller.offset - larger.offset + i64::from(strict),
            };
            match op {
                Operator::GtEq => vec![rule(a, b, false)],
                Operator::Gt => vec![rule(a, b, true)],
                Operator::LtEq => vec![rule(b, a, false)],
                Operator::Lt => vec![rule(b, a, true)],
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

/// A column of either side, plus or minus a constant interval.
fn term(expr: &Expr, schemas: [&DFSchema; 2]) -> Option<Term> {
    match expr {
        Expr::Column(c) => schemas.iter().enumerate().find_map(|(side, schema)| {
            Some(Term {
                side,
                column: schema.index_of_column(c).ok()?,
                offset: 0,
            })
        }),
        Expr::Cast(cast) => term(&cast.expr, schemas),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let base = term(left, schemas)?;
            let Expr::Literal(value, _) = right.as_ref() else {
                return None;
            };
            let micros = crate::window::interval_micros(value)?;
            match op {
                Operator::Plus => Some(Term {
                    offset: base.offset.checked_add(micros)?,
                    ..base
                }),
                Operator::Minus => Some(Term {
                    offset: base.offset.checked_sub(micros)?,
                    ..base
                }),
                _ => None,
            }
        }
        _ => None,
    }
}
