//! Answers a client keeps for a while so that asking again costs no request: who may write to a
//! repository or project changes rarely, and is asked per author.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Answers by key, each believed for `keep_for`; at most `max` are kept (past it the oldest is
/// forgotten). Shared between clones of a client through an `Arc`.
#[derive(Debug)]
pub struct Kept<K, V> {
    keep_for: Duration,
    max: usize,
    answers: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash + Clone, V: Clone> Kept<K, V> {
    pub fn new(keep_for: Duration, max: usize) -> Kept<K, V> {
        Kept { keep_for, max: max.max(1), answers: Mutex::new(HashMap::new()) }
    }

    /// The answer kept for `key` if it is still believed at `now`.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        let answers = self.answers.lock();
        answers.get(key).filter(|(_, at)| now.duration_since(*at) < self.keep_for).map(|(v, _)| v.clone())
    }

    /// Keeps `value` for `key`, read at `now`.
    pub fn put(&self, key: K, value: V, now: Instant) {
        let mut answers = self.answers.lock();
        answers.retain(|_, (_, at)| now.duration_since(*at) < self.keep_for);
        if answers.len() >= self.max && !answers.contains_key(&key) {
            if let Some(oldest) = answers.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| k.clone()) {
                answers.remove(&oldest);
            }
        }
        answers.insert(key, (value, now));
    }

    /// How many answers are kept.
    pub fn len(&self) -> usize {
        self.answers.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_kept_for_a_while_and_bounded() {
        let keep_for = Duration::from_secs(600);
        let kept: Kept<(String, u64), Option<u64>> = Kept::new(keep_for, 10);
        let t0 = Instant::now();
        kept.put(("p".into(), 1), Some(30), t0);
        kept.put(("p".into(), 2), None, t0);
        assert_eq!(kept.get(&("p".into(), 1), t0), Some(Some(30)));
        assert_eq!(kept.get(&("p".into(), 2), t0), Some(None), "an empty answer is kept too");
        assert_eq!(kept.get(&("q".into(), 1), t0), None);
        assert_eq!(kept.get(&("p".into(), 1), t0 + keep_for), None, "forgotten after a while");
        for u in 0..15 {
            kept.put(("p".into(), u + 10), Some(10), t0 + Duration::from_millis(u));
        }
        assert_eq!(kept.len(), 10);
        assert_eq!(kept.get(&("p".into(), 24), t0 + Duration::from_secs(1)), Some(Some(10)), "the newest stay");
        assert_eq!(kept.get(&("p".into(), 10), t0 + Duration::from_secs(1)), None, "the oldest went");
    }
}
