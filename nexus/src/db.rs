//! The control plane's database, in memory: instance records with
//! generation-checked (conditional) updates, the instance NAT table with a
//! version ([`NatTable`]), the saga log and which Nexus executes each saga.
//! Each method is one transaction; [`crate::NexusStore`] applies them
//! under its host's lock after the host's round trip. The database lives
//! outside Nexus: a control-plane crash loses Nexus's memory, never this.

use std::{collections::BTreeMap, net::IpAddr, net::Ipv4Addr, time::Duration};

use racksim_reconciler::{
    dpd::MacAddr,
    instances::{
        ExternalIp, InstanceRecord, InstanceState, NatTable, Nic, RuntimeUpdate, SagaRecord,
        StoreError, GUEST_VNI,
    },
};

/// The control plane's database. It lives outside Nexus: a control-plane
/// crash loses Nexus's memory, never this.
#[derive(Clone, Debug, Default)]
pub struct Db {
    pub instances: BTreeMap<u32, InstanceRecord>,
    /// The NAT table (versioned; dpd pulls its changes): instance rows,
    /// and in the legacy era the service zones' rows (VNI 100).
    pub nat: NatTable,
    /// The latest inventory collection (the legacy era's service-zone NAT
    /// task reads it).
    pub inventory: Option<crate::Collection>,
    pub sagas: BTreeMap<u64, SagaRecord>,
    /// Which Nexus (by host name) executes each saga.
    pub saga_sec: BTreeMap<u64, String>,
    pub next_id: u64,
}

impl Db {
    /// An empty database whose NAT ensure and changeset queries are
    /// those eras'.
    pub fn new(
        nat_ensure: racksim_reconciler::instances::NatEnsure,
        nat_changeset: racksim_reconciler::instances::NatChangeset,
    ) -> Db {
        Db {
            nat: NatTable::default()
                .with_ensure(nat_ensure)
                .with_changeset_order(nat_changeset),
            ..Db::default()
        }
    }

    /// A fresh record of declared instance `id` (see [`instance_record`]).
    pub fn declare(&mut self, id: u32, name: &str) {
        self.instances.insert(id, instance_record(id, name));
    }

    /// The record of instance `id`.
    pub fn fetch(&self, id: u32) -> Result<InstanceRecord, StoreError> {
        self.instances
            .get(&id)
            .cloned()
            .ok_or(StoreError::NotFound(id))
    }

    /// The record of instance `id`, to change.
    fn record_mut(&mut self, id: u32) -> Result<&mut InstanceRecord, StoreError> {
        self.instances.get_mut(&id).ok_or(StoreError::NotFound(id))
    }

    /// [`InstanceStore::update_if`]'s transaction: applies `update` only if
    /// the record is at `expected_generation`, bumping the generation.
    /// Returns the state before and the record after.
    ///
    /// [`InstanceStore::update_if`]: racksim_reconciler::instances::InstanceStore::update_if
    pub fn update_if(
        &mut self,
        id: u32,
        expected_generation: u64,
        update: RuntimeUpdate,
    ) -> Result<(InstanceState, InstanceRecord), StoreError> {
        let rec = self.record_mut(id)?;
        let before = rec.state;
        rec.update_if(expected_generation, update)?;
        Ok((before, rec.clone()))
    }

    /// [`InstanceStore::note_auto_restart`]'s transaction.
    ///
    /// [`InstanceStore::note_auto_restart`]: racksim_reconciler::instances::InstanceStore::note_auto_restart
    pub fn note_auto_restart(&mut self, id: u32, at: Duration) -> Result<(), StoreError> {
        self.record_mut(id)?.auto_restart.note_restart(at);
        Ok(())
    }

    /// The durable counter's next value.
    pub fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Records a new saga, executed by the Nexus named `sec` (upstream's
    /// `current_sec`).
    pub fn saga_create(&mut self, saga: &SagaRecord, sec: &str) {
        self.sagas.insert(saga.id, saga.clone());
        self.saga_sec.insert(saga.id, sec.to_string());
    }

    /// The saga's unfinished records whose executor is `sec`: as upstream,
    /// a Nexus recovers only its own sagas, so two never run one saga.
    pub fn sagas_unfinished(&self, sec: &str) -> Vec<SagaRecord> {
        self.sagas
            .values()
            .filter(|s| self.saga_sec.get(&s.id).map(String::as_str) == Some(sec))
            // Never a done, unwound or stuck one: a stuck saga stays stuck.
            .filter(|s| s.state.is_unfinished())
            .cloned()
            .collect()
    }
}

/// A request to the control plane's instance API (the simulation's driver
/// and live mode's control API queue them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstanceRequest {
    Create { instance: u32, sled: u32 },
    Start { instance: u32, sled: u32 },
    Stop { instance: u32 },
    Delete { instance: u32 },
}

impl InstanceRequest {
    /// The instance the request is about.
    pub fn instance(&self) -> u32 {
        match self {
            InstanceRequest::Create { instance, .. }
            | InstanceRequest::Start { instance, .. }
            | InstanceRequest::Stop { instance }
            | InstanceRequest::Delete { instance } => *instance,
        }
    }

    /// The operation's name, as the trace's `op` field gives it.
    pub fn op(&self) -> &'static str {
        match self {
            InstanceRequest::Create { .. } => "create",
            InstanceRequest::Start { .. } => "start",
            InstanceRequest::Stop { .. } => "stop",
            InstanceRequest::Delete { .. } => "delete",
        }
    }
}

/// The database record of declared instance `id` (1-based): one external
/// IP (`203.0.113.(10+id)`, all ports) and one NIC (`172.30.0.(10+id)`) in
/// the guest VPC, created in state `Creating`.
pub fn instance_record(id: u32, name: &str) -> InstanceRecord {
    let n = id as u8;
    InstanceRecord {
        id,
        name: name.to_string(),
        state: InstanceState::Creating,
        generation: 1,
        sled: None,
        vmm: None,
        external_ips: vec![ExternalIp {
            ip: Ipv4Addr::new(203, 0, 113, 10 + n),
            first_port: 0,
            last_port: 65535,
        }],
        nics: vec![Nic {
            virtual_ip: IpAddr::V4(Ipv4Addr::new(172, 30, 0, 10 + n)),
            mac: MacAddr {
                a: [0xa8, 0x40, 0x25, 0xf0, 0x00, n],
            },
            vni: GUEST_VNI,
        }],
        auto_restart: Default::default(),
    }
}
