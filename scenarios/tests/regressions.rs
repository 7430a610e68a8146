//! Every file in `scenarios/regressions/` (written by `racksim shrink`) runs
//! at the seed and strategy its `Replay:` comment names, and must meet its
//! expectation: a regression guarded against stays guarded, and a defect a
//! file records (until it is fixed) is still reproduced.

use std::path::{Path, PathBuf};

use racksim::{file, runner};

fn regression_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

/// `(seed, strategy)` from the `# Replay: racksim run FILE --seed N
/// --strategy S` comment.
fn replay_of(text: &str) -> Option<(u64, String)> {
    let line = text
        .lines()
        .take_while(|l| l.starts_with('#'))
        .find(|l| l.starts_with("# Replay: racksim run "))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |flag: &str| {
        let i = words.iter().position(|w| *w == flag)?;
        words.get(i + 1).copied()
    };
    Some((
        after("--seed")?.parse().ok()?,
        after("--strategy")?.to_string(),
    ))
}

#[test]
fn every_regression_file_meets_its_expectation() {
    let files = regression_files();
    assert!(!files.is_empty(), "scenarios/regressions/ holds no files");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let scenario = file::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let (seed, strategy) = replay_of(&text).unwrap_or_else(|| {
            panic!(
                "{}: no `# Replay: racksim run ... --seed N --strategy S` comment",
                path.display()
            )
        });
        let variant = scenario.variant(&strategy).unwrap();
        let judged = runner::run(&scenario, variant, seed)
            .unwrap_or_else(|| panic!("{}: no expectation for {strategy}", path.display()));
        assert!(
            judged.judgement.is_ok(),
            "{} --seed {seed} --strategy {strategy}: {:?}\n{}",
            path.display(),
            judged.judgement,
            judged.outcome.verdict.lines().join("\n")
        );
    }
}

#[test]
fn replay_comments_are_read() {
    assert_eq!(
        replay_of("# a\n# Replay: racksim run x.toml --seed 18 --strategy saga\nname = \"x\"\n"),
        Some((18, "saga".to_string()))
    );
    assert_eq!(
        replay_of("name = \"x\"\n# Replay: racksim run x --seed 1 --strategy saga\n"),
        None
    );
}
