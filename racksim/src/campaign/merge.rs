//! `racksim merge`: the shards of one campaign back into the summary of
//! the whole range. It refuses what is not the shards of one campaign and
//! says why, so a merged summary is always the one the unsharded run would
//! have printed.

use std::{collections::BTreeMap, fmt::Write, path::Path};

use super::{read, shard_seeds, sweep::seeds_desc, FuzzSummary, Kind, Summary, SweepSummary};

/// Read the files and [`merge`] them.
pub fn merge_files<P: AsRef<Path>>(paths: &[P]) -> Result<Summary, String> {
    let files = paths
        .iter()
        .map(|p| Ok((p.as_ref().display().to_string(), read(p.as_ref())?)))
        .collect::<Result<Vec<_>, String>>()?;
    merge(files)
}

/// A value of an option as a mismatch lists it.
fn shown(v: Option<&String>) -> String {
    match v.map(String::as_str) {
        None => "not given".into(),
        Some("") => "given".into(),
        Some(v) => v.to_string(),
    }
}

/// Merge `files` (each a name and its summary), the shards 0/N..N-1/N of
/// one campaign, into the summary of the whole range, exactly as the
/// unsharded command would have summarised it (with `shard` `(0, 1)`).
/// Refuses shards of different campaigns (listing every option that
/// differs, and in which files), a mix of sweeps and fuzz runs, a missing
/// or duplicated shard, and a shard whose seeds are not its share of the
/// range. The result does not depend on the order of `files`.
pub fn merge(mut files: Vec<(String, Summary)>) -> Result<Summary, String> {
    if files.is_empty() {
        return Err("error: merge: no files to merge".into());
    }
    files.sort_by(|(na, a), (nb, b)| (a.shard(), na).cmp(&(b.shard(), nb)));
    let label = |(name, s): &(String, Summary)| {
        let (i, n) = s.shard();
        format!("{name} (shard {i}/{n} of {})", s.campaign().command)
    };

    // One kind.
    let kinds: Vec<Kind> = files.iter().map(|(_, s)| s.campaign().kind).collect();
    if kinds.iter().any(|k| *k != kinds[0]) {
        let mut out = String::from(
            "error: the files mix sweeps and fuzz campaigns; merge the shards of one campaign at a time:",
        );
        for f in &files {
            let _ = write!(out, "\n  {} is {}", label(f), f.1.campaign().kind.noun());
        }
        return Err(out);
    }

    // One campaign: the same options and shard count.
    let identity: Vec<BTreeMap<String, String>> = files
        .iter()
        .map(|(_, s)| {
            let mut id = s.campaign().options.clone();
            id.insert("N of --shard I/N".into(), s.shard().1.to_string());
            if let Summary::Sweep(s) = s {
                id.insert("scenario name".into(), s.scenario.clone());
            }
            id
        })
        .collect();
    let keys: std::collections::BTreeSet<String> =
        identity.iter().flat_map(|id| id.keys().cloned()).collect();
    let mut differ = String::new();
    for key in &keys {
        let mut values: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for ((name, _), id) in files.iter().zip(&identity) {
            values
                .entry(shown(id.get(key)))
                .or_default()
                .push(name.as_str());
        }
        if values.len() > 1 {
            let each: Vec<String> = values
                .iter()
                .map(|(v, names)| format!("{v} in {}", names.join(", ")))
                .collect();
            let _ = write!(differ, "\n  {key}: {}", each.join("; "));
        }
    }
    if !differ.is_empty() {
        let mut out = String::from("error: the files are shards of different runs:");
        for f in &files {
            let _ = write!(out, "\n  {}", label(f));
        }
        let _ = write!(out, "\nthey differ in:{differ}");
        return Err(out);
    }

    // Every shard once, each with its share of the seeds.
    let n = files[0].1.shard().1;
    let range = files[0].1.seeds();
    let command = files[0].1.campaign().command.clone();
    let mut problems = Vec::new();
    let mut by_index: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (name, s) in &files {
        // Each file agrees with itself: what no run of racksim writes (a
        // hand-edited count) would make the merge print a lie.
        for why in inconsistencies(s) {
            problems.push(format!(
                "{name}: {why}: its counts disagree (is it edited or cut short? run that shard again)"
            ));
        }
        let (i, n) = s.shard();
        if n == 0 || i >= n {
            problems.push(format!(
                "{name}: shard {i}/{n} is not a shard (I must be below N)"
            ));
            continue;
        }
        if s.seeds() != range {
            problems.push(format!(
                "{name}: its seeds are {}..{}, its options say {}..{}",
                s.seeds().0,
                s.seeds().1,
                range.0,
                range.1
            ));
            continue;
        }
        by_index.entry(i).or_default().push(name);
        let expected = shard_seeds(range, (i, n));
        let this = format!("{name}: shard {i}/{n} of seeds {}..{}", range.0, range.1);
        if s.runs() != expected.len() {
            problems.push(format!(
                "{this} runs {} seeds, but the file has {} runs (is it cut short or edited?)",
                expected.len(),
                s.runs()
            ));
        } else if let Summary::Sweep(s) = s {
            let listed: Vec<u64> = s.per_seed.iter().map(|t| t.seed).collect();
            if listed.len() != expected.len() {
                problems.push(format!(
                    "{this} runs {} seeds, but its per_seed lists {} (is it cut short or edited?)",
                    expected.len(),
                    listed.len()
                ));
            } else if let Some((got, want)) =
                listed.iter().zip(&expected).find(|(got, want)| got != want)
            {
                problems.push(format!(
                    "{this} lists other seeds: seed {got} in its per_seed where seed {want} \
                     belongs (is it edited?)"
                ));
            }
        }
    }
    for (i, names) in &by_index {
        if names.len() > 1 {
            problems.push(format!(
                "shard {i}/{n} is given {} times: {}",
                names.len(),
                names.join(", ")
            ));
        }
    }
    let missing: Vec<String> = (0..n)
        .filter(|i| !by_index.contains_key(i))
        .map(|i| format!("{i}/{n}"))
        .collect();
    if !missing.is_empty() {
        let given: Vec<String> = by_index
            .iter()
            .map(|(i, names)| format!("{i}/{n} {}", names.join(", ")))
            .collect();
        let (what, verb) = match missing.len() {
            1 => ("shard", "is"),
            _ => ("shards", "are"),
        };
        problems.push(format!(
            "{what} {} {verb} missing (given: {})",
            missing.join(", "),
            given.join("; ")
        ));
    }
    if !problems.is_empty() {
        return Err(format!(
            "error: cannot merge the shards of {command}:\n  {}",
            problems.join("\n  ")
        ));
    }

    let summaries: Vec<Summary> = files.into_iter().map(|(_, s)| s).collect();
    match &summaries[0] {
        Summary::Sweep(_) => merge_sweeps(
            summaries
                .into_iter()
                .filter_map(|s| match s {
                    Summary::Sweep(s) => Some(s),
                    Summary::Fuzz(_) => None,
                })
                .collect(),
        )
        .map(Summary::Sweep),
        Summary::Fuzz(_) => Ok(Summary::Fuzz(merge_fuzz(
            summaries
                .into_iter()
                .filter_map(|s| match s {
                    Summary::Fuzz(s) => Some(s),
                    Summary::Sweep(_) => None,
                })
                .collect(),
        ))),
    }
}

/// Where the counts in one summary disagree with each other, by field: what
/// no run of racksim writes, so a merge of it would print a lie.
pub fn inconsistencies(s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let mut at_most = |field: &str, n: usize, runs: usize| {
        if n > runs {
            out.push(format!("`{field}` is {n}, more than its `runs` ({runs})"));
        }
    };
    match s {
        Summary::Sweep(s) => {
            let runs = s.runs;
            at_most("as_expected", s.as_expected, runs);
            at_most("testbed_errors", s.testbed_errors, runs);
            at_most("converged", s.converged, runs);
            for (inv, n) in &s.violated {
                at_most(&format!("violated.{inv}"), *n, runs);
            }
            at_most("violated (all invariants)", s.violated.values().sum(), runs);
            at_most("notable (its length)", s.notable.len(), runs);
            if let Some(some) = &s.some_seeds_violate {
                at_most("some_seeds_violate.failing", some.failing, runs);
                for v in &some.violate {
                    at_most(
                        &format!("some_seeds_violate.violate.{}", v.invariant),
                        v.violating,
                        runs,
                    );
                }
            }
            if s.per_seed.len() != runs {
                out.push(format!(
                    "`per_seed` lists {} seeds, but `runs` is {runs}",
                    s.per_seed.len()
                ));
            }
            let converged = s.per_seed.iter().filter(|t| t.ttc_ms.is_some()).count();
            if s.converged != converged {
                out.push(format!(
                    "`converged` is {}, but `per_seed` has {converged} seeds that converged",
                    s.converged
                ));
            }
            // Every run that missed its expectation is listed as notable.
            let missed = runs.saturating_sub(s.as_expected);
            if s.notable.len() < missed {
                out.push(format!(
                    "`notable` lists {} seeds, but {missed} runs missed the expectation \
                     (`runs` {runs} less `as_expected` {})",
                    s.notable.len(),
                    s.as_expected
                ));
            }
        }
        Summary::Fuzz(s) => {
            let runs = s.runs;
            if s.passed + s.failed != runs {
                out.push(format!(
                    "`passed` ({}) and `failed` ({}) do not add up to `runs` ({runs})",
                    s.passed, s.failed
                ));
            }
            if s.listed + s.unlisted + s.testbed_errors != s.failed {
                out.push(format!(
                    "`listed` ({}), `unlisted` ({}) and `testbed_errors` ({}) do not add up \
                     to `failed` ({})",
                    s.listed, s.unlisted, s.testbed_errors, s.failed
                ));
            }
            if s.failures.len() != s.failed {
                out.push(format!(
                    "`failures` lists {} seeds, but `failed` is {}",
                    s.failures.len(),
                    s.failed
                ));
            }
            let by_kind: usize = s.failures_by_kind.values().sum();
            if by_kind != s.failed {
                out.push(format!(
                    "`failures_by_kind` counts {by_kind} failures, but `failed` is {}",
                    s.failed
                ));
            }
            for (field, status, n) in [
                ("listed", "listed", s.listed),
                ("unlisted", "unlisted", s.unlisted),
                ("testbed_errors", "testbed-error", s.testbed_errors),
            ] {
                let listed = s.failures.iter().filter(|f| f.status == status).count();
                if listed != n {
                    out.push(format!(
                        "`{field}` is {n}, but `failures` has {listed} seeds of status {status:?}"
                    ));
                }
            }
            for (id, n) in &s.by_defect {
                if *n > s.listed {
                    out.push(format!(
                        "`by_defect.{id}` is {n}, more than its `listed` ({})",
                        s.listed
                    ));
                }
            }
        }
    }
    out
}

/// Add `from`'s counts into `into`.
fn add_counts(into: &mut BTreeMap<String, usize>, from: &BTreeMap<String, usize>) {
    for (k, n) in from {
        *into.entry(k.clone()).or_insert(0) += n;
    }
}

/// Shards of one sweep (checked to be), in shard order.
fn merge_sweeps(shards: Vec<SweepSummary>) -> Result<SweepSummary, String> {
    let mut shards = shards.into_iter();
    let mut m = shards.next().expect("at least one shard");
    let command = m.campaign.command.clone();
    let desc = seeds_desc(m.seeds, None);
    if let Some(s) = m.some_seeds_violate.as_mut() {
        s.seeds = desc.clone();
    }
    for s in shards {
        m.runs += s.runs;
        m.as_expected += s.as_expected;
        m.testbed_errors += s.testbed_errors;
        add_counts(&mut m.violated, &s.violated);
        m.notable.extend(s.notable);
        m.per_seed.extend(s.per_seed);
        match (m.some_seeds_violate.as_mut(), s.some_seeds_violate) {
            (None, None) => {}
            (Some(into), Some(from))
                if into.fail == from.fail
                    && into.violate.len() == from.violate.len()
                    && into
                        .violate
                        .iter()
                        .zip(&from.violate)
                        .all(|(a, b)| a.invariant == b.invariant) =>
            {
                into.failing += from.failing;
                for (a, b) in into.violate.iter_mut().zip(&from.violate) {
                    a.violating += b.violating;
                }
            }
            _ => {
                return Err(format!(
                    "error: cannot merge the shards of {command}: they disagree on the \
                     expectation's some_seeds_violate / some_seeds_fail (was the scenario \
                     file changed between shards?)"
                ))
            }
        }
    }
    m.shard = (0, 1);
    m.notable.sort_by_key(|(seed, _, _)| *seed);
    m.per_seed.sort_by_key(|t| t.seed);
    if let Some(s) = m.some_seeds_violate.as_mut() {
        s.met = s.failure().is_none();
    }
    m.set_figures();
    Ok(m)
}

/// Shards of one fuzz run (checked to be), in shard order.
fn merge_fuzz(shards: Vec<FuzzSummary>) -> FuzzSummary {
    let mut shards = shards.into_iter();
    let mut m = shards.next().expect("at least one shard");
    for s in shards {
        m.runs += s.runs;
        m.passed += s.passed;
        m.failed += s.failed;
        m.listed += s.listed;
        m.unlisted += s.unlisted;
        m.testbed_errors += s.testbed_errors;
        add_counts(&mut m.failures_by_kind, &s.failures_by_kind);
        add_counts(&mut m.by_defect, &s.by_defect);
        m.failures.extend(s.failures);
    }
    m.shard = (0, 1);
    m.failures.sort_by_key(|f| f.seed);
    m
}
