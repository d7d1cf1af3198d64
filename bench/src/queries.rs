//! The Nexmark bid source and the queries the `nexmark` and `freshness`
//! commands run, in Eddy's SQL.

use clap::ValueEnum;

/// The bid columns every input provides (the Nexmark generator's bid table,
/// and the JSON lines the comparison engines read). A 1 s watermark delay
/// covers the up to 800 ms out-of-order events of the JSON files.
pub const BID_COLUMNS: &str = "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, \
     url VARCHAR, date_time TIMESTAMP, extra VARCHAR, \
     WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND";

/// The name of the source and of the view.
pub const SOURCE: &str = "bid";
pub const VIEW: &str = "nexmark_view";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Query {
    /// Pass-through: every bid, every column.
    Q0,
    /// Projection: the price in another currency.
    Q1,
    /// Filter: bids on every 123rd auction.
    Q2,
    /// HOP count per auction (2 s slide, 10 s size).
    Q5,
    /// TUMBLE (10 s) count and max price per auction.
    Q7,
    /// SESSION (10 s gap) count per bidder.
    Q11,
}

impl Query {
    /// The view's SELECT.
    pub fn select(self) -> String {
        match self {
            Query::Q0 => {
                format!("SELECT auction, bidder, price, channel, url, date_time, extra FROM {SOURCE}")
            }
            Query::Q1 => format!(
                "SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM {SOURCE}"
            ),
            Query::Q2 => format!("SELECT auction, price FROM {SOURCE} WHERE auction % 123 = 0"),
            Query::Q5 => format!(
                "SELECT auction, window_start, window_end, count(*) AS num \
                 FROM HOP({SOURCE}, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND) \
                 GROUP BY auction, window_start, window_end"
            ),
            Query::Q7 => format!(
                "SELECT auction, window_start, window_end, count(*) AS bids, max(price) AS max_price \
                 FROM TUMBLE({SOURCE}, date_time, INTERVAL '10' SECOND) \
                 GROUP BY auction, window_start, window_end"
            ),
            Query::Q11 => format!(
                "SELECT bidder, window_start, window_end, count(*) AS bid_count \
                 FROM SESSION({SOURCE}, date_time, INTERVAL '10' SECOND) \
                 GROUP BY bidder, window_start, window_end"
            ),
        }
    }

    pub fn create_view(self) -> String {
        format!("CREATE MATERIALIZED VIEW {VIEW} AS {}", self.select())
    }

    /// A query over the view giving how many input bids it accounts for, and
    /// how many each bid counts (HOP puts a bid in size / slide windows);
    /// `None` for a filter, whose count depends on the data.
    pub fn counted_bids(self) -> Option<(String, i64)> {
        match self {
            Query::Q0 | Query::Q1 => Some((format!("SELECT count(*) FROM {VIEW}"), 1)),
            Query::Q2 => None,
            Query::Q5 => Some((format!("SELECT CAST(sum(num) AS BIGINT) FROM {VIEW}"), 5)),
            Query::Q7 => Some((format!("SELECT CAST(sum(bids) AS BIGINT) FROM {VIEW}"), 1)),
            Query::Q11 => Some((
                format!("SELECT CAST(sum(bid_count) AS BIGINT) FROM {VIEW}"),
                1,
            )),
        }
    }
}

/// How many bids the Nexmark generator makes in its first `events` events:
/// every 50 events are 1 person, 3 auctions, then 46 bids.
pub fn nexmark_bids(events: u64) -> u64 {
    events / 50 * 46 + (events % 50).saturating_sub(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bids_follow_the_event_mix() {
        assert_eq!(nexmark_bids(50_000), 46_000);
        assert_eq!(nexmark_bids(4), 0);
        assert_eq!(nexmark_bids(5), 1);
        assert_eq!(nexmark_bids(53), 46);
        assert_eq!(nexmark_bids(55), 47);
    }
}
