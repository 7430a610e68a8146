use std::path::Path;

use super::*;

const VMM_REGRESSION: &str = "regressions/running-instance-left-without-vmm-by-power-cycle.toml";

fn base() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios"))
}

fn parse_ok(text: &str) -> KnownDefects {
    parse("test.toml", text, base()).unwrap_or_else(|e| panic!("{e}"))
}

fn parse_err(text: &str) -> String {
    match parse("test.toml", text, base()) {
        Ok(k) => panic!("accepted: {k:?}"),
        Err(e) => e.to_string(),
    }
}

fn vmm_entry(extra: &str) -> String {
    format!(
        "[[defect]]\nid = \"instance-without-vmm\"\nfailure = \"not-converged\"\n\
         gaps = [\"instance * is running on *, which has no VMM for it\"]\n\
         regression = \"{VMM_REGRESSION}\"\nwhy = \"no instance watcher\"\n{extra}"
    )
}

fn opts(start: StartImpl) -> Options {
    Options::new("madrid", ServiceNat::SCRIMLET_LOCAL, start).unwrap()
}

fn not_converged(gaps: &[&str]) -> SeedResult {
    SeedResult {
        seed: 7,
        failure: Some(Failure::NotConverged(gaps[0].to_string())),
        gaps: gaps.iter().map(|g| g.to_string()).collect(),
        ..SeedResult::default()
    }
}

const VMM_GAP: &str = "instance web1 is running on sled2, which has no VMM for it";
const STUCK_GAP: &str = "instance web2 is stuck in state starting";

fn pat(text: &str) -> Pattern {
    Pattern::new(text).unwrap()
}

#[test]
fn patterns_match_the_whole_text() {
    let p = pat("instance * is running on *, which has no VMM for it");
    assert!(p.matches(VMM_GAP));
    assert!(!p.matches(&format!("{VMM_GAP}!")));
    assert!(!p.matches(&format!("x{VMM_GAP}")));
    assert!(!p.matches("instance web1 is stuck in state starting"));
    let exact = pat("abc");
    assert!(exact.matches("abc") && !exact.matches("abcd") && !exact.matches("ab"));
    assert!(!pat("a*bc*cd").matches("abcd"));
    assert!(pat("a*bc*cd").matches("abccd"));
    assert!(pat("*tail").matches("tail") && !pat("*tail").matches("tai"));
}

#[test]
fn captures_bind_words() {
    let p = pat("instance {instance} is running on {sled}, which has no VMM for it");
    assert_eq!(
        p.bind(VMM_GAP, &Vec::new()),
        Some(vec![
            ("instance".to_string(), "web1".to_string()),
            ("sled".to_string(), "sled2".to_string())
        ])
    );
    // A word has no spaces; a bound name must match the same word.
    assert!(!pat("instance {i} is here").matches("instance web 1 is here"));
    let nat = pat("switch* lacks the NAT entry of instance {instance}: * -> {sled}");
    let bound = vec![
        ("instance".to_string(), "web1".to_string()),
        ("sled".to_string(), "sled2".to_string()),
    ];
    assert!(nat
        .bind(
            "switch0 lacks the NAT entry of instance web1: 203.0.113.11/0-65535 -> sled2",
            &bound
        )
        .is_some());
    assert!(nat
        .bind(
            "switch0 lacks the NAT entry of instance web2: 203.0.113.12/0-65535 -> sled2",
            &bound
        )
        .is_none());
    for bad in [
        "a {} b",
        "a {Name} b",
        "a {x b",
        "a } b",
        "a *{x} b",
        "a {x}{y} b",
    ] {
        assert!(Pattern::new(bad).is_err(), "{bad}");
    }
}

/// The committed file parses, and its regressions exist (`load` checks).
/// (It may be empty: today no fuzz seed of the gated configuration fails.)
#[test]
fn the_committed_file_is_valid() {
    let k = load(Path::new(KNOWN_DEFECTS)).unwrap_or_else(|e| panic!("{e}"));
    for d in &k.defects {
        assert!(d.regression.is_file(), "{}", d.regression.display());
        assert!(!d.why.is_empty());
    }
    assert_eq!(k.name(), "scenarios/known-defects.toml");
}

#[test]
fn bad_files_get_located_errors() {
    for (text, want, hint) in [
        (vmm_entry("severity = \"high\"\n"), "test.toml:7:1: unknown field `severity`", "a [[defect]] has the fields"),
        ("[[defects]]\nid = \"x\"\n".to_string(), "test.toml:1:", "a [[defect]] has the fields"),
        (vmm_entry("").replace("why = \"no instance watcher\"\n", ""), "missing field `why`", "needs id, failure, regression and why"),
        (vmm_entry("").replace("\"not-converged\"", "\"testbed-error\""), "test.toml:3:11: unknown failure kind \"testbed-error\"", "a testbed error is never a known defect"),
        (vmm_entry("").replace(VMM_REGRESSION, "regressions/nope.toml"), "test.toml:5:14: regression \"regressions/nope.toml\" is not a usable regression file", "relative to this file's directory"),
        (vmm_entry("").replace("instance * is running on *, which has no VMM for it", "*"), "test.toml:4:9: pattern \"*\" is too general", "at least 8 characters"),
        (vmm_entry("").replace("\"instance-without-vmm\"", "\"Instance Without VMM\""), "test.toml:2:6: defect id \"Instance Without VMM\" is not kebab-case", "lowercase"),
        (format!("{}{}", vmm_entry(""), vmm_entry("")), "test.toml:8:6: defect id \"instance-without-vmm\" is listed twice", ""),
        (vmm_entry("invariant = \"one-vmm\"\n"), "test.toml:7:13: `invariant` does not apply to failure = \"not-converged\"", "`gaps`, `follow_on_gaps` and `rack_follow_on_gaps` go with"),
        (vmm_entry("").replace("gaps = [\"instance * is running on *, which has no VMM for it\"]\n", ""), "failure = \"not-converged\" needs `gaps`", "the gaps the verdict lists"),
        (vmm_entry("racks = [\"madrid\", \"huge\"]\n"), "test.toml:7:20: unknown rack \"huge\"", "madrid, standard, full"),
        (vmm_entry("strategies = [\"fast\"]\n"), "test.toml:7:15: unknown strategy \"fast\"", ""),
        (vmm_entry("starts = [\"fast\"]\n"), "test.toml:7:11: unknown start implementation \"fast\"", "expected inline, naive or saga"),
        (
            format!("[[defect]]\nid = \"x\"\nfailure = \"invariant\"\ninvariant = \"one-vm\"\nregression = \"{VMM_REGRESSION}\"\nwhy = \"w\"\n"),
            "test.toml:4:13: unknown invariant \"one-vm\"",
            "no-state-after-delete, one-vmm, nat-follows-vmm",
        ),
        (vmm_entry("").replace("why = \"no instance watcher\"", "why = \"  \""), "test.toml:6:7: `why` is empty", "upstream mechanism"),
        (vmm_entry("follow_on_gaps = [\"switch* lacks the NAT entry of *\"]\n"), "test.toml:7:19: follow-on gap \"switch* lacks the NAT entry of *\" is not tied to the primary gap", "{names} that every pattern of `gaps` captures"),
        (
            vmm_entry("follow_on_gaps = [\"switch* lacks the NAT entry of {instance}\"]\n").replace("instance * is", "instance {other} is"),
            "test.toml:7:19: follow-on gap",
            "{names}",
        ),
        (vmm_entry("").replace("instance * is running", "instance {Web} is running"), "test.toml:4:9: pattern \"instance {Web} is running on *, which has no VMM for it\": `{Web` is not a capture", ""),

    ] {
        let e = parse_err(&text);
        assert!(e.contains(want), "want {want:?} in:\n{e}\n--- for:\n{text}");
        assert!(e.contains(hint), "want hint {hint:?} in:\n{e}");
    }
}

#[test]
fn every_gap_must_be_explained() {
    let k = parse_ok(&vmm_entry(""));
    let o = opts(StartImpl::Saga);
    assert_eq!(
        k.classify(&o, &not_converged(&[VMM_GAP, VMM_GAP])),
        Some(Listing::Listed(vec!["instance-without-vmm".into()]))
    );
    // A file without the entry for the second defect: unlisted, naming
    // the gap nobody explains — even though the first gap is known.
    assert_eq!(
        k.classify(&o, &not_converged(&[VMM_GAP, STUCK_GAP])),
        Some(Listing::Unlisted(vec![STUCK_GAP.into()]))
    );
    assert_eq!(
        KnownDefects::none().classify(&o, &not_converged(&[VMM_GAP])),
        Some(Listing::Unlisted(vec![VMM_GAP.into()]))
    );
    assert_eq!(k.classify(&o, &SeedResult::default()), None);
}

fn nat_gap(instance: &str, sled: &str) -> String {
    format!("switch0 lacks the NAT entry of instance {instance}: 203.0.113.11/0-65535 -> {sled}")
}

#[test]
fn follow_on_gaps_need_their_primary_gap() {
    let k = parse_ok(&vmm_entry("").replace(
        "gaps = [\"instance * is running on *, which has no VMM for it\"]\n",
        "gaps = [\"instance {instance} is running on {sled}, which has no VMM for it\"]\n\
         follow_on_gaps = [\"switch* lacks the NAT entry of instance {instance}: * -> {sled}\"]\n",
    ));
    let o = opts(StartImpl::Saga);
    let listed = Some(Listing::Listed(vec!["instance-without-vmm".into()]));
    assert_eq!(
        k.classify(&o, &not_converged(&[VMM_GAP, &nat_gap("web1", "sled2")])),
        listed
    );
    // Alone, or about another instance or sled, a NAT gap is unexplained.
    for (gaps, stray) in [
        (vec![nat_gap("web1", "sled2")], nat_gap("web1", "sled2")),
        (
            vec![VMM_GAP.to_string(), nat_gap("web2", "sled2")],
            nat_gap("web2", "sled2"),
        ),
        (
            vec![VMM_GAP.to_string(), nat_gap("web1", "sled0")],
            nat_gap("web1", "sled0"),
        ),
    ] {
        let gaps: Vec<&str> = gaps.iter().map(String::as_str).collect();
        assert_eq!(
            k.classify(&o, &not_converged(&gaps)),
            Some(Listing::Unlisted(vec![stray])),
            "{gaps:?}"
        );
    }
}

#[test]
fn rack_follow_on_gaps_are_explained_only_beside_their_primary_gap() {
    let k = parse_ok(&vmm_entry(
        "rack_follow_on_gaps = [\"control plane down: *\"]\n",
    ));
    let o = opts(StartImpl::Saga);
    let down = "control plane down: Nexus has not started (it waits for time to synchronise)";
    assert_eq!(
        k.classify(&o, &not_converged(&[VMM_GAP, down])),
        Some(Listing::Listed(vec!["instance-without-vmm".into()]))
    );
    // Alone, a rack-wide consequence is some other failure.
    assert_eq!(
        k.classify(&o, &not_converged(&[down])),
        Some(Listing::Unlisted(vec![down.to_string()]))
    );
}

#[test]
fn a_rack_follow_on_gap_binds_no_names() {
    let e = parse_err(&vmm_entry(
        "rack_follow_on_gaps = [\"instance {instance} is stuck in state creating\"]\n",
    ));
    assert!(e.contains("rack-wide follow-on gap"), "{e}");
    assert!(e.contains("binds nothing"), "{e}");
}

#[test]
fn a_run_may_show_two_known_defects() {
    let k = parse_ok(&format!(
        "{}\n[[defect]]\nid = \"start-saga-unwind-left-starting\"\nfailure = \"not-converged\"\n\
         gaps = [\"instance {{instance}} is stuck in state starting\"]\n\
         regression = \"{VMM_REGRESSION}\"\nwhy = \"not steno's unwind\"\n",
        vmm_entry("")
    ));
    assert_eq!(
        k.classify(
            &opts(StartImpl::Saga),
            &not_converged(&[STUCK_GAP, VMM_GAP])
        ),
        Some(Listing::Listed(vec![
            "instance-without-vmm".into(),
            "start-saga-unwind-left-starting".into()
        ]))
    );
}

#[test]
fn entries_apply_only_where_they_say() {
    let k = parse_ok(&vmm_entry("starts = [\"saga\"]\nracks = [\"standard\"]\n"));
    let r = not_converged(&[VMM_GAP]);
    assert!(matches!(
        k.classify(&opts(StartImpl::Saga), &r),
        Some(Listing::Unlisted(_))
    ));
    let standard = Options::new("standard", ServiceNat::SCRIMLET_LOCAL, StartImpl::Saga).unwrap();
    assert!(matches!(
        k.classify(&standard, &r),
        Some(Listing::Listed(_))
    ));
    let naive = Options::new("standard", ServiceNat::SCRIMLET_LOCAL, StartImpl::Naive).unwrap();
    assert!(matches!(k.classify(&naive, &r), Some(Listing::Unlisted(_))));
}

#[test]
fn invariant_and_too_slow_signatures() {
    let k = parse_ok(&format!(
        "[[defect]]\nid = \"dup-vmm\"\nfailure = \"invariant\"\ninvariant = \"one-vmm\"\n\
         message = \"instance * has VMMs on *\"\nregression = \"{VMM_REGRESSION}\"\nwhy = \"w\"\n\
         [[defect]]\nid = \"late\"\nfailure = \"too-slow\"\nregression = \"{VMM_REGRESSION}\"\nwhy = \"w\"\n"
    ));
    let o = opts(StartImpl::Naive);
    let inv = |name, message: &str| SeedResult {
        failure: Some(Failure::Invariant(name)),
        message: Some(message.into()),
        ..SeedResult::default()
    };
    assert_eq!(
        k.classify(
            &o,
            &inv("one-vmm", "instance web1 has VMMs on sled0 and sled1")
        ),
        Some(Listing::Listed(vec!["dup-vmm".into()]))
    );
    // Another message, or another invariant: unlisted.
    assert!(matches!(
        k.classify(&o, &inv("one-vmm", "something else entirely")),
        Some(Listing::Unlisted(_))
    ));
    assert!(matches!(
        k.classify(
            &o,
            &inv("nat-follows-vmm", "instance web1 has VMMs on sled0")
        ),
        Some(Listing::Unlisted(_))
    ));
    let slow = SeedResult {
        failure: Some(Failure::TooSlow),
        ..SeedResult::default()
    };
    assert_eq!(
        k.classify(&o, &slow),
        Some(Listing::Listed(vec!["late".into()]))
    );
    // A testbed error is never listed, whatever the file says.
    let testbed = SeedResult {
        failure: Some(Failure::TestbedError),
        ..SeedResult::default()
    };
    assert_eq!(k.classify(&o, &testbed), Some(Listing::TestbedError));
}

/// The summary keeps listed and unlisted failures apart, in counts, per
/// defect, and in the text's labels.
#[test]
fn the_summary_reports_listed_and_unlisted_apart() {
    let k = parse_ok(&vmm_entry(""));
    let o = opts(StartImpl::Saga);
    let results = [
        SeedResult {
            seed: 1,
            ..SeedResult::default()
        },
        SeedResult {
            seed: 2,
            ..not_converged(&[VMM_GAP])
        },
        SeedResult {
            seed: 3,
            ..not_converged(&[STUCK_GAP])
        },
    ];
    let s = crate::campaign::fuzz::summarise(&o, (1, 3), (0, 1), None, &k, &results);
    assert_eq!(
        (s.failed, s.listed, s.unlisted, s.testbed_errors),
        (2, 1, 1, 0)
    );
    assert_eq!(s.by_defect.get("instance-without-vmm"), Some(&1));
    let text = crate::campaign::fuzz::text(&s);
    assert!(
        text.contains("seed 2: [instance-without-vmm] not converged"),
        "{text}"
    );
    assert!(text.contains("seed 3: [UNLISTED] not converged"), "{text}");
    assert!(
        text.contains(&format!("  unexplained: {STUCK_GAP}")),
        "{text}"
    );
    assert!(text.contains("--known-defects test.toml"), "{text}");
    // Unlisted first.
    assert!(text.find("seed 3:") < text.find("seed 2:"), "{text}");
}
