//! What Nexus does about VMMs that died under it: the instance watcher, the
//! instance-update saga it leads to, and instance reincarnation.
//!
//! A sled that reboots (or a rack that is power-cycled) loses its VMMs, but
//! nothing tells the control plane: the instance record still says Running.
//! Upstream (omicron b848b6df) closes that loop with three pieces, modelled
//! here in the same order:
//!
//! 1. **The instance watcher** (`nexus/src/app/background/tasks/
//!    instance_watcher.rs`, every [`INSTANCE_WATCHER_PERIOD`]) asks the
//!    sled-agent of every active VMM for its state. A 404 with error code
//!    `NO_SUCH_INSTANCE` means the VMM is gone: it is marked Failed. A
//!    sled-agent that cannot be reached is not evidence either way, so the
//!    watcher asks MGS whether the sled is powered on: a sled not in A0 has
//!    no running VMMs (Failed); a powered-on sled is inconclusive (the VMM
//!    stays as it is, and the next activation asks again).
//! 2. **The instance-update saga** (`nexus/src/app/sagas/instance_update/`)
//!    moves the instance of a failed VMM to Failed, deletes its NAT
//!    configuration (`siu_update_network_config`: here the instance's rows
//!    of the versioned NAT table, and a trigger of every dpd) and activates
//!    the V2P task, which drops the instance's mappings.
//! 3. **Instance reincarnation** (`nexus/src/app/background/tasks/
//!    instance_reincarnation.rs`, every [`REINCARNATION_PERIOD`]) starts
//!    Failed instances again, under the default auto-restart policy
//!    [`AutoRestartPolicy::BestEffort`], at most once per
//!    [`REINCARNATION_COOLDOWN`] (`InstanceAutoRestart::DEFAULT_POLICY` and
//!    its cooldown).
//!
//! ## Simplified
//!
//! * The model has no VMM records: an instance record names its active VMM
//!   (`sled`, `vmm`), and a **Running** or **Stopping** instance's VMM is
//!   watched. A VMM still starting belongs to its start saga, whose own
//!   failure handling applies (upstream watches VMMs from the moment
//!   sled-agent has them; a start saga that loses its VMM fails on its own
//!   nodes here). A Stopping instance whose VMM is found gone goes to
//!   Failed, as upstream's update saga moves an instance whose active VMM
//!   failed to Failed whatever was asked of it
//!   (`nexus/src/app/sagas/instance_update/mod.rs`), and reincarnation
//!   then restarts it under its policy. Simplified: upstream's sled-agent
//!   also reports a VMM it destroyed to Nexus (retrying until heard), which
//!   ends an interrupted stop at Stopped; the model has no such reports, so
//!   a stop interrupted after the sled destroyed the VMM ends as a stop
//!   whose report was lost does upstream (the sled rebooted with it).
//! * The update saga is one conditional update plus the network clean-up,
//!   not a steno saga with its own lock: the conditional update on the
//!   generation the watcher read is what keeps it from undoing a concurrent
//!   stop or start, as upstream's updater lock does. The clean-up steps are
//!   idempotent and repeated by the background tasks (the dpd pull, the V2P
//!   task), which derive desired state from the records.
//! * Placement on reincarnation: upstream's start reserves resources on any
//!   in-service sled with room. Here each instance has a fixed first choice
//!   (its id modulo the sleds, by id), and each automatic restart moves it
//!   on by one sled, a deterministic stand-in that does not return to a
//!   sled that stays down.
//! * The cooldown's clock is the caller's (`now`, a duration since an epoch
//!   the caller keeps for as long as the database lives); the time of the
//!   last auto-restart is durable in the record, as upstream's
//!   `time_last_auto_restarted`.

#[cfg(test)]
mod tests;

use std::{net::SocketAddr, time::Duration};

use serde::{Deserialize, Serialize};

use super::store::{InstanceStore, StoreError};
use super::{
    ops::{InstanceOps, OpError},
    InstanceRecord, InstanceState, RuntimeUpdate, SledAgentClient, SledRef,
};
use racksim_reconciler::{
    http::{ClientError, Connector, HttpClient},
    mgs::{MgsClient, PowerState},
};

/// Period of Nexus's instance watcher (omicron's
/// `instance_watcher.period_secs` default).
pub const INSTANCE_WATCHER_PERIOD: Duration = Duration::from_secs(30);
/// Period of Nexus's instance updater (omicron's
/// `instance_updater.period_secs` default).
pub const INSTANCE_UPDATER_PERIOD: Duration = Duration::from_secs(30);
/// Period of Nexus's instance reincarnation task.
pub const REINCARNATION_PERIOD: Duration = Duration::from_secs(60);
/// How long after an automatic restart an instance may be restarted again
/// (the default policy's cooldown).
pub const REINCARNATION_COOLDOWN: Duration = Duration::from_secs(5 * 60);

/// Whether the control plane restarts an instance that has failed
/// (omicron's `InstanceAutoRestartPolicy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AutoRestartPolicy {
    /// Never restarted automatically: it stays Failed until an operator
    /// starts it.
    Never,
    /// Restarted when it fails, at most once per cooldown (the default).
    #[default]
    BestEffort,
}

/// The durable auto-restart state of an instance record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutoRestart {
    pub policy: AutoRestartPolicy,
    /// When reincarnation last started it (the caller's clock).
    pub last: Option<Duration>,
    /// How many times reincarnation has started it.
    pub count: u32,
}

impl AutoRestart {
    /// The rule of [`InstanceStore::note_auto_restart`], for a store to
    /// apply: reincarnation restarts the instance at `at`.
    ///
    /// [`InstanceStore::note_auto_restart`]: super::InstanceStore::note_auto_restart
    pub fn note_restart(&mut self, at: Duration) {
        self.last = Some(at);
        self.count += 1;
    }
}

/// What the watcher found for one Running instance's VMM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VmmCheck {
    /// The sled runs the VMM the record names.
    Healthy,
    /// sled-agent has no such VMM (404 `NO_SUCH_INSTANCE`), or runs another
    /// one for the instance: the record's VMM is gone.
    Gone,
    /// sled-agent is unreachable and MGS says the sled is not powered on.
    SledPoweredOff(PowerState),
    /// sled-agent is unreachable and MGS says the sled is on, or cannot be
    /// asked: nothing is known, nothing is done.
    Inconclusive(String),
    /// The sled is no longer in service (expunged; here, a replaced
    /// scrimlet's retired sled): its VMMs are failed without asking it, as
    /// upstream's watcher does (`Failure::SledExpunged`).
    SledExpunged,
}

/// What the watcher found, as a trace says it: `gone (no such VMM)`.
impl std::fmt::Display for VmmCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VmmCheck::Healthy => f.write_str("running"),
            VmmCheck::Gone => f.write_str("gone (no such VMM)"),
            VmmCheck::SledPoweredOff(p) => write!(f, "gone (sled powered off, {p:?})"),
            VmmCheck::Inconclusive(why) => write!(f, "unknown: {why}"),
            VmmCheck::SledExpunged => f.write_str("gone (sled expunged)"),
        }
    }
}

impl VmmCheck {
    /// Whether the VMM is to be marked Failed.
    pub fn failed(&self) -> bool {
        matches!(
            self,
            VmmCheck::Gone | VmmCheck::SledPoweredOff(_) | VmmCheck::SledExpunged
        )
    }
}

/// One instance the watcher looked at, and what came of it.
#[derive(Debug)]
pub struct Watched {
    pub instance: u32,
    pub sled: u32,
    pub vmm: u64,
    pub check: VmmCheck,
    /// For a failed VMM: the update saga's outcome (the record it left).
    pub update: Option<Result<InstanceRecord, OpError>>,
}

/// One activation of the instance watcher, and the update saga for each VMM
/// it found failed. `mgs` are the management gateways to ask about a sled
/// whose sled-agent does not answer (asked in order until one answers).
/// Instances are visited by id, one request at a time.
pub async fn instance_watcher<C: Connector, S: InstanceStore>(
    ops: &InstanceOps<C, S>,
    connector: &C,
    mgs: &[SocketAddr],
) -> Result<Vec<Watched>, StoreError> {
    let store = ops.store();
    let sleds = store.sleds().await?;
    let mut out = Vec::new();
    // The sled-agent client of the sled last asked, kept while the next
    // VMM is on the same sled, as upstream's watcher keeps `curr_client`
    // (omicron b848b6df `instance_watcher.rs`: "a `reqwest` client is a
    // reference-counted handle to a connection pool"), so those checks
    // share its connection.
    let mut agent: Option<(u32, SledAgentClient<C>)> = None;
    for record in store.instances().await? {
        // Running and Stopping: the records whose VMM upstream's watcher
        // polls (its VMM rows not `Creating`, `SagaUnwound` or
        // `Destroyed`). A stop whose Nexus died after the sled destroyed
        // the VMM — and whose sled-agent's report was lost with it — is
        // found this way, as upstream finds it.
        let (InstanceState::Running | InstanceState::Stopping, Some(sled), Some(vmm)) =
            (record.state, record.sled, record.vmm)
        else {
            continue;
        };
        let check = match sleds.iter().find(|s| s.id == sled) {
            Some(sled_ref) => {
                let client = match &agent {
                    Some((id, client)) if *id == sled_ref.id => client.clone(),
                    _ => {
                        let client = super::ops::sled_agent_client(connector, sled_ref);
                        agent = Some((sled_ref.id, client.clone()));
                        client
                    }
                };
                check_vmm(&client, connector, sled_ref, record.id, vmm, mgs).await
            }
            // Not among the in-service sleds: expunged.
            None => VmmCheck::SledExpunged,
        };
        let update = if check.failed() {
            Some(ops.vmm_failed(&record).await)
        } else {
            None
        };
        out.push(Watched {
            instance: record.id,
            sled,
            vmm,
            check,
            update,
        });
    }
    Ok(out)
}

async fn check_vmm<C: Connector>(
    agent: &SledAgentClient<C>,
    connector: &C,
    sled: &SledRef,
    instance: u32,
    vmm: u64,
    mgs: &[SocketAddr],
) -> VmmCheck {
    // By the VMM's propolis id, as upstream's `check_instance` asks
    // (`vmm_get_state`): another VMM of the instance on the sled is not
    // this one.
    match agent.vmm_get_state(vmm).await {
        Ok(Some(info)) if info.instance_id == instance => VmmCheck::Healthy,
        Ok(_) => VmmCheck::Gone,
        Err(e) => power_check(connector, sled, mgs, &e).await,
    }
}

/// A sled-agent that did not answer: ask MGS about the sled's power.
async fn power_check<C: Connector>(
    connector: &C,
    sled: &SledRef,
    mgs: &[SocketAddr],
    agent_error: &ClientError,
) -> VmmCheck {
    let Ok(slot) = u16::try_from(sled.id) else {
        return VmmCheck::Inconclusive(format!("sled-agent: {agent_error}"));
    };
    let mut last = None;
    for &addr in mgs {
        let client = MgsClient::new(HttpClient::new(connector.clone(), addr));
        match client.sled_power_state(slot).await {
            Ok(PowerState::A0) => {
                return VmmCheck::Inconclusive(format!(
                    "sled-agent: {agent_error}; MGS: sled powered on (A0)"
                ))
            }
            Ok(off) => return VmmCheck::SledPoweredOff(off),
            Err(e) => last = Some(e),
        }
    }
    VmmCheck::Inconclusive(match last {
        Some(e) => format!("sled-agent: {agent_error}; MGS: {e}"),
        None => format!("sled-agent: {agent_error}; no MGS to ask"),
    })
}

/// An instance reincarnation considered, and what came of it.
#[derive(Debug)]
pub struct Reincarnated {
    pub instance: u32,
    pub sled: u32,
    /// The start's outcome; `None` if the instance was left alone (policy
    /// `Never`, or within its cooldown: `Some(remaining)` in `cooling`).
    pub start: Option<Result<InstanceRecord, OpError>>,
    pub cooling: Option<Duration>,
}

/// One activation of instance reincarnation at `now` (the caller's clock):
/// every Failed instance whose policy allows it and whose cooldown has
/// passed is started again, by id, one at a time.
pub async fn reincarnate<C: Connector, S: InstanceStore>(
    ops: &InstanceOps<C, S>,
    now: Duration,
) -> Result<Vec<Reincarnated>, StoreError> {
    let store = ops.store();
    let mut sleds = store.sleds().await?;
    sleds.sort_by_key(|s| s.id);
    let mut out = Vec::new();
    for record in store.instances().await? {
        if record.state != InstanceState::Failed
            || record.auto_restart.policy == AutoRestartPolicy::Never
            || sleds.is_empty()
        {
            continue;
        }
        let sled = placement(&record, &sleds);
        if let Some(last) = record.auto_restart.last {
            let since = now.saturating_sub(last);
            if since < REINCARNATION_COOLDOWN {
                out.push(Reincarnated {
                    instance: record.id,
                    sled,
                    start: None,
                    cooling: Some(REINCARNATION_COOLDOWN - since),
                });
                continue;
            }
        }
        // Durable before the start, so that a start that fails (or a
        // Nexus that dies during it) still counts against the cooldown.
        // Upstream writes it in the start saga's move to Starting.
        let start = match store.note_auto_restart(record.id, now).await {
            Ok(()) => ops.start(record.id, sled).await,
            Err(e) => Err(e.into()),
        };
        out.push(Reincarnated {
            instance: record.id,
            sled,
            start: Some(start),
            cooling: None,
        });
    }
    Ok(out)
}

/// One instance the updater finished a stop for, and how it went.
#[derive(Debug)]
pub struct Updated {
    pub instance: u32,
    pub outcome: Result<InstanceRecord, OpError>,
}

/// Nexus's instance updater (omicron
/// `nexus/src/app/background/tasks/instance_updater.rs`): finds instances
/// whose active VMM is gone but whose update never ran, and runs it. In the
/// model that is a Stopping record whose VMM the sled has destroyed (the
/// stop forgot it) — a stop whose Nexus died before it recorded Stopped.
/// The update finishes the stop: NAT rows cleared and the dpds told, the
/// record Stopped (conditional on the generation read, so a stop that gets
/// there first wins), the V2P task activated.
pub async fn instance_updater<C: Connector, S: InstanceStore>(
    ops: &InstanceOps<C, S>,
) -> Result<Vec<Updated>, StoreError> {
    let mut out = Vec::new();
    for record in ops.store().instances().await? {
        if record.state == InstanceState::Stopping && record.vmm.is_none() {
            out.push(Updated {
                instance: record.id,
                outcome: ops.vmm_destroyed(&record).await,
            });
        }
    }
    Ok(out)
}

/// Where reincarnation starts `record`: a fixed choice per instance, moved
/// on by one sled (by id) with each automatic restart, so that a sled that
/// stays down is not chosen for ever (see the module's "Simplified").
fn placement(record: &InstanceRecord, sleds: &[SledRef]) -> u32 {
    let i = (record.id as usize + record.auto_restart.count as usize) % sleds.len();
    sleds[i].id
}

impl<C: Connector, S: InstanceStore> InstanceOps<C, S> {
    /// The instance-update saga for a stop's destroyed VMM (see
    /// [`instance_updater`]).
    pub async fn vmm_destroyed(&self, seen: &InstanceRecord) -> Result<InstanceRecord, OpError> {
        self.store().nat_clear_instance(seen.id).await?;
        // Before omicron #10389 a dpd that could not be told failed the
        // saga here, and the instance stayed Stopping until it could be.
        self.notify_removal(seen.id).await?;
        let stopped = self
            .store()
            .update_if(
                seen.id,
                seen.generation,
                RuntimeUpdate {
                    state: InstanceState::Stopped,
                    sled: None,
                    vmm: None,
                },
            )
            .await?;
        self.activate_v2p_task();
        Ok(stopped)
    }

    /// The instance-update saga for a VMM found failed: the instance moves
    /// to Failed (conditional on the generation the watcher read, so a stop
    /// or start that got there first wins and this does nothing), its NAT
    /// rows are deleted and every dpd told, and the V2P task is activated.
    pub async fn vmm_failed(&self, seen: &InstanceRecord) -> Result<InstanceRecord, OpError> {
        let failed = self
            .store()
            .update_if(
                seen.id,
                seen.generation,
                RuntimeUpdate {
                    state: InstanceState::Failed,
                    sled: None,
                    vmm: None,
                },
            )
            .await?;
        self.store().nat_clear_instance(seen.id).await?;
        // Logged in every era, also under `remove-notify = fatal`.
        // Simplified: before omicron #10389 upstream's update saga for a
        // failed VMM failed at this notify too; the model writes Failed
        // first and does not play that saga's unwind.
        self.trigger_dpds(seen.id).await?;
        self.activate_v2p_task();
        Ok(failed)
    }
}
