//! A fixed budget of oracle seeds (`EDDY_ORACLE_SEEDS`, default 12, for windowed views and for
//! joins each), run on every CI build.

#[tokio::test]
async fn views_equal_their_batch_queries() {
    let seeds = eddy_oracle::seeds_from_env("EDDY_ORACLE_SEEDS", 12);
    let failures = eddy_oracle::run_seeds(seeds).await;
    assert!(
        failures.is_empty(),
        "oracle seeds failed: {failures:?} (replay one: cargo run -p eddy-oracle --bin oracle-soak -- --first SEED --seeds 1 [--kind joins|stream-joins])"
    );
}
