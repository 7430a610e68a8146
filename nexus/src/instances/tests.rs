//! Tests of instance operations and background tasks against a fake dpd, a
//! fake sled-agent and an in-memory store.

use std::{
    collections::BTreeMap,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use serde_json::json;
use tokio::sync::Notify;

use super::{
    test_store::{HoldPoint, MemStore},
    *,
};
use racksim_reconciler::{
    discovery::{StaticResolver, SwitchSlot},
    dpd::{DpdClient, Ipv4Nat, NatTarget},
    http::HttpClient,
    nat::NatEntry,
    testing::{zone_ip, Captured, FakeConnector, FakeNet, FakeResponse},
    DPD_PORT, MGS_PORT, SERVICES_VNI,
};

const ID: u32 = 7;
/// The switch lookup's question to each dpd (omicron's `dpd_clients`).
const LOOKUP: &str = "GET /switch/identifiers";
/// Nexus's notice to a dpd that the NAT table changed (it pulls on it).
const TRIGGER: &str = "POST /rpw/nat/trigger";
/// The inline NAT ensure's requests to a dpd for [`EXT`]'s entry: read
/// it, delete a stale one, put the desired one.
const NAT_GET: &str = "GET /nat/ipv4/203.0.113.10/0";
const NAT_DELETE: &str = "DELETE /nat/ipv4/203.0.113.10/0";
const NAT_PUT: &str = "PUT /nat/ipv4/203.0.113.10/0/16383";
const EXT: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 10);

fn sled_ip(n: u32) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x1122, 0x3344, 0x100 + n as u16, 0, 0, 0, 1)
}

fn sled_addr(n: u32) -> SocketAddr {
    SocketAddr::new(sled_ip(n).into(), SLED_AGENT_PORT)
}

fn dpd_addr(zone: Ipv6Addr) -> SocketAddr {
    SocketAddr::new(zone.into(), DPD_PORT)
}

fn zones() -> [Ipv6Addr; 2] {
    [zone_ip(1), zone_ip(2)]
}

/// Operations on the fake network whose internal DNS lists [`zones`]
/// (deliberately in reverse: nothing may depend on DNS's order).
fn ops_on(net: &FakeNet, store: &MemStore, imp: StartImpl) -> InstanceOps<FakeConnector, MemStore> {
    InstanceOps::new(net.connector(), store.clone(), imp)
        .with_switch_zones(StaticResolver(vec![zone_ip(2), zone_ip(1)]))
}

fn nic(n: u8) -> Nic {
    Nic {
        virtual_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, n)),
        mac: MacAddr::new([0xa8, 0x40, 0x25, 0xf0, 0x00, n]),
        vni: GUEST_VNI,
    }
}

fn instance(id: u32, state: InstanceState) -> InstanceRecord {
    InstanceRecord {
        id,
        name: format!("inst{id}"),
        state,
        generation: 1,
        sled: None,
        vmm: None,
        external_ips: vec![ExternalIp {
            ip: Ipv4Addr::new(203, 0, 113, id as u8 + 3),
            first_port: 0,
            last_port: 16383,
        }],
        nics: vec![nic(id as u8 - 2)],
        auto_restart: Default::default(),
    }
}

/// Two boundary switches, three sleds, instance 7 in `state`.
fn fixture(
    imp: StartImpl,
    state: InstanceState,
) -> (FakeNet, MemStore, InstanceOps<FakeConnector, MemStore>) {
    let net = FakeNet::new();
    let store = MemStore::default();
    for (slot, zone) in zones().into_iter().enumerate() {
        net.add_switch_zone(zone, slot as u16);
    }
    for n in 1..=3 {
        net.add_sled_agent(sled_ip(n));
    }
    {
        let mut s = store.lock();
        // Deliberately unsorted: operations must sort.
        s.switches = vec![SwitchSlot::Switch1, SwitchSlot::Switch0];
        s.sleds = [3, 1, 2]
            .into_iter()
            .map(|id| SledRef {
                id,
                address: sled_ip(id),
            })
            .collect();
    }
    store.insert(instance(ID, state));
    let ops = ops_on(&net, &store, imp);
    (net, store, ops)
}

/// [`fixture`], with a V2P task activation handle given to the operations.
fn fixture_with_v2p_task(
    imp: StartImpl,
    state: InstanceState,
) -> (
    FakeNet,
    MemStore,
    InstanceOps<FakeConnector, MemStore>,
    Arc<Notify>,
) {
    let (net, store, ops) = fixture(imp, state);
    let v2p_task = Arc::new(Notify::new());
    (net, store, ops.with_v2p_task(v2p_task.clone()), v2p_task)
}

/// Whether the V2P task has been activated since the last call (consumes
/// the activation).
async fn activated(v2p_task: &Notify) -> bool {
    tokio::time::timeout(Duration::from_millis(1), v2p_task.notified())
        .await
        .is_ok()
}

/// Plays dendrite's NAT RPW on the fake dpd in `zone`: from the generation
/// it reports, fetch changesets (100 at a time) until one is empty; apply
/// each change (deleted: clear the entry at `(ip, first_port)` if any;
/// else set it, replacing whatever was at that key); record the last
/// generation applied. The fake's table is rewritten through its test API,
/// so the request log shows only the generation read.
async fn dpd_pull(net: &FakeNet, store: &MemStore, zone: Ipv6Addr) {
    let dpd = DpdClient::new(HttpClient::new(net.connector(), dpd_addr(zone)));
    let mut gen = dpd.nat_generation().await.unwrap();
    let mut table: BTreeMap<(Ipv4Addr, u16), Ipv4Nat> = net
        .nat(zone)
        .into_iter()
        .map(|e| ((e.external, e.low), e))
        .collect();
    loop {
        let changes = store.nat_changeset(gen, 100).await.unwrap();
        let Some(last) = changes.last() else {
            break;
        };
        gen = last.gen;
        for change in &changes {
            let key = (change.external_address, change.first_port);
            if change.deleted {
                table.remove(&key);
            } else {
                table.insert(key, change.entry().to_dpd());
            }
        }
    }
    net.restart_dpd(zone);
    for entry in table.into_values() {
        net.insert_nat(zone, entry);
    }
    net.set_nat_gen(zone, gen);
}

/// What the background tasks do after an operation: every switch's dpd
/// pulls the NAT changes, and the V2P task runs once.
async fn background(net: &FakeNet, store: &MemStore) {
    for zone in zones() {
        dpd_pull(net, store, zone).await;
    }
    v2p_sync(&net.connector(), store).await.unwrap();
}

/// Instance 7 as a start's MARK_AS_STARTING leaves it (from generation 1):
/// Starting on sled 2, with `vmm` as its VMM; returns the record after.
async fn mark_starting(store: &MemStore, vmm: Option<u64>) -> InstanceRecord {
    store
        .update_if(
            ID,
            1,
            RuntimeUpdate {
                state: InstanceState::Starting,
                sled: Some(2),
                vmm,
            },
        )
        .await
        .unwrap()
}

/// Sled 2's agent registers VMM `vmm` for instance 7, as a start's
/// REGISTER would.
async fn register_on_sled_2(net: &FakeNet, vmm: u64) {
    let agent = SledAgentClient::new(HttpClient::new(net.connector(), sled_addr(2)));
    agent.vmm_register(vmm, ID).await.unwrap();
}

/// A resumed start saga (40) finished, and sled 2 runs one VMM: a re-run
/// REGISTER made no second.
fn assert_saga_40_done_with_one_vmm(net: &FakeNet, store: &MemStore) {
    assert_eq!(net.vmms(sled_ip(2)).len(), 1);
    assert_eq!(store.saga(40).state, SagaState::Done);
}

/// Makes sled 2's sled-agent answer `METHOD path` with error `status`.
fn sled_2_fails(net: &FakeNet, method: &str, path: &str, status: u16, message: &str) {
    let response = FakeResponse::error(status, message);
    net.fail(sled_ip(2), SLED_AGENT_PORT, method, path, Some(response));
}

/// Makes the dpd in `zone` answer the switch lookup's question with a 500:
/// the lookup (since omicron #8914) leaves its switch out.
fn dpd_unidentified(net: &FakeNet, zone: Ipv6Addr) {
    let response = FakeResponse::error(500, "busy");
    net.fail(zone, DPD_PORT, "GET", "/switch/identifiers", Some(response));
}

/// Makes the dpd in `zone` answer the NAT trigger with error `status`.
fn nat_trigger_fails(net: &FakeNet, zone: Ipv6Addr, status: u16, message: &str) {
    let response = FakeResponse::error(status, message);
    net.fail(zone, DPD_PORT, "POST", "/rpw/nat/trigger", Some(response));
}

/// Holds the store at `point` from now on, and returns `op` to run once
/// another operation reaches the point; the hold is released after `op`.
fn once_held_at<T>(
    store: &MemStore,
    point: HoldPoint,
    op: impl std::future::Future<Output = T>,
) -> impl std::future::Future<Output = T> {
    let (reached, release) = store.hold_at(point);
    async move {
        reached.notified().await;
        let out = op.await;
        release.notify_one();
        out
    }
}

/// Saga recovery by a Nexus started after a crash, on the same database.
async fn resume_in_a_new_nexus(net: &FakeNet, store: &MemStore) -> Vec<ResumedSaga> {
    let restarted = ops_on(net, store, StartImpl::Saga);
    restarted.resume_sagas().await
}

/// Saga `id` unwound in full, latest node first, and left instance 7
/// Stopped.
fn assert_unwound_to_stopped(store: &MemStore, id: u64) {
    use SagaNode::*;
    let saga = store.saga(id);
    assert_eq!(
        saga.undone,
        vec![Register, V2pEnsure, DpdEnsure, MarkAsStarting]
    );
    assert_eq!(saga.state.name(), "unwound");
    assert_eq!(store.get(ID).state, InstanceState::Stopped);
}

fn nat_entry(sled: u32) -> NatEntry {
    NatEntry {
        external_ip: EXT,
        first_port: 0,
        last_port: 16383,
        target: NatTarget {
            internal_ip: sled_ip(sled),
            inner_mac: nic(5).mac,
            vni: GUEST_VNI,
        },
    }
}

fn mapping(sled: u32) -> VirtualNetworkInterfaceHost {
    VirtualNetworkInterfaceHost {
        virtual_ip: nic(5).virtual_ip,
        virtual_mac: nic(5).mac,
        physical_host_ip: sled_ip(sled),
        vni: GUEST_VNI,
    }
}

/// Runs the background tasks, then asserts the networking they leave:
/// as [`assert_networking`], but with the V2P task's mappings, which are on
/// every sled, the instance's own included (upstream's `V2PManager`).
async fn assert_networking_settles(net: &FakeNet, store: &MemStore, sled: Option<u32>) {
    background(net, store).await;
    assert_networking_on(net, store, sled, true);
}

/// Asserts the instance's networking points at `sled` (or is absent):
/// NAT on both switches and in the table, V2P on every other sled and not
/// on its own (as an operation pushes it inline, or as a test leaves it);
/// [`assert_networking_settles`] expects the V2P task's instead.
fn assert_networking(net: &FakeNet, store: &MemStore, sled: Option<u32>) {
    assert_networking_on(net, store, sled, false);
}

/// [`assert_networking`], with the instance's mapping expected on its own
/// sled too if `own_sled`.
fn assert_networking_on(net: &FakeNet, store: &MemStore, sled: Option<u32>, own_sled: bool) {
    for zone in zones() {
        let expected: Vec<Ipv4Nat> = sled.map(|s| nat_entry(s).to_dpd()).into_iter().collect();
        assert_eq!(net.nat(zone), expected, "NAT on {zone}");
    }
    let expected: Vec<NatEntry> = sled.map(nat_entry).into_iter().collect();
    assert_eq!(store.nat_rows(), expected, "NAT rows");
    for n in 1..=3 {
        let expected: Vec<_> = match sled {
            Some(s) if s != n || own_sled => vec![mapping(s)],
            _ => vec![],
        };
        assert_eq!(net.v2p(sled_ip(n)), expected, "V2P on sled {n}");
    }
}

/// Resumes the sagas of a new Nexus and asserts that saga 9 unwound in
/// full to Stopped; the WARN lines logged meanwhile.
async fn resume_saga_9_unwound(
    ops: &InstanceOps<FakeConnector, MemStore>,
    store: &MemStore,
) -> Captured {
    let captured = Captured::at(tracing::Level::WARN);
    let resumed = {
        let _guard = captured.install();
        ops.resume_sagas().await
    };
    assert!(
        matches!(&resumed[..], [(9, ID, Err(OpError::Unwound(_)))]),
        "{resumed:?}"
    );
    assert_unwound_to_stopped(store, 9);
    captured
}

/// `(instance, VMM)` of each VMM sled `n` holds.
fn vmm_ids(net: &FakeNet, n: u32) -> Vec<(u32, u64)> {
    net.vmms(sled_ip(n))
        .iter()
        .map(|v| (v.instance_id, v.vmm_id))
        .collect()
}

fn vmm_count(net: &FakeNet) -> usize {
    (1..=3).map(|n| net.vmms(sled_ip(n)).len()).sum()
}

/// A cold boot: switch tables and sled V2P tables empty, VMMs gone.
fn cold_boot(net: &FakeNet) {
    for zone in zones() {
        net.restart_dpd(zone);
    }
    for n in 1..=3 {
        net.add_sled_agent(sled_ip(n));
    }
}

// ---- names and wire formats ----

#[test]
fn names_display_and_parse() {
    assert_eq!(InstanceState::Starting.to_string(), "starting");
    assert_eq!(
        serde_json::to_value(InstanceState::Deleted).unwrap(),
        json!("deleted")
    );
    assert_eq!(SagaNode::MarkAsStarting.to_string(), "MARK_AS_STARTING");
    assert_eq!(
        SagaNode::ALL.map(|n| n.to_string()),
        [
            "MARK_AS_STARTING",
            "DPD_ENSURE",
            "V2P_ENSURE",
            "REGISTER",
            "RUN"
        ]
    );
    for imp in StartImpl::ALL {
        assert_eq!(imp.to_string().parse::<StartImpl>(), Ok(imp));
    }
    assert_eq!("saga".parse::<StartImpl>(), Ok(StartImpl::Saga));
    assert!("Saga".parse::<StartImpl>().is_err());
    // An old scenario file's name gets told the new one; others do not.
    assert_eq!(
        "legacy".parse::<StartImpl>().unwrap_err().to_string(),
        "unknown start implementation \"legacy\" (expected inline, naive or saga; \
         the start `legacy` is now called `inline`)"
    );
    assert_eq!(
        "fast".parse::<StartImpl>().unwrap_err().to_string(),
        "unknown start implementation \"fast\" (expected inline, naive or saga)"
    );
    assert_eq!(
        OpError::Refused {
            id: 7,
            state: InstanceState::Starting,
            op: "delete"
        }
        .to_string(),
        "instance 7 is starting: delete refused"
    );
}

#[test]
fn v2p_wire_json_matches_the_reference() {
    let m = VirtualNetworkInterfaceHost {
        virtual_ip: "10.0.0.5".parse().unwrap(),
        virtual_mac: MacAddr::new([0xa8, 0x40, 0x25, 0xf0, 0x00, 0x01]),
        physical_host_ip: "fd00:1122:3344:102::1".parse().unwrap(),
        vni: 1001,
    };
    let wire = json!({
        "virtual_ip": "10.0.0.5",
        "virtual_mac": "A8:40:25:F0:00:01",
        "physical_host_ip": "fd00:1122:3344:102::1",
        "vni": 1001,
    });
    // Upper case, as omicron's MacAddr (through macaddr::MacAddr6) writes it.
    assert_eq!(serde_json::to_value(m).unwrap(), wire);
    assert_eq!(
        serde_json::from_value::<VirtualNetworkInterfaceHost>(wire.clone()).unwrap(),
        m
    );
    // Lower case is read too.
    let mut lower = wire.clone();
    lower["virtual_mac"] = json!("a8:40:25:f0:00:01");
    assert_eq!(
        serde_json::from_value::<VirtualNetworkInterfaceHost>(lower).unwrap(),
        m
    );
    // dpd's MAC shape is not sled-agent's.
    let mut dpd_shaped = wire;
    dpd_shaped["virtual_mac"] = json!({"a": [168, 64, 37, 240, 0, 1]});
    assert!(serde_json::from_value::<VirtualNetworkInterfaceHost>(dpd_shaped).is_err());
    // IPv6 virtual IPs are valid ("format": "ip").
    let v6 = VirtualNetworkInterfaceHost {
        virtual_ip: "fd77::5".parse().unwrap(),
        ..m
    };
    assert_eq!(
        serde_json::to_value(v6).unwrap()["virtual_ip"],
        json!("fd77::5")
    );
}

#[tokio::test(start_paused = true)]
async fn sled_agent_client_paths_and_bodies() {
    let net = FakeNet::new();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    net.set_custom(sled_addr(2), move |method, path, body| {
        log.lock().unwrap().push((
            format!("{method} {path}"),
            serde_json::from_slice::<serde_json::Value>(body).unwrap_or(json!(null)),
        ));
        match (method, path) {
            ("GET", "/v2p") => FakeResponse::json(
                200,
                json!([{"virtual_ip": "10.0.0.5", "virtual_mac": "a8:40:25:f0:00:05",
                        "physical_host_ip": "fd00:1122:3344:102::1", "vni": 1001}]),
            ),
            ("GET", "/vmms") => FakeResponse::json(
                200,
                json!([{"instance_id": 7, "vmm_id": 3, "state": "running"}]),
            ),
            ("GET", "/vmms/3/state") => FakeResponse::json(
                200,
                json!({"instance_id": 7, "vmm_id": 3, "state": "running"}),
            ),
            ("GET", "/vmms/4/state") => FakeResponse::json(
                404,
                json!({"request_id": "1", "error_code": "NO_SUCH_INSTANCE",
                       "message": "VMM with ID 4 not found"}),
            ),
            ("DELETE", "/vmms/3") => FakeResponse::json(200, json!({"updated_runtime": null})),
            _ => FakeResponse::empty(204),
        }
    });
    let agent = SledAgentClient::new(HttpClient::new(net.connector(), sled_addr(2)));
    assert_eq!(agent.v2p_list().await.unwrap(), vec![mapping(2)]);
    agent.v2p_set(&mapping(2)).await.unwrap();
    agent.v2p_del(&mapping(2)).await.unwrap();
    agent.vmm_register(3, 7).await.unwrap();
    agent.vmm_put_state(3, VmmState::Running).await.unwrap();
    let running = VmmInfo {
        instance_id: 7,
        vmm_id: 3,
        state: VmmState::Running,
    };
    assert_eq!(agent.vmm_list().await.unwrap(), vec![running]);
    assert_eq!(agent.vmm_get_state(3).await.unwrap(), Some(running));
    assert_eq!(agent.vmm_get_state(4).await.unwrap(), None);
    agent.vmm_unregister(3).await.unwrap();
    let wire = json!({"virtual_ip": "10.0.0.5", "virtual_mac": "A8:40:25:F0:00:05",
                      "physical_host_ip": "fd00:1122:3344:102::1", "vni": 1001});
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            ("GET /v2p".to_string(), json!(null)),
            ("PUT /v2p".to_string(), wire.clone()),
            ("DELETE /v2p".to_string(), wire),
            ("PUT /vmms/3".to_string(), json!({"instance_id": 7})),
            ("PUT /vmms/3/state".to_string(), json!({"state": "running"})),
            ("GET /vmms".to_string(), json!(null)),
            ("GET /vmms/3/state".to_string(), json!(null)),
            ("GET /vmms/4/state".to_string(), json!(null)),
            ("DELETE /vmms/3".to_string(), json!(null)),
        ]
    );
}

// ---- start ----

#[tokio::test(start_paused = true)]
async fn legacy_start_programs_nothing() {
    let (net, store, ops) = fixture(StartImpl::Inline, InstanceState::Stopped);
    let record = ops.start(ID, 2).await.unwrap();
    assert_eq!(record.state, InstanceState::Running);
    assert_eq!(record.sled, Some(2));
    assert_eq!(record.generation, 2);
    let vmm = record.vmm.expect("a VMM");
    assert_eq!(
        net.vmms(sled_ip(2)),
        vec![VmmInfo {
            instance_id: ID,
            vmm_id: vmm,
            state: VmmState::Running
        }]
    );
    assert_networking(&net, &store, None);
    for zone in zones() {
        assert_eq!(net.requests(zone, DPD_PORT), Vec::<String>::new());
    }
    // A second start is refused: the instance is running.
    assert_eq!(
        ops.start(ID, 3).await.unwrap_err(),
        OpError::Refused {
            id: ID,
            state: InstanceState::Running,
            op: "start"
        }
    );
}

#[tokio::test(start_paused = true)]
async fn legacy_create_programs_nat_and_v2p() {
    let (net, store, ops) = fixture(StartImpl::Inline, InstanceState::Creating);
    let record = ops.create(ID, 2).await.unwrap();
    assert_eq!(record.state, InstanceState::Running);
    assert_networking(&net, &store, Some(2));
    assert_eq!(vmm_count(&net), 1);
}

#[tokio::test(start_paused = true)]
async fn naive_start_programs_nat_and_v2p() {
    let (net, store, ops) = fixture(StartImpl::Naive, InstanceState::Stopped);
    // A stale mapping of the instance on its new sled (it used to run on
    // sled 3) must go; a stale NAT entry must be replaced.
    net.insert_v2p(sled_ip(2), mapping(3));
    net.insert_nat(zone_ip(1), nat_entry(3).to_dpd());
    let record = ops.start(ID, 2).await.unwrap();
    assert_eq!(
        (record.state, record.sled),
        (InstanceState::Running, Some(2))
    );
    assert_eq!(store.nat_rows(), vec![nat_entry(2)]);
    // The operation only writes the rows and triggers each dpd; it neither
    // reads nor writes a switch's table, nor touches a sled's V2P.
    for zone in zones() {
        assert_eq!(net.requests(zone, DPD_PORT), vec![LOOKUP, TRIGGER]);
    }
    assert_eq!(net.nat(zone_ip(1)), vec![nat_entry(3).to_dpd()]);
    assert_eq!(net.v2p(sled_ip(2)), vec![mapping(3)]);
    assert_eq!(vmm_count(&net), 1);
    // The dpds pull the rows and the V2P task runs: converged.
    assert_networking_settles(&net, &store, Some(2)).await;
}

#[tokio::test(start_paused = true)]
async fn saga_start_records_every_node_in_order() {
    let (net, store, ops, v2p_task) =
        fixture_with_v2p_task(StartImpl::Saga, InstanceState::Stopped);
    let record = ops.start(ID, 2).await.unwrap();
    assert_eq!(record.state, InstanceState::Running);
    // MARK_AS_STARTING and RUN each bumped the generation.
    assert_eq!(record.generation, 3);
    assert_eq!(vmm_count(&net), 1);
    // V2P_ENSURE activated the V2P task.
    assert!(activated(&v2p_task).await);

    let history = store.lock().saga_history.clone();
    let steps: Vec<_> = history
        .iter()
        .map(|s| (s.done.clone(), s.vmm_id.is_some(), s.state.clone()))
        .collect();
    use SagaNode::*;
    assert_eq!(
        steps,
        vec![
            // The VMM id is in the log from the start: MARK_AS_STARTING
            // writes it into the record, and a re-run recognises it.
            (vec![], true, SagaState::Running),
            (vec![MarkAsStarting], true, SagaState::Running),
            (vec![MarkAsStarting, DpdEnsure], true, SagaState::Running),
            (
                vec![MarkAsStarting, DpdEnsure, V2pEnsure],
                true,
                SagaState::Running
            ),
            (
                vec![MarkAsStarting, DpdEnsure, V2pEnsure, Register],
                true,
                SagaState::Running
            ),
            (SagaNode::ALL.to_vec(), true, SagaState::Done),
        ]
    );
    let last = history.last().unwrap();
    assert_eq!(last.starting_generation, Some(2));
    assert_eq!(last.vmm_id, record.vmm);
    assert_eq!((last.instance, last.sled), (ID, 2));

    // Requests: the switch lookup (each zone in DNS's order), a NAT
    // trigger to each boundary switch (by slot), then the VMM. V2P is the
    // task's to push.
    assert_eq!(
        net.all_requests(),
        vec![
            (dpd_addr(zone_ip(2)), LOOKUP.to_string()),
            (dpd_addr(zone_ip(1)), LOOKUP.to_string()),
            (dpd_addr(zone_ip(1)), TRIGGER.to_string()),
            (dpd_addr(zone_ip(2)), TRIGGER.to_string()),
            (sled_addr(2), format!("PUT /vmms/{}", record.vmm.unwrap())),
            (
                sled_addr(2),
                format!("PUT /vmms/{}/state", record.vmm.unwrap())
            ),
        ]
    );
    assert_networking_settles(&net, &store, Some(2)).await;
}

#[tokio::test(start_paused = true)]
async fn saga_concurrent_starts_exactly_one_wins() {
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    let (a, b) = tokio::join!(ops.start(ID, 2), ops.start(ID, 3));
    let (winner, loser, sled) = match (a, b) {
        (Ok(r), Err(e)) => (r, e, 2),
        (Err(e), Ok(r)) => (r, e, 3),
        other => panic!("exactly one start must win: {other:?}"),
    };
    assert!(
        matches!(
            loser,
            OpError::Refused { .. } | OpError::Store(StoreError::Conflict { .. })
        ),
        "{loser:?}"
    );
    assert_eq!(winner.sled, Some(sled));
    assert_eq!(store.get(ID).state, InstanceState::Running);
    assert_eq!(vmm_count(&net), 1);
    assert_networking_settles(&net, &store, Some(sled)).await;
    // Both sagas are finished: one Done, one Unwound having done nothing.
    let sagas = store.lock().sagas.clone();
    let mut states: Vec<_> = sagas
        .values()
        .map(|s| (s.state.name(), s.done.len()))
        .collect();
    states.sort_by_key(|(_, n)| *n);
    assert_eq!(states, vec![("unwound", 0), ("done", 5)]);
}

#[tokio::test(start_paused = true)]
async fn legacy_concurrent_starts_are_not_serialised_by_the_record() {
    // Contrast: without MARK_AS_STARTING both starts get as far as the
    // sled-agents, and a VMM is left behind on the loser's sled.
    let (net, store, ops) = fixture(StartImpl::Inline, InstanceState::Stopped);
    let (a, b) = tokio::join!(ops.start(ID, 2), ops.start(ID, 3));
    assert!(a.is_ok() != b.is_ok(), "{a:?} {b:?}");
    assert_eq!(store.get(ID).state, InstanceState::Running);
    assert_eq!(vmm_count(&net), 2);
}

// ---- the start/delete race ----

#[tokio::test(start_paused = true)]
async fn naive_start_racing_delete_leaks_mappings() {
    let (net, store, ops) = fixture(StartImpl::Naive, InstanceState::Stopped);
    // T1 (start) has read Stopped and is about to program NAT; T2 deletes.
    let delete = once_held_at(&store, HoldPoint::NatSet, ops.delete(ID));
    let (started, deleted) = tokio::join!(ops.start(ID, 2), delete);
    assert_eq!(deleted.unwrap().state, InstanceState::Deleted);
    assert!(
        matches!(started, Err(OpError::Store(StoreError::Conflict { .. }))),
        "{started:?}"
    );
    assert_eq!(store.get(ID).state, InstanceState::Deleted);
    // The leak: a deleted instance's NAT rows, which every dpd pulls, and
    // its VMM. (Its V2P mappings no longer leak: the V2P task derives them
    // from the records, and a deleted instance has none.)
    assert_eq!(store.nat_rows(), vec![nat_entry(2)]);
    assert_eq!(vmm_count(&net), 1);
    background(&net, &store).await;
    for zone in zones() {
        assert_eq!(net.nat(zone), vec![nat_entry(2).to_dpd()], "NAT on {zone}");
    }
    for n in 1..=3 {
        assert_eq!(net.v2p(sled_ip(n)), vec![], "V2P on sled {n}");
    }
}

#[tokio::test(start_paused = true)]
async fn saga_start_racing_delete_leaks_nothing() {
    // Same interleaving as the naive test: the delete comes when the start
    // is about to program NAT — after MARK_AS_STARTING, so it is refused.
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    let delete = once_held_at(&store, HoldPoint::NatSet, ops.delete(ID));
    let (started, deleted) = tokio::join!(ops.start(ID, 2), delete);
    assert_eq!(
        deleted.unwrap_err(),
        OpError::Refused {
            id: ID,
            state: InstanceState::Starting,
            op: "delete"
        }
    );
    assert_eq!(started.unwrap().state, InstanceState::Running);
    assert_networking_settles(&net, &store, Some(2)).await;
}

#[tokio::test(start_paused = true)]
async fn delete_that_loses_to_a_saga_start_removes_nothing() {
    // The other order: the delete has read Stopped and is about to mark
    // Deleted when a start saga runs to completion. The delete's conditional
    // update fails, and because it marks before removing, the running
    // instance keeps its networking.
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    let start = once_held_at(&store, HoldPoint::UpdateIf, ops.start(ID, 2));
    let (deleted, started) = tokio::join!(ops.delete(ID), start);
    assert!(
        matches!(deleted, Err(OpError::Store(StoreError::Conflict { .. }))),
        "{deleted:?}"
    );
    assert_eq!(started.unwrap().state, InstanceState::Running);
    assert_networking_settles(&net, &store, Some(2)).await;
}

#[tokio::test(start_paused = true)]
async fn saga_delete_refused_while_starting() {
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Starting);
    net.clear_log();
    assert_eq!(
        ops.delete(ID).await.unwrap_err(),
        OpError::Refused {
            id: ID,
            state: InstanceState::Starting,
            op: "delete"
        }
    );
    assert_eq!(store.get(ID).state, InstanceState::Starting);
    assert!(net.all_requests().is_empty());
}

// ---- delete ----

#[tokio::test(start_paused = true)]
async fn delete_removes_nat_before_v2p_and_marks_deleted() {
    // Inline keeps mappings while stopped: create, stop, then delete.
    let (net, store, ops) = fixture(StartImpl::Inline, InstanceState::Creating);
    ops.create(ID, 2).await.unwrap();
    ops.stop(ID).await.unwrap();
    assert_networking(&net, &store, Some(2));
    net.clear_log();

    let deleted = ops.delete(ID).await.unwrap();
    assert_eq!(deleted.state, InstanceState::Deleted);
    assert_eq!(store.get(ID).state, InstanceState::Deleted);
    assert_networking(&net, &store, None);

    let requests: Vec<(SocketAddr, String)> = net.all_requests();
    let mutations: Vec<(SocketAddr, &str)> = requests
        .iter()
        .filter(|(_, r)| !r.starts_with("GET "))
        .map(|(a, r)| (*a, r.as_str()))
        .collect();
    assert_eq!(
        mutations,
        vec![
            (dpd_addr(zone_ip(1)), NAT_DELETE),
            (dpd_addr(zone_ip(2)), NAT_DELETE),
            (sled_addr(1), "DELETE /v2p"),
            (sled_addr(3), "DELETE /v2p"),
        ]
    );
    // NAT first: no sled-agent request before the last dpd request.
    let last_dpd = requests
        .iter()
        .rposition(|(a, _)| a.port() == DPD_PORT)
        .unwrap();
    let first_sled = requests
        .iter()
        .position(|(a, _)| a.port() == SLED_AGENT_PORT)
        .unwrap();
    assert!(last_dpd < first_sled);

    // Deleting again is refused.
    assert!(matches!(
        ops.delete(ID).await,
        Err(OpError::Refused {
            state: InstanceState::Deleted,
            ..
        })
    ));
}

#[tokio::test(start_paused = true)]
async fn saga_delete_marks_clears_rows_triggers_and_activates_v2p() {
    let (net, store, ops, v2p_task) =
        fixture_with_v2p_task(StartImpl::Saga, InstanceState::Stopped);
    // A stopped saga instance has no networking; give it some as a leak
    // would (the rows, pulled by the switches; stray mappings).
    store.lock().nat.set_instance(ID, &[nat_entry(2)]);
    background(&net, &store).await;
    net.insert_v2p(sled_ip(1), mapping(2));
    net.insert_v2p(sled_ip(3), mapping(2));
    assert_networking(&net, &store, Some(2));
    net.clear_log();

    let deleted = ops.delete(ID).await.unwrap();
    assert_eq!(deleted.state, InstanceState::Deleted);
    assert_eq!(store.nat_rows(), vec![]);
    assert!(activated(&v2p_task).await);
    // Only the lookup and triggers: the switches and sleds are the
    // tasks' to clean.
    let lookups = [zone_ip(2), zone_ip(1)].map(|z| (dpd_addr(z), LOOKUP.to_string()));
    let triggers = zones().map(|z| (dpd_addr(z), TRIGGER.to_string()));
    assert_eq!(net.all_requests(), [lookups, triggers].concat());
    assert_networking_settles(&net, &store, None).await;
}

#[tokio::test(start_paused = true)]
async fn delete_refused_while_running() {
    let (_net, store, ops) = fixture(StartImpl::Naive, InstanceState::Stopped);
    ops.start(ID, 1).await.unwrap();
    assert!(matches!(
        ops.delete(ID).await,
        Err(OpError::Refused {
            state: InstanceState::Running,
            op: "delete",
            ..
        })
    ));
    assert_eq!(store.get(ID).state, InstanceState::Running);
}

// ---- unwind and resume ----

#[tokio::test(start_paused = true)]
async fn saga_unwinds_when_register_fails() {
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    sled_2_fails(&net, "PUT", "/vmms/*", 500, "out of memory");
    let err = ops.start(ID, 2).await.unwrap_err();
    match &err {
        OpError::Unwound(message) => {
            assert!(message.starts_with("REGISTER failed: "), "{message}");
            assert!(message.contains("out of memory"), "{message}");
        }
        other => panic!("expected an unwound saga, got {other:?}"),
    }
    // DPD_ENSURE's undo cleared the rows and triggered every dpd again.
    // The removed row is one change, its removal (omicron's `nat_changes`
    // view), so a dpd that pulls from any generation ends without the
    // entry: one that applied the addition removes it, one that did not
    // removes nothing.
    assert_eq!(store.nat_rows(), vec![]);
    let last = store.nat_changeset(0, 100).await.unwrap();
    assert_eq!(
        last.iter().map(|c| (c.gen, c.deleted)).collect::<Vec<_>>(),
        [(2, true)]
    );
    for zone in zones() {
        assert_eq!(
            net.requests(zone, DPD_PORT),
            vec![LOOKUP, TRIGGER, LOOKUP, TRIGGER]
        );
    }
    assert_networking_settles(&net, &store, None).await;
    let record = store.get(ID);
    assert_eq!(
        (record.state, record.sled, record.vmm, record.generation),
        (InstanceState::Stopped, None, None, 3)
    );
    assert_eq!(vmm_count(&net), 0);
    let saga = store.saga(1);
    let SagaState::Unwound { failed } = &saga.state else {
        panic!("{:?}", saga.state);
    };
    assert_eq!(failed.node, SagaNode::Register);
    assert!(failed.error.contains("out of memory"), "{failed}");
    use SagaNode::*;
    assert_eq!(saga.done, vec![MarkAsStarting, DpdEnsure, V2pEnsure]);
    // The completed nodes, latest first; REGISTER itself is not undone.
    assert_eq!(saga.undone, vec![V2pEnsure, DpdEnsure, MarkAsStarting]);
    assert!(saga.vmm_id.is_some());

    // Once the sled behaves, the instance starts normally.
    net.clear_failures();
    ops.start(ID, 2).await.unwrap();
    assert_networking_settles(&net, &store, Some(2)).await;
}

#[tokio::test(start_paused = true)]
async fn failed_triggers_do_not_fail_the_saga() {
    // One switch zone is gone (connection refused), the other's dpd
    // answers the trigger with an error: DPD_ENSURE only writes rows and
    // notifies, so neither is the saga's failure.
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    net.remove_switch_zone(zone_ip(2));
    nat_trigger_fails(&net, zone_ip(1), 500, "busy");
    let record = ops.start(ID, 2).await.unwrap();
    assert_eq!(record.state, InstanceState::Running);
    assert_eq!(store.saga(1).state, SagaState::Done);
    assert_eq!(store.nat_rows(), vec![nat_entry(2)]);
    assert_eq!(net.requests(zone_ip(1), DPD_PORT), vec![LOOKUP, TRIGGER]);

    // The live dpd pulls the rows on its own (periodically); the switch
    // zone that comes back starts from generation 0 and pulls them too.
    dpd_pull(&net, &store, zone_ip(1)).await;
    assert_eq!(net.nat(zone_ip(1)), vec![nat_entry(2).to_dpd()]);
    net.add_switch_zone(zone_ip(2), 1);
    dpd_pull(&net, &store, zone_ip(2)).await;
    assert_eq!(net.nat(zone_ip(2)), vec![nat_entry(2).to_dpd()]);
    v2p_sync(&net.connector(), &store).await.unwrap();
    assert_networking_on(&net, &store, Some(2), true);
}

#[tokio::test(start_paused = true)]
async fn resume_sagas_finishes_a_saga_cut_short_by_a_crash() {
    let (net, store, _crashed) = fixture(StartImpl::Saga, InstanceState::Stopped);
    // The control plane crashed after DPD_ENSURE was logged: the record is
    // Starting, NAT is in place, nothing else.
    let starting = mark_starting(&store, None).await;
    // The dpds pulled the rows before the crash.
    store.lock().nat.set_instance(ID, &[nat_entry(2)]);
    for zone in zones() {
        dpd_pull(&net, &store, zone).await;
    }
    net.clear_log();
    store.lock().last_id = 40;
    let saga = SagaRecord {
        id: 40,
        instance: ID,
        sled: 2,
        starting_generation: Some(starting.generation),
        vmm_id: None,
        done: vec![SagaNode::MarkAsStarting, SagaNode::DpdEnsure],
        undone: vec![],
        state: SagaState::Running,
    };
    store.saga_create(&saga).await.unwrap();

    // A fresh InstanceOps: the restarted control plane.
    let restarted = ops_on(&net, &store, StartImpl::Saga);
    let resumed = restarted.resume_sagas().await;
    assert_eq!(resumed.len(), 1);
    let (saga_id, instance_id, outcome) = &resumed[0];
    assert_eq!((*saga_id, *instance_id), (40, ID));
    let record = outcome.as_ref().unwrap();
    assert_eq!(record.state, InstanceState::Running);
    assert_eq!(record.vmm, Some(41));
    assert_eq!(net.vmms(sled_ip(2)).len(), 1);
    let saga = store.saga(40);
    assert_eq!(saga.state, SagaState::Done);
    assert_eq!(saga.done, SagaNode::ALL.to_vec());
    // DPD_ENSURE was not re-run (it would have triggered the dpds).
    for zone in zones() {
        assert_eq!(net.requests(zone, DPD_PORT), Vec::<String>::new());
    }
    assert_networking_settles(&net, &store, Some(2)).await;
    // Nothing left to resume.
    assert!(restarted.resume_sagas().await.is_empty());
}

/// The control plane crashed after MARK_AS_STARTING's database write and
/// before the saga log recorded the node (found by the event-driven time
/// model: `racksim run control-plane-crash-mid-saga --seed 5 --strategy
/// saga` left the instance Starting for ever). The resumed saga re-runs the
/// node, which must recognise its own write instead of refusing the start.
#[tokio::test(start_paused = true)]
async fn resume_re_runs_mark_as_starting_whose_write_missed_its_log_entry() {
    let (net, store, _crashed) = fixture(StartImpl::Saga, InstanceState::Stopped);
    mark_starting(&store, Some(41)).await;
    store.lock().last_id = 41;
    let saga = SagaRecord {
        vmm_id: Some(41),
        ..SagaRecord::new(40, ID, 2)
    };
    store.saga_create(&saga).await.unwrap();

    let resumed = resume_in_a_new_nexus(&net, &store).await;
    let [(40, ID, Ok(record))] = &resumed[..] else {
        panic!("{resumed:?}");
    };
    assert_eq!(record.state, InstanceState::Running);
    assert_eq!((record.sled, record.vmm), (Some(2), Some(41)));
    assert_networking_settles(&net, &store, Some(2)).await;
    assert_saga_40_done_with_one_vmm(&net, &store);
}

/// The idempotence above must not let a saga adopt another start's write:
/// an instance Starting with a different target VMM is refused, untouched.
#[tokio::test(start_paused = true)]
async fn mark_as_starting_does_not_adopt_another_sagas_write() {
    let (net, store, _crashed) = fixture(StartImpl::Saga, InstanceState::Stopped);
    let theirs = mark_starting(&store, Some(50)).await;
    let saga = SagaRecord {
        vmm_id: Some(41),
        ..SagaRecord::new(40, ID, 2)
    };
    store.saga_create(&saga).await.unwrap();

    let resumed = resume_in_a_new_nexus(&net, &store).await;
    assert!(
        matches!(&resumed[..], [(40, ID, Err(OpError::Refused { .. }))]),
        "{resumed:?}"
    );
    assert_eq!(store.get(ID), theirs);
    assert_eq!(store.saga(40).state.name(), "unwound");
    assert!(net.vmms(sled_ip(2)).is_empty());
}

#[tokio::test(start_paused = true)]
async fn resume_sagas_finishes_an_unwind() {
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    // Crashed while unwinding after REGISTER failed: NAT and V2P in place.
    let starting = mark_starting(&store, None).await;
    // Before the crash the dpds had pulled the rows and the V2P task had
    // mapped the Starting instance.
    store.lock().nat.set_instance(ID, &[nat_entry(2)]);
    assert_networking_settles(&net, &store, Some(2)).await;
    let saga = SagaRecord {
        id: 9,
        instance: ID,
        sled: 2,
        starting_generation: Some(starting.generation),
        vmm_id: Some(10),
        done: vec![
            SagaNode::MarkAsStarting,
            SagaNode::DpdEnsure,
            SagaNode::V2pEnsure,
        ],
        undone: vec![],
        state: SagaState::Unwinding {
            failed: NodeFailure {
                node: SagaNode::Register,
                error: "out of memory".into(),
            },
        },
    };
    store.saga_create(&saga).await.unwrap();
    let resumed = ops.resume_sagas().await;
    assert!(
        matches!(&resumed[..], [(9, ID, Err(OpError::Unwound(_)))]),
        "{resumed:?}"
    );
    assert_networking_settles(&net, &store, None).await;
    assert_eq!(store.get(ID).state, InstanceState::Stopped);
    assert_eq!(store.saga(9).state.name(), "unwound");
}

// ---- steno's rules ----

/// Requests to sled `n`'s sled-agent, in order.
fn sled_requests(net: &FakeNet, n: u32) -> Vec<String> {
    net.requests(sled_ip(n), SLED_AGENT_PORT)
}

/// steno does not undo the node whose action failed — even when it did
/// half of its work. REGISTER's request reached the sled (the VMM is
/// registered there) and only its answer was an error: the saga unwinds the
/// three nodes before it, never asks the sled again, and the VMM stays.
/// Upstream's behaviour, which a faithful model must show (issue 16).
#[tokio::test(start_paused = true)]
async fn the_failed_node_is_not_undone_even_when_half_done() {
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    // The saga will be 1 and its VMM 2 (one counter): registered already,
    // as if REGISTER had reached the sled and its reply had been lost.
    register_on_sled_2(&net, 2).await;
    net.clear_log();
    sled_2_fails(&net, "PUT", "/vmms/2", 503, "reply lost");
    let err = ops.start(ID, 2).await.unwrap_err();
    assert!(
        matches!(&err, OpError::Unwound(m) if m.starts_with("REGISTER failed: ")),
        "{err:?}"
    );
    let saga = store.saga(1);
    assert_eq!(saga.vmm_id, Some(2));
    use SagaNode::*;
    assert_eq!(saga.undone, vec![V2pEnsure, DpdEnsure, MarkAsStarting]);
    assert_eq!(saga.state.name(), "unwound");
    // REGISTER's undo never ran: one request to the sled, REGISTER's own.
    assert_eq!(sled_requests(&net, 2), vec!["PUT /vmms/2"]);
    assert_eq!(store.get(ID).state, InstanceState::Stopped);
    assert_eq!(vmm_ids(&net, 2), vec![(ID, 2)]);
}

/// Each completed node is undone once, latest first, each undo logged
/// before the next starts; nothing is retried. RUN fails (its state change
/// answered 500), so REGISTER's undo runs — and when the sled-agent answers
/// its unregister with 500 too, that undo still succeeds: any sled-agent
/// error but "VMM gone" counts as already unregistered upstream.
#[tokio::test(start_paused = true)]
async fn each_completed_node_is_undone_once_latest_first() {
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    sled_2_fails(&net, "PUT", "/vmms/*/state", 500, "propolis failed");
    sled_2_fails(&net, "DELETE", "/vmms/*", 500, "propolis failed");
    let captured = Captured::at(tracing::Level::WARN);
    let err = {
        let _guard = captured.install();
        ops.start(ID, 2).await.unwrap_err()
    };
    assert!(
        matches!(&err, OpError::Unwound(m) if m.starts_with("RUN failed: ")),
        "{err:?}"
    );
    use SagaNode::*;
    let undone: Vec<Vec<SagaNode>> = store
        .lock()
        .saga_history
        .iter()
        .map(|s| s.undone.clone())
        .filter(|u| !u.is_empty())
        .collect();
    assert_eq!(
        undone,
        vec![
            vec![Register],
            vec![Register, V2pEnsure],
            vec![Register, V2pEnsure, DpdEnsure],
            vec![Register, V2pEnsure, DpdEnsure, MarkAsStarting],
            // The final write: the same list, the saga unwound.
            vec![Register, V2pEnsure, DpdEnsure, MarkAsStarting],
        ]
    );
    let saga = store.saga(1);
    assert_eq!(saga.state.name(), "unwound");
    assert_eq!(
        saga.done,
        vec![MarkAsStarting, DpdEnsure, V2pEnsure, Register]
    );
    // REGISTER, RUN, then REGISTER's undo once: unregister (500, no
    // retry).
    assert_eq!(
        sled_requests(&net, 2),
        vec!["PUT /vmms/2", "PUT /vmms/2/state", "DELETE /vmms/2"]
    );
    // DPD_ENSURE and its undo, each once per switch.
    for zone in zones() {
        assert_eq!(
            net.requests(zone, DPD_PORT),
            vec![LOOKUP, TRIGGER, LOOKUP, TRIGGER]
        );
    }
    // MARK_AS_STARTING and its undo each bumped the generation once.
    let record = store.get(ID);
    assert_eq!(
        (record.state, record.generation),
        (InstanceState::Stopped, 3)
    );
    // The sled-agent's error is in the log as a warning, not a failure.
    let lines = captured.lines();
    assert!(
        lines.len() == 1
            && lines[0].starts_with("WARN ")
            && lines[0].contains("treating it as already unregistered"),
        "{lines:?}"
    );
}

/// An undo that fails makes the saga stuck: terminal, logged durably and
/// as an error event; the undos before it in the unwind stay done and
/// those after it never run; saga recovery does not revive it, even once
/// the fault is gone.
#[tokio::test(start_paused = true)]
async fn a_failed_undo_leaves_the_saga_stuck_for_good() {
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    sled_2_fails(&net, "PUT", "/vmms/*", 500, "out of memory");
    store.lock().fail_nat_clear = Some("database unavailable".into());
    let captured = Captured::at(tracing::Level::WARN);
    let err = {
        let _guard = captured.install();
        ops.start(ID, 2).await.unwrap_err()
    };
    let OpError::Stuck { failed, undo } = &err else {
        panic!("expected a stuck saga, got {err:?}");
    };
    assert_eq!(
        (failed.node, undo.node),
        (SagaNode::Register, SagaNode::DpdEnsure)
    );
    assert!(undo.error.contains("database unavailable"), "{undo}");
    let saga = store.saga(1);
    assert_eq!(
        saga.state,
        SagaState::Stuck {
            failed: failed.clone(),
            undo: undo.clone()
        }
    );
    assert_eq!(
        saga.state.to_string(),
        format!(
            "stuck: undo of DPD_ENSURE failed: {} (after {failed})",
            undo.error
        )
    );
    // V2P_ENSURE was undone before; MARK_AS_STARTING never will be.
    assert_eq!(saga.undone, vec![SagaNode::V2pEnsure]);
    assert_eq!(store.get(ID).state, InstanceState::Starting);
    let lines = captured.lines();
    assert!(
        lines.len() == 1 && lines[0].starts_with("ERROR saga 1 stuck: undo of DPD_ENSURE failed"),
        "{lines:?}"
    );

    // The database is back and Nexus restarts: nothing is resumed.
    store.lock().fail_nat_clear = None;
    let writes = store.lock().saga_history.len();
    net.clear_log();
    let restarted = ops_on(&net, &store, StartImpl::Saga);
    assert!(store.sagas_unfinished().await.unwrap().is_empty());
    assert!(restarted.resume_sagas().await.is_empty());
    assert_eq!(store.saga(1), saga);
    assert_eq!(store.lock().saga_history.len(), writes);
    assert_eq!(net.all_requests(), vec![]);
    assert_eq!(store.get(ID).state, InstanceState::Starting);
    // A store that hands the stuck saga back anyway does not revive it.
    assert!(ops.try_resume_sagas().await.unwrap().is_empty());
}

/// Recovery re-runs the node in flight. The control plane crashed after
/// REGISTER's request reached the sled and before the log recorded it: the
/// resumed saga registers again (idempotent for the same VMM), runs it, and
/// does not re-run the nodes logged done.
#[tokio::test(start_paused = true)]
async fn resume_re_runs_the_node_in_flight() {
    let (net, store, _crashed) = fixture(StartImpl::Saga, InstanceState::Stopped);
    let starting = mark_starting(&store, Some(41)).await;
    store.lock().nat.set_instance(ID, &[nat_entry(2)]);
    store.lock().last_id = 41;
    register_on_sled_2(&net, 41).await;
    net.clear_log();
    use SagaNode::*;
    let saga = SagaRecord {
        starting_generation: Some(starting.generation),
        vmm_id: Some(41),
        done: vec![MarkAsStarting, DpdEnsure, V2pEnsure],
        ..SagaRecord::new(40, ID, 2)
    };
    store.saga_create(&saga).await.unwrap();

    let resumed = resume_in_a_new_nexus(&net, &store).await;
    let [(40, ID, Ok(record))] = &resumed[..] else {
        panic!("{resumed:?}");
    };
    assert_eq!(
        (record.state, record.vmm),
        (InstanceState::Running, Some(41))
    );
    assert_eq!(
        sled_requests(&net, 2),
        vec!["PUT /vmms/41", "PUT /vmms/41/state"]
    );
    for zone in zones() {
        assert_eq!(net.requests(zone, DPD_PORT), Vec::<String>::new());
    }
    assert_saga_40_done_with_one_vmm(&net, &store);
}

/// A resumed unwind runs only the undos not yet logged finished: REGISTER's
/// and V2P_ENSURE's ran before the crash, so the sled is not asked again
/// and only DPD_ENSURE's and MARK_AS_STARTING's run, once each.
#[tokio::test(start_paused = true)]
async fn a_resumed_unwind_does_not_repeat_finished_undos() {
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    store.lock().nat.set_instance(ID, &[nat_entry(2)]);
    use SagaNode::*;
    unwinding_after_run_with_vmm_10(&store, vec![Register, V2pEnsure]).await;
    let resumed = ops.resume_sagas().await;
    assert!(
        matches!(&resumed[..], [(9, ID, Err(OpError::Unwound(m)))] if m.starts_with("RUN failed: ")),
        "{resumed:?}"
    );
    assert!(sled_requests(&net, 2).is_empty());
    for zone in zones() {
        assert_eq!(net.requests(zone, DPD_PORT), vec![LOOKUP, TRIGGER]);
    }
    assert_unwound_to_stopped(&store, 9);
    assert_eq!(store.nat_rows(), vec![]);
}

/// REGISTER's undo, as `sis_ensure_registered_undo`: it destroys the
/// saga's VMM on a sled that answers; a sled-agent that cannot be reached
/// counts as "already unregistered" (upstream's TODO #3238), so the unwind
/// completes — and whatever runs on that sled stays.
#[tokio::test(start_paused = true)]
async fn register_undo_destroys_the_vmm_or_treats_an_unreachable_sled_as_unregistered() {
    use SagaNode::*;
    let unwinding = |id, sled, generation| SagaRecord {
        starting_generation: Some(generation),
        vmm_id: Some(10),
        done: vec![MarkAsStarting, DpdEnsure, V2pEnsure, Register],
        state: SagaState::Unwinding {
            failed: NodeFailure {
                node: Run,
                error: "connection reset".into(),
            },
        },
        ..SagaRecord::new(id, ID, sled)
    };
    let starting = |store: &MemStore, sled| {
        let mut s = store.lock();
        let r = s.instances.get_mut(&ID).unwrap();
        r.state = InstanceState::Starting;
        r.sled = Some(sled);
        r.vmm = Some(10);
        r.generation
    };

    // A sled that answers: the saga's VMM is destroyed.
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    register_on_sled_2(&net, 10).await;
    let generation = starting(&store, 2);
    store
        .saga_create(&unwinding(9, 2, generation))
        .await
        .unwrap();
    let resumed = ops.resume_sagas().await;
    assert!(
        matches!(&resumed[..], [(9, ID, Err(OpError::Unwound(_)))]),
        "{resumed:?}"
    );
    assert!(net.vmms(sled_ip(2)).is_empty());
    assert_eq!(store.get(ID).state, InstanceState::Stopped);

    // Sled 4 is in the database but its sled-agent cannot be reached
    // (connection refused): the undo succeeds and the saga unwinds.
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    store.lock().sleds.push(SledRef {
        id: 4,
        address: sled_ip(4),
    });
    let generation = starting(&store, 4);
    store
        .saga_create(&unwinding(9, 4, generation))
        .await
        .unwrap();
    let captured = resume_saga_9_unwound(&ops, &store).await;
    assert!(net.all_requests().iter().all(|(a, _)| *a != sled_addr(4)));
    assert!(
        captured
            .lines()
            .iter()
            .any(|l| l.contains("treating it as already unregistered")),
        "{:?}",
        captured.lines()
    );
}

/// Which nodes a saga's log says are done.
#[test]
fn a_saga_record_knows_which_nodes_are_done() {
    use SagaNode::*;
    let mut saga = SagaRecord::new(1, ID, 2);
    assert!(SagaNode::ALL.into_iter().all(|n| !saga.is_done(n)));
    saga.done = vec![MarkAsStarting, DpdEnsure];
    assert!(saga.is_done(MarkAsStarting) && saga.is_done(DpdEnsure));
    assert!(!saga.is_done(V2pEnsure) && !saga.is_done(Register) && !saga.is_done(Run));
    assert_eq!(saga.next_node(), Some(V2pEnsure));
}

/// The control plane crashed after RUN's database write and before the
/// saga log recorded the node. The resumed saga re-runs RUN, which must
/// recognise the record as its own (Running on the saga's sled with the
/// saga's VMM) and finish, without asking the sled again; refusing it
/// would unwind a running instance and destroy its VMM.
#[tokio::test(start_paused = true)]
async fn resume_recognises_a_run_whose_write_missed_its_log_entry() {
    let (net, store, _crashed) = fixture(StartImpl::Saga, InstanceState::Stopped);
    let starting = mark_starting(&store, Some(41)).await;
    let agent = SledAgentClient::new(HttpClient::new(net.connector(), sled_addr(2)));
    agent.vmm_register(41, ID).await.unwrap();
    agent.vmm_put_state(41, VmmState::Running).await.unwrap();
    let running = store
        .update_if(
            ID,
            starting.generation,
            RuntimeUpdate {
                state: InstanceState::Running,
                sled: Some(2),
                vmm: Some(41),
            },
        )
        .await
        .unwrap();
    store.lock().nat.set_instance(ID, &[nat_entry(2)]);
    store.lock().last_id = 41;
    use SagaNode::*;
    let saga = SagaRecord {
        starting_generation: Some(starting.generation),
        vmm_id: Some(41),
        done: vec![MarkAsStarting, DpdEnsure, V2pEnsure, Register],
        ..SagaRecord::new(40, ID, 2)
    };
    store.saga_create(&saga).await.unwrap();
    net.clear_log();

    let resumed = resume_in_a_new_nexus(&net, &store).await;
    let [(40, ID, Ok(record))] = &resumed[..] else {
        panic!("{resumed:?}");
    };
    assert_eq!(*record, running);
    assert_eq!(store.get(ID), running, "the record is not written again");
    assert_eq!(
        net.all_requests(),
        vec![],
        "RUN does not ask the sled again"
    );
    assert_eq!(net.vmms(sled_ip(2))[0].state, VmmState::Running);
    assert_saga_40_done_with_one_vmm(&net, &store);
}

/// A saga acts on the instance only while the record is still the one its
/// MARK_AS_STARTING wrote (its generation, Starting). A record that has
/// moved on is no longer the saga's, even when it says Starting again
/// (another start's): DPD_ENSURE refuses it, programs nothing, and the
/// unwind leaves the other start's record alone.
#[tokio::test(start_paused = true)]
async fn a_saga_does_not_act_on_a_record_another_start_has_since_marked() {
    let (net, store, _crashed) = fixture(StartImpl::Saga, InstanceState::Stopped);
    let starting = |sled, vmm| RuntimeUpdate {
        state: InstanceState::Starting,
        sled: Some(sled),
        vmm: Some(vmm),
    };
    // Ours: Starting on sled 3 at generation 2. Then the record is put
    // back to Stopped (3) and another start marks it Starting on sled 2
    // with its own VMM (4).
    let ours = store.update_if(ID, 1, starting(3, 41)).await.unwrap();
    store
        .update_if(
            ID,
            ours.generation,
            RuntimeUpdate {
                state: InstanceState::Stopped,
                sled: None,
                vmm: None,
            },
        )
        .await
        .unwrap();
    let theirs = store.update_if(ID, 3, starting(2, 50)).await.unwrap();
    let saga = SagaRecord {
        starting_generation: Some(ours.generation),
        vmm_id: Some(41),
        done: vec![SagaNode::MarkAsStarting],
        ..SagaRecord::new(40, ID, 3)
    };
    store.saga_create(&saga).await.unwrap();
    net.clear_log();

    let resumed = resume_in_a_new_nexus(&net, &store).await;
    assert!(
        matches!(
            &resumed[..],
            [(40, ID, Err(OpError::Unwound(m)))]
                if m.starts_with("DPD_ENSURE failed: generation conflict")
        ),
        "{resumed:?}"
    );
    assert_eq!(store.get(ID), theirs);
    assert_eq!(store.nat_rows(), vec![], "no NAT rows for sled 3");
    assert_eq!(net.all_requests(), vec![], "no dpd told, no sled asked");
    assert_eq!(store.saga(40).state.name(), "unwound");
}

/// V2P_ENSURE's undo activates the V2P task at the end of the unwind —
/// also when the unwind gets stuck on an undo after it. Register fails,
/// V2P_ENSURE is undone, then DPD_ENSURE's undo fails: the saga is stuck,
/// and the task is activated a second time (after V2P_ENSURE's own
/// activation) so that it stops mapping what the saga undid.
#[tokio::test(start_paused = true)]
async fn a_stuck_unwind_still_activates_the_v2p_task_for_the_undone_v2p_ensure() {
    let (net, store, ops, v2p_task) =
        fixture_with_v2p_task(StartImpl::Saga, InstanceState::Stopped);
    sled_2_fails(&net, "PUT", "/vmms/*", 500, "out of memory");
    store.lock().fail_nat_clear = Some("database unavailable".into());
    let seen = observe_v2p_activations(&store, v2p_task);
    let started = ops.start(ID, 2).await;
    assert!(
        matches!(&started, Err(OpError::Stuck { undo, .. }) if undo.node == SagaNode::DpdEnsure),
        "{started:?}"
    );
    settle().await;
    // V2P_ENSURE's activation, then its undo's (the record stays Starting:
    // MARK_AS_STARTING is never undone).
    assert_eq!(
        *seen.lock().unwrap(),
        vec![InstanceState::Starting, InstanceState::Starting]
    );
}

/// Instance 7 Starting on sled 2 with VMM 10, and saga 9 unwinding it
/// after RUN failed, every node before RUN done and the undos `undone`
/// finished: the next undo to run is that of the node before them
/// (REGISTER's when none is).
async fn unwinding_after_run_with_vmm_10(store: &MemStore, undone: Vec<SagaNode>) {
    let starting = mark_starting(store, Some(10)).await;
    use SagaNode::*;
    let saga = SagaRecord {
        starting_generation: Some(starting.generation),
        vmm_id: Some(10),
        done: vec![MarkAsStarting, DpdEnsure, V2pEnsure, Register],
        undone,
        state: SagaState::Unwinding {
            failed: NodeFailure {
                node: Run,
                error: "propolis failed".into(),
            },
        },
        ..SagaRecord::new(9, ID, 2)
    };
    store.saga_create(&saga).await.unwrap();
}

/// REGISTER's undo unregisters the saga's own VMM only, by its propolis
/// id (upstream's `vmm_unregister`). Another VMM of the instance on the
/// same sled (another start registered its own beside ours) stays.
#[tokio::test(start_paused = true)]
async fn register_undo_leaves_another_vmm_of_the_instance_alone() {
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    register_on_sled_2(&net, 50).await;
    register_on_sled_2(&net, 10).await;
    assert_eq!(vmm_ids(&net, 2), vec![(ID, 10), (ID, 50)]);
    unwinding_after_run_with_vmm_10(&store, vec![]).await;
    net.clear_log();
    let resumed = ops.resume_sagas().await;
    assert!(
        matches!(&resumed[..], [(9, ID, Err(OpError::Unwound(_)))]),
        "{resumed:?}"
    );
    assert_unwound_to_stopped(&store, 9);
    assert_eq!(sled_requests(&net, 2), vec!["DELETE /vmms/10"]);
    assert_eq!(vmm_ids(&net, 2), vec![(ID, 50)]);
}

/// A VMM that is gone by the time REGISTER's undo unregisters it is what
/// the undo wanted: sled-agent answers success (`ensure_unregistered` of a
/// VMM it does not have), and there is nothing to warn about — unlike a
/// sled that answers with an error, which is logged and treated as
/// already unregistered.
#[tokio::test(start_paused = true)]
async fn register_undo_of_a_vmm_already_gone_succeeds_without_a_warning() {
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    register_on_sled_2(&net, 50).await;
    unwinding_after_run_with_vmm_10(&store, vec![]).await;
    net.clear_log();
    let captured = resume_saga_9_unwound(&ops, &store).await;
    assert_eq!(sled_requests(&net, 2), vec!["DELETE /vmms/10"]);
    assert_eq!(captured.lines(), Vec::<String>::new());
    assert_eq!(vmm_ids(&net, 2), vec![(ID, 50)]);
}

// ---- stop, and the instance-start networking issue end to end ----

#[tokio::test(start_paused = true)]
async fn legacy_stop_reensures_nat_and_v2p() {
    let (net, store, ops) = fixture(StartImpl::Inline, InstanceState::Creating);
    ops.create(ID, 2).await.unwrap();
    ops.stop(ID).await.unwrap();
    cold_boot(&net);

    // The bug: start after a cold boot programs nothing.
    ops.start(ID, 2).await.unwrap();
    for zone in zones() {
        assert_eq!(net.nat(zone), vec![]);
    }
    // The workaround: stop (the Propolis-generation-change handler
    // re-ensures NAT and V2P)...
    let stopped = ops.stop(ID).await.unwrap();
    assert_eq!(
        (stopped.state, stopped.sled, stopped.vmm),
        (InstanceState::Stopped, None, None)
    );
    assert_eq!(vmm_count(&net), 0);
    assert_networking(&net, &store, Some(2));
    // ...and start again.
    ops.start(ID, 2).await.unwrap();
    assert_networking(&net, &store, Some(2));
}

#[tokio::test(start_paused = true)]
async fn saga_stop_removes_mappings_and_start_restores_them_after_a_cold_boot() {
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Creating);
    ops.create(ID, 2).await.unwrap();
    assert_networking_settles(&net, &store, Some(2)).await;
    let stopped = ops.stop(ID).await.unwrap();
    assert_eq!(stopped.state, InstanceState::Stopped);
    assert_eq!(vmm_count(&net), 0);
    assert_networking_settles(&net, &store, None).await;

    cold_boot(&net);
    ops.start(ID, 3).await.unwrap();
    assert_networking_settles(&net, &store, Some(3)).await;
}

/// A stop while a switch cannot be reached (its sidecar off, its dpd
/// failing) still stops the instance: the VMM is gone, so the record says
/// Stopped. Under the pull model the stop only clears the rows and triggers
/// each dpd; a trigger that fails is logged, and that switch removes the
/// entry on its next periodic pull. Before the fix, a stop that failed to
/// remove NAT on one switch returned early and left the instance Running
/// with no VMM for ever (found by `racksim fuzz`, scenarios/regressions/).
#[tokio::test(start_paused = true)]
async fn saga_stop_with_an_unreachable_switch_still_stops() {
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Creating);
    ops.create(ID, 2).await.unwrap();
    background(&net, &store).await;
    let [up, failing] = zones();
    nat_trigger_fails(&net, failing, 503, "switch unavailable");
    let stopped = ops.stop(ID).await.unwrap();
    assert_eq!(stopped.state, InstanceState::Stopped);
    assert_eq!(store.get(ID).state, InstanceState::Stopped);
    assert_eq!(vmm_count(&net), 0);
    dpd_pull(&net, &store, up).await;
    assert_eq!(net.nat(up), vec![]);
    // Until its own pull, the unreachable switch keeps the entry.
    assert_eq!(net.nat(failing), vec![nat_entry(2).to_dpd()]);
    dpd_pull(&net, &store, failing).await;
    assert_eq!(net.nat(failing), vec![]);
    // And it starts again once the switch is back.
    net.clear_failures();
    ops.start(ID, 3).await.unwrap();
    assert_networking_settles(&net, &store, Some(3)).await;
}

/// Plays the V2P task's read of the record: on each activation, records
/// the state instance 7's record is in when the task gets to run (the
/// operation runs on until its next store call, which yields first).
fn observe_v2p_activations(
    store: &MemStore,
    v2p_task: Arc<Notify>,
) -> Arc<std::sync::Mutex<Vec<InstanceState>>> {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (store, log) = (store.clone(), seen.clone());
    tokio::spawn(async move {
        loop {
            v2p_task.notified().await;
            log.lock().unwrap().push(store.get(ID).state);
        }
    });
    seen
}

/// Lets the observer see an activation made by the last step.
async fn settle() {
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
}

/// The V2P task reads the records, so stop must activate it only once the
/// record says Stopped: activated earlier, it would keep the mappings of a
/// Running instance until its next periodic run.
#[tokio::test(start_paused = true)]
async fn saga_stop_activates_v2p_after_marking_stopped() {
    let (_net, store, ops, v2p_task) =
        fixture_with_v2p_task(StartImpl::Saga, InstanceState::Running);
    {
        let mut s = store.lock();
        let record = s.instances.get_mut(&ID).unwrap();
        (record.sled, record.vmm) = (Some(2), Some(10));
    }
    let seen = observe_v2p_activations(&store, v2p_task);
    assert_eq!(ops.stop(ID).await.unwrap().state, InstanceState::Stopped);
    settle().await;
    assert_eq!(*seen.lock().unwrap(), vec![InstanceState::Stopped]);
}

/// Likewise V2P_ENSURE's undo activates the task after MARK_AS_STARTING's
/// undo has put the record back to Stopped.
#[tokio::test(start_paused = true)]
async fn saga_unwind_activates_v2p_after_restoring_stopped() {
    let (net, store, ops, v2p_task) =
        fixture_with_v2p_task(StartImpl::Saga, InstanceState::Stopped);
    sled_2_fails(&net, "PUT", "/vmms/*", 500, "out of memory");
    let seen = observe_v2p_activations(&store, v2p_task);
    let started = ops.start(ID, 2).await;
    assert!(matches!(started, Err(OpError::Unwound(_))), "{started:?}");
    settle().await;
    // V2P_ENSURE's activation (the instance Starting on sled 2), then the
    // undo's.
    assert_eq!(
        *seen.lock().unwrap(),
        vec![InstanceState::Starting, InstanceState::Stopped]
    );
}

#[tokio::test(start_paused = true)]
async fn stop_refused_unless_running() {
    let (_net, _store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    assert!(matches!(
        ops.stop(ID).await,
        Err(OpError::Refused {
            state: InstanceState::Stopped,
            op: "stop",
            ..
        })
    ));
    assert_eq!(
        ops.start(ID, 99).await.unwrap_err(),
        OpError::UnknownSled(99)
    );
}

/// A stop whose VMM the sled no longer knows (it rebooted: 404 to the
/// stop) still stops the instance: the VMM being gone is what a stop
/// wants.
#[tokio::test(start_paused = true)]
async fn stop_of_a_vmm_the_sled_no_longer_knows_still_stops() {
    for imp in StartImpl::ALL {
        let (net, store, ops) = fixture(imp, InstanceState::Stopped);
        ops.start(ID, 2).await.unwrap();
        net.add_sled_agent(sled_ip(2));
        let stopped = ops.stop(ID).await.unwrap();
        assert_eq!(
            (stopped.state, stopped.sled, stopped.vmm),
            (InstanceState::Stopped, None, None),
            "{imp}"
        );
        assert_eq!(store.get(ID), stopped, "{imp}");
    }
}

/// A stop whose VMM the sled fails to destroy (any error but 404) fails,
/// and the instance runs as before: the record says Running on its sled
/// with its VMM — naive and saga put back the Running they had marked
/// Stopping (two writes), inline never wrote it.
#[tokio::test(start_paused = true)]
async fn stop_the_sled_fails_leaves_the_instance_running() {
    for imp in StartImpl::ALL {
        let (net, store, ops) = fixture(imp, InstanceState::Stopped);
        let running = ops.start(ID, 2).await.unwrap();
        sled_2_fails(&net, "PUT", "/vmms/*/state", 500, "propolis busy");
        let err = ops.stop(ID).await.unwrap_err();
        assert!(
            matches!(&err, OpError::Client(m) if m.ends_with("HTTP 500: propolis busy")),
            "{imp}: {err:?}"
        );
        let after = store.get(ID);
        let writes = match imp {
            StartImpl::Inline => 0,
            StartImpl::Naive | StartImpl::Saga => 2,
        };
        assert_eq!(
            (after.state, after.sled, after.vmm, after.generation),
            (
                InstanceState::Running,
                Some(2),
                running.vmm,
                running.generation + writes
            ),
            "{imp}"
        );
        assert_eq!(vmm_count(&net), 1, "{imp}");
    }
}

/// Once the sled has destroyed the VMM, the stop's record is Stopping with
/// no VMM while it cleans up the networking, so the instance watcher that
/// runs meanwhile does not watch it: it cannot take the VMM the stop
/// destroyed for one that died and fail the instance (which would make the
/// stop lose its conditional update, and reincarnation start what the
/// operator stopped).
#[tokio::test(start_paused = true)]
async fn the_watcher_does_not_fail_an_instance_whose_stop_is_cleaning_up() {
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    ops.start(ID, 2).await.unwrap();
    let connector = net.connector();
    let watch = once_held_at(
        &store,
        HoldPoint::NatClear,
        watcher::instance_watcher(&ops, &connector, &[]),
    );
    let (stopped, watched) = tokio::join!(ops.stop(ID), watch);
    let watched = watched.unwrap();
    assert!(watched.is_empty(), "{watched:?}");
    assert_eq!(stopped.unwrap().state, InstanceState::Stopped);
    assert_eq!(store.get(ID).state, InstanceState::Stopped);
}

// ---- inline: ensure and remove on every switch and sled ----

/// Inline's ensure NAT leaves a switch's identical entry alone (one GET)
/// and replaces an entry with another target (GET, DELETE, PUT).
#[tokio::test(start_paused = true)]
async fn inline_ensure_nat_keeps_an_identical_entry_and_replaces_another_target() {
    let (net, store, ops) = fixture(StartImpl::Inline, InstanceState::Creating);
    net.insert_nat(zone_ip(1), nat_entry(2).to_dpd());
    net.insert_nat(zone_ip(2), nat_entry(3).to_dpd());
    ops.create(ID, 2).await.unwrap();
    assert_networking(&net, &store, Some(2));
    assert_eq!(net.requests(zone_ip(1), DPD_PORT), vec![LOOKUP, NAT_GET]);
    assert_eq!(
        net.requests(zone_ip(2), DPD_PORT),
        vec![LOOKUP, NAT_GET, NAT_DELETE, NAT_PUT]
    );
}

/// Switch 2's dpd holds an entry for another target; its DELETE answers
/// `delete`.
fn switch_2_holds_a_stale_entry(net: &FakeNet, delete: FakeResponse) {
    let stale = serde_json::to_value(nat_entry(3).target).unwrap();
    let identifiers = net.with_dpd(zone_ip(2), |dpd| dpd.identifiers());
    let identifiers = serde_json::to_value(identifiers).unwrap();
    net.set_custom(dpd_addr(zone_ip(2)), move |method, path, _body| {
        match (method, path) {
            ("GET", "/switch/identifiers") => FakeResponse::json(200, identifiers.clone()),
            ("GET", "/nat/ipv4/203.0.113.10/0") => FakeResponse::json(200, stale.clone()),
            ("DELETE", "/nat/ipv4/203.0.113.10/0") => delete.clone(),
            _ => FakeResponse::empty(204),
        }
    });
}

/// Replacing a stale entry: a DELETE answered 404 (the entry went
/// meanwhile) is what was wanted, and the new entry is put; any other
/// error fails the ensure for that switch, which is then not given the
/// new entry (the other switch is).
#[tokio::test(start_paused = true)]
async fn inline_ensure_nat_replaces_a_stale_entry_gone_before_its_delete_and_fails_on_other_errors()
{
    let (net, _store, ops) = fixture(StartImpl::Inline, InstanceState::Creating);
    switch_2_holds_a_stale_entry(&net, FakeResponse::error(404, "no such entry"));
    assert_eq!(
        ops.create(ID, 2).await.unwrap().state,
        InstanceState::Running
    );
    assert_eq!(
        net.requests(zone_ip(2), DPD_PORT),
        vec![LOOKUP, NAT_GET, NAT_DELETE, NAT_PUT]
    );

    let (net, _store, ops) = fixture(StartImpl::Inline, InstanceState::Creating);
    switch_2_holds_a_stale_entry(&net, FakeResponse::error(500, "switch busy"));
    assert_eq!(
        ops.create(ID, 2).await.unwrap_err(),
        OpError::Client(format!(
            "DELETE /nat/ipv4/203.0.113.10/0 on {}: HTTP 500: switch busy",
            dpd_addr(zone_ip(2))
        ))
    );
    assert_eq!(
        net.requests(zone_ip(2), DPD_PORT),
        vec![LOOKUP, NAT_GET, NAT_DELETE]
    );
    assert_eq!(net.nat(zone_ip(1)), vec![nat_entry(2).to_dpd()]);
    assert_eq!(vmm_count(&net), 0, "a create whose NAT failed runs nothing");
}

/// Inline's removals treat 404 (nothing there) as removed: a switch
/// without the entry and a sled without the mapping do not fail a delete.
#[tokio::test(start_paused = true)]
async fn inline_delete_counts_404_as_removed() {
    let (net, _store, ops) = fixture(StartImpl::Inline, InstanceState::Stopped);
    for n in [1, 3] {
        net.insert_v2p(sled_ip(n), mapping(2));
    }
    let path = "/nat/ipv4/203.0.113.10/0";
    let absent = FakeResponse::error(404, "no such entry");
    net.fail(zone_ip(1), DPD_PORT, "DELETE", path, Some(absent.clone()));
    net.fail(sled_ip(1), SLED_AGENT_PORT, "DELETE", "/v2p", Some(absent));
    assert_eq!(ops.delete(ID).await.unwrap().state, InstanceState::Deleted);
    assert_eq!(net.v2p(sled_ip(3)), vec![]);
}

/// Any other error of a switch or a sled fails inline's delete, with that
/// error, after every other switch and sled has had its removal; the
/// instance is Deleted all the same.
#[tokio::test(start_paused = true)]
async fn inline_delete_reports_a_failing_switch_or_sled_and_removes_the_rest() {
    // A switch fails: the other switch's entry and every mapping go.
    let (net, store, ops) = fixture(StartImpl::Inline, InstanceState::Stopped);
    for zone in zones() {
        net.insert_nat(zone, nat_entry(2).to_dpd());
    }
    for n in [1, 3] {
        net.insert_v2p(sled_ip(n), mapping(2));
    }
    let path = "/nat/ipv4/203.0.113.10/0";
    let busy = FakeResponse::error(500, "busy");
    net.fail(zone_ip(1), DPD_PORT, "DELETE", path, Some(busy.clone()));
    assert_eq!(
        ops.delete(ID).await.unwrap_err(),
        OpError::Client(format!(
            "DELETE {path} on {}: HTTP 500: busy",
            dpd_addr(zone_ip(1))
        ))
    );
    assert_eq!(store.get(ID).state, InstanceState::Deleted);
    assert_eq!(net.nat(zone_ip(2)), vec![]);
    for n in [1, 3] {
        assert_eq!(net.v2p(sled_ip(n)), vec![], "V2P on sled {n}");
    }

    // A sled fails: the other sled's mapping goes.
    let (net, store, ops) = fixture(StartImpl::Inline, InstanceState::Stopped);
    for n in [1, 3] {
        net.insert_v2p(sled_ip(n), mapping(2));
    }
    net.fail(sled_ip(1), SLED_AGENT_PORT, "DELETE", "/v2p", Some(busy));
    assert_eq!(
        ops.delete(ID).await.unwrap_err(),
        OpError::Client(format!("DELETE /v2p on {}: HTTP 500: busy", sled_addr(1)))
    );
    assert_eq!(store.get(ID).state, InstanceState::Deleted);
    assert_eq!(net.v2p(sled_ip(3)), vec![]);
}

/// Inline's remove V2P deletes the mappings of the instance's own NICs
/// (its VNI and virtual IP) only: another instance of the VPC and another
/// VPC's NIC with the same virtual IP keep theirs.
#[tokio::test(start_paused = true)]
async fn inline_delete_leaves_other_nics_mappings_alone() {
    let (net, _store, ops) = fixture(StartImpl::Inline, InstanceState::Stopped);
    let eight = instance_v2p_mappings(&instance(8, InstanceState::Running), sled_ip(3))[0];
    let other_vpc = VirtualNetworkInterfaceHost {
        vni: GUEST_VNI + 1,
        ..mapping(3)
    };
    for m in [mapping(2), eight, other_vpc] {
        net.insert_v2p(sled_ip(1), m);
    }
    ops.delete(ID).await.unwrap();
    let mut kept = vec![eight, other_vpc];
    kept.sort();
    assert_eq!(net.v2p(sled_ip(1)), kept);
}

// ---- background tasks ----

/// One desired set for every sled, as upstream's `V2PManager`: the
/// mappings of every instance with an active VMM (Running, Starting, or
/// Stopping while its record names the VMM), an instance's own sled
/// included.
#[tokio::test(start_paused = true)]
async fn v2p_sync_removes_extras_and_adds_missing_per_sled() {
    let (net, store, _ops) = fixture(StartImpl::Saga, InstanceState::Running);
    store.lock().instances.get_mut(&ID).unwrap().sled = Some(2);
    // Instance 8: Starting on sled 3 (mapped); 9: Stopped (not mapped);
    // 10: Stopping on sled 1, its VMM not yet destroyed (mapped); 11:
    // Stopping on sled 1, its VMM destroyed (not mapped).
    let mut eight = instance(8, InstanceState::Starting);
    eight.sled = Some(3);
    store.insert(eight.clone());
    store.insert(instance(9, InstanceState::Stopped));
    let mut ten = instance(10, InstanceState::Stopping);
    ten.sled = Some(1);
    ten.vmm = Some(10);
    store.insert(ten.clone());
    let mut eleven = instance(11, InstanceState::Stopping);
    eleven.sled = Some(1);
    store.insert(eleven);
    let eight_on_3 = instance_v2p_mappings(&eight, sled_ip(3))[0];
    let ten_on_1 = instance_v2p_mappings(&ten, sled_ip(1))[0];
    let nine_on_1 = instance_v2p_mappings(&instance(9, InstanceState::Stopped), sled_ip(1))[0];
    let other_vni = VirtualNetworkInterfaceHost {
        vni: SERVICES_VNI,
        ..nine_on_1
    };

    // Sled 1: a stale mapping of 7 (old sled 3), one of 8, and a mapping
    // of another VNI that is not ours to touch.
    net.insert_v2p(sled_ip(1), mapping(3));
    net.insert_v2p(sled_ip(1), other_vni);
    net.insert_v2p(sled_ip(1), eight_on_3);
    // Sled 2: 7's own mapping, which its own sled is given too.
    net.insert_v2p(sled_ip(2), mapping(2));
    // Sled 3: nothing.

    let outcomes = v2p_sync(&net.connector(), &store).await.unwrap();
    let ok = |unchanged, removed, added| {
        Ok(V2pSledOutcome {
            unchanged,
            removed,
            added,
            failures: vec![],
        })
    };
    assert_eq!(
        outcomes,
        [(1, ok(1, 1, 2)), (2, ok(1, 0, 2)), (3, ok(0, 0, 3))]
            .into_iter()
            .collect()
    );
    let mut desired = vec![mapping(2), eight_on_3, ten_on_1];
    desired.sort();
    let mut sled1 = [desired.clone(), vec![other_vni]].concat();
    sled1.sort();
    assert_eq!(net.v2p(sled_ip(1)), sled1);
    assert_eq!(net.v2p(sled_ip(2)), desired);
    assert_eq!(net.v2p(sled_ip(3)), desired);

    // Converged: the next pass changes nothing; a sled that cannot be
    // listed fails alone.
    net.clear_log();
    sled_2_fails(&net, "GET", "/v2p", 503, "busy");
    let outcomes = v2p_sync(&net.connector(), &store).await.unwrap();
    assert_eq!(outcomes[&1], ok(3, 0, 0));
    assert_eq!(outcomes[&3], ok(3, 0, 0));
    assert!(
        matches!(&outcomes[&2], Err(m) if m.contains("HTTP 503: busy")),
        "{:?}",
        outcomes[&2]
    );
    assert!(net
        .all_requests()
        .iter()
        .all(|(_, r)| r.starts_with("GET ")));
}

/// A V2P delete answered 404 (the mapping is already gone) counts as
/// removed; any other error is a failure of that sled, and the rest of
/// its activation goes on.
#[tokio::test(start_paused = true)]
async fn v2p_sync_counts_a_delete_answered_404_as_removed_and_other_errors_as_failures() {
    let (net, store, _ops) = fixture(StartImpl::Saga, InstanceState::Running);
    store.lock().instances.get_mut(&ID).unwrap().sled = Some(2);
    // Stale mappings of instance 7 (as if it ran on sled 3, then 1).
    net.insert_v2p(sled_ip(1), mapping(3));
    net.insert_v2p(sled_ip(3), mapping(1));
    net.fail(
        sled_ip(1),
        SLED_AGENT_PORT,
        "DELETE",
        "/v2p",
        Some(FakeResponse::error(404, "no such mapping")),
    );
    net.fail(
        sled_ip(3),
        SLED_AGENT_PORT,
        "DELETE",
        "/v2p",
        Some(FakeResponse::error(500, "busy")),
    );
    let outcomes = v2p_sync(&net.connector(), &store).await.unwrap();
    let outcome = |removed, failures| {
        Ok(V2pSledOutcome {
            unchanged: 0,
            removed,
            added: 1,
            failures,
        })
    };
    assert_eq!(outcomes[&1], outcome(1, vec![]));
    assert_eq!(
        outcomes[&3],
        outcome(
            0,
            vec![format!(
                "removing {}: DELETE /v2p on {}: HTTP 500: busy",
                mapping(1),
                sled_addr(3)
            )]
        )
    );
    // Instance 7's own sled is given its mapping too.
    assert_eq!(
        outcomes[&2],
        Ok(V2pSledOutcome {
            unchanged: 0,
            removed: 0,
            added: 1,
            failures: vec![],
        })
    );
}

// ---- the versioned NAT table ----

fn nat_at(ip: u8, sled: u32) -> NatEntry {
    NatEntry {
        external_ip: Ipv4Addr::new(203, 0, 113, ip),
        ..nat_entry(sled)
    }
}

/// `(gen, deleted, external IP's last octet, target sled)` of each change.
/// Asserts the changeset `table` serves from `from_gen`, at most `limit`
/// rows, as [`changes`] writes it.
#[track_caller]
fn assert_changes(table: &NatTable, from_gen: i64, limit: u32, expected: &[(i64, bool, u8, u16)]) {
    assert_eq!(changes(table, from_gen, limit), expected);
}

fn changes(table: &NatTable, from_gen: i64, limit: u32) -> Vec<(i64, bool, u8, u16)> {
    table
        .changeset(from_gen, limit)
        .iter()
        .map(|c| {
            (
                c.gen,
                c.deleted,
                c.external_address.octets()[3],
                c.sled_address.segments()[3] - 0x100,
            )
        })
        .collect()
}

#[test]
fn nat_table_versions_every_change_and_serves_changesets() {
    let mut table = NatTable::default();
    assert_eq!(table.version(), 0);
    assert!(table.changeset(0, 100).is_empty());

    // Instance 7 gets two entries (versions 1, 2), instance 8 one (3).
    assert!(table.set_instance(7, &[nat_at(10, 2), nat_at(11, 2)]));
    assert!(table.set_instance(8, &[nat_at(12, 1)]));
    assert_eq!(table.version(), 3);
    // Setting identical rows changes nothing and spends no version.
    assert!(!table.set_instance(7, &[nat_at(11, 2), nat_at(10, 2)]));
    assert_eq!(table.version(), 3);

    // Instance 7 moves to sled 3: its old rows are removed (4, 5), the new
    // ones added (6, 7). Instance 8 is cleared (8).
    assert!(table.set_instance(7, &[nat_at(10, 3), nat_at(11, 3)]));
    assert!(table.clear_instance(8));
    assert!(!table.clear_instance(8));
    assert_eq!(table.version(), 8);
    let mut live = vec![nat_at(10, 3), nat_at(11, 3)];
    live.sort();
    assert_eq!(table.live(), live);

    // From 0 (a restarted dpd): each row once, in version order — a live
    // row at its addition, a removed row only at its removal (omicron's
    // `nat_changes` view). Versions 1, 2 and 3 were the additions of rows
    // since removed: they are not served.
    let every_row = vec![
        (4, true, 10, 2),
        (5, true, 11, 2),
        (6, false, 10, 3),
        (7, false, 11, 3),
        (8, true, 12, 1),
    ];
    assert_changes(&table, 0, 100, &every_row);
    // From the middle: the same rows, those whose one version is later.
    assert_changes(&table, 3, 100, &every_row);
    assert_changes(
        &table,
        5,
        100,
        &[(6, false, 10, 3), (7, false, 11, 3), (8, true, 12, 1)],
    );
    assert_changes(&table, 7, 100, &[(8, true, 12, 1)]);
    assert!(table.changeset(8, 100).is_empty());
    // The limit keeps the oldest changes; a dpd asks again from the last.
    assert_changes(&table, 0, 2, &[(4, true, 10, 2), (5, true, 11, 2)]);
    assert_changes(&table, 5, 2, &[(6, false, 10, 3), (7, false, 11, 3)]);
}

/// A row added and removed after `from_gen` is one change, its removal —
/// not its addition and then its removal — and a dpd that pulls from 0
/// and applies the changeset ends with exactly the live rows.
#[test]
fn nat_changeset_serves_each_row_once() {
    let mut table = NatTable::default();
    assert!(table.set_instance(7, &[nat_at(10, 2)])); // 1: added
    assert!(table.set_instance(7, &[nat_at(10, 3)])); // 2: removed, 3: added
    assert!(table.clear_instance(7)); // 4: removed
    assert!(table.set_instance(8, &[nat_at(11, 4)])); // 5: added
                                                      // Every row at most once: no version appears twice, no row twice.
    let all = changes(&table, 0, 100);
    assert_eq!(
        all,
        vec![(2, true, 10, 2), (4, true, 10, 3), (5, false, 11, 4)]
    );
    // After version 1 the first row is still one change (its removal),
    // not two.
    assert_changes(&table, 1, 100, &all);
    // Applying the whole changeset to an empty set leaves the live rows.
    let mut applied: Vec<NatEntry> = Vec::new();
    for c in table.changeset(0, 100) {
        applied.retain(|e| *e != c.entry());
        if !c.deleted {
            applied.push(c.entry());
        }
    }
    assert_eq!(applied, table.live());
}

#[test]
fn nat_entry_view_carries_the_entry_and_its_wire_names() {
    let mut table = NatTable::default();
    table.set_instance(7, &[nat_entry(2)]);
    let view = table.changeset(0, 1)[0];
    assert_eq!(view.entry(), nat_entry(2));
    let wire = serde_json::to_value(view).unwrap();
    let mut keys: Vec<&str> = wire
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "deleted",
            "external_address",
            "first_port",
            "gen",
            "last_port",
            "mac",
            "sled_address",
            "vni"
        ]
    );
}

/// A service zone's row: `nat_at` with the services VNI.
fn service_at(ip: u8, sled: u32) -> NatEntry {
    let mut e = nat_at(ip, sled);
    e.target.vni = SERVICES_VNI;
    e
}

#[test]
fn service_zone_sync_replaces_the_services_rows_and_counts_only_additions() {
    let mut table = NatTable::default();
    table.set_instance(7, &[nat_at(10, 2)]); // version 1
                                             // The first sync adds both zones' rows (2, 3).
    assert_eq!(
        table.sync_service_zones(&[service_at(20, 1), service_at(21, 2)]),
        2
    );
    assert_eq!(
        table.live_services(),
        vec![service_at(20, 1), service_at(21, 2)]
    );
    // Instance rows are not service rows, and the reverse.
    assert_eq!(table.live(), vec![nat_at(10, 2)]);
    // The same set again: nothing added, no version spent.
    assert_eq!(
        table.sync_service_zones(&[service_at(21, 2), service_at(20, 1)]),
        0
    );
    assert_eq!(table.version(), 3);
    // A collection without sled 2's zone: its row is soft-deleted (4), and
    // upstream's count is still 0 — removals alone trigger no dpd.
    assert_eq!(table.sync_service_zones(&[service_at(20, 1)]), 0);
    assert_eq!(table.version(), 4);
    assert_changes(&table, 3, 100, &[(4, true, 21, 2)]);
    // The zone moves to sled 3: a new row (5).
    assert_eq!(
        table.sync_service_zones(&[service_at(20, 1), service_at(21, 3)]),
        1
    );
    assert_changes(&table, 4, 100, &[(5, false, 21, 3)]);
    // The instance's row was never touched by any of it.
    assert_eq!(table.live_of(7), vec![nat_at(10, 2)]);
}

/// A fresh table in which two writers have begun setting an instance's
/// row, `a`'s writer first, and neither has committed: the table and
/// their versions, 1 and 2.
fn two_begun(a: (u32, NatEntry), b: (u32, NatEntry)) -> (NatTable, i64, i64) {
    let mut table = NatTable::default();
    let first = table.begin_set_instance(a.0, &[a.1]).unwrap();
    let second = table.begin_set_instance(b.0, &[b.1]).unwrap();
    assert_eq!((first, second), (1, 2));
    (table, first, second)
}

/// The shared listing of live instance rows is the table's rows at every
/// read: each commit that writes a row (an add, a soft delete) lists them
/// again, a statement begun but not committed does not, and between
/// writes every read is one allocation. Ordered by instance, then entry,
/// whatever order the rows were written in; a clone lists the same rows,
/// and a table equals, and prints as, another with the same rows whether
/// or not either has been listed.
#[test]
fn the_shared_listing_of_row_versions_follows_every_commit() {
    let listed = |t: &NatTable| -> Vec<(u32, u8, i64)> {
        t.live_instance_versions_shared()
            .iter()
            .map(|&(i, e, v)| (i, e.external_ip.octets()[3], v))
            .collect()
    };
    let mut table = NatTable::default();
    assert!(listed(&table).is_empty());
    assert!(table.set_instance(8, &[nat_at(12, 1)]));
    assert!(table.set_instance(7, &[nat_at(11, 2), nat_at(10, 2)]));
    assert_eq!(listed(&table), [(7, 10, 3), (7, 11, 2), (8, 12, 1)]);
    let first = table.live_instance_versions_shared();
    assert!(std::sync::Arc::ptr_eq(
        &first,
        &table.live_instance_versions_shared()
    ));

    // Begun, not committed: nothing written, the same listing.
    let pending = table.begin_set_instance(8, &[nat_at(13, 1)]).unwrap();
    assert!(std::sync::Arc::ptr_eq(
        &first,
        &table.live_instance_versions_shared()
    ));
    // Its commit removes row 12 first (the statement's first change).
    assert!(table.commit(pending));
    assert_eq!(listed(&table), [(7, 10, 3), (7, 11, 2)]);
    assert!(table.set_instance(8, &[nat_at(13, 1)]));
    assert_eq!(listed(&table), [(7, 10, 3), (7, 11, 2), (8, 13, 5)]);
    assert!(table.clear_instance(7));
    assert_eq!(listed(&table), [(8, 13, 5)]);

    // A copy lists the same rows.
    assert_eq!(listed(&table.clone()), listed(&table));
    // Equality and `Debug` are the rows', not the listing's: a table that
    // was listed equals, and prints as, one with the same rows that was
    // not; a table with other rows is not equal.
    let mut read = NatTable::default();
    assert!(read.set_instance(8, &[nat_at(12, 1)]));
    let mut unread = NatTable::default();
    assert!(unread.set_instance(8, &[nat_at(12, 1)]));
    read.live_instance_versions_shared();
    assert_eq!(read, unread);
    assert_eq!(format!("{read:?}"), format!("{unread:?}"));
    assert_ne!(read, table);
}

/// Omicron's hazard (the sequence is not transactional): instance 1's row
/// draws version 1, instance 2's draws 2 and commits first; a dpd pulling
/// in between sees only version 2 and moves to generation 2; once version 1
/// commits, a changeset from generation 2 never returns it. Only a pull
/// from 0 (a restarted dpd) finds it.
#[test]
fn nat_row_drawn_before_but_committed_after_another_is_missed_from_the_later_generation() {
    let (mut table, v1, v2) = two_begun((1, nat_at(11, 1)), (2, nat_at(12, 2)));
    // Both drawn, neither visible: a reader neither sees nor waits.
    assert!(table.changeset(0, 100).is_empty());
    assert!(table.live().is_empty());
    assert!(table.has_pending());
    table.commit(v2);
    // The dpd's pull between the commits: only version 2.
    assert_changes(&table, 0, 100, &[(2, false, 12, 2)]);
    let dpd_gen = 2;
    table.commit(v1);
    assert!(!table.has_pending());
    assert_eq!(table.live_of(1), vec![nat_at(11, 1)]);
    // From the later generation, version 1 never comes.
    assert!(table.changeset(dpd_gen, 100).is_empty());
    // From 0, both, in version order.
    assert_changes(&table, 0, 100, &[(1, false, 11, 1), (2, false, 12, 2)]);
}

/// A pending removal leaves the row live for everyone; committed, the
/// removal appears at its version. A second writer that removes the row
/// first wins; the first, retried, does nothing and its version is a gap.
/// An aborted statement burns its version too.
#[test]
fn nat_pending_removal_is_invisible_and_a_lost_or_aborted_statement_leaves_a_gap() {
    let mut table = NatTable::default();
    assert!(table.set_instance(1, &[nat_at(11, 1)]));
    let rm = table.begin_set_instance(1, &[]).unwrap();
    assert_eq!(rm, 2);
    assert_eq!(table.live_of(1), vec![nat_at(11, 1)]);
    assert!(table.changeset(1, 100).is_empty());
    // A second writer (the delete, beside the stop) reads the row live and
    // removes it first, at version 3.
    let rm2 = table.begin_set_instance(1, &[]).unwrap();
    assert_eq!(rm2, 3);
    assert!(table.commit(rm2));
    assert!(table.live_of(1).is_empty());
    // The first meets the newer write: nothing left to do.
    assert!(!table.commit(rm));
    assert_changes(&table, 1, 100, &[(3, true, 11, 1)]);

    let add = table.begin_set_instance(1, &[nat_at(11, 1)]).unwrap();
    assert_eq!(add, 4);
    table.abort(add);
    assert!(!table.has_pending());
    assert!(table.live_of(1).is_empty());
    assert_eq!(table.version(), 4);
    // The next statement draws 5: version 4 is a gap.
    assert!(table.set_instance(1, &[nat_at(11, 1)]));
    assert_changes(&table, 3, 100, &[(5, false, 11, 1)]);
}

/// At once (no window), the two-phase statements give exactly the versions
/// the one-shot writes did.
#[test]
fn nat_statements_committed_at_once_keep_the_old_versions() {
    let mut a = NatTable::default();
    assert!(a.set_instance(7, &[nat_at(10, 2), nat_at(11, 2)]));
    assert!(a.set_instance(7, &[nat_at(11, 3)]));
    let mut b = NatTable::default();
    for (inst, entries) in [
        (7, vec![nat_at(10, 2), nat_at(11, 2)]),
        (7, vec![nat_at(11, 3)]),
    ] {
        while let Some(v) = b.begin_set_instance(inst, &entries) {
            b.commit(v);
        }
    }
    assert_eq!(a, b);
    // Removals first, then additions, as before; each row once in the
    // changeset (a removed row only at its `version_removed`).
    assert_eq!(
        changes(&a, 0, 100),
        vec![(3, true, 10, 2), (4, true, 11, 2), (5, false, 11, 3)]
    );
}

/// Two writers add the same row of one instance: both read no row and draw
/// a version. The one committed first adds it; the other meets that write,
/// does nothing, and its version is a gap. A different row of the same
/// instance is then added as usual.
#[test]
fn nat_a_pending_addition_another_writer_made_first_is_a_gap() {
    let (mut table, first, second) = two_begun((1, nat_at(11, 1)), (1, nat_at(11, 1)));
    assert!(table.commit(second));
    assert!(!table.commit(first), "the row is already live");
    assert_eq!(table.live_of(1), vec![nat_at(11, 1)]);
    assert_changes(&table, 0, 100, &[(2, false, 11, 1)]);

    let third = table
        .begin_set_instance(1, &[nat_at(11, 1), nat_at(12, 1)])
        .unwrap();
    assert!(table.commit(third), "another row of the same instance");
    assert_eq!(table.live_of(1), vec![nat_at(11, 1), nat_at(12, 1)]);
    assert_eq!(
        table.begin_set_instance(1, &[nat_at(11, 1), nat_at(12, 1)]),
        None
    );
}

// Upstream's code before its fixes (`history`): each era's line, and the
// default is today's.

#[test]
fn before_4610_the_ensure_counts_a_soft_deleted_row_and_adds_nothing() {
    for (ensure, added_again) in [
        (NatEnsure::LiveOnly, true),
        (NatEnsure::MatchesRemoved, false),
    ] {
        let mut table = NatTable::default().with_ensure(ensure);
        assert!(table.set_instance(1, &[nat_at(11, 2)]));
        assert!(table.clear_instance(1));
        // The instance starts again on the same sled: the same values.
        assert_eq!(
            table.set_instance(1, &[nat_at(11, 2)]),
            added_again,
            "{ensure}"
        );
        let live = if added_again {
            vec![nat_at(11, 2)]
        } else {
            vec![]
        };
        assert_eq!(table.live_of(1), live, "{ensure}");
        // Another sled is other values: both eras add the row.
        assert!(table.set_instance(1, &[nat_at(11, 3)]), "{ensure}");
    }
    assert_eq!(NatEnsure::default(), NatEnsure::LiveOnly);
}

#[test]
fn before_5036_a_page_in_added_order_ends_on_a_late_removal() {
    let table = |order| {
        let mut t = NatTable::default().with_changeset_order(order);
        t.set_instance(1, &[nat_at(11, 1)]); // version 1
        t.set_instance(2, &[nat_at(12, 2)]); // version 2
        t.clear_instance(1); // version 3: row 1 removed
        t
    };
    // Today: one change per row at its own version, in version order.
    let today = table(NatChangeset::VersionOrder);
    assert_changes(&today, 0, 1, &[(2, false, 12, 2)]);
    assert_changes(&today, 0, 100, &[(2, false, 12, 2), (3, true, 11, 1)]);
    // Before #5036: the rows in `version_added` order, so a one-row page
    // is row 1's removal at version 3, and a dpd asking next from 3 never
    // sees row 2.
    let before = table(NatChangeset::AddedOrder);
    assert_changes(&before, 0, 1, &[(3, true, 11, 1)]);
    assert_changes(&before, 3, 100, &[]);
    assert_changes(&before, 0, 100, &[(3, true, 11, 1), (2, false, 12, 2)]);
}

#[tokio::test(start_paused = true)]
async fn before_8914_a_switch_without_a_dpd_fails_the_saga_and_leaves_its_rows() {
    // The second switch zone (switch1) is gone: the lookup finds no dpd
    // for it.
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    let ops = ops.with_dpd_notify(DpdNotify::Fatal);
    net.remove_switch_zone(zone_ip(2));
    let e = ops.start(ID, 2).await.unwrap_err();
    assert!(e.to_string().contains("DPD_ENSURE"), "{e}");
    assert!(
        e.to_string()
            .contains("unable to find dendrite client for switch1"),
        "{e}"
    );
    // Only the node before the failed one is undone.
    let saga = store.saga(1);
    assert_eq!(saga.undone, vec![SagaNode::MarkAsStarting]);
    assert_eq!(saga.state.name(), "unwound");
    assert_eq!(store.get(ID).state, InstanceState::Stopped);
    // Steno does not undo the failed node: the rows it wrote stay live.
    assert_eq!(store.nat_rows(), vec![nat_entry(2)]);
    assert_eq!(net.requests(zone_ip(1), DPD_PORT), vec![LOOKUP, TRIGGER]);

    // switch0 without a dpd: with `fail_fast` the switches after it are
    // not told.
    let (net, _store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    let ops = ops.with_dpd_notify(DpdNotify::Fatal);
    dpd_unidentified(&net, zone_ip(1));
    assert!(ops.start(ID, 2).await.is_err());
    assert_eq!(net.requests(zone_ip(2), DPD_PORT), vec![LOOKUP]);

    // A trigger that fails is logged, even then: upstream's notify only
    // ever returned the missing clients.
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    let ops = ops.with_dpd_notify(DpdNotify::Fatal);
    nat_trigger_fails(&net, zone_ip(1), 500, "busy");
    assert_eq!(
        ops.start(ID, 2).await.unwrap().state,
        InstanceState::Running
    );
    assert_eq!(store.saga(1).state, SagaState::Done);
}

#[tokio::test(start_paused = true)]
async fn before_8914_the_switch_lookup_waits_for_every_mgs_in_dns() {
    // switch1's MGS answers 503s for a minute; its zone is still in DNS.
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    let ops = ops.with_switch_lookup(SwitchLookup::MgsRetry);
    let response = FakeResponse::error(503, "no SP");
    net.fail(
        zone_ip(2),
        MGS_PORT,
        "GET",
        "/local/switch-id",
        Some(response),
    );
    let begun = tokio::time::Instant::now();
    let start = tokio::spawn({
        let ops = ops.clone();
        async move { ops.start(ID, 2).await }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    // The saga is held in DPD_ENSURE: its rows are written, no dpd is told.
    assert!(!start.is_finished());
    assert_eq!(store.nat_rows(), vec![nat_entry(2)]);
    assert!(net.requests(zone_ip(1), DPD_PORT).is_empty());
    // Every round asks DNS's zones in order, stops at the failing one and
    // pauses 2 s: about one round per 2 s.
    let rounds = net.requests(zone_ip(2), MGS_PORT).len();
    assert!((25..=31).contains(&rounds), "{rounds} rounds in 60 s");
    net.clear_failures();
    let record = start.await.unwrap().unwrap();
    assert_eq!(record.state, InstanceState::Running);
    assert!(begun.elapsed() >= Duration::from_secs(60));
    // Then each dpd is asked nothing but the trigger: MGS named them.
    for zone in zones() {
        assert_eq!(net.requests(zone, DPD_PORT), vec![TRIGGER]);
    }
}

#[tokio::test(start_paused = true)]
async fn since_8914_the_switch_lookup_leaves_out_a_dpd_that_fails() {
    // switch1's dpd does not say which switch it is: the start goes on,
    // switch0 is told, and the missing switch is only logged.
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    dpd_unidentified(&net, zone_ip(2));
    let logs = Captured::at(tracing::Level::WARN);
    let started = {
        let _guard = logs.install();
        ops.start(ID, 2).await
    };
    assert_eq!(started.unwrap().state, InstanceState::Running);
    assert_eq!(store.saga(1).state, SagaState::Done);
    assert_eq!(net.requests(zone_ip(1), DPD_PORT), vec![LOOKUP, TRIGGER]);
    assert_eq!(net.requests(zone_ip(2), DPD_PORT), vec![LOOKUP]);
    assert!(
        logs.lines()
            .iter()
            .any(|l| l.contains("unable to find dendrite client for switch1")),
        "{:?}",
        logs.lines()
    );
    // A DNS that cannot be read fails the lookup, and so the notify.
    let (net, _store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    let ops = InstanceOps::new(net.connector(), ops.store().clone(), StartImpl::Saga)
        .with_dpd_notify(DpdNotify::Fatal);
    let e = ops.start(ID, 2).await.unwrap_err();
    assert!(e.to_string().contains("failed to get dpd clients"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn a_saga_with_inline_propagation_programs_switches_and_sleds_itself() {
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    let ops = ops.with_propagation(Propagation::Inline, Propagation::Inline);
    ops.start(ID, 2).await.unwrap();
    // No background task has run: the start pushed NAT and V2P itself.
    assert_networking(&net, &store, Some(2));
    for zone in zones() {
        assert!(
            !net.requests(zone, DPD_PORT).contains(&TRIGGER.to_string()),
            "an inline push triggers no pull"
        );
    }
    ops.stop(ID).await.unwrap();
    assert_networking(&net, &store, None);
    assert_eq!(Propagation::of(StartImpl::Inline), Propagation::Inline);
    assert_eq!(Propagation::of(StartImpl::Saga), Propagation::Background);
}

#[tokio::test(start_paused = true)]
async fn before_10389_a_failed_removal_notify_leaves_the_stop_stopping() {
    for (notify, stops) in [(DpdNotify::Logged, true), (DpdNotify::Fatal, false)] {
        let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
        let ops = ops.with_remove_notify(notify);
        ops.start(ID, 2).await.unwrap();
        dpd_unidentified(&net, zone_ip(1));
        let stopped = ops.stop(ID).await;
        assert_eq!(stopped.is_ok(), stops, "{notify}: {stopped:?}");
        let state = store.get(ID).state;
        let expected = if stops {
            InstanceState::Stopped
        } else {
            InstanceState::Stopping
        };
        assert_eq!(state, expected, "{notify}");
        // The rows are gone either way; only the notify failed. Every
        // other dpd was told.
        assert_eq!(store.nat_rows(), vec![]);
        assert!(
            net.requests(zone_ip(2), DPD_PORT)
                .iter()
                .filter(|r| r.as_str() == TRIGGER)
                .count()
                >= 2
        );
    }
}

// The NAT table's unique index on live rows (`overlapping_nat_entry`) and
// what the ensure does when it refuses a row (`NatConflict`, omicron #4694).

/// `conflict`'s table where instance 1 holds 203.0.113.11 for sled 2
/// (version 1).
fn held_by_one(conflict: super::NatConflict) -> NatTable {
    let mut table = NatTable::default().with_conflict(conflict);
    assert!(table.set_instance(1, &[nat_at(11, 2)]));
    table
}

#[test]
fn the_unique_index_refuses_another_targets_row_and_burns_its_version() {
    let mut table = held_by_one(super::NatConflict::Fatal);
    // Instance 2 has the address now (the pool gave it back, the row was
    // left behind): its row for sled 3 meets instance 1's live row.
    let refused = table.try_set_instance(2, &[nat_at(11, 3)]);
    assert_eq!(
        refused,
        Err(StoreError::NatConflict {
            ip: Ipv4Addr::new(203, 0, 113, 11),
            first_port: 0,
            last_port: 16383,
        })
    );
    assert!(
        refused
            .unwrap_err()
            .to_string()
            .contains("unique index overlapping_nat_entry"),
        "the error names the index"
    );
    // Nothing written, but the insert's nextval ran: version 2 is a gap.
    assert_eq!(table.live(), vec![nat_at(11, 2)]);
    assert!(table.live_of(2).is_empty());
    assert_eq!(table.version(), 2);
    assert_changes(&table, 0, 100, &[(1, false, 11, 2)]);
    // Refused again on each try, each burning one more.
    assert!(table.try_set_instance(2, &[nat_at(11, 3)]).is_err());
    assert_eq!(table.version(), 3);
}

#[test]
fn the_unique_index_accepts_the_identical_entry_and_spends_nothing() {
    for conflict in [super::NatConflict::Fatal, super::NatConflict::Takeover] {
        let mut table = held_by_one(conflict);
        // The ensure's WHERE NOT EXISTS finds the row: no insert, no nextval.
        assert_eq!(
            table.try_set_instance(1, &[nat_at(11, 2)]),
            Ok(false),
            "{conflict}"
        );
        assert_eq!(table.version(), 1, "{conflict}");
        // Another port range at the address is another key (the index is
        // on the exact triple, whatever its name says).
        let upper = NatEntry {
            first_port: 16384,
            last_port: 32767,
            ..nat_at(11, 3)
        };
        assert_eq!(table.try_set_instance(2, &[upper]), Ok(true), "{conflict}");
        assert_eq!(table.live(), vec![nat_at(11, 2), upper], "{conflict}");
    }
}

#[test]
fn the_unique_index_does_not_count_soft_deleted_rows() {
    let mut table = held_by_one(super::NatConflict::Fatal);
    assert!(table.clear_instance(1)); // version 2: soft-deleted
                                      // `time_deleted IS NULL` leaves the removed row out of the index.
    assert_eq!(table.try_set_instance(2, &[nat_at(11, 3)]), Ok(true));
    assert_eq!(table.version(), 3);
    assert_changes(&table, 0, 100, &[(2, true, 11, 2), (3, false, 11, 3)]);
}

#[test]
fn before_4694_an_instances_own_stale_row_refuses_its_start_elsewhere() {
    // Upstream's ensure before #4694 only inserted: a live row of its own
    // for another sled (left by a stop that kept its NAT) is in the way.
    let mut table = held_by_one(super::NatConflict::Fatal);
    assert!(matches!(
        table.try_set_instance(1, &[nat_at(11, 3)]),
        Err(StoreError::NatConflict { .. })
    ));
    assert_eq!(table.live_of(1), vec![nat_at(11, 2)]);
    assert_eq!(table.version(), 2);
    // Removing rows meets no index: a stop or delete still clears them.
    assert!(table.clear_instance(1));
    assert!(table.live().is_empty());
    // Today's replaces it: removal first, so no insert fails (simplified:
    // upstream's insert fails once, burning a version, then takes over).
    let mut today = held_by_one(super::NatConflict::Takeover);
    assert_eq!(today.try_set_instance(1, &[nat_at(11, 3)]), Ok(true));
    assert_eq!(today.live_of(1), vec![nat_at(11, 3)]);
    assert_changes(&today, 0, 100, &[(2, true, 11, 2), (3, false, 11, 3)]);
}

#[test]
fn since_4694_the_ensure_takes_the_address_over_from_another_row() {
    let mut table = held_by_one(super::NatConflict::Takeover);
    assert_eq!(table.try_set_instance(2, &[nat_at(11, 3)]), Ok(true));
    assert!(
        table.live_of(1).is_empty(),
        "the row in the way is soft-deleted"
    );
    assert_eq!(table.live_of(2), vec![nat_at(11, 3)]);
    // The refused insert burnt version 2; the removal is 3, the insert 4.
    assert_changes(&table, 0, 100, &[(3, true, 11, 2), (4, false, 11, 3)]);
    assert_eq!(super::NatConflict::default(), super::NatConflict::Takeover);
}

#[test]
fn the_unique_index_holds_at_the_write_too() {
    // Two owners' inserts of one address, both begun before either wrote:
    // neither saw the other. The first to write wins; the second writes
    // nothing, and its version is a gap.
    let mut table = NatTable::default().with_conflict(super::NatConflict::Fatal);
    let first = table.begin_set_instance(1, &[nat_at(11, 2)]).unwrap();
    let second = table
        .try_begin_set_instance(2, &[nat_at(11, 3)])
        .unwrap()
        .unwrap();
    assert!(table.commit(first));
    assert!(!table.commit(second));
    assert_eq!(table.live(), vec![nat_at(11, 2)]);
    assert_changes(&table, 0, 100, &[(1, false, 11, 2)]);
}

#[tokio::test(start_paused = true)]
async fn before_4694_a_leftover_row_at_the_address_unwinds_the_start_saga() {
    let (_net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    {
        let mut s = store.lock();
        s.nat = NatTable::default().with_conflict(NatConflict::Fatal);
        // A live row of another owner at the instance's address and ports,
        // as a deleted instance's leaked row would be once the pool handed
        // the address on.
        assert!(s.nat.set_instance(99, &[nat_entry(3)]));
    }
    let err = ops.start(ID, 2).await.unwrap_err();
    let OpError::Unwound(message) = &err else {
        panic!("expected an unwound saga, got {err:?}");
    };
    assert!(message.starts_with("DPD_ENSURE failed: "), "{message}");
    assert!(
        message.contains("unique index overlapping_nat_entry"),
        "{message}"
    );
    assert_eq!(store.get(ID).state, InstanceState::Stopped);
    assert!(store.lock().nat.live_of(ID).is_empty());
    assert_eq!(store.lock().nat.live_of(99), vec![nat_entry(3)]);
    let saga = store.saga(1);
    assert_eq!(saga.done, vec![SagaNode::MarkAsStarting]);
}

#[tokio::test(start_paused = true)]
async fn since_4694_the_start_saga_takes_a_leftover_rows_address_over() {
    let (net, store, ops) = fixture(StartImpl::Saga, InstanceState::Stopped);
    assert!(store.lock().nat.set_instance(99, &[nat_entry(3)]));
    ops.start(ID, 2).await.unwrap();
    assert!(store.lock().nat.live_of(99).is_empty());
    assert_eq!(store.lock().nat.live_of(ID), vec![nat_entry(2)]);
    assert_networking_settles(&net, &store, Some(2)).await;
}

/// `live_by_instance` is `live_of` for every instance at once: the same
/// entries, sorted, with removed rows, pending rows and service rows left
/// out, and no instance without a live row.
#[test]
fn live_by_instance_is_live_of_every_instance() {
    let mut table = NatTable::default();
    assert!(table.set_instance(1, &[nat_at(12, 1), nat_at(11, 1)]));
    assert!(table.set_instance(2, &[nat_at(13, 2)]));
    assert!(table.set_instance(3, &[nat_at(14, 3)]));
    // Instance 3's row removed, instance 2's moved, a service row beside.
    assert!(table.set_instance(3, &[]));
    assert!(table.set_instance(2, &[nat_at(13, 3)]));
    table.sync_service_zones(&[service_at(20, 1)]);
    // A row begun but not committed is not live yet.
    table.begin_set_instance(4, &[nat_at(15, 1)]).unwrap();
    let by = table.live_by_instance();
    assert_eq!(by.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
    for (id, entries) in &by {
        assert_eq!(entries, &table.live_of(*id), "instance {id}");
    }
    assert_eq!(by[&1], vec![nat_at(11, 1), nat_at(12, 1)]);
}
