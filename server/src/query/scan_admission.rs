//! Admission of full scans: how many unnarrowed scans read the store at once.
//!
//! A scan of a whole large view keeps a core busy for seconds to minutes. Run side by side
//! (each chunk on a blocking thread of its own), such scans take every core from the lookups
//! and the engine's commits: on two cores, with 64 clients mixing lookups and full scans of
//! 10 M rows, a 1 ms lookup took 730 ms at the median. So a full scan (every row of a table:
//! no key or index range, no LIMIT) reads each chunk under a permit, given back between
//! chunks: full scans take turns, a scan whose client is slow to read holds no turn, and a
//! scan waiting for its turn queues (bounded by its statement_timeout, which cancels the wait)
//! rather than fails. Narrowed reads never wait.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The server's full-scan permits.
#[derive(Debug)]
pub struct ScanAdmission {
    permits: Arc<Semaphore>,
    limit: std::sync::Mutex<usize>,
}

impl Default for ScanAdmission {
    fn default() -> Self {
        Self::new(default_max_concurrent_scans())
    }
}

/// One full scan for every four cores, at least one.
pub fn default_max_concurrent_scans() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / 4).max(1)
}

impl ScanAdmission {
    pub fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        Self {
            permits: Arc::new(Semaphore::new(limit)),
            limit: std::sync::Mutex::new(limit),
        }
    }

    /// Changes how many full scans read at once (at least one); scans running keep reading.
    pub fn set_limit(&self, limit: usize) {
        let limit = limit.max(1);
        let mut current = self.limit.lock().unwrap_or_else(|e| e.into_inner());
        if limit > *current {
            self.permits.add_permits(limit - *current);
        } else {
            // Permits held now are forgotten as they come back.
            let mut owed = *current - limit;
            owed -= self.permits.forget_permits(owed);
            if owed > 0 {
                let permits = self.permits.clone();
                tokio::spawn(async move {
                    if let Ok(permit) = permits.acquire_many_owned(owed as u32).await {
                        permit.forget();
                    }
                });
            }
        }
        *current = limit;
    }

    #[cfg(test)]
    pub fn limit(&self) -> usize {
        *self.limit.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a full scan's turn; the scan reads while it holds the permit. (`None` only
    /// if the semaphore were closed, which nothing does: the scan then reads unadmitted.)
    pub async fn admit(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.clone().acquire_owned().await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_scan_waits_for_the_one_before_it() {
        let admission = ScanAdmission::new(1);
        let first = admission.admit().await;
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), admission.admit());
        assert!(waiting.await.is_err(), "a second scan was admitted");
        drop(first);
        let _second = admission.admit().await;
        admission.set_limit(2);
        let _third = admission.admit().await;
        assert_eq!(admission.limit(), 2);
    }
}
