//! How simulated time advances: event-driven (every run racksim reports)
//! or turmoil's stock tick engine, kept to measure against.

use std::time::Duration;

use crate::trace::fmt_duration;

/// How simulated time advances (docs/decisions/0001-time-model.md).
///
/// Every run racksim reports — scenarios, sweeps, snapshots — is
/// [`Engine::EventDriven`]. [`Engine::Tick`] is turmoil's stock tick
/// engine, kept as a peer to measure against (`racksim bench --engine`);
/// it runs the same rack, software and checks, but a run on it is a
/// different run (other instants, other interleavings), not a replay of
/// the event-driven one. Where it differs:
///
/// * Every host runs once per tick on its own runtime (each host's clock
///   is its own), in an order drawn from the seed (turmoil's
///   `enable_random_order`); a tick costs the same whether anything
///   happens or not, so an idle rack costs as much as a busy one.
/// * Messages are delivered at tick boundaries: a message reaches its
///   host at the start of that host's turn in the first tick after its
///   latency (drawn at nanosecond resolution in both modes, see
///   vendor/turmoil/PATCH.md) has passed, so with a 1 ms tick an in-rack
///   hop costs one to two ticks instead of 50 µs..1 ms. Loopback traffic
///   arrives a tick late.
/// * Timers fire at their millisecond inside a host's tick (tokio's own
///   granularity); what they send waits for a tick boundary as above.
/// * The world the driver observes after a tick is stamped with the
///   tick's start (the `drained` instant), up to a tick before the host's
///   own stamp of the change.
/// * Plan steps act between ticks, at the first tick boundary at or after
///   their drawn instant (they are stamped with that boundary), always
///   before the hosts' work of the tick that follows (event-driven runs
///   draw that order from the seed); the driver's checks look at the world
///   after every tick.
/// * The driver counts ticks as its steps ([`RunOutcome::events`](super::RunOutcome::events)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Engine {
    /// racksim's patch: time jumps from one timer or delivery to the next.
    #[default]
    EventDriven,
    /// turmoil's stock engine, stepping by this tick.
    Tick(Duration),
}

impl Engine {
    /// `event-driven`, or `tick` (the tick length is not part of the name).
    pub fn name(&self) -> &'static str {
        match self {
            Engine::EventDriven => "event-driven",
            Engine::Tick(_) => "tick",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Engine::EventDriven => f.write_str("event-driven"),
            Engine::Tick(t) => write!(f, "tick ({})", fmt_duration(*t)),
        }
    }
}
