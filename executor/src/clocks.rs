//! The clocks of a multi-input operator's inputs (a join, a union) and the clocks it derives
//! from them: each
//! derived clock is the minimum of its terms (an input's clock plus a shift), emitted when it
//! advances. An input whose source has gone idle (every split quiet for
//! `watermark.idle.timeout`) does not hold a derived clock back while another input is active;
//! when every input is idle the largest of their bounds sets it (as a source whose splits are
//! all quiet does); an input that resumes counts again, and a derived clock never goes back.

use std::collections::{HashMap, HashSet};

use eddy_planner::JoinClock;

use crate::{Message, Watermark};

pub struct InputClocks {
    /// Each input's newest value of each of its clocks.
    latest: Vec<HashMap<usize, i64>>,
    /// Each input's clocks whose source is idle.
    idle: Vec<HashSet<usize>>,
    /// Per derived clock: the value last emitted.
    derived: Vec<(JoinClock, Option<i64>)>,
}

impl InputClocks {
    pub fn new(inputs: usize, derived: &[JoinClock]) -> Self {
        Self {
            latest: vec![HashMap::new(); inputs],
            idle: vec![HashSet::new(); inputs],
            derived: derived.iter().map(|c| (c.clone(), None)).collect(),
        }
    }

    /// Records a watermark of `input`; returns that clock's newest value (None while an idle
    /// input has never had one).
    pub fn observe(&mut self, input: usize, watermark: &Watermark) -> Option<i64> {
        if watermark.idle {
            self.idle[input].insert(watermark.clock);
        } else {
            self.idle[input].remove(&watermark.clock);
        }
        if watermark.idle && watermark.value == i64::MIN {
            return self.value(input, watermark.clock);
        }
        let latest = self.latest[input]
            .entry(watermark.clock)
            .or_insert(watermark.value);
        *latest = (*latest).max(watermark.value);
        Some(*latest)
    }

    /// The newest value of `input`'s `clock`.
    pub fn value(&self, input: usize, clock: usize) -> Option<i64> {
        self.latest[input].get(&clock).copied()
    }

    /// Pushes the derived clocks that advanced.
    pub fn emit_advanced(&mut self, out: &mut Vec<Message>) {
        for (clock, emitted) in &mut self.derived {
            let Some(value) = derive(clock, &self.latest, &self.idle) else {
                continue;
            };
            if emitted.is_none_or(|e| value > e) {
                *emitted = Some(value);
                out.push(Message::Watermark(Watermark {
                    clock: clock.clock,
                    value,
                    idle: false,
                }));
            }
        }
    }
}

/// The minimum of a derived clock's active terms (None while one has no value yet); when
/// every term is idle, the largest.
fn derive(
    clock: &JoinClock,
    latest: &[HashMap<usize, i64>],
    idle: &[HashSet<usize>],
) -> Option<i64> {
    let is_idle = |side: usize, id: usize| idle[side].contains(&id);
    let any_active = clock.terms.iter().any(|&(side, id, _)| !is_idle(side, id));
    let mut bound: Option<i64> = None;
    for &(side, id, shift) in &clock.terms {
        if any_active && is_idle(side, id) {
            continue;
        }
        let value = match latest[side].get(&id) {
            Some(v) => v.saturating_add(shift),
            None if any_active => return None,
            None => continue,
        };
        let pick = if any_active { i64::min } else { i64::max };
        bound = Some(bound.map_or(value, |b| pick(b, value)));
    }
    bound
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watermark(clock: usize, value: i64, idle: bool) -> Watermark {
        Watermark { clock, value, idle }
    }

    fn emitted(clocks: &mut InputClocks) -> Vec<i64> {
        let mut out = Vec::new();
        clocks.emit_advanced(&mut out);
        out.into_iter()
            .filter_map(|m| match m {
                Message::Watermark(w) => Some(w.value),
                _ => None,
            })
            .collect()
    }

    fn both_sides() -> InputClocks {
        InputClocks::new(
            2,
            &[JoinClock {
                terms: vec![(0, 0, 0), (1, 1, -10)],
                clock: 2,
            }],
        )
    }

    #[test]
    fn the_slower_input_holds_the_derived_clock() {
        let mut clocks = both_sides();
        clocks.observe(0, &watermark(0, 100, false));
        assert!(
            emitted(&mut clocks).is_empty(),
            "the right has no value yet"
        );
        clocks.observe(1, &watermark(1, 50, false));
        assert_eq!(emitted(&mut clocks), vec![40]);
        clocks.observe(1, &watermark(1, 200, false));
        assert_eq!(emitted(&mut clocks), vec![100]);
    }

    #[test]
    fn an_idle_input_stops_holding_it_back_until_it_resumes() {
        let mut clocks = both_sides();
        clocks.observe(0, &watermark(0, 100, false));
        // An input idle before it ever had a watermark.
        clocks.observe(1, &watermark(1, i64::MIN, true));
        assert_eq!(emitted(&mut clocks), vec![100]);
        clocks.observe(0, &watermark(0, 150, false));
        assert_eq!(emitted(&mut clocks), vec![150]);
        // It resumes behind: the derived clock waits for it again but never goes back.
        clocks.observe(1, &watermark(1, 60, false));
        assert!(emitted(&mut clocks).is_empty());
        clocks.observe(1, &watermark(1, 170, false));
        assert!(emitted(&mut clocks).is_empty(), "the left is still at 150");
        clocks.observe(0, &watermark(0, 200, false));
        assert_eq!(emitted(&mut clocks), vec![160]);
    }

    #[test]
    fn when_every_input_is_idle_the_largest_bound_sets_it() {
        let mut clocks = both_sides();
        clocks.observe(0, &watermark(0, 100, true));
        clocks.observe(1, &watermark(1, 300, true));
        assert_eq!(emitted(&mut clocks), vec![290]);
    }
}
