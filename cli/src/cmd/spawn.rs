//! `aoctl spawn`: create a Session from flags and a prompt. Without `--name` the server generates
//! one from the project's name; `--wait` then waits as `apply --wait` does and prints the phase.

use std::cell::RefCell;
use std::process::ExitCode;

use anyhow::bail;
use aoctl_api::session::AgentRef;
use aoctl_api::{Kind, Session};
use serde_json::Value;

use super::{emit, text_arg};
use crate::args::SpawnArgs;
use crate::client::Client;
use crate::object;
use crate::wait;

/// Longest `generateName` the server takes: the store appends five characters to it.
const MAX_GENERATE_NAME: usize = 58;

pub(crate) async fn run(client: &Client, a: SpawnArgs) -> anyhow::Result<ExitCode> {
    let prompt = text_arg(&a.prompt)?;
    if prompt.trim().is_empty() {
        bail!("the prompt is empty");
    }
    let body = serde_json::to_value(session(&a, &prompt))?;
    let created = client.create(Kind::Session, &body, false).await?;
    let name = object::name(&created).to_string();
    let reference = object::reference(Kind::Session, &name);
    emit(&format!("{reference} created\n"));
    if let Some(timeout) = a.wait {
        let phase = RefCell::new(object::session_phase(&created));
        let check = |o: Option<&Value>| {
            if let Some(o) = o {
                *phase.borrow_mut() = object::session_phase(o);
            }
            wait::ready(Kind::Session, o)
        };
        let done = wait::wait_for(client, Kind::Session, std::slice::from_ref(&name), timeout, check).await?;
        let note = done.into_iter().next().map(|(_, note)| note).unwrap_or_default();
        emit(&format!("{reference} {}\n", waited(&note, &phase.borrow())));
    }
    Ok(ExitCode::SUCCESS)
}

/// The Session the flags describe; the project's defaults fill in what they leave out.
pub(crate) fn session(a: &SpawnArgs, prompt: &str) -> Session {
    let mut s = Session::new(a.name.as_deref().unwrap_or_default(), &a.project, prompt);
    if a.name.is_none() {
        s.metadata.generate_name = Some(generate_name(&a.project));
    }
    s.metadata.labels = a.labels.iter().cloned().collect();
    s.spec.agent = a.agent.clone().map(AgentRef::Builtin);
    s.spec.runtime = a.runtime;
    s
}

/// `<project>-`, the project's name shortened if needed so that the generated name fits.
fn generate_name(project: &str) -> String {
    let keep = project.len().min(MAX_GENERATE_NAME - 1);
    format!("{}-", project[..keep].trim_end_matches('-'))
}

/// What `--wait` prints after the reference: how the wait ended, and the phase.
fn waited(note: &str, phase: &str) -> String {
    if note.contains(phase) {
        note.to_string()
    } else {
        format!("{note}, phase {phase}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Cli, Command};
    use clap::Parser;
    use serde_json::json;

    fn spawn_args(args: &[&str]) -> SpawnArgs {
        let argv = ["aoctl", "spawn"].iter().chain(args).copied();
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Spawn(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_become_a_session() {
        let a = spawn_args(&["--project", "demo", "p"]);
        let v = serde_json::to_value(session(&a, "Fix the login\nredirect")).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"generateName": "demo-"},
                "spec": {"project": "demo", "prompt": "Fix the login\nredirect"}})
        );

        let a = spawn_args(&[
            "--project",
            "demo",
            "--name",
            "fix-login",
            "--agent",
            "aider",
            "--runtime",
            "tmux",
            "--label",
            "team=web",
            "p",
        ]);
        let v = serde_json::to_value(session(&a, "p")).unwrap();
        assert_eq!(v["metadata"], json!({"name": "fix-login", "labels": {"team": "web"}}));
        assert_eq!(v["spec"], json!({"project": "demo", "agent": "aider", "runtime": "tmux", "prompt": "p"}));
        // What the server decodes and validates.
        let back: Session = serde_json::from_value(v).unwrap();
        assert_eq!(back.metadata.name, "fix-login");
    }

    #[test]
    fn generated_names_fit() {
        assert_eq!(generate_name("demo"), "demo-");
        // Cut after 57 characters, at a `-`: no `--`.
        let long = format!("{}-{}", "a".repeat(56), "c".repeat(6));
        let g = generate_name(&long);
        assert_eq!(g, format!("{}-", "a".repeat(56)));
        assert!(g.len() <= MAX_GENERATE_NAME);
        let mut meta =
            aoctl_api::ObjectMeta { generate_name: Some(generate_name(&"x".repeat(63))), ..Default::default() };
        let mut errs = vec![];
        aoctl_api::validate::validate_meta(&meta, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        meta.generate_name = Some(format!("{}-", "x".repeat(60)));
        aoctl_api::validate::validate_meta(&meta, &mut errs);
        assert!(!errs.is_empty(), "the server's limit is what this guards against");
    }

    #[test]
    fn wait_lines() {
        assert_eq!(waited("settled in phase Working", "Working"), "settled in phase Working");
        assert_eq!(waited("ready", "Idle"), "ready, phase Idle");
    }
}
