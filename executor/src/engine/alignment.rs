//! Watermark alignment (`watermark.alignment.max.drift` on a source): a view reading several
//! sources stops reading one whose watermark runs more than that drift ahead of the slowest of
//! the others, until they catch up.
//!
//! A join (or UNION) of two sources keeps the faster one's rows until the slower one's
//! watermark passes them: sources read at different speeds (a backlog on one topic, a cheaper
//! decoder, a generator that sends many more rows per second of event time) make that state
//! grow with the gap, without bound. Holding the faster source keeps the gap, and the state,
//! within the drift. A source that is idle, finished or has no WATERMARK holds no other back;
//! one with no row yet holds the others until its first, or until it has been quiet for its
//! idle timeout; a held source is never counted idle (it is quiet because Eddy does not read
//! it).
//! Each view reads its sources through feeds of its own, so aligning one view's sources never
//! holds another view back. The hold is decided again after every batch a source brings, so a
//! source runs past its drift by one batch at most.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Engine;

/// Why a feed is held: how far ahead it is, of which source, and its drift.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Ahead {
    micros: i64,
    of: String,
    drift: Duration,
}

impl Ahead {
    pub(super) fn reason(&self) -> String {
        if self.micros == i64::MAX {
            return format!(
                "not read: waiting for the first row of source \"{}\" \
                 (watermark.alignment.max.drift)",
                self.of
            );
        }
        format!(
            "not read: its watermark is {:.1} s ahead of source \"{}\"'s \
             (watermark.alignment.max.drift = {:.1} s)",
            self.micros as f64 / 1e6,
            self.of,
            self.drift.as_secs_f64()
        )
    }
}

impl Engine {
    /// Decides again which feeds are held for alignment.
    pub(super) fn update_alignment(&mut self) {
        if self.aligning() {
            self.held.aligned = self.aligned_feeds();
        }
    }

    /// Whether any feed has a drift (else there is nothing to decide).
    fn aligning(&self) -> bool {
        !self.held.aligned.is_empty() || self.feeds.values().any(|f| f.max_drift.is_some())
    }

    /// The feeds held for alignment, each with why.
    fn aligned_feeds(&self) -> BTreeMap<String, Ahead> {
        let mut held = BTreeMap::new();
        for view in self.views.values() {
            if view.readers.len() < 2 {
                continue;
            }
            // Each active reader's feed, source and watermark (micros; the lowest there is
            // before its first row).
            let marks: Vec<(&str, &str, i64)> = view
                .readers
                .iter()
                .filter_map(|reader| {
                    let feed = self.feeds.get(&reader.feed)?;
                    let active = reader.table.has_watermark() && !feed.finished && !feed.quiet();
                    let mark = reader.table.watermark().map_or(i64::MIN, |w| w.value);
                    active.then_some((reader.feed.as_str(), reader.source.as_str(), mark))
                })
                .collect();
            for &(feed, _, mark) in &marks {
                let Some(drift) = self.feeds.get(feed).and_then(|f| f.max_drift) else {
                    continue;
                };
                let slowest = marks
                    .iter()
                    .filter(|(other, _, _)| *other != feed)
                    .min_by_key(|(_, _, mark)| *mark);
                if let Some(&(_, source, low)) = slowest {
                    let micros = mark.saturating_sub(low);
                    if micros > i64::try_from(drift.as_micros()).unwrap_or(i64::MAX) {
                        let of = source.to_string();
                        held.insert(feed.to_string(), Ahead { micros, of, drift });
                    }
                }
            }
        }
        held
    }
}
