//! Which input columns a projection carries through, and with them the stream key, the
//! watermarks and the window columns that follow a column wherever it is copied.

use datafusion::common::DFSchema;
use datafusion::logical_expr::Expr;

use super::{watermark_on, WatermarkColumn, WindowColumn};

/// For each of `exprs`, the input column it copies (a plain column reference), if any.
fn copied_columns(exprs: &[Expr], input: &DFSchema) -> Vec<Option<usize>> {
    exprs
        .iter()
        .map(|e| match e.clone().unalias() {
            Expr::Column(c) => input.index_of_column(&c).ok(),
            _ => None,
        })
        .collect()
}

/// The watermarked columns left after `exprs` (plain column references keep theirs).
pub(super) fn project_watermarks(
    watermarks: &[WatermarkColumn],
    exprs: &[Expr],
    input: &DFSchema,
) -> Vec<WatermarkColumn> {
    copied_columns(exprs, input)
        .into_iter()
        .enumerate()
        .filter_map(|(i, from)| {
            let from = watermark_on(watermarks, from?)?;
            Some(WatermarkColumn { column: i, ..from })
        })
        .collect()
}

/// The window columns left after `exprs`.
pub(super) fn project_windows(
    windows: &[WindowColumn],
    exprs: &[Expr],
    input: &DFSchema,
) -> Vec<WindowColumn> {
    copied_columns(exprs, input)
        .into_iter()
        .enumerate()
        .filter_map(|(i, from)| {
            let from = windows.iter().find(|w| Some(w.column) == from)?;
            Some(WindowColumn { column: i, ..*from })
        })
        .collect()
}

/// Where the key columns `key` end up after `exprs`, if every one is still there.
pub(super) fn project_key_columns(
    key: &Option<Vec<usize>>,
    exprs: &[Expr],
    input: &DFSchema,
) -> Option<Vec<usize>> {
    let key = key.as_ref()?;
    let positions = copied_columns(exprs, input);
    key.iter()
        .map(|k| positions.iter().position(|p| *p == Some(*k)))
        .collect()
}
