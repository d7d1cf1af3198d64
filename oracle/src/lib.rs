//! Eddy's differential oracle: a random stream of rows and random views over it, run through a
//! real `eddy` process; after the last row every view must equal the same query run in batch
//! by DataFusion over exactly the rows that were not late (for EMIT ON WINDOW CLOSE: over the
//! windows the watermark closed).
//!
//! - [`case`]: the generator (tables, rows, views, order of events, restarts).
//! - [`batch`]: the batch side.
//! - [`joins`]: join cases: keyed tables with updates and deletes, random joins over them.
//! - [`asof_joins`]: ASOF joins on an integer column, and their batch form.
//! - [`rank_and_sets`]: OVER windows and GROUPING SETS / ROLLUP / CUBE over the keyed tables.
//! - [`stream_joins`]: interval and window joins of two watermarked streams, evicting state.
//!
//! `cargo test -p eddy-oracle` runs a fixed budget of seeds; `cargo run -p eddy-oracle --bin
//! oracle-soak -- --seeds 1000` runs a long soak and prints the seed of any failure, which
//! `--first SEED --seeds 1` replays.

pub mod asof_joins;
pub mod batch;
pub mod case;
pub mod joins;
pub mod rank_and_sets;
pub mod stream_joins;
pub mod text;

pub use joins::run_join_case;
pub use stream_joins::run_stream_join_case;

use anyhow::{bail, Context, Result};
use eddy_sqllogictest::EddyProcess;
use tokio_postgres::{Client, SimpleQueryMessage};

use crate::case::{insert_sql, Case, Step};

/// Flags every `eddy` the oracle starts gets (a tiny state cache, say); set once per process.
static SERVER_ARGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Sets the flags every `eddy` the oracle starts gets; only the first call counts.
pub fn set_server_args(args: Vec<String>) {
    let _ = SERVER_ARGS.set(args);
}

/// A fresh `eddy` with the oracle's flags.
pub(crate) async fn start_eddy() -> Result<EddyProcess> {
    let args = SERVER_ARGS.get().cloned().unwrap_or_default();
    EddyProcess::start_fresh_with(|config| config.extra_args.extend(args)).await
}

/// How many seeds a test runs: environment variable `var` when set to a number, else `default`.
pub fn seeds_from_env(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs seeds `1..=seeds` of every kind (windowed views, joins, stream joins); returns the
/// failed ones (`"7"`, `"7 (joins)"`), each failure's error printed.
pub async fn run_seeds(seeds: u64) -> Vec<String> {
    let mut failures = Vec::new();
    for seed in 1..=seeds {
        if let Err(error) = run_case(seed).await {
            eprintln!("{error:#}");
            failures.push(format!("{seed}"));
        }
        if let Err(error) = run_join_case(seed).await {
            eprintln!("{error:#}");
            failures.push(format!("{seed} (joins)"));
        }
        if let Err(error) = run_stream_join_case(seed).await {
            eprintln!("{error:#}");
            failures.push(format!("{seed} (stream-joins)"));
        }
    }
    failures
}

/// Runs `sql` on eddy and returns its rows as text, sorted.
pub(crate) async fn eddy_rows(client: &Client, sql: &str) -> Result<Vec<Vec<Option<String>>>> {
    let mut rows = Vec::new();
    for message in client.simple_query(sql).await.context(sql.to_string())? {
        if let SimpleQueryMessage::Row(row) = message {
            rows.push(
                (0..row.len())
                    .map(|i| row.get(i).map(text::canonical))
                    .collect(),
            );
        }
    }
    rows.sort();
    Ok(rows)
}

/// Plays the case against a fresh eddy and checks every view; the error says what differs.
pub async fn run_case(seed: u64) -> Result<()> {
    let case = Case::generate(seed);
    let mut eddy = start_eddy().await?;
    let result = play(&case, &mut eddy).await;
    if result.is_err() {
        eprintln!("--- eddy log (seed {seed}) ---\n{}", eddy.log_tail(30));
    }
    result
}

async fn play(case: &Case, eddy: &mut EddyProcess) -> Result<()> {
    let (mut client, _conn) = eddy.connect().await?;
    client.batch_execute(&case.create_tables()).await?;
    for step in &case.steps {
        match step {
            Step::Insert { table, rows } => {
                let sql = insert_sql(&case.tables[*table].name, rows);
                client.batch_execute(&sql).await.context(sql)?;
            }
            Step::CreateView(view) => {
                let sql = case.views[*view].create_sql(&case.tables, &case.views);
                client.batch_execute(&sql).await.context(sql)?;
            }
            Step::Restart => {
                drop(client);
                eddy.restart().await?;
                client = eddy.connect().await?.0;
            }
        }
    }
    let (ctx, watermarks) = batch::context(case)?;
    for view in &case.views {
        let columns = view.columns();
        let expected_sql = batch::normalized(&columns, &batch::query(view, case, &watermarks));
        let expected = batch::rows(&ctx, &expected_sql)
            .await
            .with_context(|| format!("batch query failed: {expected_sql}"))?;
        let actual = eddy_rows(
            &client,
            &batch::normalized(&columns, &format!("SELECT * FROM {}", view.name)),
        )
        .await?;
        if actual != expected {
            let missing: Vec<_> = expected
                .iter()
                .filter(|r| !actual.contains(r))
                .take(5)
                .collect();
            let extra: Vec<_> = actual
                .iter()
                .filter(|r| !expected.contains(r))
                .take(5)
                .collect();
            bail!(
                "seed {}: view {} differs from the batch query ({} rows vs {} expected)\n  view: {}\n  batch: {}\n  missing (first 5): {missing:?}\n  unexpected (first 5): {extra:?}",
                case.seed,
                view.name,
                actual.len(),
                expected.len(),
                view.create_sql(&case.tables, &case.views),
                expected_sql
            );
        }
    }
    Ok(())
}
