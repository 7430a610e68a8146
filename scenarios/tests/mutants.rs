//! The kill table, bounded: every mutant (a plausible reconciler bug,
//! `racksim_mutants`) must make some run of the suite fail —
//! the catalogue and the regression files at seeds 1 and 2, or the first fuzz seeds —
//! where the real reconciler passes. The full table is a command:
//! `cargo run --release -p racksim --features mutants -- mutants`.

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
