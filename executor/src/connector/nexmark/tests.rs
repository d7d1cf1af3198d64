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
