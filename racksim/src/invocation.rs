//! How the user started racksim, so that a printed replay line pastes
//! into their shell.
//!
//! A replay line (`replay: … run madrid-one-switch --seed 7 --strategy
//! legacy`) is only useful if it runs where it was printed. Someone who
//! followed the README typed `cargo run -p racksim -- run …` and has no
//! `racksim` on their `PATH`; someone who ran `cargo install --path
//! racksim` typed `racksim`; a script may call `./target/release/racksim`.
//! [`program`] is the command each of them would paste, and every replay
//! line racksim prints starts with it.
//!
//! The binary decides it once, at start ([`set_from_process`]), from its
//! `argv[0]` and the environment that `cargo run` gives a program. It
//! never changes during a run and never reaches the trace: the same seed
//! still prints the same trace. A library caller (the tests, the
//! committed snapshots, a regression file's `# Replay:` comment) gets the
//! installed spelling, `racksim`.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::OnceLock;

static PROGRAM: OnceLock<String> = OnceLock::new();

/// The installed spelling: what a library caller, and a user with racksim
/// on their `PATH`, gets.
pub const INSTALLED: &str = "racksim";

/// The command that starts racksim as the user started it: `racksim`,
/// `cargo run -p racksim --` or the path they typed.
pub fn program() -> &'static str {
    PROGRAM.get().map(String::as_str).unwrap_or(INSTALLED)
}

/// Decides [`program`] from this process's `argv[0]` and environment. The
/// binary calls it first thing; later calls change nothing.
pub fn set_from_process() {
    let argv0 = std::env::args_os().next();
    let cargo_run = std::env::var_os("CARGO").is_some()
        && std::env::var_os("CARGO_PKG_NAME").as_deref() == Some(OsStr::new("racksim"));
    let _ = PROGRAM.set(detect(argv0.as_deref(), cargo_run));
}

/// The command for a program started as `argv0`; `cargo_run` says that
/// `cargo run` started it (cargo sets `CARGO` and the package's
/// `CARGO_PKG_NAME` in the program's environment).
///
/// * A bare name (no `/`) was found on the `PATH`: paste it as typed.
/// * Under `cargo run`, the user typed a cargo command: paste that, with
///   the profile the binary was built in (`target/release/racksim` →
///   `--release`), so the replay rebuilds what they are editing.
/// * Otherwise the path as typed, quoted for the shell if it needs it: it
///   pastes in the directory the user is in.
pub fn detect(argv0: Option<&OsStr>, cargo_run: bool) -> String {
    let Some(argv0) = argv0.and_then(OsStr::to_str) else {
        return INSTALLED.to_string();
    };
    if !argv0.contains('/') {
        return word(argv0);
    }
    if cargo_run {
        let profile = Path::new(argv0)
            .parent()
            .and_then(Path::file_name)
            .and_then(OsStr::to_str);
        return match profile {
            Some("debug") | None => "cargo run -p racksim --".to_string(),
            Some("release") => "cargo run --release -p racksim --".to_string(),
            Some(other) => format!("cargo run --profile {} -p racksim --", word(other)),
        };
    }
    word(argv0)
}

/// `s` as one shell word: as it is when every character is one a shell
/// reads literally, else quoted. `=` and `+` are literal inside a word,
/// so a strategy such as `saga+nat-ensure=matches-removed` prints as the
/// user typed it.
pub fn word(s: &str) -> String {
    let literal = |c: char| c.is_ascii_alphanumeric() || "+-./:@_=,%".contains(c);
    if !s.is_empty() && s.chars().all(literal) {
        return s.to_string();
    }
    match shlex::try_quote(s) {
        Ok(quoted) => quoted.into_owned(),
        // Only a NUL cannot be quoted, and no argument can hold one.
        Err(_) => s.to_string(),
    }
}

#[cfg(test)]
mod tests;
