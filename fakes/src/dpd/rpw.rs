//! dpd's instance NAT RPW, as dendrite runs it (dendrite `dpd/src/rpw/mod.rs`
//! at 2df9101e): how it applies one change of Nexus's changeset to the
//! tables ([`DpdState::apply_nat_change`]), and when it runs
//! ([`NatRpwTimer`], [`run_nat_rpw`]). The pull itself — fetching the
//! changesets from Nexus — is the caller's, over its own sockets.

use racksim_wire::nexus::NatEntryView;

use super::{DpdState, NatChange, NatError};

impl DpdState {
    /// Applies one change of Nexus's instance NAT changeset as dendrite's
    /// NAT RPW does (`apply_updates` in dendrite `dpd/src/rpw/mod.rs`):
    ///
    /// * a removal (`deleted`) is `nat::clear_mapping` with the change's
    ///   whole range: `remove_mapping` (dendrite `dpd/src/nat.rs`) removes
    ///   the *first* entry, in port order, of that external address whose
    ///   range overlaps `[first_port, last_port]` — whatever its target and
    ///   whatever its exact range — and only that one; with none, nothing;
    /// * an addition sets the entry, and when that conflicts with entries
    ///   whose ranges overlap it, clears every overlapping entry
    ///   (`clear_overlapping_mappings`) and sets it again (Nexus's table is
    ///   the truth).
    ///
    /// A change that still cannot be applied is reported and skipped, as
    /// dendrite logs it and moves on. Returns the table operations made.
    /// The caller moves the generation ([`Self::set_generation`]) past the
    /// changeset.
    pub fn apply_nat_change(&mut self, c: &NatEntryView) -> Vec<Result<NatChange, String>> {
        let mut done = Vec::new();
        if c.deleted {
            if c.first_port > c.last_port {
                // dendrite's `PortRange::new` refuses it; the RPW logs the
                // error and goes on.
                done.push(Err(format!(
                    "cannot apply the change of generation {}: invalid port range",
                    c.gen
                )));
                return done;
            }
            // Entries are in port order (one address's entries never
            // overlap), so the first overlapping one is the lowest.
            let first_overlapping = self
                .ipv4_entries()
                .into_iter()
                .find(|e| {
                    e.external == c.external_address
                        && e.low <= c.last_port
                        && c.first_port <= e.high
                })
                .map(|e| e.low);
            if let Some(low) = first_overlapping {
                done.extend(self.ipv4_delete(c.external_address, low).map(Ok));
            }
            return done;
        }
        let at_key = self
            .ipv4_get(c.external_address, c.first_port)
            .filter(|e| e.low == c.first_port);
        let wanted = c.to_dpd();
        match at_key {
            Some(e) if e == wanted => return done,
            Some(_) => done.extend(self.ipv4_delete(c.external_address, c.first_port).map(Ok)),
            None => {}
        }
        let (ip, first, last) = (c.external_address, c.first_port, c.last_port);
        let mut created = self.ipv4_create(ip, first, last, c.target());
        if matches!(created, Err(NatError::Conflict)) {
            let overlapping: Vec<u16> = self
                .ipv4_entries()
                .into_iter()
                .filter(|e| e.external == ip && e.low <= last && first <= e.high)
                .map(|e| e.low)
                .collect();
            for low in overlapping {
                done.extend(self.ipv4_delete(ip, low).map(Ok));
            }
            created = self.ipv4_create(ip, first, last, c.target());
        }
        match created {
            Ok(change) => done.extend(change.map(Ok)),
            Err(e) => {
                let m = match e {
                    NatError::Conflict => "its range overlaps another entry".to_string(),
                    NatError::NotFound => "no such entry".to_string(),
                    NatError::BadRequest(m) => m,
                };
                done.push(Err(format!(
                    "cannot apply the change of generation {}: {m}",
                    c.gen
                )))
            }
        }
        done
    }
}

/// How often dendrite's `wait` looks at the RPW's timer
/// (`sleep(Duration::from_secs(1))` in `wait`, dendrite `dpd/src/rpw/mod.rs`).
pub const NAT_RPW_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// The NAT RPW's timer, as dendrite keeps it (`WorkflowServer::timers` in
/// dendrite `dpd/src/rpw/mod.rs` at 2df9101e): one instant, the RPW's next
/// scheduled run, shared between the RPW and the API.
///
/// * It starts at the moment it is made (`WorkflowServer::new` sets it to
///   `Instant::now()`), so a started dpd pulls at once.
/// * `POST /rpw/nat/trigger` ([`Self::trigger`], dendrite's
///   `WorkflowServer::trigger`) sets it to *now*: it does not wake the RPW,
///   it makes the RPW due. The RPW's `wait` notices at its next look, within
///   [`NAT_RPW_POLL`].
/// * After each run (done or failed) the RPW adds the period to it
///   (`update_timer`): to the last *scheduled* time — or the last trigger's
///   time, if one came since — not to the end of the run. So a run longer
///   than the period is followed at once by another (the missed ones are
///   caught up, one by one), and a trigger that arrives *during* a run,
///   after its final (empty) fetch was answered, only moves the base: that
///   change waits for the next scheduled run, up to a period (30 s) later.
///
/// The timer is data, not a notification: dropping the RPW's future
/// (cancelling it, or the zone going down) loses no trigger, since a
/// trigger is a store into the timer that the next wait reads.
///
/// Every instant is `tokio::time::Instant`, so under turmoil or a paused
/// clock the schedule is simulated time and replays exactly. The
/// instants must come from one clock: [`Self::trigger`] is called from the
/// dpd's own server (the same runtime as its RPW); a caller on another
/// clock (a simulation's plan) uses [`Self::restart`] instead.
#[derive(Debug)]
pub struct NatRpwTimer {
    next: std::sync::Mutex<tokio::time::Instant>,
    restarted: std::sync::atomic::AtomicBool,
    /// How many times dpd restarted, and the signal of each restart: the
    /// pull in flight dies with its process.
    restarts: std::sync::atomic::AtomicU64,
    restart_signal: tokio::sync::Notify,
    /// Wakes a waiting RPW when a trigger or a restart moves the timer.
    moved: tokio::sync::Notify,
}

impl Default for NatRpwTimer {
    fn default() -> Self {
        Self::new()
    }
}

impl NatRpwTimer {
    /// A new dpd's timer: due now.
    pub fn new() -> Self {
        NatRpwTimer {
            next: std::sync::Mutex::new(tokio::time::Instant::now()),
            restarted: std::sync::atomic::AtomicBool::new(false),
            restarts: std::sync::atomic::AtomicU64::new(0),
            restart_signal: tokio::sync::Notify::new(),
            moved: tokio::sync::Notify::new(),
        }
    }

    fn next(&self) -> std::sync::MutexGuard<'_, tokio::time::Instant> {
        self.next.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `POST /rpw/nat/trigger`: the RPW is due now.
    pub fn trigger(&self) {
        *self.next() = tokio::time::Instant::now();
        self.moved.notify_waiters();
    }

    /// dpd restarted: its RPW starts over, as a new `WorkflowServer`'s
    /// would, at the RPW's next look at its timer (within
    /// [`NAT_RPW_POLL`]; simplified: a real dpd's new RPW starts when the
    /// process does). Takes no instant, so any clock may call it.
    pub fn restart(&self) {
        self.restarted
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.restarts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.restart_signal.notify_waiters();
        self.moved.notify_waiters();
    }

    /// How many times dpd restarted: which process the RPW's pull (and
    /// its clients) belong to.
    pub fn restart_count(&self) -> u64 {
        self.restarts.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Returns once dpd has restarted since it had restarted `seen` times.
    /// Cancel-safe: it holds nothing but a wait for the signal, which is
    /// registered before the count is looked at, so no restart is missed.
    async fn restarted_since(&self, seen: u64) {
        loop {
            let signal = self.restart_signal.notified();
            tokio::pin!(signal);
            signal.as_mut().enable();
            if self.restart_count() != seen {
                return;
            }
            signal.await;
        }
    }

    /// When the RPW is next due (for tests and traces).
    pub fn due_at(&self) -> tokio::time::Instant {
        *self.next()
    }

    /// dendrite's `update_timer`: the next run is one period after the
    /// last scheduled (or triggered) one.
    fn advance(&self, period: std::time::Duration) {
        let mut next = self.next();
        *next += period;
    }

    /// dendrite's `wait`: look at the timer, and while it is in the
    /// future, sleep [`NAT_RPW_POLL`] and look again. Returns at once when
    /// it is due (`checked_duration_since` is `Some` from the timer's
    /// instant on). Cancel-safe: it holds nothing but a sleep and a wait
    /// for the timer to move.
    ///
    /// The looks are dendrite's: at the entry, then every [`NAT_RPW_POLL`],
    /// each on the timer tick its sleep lands on. A look that finds the
    /// timer in the future does nothing but sleep again, so once the first
    /// sleep has put the looks on whole ticks (the entry may fall between
    /// them), this sleeps straight to the first look that can find the
    /// timer due, and recomputes that look when a trigger or a restart
    /// moves the timer. It returns at the look dendrite's loop returns at,
    /// without the wakes in between: in a long simulated run those were a
    /// third of a small rack's events. A move at the very instant of a
    /// look it skipped counts as after that look, as it did when the look
    /// woke first.
    async fn wait(&self) {
        let poll = NAT_RPW_POLL.as_nanos();
        let mut look = tokio::time::Instant::now();
        let mut on_tick = false;
        loop {
            if self
                .restarted
                .swap(false, std::sync::atomic::Ordering::SeqCst)
            {
                *self.next() = look;
            }
            if look >= *self.next() {
                return;
            }
            if !on_tick {
                tokio::time::sleep(NAT_RPW_POLL).await;
                look = tokio::time::Instant::now();
                on_tick = true;
                continue;
            }
            loop {
                let moved = self.moved.notified();
                tokio::pin!(moved);
                // Registered before the timer is read, so no move is missed.
                moved.as_mut().enable();
                let now = tokio::time::Instant::now();
                let due = if self.restarted.load(std::sync::atomic::Ordering::SeqCst) {
                    now
                } else {
                    *self.next()
                };
                // In polls from the last look: the first look still to come,
                // and the first at or after `due`.
                let ahead = (now - look).as_nanos() / poll + 1;
                let polls = (due.saturating_duration_since(look).as_nanos())
                    .div_ceil(poll)
                    .max(ahead);
                let at = look + NAT_RPW_POLL * u32::try_from(polls).unwrap_or(u32::MAX);
                tokio::select! {
                    biased;
                    // Cancel-safe: a sleep holds nothing but its deadline.
                    () = tokio::time::sleep_until(at) => break,
                    // Cancel-safe: a `Notified` holds nothing but its place
                    // in the queue.
                    () = &mut moved => {}
                }
            }
            look = tokio::time::Instant::now();
        }
    }
}

/// dpd's instance NAT RPW schedule, as dendrite's `nat_workflow` (dendrite
/// `dpd/src/rpw/mod.rs` at 2df9101e) runs it: wait until the timer is due
/// ([`NatRpwTimer`]: at start, `period` after the last scheduled run, or
/// after a trigger, each seen within [`NAT_RPW_POLL`]), make one pull —
/// `pull` fetches and applies changesets from the table's generation until
/// one comes back empty, or fails — then move the timer one `period` on
/// from its last scheduled time, whether the pull succeeded or not.
/// `failed` hears of a failure once, not every period while it lasts.
///
/// Runs until dropped, as long as its switch zone does; shared by the
/// simulation and live mode, which pull over their own sockets.
/// Cancel-safe: the schedule and the triggers live in `timer`, which
/// outlives this future; dropping it mid-wait loses nothing, and dropping
/// it mid-pull leaves whatever the pull applied (as killing dpd would).
pub async fn run_nat_rpw<F: std::future::Future<Output = Result<(), String>>>(
    timer: std::sync::Arc<NatRpwTimer>,
    period: std::time::Duration,
    mut pull: impl FnMut() -> F,
    mut failed: impl FnMut(&str),
) {
    let mut last_failure: Option<String> = None;
    loop {
        timer.wait().await;
        // A dpd restart ends the pull in flight with its process (and its
        // connections: a pull held by a dead peer is not inherited), and
        // the new process's RPW pulls at once, from the timer `restart`
        // made due.
        let process = timer.restart_count();
        let failure = tokio::select! {
            biased;
            // Cancel-safe: see `restarted_since`.
            () = timer.restarted_since(process) => continue,
            // Dropping a pull mid-way leaves what it applied, as killing
            // dpd would.
            result = pull() => result.err(),
        };
        if failure != last_failure {
            if let Some(e) = &failure {
                failed(e);
            }
            last_failure = failure;
        }
        timer.advance(period);
    }
}

#[cfg(test)]
mod tests;
