//! The oracle's seeds with a state cache of 4 KiB, so that every operator state path misses,
//! reads back from the store and evicts, including across the kill -9 restarts some seeds
//! make (`EDDY_ORACLE_TINY_CACHE_SEEDS`, default 4 of each kind). The answers must be those the
//! batch engine gives, as with the default cache. One worker here (the default elsewhere is the
//! machine's cores): with `oracle.rs` and `workers.rs`, the oracle runs 1, the cores, and 4.

#[tokio::test]
async fn views_equal_their_batch_queries_with_a_tiny_state_cache() {
    eddy_oracle::set_server_args(vec![
        "--state-cache-mib".into(),
        "0.004".into(),
        "--workers".into(),
        "1".into(),
    ]);
    let seeds = eddy_oracle::seeds_from_env("EDDY_ORACLE_TINY_CACHE_SEEDS", 4);
    let failures = eddy_oracle::run_seeds(seeds).await;
    assert!(
        failures.is_empty(),
        "oracle seeds failed with a tiny state cache: {failures:?} (replay one: cargo run -p eddy-oracle --bin oracle-soak -- --state-cache-mib 0.004 --workers 1 --first SEED --seeds 1 [--kind joins|stream-joins])"
    );
}
