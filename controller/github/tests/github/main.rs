//! Tests of the GitHub client against a local stand-in speaking GitHub's wire format, and of
//! webhook parsing against real deliveries from `@octokit/webhooks-examples`.

mod rest;
mod stand_in;
mod webhooks;

use serde_json::Value;

/// A JSON fixture under `tests/fixtures/`.
pub fn fixture(name: &str) -> Value {
    serde_json::from_slice(&fixture_bytes(name)).unwrap()
}

/// The bytes of a fixture under `tests/fixtures/`.
pub fn fixture_bytes(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}
