//! The CLI's other commands, end to end: list, sweep (with shards), matrix
//! and bench, through the real binary.

use crate::common;
use common::{racksim, racksim_words, run_madrid};

use std::process::Command;

#[test]
fn list_names_every_scenario_with_a_description() {
    let (code, out, _) = racksim(&["list"]);
    assert_eq!(code, Some(0));
    for name in racksim::catalogue::names() {
        let line = out
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing from:\n{out}"));
        assert!(line.len() > name.len() + 20, "{line}");
    }
}

#[test]
fn list_matrix_and_the_run_header_say_which_era_each_strategy_runs_in() {
    let (code, out, _) = racksim(&["list"]);
    assert_eq!(code, Some(0));
    for (strategy, era) in [
        ("legacy", "legacy"),
        ("sled-task", "proposal"),
        ("scrimlet-local", "target"),
        ("scrimlet-local-with-zone-start", "shipped"),
        ("naive", "current"),
    ] {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(strategy) && l.contains(&format!("  {era}: "))),
            "no era line for {strategy}:\n{out}"
        );
    }
    assert!(
        out.contains(
            "control plane: nexus service-NAT task off, dpd NAT RPW on, nexus V2P task on"
        ),
        "{out}"
    );

    let (code, out, err) = racksim(&["matrix", "--scenario", "stale-entry", "--seeds", "1"]);
    assert_eq!(code, Some(0), "{err}");
    let row = |strategy: &str| {
        out.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(strategy))
            .unwrap_or_else(|| panic!("no {strategy} row:\n{out}"))
            .split_whitespace()
            .nth(2)
            .unwrap()
            .to_string()
    };
    assert_eq!(row("legacy"), "legacy");
    assert_eq!(row("sled-task"), "proposal");
    assert_eq!(row("scrimlet-local"), "target");
    assert_eq!(row("scrimlet-local-with-zone-start"), "shipped");
    assert!(
        out.contains("era target: nexus service-NAT task off, dpd NAT RPW on, nexus V2P task on"),
        "{out}"
    );

    let (_, out, _) = racksim_words("run stale-entry --seed 1 --strategy scrimlet-local");
    let header: Vec<&str> = out.lines().take_while(|l| !l.starts_with("plan")).collect();
    assert!(
        header
            .iter()
            .any(|l| l.starts_with("era: target (the design after #9727")),
        "{header:#?}"
    );
    assert!(
        header.contains(
            &"control plane: nexus service-NAT task off, dpd NAT RPW on, nexus V2P task on, \
              instance watcher on, reincarnation on"
        ),
        "{header:#?}"
    );
}

#[test]
fn shards_of_a_sweep_add_up_to_the_whole() {
    let json = |args: &[&str]| -> serde_json::Value {
        let mut all = vec![
            "sweep",
            "start-delete-race",
            "--strategy",
            "naive",
            "--json",
        ];
        all.extend_from_slice(args);
        let (code, out, err) = racksim(&all);
        assert_eq!(code, Some(0), "{err}");
        serde_json::from_str(&out).unwrap()
    };
    let whole = json(&["--seeds", "1..12"]);
    let a = json(&["--seeds", "1..12", "--shard", "0/2"]);
    let b = json(&["--seeds", "1..12", "--shard", "1/2"]);
    assert_eq!(whole["runs"], 12);
    assert_eq!(
        a["runs"].as_u64().unwrap() + b["runs"].as_u64().unwrap(),
        12
    );
    let violated =
        |v: &serde_json::Value| v["violated"]["no-state-after-delete"].as_u64().unwrap_or(0);
    assert_eq!(violated(&a) + violated(&b), violated(&whole));
    // Every notable seed comes with the command that replays it.
    for n in whole["notable"].as_array().unwrap() {
        let seed = n[0].as_u64().unwrap();
        assert_eq!(
            n[2].as_str().unwrap(),
            format!("racksim run start-delete-race --seed {seed} --strategy naive")
        );
    }
}

#[test]
fn matrix_json_has_a_cell_per_strategy_and_exit_0_when_all_hold() {
    let (code, out, err) = racksim_words("matrix --scenario stale-entry --seeds 2 --json");
    assert_eq!(code, Some(0), "{err}");
    let cells: serde_json::Value = serde_json::from_str(&out).unwrap();
    let cells = cells.as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for c in cells {
        assert_eq!(c["runs"], 2);
        assert_eq!(c["as_expected"], 2, "{c}");
    }
    let legacy = cells.iter().find(|c| c["strategy"] == "legacy").unwrap();
    assert_eq!(legacy["failed"], 2, "legacy must fail stale-entry");
}

#[test]
fn bench_json_has_every_requested_workload_with_sane_figures() {
    // Cheap workloads only; timings are printed, never asserted.
    let (code, out, err) = racksim_words(
        "bench --quick --json --reps 1 --only madrid-sled-task --only race-naive \
         --only race-saga --only rack-8",
    );
    assert_eq!(code, Some(0), "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["reps"], 1);
    assert_eq!(report["quick"], true);
    let machine = &report["machine"];
    assert!(machine["cores"].as_u64().unwrap() >= 1, "{machine}");
    assert!(["debug", "release"].contains(&machine["profile"].as_str().unwrap()));
    assert_eq!(machine["racksim_version"], env!("CARGO_PKG_VERSION"));
    let workloads = report["workloads"].as_array().unwrap();
    let names: Vec<&str> = workloads
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["madrid-sled-task", "race-naive", "race-saga", "rack-8"]
    );
    for w in workloads {
        // madrid: 3 sleds, 2 switch zones, upstream NTP; rack-8: 8 + 2 + 1.
        let hosts = if w["name"] == "rack-8" { 11 } else { 6 };
        assert_eq!(w["hosts"], hosts, "{w}");
        assert_eq!(w["runs"], 1, "{w}");
        assert!(w["sim_secs"].as_f64().unwrap() > 0.0, "{w}");
        assert!(w["events"].as_u64().unwrap() > 0, "{w}");
        for figure in ["wall_secs", "sim_per_wall"] {
            let s = &w[figure];
            let (min, median, max) = (
                s["min"].as_f64().unwrap(),
                s["median"].as_f64().unwrap(),
                s["max"].as_f64().unwrap(),
            );
            assert!(min > 0.0 && min <= median && median <= max, "{figure}: {w}");
        }
        assert_eq!(w["samples"].as_array().unwrap().len(), 1, "{w}");
        if cfg!(target_os = "linux") {
            assert!(w["peak_rss_mib"]["max"].as_f64().unwrap() > 0.0, "{w}");
        }
        assert!(w["seeds_per_minute"].is_null(), "{w}");
        // The default engine, as listed, and nothing to compare.
        assert_eq!(w["engine"], "event-driven", "{w}");
        assert_eq!(w["form"], "as listed", "{w}");
        assert_eq!(w["samples"][0]["engine"], "event-driven", "{w}");
    }
    assert_eq!(report["engines"], "event-driven");
    assert!(report["comparisons"].as_array().unwrap().is_empty());
    assert!(report["skipped"].as_array().unwrap().is_empty());
    // Every N-sled rack simulates the same fixed time.
    let rack = workloads.iter().find(|w| w["name"] == "rack-8").unwrap();
    assert_eq!(rack["sim_secs"], 1800.0);
    assert_eq!(rack["outcome"], "converged, held to the end");
}

#[test]
fn bench_on_both_engines_runs_the_same_form_to_the_same_verdict() {
    // rack-8 on the tick engine runs a reduced form (with --quick one
    // simulated minute, a few seconds of wall time); timings are printed,
    // never asserted.
    let (code, out, err) = racksim(&[
        "bench", "--engine", "both", "--quick", "--only", "rack-8", "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["engines"], "both");
    assert_eq!(report["tick_secs"], 0.001);
    let measured: Vec<(&str, &str)> = report["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            assert_eq!(w["name"], "rack-8", "{w}");
            for s in w["samples"].as_array().unwrap() {
                assert_eq!(s["engine"], w["engine"], "{w}");
            }
            (w["engine"].as_str().unwrap(), w["form"].as_str().unwrap())
        })
        .collect();
    let reduced = "1m simulated (listed: 30m)";
    assert_eq!(
        measured,
        [
            ("event-driven", "as listed"),
            ("event-driven", reduced),
            ("tick", reduced)
        ]
    );
    // The reduced form simulates one minute on both engines; the tick
    // engine's driver steps are its ticks.
    let workloads = report["workloads"].as_array().unwrap();
    for w in &workloads[1..] {
        assert_eq!(w["sim_secs"], 60.0, "{w}");
        assert_eq!(w["outcome"], "converged, held to the end", "{w}");
    }
    assert_eq!(workloads[2]["events"], 60_000);
    let comparisons = report["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 1, "{comparisons:?}");
    let c = &comparisons[0];
    assert_eq!(c["workload"], "rack-8");
    assert_eq!(c["form"], reduced);
    assert_eq!(c["event_driven_outcome"], c["tick_outcome"]);
    assert_eq!(c["verdict_matched"], true);
    assert!(c["ratio"].as_f64().unwrap() > 0.0, "{c}");

    // A workload too long for the tick engine is skipped, with its reason.
    let (code, out, err) = racksim_words("bench --engine tick --only rack-32-8h --json");
    assert_eq!(code, Some(0), "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        report["workloads"].as_array().unwrap().is_empty(),
        "{report}"
    );
    let skipped = report["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{report}");
    assert_eq!(skipped[0]["workload"], "rack-32-8h");
    assert_eq!(skipped[0]["engine"], "tick");
    assert!(skipped[0]["reason"].as_str().unwrap().contains("rack-32"));
}

/// The fuzz workloads run `racksim fuzz`'s campaign of what ships: with
/// `--quick`, 30 madrid seeds, each judged (what ships passes them all,
/// `scenarios/known-defects.toml` lists no madrid defect), with seeds per
/// minute; the tick engine skips them and says why.
#[test]
fn bench_fuzz_workload_runs_a_campaign() {
    let (code, out, err) =
        racksim_words("bench --quick --json --reps 1 --engine both --only fuzz-madrid");
    assert_eq!(code, Some(0), "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let w = &report["workloads"][0];
    assert_eq!(w["name"], "fuzz-madrid", "{w}");
    assert_eq!(w["runs"], 30, "{w}");
    assert_eq!(w["hosts"], 6, "{w}");
    assert_eq!(w["outcome"], "30/30 passed", "{w}");
    assert!(w["events"].as_u64().unwrap() > 30, "{w}");
    assert!(
        w["seeds_per_minute"]["median"].as_f64().unwrap() > 0.0,
        "{w}"
    );
    assert_eq!(report["workloads"].as_array().unwrap().len(), 1);
    let skipped = &report["skipped"][0];
    assert_eq!(skipped["workload"], "fuzz-madrid", "{report}");
    assert!(skipped["reason"]
        .as_str()
        .unwrap()
        .contains("fuzz campaign"));
}

#[test]
fn bench_rejects_an_unknown_workload() {
    let (code, _, err) = racksim(&["bench", "--only", "nope"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no benchmark workload \"nope\""), "{err}");
    assert!(err.contains("madrid-sweep"), "{err}");
}

/// `run --trace-json` writes one record per trace line, in order, with the
/// same time, host and text as stdout, a kind, and structured fields for
/// the events a picture is drawn from (NAT changes, zone starts).
#[test]
fn trace_json_has_a_record_per_trace_line() {
    let path = std::env::temp_dir().join(format!("racksim-trace-{}.jsonl", std::process::id()));
    let path_str = path.to_str().unwrap();
    let (code, out, _) = run_madrid("7", "sled-task", &["--trace-json", path_str]);
    assert_eq!(code, Some(0));
    let text = std::fs::read_to_string(&path).expect("the file was written");
    std::fs::remove_file(&path).ok();
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let lines: Vec<&str> = out
        .lines()
        .skip_while(|l| *l != "trace:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(records.len(), lines.len());
    for (r, line) in records.iter().zip(&lines) {
        assert!(line.ends_with(r["text"].as_str().unwrap()), "{line} / {r}");
        assert!(line.contains(r["host"].as_str().unwrap()), "{line} / {r}");
        assert_eq!(r["strategy"], "sled-task");
        assert!(r["kind"].is_string() && r["at_us"].is_u64(), "{r}");
    }
    let nat: Vec<_> = records.iter().filter(|r| r["kind"] == "nat").collect();
    assert!(!nat.is_empty());
    for r in nat {
        for key in [
            "switch",
            "op",
            "external_ip",
            "first_port",
            "last_port",
            "target",
        ] {
            assert!(r["fields"][key].is_string(), "{key} missing in {r}");
        }
    }
    assert!(records
        .iter()
        .any(|r| r["kind"] == "zone" && r["fields"]["took_us"].is_string()));
    // The reconciler's own `tracing` events, with their structured fields.
    let activations: Vec<_> = records
        .iter()
        .filter(|r| r["kind"] == "reconciler" && r["fields"]["task"] == "sled-task")
        .collect();
    assert!(!activations.is_empty());
    for r in &activations {
        assert!(r["fields"]["activation"].is_string(), "{r}");
        assert!(r["fields"]["reason"].is_string(), "{r}");
    }
    // A path that cannot be written is bad input: exit 2, nothing run.
    let (code, out, err) =
        racksim_words("run madrid-one-switch --seed 7 --trace-json /nonexistent-dir/x.jsonl");
    assert_eq!(code, Some(2));
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("--trace-json"), "{err}");
}

/// `RUST_LOG` turns on a stderr log for debugging; stdout (the trace) is
/// the same bytes with or without it.
#[test]
fn rust_log_never_changes_stdout() {
    let run = |rust_log: Option<&str>| {
        let out = madrid_seed_3("scrimlet-local", rust_log);
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (quiet, _) = run(None);
    let (logged, stderr) = run(Some("racksim_reconciler=debug,turmoil=trace"));
    assert_eq!(quiet, logged);
    assert!(stderr.contains("NAT plan computed"), "{stderr}");
    // Every log line is stamped with the run's simulated time, as trace
    // lines are, the network's (delivered between host turns) included,
    // and the stamps never go back.
    let mut last = String::new();
    let mut network_after_boot = false;
    for line in stderr.lines() {
        let Some((stamp, rest)) = line.split_once(' ') else {
            continue;
        };
        if !["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]
            .iter()
            .any(|l| rest.trim_start().starts_with(l))
        {
            continue;
        }
        let shape = stamp.len() == 15
            && stamp.chars().enumerate().all(|(i, c)| {
                if [2, 5].contains(&i) {
                    c == ':'
                } else if i == 8 {
                    c == '.'
                } else {
                    c.is_ascii_digit()
                }
            });
        assert!(shape, "not stamped with simulated time: {line}");
        assert!(stamp >= last.as_str(), "{stamp} after {last}: {line}");
        network_after_boot |= rest.contains("Delivered") && stamp > "00:00:01.000000";
        last = stamp.to_string();
    }
    assert!(
        network_after_boot,
        "no delivery stamped after the first second"
    );
}

/// `RUST_LOG` is read as `target=level` directives: one that cannot be
/// read is refused with exit status 2, naming it, before any run (nothing
/// on stdout); one with no directive (empty, commas) is as good as unset.
#[test]
fn a_bad_rust_log_is_refused_before_any_run() {
    let run = |rust_log: Option<&str>| madrid_seed_3("legacy", rust_log);
    let bad = run(Some("racksim_reconciler=debug,turmoil=loud"));
    let err = String::from_utf8(bad.stderr).unwrap();
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(bad.stdout.is_empty());
    assert!(
        err.contains("RUST_LOG") && err.contains("`turmoil=loud`"),
        "{err}"
    );
    // Empty: the output of none at all, and no log line on stderr (whose
    // one line, the run's summary, differs only in its wall time).
    let unset = run(None);
    let lines = |out: &[u8]| String::from_utf8_lossy(out).lines().count();
    for nothing in ["", " , ,"] {
        let empty = run(Some(nothing));
        assert_eq!(empty.status.code(), unset.status.code(), "{nothing:?}");
        assert_eq!(empty.stdout, unset.stdout, "{nothing:?}");
        assert_eq!(
            lines(&empty.stderr),
            lines(&unset.stderr),
            "{nothing:?}: {}",
            String::from_utf8_lossy(&empty.stderr)
        );
    }
}

/// `racksim run madrid-one-switch --seed 3 --strategy STRATEGY`, with
/// `RUST_LOG` set to `rust_log` (or removed).
fn madrid_seed_3(strategy: &str, rust_log: Option<&str>) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_racksim"));
    cmd.args([
        "run",
        "madrid-one-switch",
        "--seed",
        "3",
        "--strategy",
        strategy,
    ]);
    match rust_log {
        Some(v) => cmd.env("RUST_LOG", v),
        None => cmd.env_remove("RUST_LOG"),
    };
    cmd.output().expect("racksim runs")
}

#[test]
fn a_sweep_where_no_seed_breaks_the_race_invariant_is_not_as_expected() {
    let dir = common::scratch("no-race");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("no-race.toml");
    std::fs::write(&path, common::NO_RACE).unwrap();
    let path = path.to_str().unwrap();

    let (code, out, err) = racksim(&["sweep", path, "--strategy", "naive", "--seeds", "1..2"]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("expectation held: 2 of 2"), "{out}");
    assert!(
        out.contains(
            "unexpected: no-race / naive: expected some of seeds 1..=2 to violate \
             no-state-after-delete, none did"
        ),
        "{out}"
    );

    // The same sweep's JSON, with `extra` options; its exit status must be
    // `code`, and the seeds it ran saw no violation.
    let json = |extra: &[&str], code| {
        let mut args = vec!["sweep", path, "--strategy", "naive", "--seeds", "1..2"];
        args.extend(extra);
        args.push("--json");
        let (got, out, err) = racksim(&args);
        assert_eq!(got, Some(code), "{args:?}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["some_seeds_violate"]["met"], false, "{out}");
        v
    };
    let v = json(&[], 1);
    assert_eq!(v["some_seeds_violate"]["violate"][0]["violating"], 0, "{v}");

    // One shard is not judged on it: it says what it saw, for the merge.
    let v = json(&["--shard", "0/2"], 0);
    assert_eq!(
        v["some_seeds_violate"]["seeds"], "seeds 1..=2 of shard 0/2",
        "{v}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_matrix_judges_some_seeds_violate_per_cell() {
    let (code, out, err) = racksim_words("matrix --scenario start-delete-race --seeds 2 --json");
    assert_eq!(code, Some(0), "{out}{err}");
    let cells: serde_json::Value = serde_json::from_str(&out).unwrap();
    let cell = |strategy: &str| {
        cells
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["strategy"] == strategy)
            .unwrap_or_else(|| panic!("a {strategy} cell"))
    };
    let naive = cell("naive");
    assert_eq!(naive["met"], true, "{naive}");
    assert_eq!(
        naive["some_seeds_violate"]["violate"][0]["invariant"], "no-state-after-delete",
        "{naive}"
    );
    assert_eq!(
        naive["some_seeds_violate"]["seeds"], "seeds 1..=2",
        "{naive}"
    );
    let saga = cell("saga");
    assert!(saga["some_seeds_violate"].is_null(), "{saga}");
}

#[test]
fn serve_refuses_bad_arguments_before_starting_anything() {
    for (args, says) in [
        (
            &["serve", "--start", "nope"][..],
            "unknown start implementation",
        ),
        (
            &["serve", "--strategy", "legacy", "--bind", "127.0.0.1:nope"][..],
            "--bind",
        ),
        (&["serve", "--strategy", "fast"][..], "unknown strategy"),
        (
            &["serve", "--reconcilers", "ours"][..],
            "--reconcilers: unknown reconcilers \"ours\"",
        ),
        (&["serve", "no-such-scenario"][..], "no-such-scenario"),
    ] {
        let (code, out, err) = racksim(args);
        assert_eq!(code, Some(2), "{args:?}: {out}{err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!out.contains("control API"), "{args:?} started: {out}");
    }
}

#[test]
fn a_seed_range_no_machine_runs_is_refused_before_it_allocates() {
    for cmd in [
        &["fuzz", "--seeds", "1..10000000000"][..],
        &[
            "sweep",
            "start-delete-race",
            "--strategy",
            "naive",
            "--seeds",
            "0..18446744073709551615",
        ][..],
    ] {
        let (code, _, err) = racksim(cmd);
        assert_eq!(code, Some(2), "{cmd:?}: {err}");
        assert!(err.contains("at most 10000000"), "{cmd:?}: {err}");
    }
}

/// A broken fake is a testbed error, with its own exit status, even where
/// the scenario expects the strategy to fail: on madrid, `legacy` "fails as
/// expected" (exit 0 with --expect) — unless the testbed itself failed.
#[test]
fn a_testbed_error_has_its_own_exit_status_that_no_expectation_accepts() {
    let run = |extra: &[&str]| {
        let args: Vec<&str> = ["--expect"].iter().chain(extra).copied().collect();
        run_madrid("7", "legacy", &args)
    };
    let (code, out, _) = run(&[]);
    assert_eq!(
        code,
        Some(0),
        "legacy is expected to fail on madrid:\n{out}"
    );

    for sabotage in ["stop:switch0:12224@2m", "panic:switch1:12224@90s"] {
        let (code, out, _) = run(&["--sabotage", sabotage]);
        assert_eq!(code, Some(3), "{sabotage}:\n{out}");
        assert!(out.contains("TESTBED ERROR at "), "{out}");
        assert!(
            out.contains("expectation for legacy: DOES NOT HOLD (the testbed failed on switch"),
            "{out}"
        );
    }
    let (code, _, err) = run(&["--sabotage", "stop:switch0@2m"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("expected KIND:HOST:PORT@TIME"), "{err}");
    // A sabotage of a server that does not exist breaks nothing: refused.
    let (code, _, err) = run(&["--sabotage", "stop:sled99:12224@2m"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--sabotage: nothing broke: no server on sled99:12224"),
        "{err}"
    );
}

/// A printed replay line is one the user can paste: it starts racksim as
/// they started it (`racksim::invocation`). Started by a path, the line
/// names that path, and pasted into a shell in the same directory it
/// prints the same run again, byte for byte. Started by `cargo run` (as
/// the README's first command does), the line is the cargo command.
#[test]
fn a_replay_line_pastes_into_the_shell_it_was_printed_in() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let bin = env!("CARGO_BIN_EXE_racksim");
    let args = [
        "run",
        "madrid-one-switch",
        "--seed",
        "7",
        "--strategy",
        "legacy",
    ];
    let replay_of = |out: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix("replay: "))
            .unwrap_or_else(|| panic!("no replay line in:\n{out}"))
            .to_string()
    };

    // By its path, outside cargo: the path as typed.
    let first = Command::new(bin)
        .args(args)
        .env_remove("CARGO")
        .current_dir(dir)
        .output()
        .unwrap();
    assert_eq!(first.status.code(), Some(1));
    let first_out = String::from_utf8(first.stdout).unwrap();
    let line = replay_of(&first_out);
    assert_eq!(
        line,
        format!("{bin} run madrid-one-switch --seed 7 --strategy legacy")
    );
    let pasted = Command::new("sh")
        .arg("-c")
        .arg(&line)
        .env_remove("CARGO")
        .current_dir(dir)
        .output()
        .unwrap();
    assert_eq!(pasted.status.code(), Some(1));
    assert_eq!(String::from_utf8(pasted.stdout).unwrap(), first_out);

    // Under `cargo run`: cargo gives the program CARGO and the package's
    // name, and argv[0] is the binary's path in the target directory.
    use std::os::unix::process::CommandExt;
    let out = Command::new(bin)
        .arg0("target/debug/racksim")
        .args(args)
        .env("CARGO", "cargo")
        .env("CARGO_PKG_NAME", "racksim")
        .current_dir(dir)
        .output()
        .unwrap();
    assert_eq!(
        replay_of(&String::from_utf8(out.stdout).unwrap()),
        "cargo run -p racksim -- run madrid-one-switch --seed 7 --strategy legacy"
    );
}
