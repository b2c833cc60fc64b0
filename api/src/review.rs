//! Reviewer sessions: which reviewer agents a project (or one session) has and when they run,
//! the review file a reviewer writes and its parsing, what the worker's status remembers of its
//! reviews, the combined state of a pull request's reviews (`ReviewState`), and the gate they put
//! on `approved-and-green`.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::{check_agent, AgentRef, RuntimeKind};
use crate::meta::string_enum;
use crate::validate::{env_name, Errors, FieldError};

/// Label on a reviewer session naming the worker session it reviews.
pub const REVIEW_OF_LABEL: &str = "ao.dev/review-of";
/// Annotation on a worker session asking for a review now (`aoctl review`); a new value starts a
/// new round.
pub const REVIEW_REQUESTED_ANNOTATION: &str = "ao.dev/review-requested";
/// Environment variable naming the file a reviewer writes its review to.
pub const REVIEW_FILE_ENV: &str = "AOCTL_REVIEW_FILE";
/// The most line comments one review file may carry.
pub const MAX_COMMENTS: usize = 100;

string_enum!(
    /// Combined state of a pull request's reviews.
    ReviewState { Approved = "approved", ChangesRequested = "changes-requested", Pending = "pending", None = "none" }
);

/// Reviewers and when they run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewSpec {
    /// The reviewer agents; each review round starts one reviewer session per entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reviewers: Vec<ReviewerSpec>,
    /// When a round starts: `pr-opened`, `push` (each new head of the pull request) and `idle`
    /// (the worker gone idle with a pull request whose head was not reviewed yet); `pr-opened` and
    /// `push` when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on: Vec<ReviewTrigger>,
    /// Whether `approved-and-green` also waits for every reviewer to approve the current head.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gate: bool,
    /// The environment variable holding a second identity's token (a bot account, an app's
    /// token) that posts the reviewers' verdicts as real approvals and change requests. Without
    /// it, or when that identity authored the pull request, a verdict is posted as a comment:
    /// forges refuse a change's author's own approval. The verdict counts either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
}

impl ReviewSpec {
    /// Whether a round starts on this trigger.
    pub fn runs_on(&self, t: ReviewTrigger) -> bool {
        if self.on.is_empty() {
            matches!(t, ReviewTrigger::PrOpened | ReviewTrigger::Push)
        } else {
            self.on.contains(&t)
        }
    }
}

/// One reviewer agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewerSpec {
    /// Built-in adapter name or `{command: [...]}`, as `spec.agent` of a session; the project's
    /// default agent when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentRef>,
    /// Where the reviewer runs; the worker's runtime when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeKind>,
    /// Extra instructions put before the pull request in the reviewer's prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
}

macro_rules! text_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum $name { $(#[serde(rename = $text)] $variant),+ }
        impl $name {
            pub const ALL: &'static [&'static str] = &[$($text),+];
            pub fn as_str(self) -> &'static str { match self { $($name::$variant => $text),+ } }
            pub fn parse(s: &str) -> Option<$name> { match s { $($text => Some($name::$variant),)+ _ => None } }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }
    };
}

text_enum!(
    /// What starts a review round.
    ReviewTrigger { PrOpened = "pr-opened", Push = "push", Idle = "idle" }
);
text_enum!(
    /// A reviewer's decision.
    Verdict { Approve = "approve", ChangesRequested = "changes-requested", Comment = "comment" }
);

/// A comment on one line of a file as it is at the reviewed head.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LineComment {
    pub path: String,
    pub line: u64,
    pub text: String,
}

/// The review file a reviewer writes (JSON):
/// `{"verdict": "approve" | "changes-requested" | "comment", "body": "...", "comments": [{"path":
/// "src/a.rs", "line": 3, "text": "..."}]}`. `body` and `comments` are optional.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewFile {
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub body: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comments: Vec<LineComment>,
}

impl ReviewFile {
    /// Parses a review file; the error names the field that is wrong (`comments[1].line`).
    pub fn parse(text: &str) -> Result<ReviewFile, FieldError> {
        let v: Value =
            serde_json::from_str(text).map_err(|e| FieldError::new("(file)", format!("is not JSON: {e}")))?;
        let Value::Object(o) = v else { return Err(FieldError::new("(file)", "must be a JSON object")) };
        if let Some(k) = o.keys().find(|k| !["verdict", "body", "comments"].contains(&k.as_str())) {
            return Err(FieldError::new(k.clone(), "is not a field of a review (verdict, body, comments)"));
        }
        let verdict = match o.get("verdict") {
            None => return Err(FieldError::new("verdict", "is required")),
            Some(Value::String(s)) => Verdict::parse(s).ok_or_else(|| {
                FieldError::new("verdict", format!("`{s}` is not one of {}", Verdict::ALL.join(", ")))
            })?,
            Some(_) => return Err(FieldError::new("verdict", "must be a string")),
        };
        let body = match o.get("body") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(FieldError::new("body", "must be a string")),
        };
        let list = match o.get("comments") {
            None | Some(Value::Null) => vec![],
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return Err(FieldError::new("comments", "must be a list")),
        };
        if list.len() > MAX_COMMENTS {
            return Err(FieldError::new("comments", format!("has {} comments, more than {MAX_COMMENTS}", list.len())));
        }
        let mut comments = vec![];
        for (i, c) in list.iter().enumerate() {
            let f = |k: &str| format!("comments[{i}].{k}");
            let Value::Object(c) = c else {
                return Err(FieldError::new(format!("comments[{i}]"), "must be an object"));
            };
            if let Some(k) = c.keys().find(|k| !["path", "line", "text"].contains(&k.as_str())) {
                return Err(FieldError::new(f(k), "is not a field of a comment (path, line, text)"));
            }
            let path = match c.get("path") {
                Some(Value::String(p)) if is_relative(p) => p.clone(),
                Some(Value::String(p)) => {
                    return Err(FieldError::new(f("path"), format!("`{p}` is not a relative path in the repository")))
                }
                Some(_) => return Err(FieldError::new(f("path"), "must be a string")),
                None => return Err(FieldError::new(f("path"), "is required")),
            };
            let line = match c.get("line") {
                Some(Value::Number(n)) => n
                    .as_u64()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| FieldError::new(f("line"), format!("must be a line number from 1, not {n}")))?,
                Some(_) => return Err(FieldError::new(f("line"), "must be a number")),
                None => return Err(FieldError::new(f("line"), "is required")),
            };
            let text = match c.get("text") {
                Some(Value::String(t)) if !t.trim().is_empty() => t.clone(),
                Some(Value::String(_)) => return Err(FieldError::new(f("text"), "must not be empty")),
                Some(_) => return Err(FieldError::new(f("text"), "must be a string")),
                None => return Err(FieldError::new(f("text"), "is required")),
            };
            comments.push(LineComment { path, line, text });
        }
        Ok(ReviewFile { verdict, body, comments })
    }
}

fn is_relative(p: &str) -> bool {
    !p.is_empty() && !p.starts_with('/') && !p.contains('\0') && !p.split('/').any(|s| s == ".." || s.is_empty())
}

/// What a reviewer session found: the review of `headSha` it wrote, or what was wrong with its file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewerStatus {
    /// The head of the worker it reviewed.
    pub head_sha: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewFile>,
    /// What is wrong with the review file, when it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether the reviewer was told what is wrong with its file (it is told once).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub told: bool,
}

/// What a worker's status remembers of its reviewers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewStatus {
    /// Review rounds started so far; the reviewer sessions of a round carry its number.
    #[serde(default)]
    pub round: u32,
    /// The head the last round reviewed (the next round reviews the diff from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewed_sha: Option<String>,
    /// The head the current round reviews, while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_sha: Option<String>,
    /// The value of the `ao.dev/review-requested` annotation last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<String>,
    /// When the agent's own request for a review (`request_review`) that was last acted on was
    /// made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_requested: Option<crate::Time>,
    /// Each reviewer's latest verdict, by reviewer index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verdicts: Vec<ReviewerVerdict>,
    /// The state the reviewers' latest verdicts add up to.
    #[serde(default = "none_state")]
    pub state: ReviewState,
}

fn none_state() -> ReviewState {
    ReviewState::None
}

impl Default for ReviewStatus {
    fn default() -> ReviewStatus {
        ReviewStatus {
            round: 0,
            reviewed_sha: None,
            running_sha: None,
            requested: None,
            agent_requested: None,
            verdicts: vec![],
            state: ReviewState::None,
        }
    }
}

/// One reviewer's latest verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewerVerdict {
    /// The reviewer's index in `review.reviewers`.
    pub reviewer: u32,
    /// The session that wrote it.
    pub session: String,
    pub head_sha: String,
    pub verdict: Verdict,
    /// How many line comments it made.
    #[serde(default)]
    pub comments: u32,
    /// What the reviewer wrote, kept (bounded) to post it and to pass it to the worker.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub body: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub line_comments: Vec<LineComment>,
    /// Its post to the pull request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post: Option<ReviewPost>,
}

impl ReviewerVerdict {
    /// A verdict of `review`, its text bounded, not posted yet.
    pub fn of(reviewer: u32, session: &str, head_sha: &str, review: &ReviewFile) -> ReviewerVerdict {
        ReviewerVerdict {
            reviewer,
            session: session.to_string(),
            head_sha: head_sha.to_string(),
            verdict: review.verdict,
            comments: review.comments.len() as u32,
            body: clip(&review.body, KEPT_BODY),
            line_comments: review
                .comments
                .iter()
                .map(|c| LineComment { path: c.path.clone(), line: c.line, text: clip(&c.text, KEPT_COMMENT) })
                .collect(),
            post: Some(ReviewPost::default()),
        }
    }
}

/// Characters of a reviewer's body and of each of its comments kept in the worker's status.
const KEPT_BODY: usize = 8000;
const KEPT_COMMENT: usize = 2000;

/// At most `max` characters of `text`, with `…` when cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

/// How a reviewer's verdict was posted to the pull request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PostedAs {
    /// As the forge's own approval or request for changes (a second identity posted it).
    Verdict,
    /// As a comment carrying the verdict in its words (the change's author cannot approve it).
    Comment,
}

/// The post of a reviewer's verdict to the pull request: pending, tried again with backoff, or
/// done.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewPost {
    /// The forge's id of the posted review; `None` until it is posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_id: Option<u64>,
    #[serde(default, rename = "as", skip_serializing_if = "Option::is_none")]
    pub as_: Option<PostedAs>,
    /// Tries that failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: u32,
    /// No try before this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<crate::Time>,
    /// What the forge said the last time it refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl ReviewPost {
    /// Whether it was posted.
    pub fn done(&self) -> bool {
        self.review_id.is_some()
    }
}

/// The text a reviewer's review carries on the forge ends with this, naming its session, so a
/// post is recognised after a crash and never passed to the worker a second time.
pub fn review_marker(session: &str) -> String {
    format!("(reviewer session {session})")
}

impl ReviewStatus {
    /// Records a reviewer's verdict, replacing its earlier one, and the state they add up to.
    pub fn record(&mut self, v: ReviewerVerdict) {
        self.verdicts.retain(|o| o.reviewer != v.reviewer);
        self.verdicts.push(v);
        self.verdicts.sort_by_key(|v| v.reviewer);
        self.state = combined(&self.verdicts);
    }

    /// The verdicts on `head` that ask for changes.
    pub fn changes_requested_on<'a>(&'a self, head: &'a str) -> impl Iterator<Item = &'a ReviewerVerdict> + 'a {
        self.verdicts.iter().filter(move |v| v.head_sha == head && v.verdict == Verdict::ChangesRequested)
    }

    /// Whether `session` is one of the reviewers whose verdict is recorded.
    pub fn has_session(&self, session: &str) -> bool {
        self.verdicts.iter().any(|v| v.session == session)
    }

    /// Whether the gate is open for `head`: each of `reviewers` approved exactly that head.
    pub fn approves(&self, reviewers: usize, head: &str) -> bool {
        (0..reviewers as u32).all(|i| {
            self.verdicts.iter().any(|v| v.reviewer == i && v.head_sha == head && v.verdict == Verdict::Approve)
        })
    }
}

/// The state verdicts add up to: any request for changes wins, then any approval; comments only
/// make `pending`, and no verdicts `none`.
pub fn combined(verdicts: &[ReviewerVerdict]) -> ReviewState {
    if verdicts.iter().any(|v| v.verdict == Verdict::ChangesRequested) {
        ReviewState::ChangesRequested
    } else if verdicts.iter().any(|v| v.verdict == Verdict::Approve) {
        ReviewState::Approved
    } else if verdicts.is_empty() {
        ReviewState::None
    } else {
        ReviewState::Pending
    }
}

/// The review state of a pull request at `head`, from what the forge says and the reviewers'
/// verdicts as recorded (a verdict posted as a comment counts as much as one the forge shows):
/// a request for changes from either wins; then an approval — the forge's, or every reviewer's
/// of this very head; else the forge's state, or `pending` when reviewers had their say.
pub fn effective_state(
    forge: ReviewState,
    spec: Option<&ReviewSpec>,
    status: Option<&ReviewStatus>,
    head: &str,
) -> ReviewState {
    let on_head: Vec<&ReviewerVerdict> =
        status.map(|s| s.verdicts.iter().filter(|v| v.head_sha == head).collect()).unwrap_or_default();
    if forge == ReviewState::ChangesRequested || on_head.iter().any(|v| v.verdict == Verdict::ChangesRequested) {
        return ReviewState::ChangesRequested;
    }
    let reviewers = spec.map_or(0, |s| s.reviewers.len());
    let all_approve = reviewers > 0 && status.is_some_and(|st| st.approves(reviewers, head));
    if forge == ReviewState::Approved || all_approve {
        return ReviewState::Approved;
    }
    if forge == ReviewState::None && !on_head.is_empty() {
        return ReviewState::Pending;
    }
    forge
}

/// Whether `approved-and-green` may merge `head` as far as the reviewers go: always without a
/// gate, else only once every reviewer approved that head.
pub fn gate_open(spec: Option<&ReviewSpec>, status: Option<&ReviewStatus>, head: &str) -> bool {
    match spec {
        Some(spec) if spec.gate && !spec.reviewers.is_empty() => {
            status.is_some_and(|st| st.approves(spec.reviewers.len(), head))
        }
        _ => true,
    }
}

/// The name of reviewer `index` of round `round` of `worker`: a DNS-1123 label, the worker's name
/// cut to fit.
pub fn reviewer_name(worker: &str, round: u32, index: usize) -> String {
    let tail = format!("-review-{round}-{index}");
    let keep = 63usize.saturating_sub(tail.len()).min(worker.len());
    format!("{}{tail}", worker[..keep].trim_end_matches('-'))
}

/// Checks a `review` block (of a Project or a Session) at `field`.
pub(crate) fn check_review(field: &str, r: &ReviewSpec, e: &mut Errors) {
    if r.reviewers.is_empty() {
        e.check(format!("{field}.reviewers"), Err("must name at least one reviewer agent".into()));
    }
    if r.reviewers.len() > 8 {
        e.check(format!("{field}.reviewers"), Err(format!("has {} reviewers, more than 8", r.reviewers.len()).into()));
    }
    for (i, rv) in r.reviewers.iter().enumerate() {
        if let Some(a) = &rv.agent {
            check_agent(&format!("{field}.reviewers[{i}].agent"), a, e);
        }
        if rv.prompt.as_deref().is_some_and(|p| p.contains('\0')) {
            e.check(format!("{field}.reviewers[{i}].prompt"), Err("must not contain NUL".into()));
        }
    }
    for (i, t) in r.on.iter().enumerate() {
        if r.on[..i].contains(t) {
            e.check(format!("{field}.on[{i}]"), Err(format!("`{t}` is listed twice").into()));
        }
    }
    if let Some(v) = &r.token_env {
        e.check(format!("{field}.tokenEnv"), env_name(v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_file_parses_and_each_error_names_its_field() {
        let ok = r#"{"verdict": "changes-requested", "body": "Two things.",
            "comments": [{"path": "src/a.rs", "line": 3, "text": "Name this"}]}"#;
        let r = ReviewFile::parse(ok).expect("a valid file");
        assert_eq!(r.verdict, Verdict::ChangesRequested);
        assert_eq!(r.comments, vec![LineComment { path: "src/a.rs".into(), line: 3, text: "Name this".into() }]);
        assert_eq!(ReviewFile::parse(r#"{"verdict": "approve"}"#).expect("minimal").comments, vec![]);
        let err = |t: &str| ReviewFile::parse(t).expect_err(t).to_string();
        assert!(err("not json").starts_with("(file): is not JSON"), "{}", err("not json"));
        assert_eq!(err("[]"), "(file): must be a JSON object");
        assert_eq!(err("{}"), "verdict: is required");
        assert_eq!(err(r#"{"verdict": "lgtm"}"#), "verdict: `lgtm` is not one of approve, changes-requested, comment");
        assert_eq!(
            err(r#"{"verdict": "approve", "score": 1}"#),
            "score: is not a field of a review (verdict, body, comments)"
        );
        assert_eq!(err(r#"{"verdict": "approve", "comments": {}}"#), "comments: must be a list");
        let c = |c: &str| {
            format!(r#"{{"verdict": "comment", "comments": [{{"path": "a", "line": 1, "text": "t"}}, {c}]}}"#)
        };
        assert_eq!(err(&c(r#"{"line": 1, "text": "t"}"#)), "comments[1].path: is required");
        assert_eq!(
            err(&c(r#"{"path": "../x", "line": 1, "text": "t"}"#)),
            "comments[1].path: `../x` is not a relative path in the repository"
        );
        assert_eq!(
            err(&c(r#"{"path": "a", "line": 0, "text": "t"}"#)),
            "comments[1].line: must be a line number from 1, not 0"
        );
        assert_eq!(err(&c(r#"{"path": "a", "line": "3", "text": "t"}"#)), "comments[1].line: must be a number");
        assert_eq!(err(&c(r#"{"path": "a", "line": 2, "text": " "}"#)), "comments[1].text: must not be empty");
        assert_eq!(
            err(&c(r#"{"path": "a", "line": 2, "body": "x"}"#)),
            "comments[1].body: is not a field of a comment (path, line, text)"
        );
    }

    fn verdict(reviewer: u32, head: &str, verdict: Verdict) -> ReviewerVerdict {
        let file = ReviewFile { verdict, body: String::new(), comments: vec![] };
        ReviewerVerdict::of(reviewer, &format!("r{reviewer}"), head, &file)
    }

    #[test]
    fn recorded_verdicts_count_beside_the_forges_state() {
        let one = ReviewSpec { reviewers: vec![ReviewerSpec::default()], ..Default::default() };
        let mut st = ReviewStatus::default();
        assert_eq!(effective_state(ReviewState::None, Some(&one), Some(&st), "h1"), ReviewState::None);
        st.record(verdict(0, "h1", Verdict::ChangesRequested));
        assert_eq!(effective_state(ReviewState::None, Some(&one), Some(&st), "h1"), ReviewState::ChangesRequested);
        assert_eq!(effective_state(ReviewState::Approved, Some(&one), Some(&st), "h1"), ReviewState::ChangesRequested);
        assert_eq!(effective_state(ReviewState::None, Some(&one), Some(&st), "h2"), ReviewState::None, "another head");
        st.record(verdict(0, "h2", Verdict::Approve));
        assert_eq!(effective_state(ReviewState::None, Some(&one), Some(&st), "h2"), ReviewState::Approved);
        assert_eq!(
            effective_state(ReviewState::ChangesRequested, Some(&one), Some(&st), "h2"),
            ReviewState::ChangesRequested,
            "a person's request for changes wins"
        );
        st.record(verdict(0, "h3", Verdict::Comment));
        assert_eq!(effective_state(ReviewState::None, Some(&one), Some(&st), "h3"), ReviewState::Pending);
    }

    #[test]
    fn a_verdict_keeps_its_text_bounded() {
        let long = "x".repeat(KEPT_BODY + 10);
        let file = ReviewFile {
            verdict: Verdict::ChangesRequested,
            body: long,
            comments: vec![LineComment { path: "a".into(), line: 1, text: "y".repeat(KEPT_COMMENT * 2) }],
        };
        let v = ReviewerVerdict::of(0, "w-review-1-0", "h", &file);
        assert_eq!(v.body.chars().count(), KEPT_BODY + 1);
        assert_eq!(v.line_comments[0].text.chars().count(), KEPT_COMMENT + 1);
        assert_eq!(v.comments, 1);
        assert!(!v.post.as_ref().unwrap().done());
    }

    #[test]
    fn the_gate_waits_for_every_reviewer_to_approve_the_current_head() {
        let two = ReviewSpec { reviewers: vec![ReviewerSpec::default(); 2], gate: true, ..Default::default() };
        let mut st = ReviewStatus::default();
        assert!(!gate_open(Some(&two), None, "h1"));
        st.record(verdict(0, "h1", Verdict::Approve));
        assert_eq!(st.state, ReviewState::Approved);
        assert!(!gate_open(Some(&two), Some(&st), "h1"), "one of two approved");
        st.record(verdict(1, "h1", Verdict::ChangesRequested));
        assert_eq!(st.state, ReviewState::ChangesRequested);
        assert!(!gate_open(Some(&two), Some(&st), "h1"));
        st.record(verdict(1, "h1", Verdict::Approve));
        assert!(gate_open(Some(&two), Some(&st), "h1"));
        assert!(!gate_open(Some(&two), Some(&st), "h2"), "an approval of an older head does not count");
        let open = ReviewSpec { gate: false, ..two.clone() };
        assert!(gate_open(Some(&open), None, "h2"), "no gate");
        assert!(gate_open(None, None, "h2"), "no reviewers");
    }

    #[test]
    fn triggers_default_to_pr_opened_and_push() {
        let spec = ReviewSpec::default();
        assert!(spec.runs_on(ReviewTrigger::PrOpened) && spec.runs_on(ReviewTrigger::Push));
        assert!(!spec.runs_on(ReviewTrigger::Idle));
        let idle = ReviewSpec { on: vec![ReviewTrigger::Idle], ..Default::default() };
        assert!(idle.runs_on(ReviewTrigger::Idle) && !idle.runs_on(ReviewTrigger::Push));
    }

    #[test]
    fn reviewer_names_are_labels() {
        assert_eq!(reviewer_name("fix-login", 2, 0), "fix-login-review-2-0");
        let long = "a".repeat(63);
        let n = reviewer_name(&long, 10, 1);
        assert!(n.len() <= 63 && n.ends_with("-review-10-1"), "{n}");
        assert!(crate::validate::dns1123_label(&reviewer_name("ab-cd-", 1, 0)).is_ok());
    }
}
