//! The oracle's seeds with views on four workers (more than CI's cores): every join, GROUP BY,
//! top-N and OVER runs as four instances behind an exchange, and the answers must be those the
//! batch engine gives (`EDDY_ORACLE_WORKERS_SEEDS`, default 4 of each kind, with the kill -9
//! restarts some seeds make).

#[tokio::test]
async fn views_on_four_workers_equal_their_batch_queries() {
    eddy_oracle::set_server_args(vec!["--workers".into(), "4".into()]);
    let seeds = eddy_oracle::seeds_from_env("EDDY_ORACLE_WORKERS_SEEDS", 4);
    let failures = eddy_oracle::run_seeds(seeds).await;
    assert!(
        failures.is_empty(),
        "oracle seeds failed on four workers: {failures:?} (replay one: cargo run -p eddy-oracle --bin oracle-soak -- --workers 4 --first SEED --seeds 1 [--kind joins|stream-joins])"
    );
}
