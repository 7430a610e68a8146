//! Helpers shared by the integration tests that drive the real binary.

use std::process::Command;

#[allow(dead_code)] // only the live tests use it
pub mod http;

/// Run `racksim` with `args`: exit code, stdout, stderr.
pub fn racksim(args: &[&str]) -> (Option<i32>, String, String) {
    racksim_in(".", args)
}

/// `racksim run madrid-one-switch --seed SEED --strategy STRATEGY`, then
/// `extra`: the run most tests of the CLI read.
#[allow(dead_code)] // not every test binary uses it
pub fn run_madrid(seed: &str, strategy: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec![
        "run",
        "madrid-one-switch",
        "--seed",
        seed,
        "--strategy",
        strategy,
    ];
    args.extend_from_slice(extra);
    racksim(&args)
}

/// [`racksim`] in the directory `dir`, started as a user with racksim on
/// their `PATH` starts it (`argv[0]` is `racksim`), so its replay lines
/// read `racksim run …` (see `racksim::invocation`).
pub fn racksim_in(dir: &str, args: &[&str]) -> (Option<i32>, String, String) {
    use std::os::unix::process::CommandExt;
    let out = Command::new(env!("CARGO_BIN_EXE_racksim"))
        .arg0("racksim")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("racksim runs");
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// `racksim` with a command line written as one string, split at spaces
/// (no argument of these tests holds one).
#[allow(dead_code)] // not every test binary uses it
pub fn racksim_words(line: &str) -> (Option<i32>, String, String) {
    racksim(&line.split(' ').collect::<Vec<_>>())
}

/// A fresh scratch path under the temp dir, unique to this process and
/// `name` (not created: a test makes it, or checks that a command does).
#[allow(dead_code)] // not every test binary uses it
pub fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("racksim-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    Scratch(dir)
}

/// A scratch path, removed with all that is in it when the test that
/// holds it ends, so that a passing suite leaves nothing in the temp dir.
/// A failing test's is kept (dropped while its thread panics), for a
/// look at what the command wrote.
pub struct Scratch(std::path::PathBuf);

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for Scratch {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A race scenario whose plan races nothing: no seed can break the
/// invariant its `some_seeds_violate` names.
#[allow(dead_code)] // not every test binary uses it
pub const NO_RACE: &str = concat!(
    r#"name = "no-race"
description = "a create and nothing else"
"#,
    include_str!("one-create.toml"),
    r#"
[expect.naive]
outcome = "any"
deadline = "3m"
some_seeds_violate = "no-state-after-delete"
"#
);
