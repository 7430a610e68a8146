//! The text pattern a known defect's signature is written in: literal
//! text, `*` for any run of characters, `{name}` for a word the match binds.
//! Matched against the whole of a gap or message, with backtracking.

use std::collections::BTreeSet;

/// A text pattern matched against the whole of a gap or message: `*` is any
/// run of characters (also none), `{name}` a non-empty word (no
/// whitespace) that the match binds to `name`; every other character is
/// itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    pub text: String,
    segments: Vec<Segment>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Star,
    Capture(String),
}

/// Words a match bound, by name.
pub type Bindings = Vec<(String, String)>;

impl Pattern {
    pub fn new(text: &str) -> Result<Pattern, String> {
        let mut segments = Vec::new();
        let mut literal = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            match c {
                '*' | '{' if !literal.is_empty() => {
                    segments.push(Segment::Literal(std::mem::take(&mut literal)));
                }
                _ => {}
            }
            match c {
                '*' => {
                    if segments.last() != Some(&Segment::Star) {
                        segments.push(Segment::Star);
                    }
                }
                '{' => {
                    let name: String = chars.by_ref().take_while(|c| *c != '}').collect();
                    if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                    {
                        return Err(format!(
                            "`{{{name}` is not a capture: write {{name}} with lowercase letters and '_'"
                        ));
                    }
                    if matches!(segments.last(), Some(Segment::Capture(_) | Segment::Star)) {
                        return Err(format!(
                            "{{{name}}} follows a `*` or capture directly: which text is whose is ambiguous"
                        ));
                    }
                    segments.push(Segment::Capture(name));
                }
                '}' => return Err("`}` without its `{`".into()),
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            segments.push(Segment::Literal(literal));
        }
        Ok(Pattern {
            text: text.to_string(),
            segments,
        })
    }

    /// The pattern's literal text (what makes it specific).
    pub fn literal_len(&self) -> usize {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Literal(l) => l.trim().chars().count(),
                _ => 0,
            })
            .sum()
    }

    /// The names it captures.
    pub fn captures(&self) -> BTreeSet<&str> {
        self.segments
            .iter()
            .filter_map(|s| match s {
                Segment::Capture(n) => Some(n.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn matches(&self, text: &str) -> bool {
        self.bind(text, &Vec::new()).is_some()
    }

    /// Match the whole of `text` with the names in `given` already bound:
    /// every binding of the match, if it matches.
    pub fn bind(&self, text: &str, given: &Bindings) -> Option<Bindings> {
        let mut binds = given.clone();
        match_from(&self.segments, text, &mut binds).then_some(binds)
    }
}

/// Backtracking match of `segments` against all of `text`.
fn match_from(segments: &[Segment], text: &str, binds: &mut Bindings) -> bool {
    let Some((first, rest)) = segments.split_first() else {
        return text.is_empty();
    };
    match first {
        Segment::Literal(l) => text
            .strip_prefix(l.as_str())
            .is_some_and(|t| match_from(rest, t, binds)),
        Segment::Star => text
            .char_indices()
            .map(|(i, _)| i)
            .chain([text.len()])
            .any(|i| match_from(rest, &text[i..], binds)),
        Segment::Capture(name) => {
            if let Some((_, value)) = binds.iter().find(|(n, _)| n == name) {
                let value = value.clone();
                return text
                    .strip_prefix(value.as_str())
                    .is_some_and(|t| match_from(rest, t, binds));
            }
            let word = text
                .char_indices()
                .find(|(_, c)| c.is_whitespace())
                .map_or(text.len(), |(i, _)| i);
            // Shortest word first; each must be followed by the rest.
            for end in text[..word].char_indices().map(|(i, c)| i + c.len_utf8()) {
                binds.push((name.clone(), text[..end].to_string()));
                if match_from(rest, &text[end..], binds) {
                    return true;
                }
                binds.pop();
            }
            false
        }
    }
}
