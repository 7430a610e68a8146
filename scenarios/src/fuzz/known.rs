//! The fuzzer's known defects: failures that are recorded, not fixed.
//!
//! `scenarios/known-defects.toml` lists, for each defect the fuzzer finds
//! today, a *signature* a failing seed is matched against, the regression
//! file that reproduces it and why it is not fixed. `racksim fuzz` labels
//! every failing seed with the defect it matches, or `UNLISTED`, and
//! `cargo test` (`scenarios/tests/fuzz_gate.rs`) fails on any unlisted one:
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
//!   other.
//! * `failure = "invariant"` with the `invariant`'s name (checked against
//!   the invariants that exist) and, optionally, a `message` pattern.
//! * `failure = "too-slow"`: converged, but later than the plan allows.
//!
//! A testbed error is never a known defect: the file cannot say one, and a
//! run that ends in one is counted apart (and `racksim fuzz` exits 3).

use std::{
    collections::BTreeSet,
    ops::Range,
    path::{Path, PathBuf},
};

use racksim_reconciler::instances::StartImpl;
use racksim_sim::{check::INVARIANTS, rack::RackSpec, Strategy};
use serde::Deserialize;
use toml::Spanned;

#[cfg(test)]
mod tests;

use super::{Failure, Options, SeedResult};
use crate::file::{self, ScenarioError};

/// The committed file of known defects, read by default.
pub const KNOWN_DEFECTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/known-defects.toml");

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
    pub strategies: Option<Vec<Strategy>>,
    pub starts: Option<Vec<StartImpl>>,
    /// `true`: only fuzz runs that draw the NAT statement window
    /// (`--nat-window`); `false`: only those that do not; `None`: both. A
    /// defect that needs the window must not explain, in the fuzz gate's
    /// runs without it, a gap another bug would leave.
    pub nat_window: Option<bool>,
}

/// What a failing run must look like to be this defect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signature {
    NotConverged {
        gaps: Vec<Pattern>,
        follow_on: Vec<Pattern>,
    },
    Invariant {
        invariant: &'static str,
        message: Option<Pattern>,
    },
    TooSlow,
}

/// A text pattern matched against the whole of a gap or message: `*` is any
/// run of characters (also none), `{name}` a non-empty word (no
/// whitespace) that the match binds to `name`; every other character is
/// itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    pub text: String,
    segments: Vec<Segment>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Star,
    Capture(String),
}

/// Words a match bound, by name.
pub type Bindings = Vec<(String, String)>;

impl Pattern {
    pub fn new(text: &str) -> Result<Pattern, String> {
        let mut segments = Vec::new();
        let mut literal = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            match c {
                '*' | '{' if !literal.is_empty() => {
                    segments.push(Segment::Literal(std::mem::take(&mut literal)));
                }
                _ => {}
            }
            match c {
                '*' => {
                    if segments.last() != Some(&Segment::Star) {
                        segments.push(Segment::Star);
                    }
                }
                '{' => {
                    let name: String = chars.by_ref().take_while(|c| *c != '}').collect();
                    if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                    {
                        return Err(format!(
                            "`{{{name}` is not a capture: write {{name}} with lowercase letters and '_'"
                        ));
                    }
                    if matches!(segments.last(), Some(Segment::Capture(_) | Segment::Star)) {
                        return Err(format!(
                            "{{{name}}} follows a `*` or capture directly: which text is whose is ambiguous"
                        ));
                    }
                    segments.push(Segment::Capture(name));
                }
                '}' => return Err("`}` without its `{`".into()),
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            segments.push(Segment::Literal(literal));
        }
        Ok(Pattern {
            text: text.to_string(),
            segments,
        })
    }

    /// The pattern's literal text (what makes it specific).
    pub fn literal_len(&self) -> usize {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Literal(l) => l.trim().chars().count(),
                _ => 0,
            })
            .sum()
    }

    /// The names it captures.
    pub fn captures(&self) -> BTreeSet<&str> {
        self.segments
            .iter()
            .filter_map(|s| match s {
                Segment::Capture(n) => Some(n.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn matches(&self, text: &str) -> bool {
        self.bind(text, &Vec::new()).is_some()
    }

    /// Match the whole of `text` with the names in `given` already bound:
    /// every binding of the match, if it matches.
    pub fn bind(&self, text: &str, given: &Bindings) -> Option<Bindings> {
        let mut binds = given.clone();
        match_from(&self.segments, text, &mut binds).then_some(binds)
    }
}

/// Backtracking match of `segments` against all of `text`.
fn match_from(segments: &[Segment], text: &str, binds: &mut Bindings) -> bool {
    let Some((first, rest)) = segments.split_first() else {
        return text.is_empty();
    };
    match first {
        Segment::Literal(l) => text
            .strip_prefix(l.as_str())
            .is_some_and(|t| match_from(rest, t, binds)),
        Segment::Star => text
            .char_indices()
            .map(|(i, _)| i)
            .chain([text.len()])
            .any(|i| match_from(rest, &text[i..], binds)),
        Segment::Capture(name) => {
            if let Some((_, value)) = binds.iter().find(|(n, _)| n == name) {
                let value = value.clone();
                return text
                    .strip_prefix(value.as_str())
                    .is_some_and(|t| match_from(rest, t, binds));
            }
            let word = text
                .char_indices()
                .find(|(_, c)| c.is_whitespace())
                .map_or(text.len(), |(i, _)| i);
            // Shortest word first; each must be followed by the rest.
            for end in text[..word].char_indices().map(|(i, c)| i + c.len_utf8()) {
                binds.push((name.clone(), text[..end].to_string()));
                if match_from(rest, &text[end..], binds) {
                    return true;
                }
                binds.pop();
            }
            false
        }
    }
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
            && self.nat_window.is_none_or(|w| w == opts.draw_nat_window)
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
        if let Signature::NotConverged { follow_on, .. } = &self.signature {
            for (i, gap) in gaps.iter().enumerate() {
                explained[i] |= follow_on
                    .iter()
                    .any(|p| hits.iter().any(|(_, b)| p.bind(gap, b).is_some()));
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

/// `--known-defects`: a path, or `none`.
pub fn load_arg(arg: Option<&str>) -> Result<KnownDefects, String> {
    match arg {
        Some("none") => Ok(KnownDefects::none()),
        Some(path) => load(Path::new(path)),
        None => load(Path::new(KNOWN_DEFECTS)),
    }
}

/// Read and validate a known-defects file. Regression paths are relative
/// to the file's directory.
pub fn load(path: &Path) -> Result<KnownDefects, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "error: cannot read the known-defects file {}: {e}\n  = hint: pass --known-defects PATH, or --known-defects none to treat every failure as unlisted",
            path.display()
        )
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse(&path.display().to_string(), &text, base).map_err(|e| e.to_string())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default, rename = "defect")]
    defects: Vec<RawDefect>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefect {
    id: Spanned<String>,
    failure: Spanned<String>,
    #[serde(default)]
    gaps: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    follow_on_gaps: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    invariant: Option<Spanned<String>>,
    #[serde(default)]
    message: Option<Spanned<String>>,
    regression: Spanned<String>,
    why: Spanned<String>,
    #[serde(default)]
    racks: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    strategies: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    starts: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    nat_window: Option<bool>,
}

const FIELDS: &str = "id, failure, gaps, follow_on_gaps, invariant, message, regression, why, racks, strategies, starts, nat_window";

/// Parse and validate the text of a known-defects file; `origin` names it
/// in errors, `base` is where its regression paths start.
pub fn parse(origin: &str, text: &str, base: &Path) -> Result<KnownDefects, ScenarioError> {
    let err = |span: Option<Range<usize>>, message: String, hint: Option<String>| {
        file::located(
            origin,
            text,
            span.map(|s| s.start).unwrap_or(0),
            message,
            hint,
        )
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let message = e.message().trim().to_string();
        let hint = if message.contains("unknown field") {
            Some(format!(
                "a [[defect]] has the fields {FIELDS} (see docs/finding-bugs.md, \"Known defects\")"
            ))
        } else if message.contains("missing field") {
            Some("every [[defect]] needs id, failure, regression and why".into())
        } else {
            None
        };
        err(e.span(), message, hint)
    })?;
    let mut defects: Vec<Defect> = Vec::new();
    for d in raw.defects {
        let id = d.id.get_ref();
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(err(
                Some(d.id.span()),
                format!("defect id {id:?} is not kebab-case"),
                Some("use lowercase letters, digits and '-', e.g. \"instance-without-vmm\"".into()),
            ));
        }
        if defects.iter().any(|x| x.id == *id) {
            return Err(err(
                Some(d.id.span()),
                format!("defect id {id:?} is listed twice"),
                None,
            ));
        }
        let pattern = |s: &Spanned<String>| -> Result<Pattern, ScenarioError> {
            let p = Pattern::new(s.get_ref()).map_err(|e| {
                err(
                    Some(s.span()),
                    format!("pattern {:?}: {e}", s.get_ref()),
                    None,
                )
            })?;
            if p.literal_len() < MIN_LITERAL {
                return Err(err(
                    Some(s.span()),
                    format!("pattern {:?} is too general", s.get_ref()),
                    Some(format!(
                        "a signature must be specific: quote the verdict's text, with * or {{name}} only for names (web1, sled2); at least {MIN_LITERAL} characters besides them"
                    )),
                ));
            }
            Ok(p)
        };
        let only = |field: &str, span: Option<Range<usize>>, kind: &str| {
            err(
                span,
                format!("`{field}` does not apply to failure = {kind:?}"),
                Some(
                    "`gaps` and `follow_on_gaps` go with \"not-converged\"; `invariant` and `message` with \"invariant\""
                        .into(),
                ),
            )
        };
        let kind = d.failure.get_ref().as_str();
        let signature = match kind {
            "not-converged" => {
                if let Some(i) = &d.invariant {
                    return Err(only("invariant", Some(i.span()), kind));
                }
                if let Some(m) = &d.message {
                    return Err(only("message", Some(m.span()), kind));
                }
                let Some(gaps) = &d.gaps else {
                    return Err(err(
                        Some(d.failure.span()),
                        "failure = \"not-converged\" needs `gaps`".into(),
                        Some("the gaps the verdict lists, e.g. gaps = [\"instance * is running on *, which has no VMM for it\"]".into()),
                    ));
                };
                if gaps.get_ref().is_empty() {
                    return Err(err(Some(gaps.span()), "`gaps` is empty".into(), None));
                }
                let gaps: Vec<Pattern> =
                    gaps.get_ref().iter().map(pattern).collect::<Result<_, _>>()?;
                let mut follow_on = Vec::new();
                for f in d.follow_on_gaps.iter().flat_map(|f| f.get_ref()) {
                    let p = pattern(f)?;
                    // Bound by every primary gap's match, so a follow-on
                    // gap is always about the instance (or sled...) the
                    // primary gap named.
                    let names = p.captures();
                    let unbound = gaps
                        .iter()
                        .find(|g| names.is_empty() || !names.is_subset(&g.captures()));
                    if let Some(g) = unbound {
                        return Err(err(
                            Some(f.span()),
                            format!(
                                "follow-on gap {:?} is not tied to the primary gap {:?}",
                                f.get_ref(),
                                g.text
                            ),
                            Some("a follow-on gap must use {names} that every pattern of `gaps` captures, e.g. {instance}".into()),
                        ));
                    }
                    follow_on.push(p);
                }
                Signature::NotConverged { gaps, follow_on }
            }
            "invariant" => {
                for (field, g) in [("gaps", &d.gaps), ("follow_on_gaps", &d.follow_on_gaps)] {
                    if let Some(g) = g {
                        return Err(only(field, Some(g.span()), kind));
                    }
                }
                let Some(inv) = &d.invariant else {
                    return Err(err(
                        Some(d.failure.span()),
                        "failure = \"invariant\" needs `invariant`".into(),
                        Some(format!("invariants: {}", INVARIANTS.join(", "))),
                    ));
                };
                let invariant = INVARIANTS
                    .iter()
                    .find(|i| **i == inv.get_ref().as_str())
                    .ok_or_else(|| {
                        err(
                            Some(inv.span()),
                            format!("unknown invariant {:?}", inv.get_ref()),
                            Some(format!("invariants: {}", INVARIANTS.join(", "))),
                        )
                    })?;
                Signature::Invariant {
                    invariant,
                    message: d.message.as_ref().map(pattern).transpose()?,
                }
            }
            "too-slow" => {
                for (field, span) in [
                    ("gaps", d.gaps.as_ref().map(|g| g.span())),
                    ("follow_on_gaps", d.follow_on_gaps.as_ref().map(|g| g.span())),
                    ("invariant", d.invariant.as_ref().map(|g| g.span())),
                    ("message", d.message.as_ref().map(|g| g.span())),
                ] {
                    if span.is_some() {
                        return Err(only(field, span, kind));
                    }
                }
                Signature::TooSlow
            }
            other => {
                return Err(err(
                    Some(d.failure.span()),
                    format!("unknown failure kind {other:?}"),
                    Some(
                        "expected \"not-converged\", \"invariant\" or \"too-slow\" (a testbed error is never a known defect)"
                            .into(),
                    ),
                ))
            }
        };
        let regression = base.join(d.regression.get_ref());
        if let Err(e) = crate::regression::regression(regression.clone()) {
            return Err(err(
                Some(d.regression.span()),
                format!("regression {:?} is not a usable regression file", d.regression.get_ref()),
                Some(format!(
                    "the path is relative to this file's directory; make one with `racksim shrink` ({})",
                    e.trim_start_matches("error: ").lines().next().unwrap_or("")
                )),
            ));
        }
        if d.why.get_ref().trim().is_empty() {
            return Err(err(
                Some(d.why.span()),
                "`why` is empty".into(),
                Some("say what upstream mechanism is missing or what keeps it unfixed".into()),
            ));
        }
        let racks = d
            .racks
            .as_ref()
            .map(|rs| {
                rs.iter()
                    .map(|r| {
                        RackSpec::NAMES
                            .contains(&r.get_ref().as_str())
                            .then(|| r.get_ref().clone())
                            .ok_or_else(|| {
                                err(
                                    Some(r.span()),
                                    format!("unknown rack {:?}", r.get_ref()),
                                    Some(format!("racks: {}", RackSpec::NAMES.join(", "))),
                                )
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let strategies = d
            .strategies
            .as_ref()
            .map(|ss| {
                ss.iter()
                    .map(|s| {
                        s.get_ref()
                            .parse::<Strategy>()
                            .map_err(|e| err(Some(s.span()), e, None))
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let starts = d
            .starts
            .as_ref()
            .map(|ss| {
                ss.iter()
                    .map(|s| {
                        s.get_ref().parse::<StartImpl>().map_err(|_| {
                            err(
                                Some(s.span()),
                                format!("unknown start implementation {:?}", s.get_ref()),
                                Some("expected one of: legacy, naive, saga".into()),
                            )
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        defects.push(Defect {
            id: id.clone(),
            signature,
            regression,
            why: d.why.get_ref().trim().to_string(),
            racks,
            strategies,
            starts,
            nat_window: d.nat_window,
        });
    }
    Ok(KnownDefects {
        origin: origin.to_string(),
        defects,
    })
}
