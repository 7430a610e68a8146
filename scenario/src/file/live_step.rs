//! One step given outside a scenario file — live mode's control API — read
//! with the file's vocabulary and checked against what earlier steps did,
//! so `POST /actions` and a `[[step]]` table mean the same thing and are
//! refused for the same reasons.

use racksim_sim::{rack::RackSpec, Action, InstanceSpec};

use super::{
    error::Locator,
    raw::RawStep,
    steps::{step_action, PlanState},
};

/// Reads steps one at a time, in the order they are applied.
#[derive(Clone)]
pub struct StepChecker {
    rack: RackSpec,
    instances: Vec<InstanceSpec>,
    state: PlanState,
}

impl StepChecker {
    /// Steps on `rack`, whose declared instances are `instances`.
    pub fn new(rack: &RackSpec, instances: &[InstanceSpec]) -> Self {
        StepChecker {
            rack: rack.clone(),
            instances: instances.to_vec(),
            state: PlanState::new(rack),
        }
    }

    /// `fields`: a step's fields without `at`, as TOML (`action =
    /// "crash"`, `host = "sled3"`). The action, or why not — naming the
    /// offending field and, where it helps, a hint. A refused step leaves
    /// the checker as it was.
    pub fn check(&mut self, fields: &str) -> Result<Action, String> {
        // The step happens now: `at` is only there to make it a step.
        let text = format!("at = \"0s\"\n{fields}");
        let loc = Locator {
            origin: "step",
            text: &text,
        };
        let render = |span: Option<std::ops::Range<usize>>, message: String, hint| {
            let e = loc.error(span, message, hint);
            let mut out = format!("{} (at `{}`)", e.message, e.source_line.trim());
            if let Some(h) = e.hint {
                out.push_str("; hint: ");
                out.push_str(&h);
            }
            out
        };
        let raw: RawStep = toml::from_str(&text)
            .map_err(|e| render(e.span(), e.message().trim().to_string(), None))?;
        let mut next = self.state.clone();
        let action = step_action(&raw, &self.rack, &self.instances, &mut next)
            .map_err(|(span, message, hint)| render(Some(span), message, hint))?;
        self.state = next;
        Ok(action)
    }
}

#[cfg(test)]
mod tests;
