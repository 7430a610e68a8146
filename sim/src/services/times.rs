//! How long each fake takes to serve a request: the service times of
//! issue 38, drawn from the seed.
//!
//! Upstream's services are not instant. sled-agent's RUN sets up a
//! Propolis zone and boots it (seconds, with a tail past a minute: omicron
//! #3927), its REGISTER and unregister are bookkeeping in the instance
//! manager, dpd writes its NAT tables into the switch ASIC, and MGS answers
//! from the service processors' state. [`ServiceTimes`] holds one
//! [`ServiceTime`] per service; each serving host draws from it with a
//! [`Draws`], a `SmallRng` seeded from the run seed, the host's name, the
//! service and the host's boot ([`World::derive_seed`]), one draw per
//! request served, so the same seed gives the same times in every process.
//!
//! Where the draws are applied: `services::sled_agent` (REGISTER, RUN,
//! stop, unregister) and `hosts::switch_zone` (dpd's `/nat/...` routes,
//! every MGS route). Whether RUN's reply waits for the boot is the era's
//! ([`crate::era::RunReply`]): since omicron #4691 sled-agent answers RUN
//! once the instance runner has the request and boots in the background.
//! Live mode serves instantly (docs/fidelity.md).
//!
//! The numbers are judgement grounded in upstream's logs and code
//! (docs/fidelity.md, "Service times"); a scenario file overrides any of
//! them with a fixed time or a uniform range (`[service_times]`).

use std::{cell::RefCell, fmt, time::Duration};

use rand::{rngs::SmallRng, Rng, SeedableRng};

use crate::world::World;

/// How long one request of a service takes: fixed, uniform in a range, or
/// a uniform body with a rarer uniform tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceTime {
    /// Always this long (`"90s"` in a scenario file).
    Fixed(Duration),
    /// Uniform in `lo..=hi`, to the microsecond (`"2s..10s"`).
    Uniform(Duration, Duration),
    /// Uniform in `body` but, with probability `tail_per_mille / 1000`,
    /// uniform in `tail` instead: most requests are quick, a few are slow.
    /// (Defaults only; a scenario file writes a fixed time or a range.)
    Tail {
        body: (Duration, Duration),
        tail_per_mille: u32,
        tail: (Duration, Duration),
    },
}

impl ServiceTime {
    /// No time at all.
    pub const INSTANT: ServiceTime = ServiceTime::Fixed(Duration::ZERO);

    /// One draw. A fixed time draws nothing from `rng`.
    pub fn draw(&self, rng: &mut SmallRng) -> Duration {
        fn uniform(rng: &mut SmallRng, lo: Duration, hi: Duration) -> Duration {
            let (lo, hi) = (lo.as_micros() as u64, hi.as_micros() as u64);
            Duration::from_micros(rng.random_range(lo..=hi.max(lo)))
        }
        match *self {
            ServiceTime::Fixed(d) => d,
            ServiceTime::Uniform(lo, hi) => uniform(rng, lo, hi),
            ServiceTime::Tail {
                body,
                tail_per_mille,
                tail,
            } => {
                if rng.random_range(0..1000) < tail_per_mille {
                    uniform(rng, tail.0, tail.1)
                } else {
                    uniform(rng, body.0, body.1)
                }
            }
        }
    }

    /// The longest time a draw can give.
    pub fn max(&self) -> Duration {
        match *self {
            ServiceTime::Fixed(d) => d,
            ServiceTime::Uniform(_, hi) => hi,
            ServiceTime::Tail { body, tail, .. } => body.1.max(tail.1),
        }
    }

    /// Parse a scenario file's value: `"90s"` (fixed) or `"2s..10s"`
    /// (uniform), durations as [`crate::plan`]'s steps write them, parsed
    /// by `parse`.
    pub fn parse(
        text: &str,
        parse: impl Fn(&str) -> Result<Duration, String>,
    ) -> Result<ServiceTime, String> {
        match text.split_once("..") {
            None => parse(text).map(ServiceTime::Fixed),
            Some((a, b)) => {
                let (lo, hi) = (parse(a)?, parse(b)?);
                if lo > hi {
                    return Err(format!(
                        "empty range {text:?}: its low end is above its high end"
                    ));
                }
                Ok(ServiceTime::Uniform(lo, hi))
            }
        }
    }
}

/// `90s`, `2s..10s`, `2s..10s (10s..1m30s in 50 of 1000)`: durations as
/// `fmt` writes them (a scenario file's writer passes its own).
pub fn fmt_with(t: &ServiceTime, fmt: impl Fn(Duration) -> String) -> String {
    match *t {
        ServiceTime::Fixed(d) => fmt(d),
        ServiceTime::Uniform(lo, hi) => format!("{}..{}", fmt(lo), fmt(hi)),
        ServiceTime::Tail {
            body,
            tail_per_mille,
            tail,
        } => format!(
            "{}..{} ({}..{} in {tail_per_mille} of 1000)",
            fmt(body.0),
            fmt(body.1),
            fmt(tail.0),
            fmt(tail.1)
        ),
    }
}

impl fmt::Display for ServiceTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&fmt_with(self, |d| format!("{d:?}")))
    }
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const fn s(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The service time of each timed operation. [`Default`] is upstream's, as
/// docs/fidelity.md grounds each number; a scenario's `[service_times]`
/// replaces any of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceTimes {
    /// sled-agent's REGISTER (`PUT /vmms/{propolis_id}`, upstream
    /// `vmm_register` → `InstanceManager::ensure_registered`): the instance
    /// manager creates the `Instance` and its runner task, no zone yet.
    /// omicron #3927's log has "ensuring instance is registered" to
    /// "registering new instance" in 1 ms and the runner's "Ensuring new
    /// instance" 0.8 s later; issue #7983's registration logs within 1 ms.
    /// Default: 20 ms to 300 ms.
    pub register: ServiceTime,
    /// sled-agent's RUN (state → running): the Propolis zone's install and
    /// boot and Propolis's own start (`InstanceRunner::setup_propolis_zone`,
    /// omicron b848b6df `sled-agent/src/instance.rs`). Upstream logs: about
    /// 2 s from RUN to the zone installed (#7918), 24 s to set up the zone
    /// of a 96 GiB instance (#3417), and 81 s for the install that timed a
    /// start out (#3927). Default: 2 s to 10 s, and in 50 of 1000 draws
    /// 10 s to 90 s. Whether the reply waits for it is the era's
    /// ([`crate::era::RunReply`]).
    pub run: ServiceTime,
    /// sled-agent's stop (state → stopped): Propolis stops the guest and the
    /// zone is torn down (`InstanceRunner::put_state(Stopped)`, then
    /// `terminate`: halt and delete the zone). Default: 1 s to 5 s.
    pub stop: ServiceTime,
    /// sled-agent's unregister (`DELETE /vmms/{id}`, upstream
    /// `vmm_unregister` → `ensure_unregistered` → `Instance::terminate`) of
    /// a VMM that never ran: the runner exits, nothing to tear down.
    /// Default: 10 ms to 50 ms. Unregistering a VMM whose guest runs takes
    /// [`Self::stop`]'s time: the guest is stopped and its zone torn down.
    pub unregister: ServiceTime,
    /// dpd's NAT calls (`/nat/ipv4/...`, `/nat/ipv6/...`: create, delete,
    /// get, list): dendrite's handler updates its table and writes the
    /// entry into the Tofino's NAT table through the switch driver.
    /// Default: 1 ms to 10 ms.
    pub dpd_nat: ServiceTime,
    /// Every MGS call (`/local/switch-id`, a sled's power state): MGS
    /// answers from its own state or one message to a service processor
    /// over the management network. Default: 1 ms to 5 ms.
    pub mgs: ServiceTime,
}

impl Default for ServiceTimes {
    fn default() -> Self {
        ServiceTimes {
            register: ServiceTime::Uniform(ms(20), ms(300)),
            run: ServiceTime::Tail {
                body: (s(2), s(10)),
                tail_per_mille: 50,
                tail: (s(10), s(90)),
            },
            stop: ServiceTime::Uniform(s(1), s(5)),
            unregister: ServiceTime::Uniform(ms(10), ms(50)),
            dpd_nat: ServiceTime::Uniform(ms(1), ms(10)),
            mgs: ServiceTime::Uniform(ms(1), ms(5)),
        }
    }
}

impl ServiceTimes {
    /// Every service answers at once (what the fakes did before issue 38;
    /// for tests that want no service time).
    pub const INSTANT: ServiceTimes = ServiceTimes {
        register: ServiceTime::INSTANT,
        run: ServiceTime::INSTANT,
        stop: ServiceTime::INSTANT,
        unregister: ServiceTime::INSTANT,
        dpd_nat: ServiceTime::INSTANT,
        mgs: ServiceTime::INSTANT,
    };

    /// The services by the names a scenario file's `[service_times]`
    /// gives them, in the order it writes them.
    pub const NAMES: [&'static str; 6] =
        ["register", "run", "stop", "unregister", "dpd_nat", "mgs"];

    /// The service named `name` (one of [`Self::NAMES`]).
    pub fn get_mut(&mut self, name: &str) -> Option<&mut ServiceTime> {
        Some(match name {
            "register" => &mut self.register,
            "run" => &mut self.run,
            "stop" => &mut self.stop,
            "unregister" => &mut self.unregister,
            "dpd_nat" => &mut self.dpd_nat,
            "mgs" => &mut self.mgs,
            _ => return None,
        })
    }

    /// The services by name, in [`Self::NAMES`]' order.
    pub fn named(&self) -> [(&'static str, ServiceTime); 6] {
        [
            ("register", self.register),
            ("run", self.run),
            ("stop", self.stop),
            ("unregister", self.unregister),
            ("dpd_nat", self.dpd_nat),
            ("mgs", self.mgs),
        ]
    }
}

/// One serving host's generator of service times: a stream of its own per
/// host, service and boot, so a draw never moves any other random choice
/// of the run.
pub struct Draws {
    rng: RefCell<SmallRng>,
}

impl Draws {
    /// The draws of `service` on `host` in its boot `boot`.
    pub fn new(world: &World, host: &str, service: &str, boot: u64) -> Draws {
        Draws::from_seed(world.derive_seed(&format!("{host}/{service}/service-time"), boot))
    }

    pub fn from_seed(seed: u64) -> Draws {
        Draws {
            rng: RefCell::new(SmallRng::seed_from_u64(seed)),
        }
    }

    /// The time of one request of a service whose distribution is `time`.
    pub fn draw(&self, time: &ServiceTime) -> Duration {
        time.draw(&mut self.rng.borrow_mut())
    }
}
