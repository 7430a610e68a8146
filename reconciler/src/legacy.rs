//! The legacy zone-start NAT path, faithful to its bugs.
//!
//! This is what sled-agent did when starting a zone with external
//! connectivity (boundary NTP, Nexus, external DNS), synchronously, before the
//! zone could start:
//!
//! 1. **Find the switches.** Look up the switch zones in internal DNS and ask
//!    each one's MGS which switch it manages. Repeat (with the lookup's
//!    backoff, [`SWITCH_MAPPING`], interval capped at 15 s) until
//!    every *expected* (uplinked) switch is found — or, if at least one was
//!    found, until [`SWITCH_DISCOVERY_TIMEOUT`] (5 minutes) has passed since
//!    the start, then proceed with what the last lookup found. With none
//!    found, repeat forever. A switch without an uplink is never waited for
//!    nor programmed, even when it answers (omicron's
//!    `lookup_uplinked_switch_zone_underlay_addrs` kept only the switches
//!    with ports in the rack network config); with no uplinks at all there
//!    is nothing to look up.
//! 2. **Ensure the entry on each found switch,** in slot order, retrying
//!    forever on *that address* (with [`INTERNAL_SERVICE_AGGRESSIVE`],
//!    interval capped at 3 minutes) until it succeeds: get the entry at
//!    `(external_ip, first_port)`; if it exists with the same `internal_ip`,
//!    done; otherwise delete it (if present) and create the desired one.
//!
//! The bugs (the zone-start NAT issue), all deliberately kept, because this module exists to
//! prove that the testbed catches them:
//!
//! * zone start blocks for up to five minutes, or forever;
//! * a switch missing from the lookup when the five minutes expire never gets
//!   the entry (the *madrid* incident);
//! * a found switch that dies, and whose scrimlet is replaced at a new
//!   address before the ensure succeeds, leaves the caller retrying the dead
//!   address forever;
//! * only `internal_ip` is compared: a stale MAC, VNI or port range is
//!   accepted as correct;
//! * nothing ever runs this again: entries lost to a dpd restart stay lost.
//!
//! Randomness (backoff jitter) comes only from the RNG the caller passes, and
//! time only from `tokio::time`, so a simulation replays it exactly.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::{Ipv6Addr, SocketAddr},
    time::Duration,
};

use serde::Serialize;
use tokio::{sync::watch, time::Instant};

use crate::{
    discovery::{SwitchSlot, SwitchZoneResolver},
    dpd::DpdClient,
    http::{ClientError, Connector, HttpClient},
    mgs::MgsClient,
    nat::{create_entry, delete_entry, get_entry, NatEntry},
    task::StatusLog,
    DPD_PORT, MGS_PORT,
};

/// How long zone start waits for *all* expected switches once at least one
/// has been found.
pub const SWITCH_DISCOVERY_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// An exponential backoff policy as the `backoff` crate's
/// `ExponentialBackoff` holds one: delay `n` (from 0) is `base_n * u`, with
/// `base_n = min(max_interval, initial * multiplier^n)` and `u` drawn
/// uniformly from `[1 - randomization, 1 + randomization]`. As in the crate,
/// the cap applies to the interval *before* jitter, so a delay can exceed
/// `max_interval` by the randomization factor. There is no limit on elapsed
/// time: both of omicron's policies modelled here set `max_elapsed_time` to
/// `None`, and the caller decides when to stop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BackoffPolicy {
    pub initial: Duration,
    pub multiplier: f64,
    pub max_interval: Duration,
    pub randomization: f64,
}

impl BackoffPolicy {
    /// The longest delay the policy can draw: the capped interval at the
    /// top of its jitter.
    pub fn max_delay(&self) -> Duration {
        self.max_interval.mul_f64(1.0 + self.randomization)
    }
}

/// The `backoff` crate's default randomization factor
/// (`backoff::default::RANDOMIZATION_FACTOR`), which neither omicron policy
/// below overrides.
const BACKOFF_CRATE_RANDOMIZATION: f64 = 0.5;

/// omicron's `retry_policy_internal_service_aggressive`
/// (`common/src/backoff.rs`): 100 ms initial interval, x1.2 per retry,
/// interval capped at 3 minutes. The legacy path's *ensure* loop (step 2)
/// retries with it, forever, on each found switch.
pub const INTERNAL_SERVICE_AGGRESSIVE: BackoffPolicy = BackoffPolicy {
    initial: Duration::from_millis(100),
    multiplier: 1.2,
    max_interval: Duration::from_secs(3 * 60),
    randomization: BACKOFF_CRATE_RANDOMIZATION,
};

/// omicron's `retry_policy_switch_mapping`
/// (`sled-agent/early-networking/src/lib.rs`), which
/// `lookup_uplinked_switch_zone_underlay_addrs` retries its lookups with:
/// the aggressive policy's 100 ms x1.2, but the interval capped at 15 s,
/// because the lookup does not retry forever (after the 5-minute wait it
/// stops at the first lookup that finds any switch). The legacy path's
/// *lookup* (step 1) uses it: so its give-up comes at most one 15 s x1.5
/// delay after the 5 minutes, and a sled that finds no switch looks again
/// at least every 22.5 s.
pub const SWITCH_MAPPING: BackoffPolicy = BackoffPolicy {
    initial: Duration::from_millis(100),
    multiplier: 1.2,
    max_interval: Duration::from_secs(15),
    randomization: BACKOFF_CRATE_RANDOMIZATION,
};

/// A [`BackoffPolicy`] being drawn, with jitter from a caller-seeded RNG.
/// Jitter keeps many sleds that failed together from retrying in lockstep;
/// taking it from the caller's RNG keeps runs reproducible.
#[derive(Clone, Debug)]
pub struct Backoff<Rn> {
    policy: BackoffPolicy,
    rng: Rn,
    base: Duration,
}

impl<Rn: rand::Rng> Backoff<Rn> {
    pub fn new(policy: BackoffPolicy, rng: Rn) -> Self {
        Backoff {
            policy,
            rng,
            base: policy.initial,
        }
    }

    pub fn next_delay(&mut self) -> Duration {
        let r = self.policy.randomization;
        let factor = self.rng.random_range((1.0 - r)..=(1.0 + r));
        let delay = self.base.mul_f64(factor);
        self.base = self
            .base
            .mul_f64(self.policy.multiplier)
            .min(self.policy.max_interval);
        delay
    }
}

/// Where [`ensure_zone_nat`] is, published on a `watch` channel so that a
/// blocked zone start can at least be seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum LegacyProgress {
    LookingUpSwitches,
    /// Some but not all expected switches found; waiting (up to 5 min) for the rest.
    WaitingForSwitches {
        found: BTreeMap<SwitchSlot, Ipv6Addr>,
        missing: Vec<SwitchSlot>,
    },
    /// The 5-minute wait expired; proceeding with what was found.
    GaveUpWaiting {
        found: BTreeMap<SwitchSlot, Ipv6Addr>,
        missing: Vec<SwitchSlot>,
    },
    /// Retrying forever on this address until the ensure succeeds.
    EnsuringNat {
        switch: SwitchSlot,
        address: Ipv6Addr,
        attempts: u64,
        last_error: Option<String>,
    },
    Done {
        programmed: Vec<SwitchSlot>,
    },
}

/// The progress line for logs: phases, not attempt counts, so repeated
/// identical failures read the same.
impl std::fmt::Display for LegacyProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |v: &mut dyn Iterator<Item = &SwitchSlot>| {
            v.map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
        };
        match self {
            LegacyProgress::LookingUpSwitches => f.write_str("looking up switch zones"),
            LegacyProgress::WaitingForSwitches { found, missing } => write!(
                f,
                "found [{}]; waiting up to {}m for [{}]",
                names(&mut found.keys()),
                SWITCH_DISCOVERY_TIMEOUT.as_secs() / 60,
                names(&mut missing.iter())
            ),
            LegacyProgress::GaveUpWaiting { found, missing } => write!(
                f,
                "gave up waiting for [{}]; proceeding with [{}]",
                names(&mut missing.iter()),
                names(&mut found.keys())
            ),
            LegacyProgress::EnsuringNat {
                switch,
                address,
                last_error: None,
                ..
            } => write!(f, "ensuring NAT entry on {switch} at {address}"),
            LegacyProgress::EnsuringNat {
                switch,
                last_error: Some(e),
                ..
            } => write!(f, "ensure on {switch} failing, retrying forever: {e}"),
            LegacyProgress::Done { programmed } => {
                write!(f, "NAT ensured on [{}]", names(&mut programmed.iter()))
            }
        }
    }
}

/// Blocks until done (possibly forever). Steps: discover (DNS + MGS /local/switch-id per zone)
/// with backoff until all `expected` found, or >=1 found and 5 min elapsed since start; none found
/// -> forever. Then for each found switch in slot order: forever { get(ip, first_port):
/// Some(t) if t.internal_ip == entry.target.internal_ip -> done (bug: mac/vni/range ignored);
/// Some(_) -> delete then create; None -> create } with backoff between attempts.
///
/// Returns the slots programmed (the expected switches found by the last
/// lookup, in slot order). Only *expected* (uplinked) switches are ever
/// programmed, as in omicron's sled-agent, whose zone start asked
/// `EarlyNetworkSetup::lookup_uplinked_switch_zone_underlay_addrs`
/// (`sled-agent/src/bootstrap/early_networking.rs`) for the switches with
/// ports in the rack network config and dropped every other switch found.
/// With no uplinked switch at all there is nothing to look up: the zone
/// starts at once and no switch gets the entry.
pub async fn ensure_zone_nat<C: Connector, Res: SwitchZoneResolver, Rn: rand::Rng>(
    connector: &C,
    resolver: &Res,
    expected: &BTreeSet<SwitchSlot>,
    entry: &NatEntry,
    rng: &mut Rn,
    progress: &watch::Sender<LegacyProgress>,
) -> Vec<SwitchSlot> {
    let mut progress = StatusLog::new(progress, "legacy", "");
    let found = discover_switches(connector, resolver, expected, rng, &mut progress).await;

    for (&switch, &address) in &found {
        let dpd = DpdClient::new(HttpClient::new(
            connector.clone(),
            SocketAddr::new(address.into(), DPD_PORT),
        ));
        let mut backoff = Backoff::new(INTERNAL_SERVICE_AGGRESSIVE, &mut *rng);
        let mut last_error: Option<String> = None;
        let mut attempts = 0;
        let ensuring = |attempts, last_error: &Option<String>| LegacyProgress::EnsuringNat {
            switch,
            address,
            attempts,
            last_error: last_error.clone(),
        };
        loop {
            attempts += 1;
            progress.set(ensuring(attempts, &last_error), last_error.is_some());
            match ensure_once(&dpd, entry).await {
                Ok(()) => break,
                Err(e) => {
                    last_error = Some(e.to_string());
                    progress.set(ensuring(attempts, &last_error), true);
                    let delay = backoff.next_delay();
                    tracing::debug!(task = "legacy", %switch, attempts, delay_ms = delay.as_millis() as u64, "ensure failed; backing off");
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    let programmed: Vec<SwitchSlot> = found.keys().copied().collect();
    progress.set(
        LegacyProgress::Done {
            programmed: programmed.clone(),
        },
        false,
    );
    programmed
}

/// Step 1: repeat lookups until every expected switch is found, or at least
/// one is and the discovery timeout has passed. The result is the last
/// lookup's, not a union: a switch seen once and gone since is not used.
async fn discover_switches<C: Connector, Res: SwitchZoneResolver, Rn: rand::Rng>(
    connector: &C,
    resolver: &Res,
    expected: &BTreeSet<SwitchSlot>,
    rng: &mut Rn,
    progress: &mut StatusLog<'_, LegacyProgress>,
) -> BTreeMap<SwitchSlot, Ipv6Addr> {
    // No uplinks: upstream returned the empty set without a lookup.
    if expected.is_empty() {
        return BTreeMap::new();
    }
    let start = Instant::now();
    let mut backoff = Backoff::new(SWITCH_MAPPING, rng);
    progress.set(LegacyProgress::LookingUpSwitches, false);
    loop {
        // A switch without an uplink is not wanted, even when it answers:
        // upstream kept only the switches it was asked to find, so "found"
        // means "found and expected" (none of those: keep looking).
        let mut found = lookup_switches(connector, resolver).await;
        found.retain(|slot, _| expected.contains(slot));
        let missing: Vec<SwitchSlot> = expected
            .iter()
            .filter(|slot| !found.contains_key(slot))
            .copied()
            .collect();
        if missing.is_empty() {
            return found;
        }
        if !found.is_empty() && start.elapsed() >= SWITCH_DISCOVERY_TIMEOUT {
            // The 5-minute give-up is the path's known weak point: a warning.
            progress.set(
                LegacyProgress::GaveUpWaiting {
                    found: found.clone(),
                    missing,
                },
                true,
            );
            return found;
        }
        let next = if found.is_empty() {
            LegacyProgress::LookingUpSwitches
        } else {
            LegacyProgress::WaitingForSwitches { found, missing }
        };
        // Only phase changes are published and logged: a lookup every few
        // seconds that finds the same thing is not news.
        progress.set(next, false);
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// One lookup: DNS, then each zone's MGS (concurrently, answers in address
/// order). Zones whose MGS fails or answers something other than a switch
/// slot are skipped; if two zones claim one slot, the lower address wins.
async fn lookup_switches<C: Connector, Res: SwitchZoneResolver>(
    connector: &C,
    resolver: &Res,
) -> BTreeMap<SwitchSlot, Ipv6Addr> {
    let Ok(addresses) = resolver.switch_zones().await else {
        return BTreeMap::new();
    };
    let addresses: BTreeSet<Ipv6Addr> = addresses.into_iter().collect();
    let answers = futures::future::join_all(addresses.iter().map(|&address| {
        let mgs = MgsClient::new(HttpClient::new(
            connector.clone(),
            SocketAddr::new(address.into(), MGS_PORT),
        ));
        async move { (address, mgs.local_switch_id().await) }
    }))
    .await;
    let mut found = BTreeMap::new();
    for (address, answer) in answers {
        if let Some(slot) = answer.ok().and_then(|id| id.switch_slot()) {
            found.entry(slot).or_insert(address);
        }
    }
    found
}

/// Step 2, one attempt. Compares only `internal_ip` (bug, kept).
async fn ensure_once<C: Connector>(
    dpd: &DpdClient<C>,
    entry: &NatEntry,
) -> Result<(), ClientError> {
    match get_entry(dpd, entry).await? {
        Some(existing) if existing.internal_ip == entry.target.internal_ip => Ok(()),
        Some(_) => {
            delete_entry(dpd, entry).await?;
            create_entry(dpd, entry).await
        }
        None => create_entry(dpd, entry).await,
    }
}

#[cfg(test)]
mod tests;
