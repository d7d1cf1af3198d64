//! The node's worker threads (`--workers`): a view's keyed operators run as one instance per
//! worker, each owning a range of the 256 key partitions (see [`crate::exchange`]).
//!
//! Instance `i` always runs on worker thread `i` (modulo the pool's size): its state is
//! allocated, read and freed on one thread, which keeps the allocator's thread caches warm
//! and its frees local (freeing another thread's memory cost a sixth of a join's CPU).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Stack of each worker: expression evaluation recurses once per level of a deep expression,
/// as on the engine thread.
const WORKER_STACK_BYTES: usize = 16 << 20;

pub struct Workers {
    count: AtomicUsize,
    pool: OnceLock<Result<rayon::ThreadPool, String>>,
}

impl Default for Workers {
    fn default() -> Self {
        Self::new(1)
    }
}

impl Workers {
    pub fn new(count: usize) -> Self {
        Self {
            count: AtomicUsize::new(count.max(1)),
            pool: OnceLock::new(),
        }
    }

    /// Sets how many workers new views run on (before the first view starts: the pool's
    /// threads are started once).
    pub fn set(&self, count: usize) {
        self.count.store(count.max(1), Ordering::Relaxed);
    }

    /// How many instances a new view's keyed operators run as.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    fn pool(&self) -> crate::Result<&rayon::ThreadPool> {
        let pool = self.pool.get_or_init(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(self.count())
                .thread_name(|i| format!("eddy-worker-{i}"))
                .stack_size(WORKER_STACK_BYTES)
                .build()
                .map_err(|e| e.to_string())
        });
        pool.as_ref().map_err(|e| {
            crate::ExecError::DataFusion(datafusion::error::DataFusionError::Execution(format!(
                "cannot start the worker threads: {e}"
            )))
        })
    }

    /// Runs `job(i)` for every instance `i` in `0..instances`, each on its own worker thread
    /// (the same thread every time), and returns the results in instance order. A single
    /// instance runs on the calling thread.
    pub fn run_each<R: Send>(
        &self,
        instances: usize,
        job: impl Fn(usize) -> R + Sync,
    ) -> crate::Result<Vec<R>> {
        if instances <= 1 {
            return Ok((0..instances).map(&job).collect());
        }
        let per_thread = self.pool()?.broadcast(|context| {
            (context.index()..instances)
                .step_by(context.num_threads())
                .map(|i| (i, job(i)))
                .collect::<Vec<_>>()
        });
        let mut results: Vec<(usize, R)> = per_thread.into_iter().flatten().collect();
        results.sort_by_key(|(i, _)| *i);
        Ok(results.into_iter().map(|(_, r)| r).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_instance_runs_once_and_always_on_the_same_thread() {
        let workers = Workers::new(2);
        let threads = |round: usize| {
            workers
                .run_each(5, |i| (i * round, std::thread::current().id()))
                .unwrap()
        };
        let (first, second) = (threads(1), threads(2));
        assert_eq!(
            first.iter().map(|r| r.0).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 4]
        );
        assert_eq!(
            second.iter().map(|r| r.0).collect::<Vec<_>>(),
            vec![0, 2, 4, 6, 8]
        );
        for (a, b) in first.iter().zip(&second) {
            assert_eq!(a.1, b.1, "an instance moved to another thread");
        }
        assert_ne!(first[0].1, first[1].1, "two instances shared one thread");
    }
}
