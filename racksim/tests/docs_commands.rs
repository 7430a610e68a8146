//! Every racksim command the documentation shows runs here, as a reader
//! would paste it.
//!
//! The commands are the lines of the ```` ```sh ```` blocks of `README.md`
//! and `docs/**.md` that start with `racksim` or `cargo run -p racksim --`
//! (which the README says stands for `racksim`). Each block runs in a
//! fresh directory of its own, line after line, through `sh` with the
//! binary on the `PATH` as `racksim`, so a redirect (`> shard-0.json`), a
//! glob (`shard-*.json`) and a file one line writes for the next
//! (`fuzz --plan` then `run` of its plan) work as they do for a reader.
//!
//! What each line must do:
//! * the exit status its comment states (`# converges, exit 0`), and
//!   otherwise 0 or 1: never 2 (the docs show a flag, name or file that
//!   no longer exists) and never 3 (a testbed error);
//! * for the lines of [`CLAIMS`], print what the doc says it prints.
//!
//! A few commands run campaigns too large for the suite; [`SCALED`] says
//! which, and what smaller range runs in their place: the same command,
//! flags and code path, fewer seeds. Each of its entries must still match
//! a shown line, so a scaled command the docs drop fails here. cargo's own
//! commands in the docs (`cargo test`, `cargo install`, `cargo insta`,
//! `cargo nextest`) are CI's and the reader's, not racksim's, and are not
//! run.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::docs::{markdown_files, root};

/// Shown commands too large for the suite: (the text as shown, what runs
/// instead). Each is a seed range or count, or a selection, cut down.
const SCALED: &[(&str, &str)] = &[
    // docs/campaigns.md: a 30,000-seed sweep in three shards.
    ("--seeds 1..30000", "--seeds 1..30"),
    // docs/finding-bugs.md: the fuzz campaigns (madrid, then standard).
    ("fuzz --seeds 1..1000 ", "fuzz --seeds 1..8 "),
    ("--seeds 1..3000 --shard 0/3", "--seeds 1..9 --shard 0/3"),
    // docs/catalogue.md: the committed matrix, which `docs.rs` checks
    // against the catalogue; here one scenario at one seed.
    (
        "matrix --seeds 32 --jobs 2 --markdown",
        "matrix --seeds 1 --jobs 2 --markdown --scenario madrid-one-switch",
    ),
    // docs/finding-bugs.md: the kill table, which `mutants.rs` checks
    // kill by kill; here one mutant, its table row made the same way.
    (
        "mutants --jobs 2",
        "mutants --jobs 2 --mutant first-switch-only --seeds 1 --fuzz-seeds 1",
    ),
    // docs/reading-runs.md: a sweep with its reports.
    (
        "--seeds 1..20 --report reports/",
        "--seeds 1..4 --report reports/",
    ),
];

/// What a shown line prints, as the doc around it says: (a piece of the
/// shown line, text its output must hold).
const CLAIMS: &[(&str, &str)] = &[
    // README, "The two commands" and "Replaying a seed".
    (
        "--strategy legacy      # does not",
        "switch1 lacks the NAT entry of boundary-ntp",
    ),
    // docs/finding-bugs.md, "Shrinking": the naive start's seeds that fail.
    ("fuzz --seeds 1..60 --start naive", "failed: 10\n"),
    (
        "fuzz --seeds 1..60 --start naive",
        "seed 53: [UNLISTED] invariant no-state-after-delete violated",
    ),
    // ...and seed 53's plan, shrunk as the page says.
    ("shrink naive-53.toml", "30 steps -> 4 steps in 104 runs"),
    (
        "run my-finding.toml",
        "invariant no-state-after-delete violated",
    ),
    // docs/upstream-bugs.md: the report names the mechanism's era.
    (
        "'saga+nat-ensure=matches-removed'",
        "NAT ensure matches-removed (before omicron #4610)",
    ),
];

/// One shown command: where it is, the line as shown and the exit status
/// its comment states.
struct Shown {
    place: String,
    line: String,
    exit: Option<i32>,
}

/// The racksim commands of each ```` ```sh ```` block of `path`, a block
/// at a time.
fn shown_blocks(path: &Path) -> Vec<Vec<Shown>> {
    let text = std::fs::read_to_string(path).unwrap();
    let rel = path.strip_prefix(root()).unwrap().display().to_string();
    let mut blocks = Vec::new();
    // Inside a fence: `Some` for an `sh` block (its commands so far),
    // `None` for any other; outside, `fenced` is false.
    let mut fenced = false;
    let mut block: Option<Vec<Shown>> = None;
    for (i, raw) in text.lines().enumerate() {
        if let Some(info) = raw.trim_start().strip_prefix("```") {
            if fenced {
                blocks.extend(block.take());
            } else {
                block = (info.trim() == "sh").then(Vec::new);
            }
            fenced = !fenced;
            continue;
        }
        let Some(b) = block.as_mut() else { continue };
        let line = raw.trim();
        let command = if let Some(rest) = line.strip_prefix("cargo run -p racksim -- ") {
            format!("racksim {rest}")
        } else if line.starts_with("racksim ") {
            line.to_string()
        } else {
            continue;
        };
        let exit = command.split_once('#').and_then(|(_, comment)| {
            let after = comment.split("exit ").nth(1)?;
            after
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        });
        b.push(Shown {
            place: format!("{rel}:{}", i + 1),
            line: command,
            exit,
        });
    }
    blocks.retain(|b: &Vec<Shown>| !b.is_empty());
    blocks
}

/// Every page with shown commands: the README, then `docs/` in order.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    pages.extend(markdown_files(&root().join("docs")));
    pages
}

/// A directory with the binary in it as `racksim`, to put first on the
/// `PATH`: the shell finds `racksim` as a reader's shell does after
/// `cargo install --path racksim`.
fn bin_dir(scratch: &Path) -> PathBuf {
    let bin = scratch.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_racksim"), bin.join("racksim")).unwrap();
    bin
}

#[test]
fn every_racksim_command_the_docs_show_runs_as_shown() {
    let mut scaled_used = vec![false; SCALED.len()];
    let mut claims_used = vec![false; CLAIMS.len()];
    let mut ran = 0;
    for page in pages() {
        for block in shown_blocks(&page) {
            // A block is one reader's session: one directory for all of
            // its lines.
            let scratch = tempfile::tempdir().unwrap();
            let path = format!(
                "{}:{}",
                bin_dir(scratch.path()).display(),
                std::env::var("PATH").unwrap_or_default()
            );
            for shown in block {
                let mut line = shown.line.clone();
                for (i, (from, to)) in SCALED.iter().enumerate() {
                    if line.contains(from) {
                        line = line.replace(from, to);
                        scaled_used[i] = true;
                    }
                }
                let out = Command::new("sh")
                    .arg("-c")
                    .arg(&line)
                    .env("PATH", &path)
                    .env_remove("CARGO")
                    .current_dir(scratch.path())
                    .output()
                    .unwrap();
                let stdout = String::from_utf8_lossy(&out.stdout);
                let stderr = String::from_utf8_lossy(&out.stderr);
                let code = out.status.code();
                let context = || {
                    format!(
                        "{} `{}` (ran `{line}`): exit {code:?}\nstderr:\n{stderr}\nstdout:\n{stdout}",
                        shown.place, shown.line
                    )
                };
                match shown.exit {
                    Some(expected) => assert_eq!(code, Some(expected), "{}", context()),
                    None => assert!(matches!(code, Some(0 | 1)), "{}", context()),
                }
                for (i, (piece, text)) in CLAIMS.iter().enumerate() {
                    if shown.line.contains(piece) {
                        claims_used[i] = true;
                        assert!(
                            stdout.contains(text),
                            "{}: the doc says it prints {text:?}: {}",
                            shown.place,
                            context()
                        );
                    }
                }
                ran += 1;
            }
        }
    }
    for (used, (from, _)) in scaled_used.iter().zip(SCALED) {
        assert!(used, "SCALED names {from:?}, which no shown command has");
    }
    for (used, (piece, _)) in claims_used.iter().zip(CLAIMS) {
        assert!(used, "CLAIMS names {piece:?}, which no shown command has");
    }
    assert!(ran >= 20, "only {ran} shown commands found");
}

/// The README's sample of a run ("Reading a run") is the run's own
/// output: every line it shows is a line of `racksim run
/// madrid-one-switch --seed 7 --strategy legacy`, in order, and wherever
/// it leaves lines out it says so with a `...` line.
#[test]
fn the_readme_s_sample_run_is_the_run_with_its_cuts_marked() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("## Reading a run\n")
        .nth(1)
        .expect("the README has a section \"Reading a run\"");
    let sample = section
        .split("```text\n")
        .nth(1)
        .and_then(|s| s.split("\n```").next())
        .expect("the section has a ```text sample");
    let (code, out, _) = crate::common::run_madrid("7", "legacy", &[]);
    assert_eq!(code, Some(1));
    let lines: Vec<&str> = out.lines().collect();
    // Where the last sample line matched, and whether a cut mark came
    // after it.
    let mut at: Option<usize> = None;
    let mut marked = false;
    for shown in sample.lines() {
        if shown == "..." {
            marked = true;
            continue;
        }
        let from = at.map_or(0, |a| a + 1);
        let found = lines[from..]
            .iter()
            .position(|l| *l == shown)
            .map(|p| p + from)
            .unwrap_or_else(|| panic!("the sample's line {shown:?} is not in the run's output (after line {from}):\n{out}"));
        assert!(
            found == from || marked,
            "the sample leaves out lines {from}..{found} of the output before {shown:?} without a `...` line"
        );
        at = Some(found);
        marked = false;
    }
    let last = at.expect("the sample shows lines");
    assert!(
        last + 1 == lines.len() || marked,
        "the sample ends before the output does, without a `...` line"
    );
}
