//! The kill table, bounded: every mutant (a plausible reconciler bug,
//! `racksim_mutants`) must make some run of the suite fail —
//! the catalogue and the regression files at seeds 1 and 2, or the first fuzz seeds —
//! where the real reconciler passes. The full table is a command:
//! `cargo run --release -p racksim -- mutants`.

use crate::common;

use racksim::mutants::kill_table;
use racksim_mutants::{Mutant, COMPILED};

/// Fuzz seeds per fuzz configuration in this bounded table.
const FUZZ_SEEDS: u64 = 8;

#[test]
fn every_mutant_is_killed() {
    // The test build carries the mutants (the dev-dependency's feature).
    const { assert!(COMPILED) };
    let rows = kill_table(&Mutant::ALL, 2, FUZZ_SEEDS, 2, &|_, _| {});
    assert_eq!(rows.len(), Mutant::ALL.len());
    let mut survivors = Vec::new();
    for (m, row) in Mutant::ALL.iter().zip(&rows) {
        assert_eq!(row.mutant, m.name());
        if row.killed.is_none() {
            survivors.push(m.name());
        }
    }
    assert!(
        survivors.is_empty(),
        "mutants no run caught: {survivors:?}\n{}",
        racksim::mutants::text(&rows)
    );
}

/// The same table whatever the thread count (kills are the first in job
/// order, not the first to finish).
#[test]
fn the_kill_table_is_deterministic() {
    let some = [Mutant::NoPeriodicTimer, Mutant::SagaSkipsUndo];
    let one = kill_table(&some, 1, 4, 1, &|_, _| {});
    let two = kill_table(&some, 1, 4, 2, &|_, _| {});
    assert_eq!(racksim::mutants::text(&one), racksim::mutants::text(&two));
}

/// A kill replays as one run: the table's replay command is `racksim run
/// SCENARIO --seed N --strategy S --mutant M`, and that run misses its
/// expectation the way the table says, while the same run without the
/// mutant meets it. One catalogue kill and one regression kill (a file
/// path, given from the repository's root as the table prints it).
#[test]
fn a_kill_replays_as_one_run() {
    let some = [Mutant::NoPeriodicTimer, Mutant::SagaSkipsUndo];
    let rows = kill_table(&some, 1, 0, 2, &|_, _| {});
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    for (m, row) in some.iter().zip(&rows) {
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
