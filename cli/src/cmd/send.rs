//! `aoctl send`: type a message into a session's agent. The server answers once it has seen the
//! message arrive, or once it queued a message for an agent that has not had its first prompt yet
//! (202, printed as what will happen); a session that will not run (409) or a message that did not
//! arrive (504) is an error. `aoctl answer` sends the same way, as the answer to the agent's
//! question.

use std::process::ExitCode;

use super::{emit, text_arg};
use crate::args::SendArgs;
use crate::client::Client;

pub(crate) async fn run(client: &Client, a: SendArgs) -> anyhow::Result<ExitCode> {
    let text = text_arg(&a.text)?;
    let answer = client.send_input(&a.session, &text).await?;
    let shown = match Some(answer.message).filter(|m| !m.is_empty()) {
        Some(m) => m,
        None => format!("delivered {} characters to session \"{}\"", text.chars().count(), a.session),
    };
    emit(&format!("{shown}\n"));
    Ok(ExitCode::SUCCESS)
}

/// `aoctl answer`: the answer to the question the session's agent asked; an error naming the
/// session when none waits.
pub(crate) async fn answer(client: &Client, a: SendArgs) -> anyhow::Result<ExitCode> {
    let text = text_arg(&a.text)?;
    let answer = client.answer(&a.session, &text).await?;
    emit(&format!("answered session \"{}\": {}\n", a.session, answer.message));
    Ok(ExitCode::SUCCESS)
}
