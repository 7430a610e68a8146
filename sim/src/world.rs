//! The simulated world: the state shared by the hosts' software, the driver
//! and the checks, and the trace they all write.
//!
//! In a run's data path the world sits in the middle: the driver
//! (`run`) applies the plan's steps to it, the hosts' software and the fake
//! services read and change it, every change is recorded as a trace line,
//! and after every step the checks (`check`) read it to judge the run.
//!
//! The rack's shape is fixed at the start ([`RunParams::rack`]), but a run
//! can change it: a replaced scrimlet brings a new sled and moves its switch
//! zone to a new address, and a config change adds, moves or removes service
//! zones ([`ZoneSet`]). What can change lives in [`State`] and in the
//! world's watch channels. One module per concept:
//!
//! * `params` — what is fixed for the run ([`RunParams`], [`InstanceSpec`]);
//! * `zones` — the rack's service zones and the config they imply
//!   ([`ZoneSet`]), plain data the scenario checker and live mode use too;
//! * `state` — the mutable [`State`], grouped by owner (control plane,
//!   switches, sleds, internal DNS, the driver's partitions);
//! * `handle` — the [`World`] handle itself: building the world, the lock,
//!   recording trace lines, boots and seeds, names;
//! * `control_plane` — what the handle offers Nexus: the operator's
//!   command, the instance API's queue, inventory, the NAT statement window;
//! * `config` — the live zone set and the bootstore, and a config change
//!   applied to both.

mod config;
mod control_plane;
mod handle;
mod params;
mod state;
mod zones;

pub use handle::{HostKind, World};
pub use params::{InstanceSpec, RunParams};
pub use state::{
    ControlPlaneState, DnsState, NetState, NexusCommand, NtpClock, NtpZone, ServiceFault,
    SledsState, State, SwitchesState,
};
pub use zones::{service_kind, zone_nat_entry, LiveZone, ZoneId, ZoneSet};
