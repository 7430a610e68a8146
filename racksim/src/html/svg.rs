//! Placing lanes on pixels: the time axis (with idle stretches compressed),
//! packing of labelled items, aggregation of dense marks, and the SVG text.
//!
//! Every coordinate is printed with one decimal, and every collection is a
//! `Vec` or `BTreeMap`, so the same run gives the same bytes.

use std::{fmt::Write, time::Duration};

use racksim_sim::trace::fmt_duration;

use super::timeline::{Block, Item, Layout, Row};

/// Width of the whole picture, in CSS pixels (fits a 1280 px window).
pub const WIDTH: f64 = 1248.0;
/// Left column for lane and row names.
const GUTTER: f64 = 236.0;
const RIGHT: f64 = 16.0;
pub const PLOT_X: f64 = GUTTER;
pub const PLOT_W: f64 = WIDTH - GUTTER - RIGHT;
const ROW_H: f64 = 18.0;
/// Pixels an idle stretch is compressed into.
const BREAK_W: f64 = 56.0;
/// Approximate advance of one character of the 11 px label font.
const CHAR_W: f64 = 6.3;
/// Marks closer than this (pixels) are drawn as one.
const CLUSTER_PX: f64 = 3.0;
/// Runs of at least `STRIP_MIN` alike marks at most `STRIP_GAP_PX` apart
/// are drawn as one continuous strip.
const STRIP_GAP_PX: f64 = 14.0;
const STRIP_MIN: usize = 4;
/// Lines of a tooltip that aggregates many records.
const TITLE_LINES: usize = 8;

/// Escape text for HTML and SVG (content and attribute values).
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn label_w(s: &str) -> f64 {
    s.chars().count() as f64 * CHAR_W
}

/// Approximate width of bold 12 px text (the verdict labels).
fn bold_w(s: &str) -> f64 {
    s.chars()
        .map(|c| match c {
            'A'..='Z' => 9.6,
            '0'..='9' => 8.0,
            ' ' => 4.0,
            'i' | 'l' | 'j' | 't' | 'f' | 'r' | '.' | ',' | ':' | '(' | ')' => 4.8,
            'm' | 'w' => 11.6,
            _ => 7.8,
        })
        .sum()
}

/// One piece of the axis: linear, or an idle stretch squeezed into
/// [`BREAK_W`] pixels.
#[derive(Clone, Debug)]
struct Seg {
    t0: f64,
    t1: f64,
    x0: f64,
    x1: f64,
    compressed: bool,
}

/// Simulated time to x. Linear, except that long stretches in which
/// nothing happens (such as the 1h50m between madrid legacy's last event
/// and its deadline) are drawn as a marked break.
#[derive(Clone, Debug)]
pub struct Scale {
    segs: Vec<Seg>,
    step: f64,
}

impl Scale {
    pub fn new(times: &[Duration], end: Duration) -> Scale {
        let end_s = end.as_secs_f64().max(0.001);
        let mut t: Vec<u128> = times.iter().map(|d| d.as_micros()).collect();
        t.push(0);
        t.push(end.as_micros());
        t.sort();
        t.dedup();
        let secs = |us: u128| us as f64 / 1e6;
        // Idle stretches worth compressing: at least 10 minutes and a fifth
        // of the run.
        let min_gap = 600f64.max(0.2 * end_s);
        let gaps: Vec<(f64, f64)> = t
            .windows(2)
            .map(|w| (secs(w[0]), secs(w[1])))
            .filter(|(a, b)| b - a >= min_gap)
            .collect();
        let idle: f64 = gaps.iter().map(|(a, b)| b - a).sum();
        // Keep a little linear time either side of a break.
        let pad = (0.03 * (end_s - idle)).max(1.0);
        let mut segs = Vec::new();
        let mut cursor = 0.0;
        let mut breaks = Vec::new();
        for (a, b) in gaps {
            let (a, b) = (a + pad, b - pad);
            if b - a <= 0.0 {
                continue;
            }
            breaks.push((cursor, a));
            breaks.push((a, b));
            cursor = b;
        }
        breaks.push((cursor, end_s));
        let n_breaks = breaks.len() / 2;
        let linear: f64 = breaks.iter().step_by(2).map(|(a, b)| b - a).sum();
        let px_per_s = (PLOT_W - n_breaks as f64 * BREAK_W) / linear.max(0.001);
        let mut x = PLOT_X;
        for (i, (a, b)) in breaks.into_iter().enumerate() {
            let compressed = i % 2 == 1;
            let w = if compressed {
                BREAK_W
            } else {
                (b - a) * px_per_s
            };
            segs.push(Seg {
                t0: a,
                t1: b,
                x0: x,
                x1: x + w,
                compressed,
            });
            x += w;
        }
        let step = [
            1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0,
            7200.0, 14400.0, 21600.0, 43200.0, 86400.0,
        ]
        .into_iter()
        .find(|s| s * px_per_s >= 72.0)
        .unwrap_or(86400.0);
        Scale { segs, step }
    }

    pub fn x(&self, t: Duration) -> f64 {
        let t = t.as_secs_f64();
        for s in &self.segs {
            if t <= s.t1 {
                let f = if s.t1 > s.t0 {
                    ((t - s.t0) / (s.t1 - s.t0)).clamp(0.0, 1.0)
                } else {
                    0.0
                };
                return s.x0 + f * (s.x1 - s.x0);
            }
        }
        self.segs.last().map(|s| s.x1).unwrap_or(PLOT_X + PLOT_W)
    }

    /// Labelled ticks `(x, label)`; labels never overlap.
    fn ticks(&self) -> Vec<(f64, String)> {
        let mut all: Vec<(f64, f64)> = Vec::new();
        for s in self.segs.iter().filter(|s| !s.compressed) {
            let mut k = (s.t0 / self.step).ceil();
            while k * self.step <= s.t1 + 1e-9 {
                let t = k * self.step;
                all.push((
                    t,
                    s.x0 + (t - s.t0) / (s.t1 - s.t0).max(1e-9) * (s.x1 - s.x0),
                ));
                k += 1.0;
            }
        }
        // The end of the axis is always labelled; other labels give way
        // to it and to the breaks' labels.
        let end = self.segs.last().map(|s| s.t1).unwrap_or(0.0);
        let end_x = self.x(Duration::from_secs_f64(end));
        let end_label = tick_label(end);
        let mut taken: Vec<(f64, f64)> = vec![(end_x - label_w(&end_label), end_x + 8.0)];
        taken.extend(
            self.segs
                .iter()
                .filter(|s| s.compressed)
                .map(|s| (s.x0 - 14.0, s.x1 + 14.0)),
        );
        all.sort_by(|a, b| a.1.total_cmp(&b.1));
        let mut out: Vec<(f64, String)> = Vec::new();
        let mut last_right = f64::MIN;
        for (t, x) in all {
            let label = tick_label(t);
            let w = label_w(&label);
            let (left, right) = (x - w / 2.0, x + w / 2.0);
            if left < last_right + 10.0 || taken.iter().any(|&(a, b)| left < b && right > a) {
                continue;
            }
            last_right = right;
            out.push((x, label));
        }
        out.push((end_x, end_label));
        out
    }
}

fn tick_label(t: f64) -> String {
    let ms = (t * 1000.0).round() as u64;
    // Round to whole seconds unless that would lose the only digit.
    let d = if ms >= 10_000 {
        Duration::from_secs((ms + 500) / 1000)
    } else {
        Duration::from_millis(ms)
    };
    fmt_duration(d)
}

/// Shared `<defs>`: hatch patterns.
pub fn defs() -> &'static str {
    concat!(
        "<defs>",
        "<pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">",
        "<rect width=\"6\" height=\"6\" fill=\"#ebf4ff\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#90cdf4\" stroke-width=\"2\"/></pattern>",
        "<pattern id=\"brk\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">",
        "<rect width=\"8\" height=\"8\" fill=\"#f7fafc\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"8\" stroke=\"#cbd5e0\" stroke-width=\"3\"/></pattern>",
        "</defs>"
    )
}

/// Draw one run's block at `y`; returns its height.
pub fn block(out: &mut String, b: &Block, name: &str, heading: &str, scale: &Scale, y: f64) -> f64 {
    let mut body = String::new();
    let title_h = 24.0;
    let axis_y = title_h + 22.0;
    let verdict_y = axis_y + 4.0;
    let lanes_top = verdict_y + 22.0;
    let mut yy = lanes_top;
    let mut lanes = String::new();
    let mut backgrounds = String::new();
    for (i, lane) in b.lanes.iter().enumerate() {
        let top = yy;
        let mut rows = String::new();
        for row in &lane.rows {
            yy += draw_row(&mut rows, row, scale, yy);
        }
        let h = (yy - top).max(ROW_H);
        yy = top + h;
        let bg = if i % 2 == 0 { "#f7fafc" } else { "#ffffff" };
        let _ = write!(
            backgrounds,
            "<rect x=\"0\" y=\"{top:.1}\" width=\"{WIDTH}\" height=\"{h:.1}\" fill=\"{bg}\"/>\
             <line x1=\"0\" y1=\"{top:.1}\" x2=\"{WIDTH}\" y2=\"{top:.1}\" class=\"sep\"/>"
        );
        let _ = write!(
            lanes,
            "<g data-lane=\"{}\"><text x=\"6\" y=\"{:.1}\" class=\"lane\">{}</text>{rows}</g>",
            esc(&lane.name),
            top + 13.0,
            esc(&lane.name)
        );
        yy += 4.0;
    }
    let bottom = yy;

    // Block title.
    let _ = write!(
        body,
        "<rect x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{title_h}\" class=\"head\"/>\
         <text x=\"6\" y=\"17\" class=\"head\">{}</text>",
        esc(heading)
    );
    body += &backgrounds;
    // Breaks: a hatched column through the axis and lanes.
    for s in scale.segs.iter().filter(|s| s.compressed) {
        let _ = write!(
            body,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"url(#brk)\" data-kind=\"axis-break\"><title>{} with no events, compressed ({} to {})</title></rect>",
            s.x0,
            axis_y - 14.0,
            s.x1 - s.x0,
            bottom - axis_y + 14.0,
            fmt_duration(Duration::from_secs_f64(s.t1 - s.t0)),
            tick_label(s.t0),
            tick_label(s.t1)
        );
    }
    body += &lanes;
    // Axis: grid lines through the lanes, ticks and labels above.
    let _ = write!(
        body,
        "<line x1=\"{PLOT_X}\" y1=\"{axis_y:.1}\" x2=\"{:.1}\" y2=\"{axis_y:.1}\" class=\"axis\"/>",
        PLOT_X + PLOT_W
    );
    for (x, label) in scale.ticks() {
        let _ =
            write!(
            body,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\" class=\"grid\"/>\
             <line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" class=\"axis\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" class=\"tick{}\" data-kind=\"tick\">{}</text>",
            lanes_top,
            axis_y - 4.0,
            axis_y,
            axis_y - 6.0,
            if x >= PLOT_X + PLOT_W - 1.0 { " end" } else { "" },
            esc(&label)
        );
    }
    for s in scale.segs.iter().filter(|s| s.compressed) {
        let idle = (s.t1 - s.t0).round() as u64;
        let idle = if idle >= 600 { idle / 60 * 60 } else { idle };
        let _ = write!(
            body,
            "<text x=\"{:.1}\" y=\"{:.1}\" class=\"brk\">\u{2248}{}</text>",
            (s.x0 + s.x1) / 2.0,
            axis_y - 6.0,
            esc(&fmt_duration(Duration::from_secs(idle)))
        );
    }
    let _ = write!(
        body,
        "<text x=\"{:.1}\" y=\"{:.1}\" class=\"rowl\">simulated time</text>",
        PLOT_X - 16.0,
        axis_y - 6.0
    );
    // The verdict: lines across the block, labels above the lanes.
    for v in &b.verdict {
        let x0 = scale.x(v.from);
        let x1 = v.to.map(|t| scale.x(t)).unwrap_or(x0);
        if v.kind == "stability" {
            let _ = write!(
                body,
                "<rect x=\"{x0:.1}\" y=\"{lanes_top:.1}\" width=\"{:.1}\" height=\"{:.1}\" class=\"{}\" data-kind=\"{}\"><title>{}</title></rect>",
                (x1 - x0).max(1.0),
                bottom - lanes_top,
                v.class,
                v.kind,
                esc(&v.title)
            );
            continue;
        }
        let _ = write!(
            body,
            "<g data-kind=\"{}\"><title>{}</title><line x1=\"{x0:.1}\" y1=\"{verdict_y:.1}\" x2=\"{x0:.1}\" y2=\"{bottom:.1}\" class=\"v-{}\"/>",
            v.kind,
            esc(&v.title),
            v.class
        );
        if let Some(label) = &v.label {
            let w = bold_w(label) + 12.0;
            let lx = if x0 + 4.0 + w <= WIDTH - 2.0 {
                x0 + 4.0
            } else {
                x0 - 4.0 - w
            };
            let _ = write!(
                body,
                "<rect x=\"{lx:.1}\" y=\"{verdict_y:.1}\" width=\"{w:.1}\" height=\"17\" rx=\"3\" class=\"vl-{}\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" class=\"vlabel\">{}</text>",
                v.class,
                lx + 5.0,
                verdict_y + 12.5,
                esc(label)
            );
        }
        body += "</g>";
    }
    let _ = write!(
        out,
        "<g data-block=\"{}\" transform=\"translate(0,{y:.1})\">{body}</g>",
        esc(name)
    );
    bottom
}

/// Where a span's label goes: inside, else right of it.
fn label_x(x0: f64, x1: f64, label: &str) -> (f64, bool) {
    if x1 - x0 >= label_w(label) + 8.0 {
        (x0 + 4.0, true)
    } else {
        (x1 + 4.0, false)
    }
}

/// Draw a row at `y`; returns its height.
fn draw_row(out: &mut String, row: &Row, scale: &Scale, y: f64) -> f64 {
    let label = if row.label.chars().count() > 27 {
        format!("{}\u{2026}", row.label.chars().take(26).collect::<String>())
    } else {
        row.label.clone()
    };
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" class=\"rowl\">{}</text>",
        PLOT_X - 8.0,
        y + 13.0,
        esc(&label)
    );
    if let (true, Some(note)) = (row.items.is_empty(), row.empty_note) {
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" class=\"note\" data-kind=\"note\">{}</text>",
            PLOT_X + 4.0,
            y + 13.0,
            esc(note)
        );
    }
    // Marks without a label are aggregated; the rest is laid out.
    let (marks, items): (Vec<&Item>, Vec<&Item>) = row
        .items
        .iter()
        .partition(|i| i.to.is_none() && i.label.is_none());
    let mut lines: Vec<f64> = Vec::new(); // right edge used, per sub-row
    let mut placed: Vec<(usize, &Item)> = Vec::new();
    for item in items {
        let x0 = scale.x(item.from);
        let x1 = item.to.map(|t| scale.x(t)).unwrap_or(x0);
        let right = match &item.label {
            Some(l) if row.layout == Layout::Pack => {
                let (lx, _) = label_x(x0, x1.max(x0 + 3.0), l);
                (lx + label_w(l)).max(x1)
            }
            _ => x1,
        } + 6.0;
        let line = match row.layout {
            Layout::Overlay => 0,
            Layout::Pack => match lines.iter().position(|&r| r <= x0) {
                Some(i) => i,
                None => {
                    lines.push(f64::MIN);
                    lines.len() - 1
                }
            },
        };
        if row.layout == Layout::Pack {
            lines[line] = right;
        }
        placed.push((line, item));
    }
    let n_lines = lines.len().max(1) as f64;
    for (line, item) in placed {
        draw_item(out, item, scale, y + line as f64 * ROW_H);
    }
    draw_marks(out, &marks, scale, y);
    n_lines * ROW_H
}

fn attrs(item: &Item) -> String {
    let mut a = format!(
        "data-kind=\"{}\" data-at-us=\"{}\"",
        item.kind,
        item.from.as_micros()
    );
    if let Some((k, v)) = &item.data {
        let _ = write!(a, " data-{k}=\"{}\"", esc(v));
    }
    a
}

fn draw_item(out: &mut String, item: &Item, scale: &Scale, y: f64) {
    let x0 = scale.x(item.from);
    let Some(to) = item.to else {
        // A labelled mark.
        let _ = write!(
            out,
            "<g {}><title>{}</title><rect x=\"{:.1}\" y=\"{:.1}\" width=\"3\" height=\"{:.1}\" class=\"m-{}\"/>",
            attrs(item),
            esc(&item.title),
            x0 - 1.5,
            y + 2.0,
            ROW_H - 4.0,
            item.class
        );
        if let Some(l) = &item.label {
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" class=\"ilabel\">{}</text>",
                x0 + 5.0,
                y + 13.0,
                esc(l)
            );
        }
        out.push_str("</g>");
        return;
    };
    let x1 = scale.x(to);
    let (top, h) = match item.kind {
        "nat-desired" => (1.0, ROW_H - 2.0),
        "missing" => (2.0, ROW_H - 4.0),
        "plan" | "zone" | "control-plane" | "dataplane" => (2.0, ROW_H - 4.0),
        _ => (4.0, ROW_H - 8.0),
    };
    let w = (x1 - x0).max(if item.class == "action" { 2.0 } else { 1.5 });
    let _ = write!(
        out,
        "<g {}><title>{}</title><rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" class=\"s-{}\"/>",
        attrs(item),
        esc(&item.title),
        y + top,
        item.class
    );
    if let Some(l) = &item.label {
        let (lx, inside) = label_x(x0, x0 + w, l);
        let lx = if !inside && lx + label_w(l) > WIDTH {
            // No room on the right: end it left of the span.
            x0 - 4.0 - label_w(l)
        } else {
            lx
        };
        let class = if inside && matches!(item.class, "missing" | "drop" | "fault") {
            format!("ilabel in-{}", item.class)
        } else if item.class.starts_with("missing") {
            "ilabel out-missing".to_string()
        } else {
            "ilabel".to_string()
        };
        let _ = write!(
            out,
            "<text x=\"{lx:.1}\" y=\"{:.1}\" class=\"{class}\">{}</text>",
            y + 13.0,
            esc(l)
        );
    }
    out.push_str("</g>");
}

/// Unlabelled marks: nearby ones drawn as one (its tooltip lists them),
/// long runs of alike ones as a thin strip.
fn draw_marks(out: &mut String, marks: &[&Item], scale: &Scale, y: f64) {
    struct Cluster<'a> {
        x: f64,
        items: Vec<&'a Item>,
    }
    let rank = |c: &str| match c {
        "bad" => 4,
        "warn" => 3,
        "inert" => 2,
        "info" => 1,
        _ => 0,
    };
    let mut sorted: Vec<(f64, &Item)> = marks.iter().map(|i| (scale.x(i.from), *i)).collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.from.cmp(&b.1.from)));
    let mut clusters: Vec<Cluster> = Vec::new();
    for (x, item) in sorted {
        match clusters.last_mut() {
            Some(c) if x - c.x <= CLUSTER_PX => c.items.push(item),
            _ => clusters.push(Cluster {
                x,
                items: vec![item],
            }),
        }
    }
    let class_of = |c: &Cluster| {
        c.items
            .iter()
            .map(|i| i.class)
            .max_by_key(|c| rank(c))
            .unwrap_or("info")
    };
    let kind_of = |items: &[&Item]| {
        let k = items[0].kind;
        if items.iter().all(|i| i.kind == k) {
            k
        } else {
            "mixed"
        }
    };
    let title_of = |items: &[&Item]| -> String {
        let n = items.len();
        if n == 1 {
            return items[0].title.clone();
        }
        let mut t = format!(
            "{n} records, {} .. {}\n",
            tick_label(items[0].from.as_secs_f64()),
            tick_label(items[n - 1].from.as_secs_f64())
        );
        if n <= TITLE_LINES {
            t += &items
                .iter()
                .map(|i| i.title.as_str())
                .collect::<Vec<_>>()
                .join("\n");
        } else {
            let half = TITLE_LINES / 2;
            t += &items[..half]
                .iter()
                .map(|i| i.title.as_str())
                .collect::<Vec<_>>()
                .join("\n");
            t += &format!("\n\u{2026} {} more \u{2026}\n", n - 2 * half);
            t += &items[n - half..]
                .iter()
                .map(|i| i.title.as_str())
                .collect::<Vec<_>>()
                .join("\n");
        }
        t
    };
    let mut i = 0;
    while i < clusters.len() {
        // How far does a run of alike clusters reach?
        let class = class_of(&clusters[i]);
        let mut j = i + 1;
        while j < clusters.len()
            && class_of(&clusters[j]) == class
            && clusters[j].x - clusters[j - 1].x <= STRIP_GAP_PX
        {
            j += 1;
        }
        if j - i >= STRIP_MIN {
            let items: Vec<&Item> = clusters[i..j]
                .iter()
                .flat_map(|c| c.items.iter().copied())
                .collect();
            let (x0, x1) = (clusters[i].x, clusters[j - 1].x);
            let _ = write!(
                out,
                "<rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"6\" class=\"m-{class}\" data-kind=\"{}\" data-count=\"{}\" data-strip=\"1\"><title>{}</title></rect>",
                y + 6.0,
                (x1 - x0).max(2.0),
                kind_of(&items),
                items.len(),
                esc(&title_of(&items))
            );
            i = j;
            continue;
        }
        let c = &clusters[i];
        let _ = write!(
            out,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"2.5\" height=\"{:.1}\" class=\"m-{class}\" data-kind=\"{}\" data-count=\"{}\"><title>{}</title></rect>",
            c.x - 1.25,
            y + 3.0,
            ROW_H - 6.0,
            kind_of(&c.items),
            c.items.len(),
            esc(&title_of(&c.items))
        );
        i += 1;
    }
}
