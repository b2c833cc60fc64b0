//! What a webhook asks of the reconcilers: to poll a session's pull request, or an issue source's
//! tracker, at their next pass. The HTTP handlers reach the reconcilers' memory only through
//! this trait; `reconcilers::Memory` implements it.

/// Where a verified webhook leaves word for the reconcilers (the caller then triggers the
/// reconcile).
pub(crate) trait Wakeups: Send + Sync {
    /// A delivery concerns session `session`: its next reconcile asks the forge at once.
    fn session_heard(&self, session: &str);

    /// The tracker of issue source `source` announced a change: its next pass polls.
    fn source_heard(&self, source: &str);
}
