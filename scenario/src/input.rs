//! Reading a file a user names: a scenario, a campaign shard, a
//! known-defects file, a regression. Every such read goes through
//! [`read_text`], so every one has the same limits and the same errors:
//!
//! - regular files only: a directory, a FIFO, a device (`/dev/zero`) or a
//!   socket is refused by what it is, before it is opened (a FIFO would
//!   block the open, a device never end);
//! - at most [`MAX_INPUT_BYTES`] (4 MiB): a larger file is refused, and
//!   the read itself stops one byte past the limit, so a file whose size
//!   the metadata misstates is never read unbounded;
//! - text: a NUL byte makes it a binary file, a byte that is not UTF-8 is
//!   reported by line, column and byte offset, and neither is echoed.
//!
//! [`escape_controls`] is what error messages use to show text from a file
//! without its control characters reaching the terminal.

use std::{
    borrow::Cow,
    fmt,
    io::Read,
    path::{Path, PathBuf},
};

/// The largest file racksim reads: 4 MiB (the biggest scenario in the
/// catalogue is a few KiB; a campaign shard of 10,000 seeds under 2 MiB).
pub const MAX_INPUT_BYTES: u64 = 4 * 1024 * 1024;

/// Why a file could not be read as text.
#[derive(Debug)]
pub struct InputError {
    /// What the file is to the command, e.g. "scenario file".
    pub what: &'static str,
    pub path: PathBuf,
    pub kind: InputErrorKind,
}

#[derive(Debug)]
pub enum InputErrorKind {
    /// It could not be opened or read.
    Io(std::io::Error),
    /// Not a regular file: what it is instead ("a directory", ...).
    NotRegular(&'static str),
    /// Larger than [`MAX_INPUT_BYTES`].
    TooLarge,
    /// A NUL byte at this place.
    Binary(Location),
    /// A byte that is not UTF-8 at this place.
    NotUtf8(Location),
}

/// A place in a file: 1-based line and column (in characters), and the
/// 0-based byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    pub column: usize,
    pub offset: usize,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display().to_string();
        let path = escape_controls(&path);
        let what = self.what;
        match &self.kind {
            InputErrorKind::Io(e) => write!(f, "error: cannot read the {what} {path}: {e}"),
            InputErrorKind::NotRegular(is) => write!(
                f,
                "error: the {what} {path} is {is}, not a regular file\n  = hint: racksim reads \
                 input only from regular files (no directories, FIFOs or devices); copy the \
                 content into a file and name that"
            ),
            InputErrorKind::TooLarge => write!(
                f,
                "error: the {what} {path} is larger than {} MiB, the most racksim reads from \
                 any input file\n  = hint: is it the file you meant?",
                MAX_INPUT_BYTES / (1024 * 1024)
            ),
            InputErrorKind::Binary(at) => write!(
                f,
                "error: {path}:{}:{}: the {what} is a binary file (a NUL byte at byte offset \
                 {}), not text\n  = hint: is it the file you meant?",
                at.line, at.column, at.offset
            ),
            InputErrorKind::NotUtf8(at) => write!(
                f,
                "error: {path}:{}:{}: the {what} is not UTF-8 text (an invalid byte at byte \
                 offset {})\n  = hint: save the file as UTF-8",
                at.line, at.column, at.offset
            ),
        }
    }
}

impl std::error::Error for InputError {}

impl From<InputError> for String {
    fn from(e: InputError) -> String {
        e.to_string()
    }
}

/// What a non-regular file is, for an error.
fn kind_of(meta: &std::fs::Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        return None;
    }
    if t.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if t.is_char_device() {
            return Some("a character device");
        }
        if t.is_block_device() {
            return Some("a block device");
        }
        if t.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a regular file")
}

/// Read `path`, the `what` of a command ("scenario file", ...), as text,
/// within the limits the module describes.
pub fn read_text(path: &Path, what: &'static str) -> Result<String, InputError> {
    let err = |kind| InputError {
        what,
        path: path.to_path_buf(),
        kind,
    };
    // Checked before opening: opening a FIFO waits for a writer.
    let meta = std::fs::metadata(path).map_err(|e| err(InputErrorKind::Io(e)))?;
    if let Some(is) = kind_of(&meta) {
        return Err(err(InputErrorKind::NotRegular(is)));
    }
    if meta.len() > MAX_INPUT_BYTES {
        return Err(err(InputErrorKind::TooLarge));
    }
    let file = std::fs::File::open(path).map_err(|e| err(InputErrorKind::Io(e)))?;
    // And again on what was opened, should the path have changed since.
    let meta = file.metadata().map_err(|e| err(InputErrorKind::Io(e)))?;
    if let Some(is) = kind_of(&meta) {
        return Err(err(InputErrorKind::NotRegular(is)));
    }
    let mut bytes = Vec::new();
    file.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| err(InputErrorKind::Io(e)))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(err(InputErrorKind::TooLarge));
    }
    decode(bytes).map_err(err)
}

/// `bytes` as text: refused, located, if they hold a NUL byte (a binary
/// file) or are not UTF-8.
pub fn decode(bytes: Vec<u8>) -> Result<String, InputErrorKind> {
    if let Some(offset) = bytes.iter().position(|&b| b == 0) {
        return Err(InputErrorKind::Binary(locate(&bytes, offset)));
    }
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        InputErrorKind::NotUtf8(locate(e.as_bytes(), offset))
    })
}

/// The line and column of byte `offset` of `bytes`.
fn locate(bytes: &[u8], offset: usize) -> Location {
    let before = &bytes[..offset];
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    Location {
        line: before.iter().filter(|&&b| b == b'\n').count() + 1,
        column: String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1,
        offset,
    }
}

/// `text` with its control characters (but newlines and tabs) escaped as
/// `\u{1b}`, so that text from a file shown in an error cannot drive the
/// terminal.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_escaped) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| {
                if is_escaped(c) {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// Whether [`escape_controls`] escapes `c`.
pub fn is_escaped(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_bad_bytes() {
        let Err(InputErrorKind::NotUtf8(at)) = decode(b"a = 1\nb = \"\xff\"\n".to_vec()) else {
            panic!("accepted")
        };
        assert_eq!(
            at,
            Location {
                line: 2,
                column: 6,
                offset: 11
            }
        );
        let Err(InputErrorKind::Binary(at)) = decode(b"x\0".to_vec()) else {
            panic!("accepted")
        };
        assert_eq!((at.line, at.column, at.offset), (1, 2, 1));
        assert_eq!(decode(b"ok\n".to_vec()).unwrap(), "ok\n");
    }

    #[test]
    fn a_scenario_error_escapes_the_file_and_points_past_the_escapes() {
        let e = crate::file::ScenarioError {
            origin: "f.toml".into(),
            line: 1,
            column: 4,
            message: "bad \x1b[31m".into(),
            source_line: "\x1b\x1bab\r".into(),
            hint: None,
        };
        // The caret under `b`: past two escapes of six characters and `a`.
        assert_eq!(
            e.to_string(),
            format!(
                "error: f.toml:1:4: bad \\u{{1b}}[31m\n  |\n1 | \\u{{1b}}\\u{{1b}}ab\n  | {}^",
                " ".repeat(13)
            )
        );
    }

    #[test]
    fn escapes_controls() {
        assert_eq!(escape_controls("a\x1b[31mb\n\t"), "a\\u{1b}[31mb\n\t");
        assert!(matches!(escape_controls("plain"), Cow::Borrowed(_)));
    }
}
