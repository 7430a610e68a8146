//! Output paths (issue 39): an output is written whole or not at all, never
//! over an input, and `shrink` never replaces a file unasked. Every case
//! runs in a scratch directory holding a copy of the madrid scenario, an
//! existing trace and a hand-edited regression.

use std::path::Path;

use super::common::{racksim_in, scratch};
use super::Untouched;

const MADRID: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../scenarios/madrid-one-switch.toml"
);

/// A scratch directory with `self.toml` (madrid), `tr.json` and `m.toml`
/// (a hand-edited shrink result) in it.
fn setup(name: &str) -> super::common::Scratch {
    let dir = scratch(name);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::copy(MADRID, dir.join("self.toml")).unwrap();
    std::fs::write(dir.join("tr.json"), "an earlier trace\n").unwrap();
    std::fs::write(dir.join("m.toml"), "# edited by hand\n").unwrap();
    dir
}

/// Names of the files in `dir` that look like racksim's temporaries.
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".racksim-") && n.ends_with(".tmp"))
        .collect()
}

struct Case {
    args: &'static str,
    code: i32,
    /// Every fragment must be in stderr.
    message: &'static [&'static str],
    /// Files (relative to the scratch directory) that must be byte-identical
    /// afterwards; one that did not exist must still not exist.
    untouched: &'static [&'static str],
}

const RUN: &str = "run self.toml --seed 7 --strategy sled-task";

#[test]
fn output_paths() {
    let cases = [
        // The first command: the report's directory does not exist.
        // The trace is checked too, and neither is opened for writing.
        Case {
            args: "run madrid-one-switch --seed 7 --strategy sled-task --trace-json tr.json --report /nonexistent/r.html",
            code: 2,
            message: &["--report /nonexistent/r.html", "/nonexistent", "create it first"],
            untouched: &["tr.json"],
        },
        Case {
            args: "RUN --trace-json tr.json --report nowhere/r.html",
            code: 2,
            message: &["--report nowhere/r.html", "create it first"],
            untouched: &["tr.json", "nowhere"],
        },
        // An output that is the scenario file, however it is spelled.
        Case {
            args: "RUN --trace-json self.toml",
            code: 2,
            message: &["--trace-json self.toml", "the scenario file", "another file"],
            untouched: &["self.toml"],
        },
        Case {
            args: "RUN --report self.toml",
            code: 2,
            message: &["--report self.toml", "the scenario file"],
            untouched: &["self.toml"],
        },
        Case {
            args: "RUN --trace-json tr.json --report sub/../self.toml",
            code: 2,
            message: &["--report sub/../self.toml", "the scenario file"],
            untouched: &["self.toml", "tr.json"],
        },
        Case {
            args: "compare self.toml --seed 7 legacy sled-task --report ./self.toml",
            code: 2,
            message: &["--report ./self.toml", "the scenario file"],
            untouched: &["self.toml"],
        },
        // A catalogue name is no input file: an output of that name is
        // written (whole), not refused as "the scenario file".
        Case {
            args: "run madrid-one-switch --seed 7 --strategy sled-task --trace-json madrid-one-switch --report nowhere/r.html",
            code: 2,
            message: &["--report nowhere/r.html", "create it first"],
            untouched: &["madrid-one-switch"],
        },
        // Two outputs on one file, existing or not.
        Case {
            args: "RUN --trace-json tr.json --report ./tr.json",
            code: 2,
            message: &["same file", "--trace-json tr.json"],
            untouched: &["tr.json", "self.toml"],
        },
        Case {
            args: "RUN --trace-json new.out --report sub/../new.out",
            code: 2,
            message: &["same file"],
            untouched: &["new.out"],
        },
        // An output that is a directory.
        Case {
            args: "RUN --trace-json tr.json --report sub",
            code: 2,
            message: &["--report sub", "is a directory"],
            untouched: &["tr.json"],
        },
        // shrink's result over its own source: the default-`--out`
        // case, here with --out naming the source's directory. Refused even
        // with --force.
        Case {
            args: "shrink self.toml --seed 7 --strategy legacy --out . --name self",
            code: 2,
            message: &["the scenario being shrunk", "--out", "--name"],
            untouched: &["self.toml"],
        },
        Case {
            args: "shrink self.toml --seed 7 --strategy legacy --out . --name self --force",
            code: 2,
            message: &["the scenario being shrunk"],
            untouched: &["self.toml"],
        },
        // shrink over an existing (hand-edited) result: refused, naming
        // both ways out.
        Case {
            args: "shrink self.toml --seed 7 --strategy legacy --out . --name m",
            code: 2,
            message: &["m.toml exists", "--out", "--force"],
            untouched: &["m.toml", "self.toml"],
        },
    ];
    let dir = setup("outputs");
    let d = dir.to_str().unwrap();
    for case in &cases {
        let args = case.args.replace("RUN", RUN);
        let words: Vec<&str> = args.split(' ').collect();
        let paths: Vec<_> = case.untouched.iter().map(|f| dir.join(f)).collect();
        let before = Untouched::record(&paths);
        let (code, _, stderr) = racksim_in(d, &words);
        assert_eq!(
            code,
            Some(case.code),
            "{args}: exit code; stderr:\n{stderr}"
        );
        for m in case.message {
            assert!(stderr.contains(m), "{args}: stderr lacks {m:?}:\n{stderr}");
        }
        before.check(&args);
        assert_eq!(
            temporaries(&dir),
            Vec::<String>::new(),
            "{args}: temporaries left"
        );
    }
    assert_eq!(cases.len(), 13);
}

/// What is written is written whole, where it was asked, with the mode an
/// existing file had; `shrink --force` replaces a result it was told to.
#[test]
fn outputs_written_whole_and_shrink_force_replaces() {
    use std::os::unix::fs::PermissionsExt;
    let dir = setup("outputs-written");
    let d = dir.to_str().unwrap();
    std::fs::set_permissions(dir.join("tr.json"), std::fs::Permissions::from_mode(0o640)).unwrap();
    let (code, _, stderr) = racksim_in(
        d,
        &[
            "run",
            "self.toml",
            "--seed",
            "7",
            "--strategy",
            "sled-task",
            "--trace-json",
            "tr.json",
            "--report",
            "r.html",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let trace = std::fs::read_to_string(dir.join("tr.json")).unwrap();
    assert!(
        trace.ends_with("}\n") && trace.lines().count() > 10,
        "{trace}"
    );
    let mode = std::fs::metadata(dir.join("tr.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640, "the replaced file keeps its mode");
    assert!(std::fs::read_to_string(dir.join("r.html"))
        .unwrap()
        .trim_end()
        .ends_with("</html>"));

    let (code, stdout, stderr) = racksim_in(
        d,
        &[
            "shrink",
            "self.toml",
            "--seed",
            "7",
            "--strategy",
            "legacy",
            "--out",
            ".",
            "--name",
            "m",
            "--force",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("wrote ./m.toml"), "{stdout}");
    let m = std::fs::read_to_string(dir.join("m.toml")).unwrap();
    assert!(m.contains("Regression: shrunk by"), "{m}");
    assert_eq!(temporaries(&dir), Vec::<String>::new());
}

/// SIGINT during a run: the existing outputs are as they were, and no
/// temporary remains. The run is madrid's legacy with a 100h deadline,
/// seconds of wall time; the signal goes once its temporaries exist (the
/// handler that removes them is registered before the first is made).
#[test]
fn sigint_leaves_outputs_as_they_were() {
    let dir = setup("outputs-sigint");
    let scenario = std::fs::read_to_string(dir.join("self.toml")).unwrap();
    assert!(scenario.contains("deadline = \"2h\""));
    std::fs::write(
        dir.join("long.toml"),
        scenario.replace("deadline = \"2h\"", "deadline = \"100h\""),
    )
    .unwrap();
    std::fs::write(dir.join("r.html"), "an earlier report\n").unwrap();
    let before = Untouched::record(&[dir.join("tr.json"), dir.join("r.html")]);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_racksim"))
        .current_dir(&dir)
        .args([
            "run",
            "long.toml",
            "--seed",
            "7",
            "--strategy",
            "legacy",
            "--trace-json",
            "tr.json",
            "--report",
            "r.html",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the condition itself (both temporaries exist), bounded.
    let mut polls = 0;
    while temporaries(&dir).len() < 2 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it was interrupted"
        );
        polls += 1;
        assert!(polls < 60_000, "no temporaries appeared");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted: no output file was changed"),
        "{stderr}"
    );
    before.check("SIGINT");
    assert_eq!(temporaries(&dir), Vec::<String>::new(), "temporaries left");
}
