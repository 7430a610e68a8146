//! Bad command-line arguments (issue 39): each is refused with exit status
//! 2 and a message naming the argument and the way out, before anything
//! runs or is written. Every case runs in a scratch directory holding a
//! copy of madrid, a hand-edited sweep shard and an existing file.

use super::common::{racksim_in, scratch};
use super::Untouched;

const MADRID: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../scenarios/madrid-one-switch.toml"
);

const SWEEP: &str = "sweep madrid-one-switch --strategy legacy";

struct Case {
    /// `SWEEP` in it stands for [`SWEEP`], `PORT` for a port in use.
    args: &'static str,
    code: i32,
    /// Every fragment must be in stderr.
    message: &'static [&'static str],
    /// Files (relative to the scratch directory) that must be
    /// byte-identical afterwards; one that did not exist must still not.
    untouched: &'static [&'static str],
}

/// The scratch directory: `self.toml` (madrid), `file` (some bytes), and
/// the shards of a real sweep of seeds 1..4 in two, `s0.json` as written
/// and `s1.json` with its `as_expected` edited to 7002 (of 2 runs), and
/// `f0.json`, a fuzz shard with `passed` edited.
fn setup(name: &str) -> super::common::Scratch {
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(MADRID, dir.join("self.toml")).unwrap();
    std::fs::write(dir.join("file"), "not a directory\n").unwrap();
    let d = dir.to_str().unwrap();
    for i in 0..2 {
        let shard = format!("{i}/2");
        let (code, json, err) = racksim_in(
            d,
            &[
                "sweep",
                "madrid-one-switch",
                "--strategy",
                "legacy",
                "--seeds",
                "1..4",
                "--shard",
                &shard,
                "--json",
            ],
        );
        assert_eq!(code, Some(0), "{err}");
        let json = if i == 1 {
            let edited = json.replace("\"as_expected\": 2,", "\"as_expected\": 7002,");
            assert_ne!(edited, json, "the shard has no as_expected of 2");
            edited
        } else {
            json
        };
        std::fs::write(dir.join(format!("s{i}.json")), json).unwrap();
    }
    let (code, json, err) = racksim_in(d, &["fuzz", "--seeds", "1..2", "--shard", "0/2", "--json"]);
    assert!(code == Some(0) || code == Some(1), "{err}");
    let edited = json.replacen("\"passed\": ", "\"passed\": 9", 1);
    assert_ne!(edited, json);
    std::fs::write(dir.join("f0.json"), edited).unwrap();
    dir
}

#[test]
fn command_line() {
    let cases = [
        // --jobs: 1 to 256.
        Case {
            args: "SWEEP --seeds 1..2 --jobs 0",
            code: 2,
            message: &["--jobs must be at least 1"],
            untouched: &[],
        },
        Case {
            args: "SWEEP --seeds 1..2 --jobs 100000",
            code: 2,
            message: &["--jobs 100000 is more than 256", "cores"],
            untouched: &[],
        },
        Case {
            args: "matrix --jobs 0",
            code: 2,
            message: &["--jobs must be at least 1"],
            untouched: &[],
        },
        Case {
            args: "fuzz --seeds 1..2 --jobs 257",
            code: 2,
            message: &["--jobs 257 is more than 256"],
            untouched: &[],
        },
        Case {
            args: "SWEEP --seeds 1..2 --jobs two",
            code: 2,
            message: &["--jobs must be a whole number from 1 to 256"],
            untouched: &[],
        },
        // --seeds.
        Case {
            args: "SWEEP --seeds 1..99999999999999999999",
            code: 2,
            message: &[
                "99999999999999999999 does not fit in a seed",
                "18446744073709551615",
            ],
            untouched: &[],
        },
        Case {
            args: "SWEEP --seeds 9..2",
            code: 2,
            message: &["9 is above 2", "e.g. 2..9"],
            untouched: &[],
        },
        Case {
            args: "SWEEP --seeds 1..",
            code: 2,
            message: &["expected A..B with A <= B"],
            untouched: &[],
        },
        Case {
            args: "SWEEP --seeds 1..99999999",
            code: 2,
            message: &["at most 10000000 per command"],
            untouched: &[],
        },
        Case {
            args: "SWEEP --seeds 1..4 --shard 4/4",
            code: 2,
            message: &["invalid shard \"4/4\"", "I < N"],
            untouched: &[],
        },
        // Unknown strategies and flags.
        Case {
            args: "sweep madrid-one-switch --strategy bogus --seeds 1..2 --report new",
            code: 2,
            message: &["unknown strategy \"bogus\"", "legacy"],
            untouched: &["new"],
        },
        // A strategy of the other kind of scenario names its kind.
        Case {
            args: "run madrid-one-switch --seed 7 --strategy saga+nat-ensure=matches-removed",
            code: 2,
            message: &[
                "\"saga\" is an instance start",
                "kind = \"service-nat\"",
                "scrimlet-local",
            ],
            untouched: &[],
        },
        Case {
            args: "run start-delete-race --seed 1 --strategy legacy",
            code: 2,
            message: &[
                "\"legacy\" is a service-NAT strategy",
                "inline, naive, saga",
            ],
            untouched: &[],
        },
        Case {
            args: "fuzz --seeds 1..10 --strategy saga",
            code: 2,
            message: &["the fuzzer takes it as --start saga"],
            untouched: &[],
        },
        Case {
            args: "run madrid-one-switch --seed 1 --strategy legacy --bogus",
            code: 2,
            message: &["unexpected argument '--bogus'"],
            untouched: &[],
        },
        Case {
            args: "run nothing-of-that-name --seed 1 --strategy legacy",
            code: 2,
            message: &["no scenario \"nothing-of-that-name\"", "catalogue name"],
            untouched: &[],
        },
        // sweep --report DIR creates nothing before the run, and refuses a
        // directory it could not create.
        Case {
            args: "SWEEP --seeds 1..2 --report nowhere/reports",
            code: 2,
            message: &["--report nowhere/reports", "create it first"],
            untouched: &["nowhere"],
        },
        Case {
            args: "SWEEP --seeds 1..2 --report file",
            code: 2,
            message: &["--report file", "not a directory"],
            untouched: &["file"],
        },
        // merge of hand-edited shards.
        Case {
            args: "merge s0.json s1.json",
            code: 2,
            message: &["s1.json", "`as_expected` is 7002", "`runs` (2)", "edited"],
            untouched: &["s0.json", "s1.json"],
        },
        Case {
            args: "merge f0.json",
            code: 2,
            message: &["f0.json", "`passed`", "do not add up to `runs`"],
            untouched: &["f0.json"],
        },
        // serve on a port in use.
        Case {
            args: "serve --bind 127.0.0.1:PORT",
            code: 2,
            message: &[
                "--bind 127.0.0.1:",
                "the address is in use",
                "choose another address or port with --bind",
            ],
            untouched: &[],
        },
    ];
    assert_eq!(cases.len(), 21, "a case was lost");
    let dir = setup("cli");
    let d = dir.to_str().unwrap();
    // Held for the whole test: the port `serve` finds in use.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    for case in &cases {
        let args = case.args.replace("SWEEP", SWEEP).replace("PORT", &port);
        let words: Vec<&str> = args.split(' ').collect();
        let paths: Vec<_> = case.untouched.iter().map(|f| dir.join(f)).collect();
        let before = Untouched::record(&paths);
        let (code, _, stderr) = racksim_in(d, &words);
        assert_eq!(code, Some(case.code), "{args}: exit code\n{stderr}");
        for fragment in case.message {
            assert!(
                stderr.contains(fragment),
                "{args}: {fragment:?} not in:\n{stderr}"
            );
        }
        before.check(&args);
    }
}

/// `sweep --report DIR` makes DIR once the sweep has run (and only then).
#[test]
fn sweep_report_dir_is_made_after_the_run() {
    let dir = scratch("cli-report");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let (code, _, stderr) = racksim_in(
        d,
        &[
            "sweep",
            "madrid-one-switch",
            "--strategy",
            "legacy",
            "--seeds",
            "1..1",
            "--report",
            "reports",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    // Seed 1 of legacy does not converge: one report.
    assert!(stderr.contains("wrote 1 reports to reports"), "{stderr}");
    let written: Vec<_> = std::fs::read_dir(dir.join("reports"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(written, ["madrid-one-switch-legacy-seed1.html"], "{stderr}");
}

/// `.ci/campaign-build` (the profile-guided build for campaigns) refuses a
/// profile or an option it does not know, or two profiles, before it builds anything: exit
/// status 2 and the valid names, and none of its steps begun.
#[test]
fn campaign_build_refuses_an_unknown_profile() {
    let root = crate::docs::root();
    for (args, message) in [
        (
            ["debug", "--bolt"],
            "unknown profile \"debug\" (expected campaign or release)",
        ),
        (
            ["release", "--blot"],
            "unknown option \"--blot\" (expected --bolt)",
        ),
        (
            ["release", "campaign"],
            "two profiles, \"release\" and \"campaign\" (give one)",
        ),
    ] {
        let out = std::process::Command::new("bash")
            .arg(root.join(".ci/campaign-build"))
            .args(args)
            .output()
            .expect("bash runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("campaign-build 1/"),
            "{args:?}: it began to build: {stderr}"
        );
    }
}

/// `.ci/fuzz-ratio` refuses a base that is not a binary, and a bad round
/// count, before it runs anything; and a program that is not racksim
/// (here `false`, whose exit 1 a fuzz run's finding also gives) after its
/// first run, rather than printing a ratio of nothing.
#[test]
fn fuzz_ratio_refuses_what_is_not_a_binary() {
    let root = crate::docs::root();
    let script = root.join(".ci/fuzz-ratio");
    let run = |args: &[&str]| {
        let out = std::process::Command::new("bash")
            .arg(&script)
            .args(args)
            .output()
            .expect("bash runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.stdout,
        )
    };
    let (code, stderr, stdout) = run(&["/nonexistent/racksim", "/nonexistent/racksim"]);
    assert_eq!(code, Some(2), "stderr: {stderr}");
    assert!(
        stderr.contains("/nonexistent/racksim is not an executable racksim binary"),
        "stderr: {stderr}"
    );
    assert!(stdout.is_empty(), "it began to run");
    let (code, stderr, _) = run(&["/bin/sh", "/bin/sh", "x"]);
    assert_eq!(code, Some(2), "stderr: {stderr}");
    assert!(
        stderr.contains("ROUNDS must be 1 to 99, not \"x\""),
        "stderr: {stderr}"
    );
    let (code, stderr, _) = run(&["/bin/sh"]);
    assert_eq!(code, Some(2), "stderr: {stderr}");
    assert!(
        stderr.contains("usage: bash .ci/fuzz-ratio BASE NEW [ROUNDS]"),
        "stderr: {stderr}"
    );
    let (code, stderr, stdout) = run(&["/bin/false", "/bin/false", "1"]);
    assert_eq!(code, Some(2), "stderr: {stderr}");
    assert!(
        stderr.contains("/bin/false fuzz --rack madrid did not report 300 runs"),
        "stderr: {stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&stdout).contains("seeds/s"),
        "it printed a summary"
    );
}
