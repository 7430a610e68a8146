//! What is fixed for one run: the driver's [`RunParams`] as every host
//! reads them, and the instances the scenario declares.
//!
//! `run::run` turns a [`RunConfig`](crate::RunConfig) into these once, at
//! the start; nothing in the world changes them afterwards.

use std::sync::Arc;

use racksim_reconciler::discovery::SwitchSlot;

use racksim_nexus::instances::StartImpl;

use crate::{era::Era, rack::RackSpec, strategy::ServiceNat};

/// Everything fixed for one run.
#[derive(Clone, Debug)]
pub struct RunParams {
    pub rack: Arc<RackSpec>,
    pub strategy: ServiceNat,
    /// How the control plane starts instances.
    pub start: StartImpl,
    /// Which control-plane tasks run (the hosts read this, never the
    /// strategy, to decide).
    pub era: Era,
    /// The instances the scenario declares (their records exist from the start).
    pub instances: Vec<InstanceSpec>,
    pub seed: u64,
    /// The switch through which the outside world's NTP replies return.
    pub ntp_return_switch: SwitchSlot,
    /// A deliberate failure of the testbed (tests only).
    pub sabotage: Option<crate::testbed::Sabotage>,
    /// The external-IP pool instances take their addresses from at create;
    /// `None` (the default): each declared instance has `203.0.113.(10+id)`
    /// from the start.
    pub ip_pool: Option<racksim_nexus::IpPool>,
    /// How long each fake takes to serve a request
    /// ([`crate::services::times`]).
    pub service_times: crate::services::ServiceTimes,
}

/// An instance a scenario declares; addresses follow from its index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceSpec {
    pub name: String,
}
