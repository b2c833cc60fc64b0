//! Linear webhooks: the `Linear-Signature` check (HMAC-SHA256 of the body, hex) and the facts of a
//! delivery that tell which issue sources to read again.

use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

/// How far a delivery's `webhookTimestamp` may be from now before it is taken for a replay.
pub const MAX_SKEW_MS: i64 = 60_000;

/// Whether `signature` (hex) is the HMAC-SHA256 of `body` under `secret`, compared in constant
/// time.
pub fn verify_signature(secret: &[u8], body: &[u8], signature: &str) -> bool {
    let Ok(expected) = hex::decode(signature.trim()) else { return false };
    if secret.is_empty() {
        return false;
    }
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else { return false };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

/// A data-change delivery: what changed, and the team of an issue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// `create`, `update` or `remove`.
    pub action: String,
    /// The entity type: `Issue`, `Comment`, `IssueLabel`, …
    pub kind: String,
    /// The issue's identifier (`ENG-42`), for an `Issue`.
    pub identifier: Option<String>,
    /// When Linear sent it, in milliseconds since the epoch.
    pub timestamp_ms: Option<i64>,
}

/// Why a delivery cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid Linear webhook payload: {0}")]
pub struct ParseError(pub String);

/// Reads a delivery.
pub fn parse(body: &[u8]) -> Result<Delivery, ParseError> {
    #[derive(Deserialize)]
    struct Data {
        identifier: Option<String>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Payload {
        action: String,
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        data: Option<Data>,
        #[serde(default)]
        webhook_timestamp: Option<i64>,
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    let p: Payload = serde_path_to_error::deserialize(de).map_err(|e| ParseError(e.to_string()))?;
    Ok(Delivery {
        action: p.action,
        identifier: p.data.and_then(|d| d.identifier),
        kind: p.kind,
        timestamp_ms: p.webhook_timestamp,
    })
}

impl Delivery {
    /// Whether the delivery was sent within [`MAX_SKEW_MS`] of `now_ms` (one without a
    /// timestamp is not).
    pub fn fresh(&self, now_ms: i64) -> bool {
        self.timestamp_ms
            .is_some_and(|t| now_ms.checked_sub(t).is_some_and(|d| d.checked_abs().is_some_and(|d| d <= MAX_SKEW_MS)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_and_payloads() {
        let body = br#"{"action":"update","type":"Issue","data":{"identifier":"ENG-4"},"webhookTimestamp":1000}"#;
        let mut mac = Hmac::<Sha256>::new_from_slice(b"s").unwrap();
        mac.update(body);
        let sig = hex::encode(mac.finalize().into_bytes());
        assert!(verify_signature(b"s", body, &sig));
        assert!(!verify_signature(b"t", body, &sig));
        assert!(!verify_signature(b"s", body, "zz"));
        let d = parse(body).unwrap();
        assert_eq!((d.kind.as_str(), d.identifier.as_deref()), ("Issue", Some("ENG-4")));
        assert!(d.fresh(30_000) && !d.fresh(100_000));
        assert!(parse(b"{}").is_err());
        let far = Delivery { timestamp_ms: Some(i64::MIN), ..d };
        assert!(!far.fresh(i64::MAX) && !far.fresh(0), "a timestamp that overflows the difference is not fresh");
    }
}
