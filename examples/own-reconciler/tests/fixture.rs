//! The reconciler of this crate, tested with racksim as another team would
//! test theirs: a live rack in fakes-only mode (none of racksim's
//! reconcilers run), faults injected through racksim's generated control
//! client, convergence judged by the control API's gaps and wait.
//!
//! Only public API: `racksim_live` (start, addresses, stop), the
//! generated `racksim-control-client`, and the reconciler's own dpd client
//! generated from upstream's document.

use std::time::Duration;

use own_reconciler::{dpd::types::Ipv4Nat, ServiceNatReconciler, SwitchOutcome};
use racksim_control_client::{types, Client};
use racksim_live::{LiveOptions, LiveRack, Reconcilers};

/// The rack's desired service entries, as the control API reports them,
/// in the dpd client's types (the same wire shape).
async fn desired(control: &Client) -> Vec<Ipv4Nat> {
    let state = control.state_get().send().await.unwrap().into_inner();
    serde_json::from_value(serde_json::to_value(&state.desired_nat).unwrap()).unwrap()
}

async fn act(control: &Client, action: types::builder::ActionRequest) {
    control.action_apply().body(action).send().await.unwrap();
}

fn on_switch(action: &str, switch: &str) -> types::builder::ActionRequest {
    types::ActionRequest::builder()
        .action(action)
        .switch(Some(switch.to_string()))
}

async fn gaps(control: &Client) -> types::Convergence {
    control.gaps_get().send().await.unwrap().into_inner()
}

async fn wait(control: &Client, timeout: &str) -> types::Convergence {
    control
        .wait_post()
        .body(types::WaitRequest::builder().timeout(timeout))
        .send()
        .await
        .unwrap()
        .into_inner()
}

async fn start() -> (LiveRack, Client, ServiceNatReconciler) {
    let scenario =
        racksim_live::scenario::catalogue::get("sidecar-power-cycle").expect("catalogued");
    let opts = LiveOptions {
        reconcilers: Reconcilers::None,
        ..LiveOptions::default()
    };
    let live = LiveRack::start(&scenario, opts).await.expect("starts");
    let services = live.services().await;
    let names: Vec<String> = services.switches.keys().map(|s| s.to_string()).collect();
    let reconciler = ServiceNatReconciler::new(
        names
            .iter()
            .zip(services.switches.values())
            .map(|(name, a)| (name.as_str(), format!("http://{}", a.dpd))),
    );
    let control = Client::new(&format!("http://{}", services.control));
    (live, control, reconciler)
}

fn created(n: usize) -> SwitchOutcome {
    SwitchOutcome::Reconciled {
        created: n,
        deleted: 0,
    }
}

/// Pass by pass, with nothing in the background: each fault's gaps are
/// exactly what it broke, and one pass of the reconciler closes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_pass_closes_the_gaps_a_fault_opens() {
    let (live, control, reconciler) = start().await;
    let want = desired(&control).await;
    let n = want.len();
    assert!(n > 0);

    // Fakes only: nobody has written a switch's NAT table.
    let before = gaps(&control).await;
    assert!(!before.converged);
    assert_eq!(before.gaps.len(), 2 * n, "{:?}", before.gaps);
    assert!(before
        .gaps
        .iter()
        .all(|g| g.message.contains("lacks the NAT entry of")));

    let pass = reconciler.reconcile(&want).await;
    assert_eq!(
        pass,
        vec![
            ("switch0".into(), created(n)),
            ("switch1".into(), created(n))
        ]
    );
    let after = wait(&control, "5s").await;
    assert!(after.converged, "{:?}", after.gaps);

    // A restarted dpd is empty: its switch, and only it, lacks every entry.
    act(&control, on_switch("dpd-restart", "switch1")).await;
    let broken = gaps(&control).await;
    assert_eq!(broken.gaps.len(), n, "{:?}", broken.gaps);
    assert!(broken.gaps.iter().all(|g| g.at == "switch1"));
    let pass = reconciler.reconcile(&want).await;
    assert_eq!(
        pass,
        vec![
            ("switch0".into(), created(0)),
            ("switch1".into(), created(n))
        ]
    );
    assert!(wait(&control, "5s").await.converged);

    // A stale entry (the right address, a wrong MAC): the pass replaces it.
    act(
        &control,
        on_switch("stale-entry", "switch0").zone(Some("nexus".to_string())),
    )
    .await;
    let stale = gaps(&control).await;
    assert!(
        stale
            .gaps
            .iter()
            .any(|g| g.at == "switch0" && g.message.contains("holds a stale NAT entry")),
        "{:?}",
        stale.gaps
    );
    let pass = reconciler.reconcile(&want).await;
    assert_eq!(
        pass[0],
        (
            "switch0".into(),
            SwitchOutcome::Reconciled {
                created: 1,
                deleted: 1
            }
        )
    );
    assert!(wait(&control, "5s").await.converged);

    // A dpd that answers errors fails that switch's pass, not the other's.
    act(
        &control,
        on_switch("dpd-errors", "switch0").for_(Some("1h".to_string())),
    )
    .await;
    let pass = reconciler.reconcile(&want).await;
    assert!(matches!(pass[0].1, SwitchOutcome::Failed(_)), "{pass:?}");
    assert_eq!(pass[1], ("switch1".into(), created(0)));
    live.stop().await;
}

/// In the background, as it would run in a sled-agent: a sidecar power
/// cycle and a new zone in the config each converge again, as the wait
/// says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_in_the_background_it_converges_after_each_fault() {
    let (live, control, reconciler) = start().await;
    let (desired_tx, desired_rx) = tokio::sync::watch::channel(desired(&control).await);
    let task = tokio::spawn(reconciler.run(desired_rx, Duration::from_millis(100)));
    let converged = |c: types::Convergence| {
        assert!(c.converged, "{:?}", c.gaps);
    };
    converged(wait(&control, "20s").await);

    // A switch that is off holds nothing and is owed nothing; back, it is
    // empty until the reconciler's next pass.
    act(&control, on_switch("sidecar-power-off", "switch1")).await;
    converged(gaps(&control).await);
    act(&control, on_switch("sidecar-power-on", "switch1")).await;
    converged(wait(&control, "20s").await);

    // A new zone: the config changes, the reconciler is told, every
    // switch gets the entry.
    act(
        &control,
        types::ActionRequest::builder()
            .action("config-change")
            .change(Some("add-zone".to_string()))
            .zone(Some("external-dns".to_string()))
            .sled(Some("sled2".to_string())),
    )
    .await;
    let want = desired(&control).await;
    let opened = gaps(&control).await;
    assert!(
        !opened.gaps.is_empty()
            && opened
                .gaps
                .iter()
                .all(|g| g.message.contains("lacks the NAT entry of external-dns")),
        "{:?}",
        opened.gaps
    );
    desired_tx.send(want).unwrap();
    converged(wait(&control, "20s").await);

    drop(desired_tx);
    task.await.unwrap();
    live.stop().await;
}
