//! Reading stored rows for a query: the indexes reads can use ([`indexes`]), tables as DataFusion providers ([`provider`]) over key
//! ranges ([`key_ranges`]) and snapshot scans ([`stored_scan`]), how many full scans run at
//! once ([`scan_admission`]), each query's memory ([`query_memory`]), its CPU as blocking
//! sections ([`blocking_polls`]), the statements running now ([`activity`]), and a
//! subscription's snapshot and changes as rows ([`subscription_rows`]).

pub mod activity;
pub mod blocking_polls;
pub mod branch_order;
pub mod indexes;
pub mod key_ranges;
pub mod provider;
pub mod query_memory;
pub mod scan_admission;
pub mod stored_scan;
pub mod subscription_rows;
pub mod unplanned_view;
