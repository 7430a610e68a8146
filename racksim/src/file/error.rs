//! Located errors: every rejection names the file, line and column of the
//! offending value, shows the line and, where it helps, a hint.

use std::{fmt, ops::Range};

/// A scenario file error, located.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub origin: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
    pub source_line: String,
    pub hint: Option<String>,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "error: {}:{}:{}: {}",
            self.origin, self.line, self.column, self.message
        )?;
        let num = self.line.to_string();
        let pad = " ".repeat(num.len());
        writeln!(f, "{pad} |")?;
        writeln!(f, "{num} | {}", self.source_line)?;
        write!(f, "{pad} | {}^", " ".repeat(self.column.saturating_sub(1)))?;
        if let Some(h) = &self.hint {
            write!(f, "\n{pad} = hint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// Turns a byte span of the file into a located [`ScenarioError`].
pub(super) struct Locator<'a> {
    pub origin: &'a str,
    pub text: &'a str,
}

impl Locator<'_> {
    pub fn error(
        &self,
        span: Option<Range<usize>>,
        message: String,
        hint: Option<String>,
    ) -> ScenarioError {
        located(
            self.origin,
            self.text,
            span.map(|s| s.start).unwrap_or(0),
            message,
            hint,
        )
    }
}

pub(super) fn hint_for(message: &str) -> Option<String> {
    if message.contains("unknown field") {
        Some(
            "check the spelling; the format is documented in racksim/src/file/mod.rs and docs/scenario-files.md"
                .into(),
        )
    } else if message.contains("missing field") {
        Some(
            "every scenario needs name, description, rack, ntp_return_switch and [expect.*]".into(),
        )
    } else {
        None
    }
}

/// A located error at byte `offset` of `text` (for other files racksim
/// reads, such as the fuzzer's known-defects file).
pub(crate) fn located(
    origin: &str,
    text: &str,
    offset: usize,
    message: String,
    hint: Option<String>,
) -> ScenarioError {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let source_line = text[line_start..].lines().next().unwrap_or("").to_string();
    // An error at a line's trailing `\r` (toml reports one there) points
    // just past the line's text: the `\r` is not a column a reader sees.
    let visible = source_line.trim_end_matches('\r').chars().count();
    let column = (text[line_start..offset].chars().count() + 1).min(visible + 1);
    ScenarioError {
        origin: origin.to_string(),
        line,
        column,
        message,
        source_line,
        hint,
    }
}
