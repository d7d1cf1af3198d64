//! `eddy --demo`: a live view from the first second, with no Kafka or files needed.
//!
//! It creates, unless they exist, the Nexmark `bid` source and the `hot_auctions` view of
//! the README's quickstart: the same statements a user could type.

use crate::database::Database;
use crate::error::Result;

/// The demo's statements, in order (each is skipped when its object exists).
pub const DEMO_SQL: &[(&str, &str)] = &[
    (
        "bid",
        "CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP,
           WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
         WITH (connector = 'nexmark', nexmark.table.type = 'bid',
               nexmark.event.rate = '1000', nexmark.inter.event.micros = '1000')",
    ),
    (
        "hot_auctions",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS hot_auctions AS
         SELECT auction, window_start, count(*) AS bids, max(price) AS top_price
         FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND)
         GROUP BY auction, window_start",
    ),
];

/// Creates the demo's source and view where they are missing.
pub async fn install(db: &Database) -> Result<()> {
    for (name, sql) in DEMO_SQL {
        if db.exists(name) {
            tracing::info!(object = name, "demo: already there");
            continue;
        }
        db.execute_sql(sql).await?;
        tracing::info!(object = name, "demo: created");
    }
    Ok(())
}
