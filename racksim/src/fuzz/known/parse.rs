//! Reading and validating a known-defects file: every entry is checked
//! (its signature specific, its fields those of its kind of failure, its
//! regression file usable) before any seed is matched against it, and
//! every rejection points at its line and column.

use std::{ops::Range, path::Path};

use racksim_nexus::instances::StartImpl;
use racksim_sim::{check::INVARIANTS, rack::RackSpec, ServiceNat};
use serde::Deserialize;
use toml::Spanned;

use super::{Defect, KnownDefects, Pattern, Signature, KNOWN_DEFECTS, MIN_LITERAL};
use crate::file::{self, ScenarioError};

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
    let text = crate::input::read_text(path, "known-defects file").map_err(|e| {
        let hint = match e.kind {
            crate::input::InputErrorKind::Io(_) => "\n  = hint: pass --known-defects PATH, or --known-defects none to treat every failure as unlisted",
            _ => "",
        };
        format!("{e}{hint}")
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
    rack_follow_on_gaps: Option<Spanned<Vec<Spanned<String>>>>,
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
}

const FIELDS: &str = "id, failure, gaps, follow_on_gaps, rack_follow_on_gaps, invariant, message, regression, why, racks, strategies, starts";

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
                    "`gaps`, `follow_on_gaps` and `rack_follow_on_gaps` go with \"not-converged\"; `invariant` and `message` with \"invariant\""
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
                let mut rack_follow_on = Vec::new();
                for f in d.rack_follow_on_gaps.iter().flat_map(|f| f.get_ref()) {
                    let p = pattern(f)?;
                    // What follows for the whole rack is not tied to the
                    // sled or instance the primary gap names, so it binds
                    // no names; it is explained only beside a primary gap.
                    if !p.captures().is_empty() {
                        return Err(err(
                            Some(f.span()),
                            format!("rack-wide follow-on gap {:?} uses {{names}}", f.get_ref()),
                            Some("a rack-wide follow-on gap binds nothing (use `*`); a gap tied to the sled or instance of the primary gap goes in `follow_on_gaps`".into()),
                        ));
                    }
                    rack_follow_on.push(p);
                }
                Signature::NotConverged {
                    gaps,
                    follow_on,
                    rack_follow_on,
                }
            }
            "invariant" => {
                for (field, g) in [
                    ("gaps", &d.gaps),
                    ("follow_on_gaps", &d.follow_on_gaps),
                    ("rack_follow_on_gaps", &d.rack_follow_on_gaps),
                ] {
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
                    (
                        "rack_follow_on_gaps",
                        d.rack_follow_on_gaps.as_ref().map(|g| g.span()),
                    ),
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
        let racks = each(&d.racks, |r| {
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
        })?;
        let strategies = each(&d.strategies, |s| {
            s.get_ref()
                .parse::<ServiceNat>()
                .map_err(|e| err(Some(s.span()), e.to_string(), None))
        })?;
        let starts = each(&d.starts, |s| {
            s.get_ref()
                .parse::<StartImpl>()
                .map_err(|e| err(Some(s.span()), e.to_string(), None))
        })?;
        defects.push(Defect {
            id: id.clone(),
            signature,
            regression,
            why: d.why.get_ref().trim().to_string(),
            racks,
            strategies,
            starts,
        });
    }
    Ok(KnownDefects {
        origin: origin.to_string(),
        defects,
    })
}

/// Each name of an optional list (`racks`, `strategies`, `starts`),
/// parsed; `None` when the entry has no such list.
fn each<T>(
    list: &Option<Vec<Spanned<String>>>,
    parse: impl Fn(&Spanned<String>) -> Result<T, ScenarioError>,
) -> Result<Option<Vec<T>>, ScenarioError> {
    list.as_ref()
        .map(|names| names.iter().map(parse).collect())
        .transpose()
}
