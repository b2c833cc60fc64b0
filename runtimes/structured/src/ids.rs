//! Message ids: stable, name-based UUIDs, so a message sent again after a controller restart
//! carries the same id and the agent (or the fold) knows it. They are built like UUIDv5 but from
//! SHA-256 (the workspace's hash), so they carry version 8, RFC 9562's name for such UUIDs.

use sha2::{Digest, Sha256};

/// The namespace of aoctl's message ids (a fixed random UUID).
const NAMESPACE: [u8; 16] =
    [0x6f, 0x3a, 0x1c, 0x52, 0x9e, 0x07, 0x4b, 0x1d, 0xa2, 0x5e, 0x3c, 0x88, 0x71, 0x0f, 0xd4, 0x39];

/// What a message is, within its session: the id's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What<'a> {
    /// The session's first prompt.
    Prompt,
    /// The inbox message with this sequence number.
    Inbox(u64),
    /// A marked message (a reaction, a report batch) by its marker's short hash.
    Marked(&'a str),
}

/// The id of a message of the session `session_uid`, at its `attempt` (moved only when the
/// protocol said the model never answered it).
pub fn message(session_uid: &str, what: What<'_>, attempt: u32) -> String {
    let name = match what {
        What::Prompt => format!("{session_uid}/prompt/{attempt}"),
        What::Inbox(seq) => format!("{session_uid}/inbox/{seq}/{attempt}"),
        What::Marked(sha8) => format!("{session_uid}/marked/{sha8}/{attempt}"),
    };
    name_uuid(&name)
}

/// The conversation id a new Claude Code session starts with (`--session-id`), known before any event.
pub fn conversation(session_uid: &str) -> String {
    name_uuid(&format!("{session_uid}/conversation"))
}

/// A name-based UUID (version 8, RFC 4122 variant) of `name` in aoctl's namespace.
pub fn name_uuid(name: &str) -> String {
    let mut h = Sha256::new();
    h.update(NAMESPACE);
    h.update(name.as_bytes());
    let digest = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// The SHA-256 of a text, as the fold keeps accepted texts.
pub fn text_hash(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ids_are_stable_uuids() {
        let a = message("uid-1", What::Inbox(3), 0);
        assert_eq!(a, message("uid-1", What::Inbox(3), 0), "the same message has the same id");
        assert_ne!(a, message("uid-1", What::Inbox(3), 1), "a new attempt has a new id");
        assert_ne!(a, message("uid-1", What::Inbox(4), 0));
        assert_ne!(a, message("uid-2", What::Inbox(3), 0));
        assert_ne!(message("uid-1", What::Prompt, 0), message("uid-1", What::Marked("ab12cd34"), 0));
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12], "{a}");
        assert!(a.chars().all(|c| c == '-' || c.is_ascii_hexdigit()), "{a}");
        assert!(parts[2].starts_with('8'), "version 8: {a}");
        assert!(matches!(parts[3].chars().next(), Some('8' | '9' | 'a' | 'b')), "RFC 4122 variant: {a}");
        assert_ne!(conversation("uid-1"), message("uid-1", What::Prompt, 0));
    }
}
