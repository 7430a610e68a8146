//! The fuzzer's known defects: failures that are recorded, not fixed.
//!
//! `scenarios/known-defects.toml` lists, for each defect the fuzzer finds
//! today, a *signature* a failing seed is matched against, the regression
//! file that reproduces it and why it is not fixed. `racksim fuzz` labels
//! every failing seed with the defect it matches, or `UNLISTED`, and
//! `cargo test` (`racksim/tests/fuzz_gate.rs`) fails on any unlisted one:
//! a new kind of failure cannot hide among the known ones.
//!
//! A signature is deliberately narrow:
//!
//! * `failure = "not-converged"` with `gaps`, patterns each matched against
//!   a whole gap of the verdict: `*` stands for any text, `{name}` for a
//!   word (no spaces) it names, nothing else is special. A run is listed
//!   only if *every* gap at its deadline is explained, so an unexplained gap
//!   is never hidden behind a known one. `follow_on_gaps` explain a gap
//!   only beside one of the entry's `gaps` whose `{names}` bind the same
//!   words: what follows from the defect for that instance, and for no
//!   other. `rack_follow_on_gaps` are what follows for the whole rack
//!   (Nexus down, say): patterns with no `{name}`, explained only in a
//!   run where one of the entry's primary gaps was found.
//! * `failure = "invariant"` with the `invariant`'s name (checked against
//!   the invariants that exist) and, optionally, a `message` pattern.
//! * `failure = "too-slow"`: converged, but later than the plan allows.
//!
//! A testbed error is never a known defect: the file cannot say one, and a
//! run that ends in one is counted apart (and `racksim fuzz` exits 3).
//!
//! Its parts: [`Pattern`] is the text pattern a signature is written in
//! (`pattern.rs`); `parse.rs` reads and validates the file ([`load`],
//! [`parse`]); this module holds what a defect is and how a failing seed
//! is classified against the file ([`KnownDefects::classify`]).

mod parse;
mod pattern;
#[cfg(test)]
mod tests;

use std::{collections::BTreeSet, path::PathBuf};

use racksim_nexus::instances::StartImpl;
use racksim_sim::ServiceNat;

use super::{Failure, Options, SeedResult};

pub use parse::{load, load_arg, parse};
pub use pattern::{Bindings, Pattern};

/// The committed file of known defects, read by default.
pub const KNOWN_DEFECTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../scenarios/known-defects.toml"
);

/// Fewest characters of literal text (outside `*`) a pattern must have, so
/// that no signature matches everything.
pub const MIN_LITERAL: usize = 8;

/// A parsed, validated known-defects file.
#[derive(Clone, Debug, Default)]
pub struct KnownDefects {
    /// Where it was read from (`none` when disabled).
    pub origin: String,
    pub defects: Vec<Defect>,
}

#[derive(Clone, Debug)]
pub struct Defect {
    pub id: String,
    pub signature: Signature,
    /// The regression file that reproduces it (resolved against the
    /// known-defects file's directory; it exists and parses).
    pub regression: PathBuf,
    pub why: String,
    /// The racks, service-NAT strategies and start implementations it
    /// applies to (`None`: all).
    pub racks: Option<Vec<String>>,
    pub strategies: Option<Vec<ServiceNat>>,
    pub starts: Option<Vec<StartImpl>>,
}

/// What a failing run must look like to be this defect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signature {
    NotConverged {
        gaps: Vec<Pattern>,
        follow_on: Vec<Pattern>,
        /// Gaps that follow for the whole rack (no names to tie).
        rack_follow_on: Vec<Pattern>,
    },
    Invariant {
        invariant: &'static str,
        message: Option<Pattern>,
    },
    TooSlow,
}

/// How a failing seed stands against the known defects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listing {
    /// Explained by these defects (ids, in file order).
    Listed(Vec<String>),
    /// Not explained; what no entry matches (the gaps, the violation).
    Unlisted(Vec<String>),
    /// The testbed failed: never a known defect.
    TestbedError,
}

impl Defect {
    /// Does this entry apply to a fuzz run with `opts`?
    pub fn applies_to(&self, opts: &Options) -> bool {
        self.racks.as_ref().is_none_or(|r| r.contains(&opts.rack))
            && self
                .strategies
                .as_ref()
                .is_none_or(|s| s.contains(&opts.strategy))
            && self.starts.as_ref().is_none_or(|s| s.contains(&opts.start))
    }

    /// The bindings of each of `gaps` that is one of this entry's primary
    /// gaps (not-converged entries only).
    fn primary_hits(&self, gaps: &[String]) -> Vec<(usize, Bindings)> {
        let Signature::NotConverged { gaps: patterns, .. } = &self.signature else {
            return Vec::new();
        };
        gaps.iter()
            .enumerate()
            .filter_map(|(i, g)| {
                patterns
                    .iter()
                    .find_map(|p| p.bind(g, &Vec::new()))
                    .map(|b| (i, b))
            })
            .collect()
    }

    /// Which of `gaps` this entry explains: its primary gaps, and its
    /// follow-on gaps bound like one of the primary gaps it found.
    fn explains(&self, gaps: &[String]) -> Vec<bool> {
        let hits = self.primary_hits(gaps);
        let mut explained = vec![false; gaps.len()];
        for (i, _) in &hits {
            explained[*i] = true;
        }
        if let Signature::NotConverged {
            follow_on,
            rack_follow_on,
            ..
        } = &self.signature
        {
            for (i, gap) in gaps.iter().enumerate() {
                explained[i] |= follow_on
                    .iter()
                    .any(|p| hits.iter().any(|(_, b)| p.bind(gap, b).is_some()));
                explained[i] |= !hits.is_empty() && rack_follow_on.iter().any(|p| p.matches(gap));
            }
        }
        explained
    }

    /// Does a whole failing run match this entry's signature (ignoring
    /// which racks and strategies it applies to)? For `not-converged`:
    /// this entry alone explains every gap.
    pub fn matches(&self, result: &SeedResult) -> bool {
        match (&self.signature, &result.failure) {
            (Signature::NotConverged { .. }, Some(Failure::NotConverged(_))) => {
                !result.gaps.is_empty() && self.explains(&result.gaps).iter().all(|e| *e)
            }
            (Signature::Invariant { invariant, message }, Some(Failure::Invariant(inv))) => {
                invariant == inv
                    && message
                        .as_ref()
                        .is_none_or(|p| result.message.as_deref().is_some_and(|m| p.matches(m)))
            }
            (Signature::TooSlow, Some(Failure::TooSlow)) => true,
            _ => false,
        }
    }
}

impl KnownDefects {
    /// No known defects: every failure is unlisted.
    pub fn none() -> Self {
        KnownDefects {
            origin: "none".into(),
            defects: Vec::new(),
        }
    }

    /// The file as the summary names it: the committed one by its path in
    /// the repository (so output does not depend on where it is checked
    /// out), any other as given.
    pub fn name(&self) -> &str {
        if self.origin == KNOWN_DEFECTS {
            "scenarios/known-defects.toml"
        } else {
            &self.origin
        }
    }

    /// The entries that apply to `opts`.
    pub fn applicable<'a>(&'a self, opts: &'a Options) -> impl Iterator<Item = &'a Defect> + 'a {
        self.defects.iter().filter(|d| d.applies_to(opts))
    }

    /// How a seed's result stands; `None` if it passed.
    pub fn classify(&self, opts: &Options, result: &SeedResult) -> Option<Listing> {
        let failure = result.failure.as_ref()?;
        let applicable: Vec<&Defect> = self.applicable(opts).collect();
        let ids = |ds: Vec<&Defect>| -> Vec<String> {
            let mut seen = BTreeSet::new();
            ds.into_iter()
                .filter(|d| seen.insert(d.id.clone()))
                .map(|d| d.id.clone())
                .collect()
        };
        Some(match failure {
            Failure::TestbedError => Listing::TestbedError,
            Failure::NotConverged(first) => {
                // Every gap must be some entry's: one run may show two
                // known defects, but never a gap nobody explains.
                let mut explained = vec![false; result.gaps.len()];
                let mut by = Vec::new();
                for d in &applicable {
                    let e = d.explains(&result.gaps);
                    if e.iter().any(|x| *x) {
                        by.push(*d);
                    }
                    for (all, this) in explained.iter_mut().zip(e) {
                        *all |= this;
                    }
                }
                let mut unexplained: Vec<String> = result
                    .gaps
                    .iter()
                    .zip(&explained)
                    .filter(|(_, e)| !**e)
                    .map(|(g, _)| g.clone())
                    .collect();
                if result.gaps.is_empty() {
                    unexplained.push(first.clone());
                }
                if unexplained.is_empty() {
                    Listing::Listed(ids(by))
                } else {
                    Listing::Unlisted(unexplained)
                }
            }
            Failure::Invariant(_) | Failure::TooSlow => {
                match applicable.iter().find(|d| d.matches(result)) {
                    Some(d) => Listing::Listed(vec![d.id.clone()]),
                    None => Listing::Unlisted(vec![match &result.message {
                        Some(m) => format!("{failure}: {m}"),
                        None => failure.to_string(),
                    }]),
                }
            }
        })
    }
}
