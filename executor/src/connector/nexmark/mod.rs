//! The Nexmark generator: deterministic person, auction and bid events as Arrow batches.
//!
//! The event stream follows the standard Nexmark generator (as used by the Flink and
//! RisingWave benchmark suites and by `bench/gen_bids.py`):
//!
//! - One global event counter (`event_id`, from 0) runs over all three kinds. Each epoch of
//!   50 events holds 1 person (offset 0), 3 auctions (offsets 1..=3) and 46 bids
//!   (offsets 4..=49). A generator returns only the rows of its configured table, but its
//!   position always counts global events, so three generators with the same seed describe one
//!   consistent world (bids refer to auctions and people the other two produce).
//! - Event time is `base_time + event_id * inter_event_micros` (in order, unless the optional
//!   out-of-order probability is set).
//! - Person and auction ids count up from 1000. Bids go to a "hot" auction half of the time
//!   and come from a "hot" bidder three times out of four; otherwise they pick one of the
//!   recent auctions / active people, with a small lead into ids not generated yet.
//!
//! Every event's random values come from its own RNG, seeded from `(seed, event_id)`, so a
//! generator that [`seek`](NexmarkGenerator::seek)s to a committed position continues with
//! exactly the rows an uninterrupted run would have produced.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, Int64Builder, RecordBatch, StringBuilder, TimestampMicrosecondBuilder,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::error::ExecError;

mod ids;
mod random;
#[cfg(test)]
mod tests;

use ids::*;
use random::*;

/// Events per epoch of each kind, and in all.
const PERSON_PROPORTION: u64 = 1;
const AUCTION_PROPORTION: u64 = 3;
const BID_PROPORTION: u64 = 46;
const TOTAL_PROPORTION: u64 = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION;

const FIRST_PERSON_ID: u64 = 1000;
const FIRST_AUCTION_ID: u64 = 1000;
const FIRST_CATEGORY_ID: u64 = 10;
const NUM_CATEGORIES: u64 = 5;

/// One in `HOT_*_RATIO` draws is *not* hot: 1/2 of bids go to a hot auction, 3/4 come from a
/// hot bidder, 3/4 of auctions are sold by a hot seller.
const HOT_AUCTION_RATIO: u64 = 2;
const HOT_BIDDERS_RATIO: u64 = 4;
const HOT_SELLERS_RATIO: u64 = 4;
/// Hot auctions / bidders / sellers are the first id of the current block of this many ids.
const HOT_BLOCK: u64 = 100;

const NUM_IN_FLIGHT_AUCTIONS: u64 = 100;
const AUCTION_ID_LEAD: u64 = 10;
const NUM_ACTIVE_PEOPLE: u64 = 1000;
const PERSON_ID_LEAD: u64 = 10;

/// Events between an auction and the one `NUM_IN_FLIGHT_AUCTIONS` auctions later; an auction
/// lasts up to twice that long in event time.
const EVENTS_PER_IN_FLIGHT_WINDOW: u64 =
    NUM_IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION / AUCTION_PROPORTION;

const CHANNELS_NUMBER: usize = 10_000;
const HOT_CHANNELS: [&str; 4] = ["Google", "Facebook", "Baidu", "Apple"];

/// Average row sizes in bytes; `extra` pads each row up to about this size.
const AVG_PERSON_BYTES: usize = 200;
const AVG_AUCTION_BYTES: usize = 500;
const AVG_BID_BYTES: usize = 100;

const FIRST_NAMES: [&str; 11] = [
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
];
const LAST_NAMES: [&str; 9] = [
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
];
const US_STATES: [&str; 6] = ["AZ", "CA", "ID", "OR", "WA", "WY"];
const US_CITIES: [&str; 10] = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
];

/// `extra` strings are slices of one pool of random letters, so no row allocates.
const EXTRA_POOL_BYTES: usize = 1 << 20;

/// 2015-07-15T00:00:00Z, Nexmark's customary base time, in milliseconds since the Unix epoch.
pub const DEFAULT_BASE_TIME_MILLIS: i64 = 1_436_918_400_000;
/// 10 µs of event time between consecutive events: 100,000 events per second of event time.
pub const DEFAULT_INTER_EVENT_MICROS: f64 = 10.0;
/// The largest default backward shift of an out-of-order event: 800 ms, in microseconds.
pub const DEFAULT_MAX_OUT_OF_ORDER_MICROS: i64 = 800_000;

/// The three Nexmark tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NexmarkTable {
    Person,
    Auction,
    Bid,
}

impl NexmarkTable {
    /// The name used in `nexmark.table.type` (`person`, `auction`, `bid`).
    pub fn as_str(self) -> &'static str {
        match self {
            NexmarkTable::Person => "person",
            NexmarkTable::Auction => "auction",
            NexmarkTable::Bid => "bid",
        }
    }

    /// The kind of the global event `event_id`.
    pub fn of_event(event_id: u64) -> NexmarkTable {
        let offset = event_id % TOTAL_PROPORTION;
        if offset < PERSON_PROPORTION {
            NexmarkTable::Person
        } else if offset < PERSON_PROPORTION + AUCTION_PROPORTION {
            NexmarkTable::Auction
        } else {
            NexmarkTable::Bid
        }
    }

    /// The table's Arrow schema (see [`NexmarkGenerator::schema`]).
    pub fn schema(self) -> SchemaRef {
        NexmarkGenerator::schema(self)
    }

    /// The offsets `[lo, hi)` within a 50-event epoch that hold this kind of event.
    fn offsets(self) -> (u64, u64) {
        match self {
            NexmarkTable::Person => (0, PERSON_PROPORTION),
            NexmarkTable::Auction => (PERSON_PROPORTION, PERSON_PROPORTION + AUCTION_PROPORTION),
            NexmarkTable::Bid => (PERSON_PROPORTION + AUCTION_PROPORTION, TOTAL_PROPORTION),
        }
    }
}

impl fmt::Display for NexmarkTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for NexmarkTable {
    type Err = ExecError;

    /// Parses `person`, `auction` or `bid` (case-insensitive, surrounding blanks ignored).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "person" => Ok(NexmarkTable::Person),
            "auction" => Ok(NexmarkTable::Auction),
            "bid" => Ok(NexmarkTable::Bid),
            other => Err(ExecError::NotSupported(format!(
                "unknown nexmark table type '{other}' (expected person, auction or bid)"
            ))),
        }
    }
}

/// What a [`NexmarkGenerator`] produces.
#[derive(Debug, Clone, PartialEq)]
pub struct NexmarkConfig {
    /// Which table's rows to return.
    pub table: NexmarkTable,
    /// Seeds every random value; same seed, same stream.
    pub seed: u64,
    /// Stop after this many global events (all kinds counted); `None` = endless.
    pub max_events: Option<u64>,
    /// Event time between consecutive global events, in microseconds (default 10.0).
    pub inter_event_micros: f64,
    /// Event time of event 0, in milliseconds since the Unix epoch (default 2015-07-15).
    pub base_time_millis: i64,
    /// Probability that an event's `date_time` is moved back (default 0: in order).
    pub out_of_order_prob: f64,
    /// Largest backward move of an out-of-order event, in microseconds (default 800 ms).
    pub max_out_of_order_micros: i64,
}

impl NexmarkConfig {
    /// The defaults for `table`: seed 0, endless, 10 µs between events, in order.
    pub fn new(table: NexmarkTable) -> Self {
        Self {
            table,
            seed: 0,
            max_events: None,
            inter_event_micros: DEFAULT_INTER_EVENT_MICROS,
            base_time_millis: DEFAULT_BASE_TIME_MILLIS,
            out_of_order_prob: 0.0,
            max_out_of_order_micros: DEFAULT_MAX_OUT_OF_ORDER_MICROS,
        }
    }
}

impl Default for NexmarkConfig {
    /// The defaults for the bid table.
    fn default() -> Self {
        Self::new(NexmarkTable::Bid)
    }
}

/// A deterministic, seekable generator of one Nexmark table's rows.
pub struct NexmarkGenerator {
    config: NexmarkConfig,
    schema: SchemaRef,
    /// The next global event id to consider.
    next_event: u64,
    pools: Pools,
}

impl NexmarkGenerator {
    /// A generator positioned at event 0.
    pub fn new(config: NexmarkConfig) -> Self {
        let schema = Self::schema(config.table);
        let pools = Pools::new(config.seed);
        Self {
            config,
            schema,
            next_event: 0,
            pools,
        }
    }

    /// The Arrow schema of `table` (column names as RisingWave's nexmark source; integers are
    /// Int64, strings Utf8, times `Timestamp(Microsecond, None)`; no column is ever null).
    pub fn schema(table: NexmarkTable) -> SchemaRef {
        let int = |name: &str| Field::new(name, DataType::Int64, false);
        let text = |name: &str| Field::new(name, DataType::Utf8, false);
        let time = |name: &str| {
            Field::new(
                name,
                DataType::Timestamp(TimeUnit::Microsecond, None),
                false,
            )
        };
        let fields = match table {
            NexmarkTable::Person => vec![
                int("id"),
                text("name"),
                text("email_address"),
                text("credit_card"),
                text("city"),
                text("state"),
                time("date_time"),
                text("extra"),
            ],
            NexmarkTable::Auction => vec![
                int("id"),
                text("item_name"),
                text("description"),
                int("initial_bid"),
                int("reserve"),
                time("date_time"),
                time("expires"),
                int("seller"),
                int("category"),
                text("extra"),
            ],
            NexmarkTable::Bid => vec![
                int("auction"),
                int("bidder"),
                int("price"),
                text("channel"),
                text("url"),
                time("date_time"),
                text("extra"),
            ],
        };
        Arc::new(Schema::new(fields))
    }

    /// The configuration this generator was built with.
    pub fn config(&self) -> &NexmarkConfig {
        &self.config
    }

    /// The next global event id (all kinds counted): the position to commit and to
    /// [`seek`](Self::seek) back to after a restart.
    pub fn position(&self) -> u64 {
        self.next_event
    }

    /// Continues from global event `event_id`, as if every event before it had been generated.
    pub fn seek(&mut self, event_id: u64) {
        self.next_event = event_id;
    }

    /// The in-order event time of global event `event_id`, in microseconds since the Unix
    /// epoch (useful for pacing a source to a wall-clock rate).
    pub fn event_time_micros(&self, event_id: u64) -> i64 {
        self.config.base_time_millis * 1000
            + (event_id as f64 * self.config.inter_event_micros) as i64
    }

    /// Up to `max_rows` rows of the configured table, in event order. `None` once the global
    /// events up to `max_events` are used up.
    pub fn next_batch(&mut self, max_rows: usize) -> Option<RecordBatch> {
        let end = self.config.max_events.unwrap_or(u64::MAX);
        if self.next_event >= end {
            return None;
        }
        let mut events = EventIds {
            next: self.next_event,
            end,
            offsets: self.config.table.offsets(),
            left: max_rows,
        };
        // Reserve for the rows that can still come, without trusting a huge `max_rows`.
        let capacity = max_rows
            .min(usize::try_from(end - self.next_event).unwrap_or(usize::MAX))
            .min(1 << 16);
        let columns = match self.config.table {
            NexmarkTable::Person => self.persons(&mut events, capacity),
            NexmarkTable::Auction => self.auctions(&mut events, capacity),
            NexmarkTable::Bid => self.bids(&mut events, capacity),
        };
        self.next_event = events.next;
        // The columns are built to match the schema, so this cannot fail.
        let batch = RecordBatch::try_new(self.schema.clone(), columns)
            .expect("nexmark columns match their schema");
        if batch.num_rows() == 0 && max_rows > 0 {
            // Only events of other kinds were left before `end`.
            return None;
        }
        Some(batch)
    }

    /// `date_time` of event `event_id`: its in-order time, moved back when it is drawn to be
    /// out of order (from a separate RNG, so that the other columns do not depend on it).
    fn date_time(&self, event_id: u64) -> i64 {
        let t = self.event_time_micros(event_id);
        let cfg = &self.config;
        if cfg.out_of_order_prob <= 0.0 || cfg.max_out_of_order_micros <= 0 {
            return t;
        }
        let mut rng = EventRng::new(cfg.seed ^ OUT_OF_ORDER_SALT, event_id);
        if rng.unit() < cfg.out_of_order_prob {
            t - rng.below(cfg.max_out_of_order_micros as u64 + 1) as i64
        } else {
            t
        }
    }

    fn persons(&self, events: &mut EventIds, capacity: usize) -> Vec<ArrayRef> {
        let mut id = Int64Builder::with_capacity(capacity);
        let mut name = StringBuilder::with_capacity(capacity, capacity * 12);
        let mut email = StringBuilder::with_capacity(capacity, capacity * 12);
        let mut card = StringBuilder::with_capacity(capacity, capacity * 19);
        let mut city = StringBuilder::with_capacity(capacity, capacity * 8);
        let mut state = StringBuilder::with_capacity(capacity, capacity * 2);
        let mut date_time = TimestampMicrosecondBuilder::with_capacity(capacity);
        let mut extra = StringBuilder::with_capacity(capacity, capacity * 140);
        for e in events {
            let mut rng = EventRng::new(self.config.seed, e);
            let mut full_name = StackStr::<16>::new();
            full_name.push(FIRST_NAMES[rng.index(FIRST_NAMES.len())].as_bytes());
            full_name.push(b" ");
            full_name.push(LAST_NAMES[rng.index(LAST_NAMES.len())].as_bytes());
            let mut mail = StackStr::<32>::new();
            mail.push_word(&mut rng, 7, b' ');
            mail.push(b"@");
            mail.push_word(&mut rng, 5, b' ');
            mail.push(b".com");
            let mut cc = StackStr::<19>::new();
            for group in 0..4 {
                if group > 0 {
                    cc.push(b" ");
                }
                cc.push_digits(rng.below(10_000), 4);
            }
            let c = US_CITIES[rng.index(US_CITIES.len())];
            let s = US_STATES[rng.index(US_STATES.len())];
            let size = 8 + full_name.len() + mail.len() + cc.len() + c.len() + s.len();

            id.append_value((last_base0_person_id(e) + FIRST_PERSON_ID) as i64);
            name.append_value(full_name.as_str());
            email.append_value(mail.as_str());
            card.append_value(cc.as_str());
            city.append_value(c);
            state.append_value(s);
            date_time.append_value(self.date_time(e));
            extra.append_value(self.pools.extra(&mut rng, size, AVG_PERSON_BYTES));
        }
        vec![
            Arc::new(id.finish()),
            Arc::new(name.finish()),
            Arc::new(email.finish()),
            Arc::new(card.finish()),
            Arc::new(city.finish()),
            Arc::new(state.finish()),
            Arc::new(date_time.finish()),
            Arc::new(extra.finish()),
        ]
    }

    fn auctions(&self, events: &mut EventIds, capacity: usize) -> Vec<ArrayRef> {
        let mut id = Int64Builder::with_capacity(capacity);
        let mut item_name = StringBuilder::with_capacity(capacity, capacity * 10);
        let mut description = StringBuilder::with_capacity(capacity, capacity * 50);
        let mut initial_bid = Int64Builder::with_capacity(capacity);
        let mut reserve = Int64Builder::with_capacity(capacity);
        let mut date_time = TimestampMicrosecondBuilder::with_capacity(capacity);
        let mut expires = TimestampMicrosecondBuilder::with_capacity(capacity);
        let mut seller = Int64Builder::with_capacity(capacity);
        let mut category = Int64Builder::with_capacity(capacity);
        let mut extra = StringBuilder::with_capacity(capacity, capacity * 400);
        // An auction lasts up to twice the event time in which NUM_IN_FLIGHT_AUCTIONS more
        // auctions start, so about that many are open at any time.
        let horizon = (EVENTS_PER_IN_FLIGHT_WINDOW as f64 * self.config.inter_event_micros) as u64;
        for e in events {
            let mut rng = EventRng::new(self.config.seed, e);
            let last_person = last_base0_person_id(e);
            let sold_by = if rng.below(HOT_SELLERS_RATIO) > 0 {
                last_person / HOT_BLOCK * HOT_BLOCK
            } else {
                next_base0_person_id(last_person, &mut rng)
            };
            let cat = FIRST_CATEGORY_ID + rng.below(NUM_CATEGORIES);
            let initial = next_price(&mut rng);
            let time = self.date_time(e);
            // At least 1 ms, as the reference generator's millisecond lengths.
            let length = 1_000 + rng.below((2 * horizon).max(1)) as i64;
            let mut item = StackStr::<24>::new();
            item.push_word(&mut rng, 20, b' ');
            let mut desc = StackStr::<104>::new();
            desc.push_word(&mut rng, 100, b' ');
            let res = initial + next_price(&mut rng);
            let size = 8 + item.len() + desc.len() + 8 * 5;

            id.append_value((last_base0_auction_id(e) + FIRST_AUCTION_ID) as i64);
            item_name.append_value(item.as_str());
            description.append_value(desc.as_str());
            initial_bid.append_value(initial);
            reserve.append_value(res);
            date_time.append_value(time);
            expires.append_value(time + length);
            seller.append_value((sold_by + FIRST_PERSON_ID) as i64);
            category.append_value(cat as i64);
            extra.append_value(self.pools.extra(&mut rng, size, AVG_AUCTION_BYTES));
        }
        vec![
            Arc::new(id.finish()),
            Arc::new(item_name.finish()),
            Arc::new(description.finish()),
            Arc::new(initial_bid.finish()),
            Arc::new(reserve.finish()),
            Arc::new(date_time.finish()),
            Arc::new(expires.finish()),
            Arc::new(seller.finish()),
            Arc::new(category.finish()),
            Arc::new(extra.finish()),
        ]
    }

    fn bids(&self, events: &mut EventIds, capacity: usize) -> Vec<ArrayRef> {
        let mut auction = Int64Builder::with_capacity(capacity);
        let mut bidder = Int64Builder::with_capacity(capacity);
        let mut price = Int64Builder::with_capacity(capacity);
        let mut channel = StringBuilder::with_capacity(capacity, capacity * 10);
        let mut url = StringBuilder::with_capacity(capacity, capacity * 70);
        let mut date_time = TimestampMicrosecondBuilder::with_capacity(capacity);
        let mut extra = StringBuilder::with_capacity(capacity, capacity * 70);
        for e in events {
            let mut rng = EventRng::new(self.config.seed, e);
            let last_auction = last_base0_auction_id(e);
            let a = if rng.below(HOT_AUCTION_RATIO) > 0 {
                last_auction / HOT_BLOCK * HOT_BLOCK
            } else {
                let lo = last_auction.saturating_sub(NUM_IN_FLIGHT_AUCTIONS);
                lo + rng.below(last_auction - lo + 1 + AUCTION_ID_LEAD)
            };
            let last_person = last_base0_person_id(e);
            let b = if rng.below(HOT_BIDDERS_RATIO) > 0 {
                last_person / HOT_BLOCK * HOT_BLOCK + 1
            } else {
                next_base0_person_id(last_person, &mut rng)
            };
            let p = next_price(&mut rng);
            let (ch, u) = if rng.below(2) > 0 {
                let i = rng.index(HOT_CHANNELS.len());
                (HOT_CHANNELS[i], self.pools.hot_urls[i].as_str())
            } else {
                let i = rng.index(CHANNELS_NUMBER);
                (
                    self.pools.channels[i].as_str(),
                    self.pools.channel_urls[i].as_str(),
                )
            };

            auction.append_value((a + FIRST_AUCTION_ID) as i64);
            bidder.append_value((b + FIRST_PERSON_ID) as i64);
            price.append_value(p);
            channel.append_value(ch);
            url.append_value(u);
            date_time.append_value(self.date_time(e));
            extra.append_value(self.pools.extra(&mut rng, 8 * 4, AVG_BID_BYTES));
        }
        vec![
            Arc::new(auction.finish()),
            Arc::new(bidder.finish()),
            Arc::new(price.finish()),
            Arc::new(channel.finish()),
            Arc::new(url.finish()),
            Arc::new(date_time.finish()),
            Arc::new(extra.finish()),
        ]
    }
}
