//! Per-session tokens: what a session's agent proves itself with on the agent API
//! (`/agent/v1/…`, `aoctl mcp`). A token is derived, never stored: `aos1.<name>.<uid>.<mac>`, where
//! `<mac>` is HMAC-SHA256, under a key derived from the server's bearer token, of the session's
//! name and uid, in hex. A new bearer token revokes every session token, and a session deleted and
//! created again under the same name has a new uid, so the old agent's token names nothing.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The environment variable that holds the API's address for a session's agent.
pub(crate) const ENV_SERVER: &str = "AOCTL_SERVER";
/// The environment variable that holds the session's name.
pub(crate) const ENV_SESSION: &str = "AOCTL_SESSION";
/// The environment variable that holds the session's token.
pub(crate) const ENV_TOKEN: &str = "AOCTL_SESSION_TOKEN";

const PREFIX: &str = "aos1";

/// The session a valid token speaks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SessionCaller {
    pub name: String,
    pub uid: String,
}

/// Makes and checks session tokens, and the environment that hands one to an agent.
#[derive(Clone)]
pub(crate) struct SessionKeys {
    key: [u8; 32],
    /// The API's address as an agent on this machine reaches it.
    server: String,
    /// The `aoctl` binary agents start as their MCP server (`aoctl mcp`), when known.
    mcp_command: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionKeys").field("server", &self.server).finish_non_exhaustive()
    }
}

impl SessionKeys {
    /// Keys derived from the bearer token, for a server listening on `listen` (an unspecified
    /// address is reached on loopback).
    pub(crate) fn new(bearer: &str, listen: SocketAddr) -> SessionKeys {
        let mut mac = HmacSha256::new_from_slice(bearer.as_bytes()).expect("HMAC takes any key length");
        mac.update(b"aoctl session token v1");
        let mut addr = listen;
        if addr.ip().is_unspecified() {
            let loopback: std::net::IpAddr = if addr.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            };
            addr.set_ip(loopback);
        }
        SessionKeys { key: mac.finalize().into_bytes().into(), server: format!("http://{addr}"), mcp_command: None }
    }

    /// Configures `aoctl` (this binary, say) as the MCP server of agents that take one.
    pub(crate) fn with_mcp_command(mut self, aoctl: std::path::PathBuf) -> SessionKeys {
        self.mcp_command = Some(aoctl);
        self
    }

    /// The `aoctl` binary agents get as their MCP server, if any.
    pub(crate) fn mcp_command(&self) -> Option<&std::path::Path> {
        self.mcp_command.as_deref()
    }

    fn mac(&self, name: &str, uid: &str) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(name.as_bytes());
        mac.update(b"\0");
        mac.update(uid.as_bytes());
        mac
    }

    /// The token of the session `name` with uid `uid`.
    pub(crate) fn token(&self, name: &str, uid: &str) -> String {
        format!("{PREFIX}.{name}.{uid}.{}", hex::encode(self.mac(name, uid).finalize().into_bytes()))
    }

    /// The session `token` speaks for, if this server made it.
    pub(crate) fn verify(&self, token: &str) -> Option<SessionCaller> {
        let mut parts = token.split('.');
        let (Some(PREFIX), Some(name), Some(uid), Some(mac), None) =
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        if name.is_empty() || uid.is_empty() {
            return None;
        }
        let given = hex::decode(mac).ok()?;
        // `verify_slice` compares in constant time.
        self.mac(name, uid)
            .verify_slice(&given)
            .is_ok()
            .then(|| SessionCaller { name: name.to_string(), uid: uid.to_string() })
    }

    /// What a session's agent gets in its environment: the API's address, its name and its token.
    pub(crate) fn env(&self, name: &str, uid: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (ENV_SERVER.to_string(), self.server.clone()),
            (ENV_SESSION.to_string(), name.to_string()),
            (ENV_TOKEN.to_string(), self.token(name, uid)),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(bearer: &str) -> SessionKeys {
        SessionKeys::new(bearer, "127.0.0.1:7420".parse().unwrap())
    }

    #[test]
    fn a_token_names_its_session_and_nothing_else() {
        let k = keys("bearer");
        let t = k.token("fix-1", "u-1");
        assert_eq!(k.verify(&t), Some(SessionCaller { name: "fix-1".into(), uid: "u-1".into() }));
        let mac = t.rsplit_once('.').unwrap().1;
        for forged in [
            format!("aos1.fix-2.u-1.{mac}"),
            format!("aos1.fix-1.u-2.{mac}"),
            format!("aos2.fix-1.u-1.{mac}"),
            format!("aos1.fix-1.u-1.{mac}.x"),
            "aos1.fix-1.u-1.".to_string(),
            "aos1..u-1.00".to_string(),
            "bearer".to_string(),
            String::new(),
        ] {
            assert_eq!(k.verify(&forged), None, "{forged}");
        }
        assert_eq!(keys("another bearer").verify(&t), None, "a new bearer token revokes every session token");
    }

    #[test]
    fn the_environment_carries_the_address_the_name_and_the_token() {
        let k = SessionKeys::new("b", "0.0.0.0:7999".parse().unwrap());
        let env = k.env("s", "u");
        assert_eq!(env[ENV_SERVER], "http://127.0.0.1:7999");
        assert_eq!(env[ENV_SESSION], "s");
        assert_eq!(k.verify(&env[ENV_TOKEN]).unwrap().name, "s");
        assert!(!format!("{k:?}").contains(&hex::encode(k.key)), "the key is not printed");
    }
}
