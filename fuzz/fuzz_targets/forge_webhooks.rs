//! Fuzzes the GitLab and Linear webhook code: `parse` of each GitLab event name it knows (picked
//! by the first input byte; the rest is the body) and of Linear's deliveries never panics, the
//! token and signature checks never panic, accept the right token or signature under any secret
//! and reject a changed one.

#![no_main]

use hmac::{Hmac, Mac};
use libfuzzer_sys::fuzz_target;
use sha2::Sha256;

/// The sources of `aoctl_gitlab::webhook` and `aoctl_linear::webhook`, compiled here for the
/// reason `webhook.rs` gives: they use nothing else of their crates.
#[path = "../../controller/gitlab/src/webhook.rs"]
#[allow(dead_code)]
mod gitlab;
#[path = "../../controller/linear/src/webhook.rs"]
#[allow(dead_code)]
mod linear;

/// The GitLab events a first byte picks; the last one is Linear's delivery. fuzz/run.sh writes
/// the seeds' first byte in the same order.
const EVENTS: [&str; 8] = [
    "Merge Request Hook",
    "Pipeline Hook",
    "Job Hook",
    "Note Hook",
    "Issue Hook",
    "Push Hook",
    "Tag Push Hook",
    "linear",
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else { return };
    let event = EVENTS[usize::from(selector) % EVENTS.len()];
    if event == "linear" {
        if let Ok(d) = linear::parse(body) {
            let _ = d.fresh(i64::MAX);
            let _ = d.fresh(i64::MIN);
            let _ = d.fresh(0);
        }
    } else {
        match gitlab::parse(event, body) {
            Ok(gitlab::WebhookEvent::Change(c)) => {
                assert_eq!(c.event, event);
                let _ = c.concerns("main", c.iid);
            }
            Ok(gitlab::WebhookEvent::Issue(i)) => assert!(event.contains("Issue"), "{event}: {i:?}"),
            Ok(gitlab::WebhookEvent::Unknown(name)) => assert!(name.starts_with(event), "{name} for {event}"),
            Err(e) => {
                assert_eq!(e.event, event);
                let _ = e.to_string();
            }
        }
    }

    // The token and the signature: a secret and a header taken from the input.
    let cut = body.len().min(usize::from(selector) % 80);
    let (secret, rest) = body.split_at(cut);
    let header = String::from_utf8_lossy(rest.split(|&b| b == b'\n').next().unwrap_or_default()).into_owned();
    let _ = gitlab::verify_token(secret, &header);
    let _ = linear::verify_signature(secret, body, &header);
    if let Ok(token) = std::str::from_utf8(secret) {
        assert_eq!(gitlab::verify_token(secret, token), !secret.is_empty());
        assert!(!gitlab::verify_token(secret, &format!("{token}x")));
    }
    if !secret.is_empty() {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
        mac.update(body);
        let digest = hex::encode(mac.finalize().into_bytes());
        assert!(linear::verify_signature(secret, body, &digest));
        assert!(linear::verify_signature(secret, body, &format!(" {}\n", digest.to_uppercase())));
        let last = if digest.ends_with('0') { '1' } else { '0' };
        assert!(!linear::verify_signature(secret, body, &format!("{}{last}", &digest[..digest.len() - 1])));
    }
});
