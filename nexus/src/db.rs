//! The control plane's database, in memory: instance records with
//! generation-checked (conditional) updates, the instance NAT table with a
//! version ([`NatTable`]), the saga log and which Nexus executes each saga.
//! Each method is one transaction; [`crate::NexusStore`] applies them
//! under its host's lock after the host's round trip. The database lives
//! outside Nexus: a control-plane crash loses Nexus's memory, never this.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
    net::Ipv4Addr,
    time::Duration,
};

use racksim_reconciler::dpd::MacAddr;

use crate::instances::{
    ExternalIp, InstanceRecord, InstanceState, NatConflict, NatTable, Nic, RuntimeUpdate,
    SagaRecord, StoreError, GUEST_VNI,
};

/// The control plane's database. It lives outside Nexus: a control-plane
/// crash loses Nexus's memory, never this.
#[derive(Clone, Debug, Default)]
pub struct Db {
    /// The instance records, each shared with whoever read it last (a
    /// simulated run's checks look at every record after every change of
    /// the rack) and copied only when it changes while shared.
    pub instances: BTreeMap<u32, std::sync::Arc<InstanceRecord>>,
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
    /// The external-IP pool instances take their addresses from at create,
    /// or `None`: each declared instance has its fixed address
    /// (`203.0.113.(10+id)`) from the start, as before pools existed here.
    pub ip_pool: Option<IpPool>,
    /// The instances whose external IPs the pool has taken back (their
    /// delete completed); their records keep the addresses they had.
    pub ips_released: BTreeSet<u32>,
}

/// An external-IP pool: one range of IPv4 addresses, each taken whole
/// (ports 0-65535) by one instance's ephemeral IP.
///
/// As omicron's `NextExternalIp` query (`nexus/db-queries/src/db/queries/
/// external_ip.rs`) allocates an automatic ephemeral IP: the smallest
/// address of the pool's ranges that no live `external_ip` row holds
/// (`time_deleted IS NULL`), so an address released by a delete
/// (`deallocate_external_ip_by_instance_id` sets `time_deleted`) is the
/// next one handed out again. Simplified: one range, one silo, no floating
/// or SNAT addresses, no explicit requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpPool {
    pub first: Ipv4Addr,
    pub last: Ipv4Addr,
}

impl IpPool {
    /// `first-last` (both included), or one address. Refuses a range whose
    /// end is below its start.
    pub fn parse(text: &str) -> Result<IpPool, String> {
        let addr = |s: &str| {
            s.trim()
                .parse::<Ipv4Addr>()
                .map_err(|_| format!("{:?} is not an IPv4 address", s.trim()))
        };
        let (first, last) = match text.split_once('-') {
            Some((a, b)) => (addr(a)?, addr(b)?),
            None => {
                let a = addr(text)?;
                (a, a)
            }
        };
        if last < first {
            return Err(format!(
                "the range ends ({last}) before it starts ({first})"
            ));
        }
        Ok(IpPool { first, last })
    }

    /// Whether `ip` is in the pool.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        (self.first..=self.last).contains(&ip)
    }

    /// The pool's addresses, lowest first.
    pub fn addresses(&self) -> impl Iterator<Item = Ipv4Addr> {
        (u32::from(self.first)..=u32::from(self.last)).map(Ipv4Addr::from)
    }

    /// How many addresses it has.
    pub fn len(&self) -> u64 {
        u64::from(u32::from(self.last) - u32::from(self.first)) + 1
    }

    /// Never: a pool has at least one address.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// `203.0.113.20-203.0.113.21`, or one address alone.
impl std::fmt::Display for IpPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl Db {
    /// An empty database whose NAT ensure and changeset queries are
    /// those eras'.
    pub fn new(
        nat_ensure: crate::instances::NatEnsure,
        nat_changeset: crate::instances::NatChangeset,
    ) -> Db {
        Db {
            nat: NatTable::default()
                .with_ensure(nat_ensure)
                .with_changeset_order(nat_changeset),
            ..Db::default()
        }
    }

    /// The database whose NAT ensure meets a refused insert as
    /// `conflict`'s era did ([`NatConflict`]).
    pub fn with_nat_conflict(mut self, conflict: NatConflict) -> Db {
        self.nat = self.nat.with_conflict(conflict);
        self
    }

    /// The database whose instances take their external IPs from `pool`
    /// at create (declare them after this).
    pub fn with_ip_pool(mut self, pool: Option<IpPool>) -> Db {
        self.ip_pool = pool;
        self
    }

    /// A fresh record of declared instance `id` (see [`instance_record`]);
    /// with a pool, without an external IP until its create allocates one.
    pub fn declare(&mut self, id: u32, name: &str) {
        let mut record = instance_record(id, name);
        if self.ip_pool.is_some() {
            record.external_ips.clear();
        }
        self.instances.insert(id, std::sync::Arc::new(record));
    }

    /// [`InstanceStore::allocate_external_ips`]'s transaction: instance
    /// `id`'s record, with the pool's lowest free address as its external
    /// IP if it has none yet (a retried create keeps the one it got). An
    /// address is free unless an instance whose IPs were not released
    /// holds it. Without a pool the record is returned as it is.
    ///
    /// [`InstanceStore::allocate_external_ips`]: crate::instances::InstanceStore::allocate_external_ips
    pub fn allocate_external_ip(&mut self, id: u32) -> Result<InstanceRecord, StoreError> {
        let Some(pool) = self.ip_pool else {
            return self.fetch(id);
        };
        if !self.record_mut(id)?.external_ips.is_empty() {
            return self.fetch(id);
        }
        let ip = pool
            .addresses()
            .find(|a| self.holder_of(*a).is_none())
            .ok_or_else(|| StoreError::PoolExhausted {
                pool: pool.to_string(),
            })?;
        let rec = self.record_mut(id)?;
        rec.external_ips = vec![ExternalIp {
            ip,
            first_port: 0,
            last_port: 65535,
        }];
        Ok(rec.clone())
    }

    /// [`InstanceStore::release_external_ips`]'s transaction: instance
    /// `id`'s addresses go back to the pool. Returns the addresses
    /// released (none without a pool, or when already released).
    ///
    /// [`InstanceStore::release_external_ips`]: crate::instances::InstanceStore::release_external_ips
    pub fn release_external_ips(&mut self, id: u32) -> Result<Vec<Ipv4Addr>, StoreError> {
        let rec = self.fetch(id)?;
        if self.ip_pool.is_none() || !self.ips_released.insert(id) {
            return Ok(Vec::new());
        }
        Ok(rec.external_ips.iter().map(|ip| ip.ip).collect())
    }

    /// The instance that holds external IP `ip` now (its IPs not
    /// released), if any.
    pub fn holder_of(&self, ip: Ipv4Addr) -> Option<u32> {
        self.instances
            .values()
            .filter(|r| !self.ips_released.contains(&r.id))
            .find(|r| r.external_ips.iter().any(|e| e.ip == ip))
            .map(|r| r.id)
    }

    /// The record of instance `id`.
    pub fn fetch(&self, id: u32) -> Result<InstanceRecord, StoreError> {
        self.instances
            .get(&id)
            .map(|r| InstanceRecord::clone(r))
            .ok_or(StoreError::NotFound(id))
    }

    /// The record of instance `id`, to change.
    fn record_mut(&mut self, id: u32) -> Result<&mut InstanceRecord, StoreError> {
        self.instances
            .get_mut(&id)
            .map(std::sync::Arc::make_mut)
            .ok_or(StoreError::NotFound(id))
    }

    /// [`InstanceStore::update_if`]'s transaction: applies `update` only if
    /// the record is at `expected_generation`, bumping the generation.
    /// Returns the state before and the record after.
    ///
    /// [`InstanceStore::update_if`]: crate::instances::InstanceStore::update_if
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
    /// [`InstanceStore::note_auto_restart`]: crate::instances::InstanceStore::note_auto_restart
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

#[cfg(test)]
mod tests;
