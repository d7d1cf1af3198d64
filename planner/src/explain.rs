//! `EXPLAIN CREATE MATERIALIZED VIEW`: a stream plan as text, from the view down to its input,
//! with what each operator keeps as state and which columns the watermark bounds.

use datafusion::arrow::datatypes::SchemaRef;

use crate::stream::{
    AggregatePlan, JoinOutputKey, JoinPlan, NodeKind, StreamNode, StreamPlan, WatermarkColumn,
};
use crate::stream::{AsofOrder, OverWindowPlan, RankKind, TopNPlan};
use crate::window::{WindowKind, WindowSpec};

/// A duration in microseconds, as short as it stays exact (`10s`, `1500ms`, `1m`).
pub fn duration(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let m = micros.unsigned_abs();
    for (unit, size) in [
        ("h", 3_600_000_000u64),
        ("m", 60_000_000),
        ("s", 1_000_000),
        ("ms", 1_000),
    ] {
        if m >= size && m.is_multiple_of(size) {
            return format!("{sign}{}{unit}", m / size);
        }
    }
    format!("{sign}{m}us")
}

pub(crate) fn window(spec: &WindowSpec) -> String {
    let shape = match spec.kind {
        WindowKind::Tumble { size } => format!("TUMBLE size {}", duration(size)),
        WindowKind::Hop { slide, size } => {
            format!("HOP slide {} size {}", duration(slide), duration(size))
        }
        WindowKind::Cumulate { step, size } => {
            format!("CUMULATE step {} size {}", duration(step), duration(size))
        }
        WindowKind::Session { gap } => format!("SESSION gap {}", duration(gap)),
    };
    if spec.offset == 0 {
        shape
    } else {
        format!("{shape} offset {}", duration(spec.offset))
    }
}

fn watermarks(columns: &[String], marks: &[WatermarkColumn]) -> String {
    if marks.is_empty() {
        return "none".into();
    }
    marks
        .iter()
        .map(|w| {
            let name = columns.get(w.column).map_or("?", |c| c.as_str());
            if w.shift == 0 {
                name.to_string()
            } else {
                format!("{name} ({})", duration(w.shift))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn names(schema: &SchemaRef) -> Vec<String> {
    schema.fields().iter().map(|f| f.name().clone()).collect()
}

fn emits(append_only: bool) -> &'static str {
    if append_only {
        "inserts only"
    } else {
        "inserts, updates and deletes"
    }
}

/// The plan of view `name`, one line per row of EXPLAIN's output.
pub fn explain(plan: &StreamPlan, name: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let columns = names(&plan.schema);
    lines.push(format!("Materialize \"{name}\" ({})", columns.join(", ")));
    lines.push(format!(
        "    stream key: {} column(s); emits: {}; watermark on: {}",
        plan.key_len(),
        emits(plan.append_only),
        watermarks(&columns, &plan.watermarks)
    ));
    lines.push("    state: table 1 (the view's rows, by stream key)".into());
    let mut numbers = Vec::new();
    number_state_tables(&plan.root, &mut 1, &mut numbers);
    let mut writer = Writer {
        plan,
        lines,
        numbers,
    };
    writer.node(&plan.root, 1);
    writer.lines
}

/// Numbers the state tables as the executor assigns them: children before their parent, left
/// before right, after the view's own table (1).
fn number_state_tables(
    node: &StreamNode,
    next: &mut usize,
    numbers: &mut Vec<(*const StreamNode, usize)>,
) {
    for input in &node.inputs {
        number_state_tables(input, next, numbers);
    }
    numbers.push((node as *const StreamNode, *next + 1));
    *next += node.state_tables();
}

struct Writer<'a> {
    plan: &'a StreamPlan,
    lines: Vec<String>,
    /// Each node's first state table number.
    numbers: Vec<(*const StreamNode, usize)>,
}

impl Writer<'_> {
    /// The state table numbers of `node`'s own tables.
    fn own_tables(&self, node: &StreamNode) -> Vec<usize> {
        let first = self
            .numbers
            .iter()
            .find(|(n, _)| std::ptr::eq(*n, node))
            .map_or(0, |(_, first)| *first);
        (0..node.state_tables()).map(|i| first + i).collect()
    }

    fn node(&mut self, node: &StreamNode, depth: usize) {
        let pad = "  ".repeat(depth);
        let tables = self.own_tables(node);
        match &node.kind {
            NodeKind::Input { input, .. } => {
                let source = &self.plan.inputs[*input].source;
                self.lines.push(format!(
                    "{pad}Source \"{}\": {}; key {} column(s); watermark on: {}",
                    source.name,
                    emits(source.append_only),
                    source.key_len(),
                    watermarks(&source.columns, &source.watermarks)
                ));
            }
            NodeKind::Filter { predicate } => self.lines.push(format!("{pad}Filter {predicate}")),
            NodeKind::Project { exprs } => {
                let list: Vec<String> = exprs
                    .iter()
                    .zip(node.schema.fields())
                    .map(|(e, f)| {
                        let text = e.to_string();
                        if text.starts_with(&format!("{}@", f.name())) {
                            f.name().clone()
                        } else {
                            format!("{text} AS {}", f.name())
                        }
                    })
                    .collect();
                self.lines.push(format!("{pad}Project {}", list.join(", ")));
            }
            NodeKind::Window {
                time_column, spec, ..
            } => {
                let time = node.schema.field(*time_column).name();
                let what = if spec.is_session() {
                    "each row's own session, merged by the aggregate above".to_string()
                } else {
                    "window_start, window_end".to_string()
                };
                self.lines.push(format!(
                    "{pad}Window {} on {time}: adds {what}",
                    window(spec)
                ));
            }
            NodeKind::Aggregate(agg) => self.aggregate(agg, &pad, tables[0]),
            NodeKind::Join(join) => self.join(join, node, &pad, &tables),
            NodeKind::Asof(asof) => {
                let kind = match (asof.final_rows, asof.outer) {
                    (true, true) => {
                        "TemporalJoin LEFT (event time: the version valid at each row's time)"
                    }
                    (true, false) => {
                        "TemporalJoin INNER (event time: the version valid at each row's time)"
                    }
                    (false, true) => "AsofJoin LEFT",
                    (false, false) => "AsofJoin INNER",
                };
                let (l, r) = (
                    asof.left.schema.field(asof.left_time).name(),
                    asof.right.schema.field(asof.right_time).name(),
                );
                let order = match asof.order {
                    AsofOrder::AtOrBefore { strict: false } => {
                        format!("the latest right row with {r} <= {l}")
                    }
                    AsofOrder::AtOrBefore { strict: true } => {
                        format!("the latest right row with {r} < {l}")
                    }
                    AsofOrder::AtOrAfter { strict: false } => {
                        format!("the earliest right row with {r} >= {l}")
                    }
                    AsofOrder::AtOrAfter { strict: true } => {
                        format!("the earliest right row with {r} > {l}")
                    }
                };
                self.lines.push(format!(
                    "{pad}{kind} on {}: {order}, ties to the smallest right key",
                    keys_text(&asof.left.key_names, &asof.right.key_names, false)
                ));
                let emits = if asof.final_rows {
                    "each left row once, when the right watermark passes its time"
                } else {
                    "a left row's match again when a right change makes another row best"
                };
                self.lines.push(format!("{pad}    emits {emits}"));
                self.lines.push(format!(
                    "{pad}    left state: table {} (rows of {}); right state: table {} (rows of {})",
                    tables[0],
                    quoted(&asof.left.reads),
                    tables[1],
                    quoted(&asof.right.reads)
                ));
            }
            NodeKind::TopN(top) => self.top_n(top, &pad, tables[0]),
            NodeKind::OverWindow(over) => self.over_window(over, &pad, tables[0]),
            NodeKind::Union(union) => {
                let clocks = if union.clocks.is_empty() {
                    "no watermark".to_string()
                } else {
                    format!(
                        "watermark on {}: the minimum over the branches",
                        watermarks(
                            &node
                                .schema
                                .fields()
                                .iter()
                                .map(|f| f.name().clone())
                                .collect::<Vec<_>>(),
                            &node.watermarks
                        )
                    )
                };
                self.lines.push(format!(
                    "{pad}UnionAll of {} inputs (key: branch number, then each branch's key); {clocks}",
                    node.inputs.len()
                ));
            }
            NodeKind::TemporalFilter(filter) => {
                let bounds: Vec<String> = filter
                    .bounds
                    .iter()
                    .map(|b| {
                        let offset = match b.offset {
                            0 => String::new(),
                            o if o < 0 => format!(" - {}", duration(-o)),
                            o => format!(" + {}", duration(o)),
                        };
                        format!("{} {} now(){offset}", b.time, b.op.symbol())
                    })
                    .collect();
                self.lines.push(format!(
                    "{pad}TemporalFilter {}: now() read once per epoch; rows {} as the wall clock passes; state: table {} (rows waiting to enter or to leave, by that time; not replayable)",
                    bounds.join(" AND "),
                    if filter.only_enters() { "enter" } else { "enter and leave" },
                    tables[0]
                ));
            }
            NodeKind::Proctime { clock } => {
                let columns: Vec<&str> = node
                    .watermarks
                    .iter()
                    .filter(|w| w.clock == *clock)
                    .map(|w| node.schema.field(w.column).name().as_str())
                    .collect();
                self.lines.push(format!(
                    "{pad}Proctime {}: the wall clock at each chunk; watermark: the wall clock at each barrier (not replayable)",
                    columns.join(", ")
                ));
            }
            NodeKind::Lookup(lookup) => {
                let state = match (lookup.by_index, lookup.left_retracts) {
                    (false, false) => "no join state".to_string(),
                    (true, false) => format!("an index of \"{}\" by the join key", lookup.table),
                    (false, true) => format!("state: table {} (each left row's output rows)", tables[0]),
                    (true, true) => format!(
                        "an index of \"{}\" by the join key; state: table {} (each left row's output rows)",
                        lookup.table, tables[0]
                    ),
                };
                self.lines.push(format!(
                    "{pad}LookupJoin {} on {} into the current rows of \"{}\" ({state}; changes to \"{}\" emit nothing; not replayable)",
                    if lookup.outer { "LEFT" } else { "INNER" },
                    keys_text(&lookup.left.key_names, &lookup.right.key_names, false),
                    lookup.table,
                    lookup.table
                ));
            }
        }
        for input in &node.inputs {
            self.node(input, depth + 1);
        }
    }

    fn over_window(&mut self, over: &OverWindowPlan, pad: &str, table: usize) {
        let list = |exprs: Vec<String>| exprs.join(", ");
        let functions = list(
            over.functions
                .iter()
                .map(|f| f.name().to_string())
                .collect(),
        );
        let partitions = if over.partition_by.is_empty() {
            String::new()
        } else {
            format!(
                " per ({})",
                list(over.partition_by.iter().map(|e| e.to_string()).collect())
            )
        };
        let order = list(over.order_by.iter().map(|e| e.to_string()).collect());
        self.lines.push(format!(
            "{pad}OverWindow{partitions} by {order}: {functions}"
        ));
        let state = match (&over.final_rows, &over.general_reason) {
            (Some(f), _) => {
                let kept = if f.history.all {
                    "every row of each partition".to_string()
                } else {
                    let mut reach = vec![format!("the last {} rows", f.history.rows)];
                    if let Some(micros) = f.history.micros {
                        reach.push(format!("the rows of the last {micros} µs"));
                    }
                    format!("{} of each partition", reach.join(" and "))
                };
                let waits = if f.following > 0 {
                    format!(" and {} final rows after it", f.following)
                } else {
                    String::new()
                };
                format!(
                    "emits each row once, when the watermark passes its time{waits}; keeps {kept}"
                )
            }
            (None, reason) => format!(
                "general form ({}): keeps every row, a change recomputes its partition and updates the rows whose values changed",
                reason.as_deref().unwrap_or("")
            ),
        };
        self.lines
            .push(format!("{pad}    state: table {table} ({state})"));
    }

    fn top_n(&mut self, top: &TopNPlan, pad: &str, table: usize) {
        let list = |exprs: Vec<String>| exprs.join(", ");
        let order = if top.by_stream_key {
            "the stream key (LIMIT without ORDER BY)".to_string()
        } else {
            list(top.order_by.iter().map(|e| e.to_string()).collect())
        };
        let partitions = if top.partition_by.is_empty() {
            String::new()
        } else {
            format!(
                " per ({})",
                list(top.partition_by.iter().map(|e| e.to_string()).collect())
            )
        };
        let ranks = match top.rank {
            RankKind::RowNumber => "rows",
            RankKind::Rank => "ranks (RANK)",
            RankKind::DenseRank => "ranks (DENSE_RANK)",
        };
        let offset = if top.offset > 0 {
            format!(" after the first {}", top.offset)
        } else {
            String::new()
        };
        self.lines.push(format!(
            "{pad}TopN {} {ranks}{offset}{partitions} by {order}",
            top.limit
        ));
        let kept = if top.input_append_only {
            "the top rows of each partition (the input only appends)"
        } else {
            "every input row (the input retracts: the next row moves up)"
        };
        let close = match (top.close, top.emit_on_close) {
            (Some(_), true) => {
                "; a partition's top is emitted once, when its window closes, and its state dropped"
            }
            (Some(_), false) => "; a partition's state is dropped when its window closes",
            (None, _) => "",
        };
        self.lines
            .push(format!("{pad}    state: table {table} ({kept}){close}"));
    }

    fn aggregate(&mut self, agg: &AggregatePlan, pad: &str, table: usize) {
        let group_names: Vec<String> = agg.schema.fields()[..agg.group_exprs.len()]
            .iter()
            .map(|f| f.name().clone())
            .collect();
        // An aggregate's name includes its FILTER and ORDER BY.
        let aggregates: Vec<String> = agg
            .aggregates
            .iter()
            .map(|a| a.name().to_string())
            .collect();
        let kind = if agg.session.is_some() {
            "SessionAggregate"
        } else {
            "Aggregate"
        };
        // Grouping sets list each set's columns; the grouping id column is the key's last.
        let sets = agg.grouping_sets.as_ref().map_or(String::new(), |sets| {
            let sets: Vec<String> = sets
                .iter()
                .map(|set| {
                    let kept: Vec<&str> = group_names
                        .iter()
                        .zip(&set.absent)
                        .filter(|(_, absent)| !**absent)
                        .map(|(name, _)| name.as_str())
                        .collect();
                    format!("({})", kept.join(", "))
                })
                .collect();
            format!(" grouping sets {}", sets.join(", "))
        });
        self.lines.push(format!(
            "{pad}{kind} group by ({}){sets} computing {}",
            group_names.join(", "),
            aggregates.join(", ")
        ));
        let input = if agg.input_append_only {
            "input inserts only"
        } else {
            "input with retractions (retractable accumulators)"
        };
        let closing = match (agg.window, agg.watermarked) {
            (Some(crate::stream::WindowBound::Column { group_index }), true) => format!(
                "emits changes at each barrier; evicts a group once the watermark passes its {}",
                group_names[group_index]
            ),
            (Some(_), true) if agg.emit_on_window_close => {
                "emits each window once, when the watermark passes its end; then evicts it".into()
            }
            (Some(_), true) => {
                "emits changes at each barrier; evicts a window when the watermark passes its end"
                    .into()
            }
            (Some(_), false) => {
                "emits changes at each barrier; windows never close (no watermark)".into()
            }
            (None, _) => "emits changes at each barrier".to_string(),
        };
        self.lines.push(format!("{pad}    {input}; {closing}"));
        let bound = if agg.group_len() == 0 {
            "one row"
        } else if agg.watermarked {
            "one row per open window and group"
        } else if agg.input_append_only {
            "one row per group ever seen: UNBOUNDED"
        } else {
            "one row per group with rows"
        };
        let what = if agg.session.is_some() {
            "session"
        } else {
            "group"
        };
        self.lines.push(format!(
            "{pad}    state: table {table} (accumulators per {what}; {bound})"
        ));
    }

    fn join(&mut self, join: &JoinPlan, node: &StreamNode, pad: &str, tables: &[usize]) {
        let on = keys_text(
            &join.left.key_names,
            &join.right.key_names,
            join.nulls_match,
        );
        let filter = join
            .filter
            .as_ref()
            .map_or(String::new(), |f| format!(" filter {f}"));
        let emit = if join.pad_on_eviction {
            "; pads unmatched rows once, when evicted"
        } else {
            ""
        };
        self.lines.push(format!(
            "{pad}Join {} on {}{filter}{emit}",
            join_type(join.join_type),
            on
        ));
        let key = match (join.output_key, join.outputs_left(), join.outputs_right()) {
            (JoinOutputKey::Both, _, _) => "left key, right key",
            (JoinOutputKey::Left, true, false) => "left key (only left rows are output)",
            (JoinOutputKey::Right, false, true) => "right key (only right rows are output)",
            (JoinOutputKey::Left, _, _) => {
                "left key (the right side matches at most once per join key)"
            }
            (JoinOutputKey::Right, _, _) => {
                "right key (the left side matches at most once per join key)"
            }
        };
        let columns = names(&node.schema);
        self.lines.push(format!(
            "{pad}    output key: {key}; emits: {}; watermark on: {}",
            emits(node.append_only),
            watermarks(&columns, &node.watermarks)
        ));
        let sides = [("left", &join.left), ("right", &join.right)];
        for (s, ((which, side), table)) in sides.into_iter().zip(tables).enumerate() {
            let retention = match join.evictions[s] {
                Some(eviction) => {
                    let (other, other_side) = sides[1 - s];
                    let offset = match eviction.offset {
                        0 => String::new(),
                        k if k > 0 => format!(" + {}", duration(k)),
                        k => format!(" - {}", duration(-k)),
                    };
                    let column = side.schema.field(eviction.column).name();
                    // A side that retracts also waits for its own clock (no delete can follow).
                    let own = match eviction.own {
                        Some(_) => format!(" and {column} < watermark({which}.{column})"),
                        None => String::new(),
                    };
                    format!(
                        "evicts a row once {column} < watermark({other}.{}){offset}{own}",
                        other_side.schema.field(eviction.other_column).name()
                    )
                }
                None if side.append_only && join.fixed_keys(1 - s) => format!(
                    "keeps a row until its key arrives on the {} side, which holds one row per key: UNBOUNDED",
                    sides[1 - s].0
                ),
                None if side.append_only => "keeps every row forever: UNBOUNDED".to_string(),
                None => "follows its input's rows".to_string(),
            };
            self.lines.push(format!(
                "{pad}    {which} state: table {table} (rows of {} by join key; {retention})",
                side.reads
                    .iter()
                    .map(|r| format!("\"{r}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
}

fn keys_text(left: &[String], right: &[String], nulls_match: bool) -> String {
    left.iter()
        .zip(right)
        .map(|(l, r)| {
            if nulls_match {
                format!("{l} IS NOT DISTINCT FROM {r}")
            } else {
                format!("{l} = {r}")
            }
        })
        .collect::<Vec<_>>()
        .join(" AND ")
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn join_type(join_type: datafusion::common::JoinType) -> &'static str {
    use datafusion::common::JoinType::*;
    match join_type {
        Inner => "INNER",
        Left => "LEFT OUTER",
        Right => "RIGHT OUTER",
        Full => "FULL OUTER",
        LeftSemi => "LEFT SEMI",
        RightSemi => "RIGHT SEMI",
        LeftAnti => "LEFT ANTI",
        RightAnti => "RIGHT ANTI",
        LeftMark => "LEFT MARK",
        RightMark => "RIGHT MARK",
    }
}

#[cfg(test)]
mod tests {
    use super::duration;

    #[test]
    fn durations_read_as_written() {
        assert_eq!(duration(10_000_000), "10s");
        assert_eq!(duration(60_000_000), "1m");
        assert_eq!(duration(1_500_000), "1500ms");
        assert_eq!(duration(-3_600_000_000), "-1h");
        assert_eq!(duration(7), "7us");
    }
}
