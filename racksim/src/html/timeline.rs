//! What a timeline is made of: a [`Block`] per run, of [`Lane`]s (a
//! host, the plan, the rack), of [`Row`]s, of [`Item`]s (spans and marks).
//!
//! These are the shared vocabulary of the lane builders ([`super::lanes`],
//! [`super::nat`], [`super::sled`]) and of the drawing ([`super::svg`]):
//! kept apart from all of them so that each depends on this module and none
//! on another's.

use std::time::Duration;

use racksim_sim::trace::TraceLine;

/// Something drawn on a row: a span (`to` is set) or a mark.
#[derive(Clone, Debug)]
pub struct Item {
    pub from: Duration,
    pub to: Option<Duration>,
    /// `data-kind` of the element.
    pub kind: &'static str,
    /// CSS class (colour).
    pub class: &'static str,
    /// Text drawn beside or inside it.
    pub label: Option<String>,
    /// Tooltip: the trace line(s) behind it.
    pub title: String,
    /// One more `data-*` attribute.
    pub data: Option<(&'static str, String)>,
}

impl Item {
    pub(super) fn span(
        from: Duration,
        to: Duration,
        kind: &'static str,
        class: &'static str,
    ) -> Self {
        Item {
            from,
            to: Some(to.max(from)),
            kind,
            class,
            label: None,
            title: String::new(),
            data: None,
        }
    }

    pub(super) fn mark(line: &TraceLine, kind: &'static str, class: &'static str) -> Self {
        Item {
            from: line.at,
            to: None,
            kind,
            class,
            label: None,
            title: line.to_string(),
            data: None,
        }
    }

    pub(super) fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    pub(super) fn title(mut self, title: impl Into<String>) -> Self {
        self.title = title.into();
        self
    }

    pub(super) fn data(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.data = Some((key, value.into()));
        self
    }
}

/// How a row's items share its height.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Everything on one line, in order (later items on top).
    Overlay,
    /// Items (with their labels) spread over as many lines as needed so
    /// that none overlaps another.
    Pack,
}

#[derive(Clone, Debug)]
pub struct Row {
    pub label: String,
    pub layout: Layout,
    pub items: Vec<Item>,
    /// Said in the row when it has nothing to show.
    pub empty_note: Option<&'static str>,
}

impl Row {
    pub(super) fn new(label: impl Into<String>, layout: Layout) -> Self {
        Row {
            label: label.into(),
            layout,
            items: Vec::new(),
            empty_note: None,
        }
    }

    pub(super) fn note(mut self, note: &'static str) -> Self {
        self.empty_note = Some(note);
        self
    }
}

#[derive(Clone, Debug)]
pub struct Lane {
    /// `data-lane`: a host name, or `plan` / `rack`.
    pub name: String,
    pub rows: Vec<Row>,
}

/// One run, ready to draw.
#[derive(Clone, Debug)]
pub struct Block {
    pub lanes: Vec<Lane>,
    /// Drawn across the whole block: convergence, deadline, violation.
    pub verdict: Vec<Item>,
    pub end: Duration,
}

impl Block {
    /// Every instant something happens (to choose the time axis).
    pub fn times(&self) -> Vec<Duration> {
        let mut t: Vec<Duration> = self
            .lanes
            .iter()
            .flat_map(|l| &l.rows)
            .flat_map(|r| &r.items)
            .filter(|i| !matches!(i.kind, "nat-desired" | "missing"))
            .flat_map(|i| [Some(i.from), i.to].into_iter().flatten())
            .chain(self.verdict.iter().map(|i| i.from))
            .collect();
        t.push(self.end);
        t
    }
}

pub(super) fn field<'a>(line: &'a TraceLine, key: &str) -> Option<&'a str> {
    line.fields.get(key).map(|s| s.as_str())
}
