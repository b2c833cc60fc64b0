//! Per-session tokens: what a session's agent proves itself with on the agent API
//! (`/agent/v1/…`, `aoctl mcp`). A token is derived, never stored: `aos1.<name>.<uid>.<mac>`, where
//! `<mac>` is HMAC-SHA256, under a key derived from the server's bearer token, of the session's
//! name and uid, in hex. A new bearer token revokes every session token, and a session deleted and
//! created again under the same name has a new uid, so the old agent's token names nothing.
//! A project's orchestrator gets `aoo1.<name>.<uid>.<mac>` instead, under a key of its own: it
//! opens the orchestrator's tools too, and no worker's token can pass for it.

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
const ORCHESTRATOR_PREFIX: &str = "aoo1";

/// The session a valid token speaks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SessionCaller {
    pub name: String,
    pub uid: String,
    /// Whether the token is an orchestrator's (the handlers still check the stored Session's role).
    pub orchestrator: bool,
}

/// Makes and checks session tokens, and the environment that hands one to an agent.
#[derive(Clone)]
pub(crate) struct SessionKeys {
    key: [u8; 32],
    /// The key of orchestrators' tokens.
    orchestrator_key: [u8; 32],
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
        let derive = |purpose: &[u8]| -> [u8; 32] {
            let mut mac = HmacSha256::new_from_slice(bearer.as_bytes()).expect("HMAC takes any key length");
            mac.update(purpose);
            mac.finalize().into_bytes().into()
        };
        let mut addr = listen;
        if addr.ip().is_unspecified() {
            let loopback: std::net::IpAddr = if addr.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            };
            addr.set_ip(loopback);
        }
        SessionKeys {
            key: derive(b"aoctl session token v1"),
            orchestrator_key: derive(b"aoctl orchestrator token v1"),
            server: format!("http://{addr}"),
            mcp_command: None,
        }
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

    fn mac(&self, name: &str, uid: &str, orchestrator: bool) -> HmacSha256 {
        let key = if orchestrator { &self.orchestrator_key } else { &self.key };
        let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
        mac.update(name.as_bytes());
        mac.update(b"\0");
        mac.update(uid.as_bytes());
        mac
    }

    /// The token of the session `name` with uid `uid`.
    pub(crate) fn token(&self, name: &str, uid: &str) -> String {
        format!("{PREFIX}.{name}.{uid}.{}", hex::encode(self.mac(name, uid, false).finalize().into_bytes()))
    }

    /// The token of the orchestrator Session `name` with uid `uid`.
    pub(crate) fn orchestrator_token(&self, name: &str, uid: &str) -> String {
        format!("{ORCHESTRATOR_PREFIX}.{name}.{uid}.{}", hex::encode(self.mac(name, uid, true).finalize().into_bytes()))
    }

    /// The session `token` speaks for, if this server made it.
    pub(crate) fn verify(&self, token: &str) -> Option<SessionCaller> {
        let mut parts = token.split('.');
        let (Some(prefix), Some(name), Some(uid), Some(mac), None) =
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let orchestrator = match prefix {
            PREFIX => false,
            ORCHESTRATOR_PREFIX => true,
            _ => return None,
        };
        if name.is_empty() || uid.is_empty() {
            return None;
        }
        let given = hex::decode(mac).ok()?;
        // `verify_slice` compares in constant time.
        self.mac(name, uid, orchestrator).verify_slice(&given).is_ok().then(|| SessionCaller {
            name: name.to_string(),
            uid: uid.to_string(),
            orchestrator,
        })
    }

    /// What a session's agent gets in its environment: the API's address, its name and its token
    /// (an orchestrator's, for the project's orchestrator).
    pub(crate) fn env(&self, name: &str, uid: &str, orchestrator: bool) -> BTreeMap<String, String> {
        let token = if orchestrator { self.orchestrator_token(name, uid) } else { self.token(name, uid) };
        BTreeMap::from([
            (ENV_SERVER.to_string(), self.server.clone()),
            (ENV_SESSION.to_string(), name.to_string()),
            (ENV_TOKEN.to_string(), token),
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
        assert_eq!(k.verify(&t), Some(SessionCaller { name: "fix-1".into(), uid: "u-1".into(), orchestrator: false }));
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
    fn an_orchestrators_token_is_no_workers_and_a_workers_is_no_orchestrators() {
        let k = keys("bearer");
        let o = k.orchestrator_token("demo-orchestrator", "u-1");
        assert!(o.starts_with("aoo1.demo-orchestrator.u-1."));
        let caller = k.verify(&o).unwrap();
        assert!(caller.orchestrator && caller.name == "demo-orchestrator");
        let w = k.token("demo-orchestrator", "u-1");
        assert!(!k.verify(&w).unwrap().orchestrator);
        // The same name and uid under the other prefix: the key differs, so neither passes.
        let (o_mac, w_mac) = (o.rsplit_once('.').unwrap().1, w.rsplit_once('.').unwrap().1);
        assert_eq!(k.verify(&format!("aoo1.demo-orchestrator.u-1.{w_mac}")), None);
        assert_eq!(k.verify(&format!("aos1.demo-orchestrator.u-1.{o_mac}")), None);
        assert_eq!(keys("another bearer").verify(&o), None, "a new bearer token revokes it");
        let env = k.env("demo-orchestrator", "u-1", true);
        assert!(k.verify(&env[ENV_TOKEN]).unwrap().orchestrator);
    }

    #[test]
    fn the_environment_carries_the_address_the_name_and_the_token() {
        let k = SessionKeys::new("b", "0.0.0.0:7999".parse().unwrap());
        let env = k.env("s", "u", false);
        assert_eq!(env[ENV_SERVER], "http://127.0.0.1:7999");
        assert_eq!(env[ENV_SESSION], "s");
        assert_eq!(k.verify(&env[ENV_TOKEN]).unwrap().name, "s");
        assert!(!format!("{k:?}").contains(&hex::encode(k.key)), "the key is not printed");
    }
}
