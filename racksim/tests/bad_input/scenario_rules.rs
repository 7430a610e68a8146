//! What a file says (issue 39): files that parse as TOML and name only
//! real hosts and fields, but say something no run can mean. Each case is
//! the committed madrid scenario with one edit; racksim must refuse it
//! with exit 2, at the line and column of the edit, with a hint, before
//! anything runs, and leave the file (and the directory) as it was.

use super::common::{racksim_in, scratch};
use super::Untouched;

const MADRID: &str = include_str!("../../../scenarios/madrid-one-switch.toml");

struct Case {
    name: &'static str,
    /// `(from, to)`: the edit, applied once; `to` is appended after the
    /// file's steps when `from` is empty.
    edit: (&'static str, &'static str),
    /// `file:line:col` where the error must point.
    at: &'static str,
    /// Every fragment must be in stderr.
    message: &'static [&'static str],
}

/// A step appended at the end of the steps (before the first expectation).
const STEPS_END: &str = "[expect.sled-task]";

fn cases() -> Vec<Case> {
    vec![
        // The issue's own: legacy's deadline of 5m ends its run before the
        // reveal (6m..7m30s), which the longest deadline used to hide.
        Case {
            name: "deadline-before-a-step",
            edit: ("outcome = \"fails\"\ndeadline = \"2h\"", "outcome = \"fails\"\ndeadline = \"5m\""),
            at: "f.toml:35:6",
            message: &[
                "step at 6m..7m30s is not before the deadline",
                "expect.legacy's deadline (its `deadline`, line 56), 5m",
                "hint: move the step earlier, or make that deadline later than 7m30s",
            ],
        },
        Case {
            name: "within-before-a-step",
            edit: ("within = \"12m\"", "within = \"5m\""),
            at: "f.toml:35:6",
            message: &["expect.sled-task's deadline (its `within` plus the stability window, line 51), 6m"],
        },
        Case {
            name: "within-zero",
            edit: ("within = \"12m\"", "within = \"0s\""),
            at: "f.toml:51:10",
            message: &["expect.sled-task: `within` is zero", "hint: give it a length"],
        },
        Case {
            name: "deadline-zero",
            edit: ("deadline = \"2h\"", "deadline = \"0ms\""),
            at: "f.toml:56:12",
            message: &["expect.legacy: `deadline` is zero"],
        },
        Case {
            name: "duration-overflow",
            edit: ("deadline = \"2h\"", "deadline = \"99999999999999999999h\""),
            at: "f.toml:56:12",
            message: &["longer than the longest racksim simulates, 10000h"],
        },
        Case {
            name: "duration-just-over-the-bound",
            edit: ("deadline = \"2h\"", "deadline = \"5124095577h\""),
            at: "f.toml:56:12",
            message: &["longer than the longest racksim simulates, 10000h"],
        },
        Case {
            name: "partition-with-itself",
            edit: ("", "[[step]]\nat = \"1m\"\naction = \"partition\"\na = \"sled0\"\nb = \"sled0\"\n\n"),
            at: "f.toml:53:5",
            message: &["sled0 is named in both `a` and `b`", "hint: name each host on one side only"],
        },
        Case {
            name: "host-on-both-sides",
            edit: ("", "[[step]]\nat = \"1m\"\naction = \"partition\"\na = [\"sled0\", \"sled1\"]\nb = [\"switch0\", \"sled1\"]\n\n"),
            at: "f.toml:53:5",
            message: &["sled1 is named in both `a` and `b`"],
        },
        Case {
            name: "crash-twice",
            edit: ("", "[[step]]\nat = \"1m\"\naction = \"crash\"\nhost = \"sled1\"\n\n[[step]]\nat = \"2m\"\naction = \"crash\"\nhost = \"sled1\"\n\n"),
            at: "f.toml:56:10",
            message: &["crash sled1: sled1 is already down", "hint: add a restart step between the two crashes"],
        },
    ]
}

#[test]
fn what_a_file_says() {
    let dir = scratch("scenario-rules");
    std::fs::create_dir_all(&dir).unwrap();
    let dir_s = dir.to_str().unwrap();
    let cases = cases();
    assert_eq!(cases.len(), 9, "a case was lost");
    for case in &cases {
        let (from, to) = case.edit;
        let text = if from.is_empty() {
            MADRID.replacen(STEPS_END, &format!("{to}{STEPS_END}"), 1)
        } else {
            assert!(
                MADRID.contains(from),
                "{}: the edit no longer applies",
                case.name
            );
            MADRID.replacen(from, to, 1)
        };
        let file = dir.join("f.toml");
        std::fs::write(&file, &text).unwrap();
        let before = Untouched::record(&[&file]);
        let (code, out, err) = racksim_in(
            dir_s,
            &[
                "run",
                "f.toml",
                "--seed",
                "7",
                "--strategy",
                "legacy",
                "--trace-json",
                "t.json",
            ],
        );
        assert_eq!(code, Some(2), "{}: exit code\n{err}", case.name);
        assert!(
            out.is_empty(),
            "{}: nothing runs, nothing is printed\n{out}",
            case.name
        );
        assert!(
            err.starts_with(&format!("error: {}: ", case.at)),
            "{}: located at {}\n{err}",
            case.name,
            case.at
        );
        for fragment in case.message {
            assert!(
                err.contains(fragment),
                "{}: says {fragment:?}\n{err}",
                case.name
            );
        }
        before.check(case.name);
        assert!(
            !dir.join("t.json").exists(),
            "{}: no output written",
            case.name
        );
    }
}
