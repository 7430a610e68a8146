//! The store under the database's faults: a stall holds a NAT statement's
//! drawn version invisible until it ends; an error fails a statement and
//! changes nothing; the retry wrapper and the saga log retry as upstream's.

use std::{
    net::{Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use racksim_reconciler::{
    discovery::{StaticResolver, SwitchSlot},
    dpd::{MacAddr, NatTarget},
    http::TokioConnector,
    nat::NatEntry,
};

use crate::instances::{
    InstanceRecord, InstanceStore, OpError, SagaRecord, SagaState, SledRef, StoreError,
};
use tokio::{sync::watch, task::JoinSet};

use super::{NexusStore, RETRY_ATTEMPTS};
use crate::{Db, Event, InstanceRequest, NexusHost, SledInventory, Write};

#[derive(Clone)]
struct TestHost {
    db: Arc<Mutex<Db>>,
    /// `true` while the database stalls.
    stall: Arc<watch::Sender<bool>>,
    errors: Arc<AtomicBool>,
    /// How many statements met the faults.
    statements: Arc<AtomicU32>,
    events: Arc<Mutex<Vec<String>>>,
}

impl TestHost {
    fn new() -> Self {
        TestHost {
            db: Arc::default(),
            stall: Arc::new(watch::channel(false).0),
            errors: Arc::default(),
            statements: Arc::default(),
            events: Arc::default(),
        }
    }

    fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }

    fn error(&self) -> Result<(), StoreError> {
        self.statements.fetch_add(1, Ordering::SeqCst);
        if self.errors.load(Ordering::SeqCst) {
            Err(StoreError::Unavailable(
                "restart transaction (SQLSTATE 40001)".into(),
            ))
        } else {
            Ok(())
        }
    }
}

impl NexusHost for TestHost {
    type Connector = TokioConnector;
    type Resolver = StaticResolver;

    fn name(&self) -> &str {
        "nexus"
    }
    fn era(&self) -> crate::era::Era {
        unreachable!("the store does not ask")
    }
    fn start(&self) -> crate::instances::StartImpl {
        unreachable!("the store does not ask")
    }
    fn rpw_period(&self) -> Duration {
        unreachable!("the store does not ask")
    }
    fn connector(&self) -> TokioConnector {
        TokioConnector
    }
    fn resolver(&self) -> StaticResolver {
        StaticResolver::default()
    }
    fn db<R>(&self, f: impl FnOnce(&mut Db) -> R) -> R {
        f(&mut self.db.lock().unwrap())
    }
    async fn round_trip(&self) -> Result<(), StoreError> {
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.faults().await
    }
    async fn sequence_round_trip(&self) -> Result<(), StoreError> {
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.error()
    }
    async fn faults(&self) -> Result<(), StoreError> {
        if self.stalled() {
            self.stall().await;
        }
        self.error()
    }
    fn stalled(&self) -> bool {
        *self.stall.borrow()
    }
    async fn stall(&self) {
        let _ = self.stall.subscribe().wait_for(|s| !*s).await;
    }
    fn wrote(&self, _write: Write<'_>) {}
    fn sleds(&self) -> Vec<SledRef> {
        Vec::new()
    }
    fn boundary_switches(&self) -> Vec<SwitchSlot> {
        Vec::new()
    }
    fn mgs(&self) -> Vec<SocketAddr> {
        Vec::new()
    }
    fn inventory(&self) -> Vec<SledInventory> {
        Vec::new()
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
    fn record(&self, event: Event) {
        self.events.lock().unwrap().push(event.text);
    }
    fn instance_name(&self, id: u32) -> String {
        format!("web{id}")
    }
    fn sled_name(&self, id: u32) -> String {
        format!("sled{id}")
    }
    fn zone_name(&self, zone: Ipv6Addr) -> String {
        zone.to_string()
    }
    fn names(&self, text: &str) -> String {
        text.to_string()
    }
    fn spawn(
        &self,
        set: &mut JoinSet<()>,
        op: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        set.spawn(op);
    }
    fn op_done(&self, _req: &InstanceRequest, _outcome: &Result<InstanceRecord, OpError>) {}
    fn stopping(&self) {}
}

fn entry(n: u8) -> NatEntry {
    NatEntry {
        external_ip: Ipv4Addr::new(203, 0, 113, 10 + n),
        first_port: 0,
        last_port: 65535,
        target: NatTarget {
            internal_ip: Ipv6Addr::new(0xfd00, 0, 0, n as u16, 0, 0, 0, 1),
            inner_mac: MacAddr {
                a: [0xa8, 0x40, 0x25, 0xf0, 0, n],
            },
            vni: 1001,
        },
    }
}

/// A NAT statement that runs while the database stalls draws its version
/// (`nextval` answers) and holds it invisible — a changeset read meanwhile
/// waits too — until the stall ends; then it commits at that version.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_stalled_nat_statement_holds_its_version_invisible_until_the_stall_ends() {
    let host = TestHost::new();
    let store = NexusStore::new(host.clone());
    host.stall.send_replace(true);
    let writer = tokio::spawn({
        let store = store.clone();
        async move { store.nat_set_instance(1, vec![entry(1)]).await }
    });
    let reader = tokio::spawn({
        let store = store.clone();
        async move { store.nat_changeset(0, 100).await }
    });
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert!(!writer.is_finished() && !reader.is_finished());
    assert!(
        host.events()
            .iter()
            .any(|e| e.contains("drew NAT version 1; its write waits")),
        "{:?}",
        host.events()
    );
    assert!(
        host.db(|db| db.nat.changeset(0, 100).is_empty()),
        "invisible"
    );
    // A statement that begins now draws the next version.
    let second = tokio::spawn({
        let store = store.clone();
        async move { store.nat_set_instance(2, vec![entry(2)]).await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(host
        .events()
        .iter()
        .any(|e| e.contains("drew NAT version 2")));

    host.stall.send_replace(false);
    writer.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    reader.await.unwrap().unwrap();
    assert_eq!(host.db(|db| db.nat.changeset(0, 100).len()), 2);
    assert_eq!(host.db(|db| db.nat.live()), vec![entry(1), entry(2)]);
    assert!(host
        .events()
        .iter()
        .any(|e| e.contains("at NAT version 1 committed (visible)")));
}

/// Without a stall nothing is traced and the statement commits at once.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn without_a_stall_a_nat_statement_commits_at_once_untraced() {
    let host = TestHost::new();
    let store = NexusStore::new(host.clone());
    store.nat_set_instance(1, vec![entry(1)]).await.unwrap();
    assert_eq!(host.db(|db| db.nat.live()), vec![entry(1)]);
    assert!(host.events().is_empty(), "{:?}", host.events());
}

/// While the database answers errors a statement fails with
/// `Unavailable` and nothing changes: no version is drawn, no row written.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_error_fails_a_statement_and_changes_nothing() {
    let host = TestHost::new();
    let store = NexusStore::new(host.clone());
    host.db(|db| db.declare(1, "web1"));
    let before = host.db(|db| (db.nat.clone(), db.instances.clone()));
    host.errors.store(true, Ordering::SeqCst);
    assert!(matches!(
        store.nat_set_instance(1, vec![entry(1)]).await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(matches!(
        store.fetch(1).await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(matches!(
        store.nat_clear_instance(1).await,
        Err(StoreError::Unavailable(_))
    ));
    assert_eq!(host.db(|db| (db.nat.clone(), db.instances.clone())), before);
    // The statement after the errors end changes the table as the first
    // would have: nothing was burnt or half written.
    host.errors.store(false, Ordering::SeqCst);
    store.nat_set_instance(1, vec![entry(1)]).await.unwrap();
    assert_eq!(host.db(|db| db.nat.live()), vec![entry(1)]);
}

/// REGISTER's runtime update is retried as upstream's retry wrapper does:
/// at most RETRY_ATTEMPTS attempts, then the error.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_vmm_runtime_update_gives_up_after_the_retry_wrappers_attempts() {
    let host = TestHost::new();
    let store = NexusStore::new(host.clone());
    host.errors.store(true, Ordering::SeqCst);
    assert!(matches!(
        store.vmm_registered(1, 7).await,
        Err(StoreError::Unavailable(_))
    ));
    assert_eq!(host.statements.load(Ordering::SeqCst), RETRY_ATTEMPTS);
    host.errors.store(false, Ordering::SeqCst);
    store.vmm_registered(1, 7).await.unwrap();
}

/// A saga log write is retried until it lands, as upstream's sec_store.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_saga_log_write_waits_out_the_errors() {
    let host = TestHost::new();
    let store = NexusStore::new(host.clone());
    let mut saga = SagaRecord::new(1, 1, 0);
    store.saga_create(&saga).await.unwrap();
    host.errors.store(true, Ordering::SeqCst);
    saga.state = SagaState::Done;
    let write = tokio::spawn({
        let (store, saga) = (store.clone(), saga.clone());
        async move { store.saga_update(&saga).await }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!write.is_finished());
    host.errors.store(false, Ordering::SeqCst);
    write.await.unwrap().unwrap();
    assert_eq!(host.db(|db| db.sagas[&1].state.clone()), SagaState::Done);
    assert!(host.events().iter().any(|e| e.contains("log write failed")));
}
