//! The kill table: every mutant (a plausible reconciler bug,
//! `racksim_mutants`) must make some run fail where the real reconciler
//! passes. The full table — the first run of the catalogue, the regression
//! files and the fuzz that kills each — is a command,
//! `cargo run --release -p racksim -- mutants`, and its output is pasted
//! in docs/finding-bugs.md. The suite replays the run that table names for
//! each mutant (issue 40: searching the whole bounded table again took a
//! minute of the suite's 2-core time), so a mutant no longer killed fails
//! here, and so does a pasted table that has drifted from what the runs
//! say.

use std::path::Path;

use crate::common;

use racksim::mutants::kill_table;
use racksim_mutants::{Mutant, COMPILED};

/// One kill as docs/finding-bugs.md's pasted table has it.
struct DocKill {
    mutant: String,
    /// The replay's words after the program, without `--mutant M`.
    run: Vec<String>,
    /// The table's `how` column: why the mutant's run missed.
    how: String,
}

/// The kills of the table pasted in docs/finding-bugs.md: its rows (for
/// `how`) and its `M: replay: racksim run ...` lines.
fn doc_kills(root: &Path) -> Vec<DocKill> {
    let text = std::fs::read_to_string(root.join("docs/finding-bugs.md")).unwrap();
    let header = text
        .lines()
        .find(|l| l.starts_with("mutant ") && l.contains("killed by"))
        .expect("the pasted kill table's header");
    let how_at = header.find("how").unwrap();
    text.lines()
        .filter_map(|l| l.split_once(": replay: "))
        .map(|(mutant, replay)| {
            // The program as whoever made the table started racksim
            // (`racksim`, `cargo run -p racksim --`, a path), then the
            // command.
            let words: Vec<&str> = replay
                .split_whitespace()
                .skip_while(|w| !matches!(*w, "run" | "fuzz"))
                .collect();
            let (run, tail) = words.split_at(words.len() - 2);
            assert_eq!(tail, ["--mutant", mutant], "{mutant}'s replay line");
            let row = text
                .lines()
                .find(|r| r.split_whitespace().next() == Some(mutant) && r.len() > how_at)
                .unwrap_or_else(|| panic!("{mutant} has no row in the pasted table"));
            DocKill {
                mutant: mutant.to_string(),
                run: run.iter().map(|w| w.to_string()).collect(),
                how: row[how_at..].trim_end().to_string(),
            }
        })
        .collect()
}

#[test]
fn every_mutant_is_killed_by_the_run_the_docs_name() {
    // The test build carries the mutants (racksim's default feature).
    const { assert!(COMPILED) };
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let kills = doc_kills(root);
    let named: Vec<&str> = kills.iter().map(|k| k.mutant.as_str()).collect();
    let all: Vec<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
    assert_eq!(named, all, "the pasted table names every mutant, in order");
    // Two at a time: each check is two runs of the real binary.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(k) = kills.get(i) else { break };
                if let Err(why) = check_kill(root, k) {
                    failures.lock().unwrap().push(why);
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{}
(if a change moved a kill, make the table again with          `cargo run --release -p racksim -- mutants` and paste it into docs/finding-bugs.md)",
        failures.join("\n")
    );
}

/// The named run misses its expectation with the mutant, for the reason
/// the table gives, and meets it without.
fn check_kill(root: &Path, k: &DocKill) -> Result<(), String> {
    let words: Vec<&str> = k.run.iter().map(String::as_str).collect();
    let with: Vec<&str> = words
        .iter()
        .copied()
        .chain(["--mutant", k.mutant.as_str(), "--expect"])
        .collect();
    let (code, out, err) = common::racksim_in(root.to_str().unwrap(), &with);
    if code != Some(1) {
        return Err(format!(
            "{}: {with:?} exited {code:?}, not 1\n{out}{err}",
            k.mutant
        ));
    }
    if !out.contains(&format!("DOES NOT HOLD ({})", k.how)) {
        return Err(format!(
            "{}: {with:?} missed, but not as the table says ({})\n{out}",
            k.mutant, k.how
        ));
    }
    let without: Vec<&str> = words.iter().copied().chain(["--expect"]).collect();
    let (code, out, err) = common::racksim_in(root.to_str().unwrap(), &without);
    if code != Some(0) {
        return Err(format!(
            "{}: the real reconciler's run {without:?} exited {code:?}\n{out}{err}",
            k.mutant
        ));
    }
    Ok(())
}

/// The mutants the two tests below make a small kill table of.
const SOME: [Mutant; 2] = [Mutant::NoPeriodicTimer, Mutant::SagaSkipsUndo];

/// The small kill table on two threads, made once for both tests below
/// (each making its own cost the suite a third table: issue 40). Its
/// four fuzz seeds come after every catalogue and regression run in job
/// order, so a kill those runs find is the one a table without them
/// finds.
fn two_thread_table() -> &'static [racksim::mutants::Row] {
    static TABLE: std::sync::OnceLock<Vec<racksim::mutants::Row>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| kill_table(&SOME, 1, 4, 2, &|_, _| {}))
}

/// The same table whatever the thread count (kills are the first in job
/// order, not the first to finish).
#[test]
fn the_kill_table_is_deterministic() {
    let one = kill_table(&SOME, 1, 4, 1, &|_, _| {});
    assert_eq!(
        racksim::mutants::text(&one),
        racksim::mutants::text(two_thread_table())
    );
}

/// A kill replays as one run: the table's replay command is `racksim run
/// SCENARIO --seed N --strategy S --mutant M`, and that run misses its
/// expectation the way the table says, while the same run without the
/// mutant meets it. One catalogue kill and one regression kill (a file
/// path, given from the repository's root as the table prints it).
#[test]
fn a_kill_replays_as_one_run() {
    let rows = two_thread_table();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    for (m, row) in SOME.iter().zip(rows) {
        let kill = row
            .killed
            .as_ref()
            .unwrap_or_else(|| panic!("{m} survived"));
        assert!(
            ["catalogue", "regression"].contains(&kill.by.as_str()),
            "{m}: {kill:?}"
        );
        let expected = format!(
            "racksim run {} --seed {} --strategy {} --mutant {m}",
            if kill.by == "catalogue" {
                kill.scenario.clone()
            } else {
                format!("scenarios/regressions/{}.toml", kill.scenario)
            },
            kill.seed,
            kill.strategy
        );
        assert_eq!(kill.replay, expected);
        let words: Vec<&str> = kill.replay.split_whitespace().skip(1).collect();
        let with: Vec<&str> = words.iter().copied().chain(["--expect"]).collect();
        let (code, out, err) = common::racksim_in(root, &with);
        assert_eq!(
            code,
            Some(1),
            "{with:?}: the mutant's run passed\n{out}{err}"
        );
        assert!(out.contains(&format!("mutant: {m} (")), "{out}");
        assert!(
            out.contains(&format!("DOES NOT HOLD ({})", kill.how)),
            "{with:?}: not the table's failure ({})\n{out}",
            kill.how
        );
        assert!(out.contains(&format!("replay: {}", kill.replay)), "{out}");
        let without: Vec<&str> = with
            .iter()
            .copied()
            .filter(|w| *w != "--mutant" && *w != m.name())
            .collect();
        let (code, out, err) = common::racksim_in(root, &without);
        assert_eq!(
            code,
            Some(0),
            "{without:?}: the real reconciler's run failed\n{out}{err}"
        );
        assert!(!out.contains("mutant:"), "{out}");
    }
}

/// `--mutant` takes the names the kill table prints, and says which those
/// are when it is given another.
#[test]
fn an_unknown_mutant_is_refused_with_the_valid_names() {
    let (code, out, err) = common::racksim(&[
        "run",
        "madrid-one-switch",
        "--seed",
        "1",
        "--strategy",
        "sled-task",
        "--mutant",
        "no-such-bug",
    ]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(out.is_empty(), "{out}");
    let names: Vec<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
    assert!(
        err.contains(&format!(
            "error: --mutant: unknown mutant \"no-such-bug\" (expected one of: {})",
            names.join(", ")
        )),
        "{err}"
    );
}

/// Upstream's fixes, each told apart by a preset's own cell: run with one
/// mechanism in its era before the fix (an era choice, `PRESET+M=ERA`),
/// the cell's expectation for the preset no longer holds, while the
/// preset meets it. Five mutants of the kill table once forced these eras
/// under every preset (`ensure-matches-removed-rows`, `fatal-dpd-notify`,
/// `fatal-remove-notify`, `mgs-switch-lookup`, `fatal-nat-conflict`);
/// the era choices run the same code, so the mutants were retired
/// (issue 41, decision 0012) and their kills are these rows: the
/// scenario and preset that killed each, at the same seed.
#[test]
fn each_upstream_fix_is_told_apart_by_a_preset_s_cell() {
    const FIXES: &[(&str, &str, &str)] = &[
        // omicron #4610: the NAT ensure counted soft-deleted rows.
        ("cold-boot-restart", "saga", "nat-ensure=matches-removed"),
        // #8914: a dpd that could not be told of new rows failed the step.
        (
            "instance-start-while-a-dpd-fails",
            "naive",
            "dpd-notify=fatal",
        ),
        // #10389: ... and of removed rows, so the stop's update saga failed.
        (
            "instance-stop-while-a-dpd-fails",
            "saga",
            "remove-notify=fatal",
        ),
        // #8914: switch zones told apart by MGS, retried until all answer.
        (
            "instance-start-while-a-dpd-fails",
            "saga+dpd-notify=fatal",
            "switch-lookup=mgs-retry",
        ),
        // #4694: the ensure only inserted; the unique index refused it.
        ("instance-migrate-like-move", "naive", "nat-conflict=fatal"),
    ];
    for &(name, preset, choice) in FIXES {
        let scenario = racksim::catalogue::get(name).unwrap_or_else(|| panic!("{name}"));
        let preset_v = scenario.strategy(preset).unwrap();
        let expectation = scenario.expectations[&preset_v].clone();
        let before_fix = scenario
            .strategy(&format!("{preset}+{choice}"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut judged_as_preset = scenario.clone();
        judged_as_preset
            .expectations
            .insert(before_fix, expectation);
        let today = racksim::runner::run(&scenario, preset_v, 1).unwrap();
        assert!(
            today.judgement.is_ok(),
            "{name} / {preset} at seed 1: {:?}",
            today.judgement
        );
        let old = racksim::runner::run(&judged_as_preset, before_fix, 1).unwrap();
        assert!(
            old.judgement.is_err(),
            "{name} / {preset}'s expectation holds with {choice} (before its fix) at seed 1: \
             the cell no longer tells the fix apart"
        );
    }
}
