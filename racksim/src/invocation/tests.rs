use std::ffi::OsStr;

use super::{detect, word};

fn of(argv0: &str, cargo_run: bool) -> String {
    detect(Some(OsStr::new(argv0)), cargo_run)
}

#[test]
fn a_program_on_the_path_pastes_as_typed() {
    assert_eq!(of("racksim", false), "racksim");
    // Even under cargo's environment (a test that runs the binary by
    // name): a bare name is what the user's shell found.
    assert_eq!(of("racksim", true), "racksim");
}

#[test]
fn cargo_run_pastes_as_the_cargo_command_in_its_profile() {
    assert_eq!(of("target/debug/racksim", true), "cargo run -p racksim --");
    assert_eq!(
        of("/home/u/racksim/target/release/racksim", true),
        "cargo run --release -p racksim --"
    );
    assert_eq!(
        of("target/bench/racksim", true),
        "cargo run --profile bench -p racksim --"
    );
}

#[test]
fn a_path_pastes_as_typed_and_quoted_when_it_must_be() {
    assert_eq!(
        of("./target/release/racksim", false),
        "./target/release/racksim"
    );
    assert_eq!(
        of("/opt/my tools/racksim", false),
        "'/opt/my tools/racksim'"
    );
}

#[test]
fn no_usable_argv0_is_the_installed_name() {
    assert_eq!(detect(None, true), "racksim");
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(detect(Some(OsStr::from_bytes(b"\xff/r")), false), "racksim");
    }
}

#[test]
fn words_are_quoted_only_when_a_shell_would_misread_them() {
    assert_eq!(
        word("saga+nat-ensure=matches-removed"),
        "saga+nat-ensure=matches-removed"
    );
    assert_eq!(word("scenarios/my run.toml"), "'scenarios/my run.toml'");
    assert_eq!(word("it's"), "\"it's\"");
    assert_eq!(word(""), "''");
}
