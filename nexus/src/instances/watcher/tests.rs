//! The instance watcher, the update saga and reincarnation against the
//! fakes: a rebooted sled's VMM is found gone, an unreachable sled is asked
//! about through MGS, and a Failed instance is started again under its
//! policy and cooldown.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use tokio::sync::Notify;

use super::*;
use crate::instances::{
    test_store::MemStore, ExternalIp, InstanceRecord, InstanceState, MacAddr, Nic, SledRef,
    StartImpl, GUEST_VNI, SLED_AGENT_PORT,
};
use racksim_reconciler::{
    discovery::{StaticResolver, SwitchSlot},
    testing::{zone_ip, FakeConnector, FakeNet, FakeResponse},
    MGS_PORT,
};

const ID: u32 = 7;

fn sled_ip(n: u32) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x100 + n as u16, 0, 0, 0, 1)
}

fn record(state: InstanceState) -> InstanceRecord {
    InstanceRecord {
        id: ID,
        name: "web1".into(),
        state,
        generation: 1,
        sled: None,
        vmm: None,
        external_ips: vec![ExternalIp {
            ip: Ipv4Addr::new(203, 0, 113, 10),
            first_port: 0,
            last_port: 65535,
        }],
        nics: vec![Nic {
            virtual_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)),
            mac: MacAddr::new([0xa8, 0x40, 0x25, 0xf0, 0x00, 7]),
            vni: GUEST_VNI,
        }],
        auto_restart: AutoRestart::default(),
    }
}

fn mgs() -> Vec<SocketAddr> {
    vec![SocketAddr::new(zone_ip(1).into(), MGS_PORT)]
}

struct Rack {
    net: FakeNet,
    store: MemStore,
    ops: InstanceOps<FakeConnector, MemStore>,
    v2p: Arc<Notify>,
}

/// One switch, sleds 1..=3, and instance 7 started by the saga on sled 1.
async fn running_on_sled1() -> Rack {
    let net = FakeNet::new();
    let store = MemStore::default();
    net.add_switch_zone(zone_ip(1), 0);
    for n in 1..=3 {
        net.add_sled_agent(sled_ip(n));
    }
    {
        let mut s = store.lock();
        s.switches = vec![SwitchSlot::Switch0];
        s.sleds = (1..=3)
            .map(|id| SledRef {
                id,
                address: sled_ip(id),
            })
            .collect();
    }
    store.insert(record(InstanceState::Stopped));
    let v2p = Arc::new(Notify::new());
    let ops = InstanceOps::new(net.connector(), store.clone(), StartImpl::Saga)
        .with_switch_zones(StaticResolver(vec![zone_ip(1)]))
        .with_v2p_task(v2p.clone());
    let started = ops.start(ID, 1).await.expect("starts");
    assert_eq!(started.state, InstanceState::Running);
    // The start's own activation is not what the tests look for.
    let _ = tokio::time::timeout(Duration::from_millis(1), v2p.notified()).await;
    Rack {
        net,
        store,
        ops,
        v2p,
    }
}

impl Rack {
    /// One pass of the instance watcher, asking the one MGS.
    async fn watch(&self) -> Vec<Watched> {
        instance_watcher(&self.ops, &self.net.connector(), &mgs())
            .await
            .unwrap()
    }

    /// Records instance 7 as Stopping, as a stop does before it asks the
    /// sled to destroy the VMM, with its VMM as `vmm` makes it; returns the
    /// record after.
    async fn stopping(&self, vmm: impl FnOnce(Option<u64>) -> Option<u64>) -> InstanceRecord {
        let running = self.store.fetch(ID).await.unwrap();
        self.store
            .update_if(
                ID,
                running.generation,
                RuntimeUpdate {
                    state: InstanceState::Stopping,
                    sled: running.sled,
                    vmm: vmm(running.vmm),
                },
            )
            .await
            .unwrap()
    }

    /// Instance 7's state as the store has it.
    async fn state(&self) -> InstanceState {
        self.store.fetch(ID).await.unwrap().state
    }
}

async fn activated(v2p: &Notify) -> bool {
    tokio::time::timeout(Duration::from_millis(1), v2p.notified())
        .await
        .is_ok()
}

fn live_rows(store: &MemStore) -> usize {
    store.lock().nat.live_of(ID).len()
}

#[tokio::test]
async fn a_running_vmm_is_left_alone() {
    let rack = running_on_sled1().await;
    let watched = rack.watch().await;
    assert_eq!(watched.len(), 1);
    assert_eq!(watched[0].check, VmmCheck::Healthy);
    assert!(watched[0].update.is_none());
    assert_eq!(rack.state().await, InstanceState::Running);
}

/// A rebooted sled answers 404 `NO_SUCH_INSTANCE`: the VMM is gone, the
/// update saga moves the instance to Failed, clears its NAT rows and
/// activates the V2P task.
#[tokio::test]
async fn a_vmm_lost_in_a_reboot_fails_its_instance_and_clears_its_networking() {
    let rack = running_on_sled1().await;
    assert!(live_rows(&rack.store) > 0);
    rack.net
        .with_sled_agent(sled_ip(1), |a| *a = Default::default());
    let watched = rack.watch().await;
    assert_eq!(watched[0].check, VmmCheck::Gone);
    let after = watched[0].update.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(
        (after.state, after.sled, after.vmm),
        (InstanceState::Failed, None, None)
    );
    assert_eq!(live_rows(&rack.store), 0, "the update saga clears NAT rows");
    assert!(activated(&rack.v2p).await, "and activates the V2P task");
    // Failed is not watched again.
    let again = rack.watch().await;
    assert!(again.is_empty());
}

/// A stop that destroyed the VMM but never recorded Stopped (its Nexus died
/// in between) is found by the watcher as upstream's finds it: the VMM is
/// gone, so the instance goes to Failed.
#[tokio::test]
async fn a_vmm_gone_under_an_interrupted_stop_fails_its_instance() {
    let rack = running_on_sled1().await;
    let stopping = rack.stopping(|vmm| vmm).await;
    rack.net
        .with_sled_agent(sled_ip(1), |a| *a = Default::default());
    let watched = rack.watch().await;
    assert_eq!(watched.len(), 1, "a Stopping instance's VMM is watched");
    assert_eq!(watched[0].check, VmmCheck::Gone);
    let after = watched[0].update.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(after.state, InstanceState::Failed);
    assert_eq!(after.generation, stopping.generation + 1);
    assert_eq!(live_rows(&rack.store), 0);
}

/// A stop that had the sled destroy the VMM and forgot it, then died before
/// recording Stopped, is finished by the instance updater.
#[tokio::test]
async fn the_updater_finishes_a_stop_whose_nexus_died() {
    let rack = running_on_sled1().await;
    rack.stopping(|_forgotten| None).await;
    assert!(rack.watch().await.is_empty(), "no VMM to watch");
    let updated = instance_updater(&rack.ops).await.unwrap();
    assert_eq!(updated.len(), 1);
    let after = updated[0].outcome.as_ref().unwrap();
    assert_eq!(
        (after.state, after.sled, after.vmm),
        (InstanceState::Stopped, None, None)
    );
    assert_eq!(live_rows(&rack.store), 0, "its NAT rows are cleared");
    assert!(activated(&rack.v2p).await, "and the V2P task activated");
    assert!(instance_updater(&rack.ops).await.unwrap().is_empty());
}

/// A VMM on a sled that is no longer in service is failed without asking
/// the sled, as upstream's watcher fails VMMs on an expunged sled.
#[tokio::test]
async fn a_vmm_on_an_expunged_sled_fails_its_instance() {
    let rack = running_on_sled1().await;
    rack.store.lock().sleds.retain(|s| s.id != 1);
    let watched = rack.watch().await;
    assert_eq!(watched[0].check, VmmCheck::SledExpunged);
    let after = watched[0].update.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(after.state, InstanceState::Failed);
    let before = rack.net.requests(sled_ip(1), SLED_AGENT_PORT).len();
    let again = rack.watch().await;
    assert!(again.is_empty(), "Failed is not watched again");
    assert_eq!(
        rack.net.requests(sled_ip(1), SLED_AGENT_PORT).len(),
        before,
        "an expunged sled is not asked"
    );
}

/// An unreachable sled-agent is no evidence: MGS saying the sled is on
/// leaves the record as it is; MGS saying it is off fails the instance.
// Paused time: the hung sled-agent costs the client's timeout, which
// tokio's test clock skips.
#[tokio::test(start_paused = true)]
async fn an_unreachable_sled_is_judged_by_its_power_state() {
    let rack = running_on_sled1().await;
    rack.net
        .set_hang(SocketAddr::new(sled_ip(1).into(), SLED_AGENT_PORT));
    let watched = rack.watch().await;
    let VmmCheck::Inconclusive(why) = &watched[0].check else {
        panic!("{:?}", watched[0].check);
    };
    assert!(why.contains("A0"), "{why}");
    assert!(watched[0].update.is_none());
    assert_eq!(rack.state().await, InstanceState::Running);

    rack.net.fail(
        zone_ip(1),
        MGS_PORT,
        "GET",
        "/sp/sled/1/power-state",
        Some(FakeResponse::json(200, serde_json::json!("A2"))),
    );
    let watched = rack.watch().await;
    assert_eq!(watched[0].check, VmmCheck::SledPoweredOff(PowerState::A2));
    assert_eq!(rack.state().await, InstanceState::Failed);
}

/// Reincarnation restarts a Failed instance at once, then not again within
/// the cooldown, then again after it; under policy `Never` it does not.
#[tokio::test]
async fn reincarnation_follows_the_policy_and_the_cooldown() {
    let rack = running_on_sled1().await;
    let fail = |rack: &Rack| {
        let sled = rack.store.lock().instances[&ID].sled.unwrap();
        rack.net
            .with_sled_agent(sled_ip(sled), |a| *a = Default::default());
    };
    fail(&rack);
    rack.watch().await;
    let t0 = Duration::from_secs(600);
    let done = reincarnate(&rack.ops, t0).await.unwrap();
    let started = done[0].start.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(started.state, InstanceState::Running);
    let rec = rack.store.fetch(ID).await.unwrap();
    assert_eq!(
        (rec.auto_restart.last, rec.auto_restart.count),
        (Some(t0), 1)
    );

    // Fails again a minute later: cooling down for the 4 minutes left.
    fail(&rack);
    rack.watch().await;
    let done = reincarnate(&rack.ops, t0 + Duration::from_secs(60))
        .await
        .unwrap();
    assert!(done[0].start.is_none());
    assert_eq!(done[0].cooling, Some(Duration::from_secs(240)));
    assert_eq!(rack.state().await, InstanceState::Failed);
    // Past the cooldown it is restarted, on the next sled.
    let done = reincarnate(&rack.ops, t0 + REINCARNATION_COOLDOWN)
        .await
        .unwrap();
    let restarted = done[0].start.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(restarted.state, InstanceState::Running);
    assert_ne!(restarted.sled, started.sled, "placement moves on");

    // Policy Never: left Failed.
    fail(&rack);
    rack.watch().await;
    rack.store
        .lock()
        .instances
        .get_mut(&ID)
        .unwrap()
        .auto_restart
        .policy = AutoRestartPolicy::Never;
    let done = reincarnate(&rack.ops, t0 + Duration::from_secs(3600))
        .await
        .unwrap();
    assert!(done.is_empty());
    assert_eq!(rack.state().await, InstanceState::Failed);
}

/// A sled-agent that answers 404 without error code `NO_SUCH_INSTANCE`
/// (a route it does not serve, say) has not said the VMM is gone: the
/// watcher asks MGS, which says the sled is on, and leaves the instance.
#[tokio::test]
async fn a_404_that_is_not_no_such_instance_is_no_evidence() {
    let rack = running_on_sled1().await;
    rack.net.fail(
        sled_ip(1),
        SLED_AGENT_PORT,
        "GET",
        "/vmms/*/state",
        Some(FakeResponse::error(404, "Not Found")),
    );
    let watched = rack.watch().await;
    let VmmCheck::Inconclusive(why) = &watched[0].check else {
        panic!("{:?}", watched[0].check);
    };
    assert!(
        why.contains("HTTP 404: Not Found") && why.contains("A0"),
        "{why}"
    );
    assert!(watched[0].update.is_none());
    assert_eq!(rack.state().await, InstanceState::Running);
}

/// A sled that runs another VMM for the instance than the record names
/// (the recorded one died and another took its place) has not got the
/// recorded one: asked for it by its propolis id, it answers 404
/// `NO_SUCH_INSTANCE`; it is gone, and the instance fails.
#[tokio::test]
async fn a_sled_running_another_vmm_for_the_instance_has_lost_the_recorded_one() {
    let rack = running_on_sled1().await;
    let recorded = rack.store.fetch(ID).await.unwrap().vmm.unwrap();
    rack.net
        .with_sled_agent(sled_ip(1), |a| *a = Default::default());
    let agent = crate::instances::SledAgentClient::new(HttpClient::new(
        rack.net.connector(),
        SocketAddr::new(sled_ip(1).into(), SLED_AGENT_PORT),
    ));
    agent.vmm_register(recorded + 100, ID).await.unwrap();
    let watched = rack.watch().await;
    assert_eq!(watched[0].check, VmmCheck::Gone);
    assert_eq!(rack.state().await, InstanceState::Failed);
}

/// What the watcher found, as the trace says it.
#[test]
fn vmm_checks_read_as_the_trace_says_them() {
    let lines = [
        VmmCheck::Healthy,
        VmmCheck::Gone,
        VmmCheck::SledPoweredOff(PowerState::A2),
        VmmCheck::Inconclusive("sled-agent: timed out".into()),
        VmmCheck::SledExpunged,
    ]
    .map(|c| c.to_string());
    assert_eq!(
        lines,
        [
            "running",
            "gone (no such VMM)",
            "gone (sled powered off, A2)",
            "unknown: sled-agent: timed out",
            "gone (sled expunged)",
        ]
    );
}

/// Reincarnation's placement: the instance's id modulo the number of
/// sleds picks its first sled (by id), and each automatic restart moves it
/// on by one, wrapping round.
#[test]
fn placement_starts_at_the_id_modulo_the_sleds_and_moves_on_with_each_restart() {
    let sleds: Vec<SledRef> = [10, 20, 30]
        .into_iter()
        .map(|id| SledRef {
            id,
            address: sled_ip(id),
        })
        .collect();
    let mut instance = record(InstanceState::Failed);
    let mut chosen = Vec::new();
    for count in 0..4 {
        instance.auto_restart.count = count;
        chosen.push(placement(&instance, &sleds));
    }
    // Instance 7: 7 % 3 = 1, then 2, 0, 1.
    assert_eq!(chosen, vec![20, 30, 10, 20]);
}
