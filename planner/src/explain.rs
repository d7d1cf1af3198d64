//! `EXPLAIN CREATE MATERIALIZED VIEW`: a stream plan as text, from the view down to its input,
//! with what each operator keeps as state and which columns the watermark bounds.

use datafusion::arrow::datatypes::SchemaRef;

use crate::stream_plan::{StreamNode, StreamPlan, WatermarkColumn};
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

fn window(spec: &WindowSpec) -> String {
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

/// The plan of view `name`, one line per row of EXPLAIN's output.
pub fn explain(plan: &StreamPlan, name: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let columns = names(&plan.schema);
    let mut state_tables = 1;
    lines.push(format!("Materialize \"{name}\" ({})", columns.join(", ")));
    lines.push(format!(
        "    stream key: {} column(s); emits: {}; watermark on: {}",
        plan.key_len,
        if plan.append_only {
            "inserts only"
        } else {
            "inserts, updates and deletes"
        },
        watermarks(&columns, &plan.watermarks)
    ));
    lines.push("    state: table 1 (the view's rows, by stream key)".into());
    let mut depth = 1;
    for node in plan.nodes.iter().rev() {
        let pad = "  ".repeat(depth);
        match node {
            StreamNode::Filter { predicate } => lines.push(format!("{pad}Filter {predicate}")),
            StreamNode::Project { exprs, schema } => {
                let list: Vec<String> = exprs
                    .iter()
                    .zip(schema.fields())
                    .map(|(e, f)| {
                        let text = e.to_string();
                        if text.starts_with(&format!("{}@", f.name())) {
                            f.name().clone()
                        } else {
                            format!("{text} AS {}", f.name())
                        }
                    })
                    .collect();
                lines.push(format!("{pad}Project {}", list.join(", ")));
            }
            StreamNode::Window {
                time_column,
                spec,
                schema,
                ..
            } => {
                let time = schema.field(*time_column).name();
                let what = if spec.is_session() {
                    "each row's own session, merged by the aggregate above".to_string()
                } else {
                    "window_start, window_end".to_string()
                };
                lines.push(format!(
                    "{pad}Window {} on {time}: adds {what}",
                    window(spec)
                ));
            }
            StreamNode::Aggregate(agg) => {
                state_tables += 1;
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
                lines.push(format!(
                    "{pad}{kind} group by ({}) computing {}",
                    group_names.join(", "),
                    aggregates.join(", ")
                ));
                let input = if agg.input_append_only {
                    "input inserts only"
                } else {
                    "input with retractions (retractable accumulators)"
                };
                let closing = match (agg.window.is_some(), agg.watermarked) {
                    (true, true) if agg.emit_on_window_close => {
                        "emits each window once, when the watermark passes its end; then evicts it"
                    }
                    (true, true) => {
                        "emits changes at each barrier; evicts a window when the watermark passes its end"
                    }
                    (true, false) => "emits changes at each barrier; windows never close (no watermark)",
                    (false, _) => "emits changes at each barrier",
                };
                lines.push(format!("{pad}    {input}; {closing}"));
                let bound = if agg.group_exprs.is_empty() {
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
                lines.push(format!(
                    "{pad}    state: table {state_tables} (accumulators per {what}; {bound})"
                ));
            }
        }
        depth += 1;
    }
    let pad = "  ".repeat(depth);
    let source = &plan.source;
    lines.push(format!(
        "{pad}Source \"{}\": {}; key {} column(s); watermark on: {}",
        source.name,
        if source.append_only {
            "inserts only"
        } else {
            "inserts, updates and deletes"
        },
        source.key_len,
        watermarks(&source.columns, &source.watermarks)
    ));
    lines
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
