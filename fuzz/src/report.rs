//! What a fuzz run saw.

use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Default)]
pub struct Report {
    /// What was fuzzed ("frames", "sql", "payloads").
    pub name: String,
    pub seed: u64,
    /// Cases run (frames sent, statements run, payloads decoded).
    pub cases: u64,
    /// How often each SQLSTATE came back.
    pub codes: BTreeMap<String, u64>,
    /// Internal errors (XX000) by message (numbers blanked), with the first case that gave it.
    pub internal: BTreeMap<String, (u64, String)>,
    /// Things that must never happen (a dead server, a panic, a freeze), each with how to
    /// replay it.
    pub failures: Vec<String>,
    /// Server deaths, and statements that held up another connection's `SELECT 1` over a
    /// second (both also among the failures), and the `SELECT 1`s that measured it.
    pub deaths: u64,
    pub freezes: u64,
    pub probes: u64,
    /// How long the run took.
    pub elapsed: std::time::Duration,
}

impl Report {
    pub fn new(name: &str, seed: u64) -> Self {
        Self {
            name: name.to_string(),
            seed,
            ..Self::default()
        }
    }

    /// Counts a SQLSTATE; an XX000 is also kept with its message and the case.
    pub fn code(&mut self, code: &str, message: &str, case: impl FnOnce() -> String) {
        *self.codes.entry(code.to_string()).or_default() += 1;
        if code == "XX000" {
            let key: String = message
                .chars()
                .map(|c| if c.is_ascii_digit() { '#' } else { c })
                .take(200)
                .collect();
            let entry = self.internal.entry(key).or_insert_with(|| (0, case()));
            entry.0 += 1;
        }
    }

    pub fn fail(&mut self, what: String) {
        self.failures.push(what);
    }

    /// Whether nothing that must not happen happened (no failure, no internal error).
    pub fn clean(&self) -> bool {
        self.failures.is_empty() && self.internal.is_empty()
    }

    pub fn merge(&mut self, other: Report) {
        self.cases += other.cases;
        for (code, n) in other.codes {
            *self.codes.entry(code).or_default() += n;
        }
        for (message, (n, case)) in other.internal {
            let entry = self.internal.entry(message).or_insert((0, case));
            entry.0 += n;
        }
        self.failures.extend(other.failures);
        self.deaths += other.deaths;
        self.freezes += other.freezes;
        self.probes += other.probes;
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} cases (seed {}) in {:.0} s, {} failures ({} deaths, {} freezes over {:?} \
             in {} probes), {} distinct internal errors",
            self.name,
            self.cases,
            self.seed,
            self.elapsed.as_secs_f64(),
            self.failures.len(),
            self.deaths,
            self.freezes,
            crate::freeze::FREEZE,
            self.probes,
            self.internal.len()
        )?;
        let codes: Vec<String> = self.codes.iter().map(|(c, n)| format!("{c}×{n}")).collect();
        writeln!(f, "  SQLSTATEs: {}", codes.join(" "))?;
        for (message, (n, case)) in &self.internal {
            writeln!(f, "  XX000 ×{n}: {message}\n    first from: {case}")?;
        }
        for failure in &self.failures {
            writeln!(f, "  FAILURE: {failure}")?;
        }
        Ok(())
    }
}
