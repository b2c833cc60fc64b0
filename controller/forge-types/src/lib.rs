//! What every forge and tracker client speaks, so the controller reads GitHub, GitLab and Linear
//! through one set of types: a change under review ([`PullRequest`], a pull or merge request),
//! the CI [`Checks`] of its head, its [`Reviews`], tracker [`Issue`]s, and the tail of a failing
//! job's log. No IO; the HTTP core the clients share is `aoctl-forge-core`.
mod change;
mod checks;
mod issues;
mod log;
mod reviews;

pub use change::{MergeMethod, PullRequest};
pub use checks::{CheckKind, Checks, FailingCheck};
pub use issues::{last_applied_by, Issue, IssueAuthor, IssueList, IssueStateFilter, LabelEvent};
pub use log::{flaky_cause, log_tail, LOG_TAIL_BYTES, LOG_TAIL_LINES};
pub use reviews::{review_state, NewComment, Review, ReviewComment, ReviewEvent, Reviews, Standing};
