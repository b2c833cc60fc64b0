//! GitHub clients for projects: one client (and one shared rate-limit budget) per API URL and
//! token, the token read from the environment variable the project names, every request counted
//! in `aoctl_github_requests_total` and the budget in `aoctl_github_ratelimit_remaining`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aoctl_api::project::Project;
use aoctl_github::{Budget, BudgetKey, Client, DEFAULT_API_URL};
use prometheus::{IntCounterVec, IntGauge};

/// The token variable when a project names none.
pub const DEFAULT_TOKEN_ENV: &str = "GITHUB_TOKEN";
/// The webhook secret variable when a project names none.
pub const DEFAULT_WEBHOOK_SECRET_ENV: &str = "AOCTL_WEBHOOK_SECRET";

pub struct Hub {
    clients: Mutex<HashMap<BudgetKey, Client>>,
    requests: IntCounterVec,
    remaining: IntGauge,
}

impl Hub {
    pub fn new(requests: IntCounterVec, remaining: IntGauge) -> Hub {
        Hub { clients: Mutex::new(HashMap::new()), requests, remaining }
    }

    /// The client for a project with `spec.repo`, or `None` when it has none.
    pub fn client(&self, project: &Project) -> Result<Option<(Client, String, String)>, aoctl_github::Error> {
        let Some(repo) = project.spec.repo.as_deref() else { return Ok(None) };
        let Some((owner, name)) = repo.split_once('/') else { return Ok(None) };
        let gh = project.spec.github.as_ref();
        let api_url = gh.and_then(|g| g.api_url.clone()).unwrap_or_else(|| DEFAULT_API_URL.to_string());
        let token_env = gh.and_then(|g| g.token_env.clone()).unwrap_or_else(|| DEFAULT_TOKEN_ENV.to_string());
        let token = std::env::var(&token_env).ok().filter(|t| !t.is_empty());
        let key = BudgetKey::new(&api_url, token.as_deref());
        let mut clients = self.clients.lock().expect("github clients lock");
        let client = match clients.get(&key) {
            Some(c) => c.clone(),
            None => {
                let requests = self.requests.clone();
                let observer: aoctl_github::Observer = Arc::new(move |r: &aoctl_github::RequestRecord<'_>| {
                    requests.with_label_values(&[r.endpoint, &r.code_label()]).inc();
                });
                let budget = Arc::new(Budget::new().with_observer(observer));
                let c = Client::with_budget(&api_url, token, budget)?;
                clients.insert(key, c.clone());
                c
            }
        };
        Ok(Some((client, owner.to_string(), name.to_string())))
    }

    /// Sets `aoctl_github_ratelimit_remaining` to the lowest remaining budget of any token.
    pub fn refresh_gauge(&self) {
        let clients = self.clients.lock().expect("github clients lock");
        if let Some(min) = clients.values().filter_map(|c| c.budget().remaining()).min() {
            self.remaining.set(i64::from(min));
        }
    }
}

/// The webhook secret of a project, from the variable it names.
pub fn webhook_secret(project: &Project) -> Option<String> {
    let var = project
        .spec
        .github
        .as_ref()
        .and_then(|g| g.webhook_secret_env.clone())
        .unwrap_or_else(|| DEFAULT_WEBHOOK_SECRET_ENV.to_string());
    std::env::var(var).ok().filter(|s| !s.is_empty())
}
