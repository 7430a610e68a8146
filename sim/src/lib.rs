//! # racksim-sim: the simulated rack
//!
//! This crate is the testbed. It builds a rack on a [turmoil] network —
//! switch zones with a fake dendrite (dpd) and management gateway (MGS),
//! sleds running sled-agent and their zones, an internal DNS, an upstream
//! NTP server and the control plane — and runs the **real** reconciler crate
//! inside it, on simulated sockets and simulated time.
//!
//! The data path of a run, scenario to verdict, one module each:
//!
//! ```text
//! scenario file (package racksim)   rack (sleds, switches, zones)   era
//!        \                                  |                       /
//!         RunConfig ── plan::Plan::resolve(seed): timed steps ──┐
//!                                                               │ run (the driver)
//!    hosts' software on turmoil ◀──▶ world (shared state) ◀─────┘ applies each step
//!    (hosts, services, dataplane,         │
//!     net, logging)                       ├──▶ trace (one line per event)
//!                                         ▼
//!                     check (invariants, convergence gaps), after every step
//!                                         │
//!                                         ▼
//!                           run::Verdict + timing, in a RunOutcome
//! ```
//!
//! * [`rack`] — the rack's shape and addressing; [`rack::RackSpec::madrid`],
//!   [`rack::RackSpec::standard`], [`rack::RackBuilder`].
//! * [`era`] — the era of upstream's code a run stands for, and which
//!   control-plane tasks that era ran ([`Era`]).
//! * [`strategy`] — the service-NAT strategies behind one interface
//!   ([`NatStrategy`]): what each starts on a sled, and its era.
//! * [`plan`] — faults and instance actions as timed steps,
//!   jitter windows drawn from the seed; [`Plan::at`] / [`Plan::between`].
//! * [`mod@run`] — the driver: [`RunConfig`] in, the plan's steps applied
//!   to the simulation at their times, the checks after every step, a
//!   [`Verdict`] out.
//! * [`world`] — state shared by the hosts, the driver and the checks: the
//!   rack's service zones and networking config, each owner's state, and
//!   the control plane's database (it outlives Nexus).
//! * [`hosts`] — the software of each simulated host: switch zones, sleds
//!   (sled-agent, zones, OPTE, the per-sled or per-scrimlet reconcilers),
//!   Nexus (instance API, background tasks), the upstream NTP server.
//! * [`services`] — the fake services on turmoil sockets: the state
//!   machines are `racksim-fakes`'s (dpd, MGS, sled-agent, internal DNS);
//!   this module serves them and records their changes in the trace.
//! * [`dataplane`] — the packets of the simulated data path (uplink, NAT,
//!   Geneve, OPTE), the simulation's own.
//! * [`net`] — the reconciler's I/O seams on turmoil (connector, resolver).
//! * [`logging`] — the reconciler's `tracing` events as trace lines.
//! * [`trace`], [`check`] — recording; safety invariants checked after
//!   every step, and convergence.
//! * [`timing`] — when the rack first converged and how long each fault
//!   took to repair.
//! * [`testbed`] — failures of the testbed itself, which end a run as a
//!   testbed error.
//!
//! ## Determinism
//!
//! A run is a function of `(rack, plan, strategy, seed, code)`. turmoil is
//! seeded and its epoch fixed; every other random choice (plan jitter,
//! backoff jitter) comes from RNGs derived from the seed; the one tokio
//! runtime every host of a run shares (event-driven time, see
//! `docs/decisions/0001-time-model.md`) is seeded, and shuts down on a
//! panicking task, only because the workspace builds with
//! `--cfg tokio_unstable` — so this crate refuses to build without it; all
//! maps that reach the trace are ordered. turmoil's random message loss is
//! off: faults are explicit plan steps.
//!
//! ## The network
//!
//! TCP behaves as Linux's (`turmoil::Builder::linux_tcp`, a racksim patch:
//! `vendor/turmoil/PATCH.md`): the handshake crosses the network both ways,
//! a segment lost to a cut or a down host is retransmitted on the RTO
//! backoff, a crash is silent, keepalive finds a peer gone. What that
//! changes and what it simplifies: `docs/fidelity.md`.

// Without `tokio_unstable`, turmoil's runtime is not seeded (`select!`
// picks branches differently run to run: no replay by seed) and a
// panicking host task vanishes instead of failing the run (a testbed error
// would pass unseen). `.cargo/config.toml` sets the flag, but a RUSTFLAGS
// in the environment replaces that setting rather than adding to it.
#[cfg(not(tokio_unstable))]
compile_error!(
    "racksim-sim must be built with `--cfg tokio_unstable`: without it a run does not replay \
     from its seed and a panicking host task is lost. .cargo/config.toml sets it, but RUSTFLAGS \
     in the environment replaces that setting: add the flag to yours, e.g. \
     RUSTFLAGS=\"--cfg tokio_unstable -D warnings\" (see docs/determinism.md)."
);

pub mod check;
pub mod dataplane;
/// The era of upstream a run stands for: `racksim-nexus` owns it, since Nexus
/// is where most of it is decided; the hosts here read the rest.
pub use racksim_nexus::era;
pub mod hosts;
pub mod logging;
pub mod net;
pub mod plan;
pub mod rack;
pub mod run;
pub mod services;
pub mod strategy;
mod task;
pub mod testbed;
pub mod timing;
pub mod trace;
pub mod world;

pub use era::{Era, EraChoices, InstanceEra, RunReply, ServiceNatEra};
pub use plan::{Action, At, Plan, Step};
pub use rack::RackSpec;
pub use run::{run, Engine, RunConfig, RunOutcome, Verdict, EPHEMERAL_PORTS};
pub use strategy::{NatStrategy, ServiceNat, SledContext, SledStrategy};

/// The service-NAT strategy's old name. "Strategy" now names what a cell
/// runs under, a service-NAT strategy or an instance start
/// (`racksim_scenario::file::Strategy`); code written against the strategy
/// API under the old name still builds, with a warning.
#[deprecated(note = "renamed `ServiceNat`: a strategy is now what a cell runs under")]
pub type Strategy = ServiceNat;
pub use world::InstanceSpec;
