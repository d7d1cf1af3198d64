//! The bounded fuzz run of the test command: a few thousand cases of each fuzzer, seeded
//! (`EDDY_FUZZ_SEED` picks another seed; a failure prints the seed and case to replay with
//! `fuzz-soak --seed`). About a minute on a debug build.

use eddy_fuzz::{run_all, Budget};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzed_frames_sql_and_payloads_never_break_the_server() {
    let seed = std::env::var("EDDY_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_201);
    let budget = Budget {
        frames: 4_000,
        sql: 2_000,
        payloads: 5_000,
    };
    let reports = run_all(seed, budget).await.expect("run the fuzzers");
    let mut problems = String::new();
    for report in &reports {
        println!("{report}");
        if !report.clean() {
            problems.push_str(&report.to_string());
        }
    }
    assert!(problems.is_empty(), "seed {seed}:\n{problems}");
}
