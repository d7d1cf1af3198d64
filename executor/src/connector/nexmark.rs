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

/// The global event ids of one kind in `[next, end)`, at most `left` of them; `next` ends as
/// the id after the last one returned (or `end`, when the range ran out).
struct EventIds {
    next: u64,
    end: u64,
    offsets: (u64, u64),
    left: usize,
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
fn last_base0_person_id(event_id: u64) -> u64 {
    const _: () = assert!(PERSON_PROPORTION == 1, "one person per epoch");
    event_id / TOTAL_PROPORTION
}

/// The 0-based id of the last auction generated at or before event `event_id` (0 before the
/// first auction).
fn last_base0_auction_id(event_id: u64) -> u64 {
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
fn next_base0_person_id(last_person: u64, rng: &mut EventRng) -> u64 {
    let people = last_person + 1;
    let active = people.min(NUM_ACTIVE_PEOPLE);
    people - active + rng.below(active + PERSON_ID_LEAD)
}

/// A price in cents, log-uniform over 1 .. 1,000,000 dollars: `round(10^(U*6) * 100)`.
fn next_price(rng: &mut EventRng) -> i64 {
    (10f64.powf(rng.unit() * 6.0) * 100.0).round() as i64
}

/// Keeps the out-of-order draws apart from the events' other random values.
const OUT_OF_ORDER_SALT: u64 = 0x6f75_745f_6f66_5f6f;
/// Keeps the pools' draws apart from the events' random values.
const POOL_SALT: u64 = 0x706f_6f6c_735f_5f5f;
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The splitmix64 finalizer: a bijective scramble of 64 bits.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A splitmix64 stream: tiny, fast, and good enough for synthetic data. Each event gets its
/// own stream so that any event can be regenerated without the ones before it.
struct EventRng(u64);

impl EventRng {
    fn new(seed: u64, event_id: u64) -> Self {
        Self(mix64(seed ^ mix64(event_id.wrapping_add(GOLDEN_GAMMA))))
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN_GAMMA);
        mix64(self.0)
    }

    /// Uniform in `[0, n)` (multiply-shift; the bias is below 2^-40 for our `n`).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// Uniform in `[0, 1)`, 53 random bits.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Strings drawn once per generator (from the seed alone): channel names and urls, and the
/// pool of letters `extra` is sliced from.
struct Pools {
    hot_urls: Vec<String>,
    channels: Vec<String>,
    channel_urls: Vec<String>,
    letters: String,
}

impl Pools {
    fn new(seed: u64) -> Self {
        let mut rng = EventRng(mix64(seed ^ POOL_SALT));
        let hot_urls = HOT_CHANNELS.iter().map(|_| base_url(&mut rng)).collect();
        let mut channels = Vec::with_capacity(CHANNELS_NUMBER);
        let mut channel_urls = Vec::with_capacity(CHANNELS_NUMBER);
        for i in 0..CHANNELS_NUMBER {
            let mut url = base_url(&mut rng);
            // Most channel urls carry a channel id (the bit-reversed channel number).
            if rng.below(10) > 0 {
                let id = (i as i32).reverse_bits().unsigned_abs();
                url.push_str(&format!("&channel_id={id}"));
            }
            channels.push(format!("channel-{i}"));
            channel_urls.push(url);
        }
        let mut letters = Vec::with_capacity(EXTRA_POOL_BYTES);
        while letters.len() < EXTRA_POOL_BYTES {
            // Eight letters per draw: each byte scaled into 0..26.
            for byte in rng.next_u64().to_le_bytes() {
                letters.push(b'a' + ((u32::from(byte) * 26) >> 8) as u8);
            }
        }
        let letters = String::from_utf8(letters).unwrap_or_default();
        Self {
            hot_urls,
            channels,
            channel_urls,
            letters,
        }
    }

    /// Random letters that pad a row of `current` bytes to about `average` bytes: a length
    /// uniform within ±20% of the difference (empty when the row is already that large).
    fn extra(&self, rng: &mut EventRng, current: usize, average: usize) -> &str {
        if current >= average {
            return "";
        }
        let desired = (average - current) as u64;
        let delta = (desired as f64 * 0.2).round() as u64;
        let len = desired - delta + if delta > 0 { rng.below(2 * delta) } else { 0 };
        let len = (len as usize).min(self.letters.len());
        let start = rng.index(self.letters.len() - len + 1);
        // The pool is ASCII, so any byte range is a valid str.
        self.letters.get(start..start + len).unwrap_or_default()
    }
}

/// `https://www.nexmark.com/<w>/<w>/<w>/item.htm?query=1` with three short random words.
fn base_url(rng: &mut EventRng) -> String {
    let mut url = String::from("https://www.nexmark.com");
    for _ in 0..3 {
        let mut word = StackStr::<8>::new();
        word.push_word(rng, 5, b'_');
        url.push('/');
        url.push_str(word.as_str());
    }
    url.push_str("/item.htm?query=1");
    url
}

/// A short ASCII string on the stack, so that building a value does not allocate.
struct StackStr<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> StackStr<N> {
    fn new() -> Self {
        Self {
            buf: [0; N],
            len: 0,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    /// Appends ASCII bytes (truncating at capacity, which the callers never reach).
    fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(N - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    /// Appends `value` in decimal, zero-padded to `width` digits.
    fn push_digits(&mut self, mut value: u64, width: usize) {
        let mut digits = [b'0'; 20];
        let width = width.min(digits.len());
        for d in digits[..width].iter_mut().rev() {
            *d = b'0' + (value % 10) as u8;
            value /= 10;
        }
        self.push(&digits[..width]);
    }

    /// Appends a Nexmark "next string": 3 to `max_len - 1` characters, each a random lowercase
    /// letter or, one time in 13, `special`; spaces at either end are trimmed.
    fn push_word(&mut self, rng: &mut EventRng, max_len: u64, special: u8) {
        let n = 3 + rng.below(max_len - 3) as usize;
        let start = self.len;
        for _ in 0..n {
            let c = if rng.below(13) == 0 {
                special
            } else {
                b'a' + rng.below(26) as u8
            };
            self.push(&[c]);
        }
        let word = &self.buf[start..self.len];
        let lead = word.iter().take_while(|&&c| c == b' ').count();
        let trail = word[lead..]
            .iter()
            .rev()
            .take_while(|&&c| c == b' ')
            .count();
        let kept = word.len() - lead - trail;
        self.buf
            .copy_within(start + lead..start + lead + kept, start);
        self.len = start + kept;
    }

    fn as_str(&self) -> &str {
        // Only ASCII is ever pushed.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::compute::concat_batches;
    use datafusion::arrow::datatypes::{Int64Type, TimestampMicrosecondType};

    fn generator(table: NexmarkTable, seed: u64, max_events: Option<u64>) -> NexmarkGenerator {
        NexmarkGenerator::new(NexmarkConfig {
            seed,
            max_events,
            ..NexmarkConfig::new(table)
        })
    }

    fn drain(mut g: NexmarkGenerator, batch_rows: usize) -> Vec<RecordBatch> {
        std::iter::from_fn(|| g.next_batch(batch_rows)).collect()
    }

    fn concat(schema: &SchemaRef, batches: &[RecordBatch]) -> RecordBatch {
        concat_batches(schema, batches).unwrap()
    }

    fn int_col(batch: &RecordBatch, name: &str) -> Vec<i64> {
        let col = batch.column_by_name(name).unwrap();
        col.as_primitive::<Int64Type>().values().to_vec()
    }

    fn time_col(batch: &RecordBatch, name: &str) -> Vec<i64> {
        let col = batch.column_by_name(name).unwrap();
        col.as_primitive::<TimestampMicrosecondType>()
            .values()
            .to_vec()
    }

    fn str_col(batch: &RecordBatch, name: &str) -> Vec<String> {
        let col = batch.column_by_name(name).unwrap();
        col.as_string::<i32>()
            .iter()
            .map(|v| v.unwrap().to_string())
            .collect()
    }

    /// The event id a row came from, recovered from its in-order `date_time` (10 µs apart).
    fn event_ids(batch: &RecordBatch) -> Vec<u64> {
        let base = DEFAULT_BASE_TIME_MILLIS * 1000;
        time_col(batch, "date_time")
            .into_iter()
            .map(|t| ((t - base) / 10) as u64)
            .collect()
    }

    const TABLES: [NexmarkTable; 3] = [
        NexmarkTable::Person,
        NexmarkTable::Auction,
        NexmarkTable::Bid,
    ];

    #[test]
    fn parses_table_names() {
        assert_eq!(
            "person".parse::<NexmarkTable>().unwrap(),
            NexmarkTable::Person
        );
        assert_eq!(
            " Auction ".parse::<NexmarkTable>().unwrap(),
            NexmarkTable::Auction
        );
        assert_eq!("BID".parse::<NexmarkTable>().unwrap(), NexmarkTable::Bid);
        assert!("bids".parse::<NexmarkTable>().is_err());
        for t in TABLES {
            assert_eq!(t.as_str().parse::<NexmarkTable>().unwrap(), t);
        }
    }

    #[test]
    fn batches_match_schema_and_never_hold_nulls() {
        for t in TABLES {
            let mut g = generator(t, 1, None);
            let batch = g.next_batch(500).unwrap();
            assert_eq!(batch.num_rows(), 500);
            assert_eq!(batch.schema(), NexmarkGenerator::schema(t));
            assert!(batch.columns().iter().all(|c| c.null_count() == 0));
        }
    }

    #[test]
    fn same_seed_same_rows() {
        for t in TABLES {
            let a = drain(generator(t, 7, Some(20_000)), 333);
            let b = drain(generator(t, 7, Some(20_000)), 333);
            assert_eq!(a, b);
            let c = drain(generator(t, 8, Some(20_000)), 333);
            assert_ne!(a, c, "another seed gives other rows");
        }
    }

    #[test]
    fn batch_size_does_not_change_the_rows() {
        for t in TABLES {
            let schema = NexmarkGenerator::schema(t);
            let small = concat(&schema, &drain(generator(t, 3, Some(10_000)), 17));
            let large = concat(&schema, &drain(generator(t, 3, Some(10_000)), 100_000));
            assert_eq!(small, large);
        }
    }

    #[test]
    fn seek_continues_where_a_fresh_run_is() {
        for t in TABLES {
            let schema = NexmarkGenerator::schema(t);
            for n in [0, 1, 4, 49, 50, 12_347, 99_999] {
                // The rows before event n, then a fresh run's rows after them.
                let before: usize = drain(generator(t, 11, Some(n)), 1000)
                    .iter()
                    .map(RecordBatch::num_rows)
                    .sum();
                let mut fresh = generator(t, 11, None);
                let all = fresh.next_batch(before + 300).unwrap();
                let tail = all.slice(before, 300);

                let mut restarted = generator(t, 11, None);
                restarted.seek(n);
                assert_eq!(restarted.position(), n);
                let after = concat(
                    &schema,
                    &[
                        restarted.next_batch(100).unwrap(),
                        restarted.next_batch(200).unwrap(),
                    ],
                );
                assert_eq!(after, tail, "{t} after seek({n})");
            }
        }
    }

    #[test]
    fn position_counts_all_events() {
        let mut g = generator(NexmarkTable::Bid, 0, None);
        assert_eq!(g.position(), 0);
        // The first 46 bids are events 4..=49; the 47th is event 54.
        g.next_batch(46).unwrap();
        assert_eq!(g.position(), 50);
        g.next_batch(1).unwrap();
        assert_eq!(g.position(), 55);

        let mut p = generator(NexmarkTable::Person, 0, None);
        p.next_batch(3).unwrap();
        assert_eq!(p.position(), 101);
    }

    #[test]
    fn event_mix_is_1_3_46() {
        for (t, expected) in TABLES.into_iter().zip([1_000, 3_000, 46_000]) {
            let batches = drain(generator(t, 5, Some(50_000)), 8192);
            let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
            assert_eq!(rows, expected, "{t}");
            for b in &batches {
                for e in event_ids(b) {
                    assert_eq!(NexmarkTable::of_event(e), t);
                }
            }
        }
    }

    #[test]
    fn max_events_ends_the_stream() {
        let mut g = generator(NexmarkTable::Bid, 0, Some(100));
        // Bids are events 4..=49 and 54..=99.
        assert_eq!(g.next_batch(1000).unwrap().num_rows(), 92);
        assert_eq!(g.position(), 100);
        assert!(g.next_batch(1000).is_none());
        assert!(g.next_batch(1000).is_none());

        // Only bids were left after the last person: the person stream ends without an
        // empty batch, at the end position.
        let mut p = generator(NexmarkTable::Person, 0, Some(100));
        assert_eq!(p.next_batch(1000).unwrap().num_rows(), 2);
        assert!(p.next_batch(1000).is_none());
        assert_eq!(p.position(), 100);
        let mut p = generator(NexmarkTable::Person, 0, Some(100));
        assert_eq!(p.next_batch(2).unwrap().num_rows(), 2);
        assert!(p.next_batch(1).is_none());
        assert_eq!(p.position(), 100);

        assert!(generator(NexmarkTable::Auction, 0, Some(0))
            .next_batch(10)
            .is_none());
    }

    #[test]
    fn date_time_advances_by_the_inter_event_delay() {
        let base = DEFAULT_BASE_TIME_MILLIS * 1000;
        let people = generator(NexmarkTable::Person, 0, None)
            .next_batch(100)
            .unwrap();
        let times = time_col(&people, "date_time");
        assert_eq!(times[0], base);
        assert!(
            times.windows(2).all(|w| w[1] - w[0] == 500),
            "50 events of 10 µs"
        );

        let bids = generator(NexmarkTable::Bid, 0, None)
            .next_batch(1000)
            .unwrap();
        let times = time_col(&bids, "date_time");
        assert_eq!(times[0], base + 40);
        for (w, e) in times.windows(2).zip(event_ids(&bids)) {
            // Within an epoch the next bid is the next event; else 4 events are skipped.
            let gap = if e % 50 == 49 { 50 } else { 10 };
            assert_eq!(w[1] - w[0], gap);
        }

        // A fractional delay: event n is at floor(n * delay).
        let mut g = NexmarkGenerator::new(NexmarkConfig {
            inter_event_micros: 2.5,
            base_time_millis: 0,
            ..NexmarkConfig::new(NexmarkTable::Auction)
        });
        let times = time_col(&g.next_batch(3).unwrap(), "date_time");
        assert_eq!(times, vec![2, 5, 7]);
        assert_eq!(g.event_time_micros(51), 127);
    }

    #[test]
    fn ids_are_consistent() {
        let people = concat(
            &NexmarkGenerator::schema(NexmarkTable::Person),
            &drain(generator(NexmarkTable::Person, 9, Some(200_000)), 4096),
        );
        let ids = int_col(&people, "id");
        assert_eq!(ids, (1000..1000 + ids.len() as i64).collect::<Vec<_>>());

        let auctions = concat(
            &NexmarkGenerator::schema(NexmarkTable::Auction),
            &drain(generator(NexmarkTable::Auction, 9, Some(200_000)), 4096),
        );
        let ids = int_col(&auctions, "id");
        assert_eq!(ids, (1000..1000 + ids.len() as i64).collect::<Vec<_>>());
        let events = event_ids(&auctions);
        let sellers = int_col(&auctions, "seller");
        let categories = int_col(&auctions, "category");
        let initial = int_col(&auctions, "initial_bid");
        let reserve = int_col(&auctions, "reserve");
        let start = time_col(&auctions, "date_time");
        let expires = time_col(&auctions, "expires");
        for i in 0..ids.len() {
            let last_person = (events[i] / 50) as i64 + 1000;
            assert!((1000..=last_person + 10).contains(&sellers[i]));
            assert!((10..15).contains(&categories[i]));
            assert!(initial[i] >= 100 && reserve[i] > initial[i]);
            assert!(expires[i] > start[i]);
            // Up to twice the time in which 100 more auctions start (1666 events of 10 µs).
            assert!(expires[i] - start[i] <= 1_000 + 2 * 16_660);
        }

        let bids = concat(
            &NexmarkGenerator::schema(NexmarkTable::Bid),
            &drain(generator(NexmarkTable::Bid, 9, Some(200_000)), 4096),
        );
        let events = event_ids(&bids);
        let auctions = int_col(&bids, "auction");
        let bidders = int_col(&bids, "bidder");
        for i in 0..bids.num_rows() {
            let e = events[i];
            let last_auction = (e / 50 * 3 + 2) as i64 + 1000;
            let last_person = (e / 50) as i64 + 1000;
            assert!((1000..=last_auction + 10).contains(&auctions[i]));
            assert!(
                auctions[i] >= last_auction - 100,
                "one of the in-flight auctions"
            );
            assert!((1000..=last_person + 10).contains(&bidders[i]));
        }
    }

    #[test]
    fn bid_values_follow_the_nexmark_distributions() {
        let bids = concat(
            &NexmarkGenerator::schema(NexmarkTable::Bid),
            &drain(generator(NexmarkTable::Bid, 2, Some(500_000)), 8192),
        );
        let n = bids.num_rows() as f64;
        let events = event_ids(&bids);
        let auctions = int_col(&bids, "auction");
        let bidders = int_col(&bids, "bidder");
        let share = |count: usize| count as f64 / n;

        let hot_auctions = (0..bids.num_rows())
            .filter(|&i| auctions[i] - 1000 == (events[i] / 50 * 3 + 2) as i64 / 100 * 100)
            .count();
        assert!(
            (0.49..0.52).contains(&share(hot_auctions)),
            "{}",
            share(hot_auctions)
        );
        let hot_bidders = (0..bids.num_rows())
            .filter(|&i| bidders[i] - 1000 == (events[i] / 50) as i64 / 100 * 100 + 1)
            .count();
        assert!(
            (0.74..0.77).contains(&share(hot_bidders)),
            "{}",
            share(hot_bidders)
        );

        let prices = int_col(&bids, "price");
        assert!(prices.iter().all(|p| (100..=100_000_000).contains(p)));
        let below_1000 = prices.iter().filter(|&&p| p < 100_000).count();
        assert!(
            (0.48..0.52).contains(&share(below_1000)),
            "log-uniform: half below $1000"
        );

        let channels = str_col(&bids, "channel");
        let urls = str_col(&bids, "url");
        let hot = channels
            .iter()
            .filter(|c| HOT_CHANNELS.contains(&c.as_str()))
            .count();
        assert!((0.49..0.51).contains(&share(hot)));
        assert!(urls
            .iter()
            .all(|u| u.starts_with("https://www.nexmark.com/")));
        // A channel always comes with the same url.
        let mut url_of = std::collections::HashMap::new();
        for (c, u) in channels.iter().zip(&urls) {
            assert_eq!(url_of.entry(c).or_insert(u), &u);
        }
        assert!(url_of.len() > 9_000, "most of the 10,000 channels appear");

        let extras = str_col(&bids, "extra");
        assert!(extras.iter().all(|x| (54..=81).contains(&x.len())));
        assert!(extras
            .iter()
            .all(|x| x.bytes().all(|b| b.is_ascii_lowercase())));
    }

    #[test]
    fn person_and_auction_strings_look_like_nexmark() {
        let people = generator(NexmarkTable::Person, 4, None)
            .next_batch(2000)
            .unwrap();
        for name in str_col(&people, "name") {
            let (first, last) = name.split_once(' ').unwrap();
            assert!(FIRST_NAMES.contains(&first) && LAST_NAMES.contains(&last));
        }
        for email in str_col(&people, "email_address") {
            // As in the reference generator, a word can trim down to nothing ("@abc.com").
            let (user, domain) = email.split_once('@').unwrap();
            assert!(user.len() < 7 && domain.ends_with(".com"), "{email}");
        }
        for card in str_col(&people, "credit_card") {
            let groups: Vec<&str> = card.split(' ').collect();
            assert_eq!(groups.len(), 4);
            assert!(groups
                .iter()
                .all(|g| g.len() == 4 && g.bytes().all(|b| b.is_ascii_digit())));
        }
        assert!(str_col(&people, "city")
            .iter()
            .all(|c| US_CITIES.contains(&c.as_str())));
        assert!(str_col(&people, "state")
            .iter()
            .all(|s| US_STATES.contains(&s.as_str())));
        assert!(str_col(&people, "extra")
            .iter()
            .all(|x| (100..=200).contains(&x.len())));

        let auctions = generator(NexmarkTable::Auction, 4, None)
            .next_batch(2000)
            .unwrap();
        for (item, desc) in str_col(&auctions, "item_name")
            .iter()
            .zip(str_col(&auctions, "description"))
        {
            assert!(item.len() < 20 && desc.len() < 100);
            assert_eq!(item.trim(), item);
            assert_eq!(desc.trim(), desc);
        }
        let extras = str_col(&auctions, "extra");
        // 500 bytes minus 48..=166 bytes of other columns, ±20%.
        assert!(extras.iter().all(|x| (267..=541).contains(&x.len())));
    }

    #[test]
    fn out_of_order_moves_times_back_within_the_bound() {
        let config = NexmarkConfig {
            out_of_order_prob: 0.05,
            ..NexmarkConfig::new(NexmarkTable::Bid)
        };
        let mut late = NexmarkGenerator::new(config.clone());
        let mut in_order = generator(NexmarkTable::Bid, 0, None);
        let a = late.next_batch(100_000).unwrap();
        let b = in_order.next_batch(100_000).unwrap();
        let (ta, tb) = (time_col(&a, "date_time"), time_col(&b, "date_time"));
        let moved = ta.iter().zip(&tb).filter(|(x, y)| x != y).count();
        assert!((4_500..5_500).contains(&moved), "{moved}");
        assert!(ta
            .iter()
            .zip(&tb)
            .all(|(x, y)| x <= y && y - x <= DEFAULT_MAX_OUT_OF_ORDER_MICROS));
        // Only the times differ.
        assert_eq!(
            a.project(&[0, 1, 2, 3, 4, 6]).unwrap(),
            b.project(&[0, 1, 2, 3, 4, 6]).unwrap()
        );
        // And a restart reproduces them.
        let mut again = NexmarkGenerator::new(config);
        again.seek(late.position());
        assert_eq!(again.next_batch(10), late.next_batch(10));
    }

    /// Rows per second of `next_batch(8192)` over bids; run with
    /// `cargo test -p eddy-executor nexmark::tests::throughput -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn throughput() {
        for t in TABLES {
            let mut g = generator(t, 0, None);
            let start = std::time::Instant::now();
            let mut rows = 0;
            while start.elapsed().as_secs_f64() < 2.0 {
                rows += g.next_batch(8192).unwrap().num_rows();
            }
            let secs = start.elapsed().as_secs_f64();
            println!(
                "{t}: {rows} rows in {secs:.2} s = {:.0} rows/s",
                rows as f64 / secs
            );
        }
    }
}
