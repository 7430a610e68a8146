//! Regression files: scenario files in `scenarios/regressions/` whose
//! `# Replay: racksim run FILE --seed N --strategy S` comment names the run
//! the suite replays. Read here, apart from the shrinker that writes them,
//! so that what reads them (the suite, the known-defects file) does not
//! depend on shrinking.

use crate::file::{self, Scenario, Strategy};

/// Where regression files live (the suite runs every one of them).
pub const REGRESSIONS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/regressions");

/// A path as output shows it: one in the committed regressions directory
/// by its path in the repository (so output does not depend on where the
/// repository is checked out), any other as given.
pub fn shown(path: &str) -> String {
    match path.strip_prefix(REGRESSIONS_DIR) {
        Some(rest) => format!("scenarios/regressions{rest}"),
        None => path.to_string(),
    }
}

/// A regression file: the scenario and the run its `# Replay:` comment
/// names.
#[derive(Clone, Debug)]
pub struct Regression {
    pub path: std::path::PathBuf,
    pub scenario: Scenario,
    pub seed: u64,
    pub strategy: Strategy,
}

/// Every `*.toml` in `dir`, by file name. A file that does not parse, or
/// lacks its `# Replay: racksim run FILE --seed N --strategy S` comment, is
/// an error.
pub fn regressions(dir: &std::path::Path) -> Result<Vec<Regression>, String> {
    let mut paths: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("error: {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths.into_iter().map(regression).collect()
}

/// One regression file: it must parse and have its `# Replay:` comment.
pub fn regression(path: std::path::PathBuf) -> Result<Regression, String> {
    let text = crate::input::read_text(&path, "regression file")?;
    let scenario = file::parse(&path.display().to_string(), &text).map_err(|e| e.to_string())?;
    let (seed, strategy) = replay_of(&text).ok_or_else(|| {
        format!(
            "error: {}: no `# Replay: racksim run FILE --seed N --strategy S` comment",
            path.display()
        )
    })?;
    let strategy = scenario
        .strategy(&strategy)
        .map_err(|e| format!("error: {}: {e}", path.display()))?;
    Ok(Regression {
        path,
        scenario,
        seed,
        strategy,
    })
}

/// `(seed, strategy)` from a file's `# Replay: racksim run FILE --seed N
/// --strategy S` comment (in the comment block at its top).
pub fn replay_of(text: &str) -> Option<(u64, String)> {
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
