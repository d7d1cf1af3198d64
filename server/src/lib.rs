//! The `eddy` server: Postgres wire protocol in front of Eddy's planner, executor and storage.
//!
//! Modules in data-flow order:
//!
//! - [`file_limit`]: `--max-connections` checked against the limit on open files.
//! - [`accept_backoff`]: a failed accept pauses the listener (out of descriptors) and logs once.
//! - [`connection`]: one client connection: TLS negotiation, authentication, the message loop.
//! - [`frame`]: client messages read whole, bounded and checked before they are decoded.
//! - [`login_throttle`]: failed logins answered later and later.
//! - [`failed_logins`]: failed logins logged (rate-limited) and counted.
//! - [`auth`]: trust, or SCRAM-SHA-256 with a password; TLS.
//! - [`limits`]: the server's limits (statement size, expression depth, memory).
//! - [`handler`]: pgwire handlers (simple and extended query protocol).
//! - [`blocking_polls`]: a statement's CPU work as blocking sections, so others are read.
//! - [`client_parse`]: a client's SQL parsed within a budget, off the runtime when long.
//! - [`portal_execute`]: Execute with no row limit, streamed.
//! - [`parameters`]: bound parameters as DataFusion values (JSON ones too).
//! - [`rewrite`]: client SQL DataFusion cannot plan as written, made plannable.
//! - [`catalog_rewrites`]: drivers' catalog query forms (`regproc` comparisons, repeated
//!   column names).
//! - [`values_subqueries`]: VALUES holding scalar subqueries, as SELECTs DataFusion runs.
//! - [`session`]: a connection's settings (SET, SHOW, RESET).
//! - [`activity`]: `pg_stat_activity` and `pg_cancel_backend`.
//! - [`protocol_statements`]: DEALLOCATE and DISCARD.
//! - [`cursors`]: DECLARE ... CURSOR, FETCH, MOVE, CLOSE.
//! - [`cursor_portals`]: SQL cursors described and executed as the connection's portals.
//! - [`pg_text`], [`pg_encoding`]: values in Postgres' text and binary forms.
//! - [`copy`]: `COPY ... TO STDOUT`.
//! - [`pg_catalog`], [`pg_keys`], [`pg_functions`], [`pg_text_functions`] and
//!   [`information_schema`]: what drivers and BI tools read about the database;
//!   [`pg_json`] (`->`, `->>`), [`pg_interval_arithmetic`] (`interval * number`),
//!   [`interval_order`] (intervals compared by length), [`numeric_division`] and
//!   [`numeric_average`] (quotients and averages to Postgres's digits),
//!   [`pg_typeof`], [`pg_uuid`], [`pg_sizes`] and [`pg_regtype`] (`regtype` as names); [`pg_foreign`]: sources as
//!   foreign tables.
//! - [`database`]: statement dispatch — DDL and DML to the engine, queries to DataFusion.
//! - [`create_table_as`]: `CREATE TABLE ... AS SELECT`.
//! - [`dml_exprs`]: the WHERE and new values of UPDATE and DELETE, coerced and simplified.
//! - [`views`]: materialized views: planning, creation, EXPLAIN, the stream catalog.
//! - [`plain_views`]: `CREATE [OR REPLACE] VIEW`: stored queries, expanded where read.
//! - [`ddl`]: `DROP ... [CASCADE]`, `ALTER ... RENAME TO` and what depends on what.
//! - [`sources`]: CREATE SOURCE and connector-fed tables.
//! - [`provider`]: committed rows as DataFusion tables.
//! - [`function_caps`]: functions that allocate by their arguments, checked (54000).
//! - [`query_memory`]: each query's own memory pool (`--query-memory-limit`, 53200).
//! - [`result_stream`]: a query's rows encoded as the client takes them.
//! - [`subquery_names`]: the columns of subqueries in FROM and CTEs, named as Postgres names them.
//! - [`system_tables`]: the `eddy_catalog` schema.
//! - [`restore`]: how long this start took to bring the data back.
//! - [`metrics`]: Prometheus metrics on an HTTP listener of their own.
//! - [`error`]: errors with SQLSTATE codes; [`data_errors`]: data errors known by their text.
//! - [`demo`]: `eddy --demo`, a live Nexmark view.

pub mod accept_backoff;
pub mod activity;
pub mod add_primary_key;
pub mod at_time_zone;
pub mod auth;
pub mod blocking_polls;
pub mod branch_order;
pub mod catalog_rewrites;
pub mod catalog_search_path;
pub mod checked_arithmetic;
pub mod client_parse;
pub mod connection;
pub mod copy;
pub mod create_table_as;
pub mod cursor_portals;
pub mod cursors;
pub mod data_errors;
pub mod database;
pub mod ddl;
pub mod decimal_literals;
pub mod demo;
pub mod describe;
pub mod dml_exprs;
pub mod empty_catalog_selects;
pub mod error;
pub mod expr_rewrites;
pub mod failed_logins;
pub mod fetch_first;
pub mod file_limit;
pub mod frame;
pub mod from_functions;
pub mod function_caps;
pub mod handler;
pub mod in_subqueries;
pub mod indexes;
pub mod information_schema;
pub mod int_literals;
pub mod integer_casts;
pub mod interval_input;
pub mod interval_order;
pub mod key_ranges;
pub mod limits;
pub mod login_throttle;
pub mod metrics;
pub mod numeric_average;
pub mod numeric_division;
pub mod oid_markings;
pub mod operator_types;
pub mod output_names;
pub mod parameters;
pub mod pg_casts;
pub mod pg_catalog;
pub mod pg_catalog_derived;
pub mod pg_catalog_oids;
pub mod pg_column_types;
pub mod pg_date_functions;
pub mod pg_domain_base;
pub mod pg_eddy_extension;
pub mod pg_empty_catalogs;
pub mod pg_encoding;
pub mod pg_extract;
pub mod pg_foreign;
pub mod pg_functions;
pub mod pg_indexes;
pub mod pg_interval_arithmetic;
pub mod pg_json;
pub mod pg_json_agg;
pub mod pg_json_build;
pub mod pg_json_operators;
pub mod pg_json_sets;
pub mod pg_keys;
pub mod pg_ordered_set_aggregates;
pub mod pg_regtype;
pub mod pg_scalar_functions;
pub mod pg_sizes;
pub mod pg_text;
pub mod pg_text_cast;
pub mod pg_text_functions;
pub mod pg_timestamp_input;
pub mod pg_to_char;
pub mod pg_to_timestamp;
pub mod pg_typeof;
pub mod pg_uuid;
pub mod pg_views;
pub mod plain_views;
pub mod portal_execute;
pub mod protocol_statements;
pub mod provider;
pub mod query_memory;
pub mod quotient_markings;
pub mod restore;
pub mod result_columns;
pub mod result_formats;
pub mod result_stream;
pub mod rewrite;
pub mod scan_admission;
pub mod session;
pub mod session_time_zone;
pub mod set_returning_selects;
pub mod similar_to;
pub mod sources;
pub mod sql_prepare;
pub mod stored_scan;
pub mod subquery_names;
pub mod system_columns;
pub mod system_tables;
pub mod using_joins;
pub mod values_subqueries;
pub mod views;
