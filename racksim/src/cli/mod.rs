//! The `racksim` binary's commands: each module holds the arguments of a
//! family of commands and their handlers. A handler reads its arguments,
//! calls the library (`racksim::*`, where the work is) and prints; this
//! module holds what they share: the exit [`Status`], worker threads,
//! progress bars and `--json`.
//!
//! These modules belong to the binary (`main.rs` declares them), not to the
//! library: nothing here is reachable as `racksim::cli`.

pub mod args;
pub mod bench;
pub mod fuzz;
pub mod run;
pub mod serve;
pub mod sweep;

/// How a command ended, as its exit status: 0 passed, 1 failed (a run did
/// not converge, or with `--expect` an expectation did not hold), 3 some
/// run ended in a testbed error (which outranks 1: racksim itself failed,
/// so nothing else the command found can be trusted), 2 bad input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Passed,
    Failed,
    TestbedError,
}

impl Status {
    /// `passed`, unless some run was a testbed error.
    pub fn of(passed: bool, testbed_errors: usize) -> Status {
        match (testbed_errors, passed) {
            (1.., _) => Status::TestbedError,
            (0, true) => Status::Passed,
            (0, false) => Status::Failed,
        }
    }
}

impl From<bool> for Status {
    fn from(passed: bool) -> Status {
        Status::of(passed, 0)
    }
}

/// `--jobs`, or the number of cores.
pub fn threads(jobs: Option<usize>) -> usize {
    jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
    .max(1)
}

pub fn progress_bar() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} runs, {elapsed} elapsed, ~{eta} left",
        )
        .expect("valid template"),
    );
    bar
}

/// `(done, total)` progress onto `bar`.
pub fn progress_of(bar: &indicatif::ProgressBar) -> impl Fn(usize, usize) + Sync + '_ {
    move |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    }
}

/// Print `value` as pretty JSON, or else `text()`.
pub fn print_json_or(json: bool, value: &impl serde::Serialize, text: impl FnOnce() -> String) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(value).expect("results serialize")
        );
    } else {
        print!("{}", text());
    }
}
