//! The HTML timeline of a run (`racksim run --report FILE`, `racksim
//! compare`, `racksim sweep --report DIR`).
//!
//! One self-contained file: inline CSS and one inline SVG, no scripts, no
//! network. Lanes on one simulated-time axis: the plan's faults, the rack
//! (control plane, NTP), each switch's NAT table (desired entries hatched,
//! actual ones filled, red where one is missing at the deadline), and each
//! sled (zone starts, reconciler activations per task, VMMs, V2P). Hovering
//! anything shows the trace line(s) behind it (SVG `<title>`).
//!
//! Elements carry `data-block` (strategy), `data-lane` (host, `plan`,
//! `rack`) and `data-kind` attributes, so tests and scripts can read the
//! picture structurally. Rendering is a pure function of the runs: the same
//! runs give the same bytes.

mod lanes;
mod nat;
mod sled;
mod svg;
mod timeline;

use std::{fmt::Write, path::Path};

use racksim_sim::{
    trace::{fmt_duration, fmt_time},
    Verdict,
};

use crate::{
    file::{Scenario, Strategy},
    output::Output,
    runner::Judged,
};

use svg::esc;

/// Full traces longer than this are left out of the page (the replay
/// command prints them).
const MAX_TRACE_LINES: usize = 2000;

/// One judged run to draw.
#[derive(Clone, Copy)]
pub struct RunInput<'a> {
    pub scenario: &'a Scenario,
    /// How the user named the scenario (for the replay command).
    pub scenario_arg: &'a str,
    pub strategy: Strategy,
    pub seed: u64,
    pub judged: &'a Judged,
}

/// The file name `sweep --report DIR` gives a run's report.
pub fn file_name(scenario: &Scenario, strategy: Strategy, seed: u64) -> String {
    let safe: String = scenario
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}-{strategy}-seed{seed}.html")
}

/// Start the report file before anything runs, so that a bad path is an
/// input error; the page replaces an existing file only once it is whole
/// (see [`crate::output`]).
pub fn create(path: &Path) -> Result<Output, String> {
    Output::create("--report", path)
}

/// Render `runs` of `scenario` (as `scenario_arg` names it on the command
/// line), each a strategy, seed and judged run, on one time axis, and write
/// the page to `out`, created with [`create`] before they ran.
pub fn write_runs(
    out: Output,
    scenario: &Scenario,
    scenario_arg: &str,
    runs: &[(Strategy, u64, &Judged)],
) -> Result<(), String> {
    let inputs: Vec<RunInput> = runs
        .iter()
        .map(|&(strategy, seed, judged)| RunInput {
            scenario,
            scenario_arg,
            strategy,
            seed,
            judged,
        })
        .collect();
    write(out, &render(&inputs))
}

/// Write a rendered report to a file created with [`create`].
pub fn write(mut out: Output, html: &str) -> Result<(), String> {
    use std::io::Write as _;
    out.writer()
        .write_all(html.as_bytes())
        .map_err(|e| format!("error: --report {}: {e}", out.path().display()))?;
    out.commit()
}

fn verdict_summary(v: &Verdict) -> (String, &'static str) {
    match v {
        Verdict::Converged { at } => (format!("CONVERGED at {}", fmt_duration(*at)), "ok"),
        Verdict::NotConverged { deadline, gaps } => (
            format!(
                "NOT CONVERGED by the deadline {} ({} gaps)",
                fmt_duration(*deadline),
                gaps.len()
            ),
            "bad",
        ),
        Verdict::InvariantViolated { at, invariant, .. } => (
            format!("INVARIANT VIOLATED at {}: {invariant}", fmt_time(*at)),
            "bad",
        ),
        Verdict::TestbedError { at, host, .. } => (
            format!("TESTBED ERROR at {} on {host}", fmt_time(*at)),
            "bad",
        ),
    }
}

const CSS: &str = "\
body{font:13px/1.4 system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;color:#1a202c;margin:8px 12px;max-width:1252px}
h1{font-size:18px;margin:4px 0}
p.desc{margin:2px 0 8px;color:#4a5568}
table.runs{border-collapse:collapse;margin:6px 0}
table.runs td:first-child{white-space:nowrap}
table.runs td,table.runs th{padding:3px 8px;border-bottom:1px solid #e2e8f0;text-align:left;vertical-align:top}
.verdict{white-space:nowrap;font-weight:bold;padding:1px 6px;border-radius:3px;color:#fff}
.verdict.ok{background:#2f855a}.verdict.bad{background:#c53030}
td code{white-space:nowrap}
code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#edf2f7;padding:1px 4px;border-radius:3px}
ul.gaps{margin:2px 0 6px;padding-left:20px;color:#c53030}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;margin:6px 0;font-size:12px}
.legend span.sw{display:inline-block;width:22px;height:10px;margin-right:4px;vertical-align:middle;border:1px solid transparent}
details{margin:6px 0}pre{font:11px/1.35 ui-monospace,Menlo,Consolas,monospace;white-space:pre;overflow-x:auto}
svg text{font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif}
text.lane{font-weight:bold;font-size:13px}
text.rowl{font-size:11px;fill:#4a5568;text-anchor:end}
text.tick{font-size:11px;text-anchor:middle;fill:#2d3748}text.tick.end{text-anchor:end}
text.note{font-size:11px;fill:#a0aec0;font-style:italic}
text.brk{font-size:10px;text-anchor:middle;fill:#4a5568}
text.ilabel{font-size:11px;fill:#1a202c}
text.in-missing{fill:#fff;font-weight:bold}
text.out-missing{fill:#c53030;font-weight:bold}
text.vlabel{fill:#fff;font-weight:bold;font-size:12px}
rect.head{fill:#2d3748}text.head{fill:#fff;font-weight:bold;font-size:13px}
line.sep{stroke:#e2e8f0}line.grid{stroke:#cbd5e0;stroke-dasharray:2 3}line.axis{stroke:#4a5568}
.s-nat-desired{fill:url(#hatch);stroke:#3182ce;stroke-dasharray:4 2}
.s-nat-actual{fill:#2f855a}.s-nat-wrong{fill:#dd6b20}.s-nat-stale{fill:#805ad5}
.s-missing{fill:#e53e3e}
.s-missing-stale{fill:none;stroke:#e53e3e;stroke-width:2;stroke-dasharray:5 3}
.s-fault{fill:#fbd38d;stroke:#c05621}.s-action{fill:#c05621}
.s-drop{fill:#fed7d7;stroke:#e53e3e}
.s-cp-up{fill:#c6f6d5;stroke:#38a169}
.s-zone-blocked{fill:#fefcbf;stroke:#b7791f}
.s-vmm-reg{fill:#d6bcfa}.s-vmm-run{fill:#6b46c1}
.s-v2p{fill:#81e6d9;stroke:#2c7a7b}
.stable{fill:#38a169;fill-opacity:.09}
.m-ok{fill:#718096}.m-info{fill:#3182ce}.m-warn{fill:#dd6b20}.m-bad{fill:#e53e3e}.m-inert{fill:#a0aec0}.m-ntp{fill:#2b6cb0}
.v-converged{stroke:#2f855a;stroke-width:3}.v-deadline{stroke:#c53030;stroke-width:3}
.vl-converged{fill:#2f855a}.vl-deadline{fill:#c53030}
";

/// The legend: `(swatch CSS, meaning)`.
const LEGEND: &[(&str, &str)] = &[
    (
        "background:repeating-linear-gradient(45deg,#ebf4ff 0 3px,#90cdf4 3px 5px);border:1px dashed #3182ce",
        "NAT entry desired on that switch",
    ),
    ("background:#2f855a", "NAT entry in the table (actual)"),
    ("background:#dd6b20", "actual entry pointing elsewhere"),
    ("background:#805ad5", "entry planted / from before the run"),
    ("background:#e53e3e", "desired entry MISSING at the deadline"),
    ("background:#fbd38d;border:1px solid #c05621", "fault (plan step) in force"),
    ("background:#fed7d7;border:1px solid #e53e3e", "switch dropping inbound traffic"),
    ("background:#c6f6d5;border:1px solid #38a169", "control plane up"),
    ("background:#fefcbf;border:1px solid #b7791f", "zone start blocked"),
    ("background:#718096", "reconciler activation, completed"),
    ("background:#3182ce", "progress / info"),
    ("background:#dd6b20", "warnings / errors reported"),
    ("background:#a0aec0", "inert"),
    ("background:#6b46c1", "VMM running"),
    ("background:#81e6d9", "V2P mapping"),
    ("background:#2f855a", "converged (green line)"),
    ("background:#c53030", "deadline / violation (red line)"),
];

/// Render one or more runs of a scenario (same seed or not) as one page,
/// their blocks on one time axis.
pub fn render(runs: &[RunInput<'_>]) -> String {
    let blocks: Vec<timeline::Block> = runs.iter().map(lanes::build).collect();
    let end = blocks.iter().map(|b| b.end).max().unwrap_or_default();
    let times: Vec<_> = blocks.iter().flat_map(|b| b.times()).collect();
    let scale = svg::Scale::new(&times, end);

    let mut out = String::new();
    let w = &mut out;
    let first = runs.first();
    let scenario = first.map(|r| r.scenario.name.as_str()).unwrap_or("");
    let names: Vec<String> = runs.iter().map(|r| r.strategy.to_string()).collect();
    let title = format!("racksim {scenario}: {}", names.join(" vs "));
    let _ = write!(
        w,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>\
         <meta name=\"viewport\" content=\"width=1280\"/><title>{}</title>\
         <style>{CSS}</style></head><body>",
        esc(&title)
    );
    if let Some(r) = first {
        let _ = write!(
            w,
            "<h1>{}</h1><p class=\"desc\">{} — rack {} ({} sleds), NTP replies via {}</p>",
            esc(&title),
            esc(&r.scenario.description),
            esc(&r.scenario.rack_name),
            r.scenario.rack.sleds.len(),
            r.scenario.ntp_return_switch
        );
    }
    w.push_str(
        "<table class=\"runs\"><tr><th>strategy</th><th>seed</th><th>verdict</th>\
         <th>expectation</th><th>replay</th></tr>",
    );
    for r in runs {
        let (verdict, class) = verdict_summary(&r.judged.outcome.verdict);
        let expectation = match &r.judged.judgement {
            Ok(why) => format!("holds: {why}"),
            Err(why) => format!("DOES NOT HOLD: {why}"),
        };
        let _ = write!(
            w,
            "<tr data-run=\"{}\"><td><b>{}</b></td><td>{}</td><td><span class=\"verdict {class}\">{}</span></td>\
             <td>{}</td><td><code>{}</code></td></tr>",
            esc(&r.strategy.to_string()),
            esc(&r.strategy.to_string()),
            r.seed,
            esc(&verdict),
            esc(&expectation),
            esc(&r.judged.replay_command(r.scenario_arg, r.strategy, r.seed))
        );
    }
    w.push_str("</table>");
    for r in runs {
        match &r.judged.outcome.verdict {
            Verdict::NotConverged { gaps, .. } if !gaps.is_empty() => {
                let _ = write!(
                    w,
                    "<div>Missing at the deadline ({}):<ul class=\"gaps\">",
                    esc(&r.strategy.to_string())
                );
                for g in gaps {
                    let _ = write!(w, "<li>{}</li>", esc(g));
                }
                w.push_str("</ul></div>");
            }
            Verdict::InvariantViolated { message, event, .. } => {
                let _ = write!(
                    w,
                    "<div>Invariant violated ({}):<ul class=\"gaps\"><li>{}</li>",
                    esc(&r.strategy.to_string()),
                    esc(message)
                );
                if let Some(e) = event {
                    let _ = write!(w, "<li>first violating event: {}</li>", esc(e));
                }
                w.push_str("</ul></div>");
            }
            Verdict::TestbedError { error, .. } => {
                let _ = write!(w, "<ul class=\"gaps\"><li>{}</li></ul>", esc(error));
            }
            _ => {}
        }
    }

    // The picture.
    let mut body = String::new();
    let mut y = 0.0;
    for (r, b) in runs.iter().zip(&blocks) {
        let (verdict, _) = verdict_summary(&r.judged.outcome.verdict);
        let heading = format!("{} (seed {}) \u{2014} {verdict}", r.strategy, r.seed);
        y += svg::block(&mut body, b, &r.strategy.to_string(), &heading, &scale, y);
        y += 10.0;
    }
    let _ = write!(
        w,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{y:.0}\" viewBox=\"0 0 {} {y:.0}\" role=\"img\" aria-label=\"{}\">{}{body}</svg>",
        svg::WIDTH,
        svg::WIDTH,
        esc(&format!("timeline of {title}")),
        svg::defs()
    );
    w.push_str("<div class=\"legend\">");
    for (style, meaning) in LEGEND {
        let _ = write!(
            w,
            "<span><span class=\"sw\" style=\"{style}\"></span>{}</span>",
            esc(meaning)
        );
    }
    w.push_str(
        "</div><p class=\"desc\">Hover any mark for the trace line(s) behind it. Nearby marks are drawn as one \
         (its tooltip lists them); long runs of alike activations as a thin strip. Hatched columns on the axis \
         are idle stretches compressed to save width.</p>",
    );

    // The plan with its drawn times, and the trace itself.
    for r in runs {
        let o = &r.judged.outcome;
        let _ = write!(
            w,
            "<details><summary>{}: plan ({} steps) and trace ({} lines)</summary><pre>",
            esc(&r.strategy.to_string()),
            o.steps.len(),
            o.trace.len()
        );
        for s in &o.steps {
            let drawn = s
                .drawn_from
                .map(|d| format!("   (drawn from {d})"))
                .unwrap_or_default();
            let _ = writeln!(
                w,
                "plan  {}  {}{}",
                fmt_time(s.at),
                esc(&s.action.to_string()),
                esc(&drawn)
            );
        }
        w.push('\n');
        if o.trace.len() <= MAX_TRACE_LINES {
            for l in &o.trace {
                let _ = writeln!(w, "{}", esc(&l.to_string()));
            }
        } else {
            let _ = writeln!(
                w,
                "({} lines: too many for this page; {} prints them)",
                o.trace.len(),
                esc(&r.judged.replay_command(r.scenario_arg, r.strategy, r.seed))
            );
        }
        w.push_str("</pre></details>");
    }
    w.push_str("</body></html>\n");
    out
}
