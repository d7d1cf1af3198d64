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

    /// The columns, with `id` declared the primary key of person and auction when `keyed`.
    pub fn columns_keyed(self, keyed: bool) -> String {
        match self {
            Table::Person | Table::Auction if keyed => {
                self.columns()
                    .replacen("id BIGINT,", "id BIGINT PRIMARY KEY,", 1)
            }
            _ => self.columns().to_string(),
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
    /// Processing-time window: bids per bidder in TUMBLE windows of 10 s of the wall clock
    /// (`PROCTIME()` added by a plain view, as in Flink's form).
    Q12,
    /// Local item suggestion: auctions of category 10 joined with their sellers in OR, ID, CA.
    Q3,
    /// Bids expanded with their auction (a stream–table join), auctions of category 10.
    Q20,
    /// Average closing price per category: each auction's best bid within its lifetime (an
    /// interval join and an aggregate), averaged per category.
    Q4,
    /// Hot items, the standard form: per HOP window, the auctions with the most bids (the
    /// counts joined with each window's maximum).
    #[value(name = "q5-standard")]
    Q5Standard,
    /// Highest bid, the standard form: each TUMBLE window's maximum price joined back to the
    /// bids of that window.
    #[value(name = "q7-standard")]
    Q7Standard,
    /// Average selling price by seller: the mean of each seller's last 10 closing prices (an
    /// interval join, an aggregate per auction, and an OVER window per seller over it).
    Q6,
    /// New users: people who opened an auction in the 10 s window they joined in (a window join
    /// of two windowed aggregates).
    Q8,
    /// Winning bids: each auction's highest bid within its lifetime (an interval join and a
    /// top-1 per auction).
    Q9,
    /// Each bidder's last bid per auction (deduplication: ROW_NUMBER = 1, newest first).
    Q18,
    /// The 10 highest bids of each auction (a top-N per partition).
    Q19,
    /// Bids with their day and minute as text (`to_char`), as written to a partitioned log.
    Q10,
    /// Bounded side input: bids joined with a table of 10,000 rows by `auction % 10000`
    /// (a lookup join, `FOR SYSTEM_TIME AS OF PROCTIME()`).
    Q13,
    /// Calculation: price in another currency, the bid's time of day as text, a filter.
    Q14,
    /// Bidding statistics per day: counts and distinct counts, each with three FILTERs.
    Q15,
    /// Channel statistics per channel and day.
    Q16,
    /// Auction statistics per auction and day: counts, min, max, avg, sum.
    Q17,
    /// Channel id: from the channel's name or out of the URL (`regexp_match`).
    Q21,
    /// URL directories (`split_part`).
    Q22,
}

/// The day as Nexmark's statistics queries group by it.
const DAY: &str = "to_char(date_time, 'YYYY-MM-DD')";

/// Counts of bids in each of Nexmark's three price ranges (a FILTER each), as `{what}`.
fn by_price_rank(count: &str, what: &str) -> String {
    format!(
        "{count} FILTER (WHERE price < 10000) AS rank1_{what}, \
         {count} FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_{what}, \
         {count} FILTER (WHERE price >= 1000000) AS rank3_{what}"
    )
}

/// Nexmark's bidding statistics: total, per rank, for bids, bidders and auctions.
fn bid_statistics() -> String {
    format!(
        "count(*) AS total_bids, {}, count(DISTINCT bidder) AS total_bidders, {}, \
         count(DISTINCT auction) AS total_auctions, {}",
        by_price_rank("count(*)", "bids"),
        by_price_rank("count(DISTINCT bidder)", "bidders"),
        by_price_rank("count(DISTINCT auction)", "auctions"),
    )
}

impl Query {
    /// The tables the query reads.
    pub fn tables(self) -> &'static [Table] {
        match self {
            Query::Q3 => &[Table::Auction, Table::Person],
            Query::Q20 | Query::Q4 | Query::Q6 | Query::Q9 => &[Table::Bid, Table::Auction],
            Query::Q8 => &[Table::Person, Table::Auction],
            _ => &[Table::Bid],
        }
    }

    /// Statements the query needs before its view: q13's side input.
    pub fn setup(self) -> Option<&'static str> {
        match self {
            Query::Q13 => Some(
                "CREATE TABLE side_input (key BIGINT PRIMARY KEY, value VARCHAR); \
                 INSERT INTO side_input SELECT value AS key, CAST(value AS VARCHAR) AS text \
                 FROM generate_series(0, 9999);",
            ),
            Query::Q12 => {
                Some("CREATE VIEW bid_proctime AS SELECT *, PROCTIME() AS p_time FROM bid;")
            }
            _ => None,
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
            Query::Q4 => format!(
                "SELECT Q.category, avg(Q.final) AS avg FROM ( \
                   SELECT max(B.price) AS final, A.category FROM auction A, {SOURCE} B \
                   WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires \
                   GROUP BY A.id, A.category) Q GROUP BY Q.category"
            ),
            Query::Q6 => format!(
                "SELECT Q.seller, Q.id, Q.expires, avg(Q.final) OVER ( \
                   PARTITION BY Q.seller ORDER BY Q.expires, Q.id ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS avg \
                 FROM ( \
                   SELECT max(B.price) AS final, A.id, A.seller, A.expires FROM auction A, {SOURCE} B \
                   WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires \
                   GROUP BY A.id, A.seller, A.expires) Q"
            ),
            Query::Q5Standard => format!(
                "SELECT AuctionBids.auction, AuctionBids.num FROM ( \
                   SELECT auction, count(*) AS num, window_start AS starttime \
                   FROM HOP({SOURCE}, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND) \
                   GROUP BY window_start, auction) AS AuctionBids \
                 JOIN ( \
                   SELECT max(CountBids.num) AS maxn, CountBids.starttime_c FROM ( \
                     SELECT count(*) AS num, window_start AS starttime_c \
                     FROM HOP({SOURCE}, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND) \
                     GROUP BY auction, window_start) AS CountBids \
                   GROUP BY CountBids.starttime_c) AS MaxBids \
                 ON AuctionBids.starttime = MaxBids.starttime_c AND AuctionBids.num >= MaxBids.maxn"
            ),
            Query::Q7Standard => format!(
                "SELECT B.auction, B.price, B.bidder, B.date_time FROM {SOURCE} B \
                 JOIN (SELECT max(price) AS maxprice, window_end AS date_time \
                       FROM TUMBLE({SOURCE}, date_time, INTERVAL '10' SECOND) \
                       GROUP BY window_start, window_end) B1 \
                 ON B.price = B1.maxprice \
                 WHERE B.date_time BETWEEN B1.date_time - INTERVAL '10' SECOND AND B1.date_time"
            ),
            Query::Q8 => "SELECT P.id, P.name, P.starttime FROM ( \
                   SELECT id, name, window_start AS starttime, window_end AS endtime \
                   FROM TUMBLE(person, date_time, INTERVAL '10' SECOND) \
                   GROUP BY id, name, window_start, window_end) P \
                 JOIN ( \
                   SELECT seller, window_start AS starttime, window_end AS endtime \
                   FROM TUMBLE(auction, date_time, INTERVAL '10' SECOND) \
                   GROUP BY seller, window_start, window_end) A \
                 ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime"
                .to_string(),
            Query::Q9 => format!(
                "SELECT id, item_name, description, initial_bid, reserve, date_time, expires, \
                   seller, category, auction, bidder, price, bid_date_time FROM ( \
                   SELECT A.id, A.item_name, A.description, A.initial_bid, A.reserve, \
                     A.date_time, A.expires, A.seller, A.category, \
                     B.auction, B.bidder, B.price, B.date_time AS bid_date_time, \
                     ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.date_time ASC) AS rownum \
                   FROM auction A, {SOURCE} B \
                   WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires) t \
                 WHERE rownum <= 1"
            ),
            Query::Q18 => format!(
                "SELECT auction, bidder, price, channel, url, date_time, extra FROM ( \
                   SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY date_time DESC) AS rank_number \
                   FROM {SOURCE}) t WHERE rank_number <= 1"
            ),
            Query::Q19 => format!(
                "SELECT auction, bidder, price, channel, url, date_time, extra, rank_number FROM ( \
                   SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number \
                   FROM {SOURCE}) t WHERE rank_number <= 10"
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
            Query::Q12 => "SELECT bidder, count(*) AS bid_count, window_start, window_end \
                 FROM TUMBLE(bid_proctime, p_time, INTERVAL '10' SECOND) \
                 GROUP BY bidder, window_start, window_end"
                .to_string(),
            Query::Q10 => format!(
                "SELECT auction, bidder, price, date_time, {DAY} AS date, \
                 to_char(date_time, 'HH24:MI') AS time FROM {SOURCE}"
            ),
            Query::Q13 => format!(
                "SELECT B.auction, B.bidder, B.price, B.date_time, S.value FROM {SOURCE} B \
                 JOIN side_input FOR SYSTEM_TIME AS OF PROCTIME() S ON B.auction % 10000 = S.key"
            ),
            Query::Q14 => format!(
                "SELECT auction, bidder, 0.908 * price AS price, \
                 CASE WHEN extract(hour FROM date_time) >= 8 AND extract(hour FROM date_time) <= 18 \
                   THEN 'dayTime' \
                   WHEN extract(hour FROM date_time) <= 6 OR extract(hour FROM date_time) >= 20 \
                   THEN 'nightTime' ELSE 'otherTime' END AS bidTimeType, \
                 date_time, extra, length(extra) - length(replace(extra, 'c', '')) AS c_counts \
                 FROM {SOURCE} WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000"
            ),
            Query::Q15 => format!(
                "SELECT {DAY} AS day, {} FROM {SOURCE} GROUP BY {DAY}",
                bid_statistics()
            ),
            Query::Q16 => format!(
                "SELECT channel, {DAY} AS day, max(to_char(date_time, 'HH24:MI')) AS minute, {} \
                 FROM {SOURCE} GROUP BY channel, {DAY}",
                bid_statistics()
            ),
            Query::Q17 => format!(
                "SELECT auction, {DAY} AS day, count(*) AS total_bids, {}, \
                 min(price) AS min_price, max(price) AS max_price, avg(price) AS avg_price, \
                 sum(price) AS sum_price FROM {SOURCE} GROUP BY auction, {DAY}",
                by_price_rank("count(*)", "bids")
            ),
            Query::Q21 => format!(
                "SELECT auction, bidder, price, channel, \
                 CASE WHEN lower(channel) = 'apple' THEN '0' \
                   WHEN lower(channel) = 'google' THEN '1' \
                   WHEN lower(channel) = 'facebook' THEN '2' \
                   WHEN lower(channel) = 'baidu' THEN '3' \
                   ELSE (regexp_match(url, '(&|^)channel_id=([^&]*)'))[2] END AS channel_id \
                 FROM {SOURCE} \
                 WHERE (regexp_match(url, '(&|^)channel_id=([^&]*)'))[2] IS NOT NULL \
                   OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')"
            ),
            Query::Q22 => format!(
                "SELECT auction, bidder, price, channel, split_part(url, '/', 4) AS dir1, \
                 split_part(url, '/', 5) AS dir2, split_part(url, '/', 6) AS dir3 FROM {SOURCE}"
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
            Query::Q0 | Query::Q1 | Query::Q10 | Query::Q13 | Query::Q22 => {
                Some((format!("SELECT count(*) FROM {VIEW}"), 1))
            }
            Query::Q15 | Query::Q16 | Query::Q17 => Some((
                format!("SELECT CAST(sum(total_bids) AS BIGINT) FROM {VIEW}"),
                1,
            )),
            Query::Q14 | Query::Q21 => None,
            Query::Q2
            | Query::Q3
            | Query::Q20
            | Query::Q4
            | Query::Q6
            | Query::Q5Standard
            | Query::Q7Standard
            | Query::Q8
            | Query::Q9
            | Query::Q18
            | Query::Q19 => None,
            Query::Q5 => Some((format!("SELECT CAST(sum(num) AS BIGINT) FROM {VIEW}"), 5)),
            Query::Q7 => Some((format!("SELECT CAST(sum(bids) AS BIGINT) FROM {VIEW}"), 1)),
            // Windows of the wall clock: how bids fall into them depends on the run, their total
            // does not (the view updates while a window is open).
            Query::Q11 | Query::Q12 => Some((
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
