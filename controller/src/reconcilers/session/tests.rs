//! In-process tests of the session reconciler.
