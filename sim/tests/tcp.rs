//! Tests of TCP as the simulation runs it: the patched turmoil's
//! `Builder::linux_tcp` (`vendor/turmoil/src/linux_tcp.rs`), which every
//! racksim run turns on.
//!
//! Each rule is run twice: on Linux's TCP, where it must hold, and on
//! turmoil's TCP as published (0.7.2, the option off), where the same
//! scenario must come out as 0.7.2 makes it — so each test shows the rule
//! is the patch's doing and would fail without it.

use std::{cell::RefCell, io, net::Ipv4Addr, rc::Rc, time::Duration};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turmoil::net::{TcpListener, TcpStream};

/// Which TCP a scenario runs on.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tcp {
    /// `Builder::linux_tcp(true)`, as racksim runs.
    Linux,
    /// turmoil 0.7.2 as published.
    Published,
}

const PORT: u16 = 9000;
/// Every link's latency: a rack's underlay, sub-millisecond.
const LATENCY: Duration = Duration::from_micros(100);

fn sim(tcp: Tcp, event_driven: bool) -> turmoil::Sim<'static> {
    let mut b = turmoil::Builder::new();
    b.event_driven(event_driven)
        .rng_seed(7)
        .epoch(std::time::SystemTime::UNIX_EPOCH)
        .min_message_latency(LATENCY)
        .max_message_latency(LATENCY)
        .linux_tcp(tcp == Tcp::Linux)
        .simulation_duration(Duration::from_secs(3 * 3600));
    if !event_driven {
        b.tick_duration(Duration::from_millis(1));
    }
    b.build()
}

fn now() -> Duration {
    turmoil::sim_elapsed().expect("inside a host")
}

/// What a scenario's hosts saw, with the simulated instant.
type Log = Rc<RefCell<Vec<(Duration, String)>>>;

fn record(log: &Log, what: impl Into<String>) {
    log.borrow_mut().push((now(), what.into()));
}

/// A server on `server`: each connection's request is logged, then
/// answered `reply_after` later with "pong".
fn server(sim: &mut turmoil::Sim<'static>, log: &Log, reply_after: Duration) {
    let log = log.clone();
    sim.host("server", move || {
        let log = log.clone();
        async move {
            let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, PORT)).await?;
            loop {
                let (mut s, _) = listener.accept().await?;
                let log = log.clone();
                tokio::task::spawn_local(async move {
                    let mut buf = [0u8; 4];
                    if s.read_exact(&mut buf).await.is_ok() {
                        record(&log, "server got ping");
                        tokio::time::sleep(reply_after).await;
                        let _ = s.write_all(b"pong").await;
                        record(&log, "server sent pong");
                    }
                    // Hold the connection open until the client closes it.
                    let _ = s.read(&mut buf).await;
                });
            }
        }
    });
}

/// An event-driven simulation on `tcp` with [`server`] answering
/// `reply_after` its request, and the log its hosts write to.
fn served(tcp: Tcp, reply_after: Duration) -> (turmoil::Sim<'static>, Log) {
    let log = Log::default();
    let mut sim = sim(tcp, true);
    server(&mut sim, &log, reply_after);
    (sim, log)
}

/// Connect to the server under the caller's `timeout`, as an HTTP client
/// wraps its connect.
async fn connect(timeout: Duration) -> io::Result<TcpStream> {
    match tokio::time::timeout(timeout, TcpStream::connect(("server", PORT))).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "caller's timeout")),
    }
}

/// One read of up to 4 bytes under `limit`, as the tests log it:
/// `Ok(Ok(n))`, `Ok(Err(kind))` or `Err(Elapsed(()))`.
async fn read_within(s: &mut TcpStream, limit: Duration) -> String {
    let mut buf = [0u8; 4];
    let r = tokio::time::timeout(limit, s.read(&mut buf)).await;
    format!("{:?}", r.map(|r| r.map_err(|e| e.kind())))
}

/// A client that connects `after` the start, under the caller's `timeout`
/// if any, and logs how the connect ended ("connect: Ok(())" or the
/// error's kind).
fn connecting_client(
    sim: &mut turmoil::Sim<'static>,
    log: &Log,
    after: Duration,
    timeout: Option<Duration>,
) {
    let l = log.clone();
    sim.client("client", async move {
        tokio::time::sleep(after).await;
        let r = match timeout {
            Some(t) => connect(t).await.map(|_| ()),
            None => TcpStream::connect(("server", PORT)).await.map(|_| ()),
        };
        record(&l, format!("connect: {:?}", r.map_err(|e| e.kind())));
        Ok(())
    });
}

/// One request: connect, "ping", read "pong", all under `timeout`. The
/// outcome is logged as "ok" or the error's kind.
async fn request(log: &Log, timeout: Duration) {
    let exchange = async {
        let mut s = TcpStream::connect(("server", PORT)).await?;
        record(log, "connected");
        s.write_all(b"ping").await?;
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).await?;
        io::Result::Ok(())
    };
    let outcome = match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(())) => "ok".to_string(),
        Ok(Err(e)) => format!("{:?}", e.kind()),
        Err(_) => "caller timed out".to_string(),
    };
    record(log, format!("request: {outcome}"));
}

/// Run until the client finishes (or the simulation's duration passes).
fn run(mut sim: turmoil::Sim<'static>) {
    sim.run().expect("simulation runs");
}

/// Run to the instant `at` (simulated time since the start), exactly.
fn run_to(sim: &mut turmoil::Sim<'static>, at: Duration) {
    while sim.elapsed() < at {
        sim.step_until(at).unwrap();
    }
}

/// A client that makes one [`request`] under the caller's `timeout`.
fn requesting_client(sim: &mut turmoil::Sim<'static>, log: &Log, timeout: Duration) {
    let l = log.clone();
    sim.client("client", async move {
        request(&l, timeout).await;
        Ok(())
    });
}

fn lines(log: &Log) -> Vec<(f64, String)> {
    log.borrow()
        .iter()
        .map(|(t, w)| ((t.as_secs_f64() * 1e4).round() / 1e4, w.clone()))
        .collect()
}

fn outcome(log: &Log) -> (f64, String) {
    lines(log)
        .into_iter()
        .rfind(|(_, w)| w.starts_with("request:") || w.starts_with("connect:"))
        .expect("the client finished")
}

/// A connect across a one-way cut (the server's answers lost): Linux's
/// handshake needs the SYN-ACK back, so the connect never completes and
/// the server's application never sees the connection. turmoil 0.7.2
/// answers the SYN in memory and connects.
#[test]
fn a_handshake_across_a_one_way_cut_fails() {
    for tcp in [Tcp::Linux, Tcp::Published] {
        let (mut sim, log) = served(tcp, Duration::ZERO);
        connecting_client(
            &mut sim,
            &log,
            Duration::ZERO,
            Some(Duration::from_secs(60)),
        );
        sim.partition_oneway("server", "client");
        run(sim);
        let (at, what) = outcome(&log);
        match tcp {
            Tcp::Linux => {
                assert_eq!(what, "connect: Err(TimedOut)", "{tcp:?}");
                assert_eq!(at, 60.0, "the caller's timeout decides");
            }
            Tcp::Published => assert_eq!(what, "connect: Ok(())", "{tcp:?}"),
        }
    }
}

/// With no timeout of the caller's, an unanswered SYN is sent at 0, 1, 3,
/// 7, 15, 31 and 63 s (`tcp_syn_retries` = 6) and the connect fails at
/// 127 s; a cut that heals at 5 s lets the SYN of 7 s through.
#[test]
fn an_unanswered_syn_is_retransmitted_on_linux_backoff() {
    // Down for good: the connect gives up at 127 s.
    let (mut sim, log) = served(Tcp::Linux, Duration::ZERO);
    connecting_client(&mut sim, &log, Duration::ZERO, None);
    sim.partition("client", "server");
    run(sim);
    assert_eq!(outcome(&log), (127.0, "connect: Err(TimedOut)".into()));

    // Healed at 5 s: the retransmission at 7 s connects, one round trip
    // later.
    let (mut sim, log) = served(Tcp::Linux, Duration::ZERO);
    connecting_client(&mut sim, &log, Duration::ZERO, None);
    sim.partition("client", "server");
    run_to(&mut sim, Duration::from_secs(5));
    sim.repair("client", "server");
    run(sim);
    assert_eq!(outcome(&log), (7.0002, "connect: Ok(())".into()));
}

/// A connect to a host that is down gets no answer: Linux's connect times
/// out (here at the caller's 15 s). turmoil 0.7.2 refuses it at once
/// (the crashed host's dropped SYN closes the in-memory answer channel).
#[test]
fn a_connect_to_a_crashed_host_times_out() {
    for tcp in [Tcp::Linux, Tcp::Published] {
        let (mut sim, log) = served(tcp, Duration::ZERO);
        connecting_client(
            &mut sim,
            &log,
            Duration::from_secs(1),
            Some(Duration::from_secs(15)),
        );
        sim.step().unwrap();
        sim.crash("server");
        run(sim);
        let (at, what) = outcome(&log);
        match tcp {
            Tcp::Linux => assert_eq!((at, what.as_str()), (16.0, "connect: Err(TimedOut)")),
            Tcp::Published => {
                assert_eq!(what, "connect: Err(ConnectionRefused)");
                assert!(at < 1.01, "refused at once: {at}");
            }
        }
    }
}

/// A connect to a host that is up with nothing listening is refused by
/// the RST it answers across the network: one round trip on Linux's TCP,
/// and not at all if that RST cannot come back (a one-way cut), where the
/// connect times out. turmoil 0.7.2 refuses in memory, through any cut.
#[test]
fn a_connect_to_a_closed_port_is_refused_across_the_network() {
    for tcp in [Tcp::Linux, Tcp::Published] {
        for cut in [false, true] {
            let log = Log::default();
            let mut sim = self::sim(tcp, true);
            sim.host("server", || async {
                std::future::pending::<()>().await;
                Ok(())
            });
            connecting_client(
                &mut sim,
                &log,
                Duration::ZERO,
                Some(Duration::from_secs(15)),
            );
            if cut {
                sim.partition_oneway("server", "client");
            }
            run(sim);
            let got = outcome(&log);
            let want = match (tcp, cut) {
                (Tcp::Linux, false) => (0.0002, "connect: Err(ConnectionRefused)"),
                (Tcp::Linux, true) => (15.0, "connect: Err(TimedOut)"),
                (Tcp::Published, _) => (0.0001, "connect: Err(ConnectionRefused)"),
            };
            assert_eq!((got.0, got.1.as_str()), want, "{tcp:?}, cut: {cut}");
        }
    }
}

/// A cut that begins while a request is in flight and heals before the
/// caller's timeout only delays the reply: the server's "pong" is lost to
/// the cut and retransmitted on the RTO backoff (0.2, 0.6, 1.4, 3.0 s
/// after it was sent) until one gets through. turmoil 0.7.2 loses it for
/// good, and the caller times out.
#[test]
fn a_short_cut_during_a_request_only_delays_its_reply() {
    for event_driven in [true, false] {
        for tcp in [Tcp::Linux, Tcp::Published] {
            let log = Log::default();
            let mut sim = self::sim(tcp, event_driven);
            server(&mut sim, &log, Duration::from_secs(1));
            requesting_client(&mut sim, &log, Duration::from_secs(60));
            // The request is in (at 0.0003 s); the cut begins at 0.5 s,
            // the reply is sent into it at 1.0003 s, the cut heals at 3 s.
            run_to(&mut sim, Duration::from_millis(500));
            sim.partition("client", "server");
            run_to(&mut sim, Duration::from_secs(3));
            sim.repair("client", "server");
            run(sim);
            let (at, what) = outcome(&log);
            let mode = format!("{tcp:?}, event-driven: {event_driven}");
            match tcp {
                Tcp::Linux => {
                    assert_eq!(what, "request: ok", "{mode}");
                    // Sent at 1.0003 s: expiries at +0.2, +0.6, +1.4 (all
                    // into the cut), +3.0 s → through at about 4.0 s.
                    assert!((4.0..4.01).contains(&at), "{mode}: at {at}");
                }
                Tcp::Published => {
                    assert_eq!(
                        (at, what.as_str()),
                        (60.0, "request: caller timed out"),
                        "{mode}"
                    )
                }
            }
        }
    }
}

/// A cut that outlasts the caller's timeout loses the reply on any TCP:
/// the request reached the server (it acted on it), the caller gave up.
#[test]
fn a_cut_that_outlasts_the_callers_timeout_loses_the_reply() {
    for tcp in [Tcp::Linux, Tcp::Published] {
        let (mut sim, log) = served(tcp, Duration::from_secs(1));
        requesting_client(&mut sim, &log, Duration::from_secs(60));
        run_to(&mut sim, Duration::from_millis(500));
        sim.partition("client", "server");
        run(sim);
        let got = lines(&log);
        assert!(
            got.iter().any(|(_, w)| w == "server got ping"),
            "{tcp:?}: {got:?}"
        );
        assert_eq!(
            outcome(&log),
            (60.0, "request: caller timed out".into()),
            "{tcp:?}"
        );
    }
}

/// A crash loses the host's connections without a word on the wire: the
/// peer's read waits, and learns of the loss from the RST the rebooted
/// host answers its next segment with. turmoil 0.7.2 has the crashed
/// host's sockets send FINs, so the peer reads an end of stream at the
/// instant of the crash.
#[test]
fn a_crash_is_learnt_from_the_rebooted_hosts_rst() {
    for tcp in [Tcp::Linux, Tcp::Published] {
        // A server that never answers.
        let (mut sim, log) = served(tcp, Duration::from_secs(3600));
        let l = log.clone();
        sim.client("client", async move {
            let mut s = TcpStream::connect(("server", PORT)).await?;
            s.write_all(b"ping").await?;
            // The server crashes at 1 s and is back at 5 s.
            let first = read_within(&mut s, Duration::from_secs(10)).await;
            record(&l, format!("first read: {first}"));
            // Talk to it again: the rebooted host does not know the connection.
            let _ = s.write_all(b"ping").await;
            let second = read_within(&mut s, Duration::from_secs(10)).await;
            record(&l, format!("second read: {second}"));
            Ok(())
        });
        run_to(&mut sim, Duration::from_secs(1));
        sim.crash("server");
        run_to(&mut sim, Duration::from_secs(5));
        sim.bounce("server");
        run(sim);
        let got: Vec<_> = lines(&log)
            .into_iter()
            .filter(|(_, w)| w.contains("read"))
            .collect();
        match tcp {
            Tcp::Linux => assert_eq!(
                got,
                vec![
                    // The read began just after the connect (at 0.0002 s;
                    // tokio's timers round up to the next millisecond).
                    (10.001, "first read: Err(Elapsed(()))".to_string()),
                    // One round trip to the rebooted host and its RST back.
                    (10.0012, "second read: Ok(Err(ConnectionReset))".to_string()),
                ]
            ),
            Tcp::Published => assert_eq!(got[0], (1.0001, "first read: Ok(Ok(0))".to_string())),
        }
    }
}

/// A connection whose segment cannot get through is aborted by its sender
/// when the RTO expires after `tcp_retries2` (15) retransmissions' worth of
/// time: 924.6 s after the segment was first sent. turmoil 0.7.2 never
/// gives up.
#[test]
fn a_connection_that_cannot_get_through_is_aborted_after_tcp_retries2() {
    for tcp in [Tcp::Linux, Tcp::Published] {
        let (mut sim, log) = served(tcp, Duration::ZERO);
        let l = log.clone();
        sim.client("client", async move {
            let mut s = TcpStream::connect(("server", PORT)).await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            record(&l, "sending");
            s.write_all(b"ping").await?;
            let r = read_within(&mut s, Duration::from_secs(2000)).await;
            record(&l, format!("read: {r}"));
            Ok(())
        });
        run_to(&mut sim, Duration::from_millis(500));
        sim.partition("client", "server");
        run(sim);
        let got = lines(&log);
        let read = got.iter().find(|(_, w)| w.starts_with("read")).unwrap();
        match tcp {
            Tcp::Linux => assert_eq!(
                (read.0, read.1.as_str()),
                // Sent at 1.001 s (the connect's 0.0002 s and a 1 s sleep,
                // rounded up to tokio's millisecond), given up 924.6 s later.
                (925.601, "read: Ok(Err(ConnectionReset))")
            ),
            Tcp::Published => assert_eq!(
                (read.0, read.1.as_str()),
                (2001.001, "read: Err(Elapsed(()))")
            ),
        }
    }
}

/// A fake's answer, served as the simulation serves its fakes (the
/// kept-connection tests serve it too).
pub(crate) struct Answer;

impl racksim_sim::services::Handler for Answer {
    async fn call(
        &self,
        _req: racksim_fakes::http::ApiRequest,
    ) -> racksim_fakes::http::ApiResponse {
        racksim_fakes::http::ApiResponse::json(&serde_json::json!({"answer": 42}))
    }
}

/// Whole HTTP exchanges (one connection each: a client that keeps none;
/// then on one kept connection) over
/// links whose latency varies segment by segment, as the simulation's do:
/// the handshake's ACK overtaken by the request, the FINs crossing, the
/// server gone before its client's ACK arrives — every exchange succeeds.
#[test]
fn http_exchanges_over_jittery_links_all_succeed() {
    let log = Log::default();
    let mut sim = turmoil::Builder::new()
        .ip_version(turmoil::IpVersion::V6)
        .event_driven(true)
        .linux_tcp(true)
        .rng_seed(3)
        .min_message_latency(Duration::from_micros(50))
        .max_message_latency(Duration::from_millis(1))
        .build();
    sim.host("server", || async {
        racksim_sim::services::serve(PORT, Answer).await?;
        Ok(())
    });
    let l = log.clone();
    sim.client("client", async move {
        let addr = (turmoil::lookup("server"), PORT).into();
        let fresh =
            racksim_reconciler::http::HttpClient::new(racksim_sim::net::TurmoilConnector, addr)
                .without_kept_connections();
        // And as many on one kept connection: its segments arrive in order
        // however their latencies are drawn.
        let kept =
            racksim_reconciler::http::HttpClient::new(racksim_sim::net::TurmoilConnector, addr);
        for client in [fresh, kept] {
            for _ in 0..300 {
                let r = client.get::<serde_json::Value>("/answer").await;
                record(&l, format!("{r:?}"));
            }
        }
        Ok(())
    });
    run(sim);
    let got = lines(&log);
    assert_eq!(got.len(), 600);
    let failed: Vec<_> = got.iter().filter(|(_, w)| !w.starts_with("Ok(")).collect();
    assert!(failed.is_empty(), "{failed:?}");
}

/// reqwest's keepalive (15 s idle, 15 s between probes, 3 probes), as
/// every racksim HTTP client sets it.
const KEEPALIVE: turmoil::Keepalive = turmoil::Keepalive {
    idle: Duration::from_secs(15),
    interval: Duration::from_secs(15),
    retries: 3,
};

/// A client that waits for an answer with no timeout of its own (as
/// upstream's scrimlet reconcilers' clients do) on a server that never
/// answers, which crashes at 5 s (and, if `reboot`, is back at 10 s). The
/// client writes its request at once, or `write_at` after connecting.
fn waiting_on_a_crashed_server(tcp: Tcp, reboot: bool, write_at: Duration) -> (f64, String) {
    waiting_on_a_server_crashed_at(tcp, Duration::from_secs(5), reboot, write_at)
}

/// [`waiting_on_a_crashed_server`], the server crashing at `crash_at`.
fn waiting_on_a_server_crashed_at(
    tcp: Tcp,
    crash_at: Duration,
    reboot: bool,
    write_at: Duration,
) -> (f64, String) {
    let (mut sim, log) = served(tcp, Duration::from_secs(24 * 3600));
    let l = log.clone();
    sim.client("client", async move {
        let mut s = TcpStream::connect(("server", PORT)).await?;
        s.set_keepalive(KEEPALIVE)?;
        if !write_at.is_zero() {
            tokio::time::sleep(write_at).await;
        }
        s.write_all(b"ping").await?;
        let r = read_within(&mut s, Duration::from_secs(2 * 3600)).await;
        record(&l, format!("read: {r}"));
        Ok(())
    });
    run_to(&mut sim, crash_at);
    sim.crash("server");
    if reboot {
        run_to(&mut sim, crash_at + Duration::from_secs(5));
        sim.bounce("server");
    }
    run(sim);
    lines(&log)
        .into_iter()
        .find(|(_, w)| w.starts_with("read"))
        .unwrap()
}

/// Keepalive finds a peer that went away under a connection that is
/// waiting for an answer: a rebooted one answers the first probe (15 s
/// after the request was answered by an ACK) with RST; one that stays
/// down leaves all three probes unanswered, and the connection is
/// aborted 15 + 3 × 15 s after it last heard from it.
#[test]
fn keepalive_finds_a_crashed_peer() {
    assert_eq!(
        waiting_on_a_crashed_server(Tcp::Linux, true, Duration::ZERO),
        // tokio's timers round up to the millisecond: the probe at 15.001 s,
        // the RST back one round trip later.
        (15.0012, "read: Ok(Err(ConnectionReset))".into())
    );
    assert_eq!(
        waiting_on_a_crashed_server(Tcp::Linux, false, Duration::ZERO),
        (60.001, "read: Ok(Err(ConnectionReset))".into())
    );
    // turmoil 0.7.2: the crashed host's sockets send FIN at the crash.
    assert_eq!(
        waiting_on_a_crashed_server(Tcp::Published, false, Duration::ZERO),
        (5.0001, "read: Ok(Ok(0))".into())
    );
}

/// Linux's keepalive timer sleeps from one expiry to the next and measures
/// idleness from the last segment heard (`tcp_keepalive_timer`): an idle
/// connection whose peer answers is probed every 15 s (at 15, 30 and 45 s
/// here, each answered at once), and once the peer is gone (a crash at
/// 50 s) the connection is aborted 60 s after the last answer, at 105 s.
/// A timer that counted 15 s of quiet from when it noticed the answer
/// (one probe per 30 s) would abort at 120 s.
#[test]
fn keepalive_measures_idleness_from_the_last_segment_heard() {
    let (at, read) =
        waiting_on_a_server_crashed_at(Tcp::Linux, Duration::from_secs(50), false, Duration::ZERO);
    assert_eq!(read, "read: Ok(Err(ConnectionReset))");
    // tokio's timers round each expiry up to the next millisecond.
    assert!((at - 105.0).abs() < 0.01, "aborted at {at} s, not 105 s");
}

/// A kept connection, idle, whose peer crashes (at 5 s): the first probe
/// (15 s) goes unanswered, then the client writes a request (at 20 s),
/// as a pooled client does with the connection its last request left.
/// Linux's keepalive neither probes nor aborts while that data waits for
/// retransmission, so the probes before it do not end the connection at
/// 60 s: the retransmission timer does, `tcp_retries2` after the write
/// (20 + 924.6 s).
#[test]
fn data_written_after_an_unanswered_probe_waits_for_the_retransmission_abort() {
    let (at, read) = waiting_on_a_crashed_server(Tcp::Linux, false, Duration::from_secs(20));
    assert_eq!(read, "read: Ok(Err(ConnectionReset))");
    let abort = 20.0 + turmoil::LinuxTcp::default().abort_after().as_secs_f64();
    assert!((at - abort).abs() < 0.01, "ended at {at} s, not {abort} s");
}

/// A peer that is up but slow to answer (a hung service) answers the
/// probes, so keepalive never ends the wait; a cut does not end it early
/// either while a segment waits for retransmission.
#[test]
fn keepalive_leaves_a_slow_but_live_peer_alone() {
    let (mut sim, log) = served(Tcp::Linux, Duration::from_secs(600));
    let l = log.clone();
    sim.client("client", async move {
        let mut s = TcpStream::connect(("server", PORT)).await?;
        s.set_keepalive(KEEPALIVE)?;
        s.write_all(b"ping").await?;
        let mut buf = [0u8; 4];
        let r = s.read_exact(&mut buf).await;
        record(
            &l,
            format!("read: {:?}", r.map(|_| ()).map_err(|e| e.kind())),
        );
        Ok(())
    });
    run(sim);
    let got = lines(&log);
    let read = got.iter().find(|(_, w)| w.starts_with("read")).unwrap();
    assert_eq!((read.0.round(), read.1.as_str()), (600.0, "read: Ok(())"));
}

/// How a connection ends, for [`churn`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ending {
    /// A whole exchange; the client closes.
    Completed,
    /// Nothing listens on the port: the RST refuses the connect.
    Refused,
    /// The caller's connect timeout (1 s) fires while a cut drops the SYNs.
    ConnectAbandoned,
    /// No caller's timeout: the SYN retransmissions run out (127 s).
    ConnectTimedOut,
    /// Connected, but the caller's timeout (1 s) gives up on a reply the
    /// server sends 10 s later; the client closes mid-request.
    ReplyAbandoned,
}

/// `n` connections one after another from a host with `ports` ephemeral
/// ports, each ending as `ending`. `Ok(())` when every connection ended
/// as it should; the panic's message when the host ran out of ports.
fn churn(tcp: Tcp, ending: Ending, ports: u16, n: usize) -> Result<(), String> {
    record_panics();
    FIRST_PANIC.with(|f| f.borrow_mut().take());
    let outcome = std::panic::catch_unwind(|| {
        let log = Log::default();
        let mut sim = {
            let mut b = turmoil::Builder::new();
            b.event_driven(true)
                .rng_seed(7)
                .epoch(std::time::SystemTime::UNIX_EPOCH)
                .min_message_latency(LATENCY)
                .max_message_latency(LATENCY)
                .linux_tcp(tcp == Tcp::Linux)
                .ephemeral_ports(49152..=49152 + ports - 1)
                .simulation_duration(Duration::from_secs(24 * 3600));
            b.build()
        };
        let reply_after = match ending {
            Ending::ReplyAbandoned => Duration::from_secs(10),
            _ => Duration::ZERO,
        };
        server(&mut sim, &log, reply_after);
        let l = log.clone();
        sim.client("client", async move {
            for _ in 0..n {
                let r = match ending {
                    Ending::Completed | Ending::ReplyAbandoned => {
                        let exchange = async {
                            let mut s = TcpStream::connect(("server", PORT)).await?;
                            s.write_all(b"ping").await?;
                            let mut buf = [0u8; 4];
                            s.read_exact(&mut buf).await?;
                            io::Result::Ok(())
                        };
                        match tokio::time::timeout(Duration::from_secs(1), exchange).await {
                            Ok(r) => r.map_err(|e| e.kind()),
                            Err(_) => Err(io::ErrorKind::TimedOut),
                        }
                    }
                    Ending::Refused => TcpStream::connect(("server", PORT + 1))
                        .await
                        .map(|_| ())
                        .map_err(|e| e.kind()),
                    Ending::ConnectAbandoned => connect(Duration::from_secs(1))
                        .await
                        .map(|_| ())
                        .map_err(|e| e.kind()),
                    Ending::ConnectTimedOut => TcpStream::connect(("server", PORT))
                        .await
                        .map(|_| ())
                        .map_err(|e| e.kind()),
                };
                record(&l, format!("{r:?}"));
            }
            Ok(())
        });
        if matches!(ending, Ending::ConnectAbandoned | Ending::ConnectTimedOut) {
            sim.partition("client", "server");
        }
        run(sim);
        let want = match ending {
            Ending::Completed => "Ok(())",
            Ending::Refused => "Err(ConnectionRefused)",
            Ending::ConnectAbandoned | Ending::ConnectTimedOut | Ending::ReplyAbandoned => {
                "Err(TimedOut)"
            }
        };
        let outcomes: Vec<String> = lines(&log)
            .into_iter()
            .map(|(_, w)| w)
            .filter(|w| w.starts_with("Ok") || w.starts_with("Err"))
            .collect();
        assert_eq!(outcomes, vec![want.to_string(); n], "{tcp:?} {ending:?}");
    });
    outcome.map_err(|_| FIRST_PANIC.with(|f| f.borrow_mut().take().unwrap_or_default()))
}

thread_local! {
    /// The message of the first panic on this thread since it was last
    /// taken: a host's panic, not the runtime's report of it that follows.
    static FIRST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Record each thread's first panic message in [`FIRST_PANIC`] (once per
/// process; the default hook still prints).
fn record_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| info.payload().downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            FIRST_PANIC.with(|f| {
                f.borrow_mut().get_or_insert(msg);
            });
            default(info);
        }));
    });
}

/// A connection's port is free again once the connection has ended,
/// however it ended: a host with 8 ephemeral ports makes 40 connections of
/// each kind one after another without running out. (A long run makes one
/// NAT pull every 30 s, and any ending that kept its port would exhaust
/// the host — 16,384 pulls, 136h32m, on turmoil's default range.)
/// turmoil 0.7.2 keeps the port of a connect that was refused or
/// abandoned, and exhausts the host.
#[test]
fn a_connections_port_is_free_again_however_it_ended() {
    use Ending::*;
    for ending in [
        Completed,
        Refused,
        ConnectAbandoned,
        ConnectTimedOut,
        ReplyAbandoned,
    ] {
        assert_eq!(churn(Tcp::Linux, ending, 8, 40), Ok(()), "{ending:?}");
    }
    // 0.7.2 registers a connection before its SYN and nothing forgets a
    // connect that was refused or abandoned: its port is kept for good.
    // (A closed client's port it reuses while the server still holds the
    // old connection, and the server's host panics.)
    assert_eq!(churn(Tcp::Published, Completed, 8, 40), Ok(()));
    for ending in [Refused, ConnectAbandoned, ConnectTimedOut, ReplyAbandoned] {
        let got = churn(Tcp::Published, ending, 8, 40);
        let want = match ending {
            ReplyAbandoned => "is already connected",
            _ => "ports exhausted",
        };
        assert!(
            matches!(&got, Err(m) if m.contains(want)),
            "{ending:?}: {got:?}"
        );
    }
}
