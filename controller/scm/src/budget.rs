//! The state shared by every client of one token: the rate-limit budget, the conditional-request
//! cache and the request counters that the controller turns into metrics.
//!
//! The controller keeps one `Arc<Budget>` per [`BudgetKey`] (API URL and a hash of the token), so
//! all sessions of all projects that use the same token draw on one budget and one cache.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, TimeZone, Utc};
use http::{HeaderMap, HeaderValue};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};

/// Calls are held back when this few requests remain in the window, unless told otherwise.
pub const DEFAULT_FLOOR: u32 = 50;

/// How many URLs the conditional-request cache remembers.
const CACHE_CAPACITY: usize = 1024;

/// Identifies one budget: the API URL and a SHA-256 prefix of the token (never the token itself).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BudgetKey {
    api_url: String,
    token_hash: String,
}

impl BudgetKey {
    pub fn new(api_url: &str, token: Option<&str>) -> BudgetKey {
        let token_hash = match token {
            Some(t) => hex::encode(&Sha256::digest(t.as_bytes())[..8]),
            None => "anonymous".to_string(),
        };
        BudgetKey { api_url: api_url.trim_end_matches('/').to_string(), token_hash }
    }
}

/// One answered (or failed) request, as handed to the observer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestRecord<'a> {
    /// The endpoint template, e.g. `GET /repos/{owner}/{repo}/pulls`.
    pub endpoint: &'a str,
    /// The HTTP status code; `None` when no answer came (timeout, connection error).
    pub code: Option<u16>,
}

impl RequestRecord<'_> {
    /// The status code as a metric label: the number, or `<error>` when there was no answer.
    pub fn code_label(&self) -> String {
        code_label(self.code)
    }
}

fn code_label(code: Option<u16>) -> String {
    code.map_or_else(|| "<error>".to_string(), |c| c.to_string())
}

/// Called after every request, e.g. to increment `aoctl_github_requests_total{endpoint,code}`.
pub type Observer = Arc<dyn Fn(&RequestRecord<'_>) + Send + Sync>;

/// A snapshot of the counters of one budget.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests by (endpoint template, status code label), 304s included.
    pub requests: BTreeMap<(String, String), u64>,
    /// Requests answered 304 from the cache; they cost no rate limit.
    pub not_modified: u64,
    /// Calls refused (or that waited) because the budget was blocked; nothing was sent for them.
    pub refused: u64,
    /// `X-RateLimit-Remaining` as last seen, counted down locally when an answer lacks it.
    pub remaining: Option<u32>,
    /// `X-RateLimit-Limit` as last seen.
    pub limit: Option<u32>,
}

#[derive(Default)]
struct State {
    remaining: Option<u32>,
    limit: Option<u32>,
    reset_at: Option<DateTime<Utc>>,
    /// Set by a secondary limit or `Retry-After`.
    blocked_until: Option<DateTime<Utc>>,
    requests: BTreeMap<(String, String), u64>,
    not_modified: u64,
    refused: u64,
}

/// What the conditional-request cache keeps of one answer: its ETag, its body and its `Link`
/// header (a 304 need not repeat it, and the pages after it are found through it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cached {
    pub etag: String,
    pub body: Bytes,
    pub link: Option<HeaderValue>,
}

struct CacheEntry {
    answer: Cached,
    used: u64,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<String, CacheEntry>,
    tick: u64,
}

/// The rate-limit budget, conditional-request cache and counters of one token.
pub struct Budget {
    floor: u32,
    max_wait: Duration,
    observer: Option<Observer>,
    state: Mutex<State>,
    cache: Mutex<Cache>,
}

impl fmt::Debug for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state.lock();
        f.debug_struct("Budget")
            .field("floor", &self.floor)
            .field("max_wait", &self.max_wait)
            .field("remaining", &st.remaining)
            .field("reset_at", &st.reset_at)
            .field("blocked_until", &st.blocked_until)
            .finish_non_exhaustive()
    }
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::new()
    }
}

impl Budget {
    /// A budget with the default floor that fails fast instead of waiting.
    pub fn new() -> Budget {
        Budget {
            floor: DEFAULT_FLOOR,
            max_wait: Duration::ZERO,
            observer: None,
            state: Mutex::default(),
            cache: Mutex::default(),
        }
    }

    /// Holds calls back once `remaining <= floor` until the window resets.
    pub fn with_floor(mut self, floor: u32) -> Budget {
        self.floor = floor;
        self
    }

    /// Lets a blocked call wait up to `max_wait` for the block to end instead of failing at once.
    pub fn with_max_wait(mut self, max_wait: Duration) -> Budget {
        self.max_wait = max_wait;
        self
    }

    /// Calls `observer` after every request.
    pub fn with_observer(mut self, observer: Observer) -> Budget {
        self.observer = Some(observer);
        self
    }

    /// `X-RateLimit-Remaining` as last seen; `None` before the first answer or after a reset.
    pub fn remaining(&self) -> Option<u32> {
        self.state.lock().remaining
    }

    /// Until when calls are held back, if they are now.
    pub fn blocked_until(&self) -> Option<DateTime<Utc>> {
        self.block(&mut self.state.lock(), Utc::now())
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let st = self.state.lock();
        Stats {
            requests: st.requests.clone(),
            not_modified: st.not_modified,
            refused: st.refused,
            remaining: st.remaining,
            limit: st.limit,
        }
    }

    /// Until when calls must wait, clearing blocks that have ended.
    fn block(&self, st: &mut State, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if st.blocked_until.is_some_and(|t| t <= now) {
            st.blocked_until = None;
        }
        if st.reset_at.is_some_and(|t| t <= now) {
            // A new window has begun; the next answer tells how much it holds.
            st.remaining = None;
            st.reset_at = None;
        }
        let floor_block = match (st.remaining, st.reset_at) {
            (Some(remaining), Some(reset)) if remaining <= self.floor => Some(reset),
            _ => None,
        };
        st.blocked_until.max(floor_block)
    }

    /// Waits for the budget to allow a call; when the wait would be longer than allowed, the time
    /// calls may resume.
    pub async fn admit(&self) -> Result<(), DateTime<Utc>> {
        loop {
            let now = Utc::now();
            let until = {
                let mut st = self.state.lock();
                let until = self.block(&mut st, now);
                if until.is_some() {
                    st.refused += 1;
                }
                until
            };
            let Some(until) = until else { return Ok(()) };
            let wait = (until - now).to_std().unwrap_or(Duration::ZERO);
            if wait > self.max_wait {
                return Err(until);
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// Holds every call back until `until`.
    pub fn block_until(&self, until: DateTime<Utc>) {
        let mut st = self.state.lock();
        st.blocked_until = st.blocked_until.max(Some(until));
    }

    /// Records one request and the rate-limit headers of its answer.
    pub fn observe(&self, endpoint: &'static str, code: Option<u16>, headers: Option<&HeaderMap>) {
        {
            let mut st = self.state.lock();
            *st.requests.entry((endpoint.to_string(), code_label(code))).or_default() += 1;
            if code == Some(304) {
                st.not_modified += 1;
            }
            let remaining = headers.and_then(|h| limit_header(h, "remaining"));
            match remaining {
                Some(r) => st.remaining = Some(r.min(u32::MAX as u64) as u32),
                // Without the header, an answer other than 304 is assumed to cost one request.
                None if code.is_some() && code != Some(304) => st.remaining = st.remaining.map(|r| r.saturating_sub(1)),
                None => {}
            }
            if let Some(limit) = headers.and_then(|h| limit_header(h, "limit")) {
                st.limit = Some(limit.min(u32::MAX as u64) as u32);
            }
            if let Some(reset) = headers.and_then(|h| limit_header(h, "reset")) {
                st.reset_at = epoch(reset);
            }
        }
        if let Some(observer) = &self.observer {
            observer(&RequestRecord { endpoint, code });
        }
    }

    /// The answer last seen for `url`.
    pub fn cached(&self, url: &str) -> Option<Cached> {
        let mut cache = self.cache.lock();
        cache.tick += 1;
        let tick = cache.tick;
        let entry = cache.entries.get_mut(url)?;
        entry.used = tick;
        Some(entry.answer.clone())
    }

    /// Remembers the answer of `url`, forgetting the least recently used URL when full.
    pub fn store(&self, url: &str, answer: Cached) {
        let mut cache = self.cache.lock();
        cache.tick += 1;
        let used = cache.tick;
        if cache.entries.len() >= CACHE_CAPACITY && !cache.entries.contains_key(url) {
            if let Some(oldest) = cache.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone()) {
                cache.entries.remove(&oldest);
            }
        }
        cache.entries.insert(url.to_string(), CacheEntry { answer, used });
    }
}

/// A rate-limit header as GitHub (`X-RateLimit-Remaining`), GitLab (`RateLimit-Remaining`) or
/// Linear (`X-RateLimit-Requests-Remaining`) spells it; `field` is `limit`, `remaining` or `reset`
/// (epoch seconds; Linear's milliseconds are turned into seconds).
fn limit_header(headers: &HeaderMap, field: &str) -> Option<u64> {
    let value = header_u64(headers, &format!("x-ratelimit-{field}"))
        .or_else(|| header_u64(headers, &format!("ratelimit-{field}")))
        .or_else(|| header_u64(headers, &format!("x-ratelimit-requests-{field}")))?;
    // No epoch in seconds reaches 10^11 before the year 5138; a larger reset is in milliseconds.
    Some(if field == "reset" && value >= 100_000_000_000 { value / 1000 } else { value })
}

/// A header's value as a number.
pub fn header_u64(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

/// Epoch seconds as a time.
pub fn epoch(seconds: u64) -> Option<DateTime<Utc>> {
    Utc.timestamp_opt(i64::try_from(seconds).ok()?, 0).single()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn key_hides_the_token() {
        let key = BudgetKey::new("https://api.github.com/", Some("ghp_secret"));
        assert_eq!(key.api_url, "https://api.github.com");
        assert!(!format!("{key:?}").contains("ghp_secret"));
        assert_eq!(key, BudgetKey::new("https://api.github.com", Some("ghp_secret")));
        assert_ne!(key, BudgetKey::new("https://api.github.com", Some("other")));
    }

    #[tokio::test]
    async fn floor_blocks_until_reset() {
        let budget = Budget::new().with_floor(10);
        let reset = Utc::now().timestamp() + 3600;
        budget.observe(
            "GET /x",
            Some(200),
            Some(&headers(&[("x-ratelimit-remaining", "10"), ("x-ratelimit-reset", &reset.to_string())])),
        );
        let err = budget.admit().await.unwrap_err();
        assert_eq!(err, epoch(reset as u64).unwrap());
        assert_eq!(budget.stats().refused, 1);
    }

    #[tokio::test]
    async fn gitlab_headers_count_too() {
        let budget = Budget::new().with_floor(5);
        let reset = Utc::now().timestamp() + 60;
        budget.observe(
            "GET /projects/:id",
            Some(200),
            Some(&headers(&[
                ("ratelimit-limit", "2000"),
                ("ratelimit-remaining", "5"),
                ("ratelimit-reset", &reset.to_string()),
            ])),
        );
        assert_eq!((budget.remaining(), budget.stats().limit), (Some(5), Some(2000)));
        assert_eq!(budget.admit().await.unwrap_err(), epoch(reset as u64).unwrap());
    }

    #[tokio::test]
    async fn linear_headers_count_too_with_a_reset_in_milliseconds() {
        let budget = Budget::new().with_floor(5);
        let reset = Utc::now().timestamp() + 60;
        budget.observe(
            "POST /graphql issues",
            Some(200),
            Some(&headers(&[
                ("x-ratelimit-requests-limit", "1500"),
                ("x-ratelimit-requests-remaining", "3"),
                ("x-ratelimit-requests-reset", &(reset * 1000).to_string()),
            ])),
        );
        assert_eq!((budget.remaining(), budget.stats().limit), (Some(3), Some(1500)));
        assert_eq!(budget.admit().await.unwrap_err(), epoch(reset as u64).unwrap());
    }

    #[tokio::test]
    async fn past_reset_opens_a_new_window() {
        let budget = Budget::new();
        let reset = Utc::now().timestamp() - 1;
        budget.observe(
            "GET /x",
            Some(200),
            Some(&headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", &reset.to_string())])),
        );
        budget.admit().await.unwrap();
        assert_eq!(budget.remaining(), None);
    }

    #[tokio::test]
    async fn short_blocks_are_waited_out() {
        let budget = Budget::new().with_max_wait(Duration::from_secs(5));
        budget.block_until(Utc::now() + chrono::Duration::milliseconds(50));
        budget.admit().await.unwrap();
        assert_eq!(budget.blocked_until(), None);
    }

    #[test]
    fn missing_header_counts_down_except_for_304() {
        let budget = Budget::new();
        budget.observe("GET /x", Some(200), Some(&headers(&[("x-ratelimit-remaining", "100")])));
        budget.observe("GET /x", Some(304), None);
        assert_eq!(budget.remaining(), Some(100));
        budget.observe("GET /x", Some(200), None);
        assert_eq!(budget.remaining(), Some(99));
        budget.observe("GET /x", None, None);
        let stats = budget.stats();
        assert_eq!(stats.not_modified, 1);
        assert_eq!(stats.requests[&("GET /x".to_string(), "200".to_string())], 2);
        assert_eq!(stats.requests[&("GET /x".to_string(), "<error>".to_string())], 1);
    }

    fn answer(etag: &str) -> Cached {
        Cached { etag: etag.to_string(), body: Bytes::new(), link: None }
    }

    #[test]
    fn cache_forgets_the_least_recently_used() {
        let budget = Budget::new();
        for i in 0..CACHE_CAPACITY {
            budget.store(&format!("/u/{i}"), answer(&format!("\"{i}\"")));
        }
        assert!(budget.cached("/u/0").is_some());
        budget.store("/u/new", answer("\"n\""));
        assert!(budget.cached("/u/0").is_some());
        assert!(budget.cached("/u/1").is_none());
        assert_eq!(budget.cached("/u/new").unwrap().etag, "\"n\"");
    }
}
