//! Insta snapshots of convergence traces (seed 1), reviewed like code:
//! `cargo insta review` after a change that alters behaviour. Each snapshot
//! is exactly what `racksim run NAME --seed 1 --strategy S` prints.
//!
//! The catalogue cells (`cells.rs`, one test per scenario and strategy)
//! assert them: a cell's run at seed 1 is its snapshot's run, so the
//! suite makes it once, and a review still shows every changed trace at
//! once. Here, that `snapshots/` holds exactly the cells' files.

use racksim::catalogue;

/// Every catalogued cell has its file in snapshots/, and every file there
/// belongs to a cell (a renamed scenario or strategy leaves no orphan).
#[test]
fn snapshots_cover_the_catalogue_exactly() {
    let wanted: Vec<String> = catalogue::all()
        .iter()
        .flat_map(|s| {
            s.expectations
                .keys()
                .map(move |v| format!("{}__{v}__seed1.snap", s.name))
        })
        .collect();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots");
    let files: Vec<String> = std::fs::read_dir(dir)
        .expect("snapshots/ exists")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| f.ends_with(".snap"))
        .collect();
    for f in &files {
        assert!(
            wanted.contains(f),
            "snapshots/{f} belongs to no catalogued cell; delete it"
        );
    }
    for w in &wanted {
        assert!(
            files.contains(w),
            "snapshots/{w} is missing: run the cell (`cargo test -p racksim --test cells -- NAME::STRATEGY`) and review it"
        );
    }
}
