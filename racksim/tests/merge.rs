//! `racksim merge`, end to end through the real binary: the merge of a
//! campaign's shards prints what the unsharded run prints (text, JSON and
//! exit status), whatever the order of the files; and every kind of file
//! set that is not the shards of one campaign is refused, with an error
//! that says why and nothing on stdout.

use crate::common;
use common::{racksim, scratch, Scratch};

use std::path::Path;

/// `racksim sweep SCENARIO --strategy STRATEGY --seeds SEEDS`.
fn sweep_args<'a>(scenario: &'a str, strategy: &'a str, seeds: &'a str) -> [&'a str; 6] {
    ["sweep", scenario, "--strategy", strategy, "--seeds", seeds]
}

/// The JSON in the file `path`.
fn read_json(path: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Write `text` to `dir/name`; its path.
fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// A scratch directory for one test, made; removed when the test ends
/// (`common::Scratch`).
fn dir(name: &str) -> Scratch {
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Run `racksim ARGS --json` (which must exit with one of `codes`) and
/// write its stdout to `dir/name`.
fn json_to(dir: &Path, name: &str, args: &[&str], codes: &[i32]) -> String {
    let mut all = args.to_vec();
    all.push("--json");
    let (code, out, err) = racksim(&all);
    assert!(
        code.is_some_and(|c| codes.contains(&c)),
        "{all:?}: {code:?}\n{err}"
    );
    write(dir, name, &out)
}

/// The shards 0/n..n-1/n of `args` as JSON files in `dir`, named
/// `{prefix}{i}.json`.
fn shards(dir: &Path, prefix: &str, args: &[&str], n: u64, codes: &[i32]) -> Vec<String> {
    (0..n)
        .map(|i| {
            let shard = format!("{i}/{n}");
            let mut all = args.to_vec();
            all.extend(["--shard", &shard]);
            json_to(dir, &format!("{prefix}{i}.json"), &all, codes)
        })
        .collect()
}

/// `racksim merge FILES [extra]`.
fn merge(files: &[&String], extra: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["merge"];
    all.extend(files.iter().map(|f| f.as_str()));
    all.extend_from_slice(extra);
    racksim(&all)
}

/// Merging `shards` (given in two different orders) prints exactly what
/// the unsharded `args` prints, as text and as JSON, with its exit status.
fn assert_merge_is_the_whole(args: &[&str], shards: &[String]) -> (i32, String) {
    let (whole_code, whole_text, err) = racksim(args);
    let whole_code = whole_code.unwrap_or_else(|| panic!("{args:?} was killed: {err}"));
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let (code, whole_json, err) = racksim(&json_args);
    assert_eq!(code, Some(whole_code), "{err}");

    let forward: Vec<&String> = shards.iter().collect();
    let backward: Vec<&String> = shards.iter().rev().collect();
    let (code, text, err) = merge(&backward, &[]);
    assert_eq!(code, Some(whole_code), "{err}");
    assert_eq!(
        text, whole_text,
        "merged text differs from the unsharded run's"
    );
    assert!(
        err.contains(&format!("merged {} shards", shards.len())),
        "{err}"
    );
    let (code, text_fwd, _) = merge(&forward, &[]);
    assert_eq!(code, Some(whole_code));
    assert_eq!(text_fwd, text, "the order of the files changed the output");

    let (code, json, err) = merge(&forward, &["--json"]);
    assert_eq!(code, Some(whole_code), "{err}");
    // Byte for byte: the merged shard field is (0, 1), the whole range.
    assert_eq!(
        json, whole_json,
        "merged JSON differs from the unsharded run's"
    );
    let (_, json_bwd, _) = merge(&backward, &["--json"]);
    assert_eq!(json_bwd, json);
    (whole_code, text)
}

#[test]
fn merged_sweep_shards_print_what_the_unsharded_sweep_prints() {
    let dir = dir("merge-sweep");
    // Converging runs: percentiles over seeds of different shards.
    let args = sweep_args("madrid-one-switch", "sled-task", "1..8");
    let files = shards(&dir, "madrid", &args, 3, &[0]);
    let (code, text) = assert_merge_is_the_whole(&args, &files);
    assert_eq!(code, 0);
    // The whole range's p99 is no shard's: it cannot come from theirs.
    let (_, json, _) = merge(&files.iter().collect::<Vec<_>>(), &["--json"]);
    let merged: serde_json::Value = serde_json::from_str(&json).unwrap();
    let p99 = &merged["repair_p99_ms"];
    assert!(p99.is_u64(), "{merged}");
    for f in &files {
        let shard: serde_json::Value = read_json(f);
        assert_ne!(&shard["repair_p99_ms"], p99, "{f}");
    }
    assert!(text.contains("runs: 8\n"), "{text}");
    assert!(
        !text.contains("time to converge: p50 -"),
        "no percentiles to compare:\n{text}"
    );

    // Notable seeds in every shard, interleaved in seed order, with their
    // replay commands.
    let args = sweep_args("start-delete-race", "naive", "1..8");
    let files = shards(&dir, "race", &args, 3, &[0]);
    let (code, text) = assert_merge_is_the_whole(&args, &files);
    assert_eq!(code, 0);
    let seeds: Vec<u64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("seed ")?.split(':').next()?.parse().ok())
        .collect();
    assert!(
        seeds.len() >= 3,
        "too few notable seeds to test order:\n{text}"
    );
    assert!(seeds.windows(2).all(|w| w[0] < w[1]), "{seeds:?}");
    assert!(
        text.contains("replay: racksim run start-delete-race --seed"),
        "{text}"
    );
}

/// Shard 1/2 of seeds 6..7 (seed 7) breaks no invariant, so on its own it
/// misses `some_seeds_violate`; seed 6 breaks it, so the merge meets it.
#[test]
fn some_seeds_violate_is_judged_over_the_whole_range() {
    let dir = dir("merge-some-seeds");
    let args = sweep_args("start-delete-race", "naive", "6..7");
    let files = shards(&dir, "race", &args, 2, &[0]);
    let shard1: serde_json::Value = read_json(&files[1]);
    assert_eq!(shard1["some_seeds_violate"]["met"], false, "{shard1}");
    let (code, json, err) = merge(&files.iter().collect::<Vec<_>>(), &["--json"]);
    assert_eq!(code, Some(0), "{err}");
    let merged: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(merged["some_seeds_violate"]["met"], true, "{merged}");
    assert_eq!(merged["some_seeds_violate"]["seeds"], "seeds 6..=7");
    assert_eq!(merged["shard"], serde_json::json!([0, 1]));
    assert_merge_is_the_whole(&args, &files);
}

/// A scenario whose plan races nothing: no seed can break the invariant
/// its `some_seeds_violate` names. Each shard exits 0 (a shard is not
/// judged on it); the merge fails as the whole range does.
#[test]
fn a_merge_fails_where_the_whole_range_misses_some_seeds_violate() {
    let dir = dir("merge-no-race");
    let path = dir.join("no-race.toml");
    std::fs::write(&path, common::NO_RACE).unwrap();
    let path = path.to_str().unwrap();
    let args = sweep_args(path, "naive", "1..3");
    let files = shards(&dir, "no-race", &args, 3, &[0]);
    let (code, text) = assert_merge_is_the_whole(&args, &files);
    assert_eq!(code, 1);
    assert!(
        text.contains(
            "unexpected: no-race / naive: expected some of seeds 1..=3 to violate \
             no-state-after-delete, none did"
        ),
        "{text}"
    );
}

#[test]
fn merged_fuzz_shards_print_what_the_unsharded_fuzz_prints() {
    let dir = dir("merge-fuzz");
    // The legacy strategy fails unlisted on some of these seeds: exit 1.
    let args = ["fuzz", "--seeds", "1..10", "--strategy", "legacy"];
    let files = shards(&dir, "fuzz", &args, 3, &[0, 1]);
    let (code, text) = assert_merge_is_the_whole(&args, &files);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("runs: 10\n"), "{text}");
    assert!(text.contains("[UNLISTED]"), "{text}");
}

/// `racksim merge` refused: exit 2, nothing on stdout, and stderr has
/// every one of `needles`.
fn assert_refused(files: &[&String], needles: &[&str]) {
    for extra in [&[][..], &["--json"][..]] {
        let (code, out, err) = merge(files, extra);
        assert_eq!(code, Some(2), "{files:?}: {out}{err}");
        assert_eq!(out, "", "a refused merge printed on stdout");
        assert!(err.starts_with("error: "), "{err}");
        for needle in needles {
            assert!(err.contains(needle), "{needle:?} not in:\n{err}");
        }
    }
}

#[test]
fn shards_of_different_runs_are_refused_naming_what_differs() {
    let dir = dir("merge-mismatch");
    let sweep = |strategy, seeds| sweep_args("start-delete-race", strategy, seeds);
    let naive = shards(&dir, "naive", &sweep("naive", "1..6"), 2, &[0]);
    let saga = shards(&dir, "saga", &sweep("saga", "1..6"), 2, &[0]);
    let other_range = shards(&dir, "range", &sweep("naive", "1..7"), 2, &[0]);
    let three = shards(&dir, "three", &sweep("naive", "1..6"), 3, &[0]);

    assert_refused(
        &[&naive[0], &saga[1]],
        &[
            "shards of different runs",
            "--strategy: naive in",
            "naive0.json",
            "saga in",
            "saga1.json",
        ],
    );
    assert_refused(
        &[&naive[0], &other_range[1]],
        &["--seeds: 1..6 in", "1..7 in", "range1.json"],
    );
    assert_refused(
        &[&naive[0], &three[1], &three[2]],
        &["N of --shard I/N: 2 in", "3 in", "three1.json, "],
    );

    // Fuzz options too.
    let fuzz = shards(&dir, "fuzz", &["fuzz", "--seeds", "1..4"], 2, &[0, 1]);
    let naive_fuzz = shards(
        &dir,
        "naivefuzz",
        &["fuzz", "--seeds", "1..4", "--start", "naive"],
        2,
        &[0, 1],
    );
    assert_refused(
        &[&fuzz[0], &naive_fuzz[1]],
        &[
            "--start: naive in",
            "naivefuzz1.json",
            "saga in",
            "fuzz0.json",
        ],
    );

    // Sweeps and fuzz runs do not mix.
    assert_refused(
        &[&naive[0], &fuzz[1]],
        &[
            "mix sweeps and fuzz campaigns",
            "naive0.json (shard 0/2 of racksim sweep start-delete-race --strategy naive --seeds 1..6) is a sweep",
            "fuzz1.json (shard 1/2 of racksim fuzz --seeds 1..4",
            "is a fuzz campaign",
        ],
    );
}

#[test]
fn a_missing_or_repeated_shard_is_refused_naming_it() {
    let dir = dir("merge-missing");
    let args = sweep_args("madrid-one-switch", "sled-task", "1..8");
    let files = shards(&dir, "s", &args, 3, &[0]);
    assert_refused(
        &[&files[2], &files[0]],
        &["shard 1/3 is missing (given: 0/3 ", "s0.json; 2/3 "],
    );
    assert_refused(&[&files[1]], &["shards 0/3, 2/3 are missing"]);
    assert_refused(
        &[&files[0], &files[1], &files[1], &files[2]],
        &["shard 1/3 is given 2 times"],
    );
    // A fuzz shard that is cut short (a seed's run removed).
    let fuzz = shards(&dir, "f", &["fuzz", "--seeds", "1..6"], 2, &[0, 1]);
    let mut short: serde_json::Value = read_json(&fuzz[1]);
    short["runs"] = serde_json::json!(2);
    let short_path = write(&dir, "short.json", &short.to_string());
    assert_refused(
        &[&fuzz[0], &short_path],
        &["short.json: shard 1/2 of seeds 1..6 runs 3 seeds, but the file has 2 runs"],
    );
    // So is a sweep shard that lists another shard's seeds.
    let mut other: serde_json::Value = read_json(&files[1]);
    other["per_seed"][0]["seed"] = serde_json::json!(1);
    let other_path = write(&dir, "other.json", &other.to_string());
    assert_refused(
        &[&files[0], &other_path, &files[2]],
        &[
            "other.json: shard 1/3 of seeds 1..8 lists other seeds: seed 1 in its per_seed \
             where seed 2 belongs",
        ],
    );
}

#[test]
fn a_file_that_is_not_a_shards_json_is_refused_saying_why() {
    let dir = dir("merge-bad");
    let args = sweep_args("madrid-one-switch", "sled-task", "1..4");
    let files = shards(&dir, "s", &args, 2, &[0]);
    let write = |name: &str, text: &str| write(&dir, name, text);

    let truncated = write("truncated.json", "{\n  \"campaign\": {\n");
    assert_refused(
        &[&files[0], &truncated],
        &[
            "truncated.json: not JSON: EOF while parsing",
            "at line 3 column 0",
        ],
    );
    let list = write("list.json", "[1, 2]\n");
    assert_refused(&[&list], &["list.json: not the --json output of `racksim sweep` or `racksim fuzz`: it is not a JSON object"]);
    // What an older racksim wrote: no `campaign`.
    let whole: serde_json::Value = read_json(&files[1]);
    let mut old = whole.clone();
    old.as_object_mut().unwrap().remove("campaign");
    let old = write("old.json", &old.to_string());
    assert_refused(&[&files[0], &old], &["old.json", "has no `campaign` field"]);
    let mut kind = whole.clone();
    kind["campaign"]["kind"] = serde_json::json!("matrix");
    let kind = write("kind.json", &kind.to_string());
    assert_refused(
        &[&kind],
        &["kind.json", "\"matrix\", not \"sweep\" or \"fuzz\""],
    );
    // A field of the wrong type: serde's message, with line and column.
    let pretty = serde_json::to_string_pretty(&whole).unwrap();
    let bad = pretty.replacen("\"runs\": 2", "\"runs\": \"two\"", 1);
    assert_ne!(bad, pretty);
    let line = bad.lines().position(|l| l.contains("\"two\"")).unwrap() + 1;
    let bad = write("bad.json", &bad);
    assert_refused(
        &[&files[0], &bad],
        &[
            "bad.json: not the --json of a racksim sweep: invalid type: string \"two\"",
            &format!("at line {line} column"),
        ],
    );
    let missing = dir.join("absent.json").to_str().unwrap().to_string();
    assert_refused(&[&files[0], &missing], &["cannot read", "absent.json"]);
}
