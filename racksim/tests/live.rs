//! Live mode on real sockets: the reconcilers converge a rack of dropshot
//! fakes on loopback and repair what the control API's plan actions break —
//! a restarted dpd, crashed and restarted hosts, a partition, a replaced
//! scrimlet, a config change, a rack power cycle. Periods are short here
//! only; every wait is a bounded poll of the state.

use std::{
    future::Future,
    net::{Ipv4Addr, SocketAddr},
    time::Duration,
};

use racksim::live::{LiveOptions, LiveRack, Reconcilers};
use racksim_nexus::instances::StartImpl;
use racksim_reconciler::{discovery::SwitchSlot, dpd::Ipv4Nat, SERVICES_VNI};
use racksim_sim::{InstanceSpec, ServiceNat};
use serde_json::{json, Value};

use crate::common;

/// A `#[tokio::test]` per line: `name => check(STRATEGY)` runs
/// `check(ServiceNat::STRATEGY)`.
macro_rules! live_tests {
    ($($name:ident => $check:ident($strategy:ident),)*) => {
        $(
            #[tokio::test]
            async fn $name() {
                $check(ServiceNat::$strategy).await;
            }
        )*
    };
}

const PERIOD: Duration = Duration::from_millis(200);
const BOUND: Duration = Duration::from_secs(20);

/// Polls `done` until it holds, failing after [`BOUND`].
async fn until<F: Future<Output = bool>>(what: &str, mut done: impl FnMut() -> F) {
    let deadline = tokio::time::Instant::now() + BOUND;
    while !done().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {BOUND:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One raw HTTP/1.1 request: `(status, JSON body or Null)`.
async fn call(addr: SocketAddr, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    try_call(addr, method, path, body).await.unwrap()
}

/// `POST /wait` on the control API with `timeout`: its status and body.
async fn wait(live: &LiveRack, timeout: &str) -> (u16, Value) {
    let body = json!({ "timeout": timeout });
    call(live.control, "POST", "/wait", Some(body)).await
}

/// The same, or the I/O error that ended it.
async fn try_call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Result<(u16, Value), String> {
    let body = body.map(|b| b.to_string()).unwrap_or_default().into_bytes();
    let (status, text) = common::http::request(addr, method, path, body).await?;
    Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

/// Every switch's service entries are the config's desired entries.
async fn converged(live: &LiveRack) -> bool {
    let state = live.state().await;
    !state.desired_nat.is_empty()
        && state.switches.iter().all(|s| {
            let services: Vec<Ipv4Nat> = s
                .nat
                .iter()
                .filter(|e| e.target.vni == SERVICES_VNI)
                .copied()
                .collect();
            s.up && services == state.desired_nat
        })
}

async fn act(live: &LiveRack, action: Value) -> (u16, Value) {
    call(live.control, "POST", "/actions", Some(action)).await
}

/// Applies `action`, which must be accepted.
async fn apply(live: &LiveRack, action: Value) {
    let (status, body) = act(live, action.clone()).await;
    assert_eq!(status, 204, "{action}: {body}");
}

/// Waits for convergence as a user's test would (`POST /wait`'s code: the
/// simulation's checks), then checks the tables by hand as well.
async fn until_converged(live: &LiveRack, what: &str) {
    let c = live.wait_for_convergence(BOUND).await;
    assert!(
        c.converged,
        "not within {BOUND:?}: {what}; gaps: {:#?}",
        c.gaps
    );
    until(what, || converged(live)).await;
}

/// The trace's lines as `host text`.
fn texts(live: &LiveRack) -> Vec<String> {
    live.trace
        .lines()
        .iter()
        .map(|l| format!("{} {}", l.host, l.text))
        .collect()
}

async fn start_live(strategy: ServiceNat) -> LiveRack {
    start_live_with(strategy, Reconcilers::Racksim).await
}

/// The live tests' options: any control port, a short period, the saga
/// start and one instance, `web`.
fn options(strategy: ServiceNat, reconcilers: Reconcilers) -> LiveOptions {
    LiveOptions {
        strategy,
        reconcilers,
        control: SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0),
        period: PERIOD,
        start: StartImpl::Saga,
        instances: vec![InstanceSpec { name: "web".into() }],
    }
}

async fn start_live_with(strategy: ServiceNat, reconcilers: Reconcilers) -> LiveRack {
    let scenario = racksim::catalogue::get("sidecar-power-cycle").expect("catalogued");
    LiveRack::start(&scenario, options(strategy, reconcilers))
        .await
        .unwrap()
}

async fn converges_and_repairs_a_dpd_restart(strategy: ServiceNat) {
    let live = start_live(strategy).await;
    until_converged(&live, "every switch holds the desired NAT entries").await;
    let want = live.state().await.desired_nat;

    // The dpd API answers as dendrite's does: the entries, and a 409 for a
    // conflicting entry that leaves the table as it was.
    let switch0 = live.dpd(SwitchSlot::Switch0).await.unwrap();
    let e = want[0];
    let (status, body) = call(switch0, "GET", &format!("/nat/ipv4/{}", e.external), None).await;
    assert_eq!(status, 200);
    let of_ip: Vec<&Ipv4Nat> = want.iter().filter(|w| w.external == e.external).collect();
    assert_eq!(body["items"], serde_json::to_value(&of_ip).unwrap());
    let mut other = e.target;
    other.inner_mac.a[5] ^= 0xff;
    let (status, body) = call(
        switch0,
        "PUT",
        &format!("/nat/ipv4/{}/{}/{}", e.external, e.low, e.high),
        Some(serde_json::to_value(other).unwrap()),
    )
    .await;
    assert_eq!(
        (status, &body["error_code"]),
        (409, &json!("conflicting mapping"))
    );
    assert_eq!(live.nat_tables().await[&SwitchSlot::Switch0], want);

    // Restart switch1's dpd through the control API: its table is lost,
    // and the reconcilers put it back.
    apply(&live, json!({"action": "dpd-restart", "switch": "switch1"})).await;
    until_converged(&live, "switch1's table is restored").await;
    let t = texts(&live);
    let restart = t
        .iter()
        .position(|t| t == "switch1 dpd restarted: NAT table empty")
        .unwrap_or_else(|| panic!("{t:#?}"));
    assert!(
        t[restart..]
            .iter()
            .any(|t| t.starts_with("switch1 dpd: NAT + ")),
        "no NAT entry re-created after the restart: {t:#?}"
    );

    // dpd answering errors for a while: its API says 500 meanwhile.
    apply(
        &live,
        json!({"action": "dpd-errors", "switch": "switch0", "for": "10m"}),
    )
    .await;
    let (status, _) = call(switch0, "GET", "/nat/ipv4", None).await;
    assert_eq!(status, 500);
    // MGS answering errors: its API says 500, its switch's dpd is fine.
    let mgs1 = racksim_reconciler::mgs::MgsClient::new(racksim_reconciler::http::HttpClient::new(
        racksim_reconciler::http::TokioConnector,
        live.mgs(SwitchSlot::Switch1).await.unwrap(),
    ));
    assert_eq!(mgs1.local_switch_id().await.unwrap().slot, 1);
    apply(
        &live,
        json!({"action": "mgs-errors", "switch": "switch1", "for": "10m"}),
    )
    .await;
    let e = mgs1.local_switch_id().await.unwrap_err();
    assert_eq!(e.status(), Some(500), "{e}");
    let switch1 = live.dpd(SwitchSlot::Switch1).await.unwrap();
    let (status, _) = call(switch1, "GET", "/nat/ipv4", None).await;
    assert_eq!(status, 200);
    let (status, body) = act(
        &live,
        json!({"action": "dpd-hang", "switch": "switch1", "for": "soon"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, state) = call(live.control, "GET", "/state", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        state["switches"][1]["nat"],
        serde_json::to_value(&want).unwrap()
    );
    live.stop().await;
}

/// The instance API through the control API: Nexus writes the instance's
/// NAT rows and triggers the dpds, which pull them (a restarted dpd from
/// generation 0); the V2P task programs the other sleds; requests made
/// while the control plane is down (stopped or crashed) run when it is up.
async fn instances_through_the_live_control_plane(strategy: ServiceNat) {
    let live = start_live(strategy).await;
    until_converged(&live, "converged at start").await;
    let state = live.state().await;
    let sleds: Vec<String> = state.sleds.iter().map(|s| s.sled.clone()).collect();
    let host = sleds[2].clone();
    let web_ip = "203.0.113.11";
    let has_web = |s: &racksim::live::SwitchDump| {
        s.nat
            .iter()
            .any(|e| e.external.to_string() == web_ip && e.target.vni != SERVICES_VNI)
    };
    let web = |state: &racksim::live::StateDump| {
        state
            .nexus
            .instances
            .iter()
            .find(|i| i.instance == "web")
            .map(|i| i.state.clone())
            .unwrap_or_default()
    };

    apply(
        &live,
        json!({"action": "instance-create", "instance": "web", "sled": host}),
    )
    .await;
    until(
        "web runs, with NAT on both switches and V2P elsewhere",
        || async {
            let state = live.state().await;
            web(&state) == "running"
                && state.switches.iter().all(has_web)
                && state
                    .sleds
                    .iter()
                    .filter(|s| s.sled != host)
                    .all(|s| !s.v2p.is_empty())
        },
    )
    .await;

    apply(&live, json!({"action": "dpd-restart", "switch": "switch1"})).await;
    until("switch1 pulls web's entry again", || async {
        has_web(&live.state().await.switches[1])
    })
    .await;
    assert!(
        texts(&live)
            .iter()
            .any(|t| t.starts_with("switch1 dpd NAT RPW: applied")
                && t.contains("from generation 0")),
        "{:#?}",
        texts(&live)
    );

    // While the control plane is down, a request is refused, as the
    // simulation refuses it: it is not kept for the next Nexus.
    let refused = |live: &LiveRack| {
        texts(live)
            .iter()
            .filter(|t| t.contains("nexus: request for web refused: the control plane is down"))
            .count()
    };
    apply(&live, json!({"action": "control-plane-down"})).await;
    apply(&live, json!({"action": "instance-stop", "instance": "web"})).await;
    assert!(!live.state().await.nexus.up);
    assert_eq!(refused(&live), 1, "{:#?}", texts(&live));
    apply(&live, json!({"action": "control-plane-up"})).await;
    until("the control plane is up", || async {
        live.state().await.nexus.up
    })
    .await;
    assert_eq!(web(&live.state().await), "running");
    apply(&live, json!({"action": "instance-stop", "instance": "web"})).await;
    until("web stopped once asked again", || async {
        web(&live.state().await) == "stopped"
    })
    .await;

    apply(&live, json!({"action": "control-plane-crash"})).await;
    apply(
        &live,
        json!({"action": "instance-delete", "instance": "web"}),
    )
    .await;
    assert_eq!(refused(&live), 2, "{:#?}", texts(&live));
    apply(&live, json!({"action": "control-plane-up"})).await;
    apply(
        &live,
        json!({"action": "instance-delete", "instance": "web"}),
    )
    .await;
    until("web deleted, nothing of it left", || async {
        let state = live.state().await;
        web(&state) == "deleted"
            && !state.switches.iter().any(has_web)
            && state.sleds.iter().all(|s| s.v2p.is_empty())
    })
    .await;
    live.stop().await;
}

live_tests! {
    scrimlet_local_instances_through_the_live_control_plane => instances_through_the_live_control_plane(SCRIMLET_LOCAL),
    sled_task_instances_through_the_live_control_plane => instances_through_the_live_control_plane(SLED_TASK),
}

/// Crash and restart, partitions, a replaced scrimlet, a config change and
/// a rack power cycle, each applied through the control API and repaired
/// by the reconcilers.
async fn repairs_what_host_and_network_actions_break(strategy: ServiceNat) {
    let live = start_live(strategy).await;
    until_converged(&live, "converged at start").await;
    let state = live.state().await;
    let scrimlet1 = state.switches[1].scrimlet.clone().unwrap();
    let all_sleds: Vec<String> = state.sleds.iter().map(|s| s.sled.clone()).collect();

    // A crashed switch zone refuses connections and holds nothing; back,
    // it starts empty and is refilled.
    apply(&live, json!({"action": "crash", "host": "switch1"})).await;
    let state = live.state().await;
    assert!(!state.switches[1].up && state.switches[1].nat.is_empty());
    let dpd1 = live.dpd(SwitchSlot::Switch1).await.unwrap();
    assert!(tokio::net::TcpStream::connect(dpd1).await.is_err());
    apply(&live, json!({"action": "restart", "host": "switch1"})).await;
    until_converged(&live, "switch1 refilled after its restart").await;

    // A crashed sled loses its reconcilers and sled-agent; restarted, it
    // runs them again.
    apply(&live, json!({"action": "crash", "host": scrimlet1})).await;
    assert!(!live
        .state()
        .await
        .sleds
        .iter()
        .any(|s| s.sled == scrimlet1 && s.up));
    apply(&live, json!({"action": "restart", "host": scrimlet1})).await;
    apply(&live, json!({"action": "dpd-restart", "switch": "switch1"})).await;
    until_converged(&live, "switch1 refilled by the restarted sled").await;

    // Partitioned from every sled, switch1 is not refilled; healed, it is.
    apply(
        &live,
        json!({"action": "partition", "a": all_sleds, "b": "switch1"}),
    )
    .await;
    apply(&live, json!({"action": "dpd-restart", "switch": "switch1"})).await;
    apply(
        &live,
        json!({"action": "heal", "a": all_sleds, "b": "switch1"}),
    )
    .await;
    until_converged(&live, "switch1 refilled after the heal").await;
    let t = texts(&live);
    let (p, h) = (
        t.iter()
            .position(|t| t.starts_with("control partition"))
            .unwrap(),
        t.iter()
            .position(|t| t.starts_with("control heal"))
            .unwrap(),
    );
    assert!(
        !t[p..h].iter().any(|t| t.starts_with("switch1 dpd: NAT + ")),
        "switch1 written across the partition: {t:#?}"
    );

    // A switch zone crashing while a hang holds requests: the held
    // requests die with it, and its restart is not held up by them.
    apply(
        &live,
        json!({"action": "dpd-hang", "switch": "switch1", "for": "10m"}),
    )
    .await;
    let dpd1 = live.dpd(SwitchSlot::Switch1).await.unwrap();
    // Written by hand, as curl writes it: the server sees a client that
    // waits.
    let held = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(dpd1).await.unwrap();
        let request = format!(
            "GET /nat/ipv4 HTTP/1.1\r\nhost: {dpd1}\r\napi-version: {}\r\nconnection: close\r\n\r\n",
            racksim_reconciler::dpd::API_VERSION
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).to_string()
    });
    apply(&live, json!({"action": "crash", "host": "switch1"})).await;
    // Ended by the crash (the hang's 503, or the connection closed).
    let ended = tokio::time::timeout(BOUND, held)
        .await
        .expect("the held request ended")
        .unwrap();
    assert!(
        ended.is_empty() || ended.starts_with("HTTP/1.1 503"),
        "{ended}"
    );
    tokio::time::timeout(
        BOUND,
        apply(&live, json!({"action": "restart", "host": "switch1"})),
    )
    .await
    .expect("the restart is not held up by the hang");
    assert!(live.state().await.switches[1].up);

    // A replaced scrimlet (new hardware, without the hang): new sled, new
    // switch zone, refilled.
    let old_dpd1 = live.dpd(SwitchSlot::Switch1).await.unwrap();
    apply(
        &live,
        json!({"action": "replace-scrimlet", "switch": "switch1"}),
    )
    .await;
    let state = live.state().await;
    let new_scrimlet = state.switches[1].scrimlet.clone().unwrap();
    assert_ne!(new_scrimlet, scrimlet1);
    assert!(state.sleds.iter().any(|s| s.sled == scrimlet1 && s.retired));
    assert_ne!(live.dpd(SwitchSlot::Switch1).await.unwrap(), old_dpd1);
    until_converged(&live, "the replacement's switch zone refilled").await;

    // A config change: the desired entries change and the switches follow.
    let before = live.state().await.desired_nat;
    apply(
        &live,
        json!({"action": "config-change", "change": "add-zone", "zone": "external-dns",
               "sled": all_sleds[2]}),
    )
    .await;
    let after = live.state().await.desired_nat;
    assert_eq!(after.len(), before.len() + 1);
    until_converged(&live, "the added zone's entry on both switches").await;

    // A rack power cycle: everything down, then back from nothing.
    apply(&live, json!({"action": "power-off"})).await;
    assert!(live.state().await.switches.iter().all(|s| !s.up));
    apply(&live, json!({"action": "cold-boot"})).await;
    until_converged(&live, "converged after the cold boot").await;
    live.stop().await;
}

live_tests! {
    scrimlet_local_converges_and_repairs_a_dpd_restart => converges_and_repairs_a_dpd_restart(SCRIMLET_LOCAL),
    sled_task_converges_and_repairs_a_dpd_restart => converges_and_repairs_a_dpd_restart(SLED_TASK),
    scrimlet_local_repairs_host_and_network_actions => repairs_what_host_and_network_actions_break(SCRIMLET_LOCAL),
    sled_task_repairs_host_and_network_actions => repairs_what_host_and_network_actions_break(SLED_TASK),
}

/// Refused actions are 400s that say why and change nothing.
#[tokio::test]
async fn refused_actions_say_why_and_change_nothing() {
    let live = start_live(ServiceNat::SCRIMLET_LOCAL).await;
    until_converged(&live, "converged at start").await;
    let before = serde_json::to_value(live.state().await).unwrap();
    for (action, says) in [
        (
            json!({"action": "instance-create", "instance": "mail", "sled": "sled2"}),
            "unknown instance",
        ),
        (json!({"action": "control-plane-up"}), "never took it down"),
        (
            json!({"action": "crash", "host": "upstream-ntp"}),
            "upstream-ntp",
        ),
        (json!({"action": "crash", "host": "sled99"}), "unknown host"),
        (json!({"action": "crash"}), "needs `host`"),
        (
            json!({"action": "heal", "a": "sled0", "b": "switch0"}),
            "partition",
        ),
        (
            json!({"action": "sidecar-power-on", "switch": "switch0"}),
            "switch0",
        ),
        (json!({"action": "explode"}), "unknown action"),
        (
            json!({"action": "config-change", "change": "remove-zone", "zone": "boundary-ntp"}),
            "invalid system networking config",
        ),
    ] {
        let (status, body) = act(&live, action.clone()).await;
        assert_eq!(status, 400, "{action}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{action}: {message}");
    }
    // A field the step vocabulary does not have is refused by the API.
    let (status, _) = act(&live, json!({"action": "crash", "hots": "sled1"})).await;
    assert_eq!(status, 400);
    assert_eq!(serde_json::to_value(live.state().await).unwrap(), before);
    // A refused step is not counted as done: the boundary NTP zone the
    // refused config change would have removed can still be moved.
    let sled = before["sleds"][3]["sled"].as_str().unwrap().to_string();
    apply(
        &live,
        json!({"action": "config-change", "change": "move-zone", "zone": "boundary-ntp",
               "sled": sled}),
    )
    .await;
    live.stop().await;
}

/// The strategies that block zone start run live too: every zone of every
/// sled starts through the zone-start NAT path, which looks the uplinked
/// switches up and ensures the zone's entry on each. Under today's shipped
/// combination the scrimlet reconcilers run beside it: a restarted dpd is
/// refilled by them (the zone-start path never runs again), and a zone
/// that starts while a switch is down stays in the path, waiting for it,
/// while the reconcilers have long programmed the switch that is up.
async fn zone_starts_live(strategy: ServiceNat) {
    let live = start_live(strategy).await;
    until_converged(&live, "converged at start").await;
    until("every zone started", || async {
        let state = live.state().await;
        state
            .sleds
            .iter()
            .flat_map(|s| &s.zone_starts)
            .all(|z| z.started && z.progress.starts_with("NAT ensured on [switch0, switch1]"))
    })
    .await;
    let state = live.state().await;
    let zones: usize = state.sleds.iter().map(|s| s.zone_starts.len()).sum();
    assert_eq!(zones, state.desired_nat.len(), "one start per zone");
    let t = texts(&live);
    assert!(
        t.iter()
            .any(|l| l.ends_with("starting zone boundary-ntp.0"))
            && t.iter()
                .any(|l| l.contains("zone boundary-ntp.0 started (start took ")),
        "{t:#?}"
    );

    // The zone-start path ran once; a restarted dpd is refilled by what
    // runs after it.
    apply(&live, json!({"action": "dpd-restart", "switch": "switch1"})).await;
    until_converged(&live, "switch1's table is restored").await;

    // A sled restarted while switch1's zone is down: its zones wait in the
    // path for the missing switch (up to 5 minutes); back, they start.
    let sled = state
        .sleds
        .iter()
        .find(|s| !s.zone_starts.is_empty())
        .map(|s| s.sled.clone())
        .unwrap();
    apply(&live, json!({"action": "crash", "host": "switch1"})).await;
    apply(&live, json!({"action": "crash", "host": sled})).await;
    apply(&live, json!({"action": "restart", "host": sled})).await;
    until("the restarted sled's zones wait for switch1", || async {
        let state = live.state().await;
        let s = state.sleds.iter().find(|s| s.sled == sled).unwrap();
        !s.zone_starts.is_empty()
            && s.zone_starts
                .iter()
                .all(|z| !z.started && z.progress.contains("switch1"))
    })
    .await;
    apply(&live, json!({"action": "restart", "host": "switch1"})).await;
    until("the restarted sled's zones started", || async {
        let state = live.state().await;
        let s = state.sleds.iter().find(|s| s.sled == sled).unwrap();
        !s.zone_starts.is_empty() && s.zone_starts.iter().all(|z| z.started)
    })
    .await;
    until_converged(&live, "converged after switch1 is back").await;
    live.stop().await;
}

live_tests! {
    shipped_zone_starts_and_reconcilers_live => zone_starts_live(SCRIMLET_LOCAL_WITH_ZONE_START),
    legacy_zone_starts_live => zone_starts_live(LEGACY),
}

/// `--reconcilers none`: the fakes and the control plane run, racksim's
/// reconcilers do not, so the test's own writes are the only ones — here the
/// test plays the user's reconciler and converges the rack by hand. Under
/// the strategy that blocks zone start, the zone-start path (the reconciler
/// crate's) starts on every sled with racksim's reconcilers and on none
/// without them; both are decided when the sled starts, so nothing waits.
#[tokio::test]
async fn fakes_only_mode_runs_no_reconcilers_of_racksim() {
    let strategy = ServiceNat::SCRIMLET_LOCAL_WITH_ZONE_START;
    let with = start_live_with(strategy, Reconcilers::Racksim).await;
    assert!(
        with.state()
            .await
            .sleds
            .iter()
            .any(|s| !s.zone_starts.is_empty()),
        "racksim's reconcilers run the zone-start path"
    );
    with.stop().await;

    let live = start_live_with(strategy, Reconcilers::None).await;
    assert!(
        texts(&live).iter().any(|l| l.contains("reconcilers: none")),
        "{:?}",
        texts(&live)
    );
    let state = live.state().await;
    assert!(
        state.sleds.iter().all(|s| s.zone_starts.is_empty()),
        "no zone-start path"
    );
    // The typed addresses are the ones the state dump prints.
    let services = live.services().await;
    assert_eq!(services.control, live.control);
    assert_eq!(services.switches.len(), state.switches.len());
    for s in &state.switches {
        let slot: SwitchSlot = s.switch.parse().unwrap();
        assert_eq!(services.switches[&slot].dpd.to_string(), s.dpd);
        assert_eq!(services.switches[&slot].mgs.to_string(), s.mgs);
    }
    for s in &state.sleds {
        assert_eq!(services.sled_agents[&s.sled].to_string(), s.sled_agent);
    }
    assert!(
        !state.desired_nat.is_empty(),
        "the control plane still knows what is wanted"
    );
    assert!(
        !converged(&live).await,
        "nobody has written a switch's NAT yet"
    );
    // The gaps say so: every desired entry, on every uplinked switch, named
    // by its zone — over HTTP as from the library.
    let gaps = live.gaps().await;
    let uplinked = state.switches.len();
    assert_eq!(gaps.len(), uplinked * state.desired_nat.len(), "{gaps:#?}");
    for g in &gaps {
        assert!(
            g.message
                .starts_with(&format!("{} lacks the NAT entry of ", g.at)),
            "{g:?}"
        );
    }
    let (status, body) = call(live.control, "GET", "/gaps", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["converged"], json!(false), "{body}");
    assert_eq!(
        body["gaps"].as_array().map(Vec::len),
        Some(gaps.len()),
        "{body}"
    );
    // A wait that cannot succeed returns at its timeout with the gaps.
    let (status, body) = wait(&live, "100ms").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["converged"], json!(false), "{body}");
    assert!(body["waited_ms"].as_u64().unwrap() >= 100, "{body}");
    // A bad timeout is refused, saying why.
    for (timeout, why) in [("soon", "invalid duration"), ("2h", "longest wait")] {
        let (status, body) = wait(&live, timeout).await;
        assert_eq!(status, 400, "{timeout}: {body}");
        assert!(
            body["message"].as_str().unwrap().contains(why),
            "{timeout}: {body}"
        );
    }

    // The user's reconciler, by hand: every desired entry on every switch.
    for a in services.switches.values() {
        let dpd = a.dpd;
        for e in &state.desired_nat {
            let (status, body) = call(
                dpd,
                "PUT",
                &format!("/nat/ipv4/{}/{}/{}", e.external, e.low, e.high),
                Some(serde_json::to_value(e.target).unwrap()),
            )
            .await;
            assert!(status < 300, "{status} {body}");
        }
    }
    assert!(
        converged(&live).await,
        "the test's writes converged the rack"
    );
    let (status, body) = wait(&live, "5s").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"converged": true, "waited_ms": body["waited_ms"], "gaps": []})
    );
    // An entry nobody wants is a stale one, on the switch that holds it.
    let extra = state.desired_nat[0];
    let (status, body) = call(
        services.switches[&SwitchSlot::Switch1].dpd,
        "PUT",
        &format!(
            "/nat/ipv4/{}/{}/{}",
            "198.51.100.200", extra.low, extra.high
        ),
        Some(serde_json::to_value(extra.target).unwrap()),
    )
    .await;
    assert!(status < 300, "{status} {body}");
    let c = live.wait_for_convergence(Duration::from_millis(50)).await;
    assert!(!c.converged);
    assert_eq!(c.gaps.len(), 1, "{:#?}", c.gaps);
    assert_eq!(c.gaps[0].at, "switch1");
    assert!(
        c.gaps[0]
            .message
            .starts_with("switch1 holds a stale NAT entry: 198.51.100.200/"),
        "{:?}",
        c.gaps
    );

    // State that no declared instance explains counts too (issue 39): a
    // VMM, a V2P mapping, an instance-VNI NAT entry and an IPv6 entry,
    // planted through the fakes' own APIs as a stray client would.
    let sled0 = services.sled_agents["sled0"];
    let mut guest = extra.target;
    guest.vni = 4242;
    for (addr, path, body) in [
        (sled0, "/vmms/777".to_string(), json!({"instance_id": 4242})),
        (
            sled0,
            "/v2p".to_string(),
            json!({"virtual_ip": "172.30.9.9", "virtual_mac": "a8:40:25:f0:00:99",
                   "physical_host_ip": "fd00::99", "vni": 4242}),
        ),
        (
            services.switches[&SwitchSlot::Switch0].dpd,
            "/nat/ipv4/203.0.113.250/0/16383".to_string(),
            serde_json::to_value(guest).unwrap(),
        ),
        (
            services.switches[&SwitchSlot::Switch0].dpd,
            "/nat/ipv6/2001:db8::9/0/16383".to_string(),
            serde_json::to_value(guest).unwrap(),
        ),
    ] {
        let (status, body) = call(addr, "PUT", &path, Some(body)).await;
        assert!(status < 300, "{path}: {status} {body}");
    }
    let (status, body) = call(live.control, "GET", "/gaps", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["converged"], json!(false), "{body}");
    let messages: Vec<&str> = body["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["message"].as_str().unwrap())
        .collect();
    for wanted in [
        "switch1 holds a stale NAT entry: 198.51.100.200/",
        "sled0 holds VMM 777 of instance id 4242, which no known instance explains",
        "sled0 holds a V2P mapping no known instance explains: 172.30.9.9 (vni 4242) -> fd00::99",
        "switch0 holds a NAT entry no known instance explains: 203.0.113.250/0-16383",
        "switch0 holds an IPv6 NAT entry nothing explains",
    ] {
        assert!(
            messages.iter().any(|m| m.starts_with(wanted)),
            "{wanted:?} not among {messages:#?}"
        );
    }
    assert_eq!(messages.len(), 5, "{messages:#?}");
    // `/state` dumps the IPv6 table beside the IPv4 one.
    let (_, state) = call(live.control, "GET", "/state", None).await;
    let switch0 = state["switches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["switch"] == "switch0")
        .unwrap();
    assert_eq!(
        switch0["nat_ipv6"].as_array().map(Vec::len),
        Some(1),
        "{switch0}"
    );
    assert_eq!(
        switch0["nat_ipv6"][0]["external"], "2001:db8::9",
        "{switch0}"
    );
    live.stop().await;
}

/// A name the option does not know is refused before anything starts.
#[test]
fn an_unknown_reconcilers_name_is_refused() {
    let err = "ours".parse::<Reconcilers>().unwrap_err();
    assert!(err.contains("\"ours\"") && err.contains("none"), "{err}");
    assert_eq!("none".parse::<Reconcilers>(), Ok(Reconcilers::None));
    assert_eq!(Reconcilers::None.to_string(), "none");
}

/// A live rack dropped without `stop()` — as a panicking test drops it —
/// still stops: every server it ran lets go of its port (a new connection
/// is refused), and the control API with them.
#[tokio::test]
async fn a_dropped_live_rack_leaves_no_server_running() {
    let live = start_live_with(ServiceNat::SCRIMLET_LOCAL, Reconcilers::Racksim).await;
    let services = live.services().await;
    let mut addrs: Vec<SocketAddr> = services
        .switches
        .values()
        .flat_map(|s| [s.dpd, s.mgs])
        .chain(services.sled_agents.values().copied())
        .collect();
    addrs.push(services.control);
    for a in &addrs {
        assert!(
            tokio::net::TcpStream::connect(a).await.is_ok(),
            "{a} serves"
        );
    }
    drop(live);
    for a in addrs {
        until(&format!("{a} refuses connections"), || async move {
            tokio::net::TcpStream::connect(a).await.is_err()
        })
        .await;
    }
}

/// A strategy of a test's own: the simulation runs it, live mode cannot
/// (it runs racksim's reconciler parts, and this one names none).
struct SimulationOnly;

impl racksim_sim::NatStrategy for SimulationOnly {
    fn name(&self) -> &'static str {
        "simulation-only"
    }
    fn era(&self) -> racksim_sim::ServiceNatEra {
        racksim_sim::ServiceNatEra::Target
    }
    fn start_on_sled(
        &self,
        _: &racksim_sim::SledContext,
        _: &[racksim_reconciler::nat::NatEntry],
    ) -> Box<dyn racksim_sim::SledStrategy> {
        Box::new(())
    }
}

#[tokio::test]
async fn a_strategy_live_mode_cannot_run_is_refused_unless_fakes_only() {
    let opts = |reconcilers| options(ServiceNat::new(&SimulationOnly), reconcilers);
    let scenario = racksim::catalogue::get("sidecar-power-cycle").expect("catalogued");
    let err = LiveRack::start(&scenario, opts(Reconcilers::Racksim))
        .await
        .err()
        .expect("refused");
    assert!(
        err.contains("strategy simulation-only does not say what live mode runs"),
        "{err}"
    );
    // Fakes-only, it is only the era's control plane: that runs.
    let live = LiveRack::start(&scenario, opts(Reconcilers::None))
        .await
        .expect("fakes-only starts");
    live.stop().await;
}
