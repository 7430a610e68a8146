use std::future::Future;
use std::mem;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};

use rand::rngs::SmallRng;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio::task::LocalSet;
use tokio::time::{sleep, Duration, Instant};

use super::Result;

// To support re-creation, we need to store a factory of the future that
// represents the software. This is somewhat annoying in that it requires
// boxxing to avoid generics.
type Software<'a> = Box<dyn Fn() -> Pin<Box<dyn Future<Output = Result>>> + 'a>;

/// Runtime kinds.
pub enum Kind<'a> {
    /// A runtime for executing test code.
    Client,

    /// A runtime that is running simulated host software.
    Host { software: Software<'a> },

    /// A runtime without any software. The network topology uses this for
    /// time tracking and message delivery.
    NoSoftware,
}

/// Runtime configuration.
#[derive(Clone, Default)]
pub struct Config {
    /// Whether io is enabled on the runtime.
    pub enable_io: bool,

    /// Rng used to seed the tokio runtime.
    ///
    /// Only used if the `tokio_unstable` cfg flag is set.
    #[cfg_attr(not(tokio_unstable), expect(dead_code))]
    pub rng: Option<SmallRng>,

    /// Event-driven mode (racksim patch): the runtime shared by every host,
    /// and the signal rung when any host gets work.
    pub shared: Option<(Rc<Runtime>, Arc<Ring>)>,
}

/// Wakes a host in event-driven mode: registered as its `LocalSet`'s waker
/// between runs, so a timer firing or another host's message marks it as
/// having work and rings the simulation.
pub(crate) struct HostWaker {
    pending: AtomicBool,
    /// The host's position in the simulation's host map (which only
    /// grows, and keeps a host's position when it is registered again).
    index: usize,
    ring: Arc<Ring>,
    /// Set while the host's own tasks are being polled ([`Rt::drain`]): a
    /// wake then only marks the host pending, which the drain reads as
    /// "poll again", and rings nothing (the simulation is not waiting).
    draining: AtomicBool,
}

/// What every host's waker signals (event-driven mode): the simulation's
/// ring, which ends a wait for time to pass, and the set of hosts woken
/// since the simulation last looked, so that a step looks at those alone
/// rather than at every host (on the 35-host full rack, looking at every
/// host whenever one was woken was 2% of a run, and a tenth before a step
/// looked only when one was).
#[derive(Default)]
pub(crate) struct Ring {
    pub(crate) notify: tokio::sync::Notify,
    /// The hosts woken outside their own drain since the simulation last
    /// took them: bit `i % 64` of word `i / 64` for the host at position
    /// `i` of the host map. A host whose `pending` is set (and which is not
    /// being drained) is in it: a wake that sets `pending` outside a drain
    /// adds the host, a drain ends with the host's `pending` clear, and the
    /// simulation clears the `pending` of every host it takes from here.
    /// Bits rather than a list: taken in ascending order, they come out in
    /// the host map's order with no sort, lock or allocation.
    woken: WokenSet,
}

/// A set of host positions below [`MAX_HOSTS`], safe to add to from a
/// waker (any thread), with a summary word saying which words have bits.
pub(crate) struct WokenSet {
    summary: AtomicU64,
    words: [AtomicU64; 64],
}

/// The most hosts an event-driven simulation holds.
pub(crate) const MAX_HOSTS: usize = 64 * 64;

impl Default for WokenSet {
    fn default() -> Self {
        WokenSet {
            summary: AtomicU64::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Ring {
    fn push(&self, index: usize) {
        let (word, bit) = (index / 64, index % 64);
        self.woken.words[word].fetch_or(1 << bit, Ordering::SeqCst);
        self.woken.summary.fetch_or(1 << word, Ordering::SeqCst);
    }

    /// Puts the hosts woken since the last take in `into` (emptied
    /// first), each once, in the host map's order (the order a scan of the
    /// map would find them in), and forgets them.
    pub(crate) fn take_woken(&self, into: &mut Vec<usize>) {
        into.clear();
        self.woken.walk(true, |i| {
            into.push(i);
            false
        });
    }

    /// Whether any of the hosts woken since the last take satisfies `f`
    /// (given its position in the host map).
    pub(crate) fn any_woken(&self, f: impl FnMut(usize) -> bool) -> bool {
        self.woken.walk(false, f)
    }
}

impl WokenSet {
    /// Calls `f` with each position in the set, in ascending order, until
    /// it returns true (which this returns); with `take`, empties the set
    /// as it reads it, and `f` must read it all: the summary is taken
    /// first, so a walk stopped early would lose the words it had not
    /// reached.
    fn walk(&self, take: bool, mut f: impl FnMut(usize) -> bool) -> bool {
        let read = |word: &AtomicU64| {
            if take {
                word.swap(0, Ordering::SeqCst)
            } else {
                word.load(Ordering::SeqCst)
            }
        };
        let mut summary = read(&self.summary);
        while summary != 0 {
            let word = summary.trailing_zeros() as usize;
            summary &= summary - 1;
            let mut bits = read(&self.words[word]);
            while bits != 0 {
                if f(word * 64 + bits.trailing_zeros() as usize) {
                    debug_assert!(!take, "a walk that takes the set reads all of it");
                    return true;
                }
                bits &= bits - 1;
            }
        }
        false
    }
}

impl Wake for HostWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // A host already pending is already on the ring (and the ring was
        // rung): only the first wake since the host was last looked at
        // names it.
        if !self.pending.swap(true, Ordering::SeqCst) && !self.draining.load(Ordering::SeqCst) {
            self.ring.push(self.index);
            self.ring.notify.notify_one();
        }
    }
}

/// Per host simulated runtime.
///
/// The tokio runtime is paused (see [`Builder::start_paused`]), which gives us
/// control over when and how to advance time. In particular, see [`Rt::tick`],
/// which lets the runtime do a bit more work.
pub struct Rt<'a> {
    pub kind: Kind<'a>,

    /// Handle to the Tokio runtime driving this simulated host. Each runtime
    /// may have a different sense of "now" which simulates clock skew. In
    /// event-driven mode every host shares one runtime (and one clock).
    tokio: Rc<Runtime>,

    /// Event-driven mode: this host's waker.
    waker: Option<Arc<HostWaker>>,

    /// Local task set used for running !Send tasks.
    local: LocalSet,

    /// A user readable name to identify the node.
    pub nodename: Arc<str>,

    /// Optional handle to a host's software. When software finishes, the handle is
    /// consumed to check for error, which is propagated up to fail the simulation.
    handle: Option<JoinHandle<Result>>,

    /// Runtime configuration.
    config: Config,
}

impl<'a> Rt<'a> {
    /// `index` is the host's position in the simulation's host map.
    pub(crate) fn client<F>(
        nodename: Arc<str>,
        index: usize,
        client: F,
        mut config: Config,
    ) -> Self
    where
        F: Future<Output = Result> + 'static,
    {
        let (tokio, local) = init(&mut config);

        let handle = with(&tokio, &local, || tokio::task::spawn_local(client));
        let waker = host_waker(&config, index);

        Self {
            kind: Kind::Client,
            tokio,
            local,
            waker,
            nodename,
            handle: Some(handle),
            config,
        }
    }

    /// `index` is the host's position in the simulation's host map.
    pub(crate) fn host<F, Fut>(
        nodename: Arc<str>,
        index: usize,
        software: F,
        mut config: Config,
    ) -> Self
    where
        F: Fn() -> Fut + 'a,
        Fut: Future<Output = Result> + 'static,
    {
        let (tokio, local) = init(&mut config);

        let software: Software = Box::new(move || Box::pin(software()));
        let handle = with(&tokio, &local, || tokio::task::spawn_local(software()));
        let waker = host_waker(&config, index);

        Self {
            kind: Kind::Host { software },
            tokio,
            local,
            waker,
            nodename,
            handle: Some(handle),
            config,
        }
    }

    pub(crate) fn no_software() -> Self {
        let mut config = Config::default();
        let (tokio, local) = init(&mut config);

        Self {
            kind: Kind::NoSoftware,
            tokio,
            local,
            waker: None,
            nodename: String::new().into(),
            handle: None,
            config,
        }
    }

    pub(crate) fn is_client(&self) -> bool {
        matches!(self.kind, Kind::Client)
    }

    fn is_host(&self) -> bool {
        matches!(self.kind, Kind::Host { .. })
    }

    pub(crate) fn is_software_running(&self) -> bool {
        self.handle.is_some()
    }

    pub(crate) fn now(&self) -> Instant {
        let _guard = self.tokio.enter();
        Instant::now()
    }

    // This method is called by [`Sim::run`], which iterates through all the
    // runtimes and ticks each one. The magic of this method is described in the
    // documentation for [`LocalSet::run_until`], but it may not be entirely
    // obvious how things fit together.
    //
    // A [`LocalSet`] tracks the tasks to run, which may in turn spawn more
    // tasks. `run_until` drives a top level task to completion, but not its
    // children. If you look below, you may be confused. The task we run here
    // just sleeps and has no children! However, it's the _same `LocalSet`_ that
    // is used to run software on the host.
    //
    // In this way, every time `tick` is called, the following unfolds:
    //
    // 1. Time advances on the runtime
    // 2. We schedule a new task that simply sleeps
    // 3. Other tasks on the `LocalSet` get a chance to run
    // 4. The sleep finishes
    // 5. The runtime pauses
    //
    // Returns whether the software has finished successfully or the error
    // that caused failure. Subsequent calls do not return the error as it is
    // expected to fail the simulation.
    pub(crate) fn tick(&mut self, duration: Duration) -> Result<bool> {
        self.tokio.block_on(async {
            self.local
                .run_until(async {
                    sleep(duration).await;
                })
                .await
        });

        self.poll_completion()
    }

    /// Event-driven mode: whether this host has work at the current instant
    /// (and clear the mark, since the caller is about to run it).
    pub(crate) fn take_pending(&self) -> bool {
        self.waker
            .as_ref()
            .is_some_and(|w| {
                w.pending.load(Ordering::SeqCst) && w.pending.swap(false, Ordering::SeqCst)
            })
    }

    /// Event-driven mode: whether this host has work at the current instant.
    pub(crate) fn is_pending(&self) -> bool {
        self.is_software_running()
            && self
                .waker
                .as_ref()
                .is_some_and(|w| w.pending.load(Ordering::SeqCst))
    }

    /// Event-driven mode: mark this host as having work (new software).
    pub(crate) fn set_pending(&self) {
        if let Some(w) = &self.waker {
            w.wake_by_ref();
        }
    }

    /// Event-driven mode: run this host's tasks until none can make progress
    /// without time passing. Time does not advance: the host's `LocalSet`
    /// is polled directly (inside the runtime's context, for its timers and
    /// `spawn_local`, but not inside `block_on`), so the runtime never parks
    /// and its drivers never turn here. Nothing due now needs them: a timer
    /// already due when it is set fires at registration (tokio's wheel has
    /// processed the current millisecond, since `advance` turns the drivers
    /// whenever the clock moves), and a yielding task (`yield_now`, a spent
    /// co-operative budget) is woken at once, outside a scheduler, rather
    /// than deferred to the next park. Turning the drivers twice per host
    /// per instant was 9% of a fuzz run.
    ///
    /// Idle means: one pass of the `LocalSet` ran out of queued tasks
    /// without waking itself. The passes are polled with this host's own
    /// waker, in its draining mode (a wake marks the host pending and
    /// rings nothing), so the `LocalSet` is left holding it: whatever
    /// wakes one of its tasks later marks the host as pending and rings
    /// the simulation. One waker throughout means the `LocalSet` keeps the
    /// one it has (`AtomicWaker` skips a waker that would wake the same),
    /// where a fresh waker per pass (an allocation each) and the host's
    /// registered again at the end made the `LocalSet` swap its waker
    /// twice per drain.
    pub(crate) fn drain(&mut self) -> Result<bool> {
        let Some(w) = &self.waker else {
            unreachable!("only event-driven mode drains")
        };
        {
            let waker = Waker::from(w.clone());
            let _guard = self.tokio.enter();
            let mut run = pin!(self.local.run_until(std::future::pending::<()>()));
            w.draining.store(true, Ordering::SeqCst);
            loop {
                w.pending.store(false, Ordering::SeqCst);
                let _ = run.as_mut().poll(&mut Context::from_waker(&waker));
                if !w.pending.load(Ordering::SeqCst) {
                    break;
                }
            }
            w.draining.store(false, Ordering::SeqCst);
        }
        self.poll_completion()
    }

    fn poll_completion(&mut self) -> Result<bool> {
        // pull for software completion
        match &self.handle {
            Some(handle) if handle.is_finished() => {
                // Consume handle to extract task result
                if let Some(h) = self.handle.take() {
                    match self.tokio.block_on(h) {
                        // If the host was crashed the JoinError is cancelled, which
                        // needs to be handled to not fail the simulation.
                        Err(je) if je.is_cancelled() => {}
                        res => res??,
                    }
                };
                Ok(true)
            }
            Some(_) => Ok(false),
            None => Ok(true),
        }
    }

    pub(crate) fn crash(&mut self) {
        if !self.is_host() {
            panic!("can only crash host's software");
        }

        if self.handle.take().is_some() {
            self.cancel_tasks();
        };
    }

    pub(crate) fn bounce(&mut self) {
        if !self.is_host() {
            panic!("can only bounce host's software");
        }

        self.cancel_tasks();

        if let Kind::Host { software } = &self.kind {
            let handle = with(&self.tokio, &self.local, || {
                tokio::task::spawn_local(software())
            });
            self.handle.replace(handle);
        };
        self.set_pending();
    }

    /// Cancel all tasks within the [`Rt`] by dropping the current tokio
    /// [`Runtime`].
    ///
    /// Dropping the runtime blocks the calling thread until all futures have
    /// completed, which is desired here to ensure host software completes and
    /// all resources are dropped.
    ///
    /// Both the [`Runtime`] and [`LocalSet`] are replaced with new instances.
    fn cancel_tasks(&mut self) {
        if self.config.shared.is_some() {
            // Event-driven mode: the runtime is everyone's; drop only this
            // host's tasks (inside the runtime, for their timers and I/O).
            let _guard = self.tokio.enter();
            drop(mem::replace(&mut self.local, new_local()));
            return;
        }
        let (tokio, local) = init(&mut self.config);

        _ = mem::replace(&mut self.tokio, tokio);
        drop(mem::replace(&mut self.local, local));
    }
}

fn host_waker(config: &Config, index: usize) -> Option<Arc<HostWaker>> {
    config.shared.as_ref().map(|(_, ring)| {
        // New software has its root task queued.
        ring.push(index);
        Arc::new(HostWaker {
            pending: AtomicBool::new(true),
            index,
            ring: ring.clone(),
            draining: AtomicBool::new(false),
        })
    })
}

/// Build the runtime that every host shares in event-driven mode: paused,
/// seeded like a host's, with its clock on a whole millisecond.
pub(crate) fn shared_runtime(rng: SmallRng) -> Rc<Runtime> {
    let mut config = Config {
        enable_io: false,
        rng: Some(rng),
        shared: None,
    };
    init(&mut config).0
}

fn init(config: &mut Config) -> (Rc<Runtime>, LocalSet) {
    if let Some((tokio, _)) = &config.shared {
        return (tokio.clone(), new_local());
    }
    let mut tokio_builder = tokio::runtime::Builder::new_current_thread();

    #[cfg(tokio_unstable)]
    tokio_builder.unhandled_panic(tokio::runtime::UnhandledPanic::ShutdownRuntime);

    if config.enable_io {
        tokio_builder.enable_io();
    }

    #[cfg(tokio_unstable)]
    if let Some(rng) = &mut config.rng {
        let bytes: [u8; 32] = rand::Rng::random(rng);
        let seed = tokio::runtime::RngSeed::from_bytes(&bytes);
        tokio_builder.rng_seed(seed);
    }

    let tokio = tokio_builder
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();

    tokio.block_on(async {
        // Sleep to "round" `Instant::now()` to the closest `ms`
        tokio::time::sleep(Duration::from_millis(1)).await;
    });

    (Rc::new(tokio), new_local())
}

fn new_local() -> LocalSet {
    #[cfg(not(tokio_unstable))]
    let local = LocalSet::new();

    #[cfg(tokio_unstable)]
    let mut local = LocalSet::new();

    #[cfg(tokio_unstable)]
    local.unhandled_panic(tokio::runtime::UnhandledPanic::ShutdownRuntime);

    local
}

fn with<R>(tokio: &Runtime, local: &LocalSet, f: impl FnOnce() -> R) -> R {
    tokio.block_on(async { local.run_until(async { f() }).await })
}
