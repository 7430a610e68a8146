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
        // Text from the file is shown with its control characters escaped
        // (an ESC byte must not drive the terminal), and the caret moved
        // past the escapes before it.
        let esc = crate::input::escape_controls;
        writeln!(
            f,
            "error: {}:{}:{}: {}",
            esc(&self.origin),
            self.line,
            self.column,
            esc(&self.message)
        )?;
        let num = self.line.to_string();
        let pad = " ".repeat(num.len());
        let line = self.source_line.trim_end_matches('\r');
        let before: String = line.chars().take(self.column.saturating_sub(1)).collect();
        let caret =
            esc(&before).chars().count() + self.column.saturating_sub(1) - before.chars().count();
        writeln!(f, "{pad} |")?;
        writeln!(f, "{num} | {}", esc(line))?;
        write!(f, "{pad} | {}^", " ".repeat(caret))?;
        if let Some(h) = &self.hint {
            write!(f, "\n{pad} = hint: {}", esc(h))?;
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
            "check the spelling; the format is documented in scenario/src/file/mod.rs and docs/scenario-files.md"
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
pub fn located(
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
