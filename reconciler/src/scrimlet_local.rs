//! The scrimlet-reconcilers PR's per-scrimlet reconcilers (the design that shipped).
//!
//! Each scrimlet runs a reconciler that talks **only to its own switch
//! zone** and applies the **rack-wide** service NAT config, which the
//! bootstore carries to every sled with a generation number. Compared with
//! [`crate::sled_task`]:
//!
//! * there is no discovery at activation time: a scrimlet's switch zone is
//!   where it always is (`::2` of its own sled subnet, or the addresses a test
//!   injects), so a missing DNS record or a replaced *other* scrimlet cannot
//!   confuse it. Each switch is covered because each scrimlet covers its own;
//! * the desired state is every service zone's entry, not this sled's, so the
//!   scope is [`Scope::Vni`]`(`[`SERVICES_VNI`]`)`: every services entry on
//!   the switch is ours, and one that is not in the config is removed. An
//!   empty `service_nat` list is therefore meaningful (remove them all), and
//!   only the *absence* of a config means "nothing to do yet"
//!   ([`ScrimletNatStatus::NoNatEntriesConfig`]);
//! * the task is inert while the sled is not a scrimlet (sidecar powered off
//!   or being updated): there is no switch zone to talk to. When the sidecar
//!   comes back its dpd starts with an empty table, and the activation that
//!   ends the inert state ([`ActivationReason::ScrimletStatusChanged`])
//!   restores it at once rather than a period later.
//!
//! ## Why the switch slot is learned before the tasks start
//!
//! The handle first asks its own MGS which switch it manages
//! (`GET /local/switch-id`) and only then starts the reconciler. The slot is
//! a property of the cabling — a scrimlet is attached to one switch for its
//! whole life — so it is learned once, not on every activation. It is needed
//! up front because the rack-wide config is per *rack*, while statuses (and,
//! for reconcilers of per-switch settings such as uplinks, the part of the
//! config to apply) are per *switch*: a status that cannot say which switch
//! it describes is useless to an operator comparing the two. Asking MGS
//! rather than trusting an address is the same rule as in [`crate::mgs`]:
//! only MGS knows which sidecar is behind it.
//!
//! Only a scrimlet has a switch zone to ask: while the sled is not one
//! (sidecar off or being updated) the handle waits in
//! [`HandleStatus::NotAScrimlet`] and asks nothing, as omicron's handle does.
//! Once it is one, MGS may still be unreachable — the switch zone is still
//! starting — so the handle retries every [`MGS_RETRY_INTERVAL`] for as long
//! as it takes, reporting every attempt in
//! [`HandleStatus::DeterminingSwitchSlot`], and checks the scrimlet status
//! again before each attempt. The NAT task's status
//! stays [`TaskStatus::NotYetRun`] meanwhile: nothing has been reconciled,
//! and saying so is more honest than an inert state that implies a run.
//!
//! ## Why the caller spawns the future
//!
//! [`scrimlet_reconcilers`] returns the future instead of spawning it: in
//! production the sled agent spawns it with `tokio::spawn`, a deterministic
//! simulation with its own `spawn_local`. The crate never picks a runtime,
//! and takes time only from `tokio::time`, so under a paused or simulated
//! clock everything here is deterministic.

use std::{
    fmt,
    future::Future,
    net::{Ipv4Addr, Ipv6Addr, SocketAddr},
    time::Duration,
};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::{
    discovery::SwitchSlot,
    dpd::DpdClient,
    http::{Connector, HttpClient},
    mgs::MgsClient,
    nat::{reconcile_switch, NatEntry, NatReconcileOutcome, Scope},
    task::{
        run_reconciler_task, wait_until_scrimlet, ActivationReason, ActivationStatus, InertReason,
        Reconciler, ScrimletStatus, StatusLog, TaskStatus,
    },
    DPD_PORT, MGS_PORT, SERVICES_VNI,
};

/// How long the handle waits between attempts to learn its switch slot from its own MGS.
/// The scrimlet reconcilers' clients (MGS, dpd) connect within 15 s and
/// have no request timeout: upstream builds them with only
/// `connect_timeout(15 s)` and `pool_idle_timeout(10 s)` (omicron b848b6df
/// `sled-agent/scrimlet-reconcilers/src/handle.rs`,
/// `ScrimletReconcilersMode::reqwest_client`; its comment speaks of a read
/// timeout, but none is set). A dpd that accepts a request and does not
/// answer holds the reconciler until it does, or until TCP keepalive
/// (reqwest's 15 s, 15 s, 3 probes) finds it gone.
pub const RECONCILER_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// How long the scrimlet reconcilers' clients keep an idle connection:
/// upstream's `pool_idle_timeout(10 s)` (the same function), "long enough
/// to reuse a connection for all the requests made during one
/// reconciliation pass", and short of dropshot's 30 s, after which the
/// server closes it (hyper#2136). So one pass's requests share a
/// connection, and the next pass, 30 s on, makes a new one.
pub const RECONCILER_POOL_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub const MGS_RETRY_INTERVAL: Duration = Duration::from_secs(5);

/// The kinds of service zone with external connectivity: the zones whose
/// NAT entries the bootstore carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceZoneKind {
    BoundaryNtp,
    Nexus,
    ExternalDns,
}

impl ServiceZoneKind {
    pub const ALL: [ServiceZoneKind; 3] = [
        ServiceZoneKind::BoundaryNtp,
        ServiceZoneKind::Nexus,
        ServiceZoneKind::ExternalDns,
    ];
}

impl fmt::Display for ServiceZoneKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServiceZoneKind::BoundaryNtp => "boundary-ntp",
            ServiceZoneKind::Nexus => "nexus",
            ServiceZoneKind::ExternalDns => "external-dns",
        })
    }
}

/// One service zone's NAT entry as the bootstore carries it: which zone
/// wants it, of what kind, and the entry itself (with [`SERVICES_VNI`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ServiceZoneNat {
    /// The zone's identity (omicron's zone UUID; a name such as `nexus.1`
    /// here). It stays the same for the zone's whole life.
    pub zone: String,
    pub kind: ServiceZoneKind,
    pub entry: NatEntry,
}

/// The rack-wide networking config the bootstore carries to every sled.
///
/// The generation only ever grows; it is reported in the status so that an
/// operator can tell which version each switch was last reconciled against.
///
/// Simplification: omicron's `SystemNetworkingConfig` also carries the rack
/// network config (uplinks, BGP, ...); only the service zones' NAT entries
/// matter here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemNetworkingConfig {
    pub generation: u64,
    /// Every service zone's NAT entry, rack-wide.
    pub service_nat: Vec<ServiceZoneNat>,
}

impl SystemNetworkingConfig {
    /// The NAT entries alone, sorted.
    pub fn nat_entries(&self) -> Vec<NatEntry> {
        let mut v: Vec<NatEntry> = self.service_nat.iter().map(|z| z.entry).collect();
        v.sort();
        v
    }

    /// What omicron refuses to hold as the rack's service NAT config
    /// (`ServiceZoneNatEntries`, `sled-agent/types/versions/src/
    /// bootstore_service_nat/system_networking.rs`): two entries of one zone
    /// (its map is keyed by zone id), overlapping entries (same external IP,
    /// intersecting port ranges: dpd cannot map one address and port to two
    /// zones), and a config without at least one boundary NTP, one Nexus
    /// and one external DNS entry (a rack without them cannot time-sync at
    /// cold boot, or cannot be reached). Checked in that order; the first
    /// problem found is reported.
    ///
    /// Upstream enforces it when the value is built or deserialised, so a
    /// bad config never reaches the bootstore, and the reconciler checks
    /// again ("in case that changes or is buggy"). This type is plain data,
    /// so the writer and the reconciler both call this.
    pub fn validate(&self) -> Result<(), InvalidSystemNetworkingConfig> {
        for (i, a) in self.service_nat.iter().enumerate() {
            for b in &self.service_nat[..i] {
                if a.zone == b.zone {
                    return Err(InvalidSystemNetworkingConfig::DuplicateZone {
                        zone: a.zone.clone(),
                    });
                }
                if a.entry.overlaps(&b.entry) {
                    return Err(InvalidSystemNetworkingConfig::OverlappingEntries {
                        external_ip: a.entry.external_ip,
                        zone: b.zone.clone(),
                        ports: (b.entry.first_port, b.entry.last_port),
                        other_zone: a.zone.clone(),
                        other_ports: (a.entry.first_port, a.entry.last_port),
                    });
                }
            }
        }
        let missing: Vec<ServiceZoneKind> = ServiceZoneKind::ALL
            .into_iter()
            .filter(|k| !self.service_nat.iter().any(|z| z.kind == *k))
            .collect();
        if !missing.is_empty() {
            return Err(InvalidSystemNetworkingConfig::MissingZoneKinds { missing });
        }
        Ok(())
    }
}

/// Why a [`SystemNetworkingConfig`] is refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum InvalidSystemNetworkingConfig {
    #[error("zone {zone} has more than one NAT entry")]
    DuplicateZone { zone: String },
    #[error(
        "overlapping NAT entries: zone {zone} ({external_ip} ports {}-{}) and zone {other_zone} \
         ({external_ip} ports {}-{})",
        ports.0, ports.1, other_ports.0, other_ports.1
    )]
    OverlappingEntries {
        external_ip: Ipv4Addr,
        zone: String,
        ports: (u16, u16),
        other_zone: String,
        other_ports: (u16, u16),
    },
    #[error("no NAT entry for any zone of kind {}", list(missing))]
    MissingZoneKinds { missing: Vec<ServiceZoneKind> },
}

fn list(kinds: &[ServiceZoneKind]) -> String {
    kinds
        .iter()
        .map(|k| k.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where this scrimlet's own switch zone services are.
///
/// An enum rather than an address because of the scrimlet-reconcilers PR's review: production
/// knows only the switch zone's underlay IP and the services' fixed ports,
/// while integration tests run the services wherever the OS puts them and
/// must inject those addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwitchZoneServices {
    /// Production: the switch zone's underlay IP; dpd and MGS on their fixed ports (crate::DPD_PORT, crate::MGS_PORT).
    UnderlayIp(Ipv6Addr),
    /// Tests: explicit addresses.
    Explicit { dpd: SocketAddr, mgs: SocketAddr },
}

impl SwitchZoneServices {
    /// Address of this switch zone's dpd.
    pub fn dpd(&self) -> SocketAddr {
        match *self {
            SwitchZoneServices::UnderlayIp(ip) => SocketAddr::new(ip.into(), DPD_PORT),
            SwitchZoneServices::Explicit { dpd, .. } => dpd,
        }
    }

    /// Address of this switch zone's management gateway.
    pub fn mgs(&self) -> SocketAddr {
        match *self {
            SwitchZoneServices::UnderlayIp(ip) => SocketAddr::new(ip.into(), MGS_PORT),
            SwitchZoneServices::Explicit { mgs, .. } => mgs,
        }
    }
}

/// Status of the handle itself (before the tasks run).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum HandleStatus {
    /// The sled is not a scrimlet (no sidecar, or it is powered off or being
    /// updated): there is no switch zone whose MGS could answer, so nothing
    /// is asked until it becomes one.
    NotAScrimlet,
    /// Asking MGS which switch this scrimlet is attached to. `attempts`
    /// counts the failed attempts so far; `last_error` says why the last one
    /// failed (MGS unreachable, or an answer that names no switch).
    DeterminingSwitchSlot {
        attempts: u64,
        last_error: Option<String>,
    },
    /// The slot is known and the reconciler tasks are running.
    Running { switch: SwitchSlot },
}

/// Outcome of one activation of the NAT reconciler.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum ScrimletNatStatus {
    /// The bootstore has not delivered a config yet.
    NoNatEntriesConfig,
    /// The config is one omicron would refuse to hold
    /// ([`SystemNetworkingConfig::validate`]): nothing was changed, not
    /// even a stale entry removed. Acting on it could remove every entry
    /// of a kind the config forgot, cutting the rack off.
    InvalidSystemNetworkingConfig {
        switch: SwitchSlot,
        generation: u64,
        error: InvalidSystemNetworkingConfig,
    },
    Reconciled {
        switch: SwitchSlot,
        generation: u64,
        outcome: NatReconcileOutcome,
    },
}

/// Reconciles this scrimlet's own switch zone's service NAT entries (Scope::Vni(SERVICES_VNI)) against the rack-wide config.
///
/// Holds one dpd client for the whole life of the task: the address of a
/// scrimlet's own switch zone does not change (a replaced scrimlet is a new
/// sled with a new handle).
#[derive(Clone, Debug)]
pub struct ScrimletNatReconciler<C> {
    dpd: DpdClient<C>,
    switch: SwitchSlot,
}

impl<C: Connector> ScrimletNatReconciler<C> {
    pub fn new(dpd: DpdClient<C>, switch: SwitchSlot) -> Self {
        ScrimletNatReconciler { dpd, switch }
    }

    /// The switch this reconciler manages.
    pub fn switch(&self) -> SwitchSlot {
        self.switch
    }
}

/// `switch1 (config generation 1): unchanged 3`.
impl fmt::Display for ScrimletNatStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScrimletNatStatus::NoNatEntriesConfig => {
                f.write_str("no NAT config in the bootstore yet")
            }
            ScrimletNatStatus::InvalidSystemNetworkingConfig {
                switch,
                generation,
                error,
            } => write!(
                f,
                "{switch} (config generation {generation}): bootstore config is INVALID, \
                 nothing changed: {error}"
            ),
            ScrimletNatStatus::Reconciled {
                switch,
                generation,
                outcome,
            } => write!(f, "{switch} (config generation {generation}): {outcome}"),
        }
    }
}

/// What the handle is doing, in a line for logs.
impl fmt::Display for HandleStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandleStatus::NotAScrimlet => {
                f.write_str("not a scrimlet (no sidecar); waiting to become one")
            }
            HandleStatus::DeterminingSwitchSlot {
                last_error: None, ..
            } => f.write_str("asking own MGS which switch this is"),
            HandleStatus::DeterminingSwitchSlot {
                last_error: Some(e),
                ..
            } => write!(
                f,
                "own MGS not answering, retrying every {}s: {e}",
                MGS_RETRY_INTERVAL.as_secs()
            ),
            HandleStatus::Running { switch } => {
                write!(f, "this scrimlet manages {switch}; reconcilers running")
            }
        }
    }
}

/// Failed: the switch's table could not be read or written in full. A
/// refused config is not a failure of the activation: it changed nothing
/// on purpose, and waits for a valid config rather than for a retry.
impl ActivationStatus for ScrimletNatStatus {
    fn failed(&self) -> bool {
        match self {
            ScrimletNatStatus::NoNatEntriesConfig
            | ScrimletNatStatus::InvalidSystemNetworkingConfig { .. } => false,
            ScrimletNatStatus::Reconciled { outcome, .. } => !outcome.is_converged(),
        }
    }
}

impl<C: Connector> Reconciler for ScrimletNatReconciler<C> {
    const NAME: &'static str = "scrimlet-local";
    /// `None` until the bootstore has delivered a config.
    type Config = Option<SystemNetworkingConfig>;
    type Status = ScrimletNatStatus;

    async fn reconcile(
        &mut self,
        config: &Option<SystemNetworkingConfig>,
        _reason: ActivationReason,
    ) -> ScrimletNatStatus {
        // Without a config we cannot tell a stale entry from a wanted one:
        // touch nothing (not even a read) rather than guess.
        let Some(config) = config else {
            return ScrimletNatStatus::NoNatEntriesConfig;
        };
        // An invalid config is refused before dpd is touched. (Upstream
        // reads dpd's entries first and refuses while planning; the read
        // changes nothing, so skipping it is the same outcome.)
        if let Err(error) = config.validate() {
            return ScrimletNatStatus::InvalidSystemNetworkingConfig {
                switch: self.switch,
                generation: config.generation,
                error,
            };
        }
        let outcome =
            reconcile_switch(&self.dpd, &config.nat_entries(), &Scope::Vni(SERVICES_VNI)).await;
        ScrimletNatStatus::Reconciled {
            switch: self.switch,
            generation: config.generation,
            outcome,
        }
    }
}

/// Handle to a scrimlet's reconcilers: status receivers only.
///
/// It holds no senders and no task handle: the inputs belong to the caller
/// (closing them is how the caller stops the tasks), and the future belongs
/// to whatever executor the caller spawned it on.
#[derive(Clone, Debug)]
pub struct ScrimletReconcilers {
    handle_status: watch::Receiver<HandleStatus>,
    nat_status: watch::Receiver<TaskStatus<ScrimletNatStatus>>,
}

impl ScrimletReconcilers {
    pub fn handle_status(&self) -> watch::Receiver<HandleStatus> {
        self.handle_status.clone()
    }

    pub fn nat_status(&self) -> watch::Receiver<TaskStatus<ScrimletNatStatus>> {
        self.nat_status.clone()
    }
}

/// Build the handle and the future that drives it. The caller spawns the future on its executor (tokio::spawn in production,
/// spawn_local in a simulation) — so this crate never picks a runtime. The future: ask own MGS `/local/switch-id`
/// (retry every MGS_RETRY_INTERVAL, updating HandleStatus each attempt), then run run_reconciler_task(ScrimletNatReconciler,
/// config, Some(scrimlet), period, nat status) until its inputs close.
///
/// The retry interval is counted from the end of a failed attempt, so an MGS
/// that accepts connections and never answers (each attempt bounded by the
/// request timeout) is not asked back to back. If an input closes while the
/// slot is still unknown, the future returns and the NAT status becomes
/// `Inert(TaskExitedUnexpectedly)`, exactly as it would once running.
pub fn scrimlet_reconcilers<C: Connector>(
    connector: C,
    services: SwitchZoneServices,
    config: watch::Receiver<Option<SystemNetworkingConfig>>,
    scrimlet: watch::Receiver<ScrimletStatus>,
    period: Duration,
) -> (
    ScrimletReconcilers,
    impl Future<Output = ()> + Send + 'static,
) {
    let (handle_tx, handle_rx) = watch::channel(HandleStatus::DeterminingSwitchSlot {
        attempts: 0,
        last_error: None,
    });
    let (nat_tx, nat_rx) = watch::channel(TaskStatus::NotYetRun);
    let handle = ScrimletReconcilers {
        handle_status: handle_rx,
        nat_status: nat_rx,
    };
    let driver = async move {
        let mut announcer = StatusLog::new(&handle_tx, "scrimlet-local", "scrimlet-local: ");
        // Bound first: the read guard must be gone before `set` writes.
        let initial = handle_tx.borrow().clone();
        announcer.set(initial, false);
        let mgs = MgsClient::new(
            HttpClient::new(connector.clone(), services.mgs())
                .with_timeouts(Some(RECONCILER_CONNECT_TIMEOUT), None)
                .with_pool_idle_timeout(Some(RECONCILER_POOL_IDLE_TIMEOUT)),
        );
        let mut scrimlet = scrimlet;
        let mut config = config;
        let Some(switch) =
            determine_switch_slot(&mgs, &mut announcer, &mut config, &mut scrimlet).await
        else {
            nat_tx.send_replace(TaskStatus::Inert {
                reason: InertReason::TaskExitedUnexpectedly,
                last_completion: None,
            });
            return;
        };
        announcer.set(HandleStatus::Running { switch }, false);
        let dpd = DpdClient::new(
            HttpClient::new(connector, services.dpd())
                .with_timeouts(Some(RECONCILER_CONNECT_TIMEOUT), None)
                .with_pool_idle_timeout(Some(RECONCILER_POOL_IDLE_TIMEOUT)),
        );
        run_reconciler_task(
            ScrimletNatReconciler::new(dpd, switch),
            config,
            Some(scrimlet),
            period,
            nat_tx,
        )
        .await;
    };
    (handle, driver)
}

/// Asks MGS until it names a switch slot, but only while the sled is a
/// scrimlet: as omicron's `ThisSledSwitchSlot::determine_retrying_forever`
/// (`sled-agent/scrimlet-reconcilers/src/switch_zone_slot.rs`), it first
/// waits for the scrimlet status, before every attempt — without a sidecar
/// there is no switch zone to ask, and the attempts would only fill the log.
/// `None` if an input channel closed meanwhile (nobody is left to use the
/// answer).
async fn determine_switch_slot<C: Connector>(
    mgs: &MgsClient<C>,
    status: &mut StatusLog<'_, HandleStatus>,
    config: &mut watch::Receiver<Option<SystemNetworkingConfig>>,
    scrimlet: &mut watch::Receiver<ScrimletStatus>,
) -> Option<SwitchSlot> {
    let mut attempts: u64 = 0;
    loop {
        if *scrimlet.borrow() == ScrimletStatus::NotScrimlet {
            status.set(HandleStatus::NotAScrimlet, false);
            wait_until_scrimlet(scrimlet, config).await.ok()?;
        }
        let error = match mgs.local_switch_id().await {
            Ok(id) => match id.switch_slot() {
                Some(slot) => return Some(slot),
                // A misconfigured zone (its MGS manages a sled or power
                // shelf, or an impossible slot): retrying is still right, an
                // operator can fix it without restarting the sled agent.
                None => format!(
                    "{} answered {id:?} for /local/switch-id, which names no switch slot",
                    mgs.addr()
                ),
            },
            Err(e) => e.to_string(),
        };
        attempts += 1;
        status.set(
            HandleStatus::DeterminingSwitchSlot {
                attempts,
                last_error: Some(error),
            },
            true,
        );
        // `has_changed` errs only once the sender is gone; checked between
        // attempts rather than raced against them, so the future never
        // abandons a request half way.
        if config.has_changed().is_err() || scrimlet.has_changed().is_err() {
            return None;
        }
        tokio::time::sleep(MGS_RETRY_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests;
