//! The instance API's operations of a run, as their callers saw them.
//!
//! Convergence judges the rack; it does not say whether the API told a
//! user that a stop or delete failed. Each instance action of the plan is
//! a request to the instance API, and Nexus answers it with a trace line
//! (`nexus: stop web1: ok, stopped`, `…: failed: …`, or a refusal while
//! the control plane stops, with the fields `instance`, `op` and
//! `outcome`). [`operations`] pairs each request with its answer, in order
//! per instance and kind of operation (simplified: two requests of one
//! kind on one instance in flight together are paired first come, first
//! answered, so their times may swap; which answers there were does not
//! change); a request the run
//! ended without answering (its Nexus crashed with it in flight, or the
//! control plane never came back) has [`Answer::None`] — to its caller a
//! failure too, a connection that broke or a request that timed out.

use std::{collections::BTreeSet, fmt, time::Duration};

use crate::{
    plan::{Action, ResolvedStep},
    trace::{fmt_duration, fmt_time, Kind, TraceLine},
};

/// One request to the instance API and what it answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// When the plan made the request.
    pub requested_at: Duration,
    /// The plan's step, as it prints (`API: stop instance web1`).
    pub request: String,
    pub answer: Answer,
}

/// What the caller heard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Success, with the instance's state (`ok, stopped`).
    Ok { at: Duration, text: String },
    /// The operation reported failure (`failed: …`).
    Failed { at: Duration, text: String },
    /// No answer by the end of the run.
    None,
}

impl Operation {
    /// Whether the caller heard success.
    pub fn succeeded(&self) -> bool {
        matches!(self.answer, Answer::Ok { .. })
    }

    /// How long the caller waited for its answer, if it got one.
    pub fn took(&self) -> Option<Duration> {
        match &self.answer {
            Answer::Ok { at, .. } | Answer::Failed { at, .. } => Some(*at - self.requested_at),
            Answer::None => None,
        }
    }
}

/// `00:03:00.042175  API: start instance web1 on sled1: failed: … (after 36ms)`.
impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}  {}: ", fmt_time(self.requested_at), self.request)?;
        match (&self.answer, self.took()) {
            (Answer::Ok { text, .. } | Answer::Failed { text, .. }, Some(took)) => {
                write!(f, "{text} (after {})", fmt_duration(took))
            }
            _ => f.write_str("no answer by the end of the run"),
        }
    }
}

/// The instance API request a step makes, if any: the operation's name
/// in Nexus's answer and the instance's.
fn request(action: &Action) -> Option<(&'static str, &str)> {
    match action {
        Action::InstanceCreate { instance, .. } => Some(("create", instance)),
        Action::InstanceStart { instance, .. } => Some(("start", instance)),
        Action::InstanceStop { instance } => Some(("stop", instance)),
        Action::InstanceDelete { instance } => Some(("delete", instance)),
        _ => None,
    }
}

/// Every instance API request of the plan with its answer in the trace:
/// the first answer to the same operation on the same instance at or after
/// the request, not already another request's.
pub fn operations(steps: &[ResolvedStep], trace: &[TraceLine]) -> Vec<Operation> {
    let answers: Vec<(usize, &TraceLine)> = trace
        .iter()
        .enumerate()
        .filter(|(_, l)| l.kind == Kind::Instance && l.fields.contains_key("outcome"))
        .collect();
    let mut taken = BTreeSet::new();
    steps
        .iter()
        .filter_map(|step| {
            let (op, instance) = request(&step.action)?;
            let found = answers.iter().find(|(i, l)| {
                !taken.contains(i)
                    && l.at >= step.at
                    && l.fields.get("instance").map(String::as_str) == Some(instance)
                    && l.fields.get("op").map(String::as_str) == Some(op)
            });
            let answer = match found {
                Some((i, l)) => {
                    taken.insert(*i);
                    // What follows `nexus: stop web1: ` (Nexus may name
                    // the request with ` on sled1`).
                    let after = |sep: &str| match l.text.split_once(sep) {
                        Some((_, t)) => format!("{}{t}", sep.trim_start_matches(": ")),
                        // A refusal: its own words.
                        None => format!("failed: {}", l.text.trim_start_matches("nexus: ")),
                    };
                    match l.fields.get("outcome").map(String::as_str) {
                        Some("ok") => Answer::Ok {
                            at: l.at,
                            text: after(": ok, "),
                        },
                        _ => Answer::Failed {
                            at: l.at,
                            text: after(": failed: "),
                        },
                    }
                }
                None => Answer::None,
            };
            Some(Operation {
                requested_at: step.at,
                request: step.action.to_string(),
                answer,
            })
        })
        .collect()
}
