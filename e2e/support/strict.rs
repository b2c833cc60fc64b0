//! What a test does when something it needs is missing here (an engine, a display, the right to
//! mount a filesystem). Under `make test`, where `e2e/test.sh` exports `AOCTL_TEST_STRICT=1`, it
//! fails naming what is missing; elsewhere (a plain `cargo test`, or `AOCTL_TEST_STRICT=0`) it says
//! so on stderr and the caller returns. Shared as a source file by the end-to-end tests and the
//! tests of `controller/store` and `runtimes`.

/// Whether a test must fail rather than skip when its environment is missing.
pub(crate) fn strict() -> bool {
    std::env::var("AOCTL_TEST_STRICT").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Reports that `what` is missing: panics when [`strict`], else prints a `SKIPPED:` line so the
/// caller can return.
pub(crate) fn missing(what: &str) {
    assert!(
        !strict(),
        "{what}: this test cannot run here, and AOCTL_TEST_STRICT is set (`make test` sets it; \
         AOCTL_TEST_STRICT=0 lets such tests skip instead)"
    );
    eprintln!("SKIPPED: {what}");
}
