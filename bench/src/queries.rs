//! The Nexmark bid source and the queries the `nexmark` and `freshness`
//! commands run, in Eddy's SQL.

use clap::ValueEnum;

/// The bid columns every input provides (the Nexmark generator's bid table,
/// and the JSON lines the comparison engines read). A 1 s watermark delay
/// covers the up to 800 ms out-of-order events of the JSON files.
pub const BID_COLUMNS: &str = "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, \
     url VARCHAR, date_time TIMESTAMP, extra VARCHAR, \
     WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND";

/// The person and auction columns of the Nexmark generator (and of `nexmark-files`).
pub const PERSON_COLUMNS: &str = "id BIGINT, name VARCHAR, email_address VARCHAR, \
     credit_card VARCHAR, city VARCHAR, state VARCHAR, date_time TIMESTAMP, extra VARCHAR, \
     WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND";
pub const AUCTION_COLUMNS: &str = "id BIGINT, item_name VARCHAR, description VARCHAR, \
     initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, \
     category BIGINT, extra VARCHAR, \
     WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND";

/// The name of the bid source and of the view.
pub const SOURCE: &str = "bid";
pub const VIEW: &str = "nexmark_view";

/// A Nexmark table a query reads: its source's name (= the generator's table type and the
/// file's stem) and columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Person,
    Auction,
    Bid,
}

impl Table {
    pub fn name(self) -> &'static str {
        match self {
            Table::Person => "person",
            Table::Auction => "auction",
            Table::Bid => SOURCE,
        }
    }

    pub fn columns(self) -> &'static str {
        match self {
            Table::Person => PERSON_COLUMNS,
            Table::Auction => AUCTION_COLUMNS,
            Table::Bid => BID_COLUMNS,
        }
    }

    /// How many of this table's rows the generator makes in its first `events` events (every
    /// 50 events are 1 person, 3 auctions, then 46 bids).
    pub fn rows_in(self, events: u64) -> u64 {
        let (first, count) = match self {
            Table::Person => (0, 1),
            Table::Auction => (1, 3),
            Table::Bid => (4, 46),
        };
        events / 50 * count + (events % 50).saturating_sub(first).min(count)
    }
}

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
    /// Local item suggestion: auctions of category 10 joined with their sellers in OR, ID, CA.
    Q3,
    /// Bids expanded with their auction (a stream–table join), auctions of category 10.
    Q20,
}

impl Query {
    /// The tables the query reads.
    pub fn tables(self) -> &'static [Table] {
        match self {
            Query::Q3 => &[Table::Auction, Table::Person],
            Query::Q20 => &[Table::Bid, Table::Auction],
            _ => &[Table::Bid],
        }
    }

    /// The view's SELECT.
    pub fn select(self) -> String {
        match self {
            Query::Q3 => "SELECT P.name, P.city, P.state, A.id \
                 FROM auction A JOIN person P ON A.seller = P.id \
                 WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')"
                .to_string(),
            Query::Q20 => format!(
                "SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.date_time, B.extra, \
                 A.item_name, A.description, A.initial_bid, A.reserve, A.date_time AS a_date_time, \
                 A.expires, A.seller, A.category, A.extra AS a_extra \
                 FROM {SOURCE} B JOIN auction A ON B.auction = A.id WHERE A.category = 10"
            ),
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
            Query::Q2 | Query::Q3 | Query::Q20 => None,
            Query::Q5 => Some((format!("SELECT CAST(sum(num) AS BIGINT) FROM {VIEW}"), 5)),
            Query::Q7 => Some((format!("SELECT CAST(sum(bids) AS BIGINT) FROM {VIEW}"), 1)),
            Query::Q11 => Some((
                format!("SELECT CAST(sum(bid_count) AS BIGINT) FROM {VIEW}"),
                1,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bids_follow_the_event_mix() {
        assert_eq!(Table::Bid.rows_in(50_000), 46_000);
        assert_eq!(Table::Bid.rows_in(4), 0);
        assert_eq!(Table::Bid.rows_in(5), 1);
        assert_eq!(Table::Bid.rows_in(53), 46);
        assert_eq!(Table::Bid.rows_in(55), 47);
        assert_eq!(Table::Person.rows_in(51), 2);
        assert_eq!(Table::Auction.rows_in(52), 4);
        assert_eq!(Table::Auction.rows_in(100), 6);
    }
}
