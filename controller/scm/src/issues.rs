//! Tracker issues, whichever tracker holds them: what a session's first prompt and an issue
//! source read of one.

/// The title, body, labels and state of a tracker issue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    /// The number within its project or team (GitHub `#42`, GitLab `#42`, Linear `ENG-42`'s 42).
    pub number: u64,
    /// How the tracker names it: `#42`, or Linear's identifier `ENG-42`.
    pub reference: String,
    pub title: String,
    /// Empty when the issue has no description.
    pub body: String,
    pub url: String,
    /// The labels' names.
    pub labels: Vec<String>,
    /// Whether it is still open: GitHub `open`, GitLab `opened`, a Linear state that is neither
    /// completed nor canceled.
    pub open: bool,
}

/// Which issues a list takes by state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IssueStateFilter {
    #[default]
    Open,
    Closed,
    All,
}

/// The issues a list found, newest first, and whether the tracker's answer changed since the last
/// time the same list was read through the same budget (false when every page answered 304).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssueList {
    pub issues: Vec<Issue>,
    pub changed: bool,
}
