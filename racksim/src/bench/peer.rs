//! What the tick engine runs of each workload: as listed, in a reduced
//! form, or not at all (and why).

use std::time::Duration;

use racksim_sim::trace::fmt_duration;

use super::{Form, RACK_SIM_TIME};

/// Simulated time of the tick engine's reduced rack runs (`--quick`: 1
/// minute): long enough to boot, converge (at about 25 s) and hold.
pub const PEER_RACK_SIM_TIME: Duration = Duration::from_secs(2 * 60);
pub const QUICK_PEER_RACK_SIM_TIME: Duration = Duration::from_secs(60);
/// The deadline of the tick engine's madrid-legacy run: past the reveal of
/// switch1 (6m..7m30s), so legacy's failure to repair it is judged.
pub const PEER_LEGACY_DEADLINE: Duration = Duration::from_secs(10 * 60);
/// Seeds of the tick engine's sweep (`--quick`: 2).
pub const PEER_SWEEP_SEEDS: u64 = 10;
pub const QUICK_PEER_SWEEP_SEEDS: u64 = 2;

/// What the tick engine runs of a workload. A 1 ms tick costs the same
/// whether anything happens or not, so a listed workload that simulates
/// hours (or a thousand runs of ten minutes) would take minutes to hours
/// on it; those run in a reduced form, which `--engine both` also runs on
/// the event-driven engine, so the ratio compares the same runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    Listed,
    /// The reduced form, and what it reduces (for people).
    Reduced(Form, String),
    /// Not run on the tick engine, and why.
    Skipped(String),
}

/// The tick engine's form of `workload`.
pub fn peer(workload: &str, quick: bool) -> Peer {
    let listed = Form::listed(quick);
    match workload {
        "madrid-legacy" => Peer::Reduced(
            Form {
                sim_time: Some(PEER_LEGACY_DEADLINE),
                ..listed
            },
            format!(
                "deadline {} (listed: 2h)",
                fmt_duration(PEER_LEGACY_DEADLINE)
            ),
        ),
        "rack-8" | "rack-16" | "rack-32" => {
            let t = if quick {
                QUICK_PEER_RACK_SIM_TIME
            } else {
                PEER_RACK_SIM_TIME
            };
            Peer::Reduced(
                Form {
                    sim_time: Some(t),
                    ..listed
                },
                format!(
                    "{} simulated (listed: {})",
                    fmt_duration(t),
                    fmt_duration(RACK_SIM_TIME)
                ),
            )
        }
        "soak-1000h" => Peer::Skipped(
            "a thousand simulated hours: on the tick engine every simulated millisecond is \
             a tick of every host, 3.6 billion of them"
                .into(),
        ),
        "rack-32-2h" | "rack-32-8h" => Peer::Skipped(
            "the same rack as rack-32, for longer; on the tick engine every simulated \
             millisecond is a tick of every host, busy or idle, so it would cost rack-32's \
             wall time per simulated second times its duration"
                .into(),
        ),
        "fuzz-madrid" | "fuzz-standard" | "fuzz-full" => Peer::Skipped(
            "a fuzz campaign is hundreds of seeds, and on the tick engine a seed costs \
             what a madrid-sweep seed costs there: seconds, not milliseconds"
                .into(),
        ),
        "madrid-sweep" => {
            let seeds = if quick {
                QUICK_PEER_SWEEP_SEEDS
            } else {
                PEER_SWEEP_SEEDS
            };
            Peer::Reduced(
                Form { seeds, ..listed },
                format!("seeds 1..={seeds} (listed: 1..={})", listed.seeds),
            )
        }
        _ => Peer::Listed,
    }
}
