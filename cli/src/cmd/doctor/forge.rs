//! The forge checks of `aoctl doctor`: each forge token the projects use (set here, taken by the
//! forge, its scopes and rate budget), and whether the projects' webhooks are heard.

use super::*;

// ---------------------------------------------------------------- forges

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum ForgeKind {
    GitHub,
    GitLab,
}

impl ForgeKind {
    fn as_str(self) -> &'static str {
        match self {
            ForgeKind::GitHub => "GitHub",
            ForgeKind::GitLab => "GitLab",
        }
    }
}

/// One token on one forge API, and the projects that read it with that token.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct ForgeKey {
    pub(super) kind: ForgeKind,
    pub(super) api: String,
    pub(super) token_env: String,
}

/// The forge a project's changes live on (GitLab for `spec.gitlab`, GitHub for `spec.repo`),
/// with the API URL and token variable the controller uses (controller/src/forges).
pub(super) fn forge_of(p: &Project) -> Option<ForgeKey> {
    if let Some(gl) = &p.spec.gitlab {
        return Some(ForgeKey {
            kind: ForgeKind::GitLab,
            api: gl.api_url.clone().unwrap_or_else(|| "https://gitlab.com/api/v4".into()),
            token_env: gl.token_env.clone().unwrap_or_else(|| aoctl_controller::DEFAULT_GITLAB_TOKEN_ENV.into()),
        });
    }
    p.spec.repo.as_deref().filter(|r| r.contains('/'))?;
    let gh = p.spec.github.as_ref();
    Some(ForgeKey {
        kind: ForgeKind::GitHub,
        api: gh.and_then(|g| g.api_url.clone()).unwrap_or_else(|| "https://api.github.com".into()),
        token_env: gh.and_then(|g| g.token_env.clone()).unwrap_or_else(|| aoctl_controller::DEFAULT_TOKEN_ENV.into()),
    })
}

pub(super) async fn forge_checks(fleet: Option<&Fleet>) -> Vec<Check> {
    let Some(fleet) = fleet else {
        return vec![Check::skip("forge", "forge tokens: the server's projects are not known")];
    };
    let mut by_key: BTreeMap<ForgeKey, Vec<String>> = BTreeMap::new();
    for p in &fleet.projects {
        if let Some(key) = forge_of(p) {
            by_key.entry(key).or_default().push(p.metadata.name.clone());
        }
    }
    if by_key.is_empty() {
        return vec![Check::skip("forge", "forge tokens: no project has a forge")];
    }
    let http = match reqwest::Client::builder()
        .timeout(FORGE_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        .user_agent(concat!("aoctl/", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(h) => h,
        Err(e) => return vec![Check::fail("forge", format!("forge tokens: no HTTP client: {e}"), "report this bug")],
    };
    let checks = by_key.into_iter().map(|(key, projects)| {
        let http = http.clone();
        async move {
            let bounded = tokio::time::timeout(FORGE_TIMEOUT * 3, forge_check(&http, &key, &projects)).await;
            bounded.unwrap_or_else(|_| {
                let detail = format!("{}: {} did not answer in time", projects.join(", "), key.api);
                Check::fail(format!("forge:{}", projects.join(",")), detail, "check the network and spec.*.apiUrl")
            })
        }
    });
    futures::future::join_all(checks).await
}

/// What a forge said about a token, and what is wrong with it.
#[derive(Debug, Default, PartialEq)]
pub(super) struct TokenFacts {
    pub(super) login: String,
    /// The token's scopes; `None` when the forge does not tell (GitHub's fine-grained tokens).
    pub(super) scopes: Option<Vec<String>>,
    /// Rate windows: name, remaining, limit.
    pub(super) windows: Vec<(String, u64, u64)>,
}

pub(super) async fn forge_check(http: &reqwest::Client, key: &ForgeKey, projects: &[String]) -> Check {
    let name = format!("forge:{}", projects.join(","));
    let who = format!("{} ({} {})", projects.join(", "), key.kind.as_str(), key.api);
    let token = match std::env::var(&key.token_env).ok().filter(|t| !t.trim().is_empty()) {
        Some(t) => t,
        None => {
            return Check::fail(
                name,
                format!("{who}: {} is not set in this environment", key.token_env),
                format!(
                    "export {}=<a {} token> before `aoctl up` (the server reads it from its own environment)",
                    key.token_env,
                    needed_scope(key.kind)
                ),
            )
        }
    };
    let facts = match key.kind {
        ForgeKind::GitHub => github_facts(http, &key.api, &token).await,
        ForgeKind::GitLab => gitlab_facts(http, &key.api, &token).await,
    };
    match facts {
        Ok(f) => judge_token(name, &who, key, &f),
        Err(ForgeError::Refused(code)) => Check::fail(
            name,
            format!("{who}: the token in {} is refused ({code})", key.token_env),
            format!("make a new {} token and set {}", needed_scope(key.kind), key.token_env),
        ),
        Err(e) => Check::fail(name, format!("{who}: {e}"), "check the network and the project's apiUrl"),
    }
}

pub(super) fn needed_scope(kind: ForgeKind) -> &'static str {
    match kind {
        ForgeKind::GitHub => "`repo`-scoped (or fine-grained, with contents, pull requests and checks)",
        ForgeKind::GitLab => "`api`-scoped",
    }
}

/// The line of a token the forge took: whose it is, its scopes, its budget; warnings for a
/// missing scope or a budget below a tenth.
pub(super) fn judge_token(name: String, who: &str, key: &ForgeKey, f: &TokenFacts) -> Check {
    let mut detail = format!("{who}: {} is {}'s", key.token_env, or_unknown(&f.login));
    let mut problems: Vec<(String, String)> = vec![];
    let needed = match key.kind {
        ForgeKind::GitHub => "repo",
        ForgeKind::GitLab => "api",
    };
    match (&f.scopes, key.kind) {
        (Some(s), _) => {
            let _ = write!(detail, "; scopes {}", if s.is_empty() { "none".to_string() } else { s.join(", ") });
            if !s.iter().any(|x| x == needed) {
                problems.push((
                    format!("it lacks the `{needed}` scope"),
                    format!("give the token the `{needed}` scope, or make a new one"),
                ));
            }
        }
        (None, ForgeKind::GitHub) => {
            detail.push_str("; no X-OAuth-Scopes sent, so a fine-grained token (its permissions are not checked)")
        }
        (None, ForgeKind::GitLab) => detail.push_str("; its scopes are not reported"),
    }
    if !f.windows.is_empty() {
        let shown: Vec<String> = f.windows.iter().map(|(n, rem, lim)| format!("{n} {rem}/{lim}")).collect();
        let _ = write!(detail, "; budget {} left", shown.join(", "));
    }
    for (n, rem, lim) in &f.windows {
        if *lim > 0 && (*rem as f64) < (*lim as f64) * LOW_BUDGET {
            problems.push((
                format!("the {n} budget is low ({rem} of {lim} left)"),
                "wait for the reset, or give projects a longer pollInterval or their own tokens".to_string(),
            ));
        }
    }
    if problems.is_empty() {
        return Check::ok(name, detail);
    }
    let (whys, fixes): (Vec<String>, Vec<String>) = problems.into_iter().unzip();
    Check::warn(name, format!("{detail}; {}", whys.join("; ")), fixes.join("; "))
}

/// Why a forge told nothing about a token.
#[derive(Debug, thiserror::Error)]
pub(super) enum ForgeError {
    #[error("the token is refused ({0})")]
    Refused(u16),
    #[error("{url} answered {code}")]
    Status { url: String, code: u16 },
    #[error("cannot reach {url}: {detail}")]
    Unreachable { url: String, detail: String },
    #[error("{url}: unexpected answer: {detail}")]
    Invalid { url: String, detail: String },
}

/// GETs `url` with `headers`; the answer's headers and JSON body. 401 and 403 are `Refused`.
pub(super) async fn get_json(
    http: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
) -> Result<(reqwest::header::HeaderMap, Value), ForgeError> {
    let mut req = http.get(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.map_err(|e| ForgeError::Unreachable { url: url.to_string(), detail: innermost(&e) })?;
    let code = resp.status().as_u16();
    if code == 401 || code == 403 {
        return Err(ForgeError::Refused(code));
    }
    if !resp.status().is_success() {
        return Err(ForgeError::Status { url: url.to_string(), code });
    }
    let headers = resp.headers().clone();
    let body =
        resp.json::<Value>().await.map_err(|e| ForgeError::Invalid { url: url.to_string(), detail: innermost(&e) })?;
    Ok((headers, body))
}

/// The innermost message of an error chain: reqwest's own says little.
pub(super) fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        msg = s.to_string();
        cur = s.source();
    }
    msg
}

/// `GET /user` (the login, `X-OAuth-Scopes`) and `GET /rate_limit` (free: it costs no budget).
pub(super) async fn github_facts(http: &reqwest::Client, api: &str, token: &str) -> Result<TokenFacts, ForgeError> {
    let api = api.trim_end_matches('/');
    let auth = format!("Bearer {token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("accept", "application/vnd.github+json"),
        ("x-github-api-version", "2022-11-28"),
    ];
    let (h, user) = get_json(http, &format!("{api}/user"), &headers).await?;
    let scopes = h
        .get("x-oauth-scopes")
        .and_then(|v| v.to_str().ok())
        .map(|s| s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(str::to_string).collect::<Vec<_>>());
    let (_, limits) = get_json(http, &format!("{api}/rate_limit"), &headers).await?;
    Ok(TokenFacts { login: str_of(&user, "/login"), scopes, windows: github_windows(&limits) })
}

/// `core` and `graphql` of a `/rate_limit` answer.
pub(super) fn github_windows(limits: &Value) -> Vec<(String, u64, u64)> {
    ["core", "graphql"]
        .iter()
        .filter_map(|w| {
            let r = limits.pointer(&format!("/resources/{w}"))?;
            Some((w.to_string(), r.get("remaining")?.as_u64()?, r.get("limit")?.as_u64()?))
        })
        .collect()
}

/// `GET /user` (the username, and the `RateLimit-*` headers when GitLab sends them) and
/// `GET /personal_access_tokens/self` for the scopes (a project, group or older GitLab's token
/// may not say).
pub(super) async fn gitlab_facts(http: &reqwest::Client, api: &str, token: &str) -> Result<TokenFacts, ForgeError> {
    let api = api.trim_end_matches('/');
    let headers = [("private-token", token)];
    let (h, user) = get_json(http, &format!("{api}/user"), &headers).await?;
    let header = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    let windows = match (header("ratelimit-remaining"), header("ratelimit-limit")) {
        (Some(rem), Some(lim)) => vec![("api".to_string(), rem, lim)],
        _ => vec![],
    };
    let scopes = match get_json(http, &format!("{api}/personal_access_tokens/self"), &headers).await {
        Ok((_, t)) => t
            .get("scopes")
            .and_then(Value::as_array)
            .map(|s| s.iter().filter_map(Value::as_str).map(str::to_string).collect::<Vec<_>>()),
        Err(_) => None,
    };
    Ok(TokenFacts { login: str_of(&user, "/username"), scopes, windows })
}

pub(super) fn str_of(v: &Value, pointer: &str) -> String {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_string()
}

// ---------------------------------------------------------------- webhooks

/// For each project with a forge: whether its webhooks are heard. The server records that only
/// in its sessions' `ForgeSynced` condition ("read on GitHub webhooks …"), so a project whose
/// sessions do not say so is taken as polled.
pub(super) fn webhook_checks(fleet: Option<&Fleet>) -> Vec<Check> {
    let Some(fleet) = fleet else {
        return vec![Check::skip("webhooks", "webhooks: the server's projects are not known")];
    };
    let checks: Vec<Check> = fleet
        .projects
        .iter()
        .filter_map(|p| forge_of(p).map(|k| webhook_check(p, k.kind, fleet, |v| std::env::var_os(v).is_some())))
        .collect();
    if checks.is_empty() {
        return vec![Check::skip("webhooks", "webhooks: no project has a forge")];
    }
    checks
}

pub(super) fn webhook_check(p: &Project, kind: ForgeKind, fleet: &Fleet, set: impl Fn(&str) -> bool) -> Check {
    let project = &p.metadata.name;
    let name = format!("webhooks:{project}");
    let forge = kind.as_str();
    let (var, doc) = match kind {
        ForgeKind::GitHub => (
            p.spec
                .github
                .as_ref()
                .and_then(|g| g.webhook_secret_env.clone())
                .unwrap_or_else(|| aoctl_controller::DEFAULT_WEBHOOK_SECRET_ENV.into()),
            "docs/github.md#webhooks",
        ),
        ForgeKind::GitLab => (
            p.spec
                .gitlab
                .as_ref()
                .and_then(|g| g.webhook_token_env.clone())
                .unwrap_or_else(|| aoctl_controller::DEFAULT_GITLAB_WEBHOOK_TOKEN_ENV.into()),
            "docs/gitlab.md#webhooks",
        ),
    };
    let heard =
        fleet.sessions.iter().filter(|s| &s.spec.project == project).any(|s| {
            s.status.conditions.iter().any(|c| c.type_ == types::FORGE_SYNCED && c.message.contains(" webhooks"))
        });
    if heard {
        return Check::ok(name, format!("{project}: {forge} webhooks heard (its sessions are read on webhooks)"));
    }
    let polling = "polling only (slower, costs budget)";
    if !set(&var) {
        return Check::warn(
            name,
            format!("{project}: {var} is not set here, so the server cannot verify {forge} webhooks; {polling}"),
            format!("set {var} in the server's environment and add the webhook: {doc}"),
        );
    }
    Check::warn(
        name,
        format!("{project}: no {forge} webhook heard since the server started; {polling}"),
        format!("add the webhook with the secret of {var}: {doc}"),
    )
}
