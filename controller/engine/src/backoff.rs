//! Per-key exponential backoff with jitter for keys whose reconcile failed.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use rand::Rng;

/// The jitter as a fraction of the delay: a delay `d` becomes a random value in `[d * 0.9, d * 1.1]`.
pub(crate) const JITTER: f64 = 0.1;

/// Counts consecutive failures per key and turns them into delays.
#[derive(Debug)]
pub(crate) struct Backoff {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// Creates a backoff that starts at `base` and doubles up to `max` (before jitter).
    pub(crate) fn new(base: Duration, max: Duration) -> Backoff {
        Backoff { base, max, failures: Mutex::new(HashMap::new()) }
    }

    /// Counts a failure of `key` and returns the jittered delay before its next attempt.
    pub(crate) fn next_delay(&self, key: &str) -> Duration {
        let previous = self.record_failure(key);
        jittered(delay(self.base, self.max, previous), rand::rng().random_range(-JITTER..=JITTER))
    }

    /// Counts a failure of `key` and returns the number of failures before this one.
    pub(crate) fn record_failure(&self, key: &str) -> u32 {
        let mut failures = self.failures.lock();
        let count = failures.entry(key.to_owned()).or_insert(0);
        let previous = *count;
        *count = count.saturating_add(1);
        previous
    }

    /// Forgets the failures of `key`, after a success or when its object is gone.
    pub(crate) fn reset(&self, key: &str) {
        self.failures.lock().remove(key);
    }

    /// Returns the number of consecutive failures of `key`.
    #[cfg(test)]
    pub(crate) fn failures(&self, key: &str) -> u32 {
        self.failures.lock().get(key).copied().unwrap_or(0)
    }
}

/// Returns `min(base * 2^failures, max)`, without overflowing.
pub(crate) fn delay(base: Duration, max: Duration, failures: u32) -> Duration {
    let factor = 1u32.checked_shl(failures).unwrap_or(u32::MAX);
    base.checked_mul(factor).map_or(max, |d| d.min(max))
}

/// Scales `delay` by `1 + offset`, where `offset` lies within `±JITTER`.
fn jittered(delay: Duration, offset: f64) -> Duration {
    delay.mul_f64(1.0 + offset.clamp(-JITTER, JITTER))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_millis(500);
    const MAX: Duration = Duration::from_secs(10);

    #[test]
    fn delay_doubles_per_failure_and_is_capped() {
        let delays: Vec<Duration> = (0..8).map(|n| delay(BASE, MAX, n)).collect();
        let millis: Vec<u128> = delays.iter().map(Duration::as_millis).collect();
        assert_eq!(millis, [500, 1000, 2000, 4000, 8000, 10000, 10000, 10000]);
        assert_eq!(delay(BASE, MAX, 40), MAX);
        assert_eq!(delay(Duration::from_secs(u64::MAX / 2), MAX, 3), MAX);
    }

    #[test]
    fn jitter_stays_within_bounds_and_varies() {
        let backoff = Backoff::new(BASE, MAX);
        let mut seen = Vec::new();
        for _ in 0..200 {
            backoff.reset("a");
            for _ in 0..3 {
                backoff.next_delay("a");
            }
            // The fourth failure has a nominal delay of 4 s.
            let d = backoff.next_delay("a");
            assert!(d >= Duration::from_millis(3600) && d <= Duration::from_millis(4400), "{d:?} out of bounds");
            seen.push(d);
        }
        seen.sort_unstable();
        seen.dedup();
        assert!(seen.len() > 10, "jitter produced only {} distinct delays", seen.len());
    }

    #[test]
    fn failures_are_counted_per_key_and_reset() {
        let backoff = Backoff::new(BASE, MAX);
        for _ in 0..6 {
            backoff.next_delay("a");
        }
        let capped = backoff.next_delay("a");
        assert!(capped >= MAX.mul_f64(0.9) && capped <= MAX.mul_f64(1.1));
        let first_of_b = backoff.next_delay("b");
        assert!(first_of_b >= BASE.mul_f64(0.9) && first_of_b <= BASE.mul_f64(1.1));
        assert_eq!(backoff.failures("a"), 7);
        backoff.reset("a");
        assert_eq!(backoff.failures("a"), 0);
        let after_reset = backoff.next_delay("a");
        assert!(after_reset <= BASE.mul_f64(1.1));
        assert_eq!(backoff.failures("b"), 1);
    }
}
