//! The forges and trackers of projects, behind one interface: a project's changes, CI and
//! reviews live on a [`Forge`] (GitHub for `spec.repo`, GitLab for `spec.gitlab`), its issues on
//! a [`Tracker`] (Linear for `spec.linear`, else that forge's), each a trait with one
//! implementation per client. One client (and one shared
//! rate-limit budget) per service, API URL and token, the token read from the environment
//! variable the project names, handed out labelled with the project's name; every request
//! counted in `aoctl_{github,gitlab,linear}_requests_total`, what it cost against the limits in
//! `aoctl_forge_requests_counted_total{service,project}`, and the lowest budget of each service
//! in `aoctl_{…}_ratelimit_remaining`. The hub also remembers which projects' webhooks have been
//! heard from, so that their polls can be rarer, and tells who a project trusts to speak to its
//! agents ([`Trust`]).

mod error;
mod forge;
mod github;
mod gitlab;
mod linear;
mod tracker;
mod trust;

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::Arc;

use aoctl_api::project::Project;
use aoctl_forge_core::{Budget, BudgetKey, Observer, RequestRecord, Service};
use parking_lot::Mutex;
use prometheus::{IntCounterVec, IntGauge};

use crate::metrics::Metrics;

pub(crate) use error::ForgeError;
pub(crate) use forge::{poll_interval, Forge, SharedForge};
pub(crate) use github::GitHub;
pub(crate) use gitlab::GitLab;
pub(crate) use linear::Linear;
pub(crate) use tracker::{issue_number, SharedTracker, Tracker};
pub(crate) use trust::{Trust, Vouch, ACTIONS_BOT};

/// The token variable of a GitHub project that names none.
pub const DEFAULT_TOKEN_ENV: &str = "GITHUB_TOKEN";
/// The webhook secret variable of a GitHub project that names none.
pub const DEFAULT_WEBHOOK_SECRET_ENV: &str = "AOCTL_WEBHOOK_SECRET";
/// The token variable of a GitLab project that names none.
pub const DEFAULT_GITLAB_TOKEN_ENV: &str = "GITLAB_TOKEN";
/// The webhook token variable of a GitLab project that names none.
pub const DEFAULT_GITLAB_WEBHOOK_TOKEN_ENV: &str = "AOCTL_GITLAB_WEBHOOK_TOKEN";
/// The API key variable of a Linear project that names none.
pub(crate) const DEFAULT_LINEAR_TOKEN_ENV: &str = "LINEAR_API_KEY";
/// The webhook secret variable of a Linear project that names none.
pub(crate) const DEFAULT_LINEAR_WEBHOOK_SECRET_ENV: &str = "AOCTL_LINEAR_WEBHOOK_SECRET";

/// The metrics of one forge: requests by endpoint and code, what they cost by project, and the
/// lowest budget left.
#[derive(Clone)]
struct ForgeMetrics {
    service: Service,
    requests: IntCounterVec,
    counted: IntCounterVec,
    remaining: IntGauge,
}

/// Clients by key, made on first use.
struct Clients<K, C> {
    by_key: Mutex<HashMap<K, C>>,
}

impl<K: Eq + Hash, C: Clone> Clients<K, C> {
    fn new() -> Self {
        Clients { by_key: Mutex::new(HashMap::new()) }
    }

    fn get_or_make<E>(&self, key: K, make: impl FnOnce() -> Result<C, E>) -> Result<C, E> {
        let mut clients = self.by_key.lock();
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        let c = make()?;
        clients.insert(key, c.clone());
        Ok(c)
    }

    fn all(&self) -> Vec<C> {
        self.by_key.lock().values().cloned().collect()
    }
}

/// Every client of every project, shared by the reconcilers and the webhook handlers.
pub(crate) struct Hub {
    github: Clients<BudgetKey, aoctl_github::Client>,
    github_metrics: ForgeMetrics,
    gitlab: Clients<BudgetKey, aoctl_gitlab::Client>,
    gitlab_metrics: ForgeMetrics,
    linear: Clients<BudgetKey, aoctl_linear::Client>,
    linear_metrics: ForgeMetrics,
    /// Projects whose webhooks have been heard from since this controller started.
    webhooks_heard: Mutex<HashSet<String>>,
    /// Forges given by name of project in place of the one its spec names (tests only, so a
    /// production lookup takes no lock for it).
    #[cfg(test)]
    given: Mutex<HashMap<String, SharedForge>>,
}

/// A budget whose every request is counted in the forge's metrics.
fn counted_budget(m: &ForgeMetrics) -> Arc<Budget> {
    let m = m.clone();
    let observer: Observer = Arc::new(move |r: &RequestRecord<'_>| {
        m.requests.with_label_values(&[r.endpoint, &r.code_label()]).inc();
        if r.counted > 0 {
            m.counted.with_label_values(&[m.service.label(), r.label]).inc_by(r.counted);
        }
    });
    Arc::new(Budget::new().with_observer(observer))
}

/// The value of the variable `var`, when it is set and not empty.
fn env(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

impl Hub {
    /// A hub whose requests and budgets are counted in the controller's metrics.
    pub(crate) fn counted_in(metrics: &Metrics) -> Hub {
        let counted = |service, requests: &IntCounterVec, remaining: &IntGauge| ForgeMetrics {
            service,
            requests: requests.clone(),
            counted: metrics.forge_counted.clone(),
            remaining: remaining.clone(),
        };
        Hub {
            github: Clients::new(),
            github_metrics: counted(Service::GitHub, &metrics.github_requests, &metrics.github_ratelimit_remaining),
            gitlab: Clients::new(),
            gitlab_metrics: counted(Service::GitLab, &metrics.gitlab_requests, &metrics.gitlab_ratelimit_remaining),
            linear: Clients::new(),
            linear_metrics: counted(Service::Linear, &metrics.linear_requests, &metrics.linear_ratelimit_remaining),
            webhooks_heard: Mutex::default(),
            #[cfg(test)]
            given: Mutex::default(),
        }
    }

    /// A verified webhook delivery for `project` arrived: its webhooks work.
    pub(crate) fn webhook_heard(&self, project: &str) {
        self.webhooks_heard.lock().insert(project.to_string());
    }

    /// Whether a verified webhook delivery for `project` arrived since this controller started.
    pub(crate) fn webhooks_work(&self, project: &str) -> bool {
        self.webhooks_heard.lock().contains(project)
    }

    /// The forge of a project's changes: GitLab for `spec.gitlab`, GitHub for `spec.repo`;
    /// `None` when it has neither.
    pub(crate) fn forge(&self, project: &Project) -> Result<Option<SharedForge>, ForgeError> {
        #[cfg(test)]
        if let Some(f) = self.given.lock().get(&project.metadata.name) {
            return Ok(Some(f.clone()));
        }
        self.forge_with(project, None)
    }

    /// Serves `forge` as project `project`'s forge and tracker, whatever its spec names: how a
    /// reconcile is tested against a forge of the test's own.
    #[cfg(test)]
    pub(crate) fn give(&self, project: &str, forge: SharedForge) {
        self.given.lock().insert(project.to_string(), forge);
    }

    /// The project's forge as the identity whose token is in `token_env` (a reviewer bot's):
    /// `None` when the project has no forge or the variable is not set.
    pub(crate) fn forge_as(&self, project: &Project, token_env: &str) -> Result<Option<SharedForge>, ForgeError> {
        if env(token_env).is_none() {
            return Ok(None);
        }
        self.forge_with(project, Some(token_env))
    }

    fn forge_with(&self, project: &Project, token_env: Option<&str>) -> Result<Option<SharedForge>, ForgeError> {
        if let Some(gl) = &project.spec.gitlab {
            let api_url = gl.api_url.clone().unwrap_or_else(|| aoctl_gitlab::DEFAULT_API_URL.to_string());
            let token = env(token_env.or(gl.token_env.as_deref()).unwrap_or(DEFAULT_GITLAB_TOKEN_ENV));
            let key = BudgetKey::new(&api_url, token.as_deref());
            let client = self
                .gitlab
                .get_or_make(key, || {
                    aoctl_gitlab::Client::with_budget(&api_url, token, counted_budget(&self.gitlab_metrics))
                })?
                .labelled(&project.metadata.name);
            return Ok(Some(Arc::new(GitLab { client, project: gl.project_path.clone() })));
        }
        let Some(repo) = project.spec.repo.as_deref() else { return Ok(None) };
        let Some((owner, name)) = repo.split_once('/') else { return Ok(None) };
        let gh = project.spec.github.as_ref();
        let api_url = gh.and_then(|g| g.api_url.clone()).unwrap_or_else(|| aoctl_github::DEFAULT_API_URL.to_string());
        let token = env(token_env.or(gh.and_then(|g| g.token_env.as_deref())).unwrap_or(DEFAULT_TOKEN_ENV));
        let key = BudgetKey::new(&api_url, token.as_deref());
        let client = self
            .github
            .get_or_make(key, || {
                aoctl_github::Client::with_budget(&api_url, token, counted_budget(&self.github_metrics))
            })?
            .labelled(&project.metadata.name);
        Ok(Some(Arc::new(GitHub { client, owner: owner.to_string(), repo: name.to_string() })))
    }

    /// The tracker of a project's issues: Linear for `spec.linear`, else its forge's; `None`
    /// when it has none.
    pub(crate) fn tracker(&self, project: &Project) -> Result<Option<SharedTracker>, ForgeError> {
        if let Some(l) = &project.spec.linear {
            let api_url = l.api_url.clone().unwrap_or_else(|| aoctl_linear::DEFAULT_API_URL.to_string());
            let token = env(l.token_env.as_deref().unwrap_or(DEFAULT_LINEAR_TOKEN_ENV));
            let key = BudgetKey::new(&api_url, token.as_deref());
            let client = self
                .linear
                .get_or_make(key, || {
                    aoctl_linear::Client::with_budget(&api_url, token, counted_budget(&self.linear_metrics))
                })?
                .labelled(&project.metadata.name);
            return Ok(Some(Arc::new(Linear { client })));
        }
        Ok(self.forge(project)?.map(|f| f as SharedTracker))
    }

    /// Sets each `aoctl_*_ratelimit_remaining` to the lowest remaining budget of any token.
    pub(crate) fn refresh_gauge(&self) {
        let lowest = |budgets: Vec<Option<u32>>, gauge: &IntGauge| {
            if let Some(min) = budgets.into_iter().flatten().min() {
                gauge.set(i64::from(min));
            }
        };
        lowest(self.github.all().iter().map(|c| c.budget().remaining()).collect(), &self.github_metrics.remaining);
        lowest(self.gitlab.all().iter().map(|c| c.budget().remaining()).collect(), &self.gitlab_metrics.remaining);
        lowest(self.linear.all().iter().map(|c| c.budget().remaining()).collect(), &self.linear_metrics.remaining);
    }
}

/// The GitHub webhook secret of a project, from the variable it names.
pub(crate) fn webhook_secret(project: &Project) -> Option<String> {
    let var = project.spec.github.as_ref().and_then(|g| g.webhook_secret_env.clone());
    env(var.as_deref().unwrap_or(DEFAULT_WEBHOOK_SECRET_ENV))
}

/// The GitLab webhook token of a project on GitLab, from the variable it names.
pub(crate) fn gitlab_webhook_token(project: &Project) -> Option<String> {
    let gl = project.spec.gitlab.as_ref()?;
    env(gl.webhook_token_env.as_deref().unwrap_or(DEFAULT_GITLAB_WEBHOOK_TOKEN_ENV))
}

/// The Linear webhook signing secret of a project whose issues are on Linear.
pub(crate) fn linear_webhook_secret(project: &Project) -> Option<String> {
    let l = project.spec.linear.as_ref()?;
    env(l.webhook_secret_env.as_deref().unwrap_or(DEFAULT_LINEAR_WEBHOOK_SECRET_ENV))
}
