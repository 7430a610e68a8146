//! Bad input, class by class (issue 39): scenario files, CLI arguments,
//! live mode's HTTP APIs and output paths. Each class is one table-driven
//! test; every case asserts the exit code (or HTTP status) and the message,
//! and that every file it touched is byte-identical afterwards.

use crate::common;

mod cli;
mod files;
mod live_http;
mod outputs;
mod scenario_rules;

use std::path::{Path, PathBuf};

/// The bytes of some files before a case, to compare after it: a file that
/// did not exist must still not exist.
pub struct Untouched(Vec<(PathBuf, Option<Vec<u8>>)>);

impl Untouched {
    pub fn record<P: AsRef<Path>>(paths: &[P]) -> Self {
        Untouched(
            paths
                .iter()
                .map(|p| (p.as_ref().to_path_buf(), std::fs::read(p).ok()))
                .collect(),
        )
    }

    /// Panics, naming `case`, if any recorded file changed.
    pub fn check(&self, case: &str) {
        for (path, before) in &self.0 {
            let after = std::fs::read(path).ok();
            assert!(
                before == &after,
                "{case}: {} changed ({} bytes before, {} after)",
                path.display(),
                before.as_ref().map_or(-1, |b| b.len() as i64),
                after.as_ref().map_or(-1, |b| b.len() as i64),
            );
        }
    }
}
