//! Failed logins are answered late, later the more often a client address failed recently, so
//! that guessing passwords is slow. A login that succeeds clears its address's record.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The delay of a first failure; each further recent failure doubles it, up to [`MAX_DELAY`].
const FIRST_DELAY: Duration = Duration::from_millis(500);
const MAX_DELAY: Duration = Duration::from_secs(8);
/// Failures older than this are forgotten.
const MEMORY: Duration = Duration::from_secs(300);
/// Addresses remembered at most (the oldest records go first), so memory stays bounded.
const MAX_ADDRESSES: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

#[derive(Debug, Default)]
pub struct LoginThrottle {
    failures: Mutex<HashMap<IpAddr, Failures>>,
}

impl LoginThrottle {
    /// Records a failed login from `address` and returns how long to wait before answering.
    pub fn failed(&self, address: IpAddr) -> Duration {
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() >= MAX_ADDRESSES && !failures.contains_key(&address) {
            failures.retain(|_, f| now.duration_since(f.last) < MEMORY);
            if failures.len() >= MAX_ADDRESSES {
                let oldest = failures.iter().min_by_key(|(_, f)| f.last).map(|(a, _)| *a);
                if let Some(oldest) = oldest {
                    failures.remove(&oldest);
                }
            }
        }
        let entry = failures.entry(address).or_insert(Failures {
            count: 0,
            last: now,
        });
        if now.duration_since(entry.last) >= MEMORY {
            entry.count = 0;
        }
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
        delay_after(entry.count)
    }

    /// A successful login clears the address's failures.
    pub fn succeeded(&self, address: IpAddr) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&address);
    }
}

fn delay_after(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_per_address_and_reset_on_success() {
        let throttle = LoginThrottle::default();
        let attacker: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        let delays: Vec<Duration> = (0..6).map(|_| throttle.failed(attacker)).collect();
        assert_eq!(delays[0], FIRST_DELAY);
        assert_eq!(delays[1], FIRST_DELAY * 2);
        assert_eq!(delays[5], MAX_DELAY);
        assert_eq!(throttle.failed(other), FIRST_DELAY);
        throttle.succeeded(attacker);
        assert_eq!(throttle.failed(attacker), FIRST_DELAY);
    }
}
