//! The fuzzer gates CI: a bounded fuzz of the production configuration
//! (`scrimlet-local` service NAT, `saga` starts) on every rack preset fails
//! on any failing seed that `scenarios/known-defects.toml` does not list —
//! and on any listed defect whose regression no longer reproduces it.

use std::path::Path;

use racksim::{
    file::Variant,
    fuzz::{
        self,
        known::{self, KnownDefects},
        Options, SeedResult,
    },
    runner, shrink,
};
use racksim_reconciler::instances::StartImpl;
use racksim_sim::{rack::RackSpec, Strategy};

/// Seeds `1..=N` per rack preset. Chosen so the whole test binary takes
/// well under a minute on 2 cores in the suite's build (the racks run as
/// parallel tests; a `full`-rack seed, 32 sleds, costs about eight
/// `madrid` seeds). About one seed in nine fails today, every one listed.
fn gate_seeds(rack: &str) -> Option<u64> {
    match rack {
        "madrid" => Some(200),
        "standard" => Some(150),
        "full" => Some(50),
        _ => None,
    }
}

fn committed() -> KnownDefects {
    known::load(Path::new(known::KNOWN_DEFECTS)).unwrap_or_else(|e| panic!("{e}"))
}

fn production(rack: &str) -> Options {
    Options::new(rack, Strategy::ScrimletLocal, StartImpl::Saga).unwrap()
}

/// The report of every failing seed of `results` that `known` does not
/// list (testbed errors included: never listed), with its replay command.
fn unlisted(opts: &Options, known: &KnownDefects, results: &[SeedResult]) -> Vec<String> {
    let first = results.first().map_or(0, |r| r.seed);
    let last = results.last().map_or(0, |r| r.seed);
    let summary = fuzz::summarise(opts, (first, last), (0, 1), None, known, results);
    assert_eq!(
        summary.failed,
        summary.listed + summary.unlisted + summary.testbed_errors
    );
    summary
        .failures
        .iter()
        .filter(|f| f.status != "listed")
        .map(|f| {
            let mut line = format!("seed {}: [{}] {}", f.seed, f.label(), f.failure);
            for u in &f.unexplained {
                line += &format!("\n    unexplained: {u}");
            }
            line + &format!("\n    replay: {}", f.replay)
        })
        .collect()
}

fn gate(rack: &str) {
    let n = gate_seeds(rack).expect("a gated rack");
    let opts = production(rack);
    let seeds: Vec<u64> = (1..=n).collect();
    let results = fuzz::fuzz(&opts, &seeds, None, 1, &|_| {});
    assert_eq!(results.len(), seeds.len());
    let bad = unlisted(&opts, &committed(), &results);
    assert!(
        bad.is_empty(),
        "{} of {n} fuzz seeds ({}) failed in a way scenarios/known-defects.toml does not list:\n{}\n\
         Fix the code under test; or, for a defect that is recorded and not fixed, shrink it \
         to a regression file and add a [[defect]] entry (README, \"Known defects\").",
        bad.len(),
        opts.flags(),
        bad.join("\n")
    );
}

#[test]
fn gate_madrid() {
    gate("madrid");
}

#[test]
fn gate_standard() {
    gate("standard");
}

#[test]
fn gate_full() {
    gate("full");
}

/// A rack preset added to the simulator is gated too (it needs a seed
/// count above and a test).
#[test]
fn every_rack_preset_is_gated() {
    for rack in RackSpec::NAMES {
        assert!(gate_seeds(rack).is_some(), "rack {rack} is not gated");
    }
}

/// A known defect's regression file, run at its replay seed: the options
/// it stands for and its result.
fn regression_run(d: &known::Defect) -> (Options, SeedResult) {
    let r = shrink::regression(d.regression.clone()).unwrap_or_else(|e| panic!("{e}"));
    let Variant::Start(start) = r.variant else {
        panic!(
            "{}: a known defect's regression is an instances scenario",
            r.path.display()
        );
    };
    let opts = Options::new(&r.scenario.rack_name, r.scenario.service_nat, start).unwrap();
    let judged = runner::run(&r.scenario, r.variant, r.seed).expect("its expectation");
    let exp = &r.scenario.expectations[&r.variant];
    (opts, fuzz::result_of(r.seed, exp, &judged.outcome))
}

/// Every entry's regression still fails, and with the entry's signature:
/// an entry cannot outlive its defect, nor describe a failure its
/// regression does not show.
#[test]
fn every_known_defect_still_reproduces() {
    let known = committed();
    for d in &known.defects {
        let (_, result) = regression_run(d);
        assert!(
            d.matches(&result),
            "known defect {}: its regression {} no longer fails with the entry's signature \
             (it {}; gaps {:?}). Fixed? Flip the regression's expectation to `converges` and \
             delete the entry.",
            d.id,
            d.regression.display(),
            result
                .failure
                .as_ref()
                .map_or("converged".to_string(), |f| f.to_string()),
            result.gaps
        );
    }
}

/// The gate can fail: without its entry, each known defect's failure is
/// reported unlisted, with its replay command; with it, it is listed.
#[test]
fn a_failure_no_entry_explains_is_unlisted() {
    let known = committed();
    for d in &known.defects {
        let (opts, result) = regression_run(d);
        assert_eq!(
            unlisted(&opts, &known, std::slice::from_ref(&result)),
            Vec::<String>::new(),
            "{}",
            d.id
        );
        let without = KnownDefects {
            origin: "without-one.toml".into(),
            defects: known
                .defects
                .iter()
                .filter(|x| x.id != d.id)
                .cloned()
                .collect(),
        };
        let bad = unlisted(&opts, &without, std::slice::from_ref(&result));
        assert_eq!(bad.len(), 1, "{}: {bad:?}", d.id);
        assert!(bad[0].contains("[UNLISTED]"), "{}", bad[0]);
        assert!(
            bad[0].contains(&format!(
                "replay: racksim fuzz --seeds {0}..{0} {1} --known-defects without-one.toml",
                result.seed,
                opts.flags()
            )),
            "{}",
            bad[0]
        );
    }
}

mod common;

/// `racksim fuzz` reads the committed file by default: listed failures
/// leave the exit status 0; with `--known-defects none` they are unlisted
/// and it exits 1; a bad file is bad input (2), located.
#[test]
fn the_cli_reports_listed_and_unlisted_apart() {
    let args = [
        "fuzz",
        "--seeds",
        "1..30",
        "--rack",
        "madrid",
        "--strategy",
        "scrimlet-local",
        "--start",
        "saga",
    ];
    let json = |extra: &[&str]| {
        let all: Vec<&str> = args.iter().chain(extra).copied().collect();
        let (code, out, err) = common::racksim(&all);
        (
            code,
            serde_json::from_str::<serde_json::Value>(&out)
                .unwrap_or_else(|e| panic!("{e}: {out}{err}")),
        )
    };
    let (code, listed) = json(&["--json"]);
    let failed = listed["failed"].as_u64().unwrap();
    assert!(
        failed > 0,
        "seeds 1..30 no longer fail: pick a range that does"
    );
    assert_eq!(code, Some(0), "{listed}");
    assert_eq!(listed["known_defects"], "scenarios/known-defects.toml");
    assert_eq!(
        (listed["listed"].as_u64(), listed["unlisted"].as_u64()),
        (Some(failed), Some(0))
    );
    let per_defect: u64 = listed["by_defect"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert!(per_defect >= failed, "{listed}");
    for f in listed["failures"].as_array().unwrap() {
        assert_eq!(f["status"], "listed", "{f}");
        assert!(!f["defects"].as_array().unwrap().is_empty(), "{f}");
    }

    let (code, none) = json(&["--json", "--known-defects", "none"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        (none["listed"].as_u64(), none["unlisted"].as_u64()),
        (Some(0), Some(failed))
    );
    let all: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--known-defects", "none"])
        .collect();
    let (_, text, _) = common::racksim(&all);
    assert!(text.contains("known defects: none"), "{text}");
    assert_eq!(
        text.matches("] not converged").count() as u64,
        failed,
        "{text}"
    );
    assert_eq!(
        text.matches(": [UNLISTED] ").count() as u64,
        failed,
        "{text}"
    );
    assert!(
        text.contains("--known-defects none"),
        "replay commands carry the flag: {text}"
    );

    let dir = common::scratch("known-defects");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[[defect]]\nid = \"x\"\nfailure = \"testbed-error\"\nregression = \"r.toml\"\nwhy = \"w\"\n",
    )
    .unwrap();
    let bad = bad.display().to_string();
    let all: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--known-defects", &bad])
        .collect();
    let (code, out, err) = common::racksim(&all);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(
        err.contains(&format!(
            "{bad}:3:11: unknown failure kind \"testbed-error\""
        )),
        "{err}"
    );
    assert!(out.is_empty(), "nothing runs: {out}");
    let _ = std::fs::remove_dir_all(&dir);
}
