//! Which event ids are people, auctions and bids, and the ids and prices an event draws.

use super::*;

/// The global event ids of one kind in `[next, end)`, at most `left` of them; `next` ends as
/// the id after the last one returned (or `end`, when the range ran out).
pub(super) struct EventIds {
    pub(super) next: u64,
    pub(super) end: u64,
    pub(super) offsets: (u64, u64),
    pub(super) left: usize,
}

impl Iterator for EventIds {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.left == 0 || self.next >= self.end {
            return None;
        }
        let (lo, hi) = self.offsets;
        let offset = self.next % TOTAL_PROPORTION;
        // Jump over the other kinds' events straight to the next one of ours.
        let id = if offset < lo {
            self.next.saturating_add(lo - offset)
        } else if offset >= hi {
            self.next.saturating_add(TOTAL_PROPORTION - offset + lo)
        } else {
            self.next
        };
        if id >= self.end {
            self.next = self.end;
            return None;
        }
        self.next = id + 1;
        self.left -= 1;
        Some(id)
    }
}

/// The 0-based id of the last person generated at or before event `event_id`: the person of
/// its epoch, which is the epoch's first event.
pub(super) fn last_base0_person_id(event_id: u64) -> u64 {
    const _: () = assert!(PERSON_PROPORTION == 1, "one person per epoch");
    event_id / TOTAL_PROPORTION
}

/// The 0-based id of the last auction generated at or before event `event_id` (0 before the
/// first auction).
pub(super) fn last_base0_auction_id(event_id: u64) -> u64 {
    let epoch = event_id / TOTAL_PROPORTION;
    let offset = event_id % TOTAL_PROPORTION;
    if offset < PERSON_PROPORTION {
        // A person event: the last auction is the previous epoch's last one.
        (epoch * AUCTION_PROPORTION).saturating_sub(1)
    } else {
        epoch * AUCTION_PROPORTION + (offset - PERSON_PROPORTION).min(AUCTION_PROPORTION - 1)
    }
}

/// One of the `NUM_ACTIVE_PEOPLE` most recent people (0-based), or a few ids beyond.
pub(super) fn next_base0_person_id(last_person: u64, rng: &mut EventRng) -> u64 {
    let people = last_person + 1;
    let active = people.min(NUM_ACTIVE_PEOPLE);
    people - active + rng.below(active + PERSON_ID_LEAD)
}

/// A price in cents, log-uniform over 1 .. 1,000,000 dollars: `round(10^(U*6) * 100)`.
pub(super) fn next_price(rng: &mut EventRng) -> i64 {
    (10f64.powf(rng.unit() * 6.0) * 100.0).round() as i64
}
