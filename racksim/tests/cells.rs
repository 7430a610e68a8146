//! The scenario suite, one test per cell: every catalogued scenario ×
//! every strategy of its kind (`madrid-one-switch::sled-task`), and every
//! file in `scenarios/regressions/` (`regression::NAME`). A libtest-mimic
//! harness, so `cargo test --test cells -- madrid` selects cells, a
//! failure names its cell, and `cargo nextest run --partition count:K/N`
//! splits the cells across machines (each cell is a test nextest lists and
//! runs on its own).
//!
//! A catalogue cell runs its seeds one after another: the harness (or
//! nextest) runs the cells in parallel, one per core. Seeds per cell: 32,
//! 8 on the 32-sled `full` rack (each run simulates 35 hosts; `racksim
//! matrix` and `racksim sweep` run as many as wanted), and 8 for
//! `scrimlet-local-with-zone-start`, whose halves are `scrimlet-local`'s
//! reconcilers and `legacy`'s zone-start path, both sampled at 32 (its
//! expectations were measured over seeds 1..32 with `racksim sweep`).
//! A cell run at 32 seeds also checks its row of the matrix committed in
//! `docs/catalogue.md` (`racksim matrix --seeds 32`), measured columns
//! included: the runs are the table's, so they are not made twice.
//!
//! A cell's first seeds (two; one on the `full` rack) are also run again
//! with the gaps and invariants judged after every event, and must come out
//! byte for byte the same (`cells/recheck.rs`): the checker cannot miss a
//! change.
//!
//! A cell's run at seed 1 is its insta snapshot (`snapshots/`): what
//! `racksim run NAME --seed 1 --strategy S` prints must be the reviewed
//! text. The run is the cell's own, not made again for the snapshot.
//!
//! A regression file runs at the seed and strategy its `# Replay:` comment
//! names and must meet its expectation: a regression guarded against stays
//! guarded, and a defect a file records (until it is fixed) is still
//! reproduced.

/// The binary's allocator (see `src/allocator.rs`): the suite's runs are
/// the same runs, at the same cost per event.
#[global_allocator]
static ALLOCATOR: racksim::allocator::Allocator = racksim::allocator::Allocator;

use libtest_mimic::{Arguments, Failed, Trial};
use racksim::{
    catalogue,
    file::{Kind, Scenario, Strategy},
    matrix, report, runner, shrink,
};
use racksim_sim::ServiceNat;

#[path = "cells/recheck.rs"]
mod recheck;

const SEEDS: u64 = 32;
const FULL_RACK_SEEDS: u64 = 8;
const SHIPPED_SEEDS: u64 = 8;

/// The seeds of one cell.
fn seeds(scenario: &Scenario, strategy: Strategy) -> u64 {
    let n = if scenario.rack_name == "full" {
        FULL_RACK_SEEDS
    } else {
        SEEDS
    };
    if strategy == Strategy::nat(ServiceNat::SCRIMLET_LOCAL_WITH_ZONE_START) {
        n.min(SHIPPED_SEEDS)
    } else {
        n
    }
}

/// One catalogue cell over its seeds, judged as the matrix and the sweep
/// judge it: every run meets its expectation, and a race that only some
/// timings expose (the scenario says which invariant breaks) is found by a
/// sweep of this size.
fn check_cell(scenario: &Scenario, strategy: Strategy) -> Result<(), Failed> {
    let mut only = scenario.clone();
    only.expectations.retain(|v, _| *v == strategy);
    let seeds: Vec<u64> = (1..=seeds(scenario, strategy)).collect();
    // The cell's first runs are made again, judged after every event
    // (`recheck`), beside the cell's own runs rather than in a test of
    // their own that would make those runs twice.
    let rechecked = std::sync::Mutex::new(Vec::new());
    let seed_one = std::sync::Mutex::new(None);
    let cells = matrix::matrix_observed(
        std::slice::from_ref(&only),
        &seeds,
        1,
        &|_, _| {},
        &|(_, _, seed), normal| {
            if seed == 1 {
                // What `racksim run` prints for the run (the whole
                // scenario, as the command reads its file).
                let text = report::render(scenario, &scenario.name, strategy, 1, false, normal);
                *seed_one.lock().expect("no run panics") = Some(text);
            }
            if recheck::rechecks(scenario, seed) {
                let found = recheck::recheck(scenario, strategy, seed, normal);
                rechecked.lock().expect("no run panics").push(found);
            }
        },
    );
    let [cell] = &cells[..] else {
        return Err(format!("{} cells for one expectation", cells.len()).into());
    };
    let rechecked = rechecked.into_inner().expect("no run panics");
    if rechecked.is_empty() {
        return Err("no run of the cell was judged again after every event".into());
    }
    let differ: Vec<String> = rechecked.into_iter().flatten().collect();
    if !differ.is_empty() {
        return Err(format!(
            "the runs differ when judged after every event (a change the world did not count):\n{}",
            differ.join("\n")
        )
        .into());
    }
    if let Some(why) = cell.some_seeds_violate.as_ref().and_then(|s| s.failure()) {
        return Err(why.into());
    }
    if !cell.unexpected.is_empty() {
        let lines: Vec<String> = cell
            .unexpected
            .iter()
            .map(|u| format!("seed {}: {}\n  replay: {}", u.seed, u.why, u.replay))
            .collect();
        return Err(format!(
            "{} of {} runs did not meet their expectation:\n{}",
            cell.unexpected.len(),
            cell.runs,
            lines.join("\n")
        )
        .into());
    }
    if seeds.len() as u64 == COMMITTED_SEEDS {
        let today = matrix::markdown(&cells);
        let row = today
            .lines()
            .nth(2)
            .ok_or("the matrix printed no row for the cell")?;
        let committed = committed_row(&scenario.name, &strategy.to_string())?;
        if row != committed {
            return Err(format!(
                "the committed matrix (docs/catalogue.md) has, for this cell over seeds 1..=32,\n  \
                 {committed}\nwhere the runs give\n  {row}\nregenerate the table: \
                 cargo run -p racksim -- matrix --seeds 32 --jobs 2 --markdown"
            )
            .into());
        }
    }
    let text = seed_one
        .into_inner()
        .expect("no run panics")
        .ok_or("the cell made no run at seed 1")?;
    assert_snapshot(&scenario.name, strategy, text);
    Ok(())
}

/// `text`, what `racksim run NAME --seed 1 --strategy S` prints, is
/// `snapshots/NAME__S__seed1.snap`; a difference fails the cell with
/// insta's diff, and is reviewed with `cargo insta review`.
fn assert_snapshot(name: &str, strategy: Strategy, text: String) {
    insta::with_settings!({
        snapshot_path => "../../snapshots",
        prepend_module_to_snapshot => false,
        omit_expression => true,
        description => format!("racksim run {name} --seed 1 --strategy {strategy}"),
    }, {
        insta::assert_snapshot!(format!("{name}__{strategy}__seed1"), text);
    });
}

/// The seeds of the matrix committed in `docs/catalogue.md` (`racksim
/// matrix --seeds 32`). A cell this suite runs at as many seeds is that
/// table's row, measured columns included, so its row is checked here
/// rather than measured a second time: every cell but the 8-seed ones
/// (whose rows `docs.rs` checks without the measured columns).
const COMMITTED_SEEDS: u64 = 32;

/// The committed matrix's row for `scenario` under `strategy`.
fn committed_row(scenario: &str, strategy: &str) -> Result<String, Failed> {
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/catalogue.md"))
            .map_err(|e| format!("docs/catalogue.md: {e}"))?;
    let table = matrix::committed_table(&page)
        .ok_or("docs/catalogue.md has no <!-- matrix: begin/end --> markers")?;
    let prefix = format!("| {scenario} | {strategy} | ");
    table
        .lines()
        .find(|l| l.starts_with(&prefix))
        .map(str::to_string)
        .ok_or_else(|| format!("docs/catalogue.md's matrix has no row {prefix}…").into())
}

/// Every scenario has an expectation for every strategy of its kind, so
/// the matrix (and this suite) has no holes.
fn catalogue_has_no_holes() -> Result<(), Failed> {
    for s in catalogue::all() {
        let all: &[&str] = match s.kind {
            Kind::ServiceNat => &[
                "legacy",
                "sled-task",
                "scrimlet-local",
                "scrimlet-local-with-zone-start",
            ],
            Kind::Instances => &["inline", "naive", "saga"],
        };
        for v in all {
            let v = s.strategy(v).map_err(|e| format!("{}: {e}", s.name))?;
            if !s.expectations.contains_key(&v) {
                return Err(format!("{} has no expectation for {v}", s.name).into());
            }
        }
    }
    Ok(())
}

/// `n` as the docs write it: `3,272`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The figures the README and `docs/finding-bugs.md` give for this suite
/// are this suite's: the simulated runs, the cells, the regression files,
/// the tests `--list` shows, the snapshot files. A cell or file added
/// without the docs fails here.
fn the_docs_count_this_suite(trials: usize, regressions: usize) -> Result<(), Failed> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let read = |p: &str| std::fs::read_to_string(root.join(p)).map_err(|e| format!("{p}: {e}"));
    // Prose wraps anywhere: compare with every run of white space as one
    // space.
    let flat = |t: String| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let readme = flat(read("README.md")?);
    let finding_bugs = flat(read("docs/finding-bugs.md")?);
    let mut cells = 0;
    let mut runs = 0;
    let mut madrid = 0;
    for s in catalogue::all() {
        for &v in s.expectations.keys() {
            cells += 1;
            runs += seeds(&s, v) as usize;
            madrid += usize::from(s.name == "madrid-one-switch");
        }
    }
    let snapshots = std::fs::read_dir(root.join("snapshots"))
        .map_err(|e| format!("snapshots/: {e}"))?
        .count();
    let wanted = [
        (&readme, format!("{} simulated runs", thousands(runs))),
        (&readme, format!("# the {madrid} cells of madrid-one-switch")),
        (
            &readme,
            format!(
                "# {trials} tests: {cells} cells, {regressions} files, the no-holes check, the docs' counts"
            ),
        ),
        (&readme, format!("({snapshots} files)")),
        (&finding_bugs, format!("today's {regressions}:")),
    ];
    let missing: Vec<String> = wanted
        .iter()
        .filter(|(text, figure)| !text.contains(figure.as_str()))
        .map(|(_, figure)| figure.clone())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("the docs do not say (or no longer say) {missing:?}").into())
    }
}

fn main() {
    let args = Arguments::from_args();
    let mut trials = vec![Trial::test(
        "catalogue::every-strategy-has-a-cell",
        catalogue_has_no_holes,
    )];
    for scenario in catalogue::all() {
        for &strategy in scenario.expectations.keys() {
            let s = scenario.clone();
            trials.push(Trial::test(
                format!("{}::{strategy}", scenario.name),
                move || check_cell(&s, strategy),
            ));
        }
    }
    let files = shrink::regressions(std::path::Path::new(shrink::REGRESSIONS_DIR))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        files.len() >= 3,
        "scenarios/regressions/ holds {} files",
        files.len()
    );
    for r in files {
        let name = r
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        trials.push(Trial::test(format!("regression::{name}"), move || {
            let judged = runner::run(&r.scenario, r.strategy, r.seed).ok_or_else(|| {
                format!("{}: no expectation for {}", r.path.display(), r.strategy)
            })?;
            if judged.judgement.is_ok() {
                Ok(())
            } else {
                Err(format!(
                    "racksim run {} --seed {} --strategy {}: {:?}\n{}",
                    r.path.display(),
                    r.seed,
                    r.strategy,
                    judged.judgement,
                    judged.outcome.verdict.lines().join("\n")
                )
                .into())
            }
        }));
    }
    let regressions = trials
        .iter()
        .filter(|t| t.name().starts_with("regression::"))
        .count();
    let count = trials.len() + 1;
    trials.push(Trial::test(
        "catalogue::the-docs-count-this-suite",
        move || the_docs_count_this_suite(count, regressions),
    ));
    libtest_mimic::run(&args, trials).exit();
}
