//! The HTML timeline (`racksim run --report`, `racksim compare`, `racksim
//! sweep --report`), read structurally: a small parser turns the page into
//! elements, and the tests look at their `data-block`, `data-lane` and
//! `data-kind` attributes — never at raw markup.

use crate::common;
use common::{racksim, run_madrid, scratch};

use std::{collections::BTreeMap, time::Duration};

use racksim::{
    catalogue,
    file::{Scenario, Strategy},
    html, runner,
};
use racksim_sim::{trace::Kind, Plan};

/// An element of the page.
#[derive(Debug, Default)]
struct El {
    name: String,
    attrs: BTreeMap<String, String>,
    children: Vec<El>,
    text: String,
}

impl El {
    fn attr(&self, k: &str) -> Option<&str> {
        self.attrs.get(k).map(|s| s.as_str())
    }

    /// Every element below (and including) this one, in document order.
    fn all(&self) -> Vec<&El> {
        let mut out = vec![self];
        for c in &self.children {
            out.extend(c.all());
        }
        out
    }

    fn find_all(&self, key: &str, value: &str) -> Vec<&El> {
        self.all()
            .into_iter()
            .filter(|e| e.attr(key) == Some(value))
            .collect()
    }

    fn find(&self, key: &str, value: &str) -> &El {
        let found = self.find_all(key, value);
        assert_eq!(found.len(), 1, "expected one element with {key}={value:?}");
        found[0]
    }

    /// All text below this element.
    fn text_all(&self) -> String {
        self.all().iter().map(|e| e.text.as_str()).collect()
    }

    /// Elements below with this `data-kind`, counting aggregated marks by
    /// their `data-count`.
    fn count_kind(&self, kind: &str) -> usize {
        self.find_all("data-kind", kind)
            .iter()
            .map(|e| {
                e.attr("data-count")
                    .map(|c| c.parse::<usize>().unwrap())
                    .unwrap_or(1)
            })
            .sum()
    }
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// A strict little parser for what the renderer writes (XHTML-style: void
/// elements are self-closed). Panics on anything malformed, which is a test
/// failure in itself.
fn parse(html: &str) -> El {
    let mut stack = vec![El {
        name: "#document".into(),
        ..El::default()
    }];
    let mut rest = html;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("<!") {
            let end = r.find('>').expect("unterminated declaration");
            rest = &r[end + 1..];
        } else if let Some(r) = rest.strip_prefix("</") {
            let end = r.find('>').expect("unterminated end tag");
            let name = &r[..end];
            let el = stack.pop().expect("end tag without start");
            assert_eq!(el.name, name, "mismatched end tag");
            stack.last_mut().expect("an open parent").children.push(el);
            rest = &r[end + 1..];
        } else if let Some(r) = rest.strip_prefix('<') {
            let end = r.find('>').expect("unterminated start tag");
            let mut tag = &r[..end];
            let self_closing = tag.ends_with('/');
            if self_closing {
                tag = &tag[..tag.len() - 1];
            }
            let (name, mut attrs_src) = tag.split_once(' ').unwrap_or((tag, ""));
            let mut el = El {
                name: name.to_string(),
                ..El::default()
            };
            loop {
                attrs_src = attrs_src.trim_start();
                if attrs_src.is_empty() {
                    break;
                }
                let (key, after) = attrs_src
                    .split_once("=\"")
                    .expect("attribute without value");
                let close = after.find('"').expect("unterminated attribute");
                assert!(!key.contains(' '), "bad attribute name {key:?}");
                el.attrs.insert(key.to_string(), unescape(&after[..close]));
                attrs_src = &after[close + 1..];
            }
            rest = &r[end + 1..];
            if self_closing {
                stack.last_mut().unwrap().children.push(el);
            } else if name == "style" {
                let close = rest.find("</style>").expect("unterminated style");
                el.text = rest[..close].to_string();
                stack.last_mut().unwrap().children.push(el);
                rest = &rest[close + "</style>".len()..];
            } else {
                stack.push(el);
            }
        } else {
            let end = rest.find('<').unwrap_or(rest.len());
            assert!(!rest[..end].contains('>'), "unescaped > in text");
            stack.last_mut().unwrap().text += &unescape(&rest[..end]);
            rest = &rest[end..];
        }
    }
    assert_eq!(
        stack.len(),
        1,
        "unclosed elements: {:?}",
        stack.last().unwrap().name
    );
    stack.pop().unwrap()
}

fn madrid() -> Scenario {
    catalogue::get("madrid-one-switch").expect("catalogued")
}

/// The label the report gives a converged run: "CONVERGED at <ttc>".
fn converged_label(judged: &runner::Judged) -> String {
    match judged.outcome.verdict {
        racksim_sim::Verdict::Converged { at } => {
            format!("CONVERGED at {}", racksim_sim::trace::fmt_duration(at))
        }
        ref other => panic!("expected a converged run, got {other:?}"),
    }
}

fn judged(scenario: &Scenario, strategy: &str, seed: u64) -> (Strategy, runner::Judged) {
    let v = scenario.strategy(strategy).unwrap();
    (
        v,
        runner::run(scenario, v, seed).expect("has an expectation"),
    )
}

fn page(scenario: &Scenario, runs: &[(Strategy, runner::Judged)], seed: u64) -> String {
    let inputs: Vec<html::RunInput> = runs
        .iter()
        .map(|(strategy, judged)| html::RunInput {
            scenario,
            scenario_arg: &scenario.name,
            strategy: *strategy,
            seed,
            judged,
        })
        .collect();
    html::render(&inputs)
}

fn lanes(block: &El) -> Vec<String> {
    block
        .all()
        .iter()
        .filter_map(|e| e.attr("data-lane").map(String::from))
        .collect()
}

/// Seed `seed` of `scenario` under `strategy`, and its page parsed.
fn one_run_page(
    scenario: &Scenario,
    strategy: &str,
    seed: u64,
) -> ((Strategy, runner::Judged), El) {
    let run = judged(scenario, strategy, seed);
    let doc = parse(&page(scenario, std::slice::from_ref(&run), seed));
    (run, doc)
}

/// The reconciler records in a run's trace (each drawn in its sled's lane).
fn reconciler_records(j: &runner::Judged) -> usize {
    j.outcome
        .trace
        .iter()
        .filter(|l| l.kind == Kind::Reconciler)
        .count()
}

/// How many elements of each of `kinds` `el` holds, in that order.
fn kind_counts<const N: usize>(el: &El, kinds: [&str; N]) -> [usize; N] {
    kinds.map(|k| el.count_kind(k))
}

/// NAT spans drawn from dpd records (not entries planted without one).
fn nat_spans(el: &El) -> usize {
    el.find_all("data-kind", "nat-span")
        .iter()
        .filter(|e| e.attr("data-origin").is_none())
        .count()
}

fn nat_adds(j: &runner::Judged, switch: Option<&str>) -> usize {
    j.outcome
        .trace
        .iter()
        .filter(|l| l.kind == Kind::Nat && l.fields.get("op").map(|s| s.as_str()) == Some("add"))
        .filter(|l| switch.is_none_or(|s| l.fields.get("switch").map(|x| x.as_str()) == Some(s)))
        .count()
}

const MADRID_LANES: [&str; 7] = [
    "plan", "rack", "switch0", "switch1", "sled0", "sled1", "sled2",
];

#[test]
fn madrid_legacy_shows_switch1_missing_at_the_deadline() {
    let (run, doc) = one_run_page(&madrid(), "legacy", 7);
    let block = doc.find("data-block", "legacy");
    assert_eq!(lanes(block), MADRID_LANES);

    // Every dpd create is a span, on the switch that made it.
    let j = &run.1;
    assert_eq!(nat_spans(block), nat_adds(j, None));
    let sw0 = block.find("data-lane", "switch0");
    let sw1 = block.find("data-lane", "switch1");
    assert_eq!(nat_spans(sw0), 3);
    assert_eq!(nat_spans(sw1), 0);
    // Desired everywhere; missing on switch1 only, once per service zone.
    assert_eq!(kind_counts(sw0, ["nat-desired", "missing"]), [3, 0]);
    assert_eq!(
        kind_counts(sw1, ["nat-desired", "missing", "dataplane"]),
        [3, 3, 1]
    );

    // The deadline, not convergence; the plan step as one band.
    assert_eq!(kind_counts(block, ["deadline", "converged"]), [1, 0]);
    let plan = block.find("data-lane", "plan");
    let steps: Vec<&str> = plan
        .find_all("data-kind", "plan")
        .iter()
        .map(|e| e.attr("data-step").unwrap())
        .collect();
    assert_eq!(steps, ["hide-switch..reveal-switch"]);
    // Zone starts blocked for five minutes, one per zone with NAT.
    let blocked: Vec<&str> = block
        .find_all("data-kind", "zone")
        .iter()
        .filter_map(|e| e.attr("data-zone"))
        .collect();
    assert_eq!(blocked.len(), 3, "{blocked:?}");
    // Every reconciler record is drawn (aggregated or not), on its sled.
    let recs = reconciler_records(j);
    assert_eq!(block.count_kind("reconciler"), recs);

    // The header: scenario, verdict, replay command.
    let text = doc.text_all();
    assert!(text.contains("racksim madrid-one-switch: legacy"), "{text}");
    assert!(text.contains("NOT CONVERGED by the deadline 2h"));
    assert!(text.contains("racksim run madrid-one-switch --seed 7 --strategy legacy"));
    assert!(text.contains("switch1 lacks the NAT entry of boundary-ntp on sled2"));
}

#[test]
fn madrid_sled_task_shows_convergence() {
    let (run, doc) = one_run_page(&madrid(), "sled-task", 7);
    let block = doc.find("data-block", "sled-task");
    assert_eq!(lanes(block), MADRID_LANES);
    assert_eq!(nat_spans(block), nat_adds(&run.1, None));
    for sw in ["switch0", "switch1"] {
        let lane = block.find("data-lane", sw);
        assert_eq!(nat_spans(lane), nat_adds(&run.1, Some(sw)));
        assert_eq!(nat_spans(lane), 3);
        assert_eq!(lane.count_kind("missing"), 0);
    }
    // One NTP mark per sled's NTP zone: boundary NTP on sled2, internal
    // NTP on sled0 and sled1.
    assert_eq!(
        kind_counts(block, ["converged", "deadline", "ntp", "control-plane"]),
        [1, 0, 3, 1]
    );
    let converged = block.find("data-kind", "converged");
    let label = converged_label(&run.1);
    assert!(converged.text_all().contains(&label), "{label}");
    // Periodic activations on every sled.
    for sled in ["sled0", "sled1", "sled2"] {
        assert!(block.find("data-lane", sled).count_kind("reconciler") >= 10);
    }
    assert!(doc.text_all().contains(&label));
}

#[test]
fn rendering_is_deterministic() {
    let sc = madrid();
    let a = page(
        &sc,
        &[judged(&sc, "legacy", 7), judged(&sc, "sled-task", 7)],
        7,
    );
    let b = page(
        &sc,
        &[judged(&sc, "legacy", 7), judged(&sc, "sled-task", 7)],
        7,
    );
    assert!(a == b, "two renderings of the same runs differ");
    let c = page(&sc, &[judged(&sc, "legacy", 8)], 8);
    assert_ne!(a, c);
}

#[test]
fn compare_aligns_both_strategies_on_one_axis() {
    let sc = madrid();
    let runs = [judged(&sc, "legacy", 7), judged(&sc, "sled-task", 7)];
    let doc = parse(&page(&sc, &runs, 7));
    let blocks: Vec<&str> = doc
        .all()
        .iter()
        .filter_map(|e| e.attr("data-block"))
        .collect();
    assert_eq!(blocks, ["legacy", "sled-task"]);
    for name in blocks {
        assert_eq!(lanes(doc.find("data-block", name)), MADRID_LANES);
    }
    // One scale: the same ticks in both blocks.
    let ticks = |name: &str| -> Vec<(String, String)> {
        doc.find("data-block", name)
            .find_all("data-kind", "tick")
            .iter()
            .map(|e| (e.attr("x").unwrap().to_string(), e.text.clone()))
            .collect()
    };
    assert_eq!(ticks("legacy"), ticks("sled-task"));
    assert!(ticks("legacy").len() >= 5);
    // Header: both verdicts.
    let rows = doc.find_all("data-run", "legacy");
    assert!(rows[0].text_all().contains("NOT CONVERGED"));
    let rows = doc.find_all("data-run", "sled-task");
    assert!(rows[0].text_all().contains(&converged_label(&runs[1].1)));
}

#[test]
fn an_instance_scenario_has_vmm_and_v2p_lanes() {
    let (run, doc) = one_run_page(&catalogue::get("start-delete-race").unwrap(), "saga", 3);
    let block = doc.find("data-block", "saga");
    assert_eq!(nat_spans(block), nat_adds(&run.1, None));
    assert!(block.count_kind("vmm") >= 1);
    assert!(block.count_kind("v2p") >= 1);
    assert!(block.count_kind("instance") >= 1);
}

/// A stuck saga is drawn as a labelled bad mark in the sagas row, and its
/// gap is listed with the verdict. No catalogued run gets a saga stuck (in
/// the simulation only the database can fail an undo, and it does not), so
/// the saga log's line for it — as the simulated database writes it — is
/// added to a real run, with the gap the checks would report.
#[test]
fn a_stuck_saga_is_marked_in_the_sagas_row_and_listed_as_a_gap() {
    use racksim_sim::trace::TraceLine;
    let sc = catalogue::get("start-delete-race").unwrap();
    let (v, mut judged) = judged(&sc, "saga", 3);
    let at = judged.outcome.trace.last().unwrap().at;
    judged.outcome.trace.push(
        TraceLine::new(
            at,
            "sled0",
            Kind::Saga,
            "saga 9: stuck: undo of DPD_ENSURE failed: database unavailable \
             (after RUN failed: connection refused)",
        )
        .field("saga", 9)
        .field("instance", "web1")
        .field("state", "stuck"),
    );
    let gap = "saga 9 (start of web1 on sled1) is stuck: undo of DPD_ENSURE failed: \
               database unavailable (after RUN failed: connection refused)";
    judged.outcome.verdict = racksim_sim::Verdict::NotConverged {
        deadline: at,
        gaps: vec![gap.to_string()],
    };
    let doc = parse(&page(&sc, &[(v, judged)], 3));
    let block = doc.find("data-block", "saga");
    let stuck: Vec<_> = block
        .find_all("data-kind", "saga")
        .into_iter()
        .filter(|e| e.text_all().contains("saga 9 STUCK"))
        .collect();
    assert_eq!(stuck.len(), 1, "one labelled stuck mark");
    assert!(
        stuck[0]
            .all()
            .iter()
            .any(|e| e.attr("class") == Some("m-bad")),
        "the stuck mark is drawn as bad"
    );
    assert!(doc.text_all().contains(gap), "the gap is listed");
}

/// A 2-hour run of a 32-sled rack with 30 s periodic tasks stays small:
/// dense activations become strips.
#[test]
fn a_long_run_of_a_large_rack_stays_small() {
    let mut sc = madrid();
    sc.rack = racksim::bench::rack_of(32);
    sc.plan = Plan::default();
    let two_hours = Duration::from_secs(7200);
    sc.stability = two_hours;
    let v = sc.strategy("sled-task").unwrap();
    sc.expectations.get_mut(&v).unwrap().deadline = two_hours;
    let run = (v, runner::run(&sc, v, 1).unwrap());
    let html = page(&sc, std::slice::from_ref(&run), 1);
    assert!(html.len() < 2_000_000, "{} bytes", html.len());
    let doc = parse(&html);
    let block = doc.find("data-block", "sled-task");
    assert_eq!(lanes(block).len(), 2 + 2 + 32);
    // Each periodic task with a line per activation (a sled-task per sled
    // with a zone; Nexus's service-zone NAT tracker is quiet while nothing
    // changes) is one strip, yet every activation is counted in it.
    let strips = block
        .all()
        .iter()
        .filter(|e| e.attr("data-strip").is_some())
        .count();
    assert!(strips >= 3, "{strips} strips");
    let recs = reconciler_records(&run.1);
    // Three sled-tasks' 240 activations each in two hours.
    assert!(recs > 700, "{recs}");
    assert_eq!(block.count_kind("reconciler"), recs);
    assert!(block.find_all("data-kind", "reconciler").len() < 100);
}

#[test]
fn cli_writes_reports_and_rejects_bad_input() {
    let dir = scratch("cli");
    std::fs::create_dir_all(&dir).unwrap();
    let cmp = dir.join("cmp.html");
    // `racksim compare madrid-one-switch --seed 7 legacy OTHER --report cmp.html`.
    let compare = |other: &str| {
        let report = cmp.to_str().unwrap();
        racksim(&[
            "compare",
            "madrid-one-switch",
            "--seed",
            "7",
            "legacy",
            other,
            "--report",
            report,
        ])
    };

    // Unknown strategy: exit 2, nothing written.
    let (code, _, err) = compare("nope");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unknown strategy"), "{err}");
    assert!(!cmp.exists());

    // Unwritable path: exit 2.
    let bad = dir.join("no-such-dir").join("run.html");
    let (code, _, err) = run_madrid("7", "sled-task", &["--report", bad.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--report"), "{err}");

    // compare writes one page with both blocks.
    let (code, out, err) = compare("sled-task");
    assert_eq!(code, Some(1), "{err}");
    assert!(out.contains("legacy: NOT CONVERGED"), "{out}");
    let doc = parse(&std::fs::read_to_string(&cmp).unwrap());
    assert_eq!(doc.find_all("data-block", "legacy").len(), 1);
    assert_eq!(doc.find_all("data-block", "sled-task").len(), 1);

    // sweep --report: one page per failing seed, named after the run.
    let reports = dir.join("sweep");
    let (code, _, err) = racksim(&[
        "sweep",
        "madrid-one-switch",
        "--strategy",
        "legacy",
        "--seeds",
        "1..2",
        "--jobs",
        "1",
        "--report",
        reports.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let mut names: Vec<String> = std::fs::read_dir(&reports)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "madrid-one-switch-legacy-seed1.html",
            "madrid-one-switch-legacy-seed2.html"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
