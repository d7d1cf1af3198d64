//! Every Nexmark query of `eddy-bench nexmark` is accepted as a materialized view, and its rows
//! are the answer of the same SELECT run as a batch query (DataFusion over the stored rows) on
//! the same events.
//!
//! The events come from Eddy's Nexmark generator (2 ms of event time apart, so windows open and
//! close) and are inserted, in event-time order, into append-only tables named as the sources
//! the queries read, after every view is created: the views stream them. A last row far in the
//! future on each table moves every watermark past the data, so OVER windows and closing
//! windows have emitted; the rows that row produces are left out of both answers.

use std::collections::BTreeMap;
use std::time::Duration;

use clap::ValueEnum;
use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Int64Type, TimestampMicrosecondType};
use eddy_executor::connector::nexmark::{NexmarkConfig, NexmarkGenerator, NexmarkTable};
use eddy_sqllogictest::{sql_timestamp, EddyProcess};
use tokio_postgres::{Client, SimpleQueryMessage};

use crate::process::flush_until_done;
use crate::queries::{Query, Table};

const EVENTS: u64 = 20_000;
const INTER_EVENT_MICROS: f64 = 2_000.0;
/// Rows per INSERT statement.
const CHUNK: usize = 1_000;

/// The rows that move every watermark past the data: ids -1, year 2100.
const FINAL_ROWS: [&str; 3] = [
    "INSERT INTO person VALUES (-1, 'final', '', '', '', 'XX', '2100-01-01 00:00:00', '')",
    "INSERT INTO auction VALUES (-1, 'final', '', 0, 0, '2100-01-01 00:00:00', \
     '2100-01-01 00:00:10', -1, -1, '')",
    "INSERT INTO bid VALUES (-1, -1, 0, 'final', '', '2100-01-01 00:00:01', '')",
];

fn view_name(query: Query) -> String {
    let name = query.to_possible_value().expect("a named query");
    format!("nexmark_{}", name.get_name().replace('-', "_"))
}

/// One table's generated rows, as `(event time, SQL tuple)`.
fn generated_rows(table: Table) -> Vec<(i64, String)> {
    let kind = match table {
        Table::Person => NexmarkTable::Person,
        Table::Auction => NexmarkTable::Auction,
        Table::Bid => NexmarkTable::Bid,
    };
    let mut config = NexmarkConfig::new(kind);
    config.seed = 7;
    config.max_events = Some(EVENTS);
    config.inter_event_micros = INTER_EVENT_MICROS;
    let mut generator = NexmarkGenerator::new(config);
    let mut rows = Vec::new();
    while let Some(batch) = generator.next_batch(4096) {
        let time = batch
            .schema()
            .index_of("date_time")
            .expect("a date_time column");
        for row in 0..batch.num_rows() {
            let at = batch
                .column(time)
                .as_primitive::<TimestampMicrosecondType>()
                .value(row);
            rows.push((at, sql_tuple(&batch, row)));
        }
    }
    rows
}

fn sql_tuple(batch: &RecordBatch, row: usize) -> String {
    let values: Vec<String> = batch
        .columns()
        .iter()
        .map(|column| match column.data_type() {
            DataType::Int64 => column.as_primitive::<Int64Type>().value(row).to_string(),
            DataType::Timestamp(..) => {
                let micros = column.as_primitive::<TimestampMicrosecondType>().value(row);
                format!(
                    "'{}{:03}'",
                    sql_timestamp(micros.div_euclid(1000)),
                    micros.rem_euclid(1000)
                )
            }
            _ => format!(
                "'{}'",
                column.as_string::<i32>().value(row).replace('\'', "''")
            ),
        })
        .collect();
    format!("({})", values.join(", "))
}

/// Inserts every table's rows in event-time order, `CHUNK` rows per statement.
async fn insert_events(client: &Client) {
    let mut all: Vec<(i64, Table, String)> = Vec::new();
    for table in [Table::Person, Table::Auction, Table::Bid] {
        all.extend(
            generated_rows(table)
                .into_iter()
                .map(|(at, tuple)| (at, table, tuple)),
        );
    }
    all.sort_by_key(|(at, _, _)| *at);
    for chunk in all.chunks(CHUNK) {
        let mut per_table: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (_, table, tuple) in chunk {
            per_table.entry(table.name()).or_default().push(tuple);
        }
        for (table, tuples) in per_table {
            let sql = format!("INSERT INTO {table} VALUES {}", tuples.join(", "));
            client.batch_execute(&sql).await.expect("inserting events");
        }
    }
}

/// A query's rows as sorted text, floats to 4 decimals (a sum's last digits depend on the
/// order it adds in), without the rows of the final rows (a cell `-1` or in year 2100).
async fn answer(client: &Client, sql: &str, columns: Option<&[usize]>) -> Vec<Vec<String>> {
    let messages = client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    let mut rows: Vec<Vec<String>> = messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some(
                (0..row.len())
                    .map(|i| row.get(i).unwrap_or("NULL").to_string())
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        })
        .filter(|row| {
            !row.iter()
                .any(|cell| cell == "-1" || cell.starts_with("2100-"))
        })
        .map(|row| {
            let kept: Vec<&String> = match columns {
                Some(columns) => columns.iter().map(|&c| &row[c]).collect(),
                None => row.iter().collect(),
            };
            kept.into_iter().map(|cell| normalize(cell)).collect()
        })
        .collect();
    rows.sort();
    rows
}

fn normalize(cell: &str) -> String {
    match cell.parse::<f64>() {
        Ok(value) if cell.contains(['.', 'e']) => format!("{value:.4}"),
        _ => cell.to_string(),
    }
}

/// The columns compared: q19's ranks among equal prices may go to any of those bids.
fn compared_columns(query: Query) -> Option<&'static [usize]> {
    match query {
        // auction, price, rank_number
        Query::Q19 => Some(&[0, 2, 7]),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_nexmark_query_streams_the_batch_answer() {
    let eddy = EddyProcess::start_fresh().await.expect("starting eddy");
    let (client, _connection) = eddy.connect().await.expect("connecting");
    for table in [Table::Person, Table::Auction, Table::Bid] {
        let sql = format!(
            "CREATE TABLE {} ({}) APPEND ONLY",
            table.name(),
            table.columns()
        );
        client.batch_execute(&sql).await.expect(&sql);
    }
    let queries = Query::value_variants();
    for query in queries {
        if let Some(setup) = query.setup() {
            client.batch_execute(setup).await.expect(setup);
        }
        let sql = format!(
            "CREATE MATERIALIZED VIEW {} AS {}",
            view_name(*query),
            query.select()
        );
        client
            .batch_execute(&sql)
            .await
            .unwrap_or_else(|e| panic!("{query:?} is refused: {e:?}\n{sql}"));
    }
    insert_events(&client).await;
    for sql in FINAL_ROWS {
        client.batch_execute(sql).await.expect(sql);
    }
    flush_until_done(&client, Duration::from_secs(300))
        .await
        .expect("FLUSH");

    let mut compared = 0;
    for query in queries {
        let view = view_name(*query);
        if *query == Query::Q12 {
            // Windows of the wall clock: no batch answer, but every bid is counted once.
            let counted = answer(
                &client,
                &format!("SELECT CAST(sum(bid_count) AS BIGINT) FROM {view}"),
                None,
            )
            .await;
            let bids = answer(&client, "SELECT count(*) FROM bid", None).await;
            assert_eq!(counted, bids, "q12");
            continue;
        }
        let columns = compared_columns(*query);
        let streamed = answer(&client, &format!("SELECT * FROM {view}"), columns).await;
        // The side input does not change: its lookup join is a plain join in a batch.
        let batch_sql = query
            .select()
            .replace("FOR SYSTEM_TIME AS OF PROCTIME() ", "");
        let batch = answer(&client, &batch_sql, columns).await;
        assert!(
            !batch.is_empty(),
            "{query:?}: the batch answer is empty: the test data does not exercise it"
        );
        assert_eq!(
            streamed.len(),
            batch.len(),
            "{query:?}: {} rows streamed, {} in batch",
            streamed.len(),
            batch.len()
        );
        let first_difference = streamed.iter().zip(&batch).find(|(s, b)| s != b);
        assert!(
            first_difference.is_none(),
            "{query:?}: streamed {:?} where the batch answer has {:?}",
            first_difference.map(|d| d.0),
            first_difference.map(|d| d.1),
        );
        eprintln!("{view}: {} rows, as in batch", batch.len());
        compared += 1;
    }
    assert_eq!(compared, queries.len() - 1);
}
