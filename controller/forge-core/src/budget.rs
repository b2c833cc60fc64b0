//! The state shared by every client of one token: the rate-limit windows (one per resource:
//! GitHub's `core` REST and `graphql` windows are separate), blocks after a secondary limit or a
//! `Retry-After`, the conditional-request cache, the request counters, and what each project
//! spent in the last hour — from which the pace of polling is derived when the token runs low.
//!
//! The controller keeps one `Arc<Budget>` per [`BudgetKey`] (API URL and a hash of the token), so
//! all sessions of all projects that use the same token draw on one budget and one cache.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, TimeZone, Utc};
use http::{HeaderMap, HeaderValue};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};

/// Calls are held back when this few requests remain in a window, unless told otherwise.
pub const DEFAULT_FLOOR: u32 = 50;

/// The resource of a request whose answer names none (REST).
pub const CORE: &str = "core";

/// How many URLs the conditional-request cache remembers.
const CACHE_CAPACITY: usize = 1024;

/// The spend of the last this many minutes sets the pace.
const PACE_WINDOW_MINUTES: i64 = 10;

/// Polling is never slowed more than this many times.
pub const MAX_PACE: f64 = 30.0;

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
    /// Who made it: a project's name, or empty.
    pub label: &'a str,
    /// What it cost against the rate limit: 0 for a 304, the points of a GraphQL query.
    pub counted: u64,
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

/// One rate-limit window as last seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// Requests (or points) left; counted down locally when an answer lacks the header.
    pub remaining: Option<u32>,
    pub limit: Option<u32>,
    /// When the window starts again.
    pub reset_at: Option<DateTime<Utc>>,
}

/// A snapshot of the counters of one budget.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests by (endpoint template, status code label), 304s included.
    pub requests: BTreeMap<(String, String), u64>,
    /// Requests answered 304 from the cache; they cost no rate limit.
    pub not_modified: u64,
    /// Calls refused (or that waited) because the budget was blocked; nothing was sent for them.
    pub refused: u64,
    /// The `core` window's remaining as last seen.
    pub remaining: Option<u32>,
    /// The `core` window's limit as last seen.
    pub limit: Option<u32>,
    /// Every window, by resource.
    pub windows: BTreeMap<String, Window>,
    /// What was counted against the limits in the last hour, in all.
    pub spent_last_hour: u64,
}

/// Counted requests per minute over the last hour.
#[derive(Default)]
struct Spend {
    minutes: VecDeque<(i64, u64)>,
}

impl Spend {
    fn add(&mut self, minute: i64, n: u64) {
        match self.minutes.back_mut() {
            Some((m, c)) if *m == minute => *c += n,
            _ => self.minutes.push_back((minute, n)),
        }
        while self.minutes.front().is_some_and(|(m, _)| *m <= minute - 60) {
            self.minutes.pop_front();
        }
    }

    /// What was counted in the `minutes` minutes before `now_minute`, this one included.
    fn since(&self, now_minute: i64, minutes: i64) -> u64 {
        self.minutes.iter().filter(|(m, _)| *m > now_minute - minutes).map(|(_, c)| c).sum()
    }
}

#[derive(Default)]
struct State {
    windows: BTreeMap<String, Window>,
    /// Set by a secondary limit or `Retry-After`; holds back every resource.
    blocked_until: Option<DateTime<Utc>>,
    requests: BTreeMap<(String, String), u64>,
    not_modified: u64,
    refused: u64,
    /// By label (a project's name), and in all under the empty label.
    spend: HashMap<String, Spend>,
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
            .field("windows", &st.windows)
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

    /// The lowest `remaining` of any window as last seen; `None` before the first answer.
    pub fn remaining(&self) -> Option<u32> {
        self.state.lock().windows.values().filter_map(|w| w.remaining).min()
    }

    /// One resource's window as last seen.
    pub fn window(&self, resource: &str) -> Window {
        self.state.lock().windows.get(resource).copied().unwrap_or_default()
    }

    /// Until when calls are held back, if they are now.
    pub fn blocked_until(&self) -> Option<DateTime<Utc>> {
        let mut st = self.state.lock();
        let resources: Vec<String> = st.windows.keys().cloned().collect();
        let now = Utc::now();
        resources.iter().filter_map(|r| self.block(&mut st, r, now)).max().or(st.blocked_until)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let st = self.state.lock();
        let core = st.windows.get(CORE).copied().unwrap_or_default();
        Stats {
            requests: st.requests.clone(),
            not_modified: st.not_modified,
            refused: st.refused,
            remaining: core.remaining,
            limit: core.limit,
            windows: st.windows.clone(),
            spent_last_hour: st.spend.get("").map_or(0, |s| s.since(minute(Utc::now()), 60)),
        }
    }

    /// What `label` (a project's name; empty for everyone) had counted against the limits in
    /// the last hour.
    pub fn spent_last_hour(&self, label: &str) -> u64 {
        self.state.lock().spend.get(label).map_or(0, |s| s.since(minute(Utc::now()), 60))
    }

    /// Until when calls to `resource` must wait, clearing blocks and windows that have ended.
    fn block(&self, st: &mut State, resource: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if st.blocked_until.is_some_and(|t| t <= now) {
            st.blocked_until = None;
        }
        let w = st.windows.entry(resource.to_string()).or_default();
        if w.reset_at.is_some_and(|t| t <= now) {
            // A new window has begun; the next answer tells how much it holds.
            w.remaining = None;
            w.reset_at = None;
        }
        let floor_block = match (w.remaining, w.reset_at) {
            (Some(remaining), Some(reset)) if remaining <= self.floor => Some(reset),
            _ => None,
        };
        st.blocked_until.max(floor_block)
    }

    /// Waits for the budget to allow a call to `resource`; when the wait would be longer than
    /// allowed, the time calls may resume.
    pub async fn admit(&self, resource: &str) -> Result<(), DateTime<Utc>> {
        loop {
            let now = Utc::now();
            let until = {
                let mut st = self.state.lock();
                let until = self.block(&mut st, resource, now);
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

    /// Records one request and the rate-limit headers of its answer: `counted` is what it cost
    /// (0 for a 304; a GraphQL query's points), charged to `label` and to the window the answer
    /// names (`X-RateLimit-Resource`), else to `resource`.
    pub fn observe(
        &self,
        endpoint: &'static str,
        code: Option<u16>,
        headers: Option<&HeaderMap>,
        resource: &str,
        label: &str,
        counted: u64,
    ) {
        {
            let mut st = self.state.lock();
            *st.requests.entry((endpoint.to_string(), code_label(code))).or_default() += 1;
            if code == Some(304) {
                st.not_modified += 1;
            }
            let resource = headers
                .and_then(|h| h.get("x-ratelimit-resource"))
                .and_then(|v| v.to_str().ok())
                .map_or_else(|| resource.to_string(), str::to_string);
            let w = st.windows.entry(resource).or_default();
            match headers.and_then(|h| limit_header(h, "remaining")) {
                Some(r) => w.remaining = Some(r.min(u32::MAX as u64) as u32),
                None => w.remaining = w.remaining.map(|r| r.saturating_sub(counted.min(u32::MAX as u64) as u32)),
            }
            if let Some(limit) = headers.and_then(|h| limit_header(h, "limit")) {
                w.limit = Some(limit.min(u32::MAX as u64) as u32);
            }
            if let Some(reset) = headers.and_then(|h| limit_header(h, "reset")) {
                w.reset_at = epoch(reset);
            }
            if counted > 0 {
                let m = minute(Utc::now());
                st.spend.entry(String::new()).or_default().add(m, counted);
                if !label.is_empty() {
                    st.spend.entry(label.to_string()).or_default().add(m, counted);
                }
            }
        }
        if let Some(observer) = &self.observer {
            observer(&RequestRecord { endpoint, code, label, counted });
        }
    }

    /// How many times slower than usual polling should go so that, at the spend of the last ten
    /// minutes, the window of `resource` lasts until its reset: 1.0 while it does (or nothing is
    /// known), at most [`MAX_PACE`].
    pub fn pace(&self, resource: &str) -> f64 {
        let now = Utc::now();
        let st = self.state.lock();
        let Some(w) = st.windows.get(resource) else { return 1.0 };
        let (Some(remaining), Some(reset)) = (w.remaining, w.reset_at) else { return 1.0 };
        let minutes_left = ((reset - now).num_seconds().max(0) as f64) / 60.0;
        let per_minute = st.spend.get("").map_or(0, |s| s.since(minute(now), PACE_WINDOW_MINUTES)) as f64
            / PACE_WINDOW_MINUTES as f64;
        let usable = f64::from(remaining.saturating_sub(self.reserve(w)));
        let projected = per_minute * minutes_left;
        if projected <= usable {
            return 1.0;
        }
        if usable <= 0.0 {
            return MAX_PACE;
        }
        (projected / usable).clamp(1.0, MAX_PACE)
    }

    /// Whether polls of `resource` may go now: the window holds more than its reserve (a tenth
    /// of the limit, at least the floor), which is kept for reads a webhook asked for and for
    /// writes.
    pub fn polls_allowed(&self, resource: &str) -> bool {
        let st = self.state.lock();
        let Some(w) = st.windows.get(resource) else { return true };
        if w.reset_at.is_some_and(|t| t <= Utc::now()) {
            return true;
        }
        w.remaining.is_none_or(|r| r > self.reserve(w))
    }

    fn reserve(&self, w: &Window) -> u32 {
        w.limit.map_or(self.floor, |l| (l / 10).max(self.floor))
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

/// Minutes since the epoch.
fn minute(t: DateTime<Utc>) -> i64 {
    t.timestamp().div_euclid(60)
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

    fn seen(budget: &Budget, code: u16, h: &HeaderMap) {
        budget.observe("GET /x", Some(code), Some(h), CORE, "", u64::from(code != 304));
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
        seen(&budget, 200, &headers(&[("x-ratelimit-remaining", "10"), ("x-ratelimit-reset", &reset.to_string())]));
        let err = budget.admit(CORE).await.unwrap_err();
        assert_eq!(err, epoch(reset as u64).unwrap());
        assert_eq!(budget.stats().refused, 1);
    }

    #[tokio::test]
    async fn windows_are_kept_per_resource() {
        let budget = Budget::new().with_floor(10);
        let reset = (Utc::now().timestamp() + 3600).to_string();
        let graphql = headers(&[
            ("x-ratelimit-remaining", "5"),
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-reset", &reset),
            ("x-ratelimit-resource", "graphql"),
        ]);
        budget.observe("POST /graphql", Some(200), Some(&graphql), CORE, "demo", 2);
        assert!(budget.admit("graphql").await.is_err(), "the graphql window is spent");
        budget.admit(CORE).await.expect("the core window is not");
        assert_eq!(budget.window("graphql").remaining, Some(5));
        assert_eq!(budget.spent_last_hour("demo"), 2);
        assert_eq!(budget.spent_last_hour(""), 2);
        assert_eq!(budget.spent_last_hour("other"), 0);
    }

    #[tokio::test]
    async fn gitlab_headers_count_too() {
        let budget = Budget::new().with_floor(5);
        let reset = Utc::now().timestamp() + 60;
        seen(
            &budget,
            200,
            &headers(&[
                ("ratelimit-limit", "2000"),
                ("ratelimit-remaining", "5"),
                ("ratelimit-reset", &reset.to_string()),
            ]),
        );
        assert_eq!((budget.remaining(), budget.stats().limit), (Some(5), Some(2000)));
        assert_eq!(budget.admit(CORE).await.unwrap_err(), epoch(reset as u64).unwrap());
    }

    #[tokio::test]
    async fn linear_headers_count_too_with_a_reset_in_milliseconds() {
        let budget = Budget::new().with_floor(5);
        let reset = Utc::now().timestamp() + 60;
        seen(
            &budget,
            200,
            &headers(&[
                ("x-ratelimit-requests-limit", "1500"),
                ("x-ratelimit-requests-remaining", "3"),
                ("x-ratelimit-requests-reset", &(reset * 1000).to_string()),
            ]),
        );
        assert_eq!((budget.remaining(), budget.stats().limit), (Some(3), Some(1500)));
        assert_eq!(budget.admit(CORE).await.unwrap_err(), epoch(reset as u64).unwrap());
    }

    #[tokio::test]
    async fn past_reset_opens_a_new_window() {
        let budget = Budget::new();
        let reset = Utc::now().timestamp() - 1;
        seen(&budget, 200, &headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", &reset.to_string())]));
        budget.admit(CORE).await.unwrap();
        assert_eq!(budget.remaining(), None);
    }

    #[tokio::test]
    async fn short_blocks_are_waited_out() {
        let budget = Budget::new().with_max_wait(Duration::from_secs(5));
        budget.block_until(Utc::now() + chrono::Duration::milliseconds(50));
        budget.admit(CORE).await.unwrap();
        assert_eq!(budget.blocked_until(), None);
    }

    #[test]
    fn missing_header_counts_down_except_for_304() {
        let budget = Budget::new();
        seen(&budget, 200, &headers(&[("x-ratelimit-remaining", "100")]));
        seen(&budget, 304, &HeaderMap::new());
        assert_eq!(budget.remaining(), Some(100));
        seen(&budget, 200, &HeaderMap::new());
        assert_eq!(budget.remaining(), Some(99));
        budget.observe("GET /x", None, None, CORE, "", 0);
        let stats = budget.stats();
        assert_eq!(stats.not_modified, 1);
        assert_eq!(stats.requests[&("GET /x".to_string(), "200".to_string())], 2);
        assert_eq!(stats.requests[&("GET /x".to_string(), "<error>".to_string())], 1);
        assert_eq!(stats.spent_last_hour, 2, "two answers counted, the 304 and the failure not");
    }

    #[test]
    fn pace_slows_polling_in_proportion_when_the_window_would_not_last() {
        let budget = Budget::new();
        let reset = (Utc::now().timestamp() + 30 * 60).to_string();
        let h = |remaining: &str| {
            headers(&[
                ("x-ratelimit-remaining", remaining),
                ("x-ratelimit-limit", "5000"),
                ("x-ratelimit-reset", &reset),
            ])
        };
        seen(&budget, 200, &h("4000"));
        assert_eq!(budget.pace(CORE), 1.0, "one request in ten minutes lasts");
        assert!(budget.polls_allowed(CORE));
        // 1,000 counted in the last ten minutes: 100 a minute, 3,000 projected to the reset.
        budget.observe("GET /x", Some(200), Some(&h("1500")), CORE, "", 999);
        let pace = budget.pace(CORE);
        // 1,000 usable above the reserve of 500: three times slower.
        assert!((pace - 3.0).abs() < 0.01, "{pace}");
        budget.observe("GET /x", Some(200), Some(&h("400")), CORE, "", 1);
        assert!(!budget.polls_allowed(CORE), "below the reserve polls wait");
        assert_eq!(budget.pace(CORE), MAX_PACE);
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
