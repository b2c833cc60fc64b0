//! Fuzzes the GitHub webhook code: `parse` for each event name it knows (picked by the first
//! input byte, the rest is the body) never panics, and `verify_signature` never panics, accepts the
//! right signature of any body under any secret and rejects a wrong one.

#![no_main]

use hmac::{Hmac, Mac};
use libfuzzer_sys::fuzz_target;
use sha2::Sha256;
use webhook::{parse, verify_signature, WebhookEvent, EVENTS};

/// The source of `aoctl_github::webhook`, compiled here: depending on aoctl-github would build its
/// GitHub client too (octocrab, hyper, rustls: 140 more crates), which triples the build CI pays for.
/// The module uses nothing else of its crate; if it ever does, this stops compiling.
#[path = "../../controller/github/src/webhook.rs"]
#[allow(dead_code)]
mod webhook;

/// The event name for a first byte: `ping`, then `EVENTS` in order, then `deployment` (an event
/// aoctl does not read). fuzz/run.sh writes the seeds' first byte in the same order.
fn event_name(selector: u8) -> &'static str {
    match selector as usize % (EVENTS.len() + 2) {
        0 => "ping",
        i if i <= EVENTS.len() => EVENTS[i - 1],
        _ => "deployment",
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else { return };
    let event = event_name(selector);
    match parse(event, body) {
        Ok(WebhookEvent::Unknown(name)) => assert_eq!(name, event),
        Ok(WebhookEvent::Ping { .. }) => assert_eq!(event, "ping"),
        Ok(WebhookEvent::Repository(r)) => {
            assert_eq!(r.event, event);
            assert!(r.branches.windows(2).all(|w| w[0] < w[1]), "branches are sorted and unique");
            assert!(r.pull_numbers.windows(2).all(|w| w[0] < w[1]), "pull numbers are sorted and unique");
            let _ = r.concerns("main", r.pull_numbers.first().copied());
        }
        Ok(WebhookEvent::Issues(i)) => {
            assert_eq!(event, "issues");
            assert_eq!(WebhookEvent::Issues(i.clone()).repository(), Some(i.repository.as_str()));
        }
        Ok(WebhookEvent::Push(p)) => {
            assert_eq!(event, "push");
            assert!(p.urls().len() <= 4);
            let _ = (p.branch(), p.deleted());
        }
        Err(e) => {
            assert_eq!(e.event, event);
            let _ = e.to_string();
        }
    }

    // Any header value: the first line of the body, as a client could send it.
    let header = String::from_utf8_lossy(body.split(|&b| b == b'\n').next().unwrap_or_default());
    let _ = verify_signature(b"secret", body, &header);

    // The right signature under a secret taken from the input verifies; a changed one does not.
    let secret = &body[..body.len().min(usize::from(selector) % 80)];
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    let digest = hex::encode(mac.finalize().into_bytes());
    assert!(verify_signature(secret, body, &format!("sha256={digest}")));
    assert!(verify_signature(secret, body, &format!(" sha256={}\r\n", digest.to_uppercase())));
    let last = if digest.ends_with('0') { '1' } else { '0' };
    let wrong = format!("sha256={}{last}", &digest[..digest.len() - 1]);
    assert!(!verify_signature(secret, body, &wrong));
    assert!(!verify_signature(secret, body, &format!("sha256={}", &digest[..digest.len() - 2])));
});
