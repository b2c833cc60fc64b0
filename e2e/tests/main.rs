//! End-to-end tests of aoctl: the real `aoctl` binary serving on a free port with a real sled
//! data dir, driven over HTTP and through its CLI, with real git repositories. The bad-input
//! corpus is in e2e/corpus/. Each test starts its own server, so tests run in parallel.
//!
//! They drive tmux, docker and Unix processes, so they build on Unix only; the Windows build has
//! its own end-to-end run under Wine (e2e/windows/, docs/windows.md).
#![cfg(unix)]

#[path = "../support/disk.rs"]
mod disk;
#[path = "../support/etcd.rs"]
mod etcd;
mod harness;
#[path = "../support/strict.rs"]
mod strict;

mod agent_env;
mod auth;
mod backup;
mod bad_input;
mod cli;
mod dashboard_login;
mod dashboard_serving;
mod dashboard_streams;
mod doctor;
mod durability;
mod etcd_store;
mod full_disk;
mod gitsource;
mod races;
mod security;
mod semantics;
mod system;
mod up_down;
mod watch;

mod lifecycle;
mod mcp;
mod model_agents;
mod newcomer;
mod orchestrator;
mod pool;
mod quickstart;
mod real_agent;
mod real_clis;
mod recovery;
mod replicas;
mod sessions;
mod terminal;
mod truth;
mod typing;

mod browser;
mod dashboard;
mod dashboard_held;
mod dashboard_orchestrator;

mod docker_hosts;
mod docker_sandbox;
mod docker_sessions;
mod escalation;
mod forge_budget;
mod github_feedback;
mod github_loop;
mod github_waiting;
mod gitlab_loop;
mod issuesource;
mod linear_issues;
mod logs;
mod observability;
mod overlap;
mod ratelimit;
mod receivers;
mod reviewers;
mod slow_notifiers;
mod standin;
mod usage_limits;
mod webhooks;
