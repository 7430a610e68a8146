//! How a file is read (issue 39): every file a user names — a scenario, a
//! known-defects file, a campaign shard — is read by one function
//! (scenario/src/input.rs): regular files only, at most 4 MiB, UTF-8 text,
//! and nothing of it echoed raw. Every case runs in a scratch directory
//! holding a FIFO, a directory and files that are too large, not UTF-8,
//! binary, or hold an ESC byte. None of these cases may block or read
//! without end: a FIFO or /dev/zero is refused before it is read.

use std::path::Path;

use super::common::{racksim_in, scratch};
use super::Untouched;

const KNOWN_DEFECTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../scenarios/known-defects.toml"
);

/// The files of the scratch directory (`fifo` and `dir` besides).
const FILES: &[(&str, &[u8])] = &[
    // Line 2, column 10, byte offset 20: the 0xff.
    ("bad.toml", b"name = \"x\"\nnote = \"a\xff\"\n"),
    // Line 2, column 3, byte offset 13: the NUL.
    ("bin.toml", b"name = \"x\"\nab\0cd\n"),
    // An ESC in a string, where toml refuses it.
    ("esc.toml", b"name = \"a\x1b[31mred\"\n"),
    // An ESC bare, where a key would be.
    ("esc-key.toml", b"name = \"x\"\n\x1b[31m = 1\n"),
    // An ESC that toml decodes into a key, which the error then names.
    ("esc-field.toml", b"name = \"x\"\n\"\\u001b[31mred\" = 1\n"),
    // JSON whose string (an ESC, decoded) the shard parser quotes back.
    (
        "esc.json",
        b"{\"campaign\": {\"kind\": \"sweep\", \"command\": \"c\", \"options\": {}}, \
          \"scenario\": \"s\", \"strategy\": \"s\", \"seeds\": [1, 2], \"shard\": [0, 1], \
          \"runs\": \"\\u001b[31mred\"}\n",
    ),
];

fn setup(name: &str) -> super::common::Scratch {
    let dir = scratch(name);
    std::fs::create_dir_all(dir.join("dir")).unwrap();
    for (file, bytes) in FILES {
        std::fs::write(dir.join(file), bytes).unwrap();
    }
    // One byte over the limit: 4 MiB of a TOML comment, and a newline.
    let mut big = vec![b'#'; 4 * 1024 * 1024];
    big.push(b'\n');
    std::fs::write(dir.join("big.toml"), big).unwrap();
    // The known defects, the first one's regression the FIFO.
    let known = std::fs::read_to_string(KNOWN_DEFECTS).unwrap();
    let first = known
        .lines()
        .find(|l| l.starts_with("regression = "))
        .expect("a defect has a regression");
    std::fs::write(
        dir.join("kd.toml"),
        known.replacen(first, "regression = \"fifo\"", 1),
    )
    .unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(dir.join("fifo"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo failed");
    dir
}

struct Case {
    args: &'static str,
    code: i32,
    /// Every fragment must be in stderr.
    message: &'static [&'static str],
    /// Files (relative to the scratch directory) that must be
    /// byte-identical afterwards (never the FIFO: reading it would block).
    untouched: &'static [&'static str],
}

const REGULAR: &str = "not a regular file";

#[test]
fn how_a_file_is_read() {
    let cases = [
        // Scenario files.
        Case {
            args: "run /dev/zero --seed 1 --strategy legacy",
            code: 2,
            message: &["scenario file /dev/zero", "a character device", REGULAR],
            untouched: &[],
        },
        Case {
            args: "run fifo --seed 1 --strategy legacy",
            code: 2,
            message: &["scenario file fifo", "a FIFO", REGULAR],
            untouched: &[],
        },
        Case {
            args: "run dir --seed 1 --strategy legacy",
            code: 2,
            message: &["scenario file dir", "a directory", REGULAR],
            untouched: &[],
        },
        Case {
            args: "run big.toml --seed 1 --strategy legacy",
            code: 2,
            message: &["big.toml", "larger than 4 MiB"],
            untouched: &["big.toml"],
        },
        Case {
            args: "run bad.toml --seed 1 --strategy legacy",
            code: 2,
            message: &[
                "bad.toml:2:10:",
                "not UTF-8",
                "byte offset 20",
                "save the file as UTF-8",
            ],
            untouched: &["bad.toml"],
        },
        Case {
            args: "run bin.toml --seed 1 --strategy legacy",
            code: 2,
            message: &["bin.toml:2:3:", "binary file", "byte offset 13"],
            untouched: &["bin.toml"],
        },
        Case {
            args: "run esc.toml --seed 1 --strategy legacy",
            code: 2,
            message: &["esc.toml:1:", "\\u{1b}[31mred"],
            untouched: &["esc.toml"],
        },
        Case {
            args: "run esc-key.toml --seed 1 --strategy legacy",
            code: 2,
            message: &["esc-key.toml:2:", "\\u{1b}[31m = 1"],
            untouched: &["esc-key.toml"],
        },
        Case {
            args: "run esc-field.toml --seed 1 --strategy legacy",
            code: 2,
            message: &["esc-field.toml:2:", "unknown field", "\\u{1b}[31mred"],
            untouched: &["esc-field.toml"],
        },
        // shrink reads its source the same way.
        Case {
            args: "shrink fifo --seed 1 --strategy legacy",
            code: 2,
            message: &["scenario file fifo", "a FIFO"],
            untouched: &[],
        },
        Case {
            args: "shrink bin.toml --seed 1 --strategy legacy",
            code: 2,
            message: &["bin.toml:2:3:", "binary file"],
            untouched: &["bin.toml"],
        },
        // Known-defects files.
        Case {
            args: "fuzz --seeds 1..1 --known-defects /dev/zero",
            code: 2,
            message: &["known-defects file /dev/zero", "a character device"],
            untouched: &[],
        },
        Case {
            args: "fuzz --seeds 1..1 --known-defects fifo",
            code: 2,
            message: &["known-defects file fifo", "a FIFO"],
            untouched: &[],
        },
        Case {
            args: "fuzz --seeds 1..1 --known-defects bad.toml",
            code: 2,
            message: &["bad.toml:2:10:", "known-defects file is not UTF-8"],
            untouched: &["bad.toml"],
        },
        // A regression a known defect names.
        Case {
            args: "fuzz --seeds 1..1 --known-defects kd.toml",
            code: 2,
            message: &[
                "kd.toml:",
                "regression \"fifo\" is not a usable regression file",
                "regression file fifo is a FIFO",
            ],
            untouched: &["kd.toml"],
        },
        Case {
            args: "fuzz --seeds 1..1 --known-defects big.toml",
            code: 2,
            message: &["known-defects file big.toml", "larger than 4 MiB"],
            untouched: &["big.toml"],
        },
        // Campaign shards.
        Case {
            args: "merge /dev/zero",
            code: 2,
            message: &["shard /dev/zero", "a character device"],
            untouched: &[],
        },
        Case {
            args: "merge fifo",
            code: 2,
            message: &["shard fifo", "a FIFO"],
            untouched: &[],
        },
        Case {
            args: "merge dir",
            code: 2,
            message: &["shard dir", "a directory"],
            untouched: &[],
        },
        Case {
            args: "merge bin.toml",
            code: 2,
            message: &["bin.toml:2:3:", "shard is a binary file"],
            untouched: &["bin.toml"],
        },
        Case {
            args: "merge esc.json",
            code: 2,
            message: &["esc.json", "\\u{1b}[31mred"],
            untouched: &["esc.json"],
        },
    ];
    assert_eq!(cases.len(), 21, "a case was lost");
    let dir = setup("files");
    let d = dir.to_str().unwrap();
    for case in &cases {
        let words: Vec<&str> = case.args.split(' ').collect();
        let paths: Vec<_> = case.untouched.iter().map(|f| dir.join(f)).collect();
        let before = Untouched::record(&paths);
        let (code, _, stderr) = racksim_in(d, &words);
        assert_eq!(code, Some(case.code), "{}: exit code\n{stderr}", case.args);
        for fragment in case.message {
            assert!(
                stderr.contains(fragment),
                "{}: {fragment:?} not in:\n{stderr}",
                case.args
            );
        }
        // No control character from a file reaches the terminal.
        assert!(
            !stderr
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{}: a control character in:\n{stderr:?}",
            case.args
        );
        before.check(case.args);
        assert_eq!(entries(&dir), 10, "{}: the directory changed", case.args);
    }
}

/// How many entries `dir` has (the files, `big.toml`, `kd.toml`, `fifo`,
/// `dir`).
fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}
