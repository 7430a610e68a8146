//! Kept connections (issue 40): racksim's HTTP clients pool their
//! connections as upstream's reqwest clients do, and its servers close an
//! idle one as dropshot's do. On the simulation's Linux TCP, as every run
//! has it.

use std::{
    cell::RefCell,
    io,
    net::SocketAddr,
    rc::Rc,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use racksim_reconciler::{
    http::{BackgroundTask, ClientError, HttpClient},
    Connector,
};
use racksim_sim::net::TurmoilConnector;

use crate::tcp::Answer;

const PORT: u16 = 9000;

/// The simulation's connector, counting the connections it makes.
#[derive(Clone, Default)]
struct Counting(Arc<AtomicUsize>);

impl Connector for Counting {
    type Io = turmoil::net::TcpStream;

    async fn connect(&self, addr: SocketAddr) -> io::Result<Self::Io> {
        self.0.fetch_add(1, Ordering::SeqCst);
        TurmoilConnector.connect(addr).await
    }

    fn spawn(&self, task: BackgroundTask) {
        TurmoilConnector.spawn(task);
    }
}

/// What one request came to, and how many connections the client had made
/// by its end.
type Outcomes = Rc<RefCell<Vec<(Result<(), ClientError>, usize)>>>;

/// A server, and a client that sends one request at each of `at` (from the
/// start) with a client that `configure` makes from progenitor's. If
/// `reboot` is given, the server's host crashes at the first instant and is
/// back at the second.
fn requests_at(
    at: &[u64],
    configure: fn(HttpClient<Counting>) -> HttpClient<Counting>,
    reboot: Option<(u64, u64)>,
) -> Vec<(Result<(), ClientError>, usize)> {
    let mut sim = turmoil::Builder::new()
        .ip_version(turmoil::IpVersion::V6)
        .event_driven(true)
        .linux_tcp(true)
        .rng_seed(5)
        .min_message_latency(Duration::from_micros(100))
        .max_message_latency(Duration::from_micros(100))
        .simulation_duration(Duration::from_secs(3600))
        .build();
    sim.host("server", || async {
        racksim_sim::services::serve(PORT, Answer).await?;
        Ok(())
    });
    let outcomes = Outcomes::default();
    let out = outcomes.clone();
    let at: Vec<Duration> = at.iter().map(|s| Duration::from_secs(*s)).collect();
    sim.client("client", async move {
        let counting = Counting::default();
        let addr = (turmoil::lookup("server"), PORT).into();
        let client = configure(HttpClient::new(counting.clone(), addr));
        let start = tokio::time::Instant::now();
        for when in at {
            tokio::time::sleep_until(start + when).await;
            let r = client.get::<serde_json::Value>("/answer").await.map(|_| ());
            out.borrow_mut()
                .push((r, counting.0.load(Ordering::SeqCst)));
        }
        Ok(())
    });
    if let Some((crash, back)) = reboot {
        while sim.elapsed() < Duration::from_secs(crash) {
            sim.step_until(Duration::from_secs(crash)).unwrap();
        }
        sim.crash("server");
        while sim.elapsed() < Duration::from_secs(back) {
            sim.step_until(Duration::from_secs(back)).unwrap();
        }
        sim.bounce("server");
    }
    sim.run().expect("simulation runs");
    let got = outcomes.borrow().clone();
    got
}

fn connections(outcomes: &[(Result<(), ClientError>, usize)]) -> Vec<usize> {
    outcomes
        .iter()
        .map(|(r, n)| {
            assert!(r.is_ok(), "{outcomes:?}");
            *n
        })
        .collect()
}

/// Requests that follow each other closely share one connection; one that
/// comes after the pool's idle timeout (reqwest's 90 s) makes a new one.
#[test]
fn a_client_keeps_its_connection_for_its_idle_timeout() {
    // 0 s, 5 s, 25 s: within 30 s of the last answer each time.
    assert_eq!(
        connections(&requests_at(&[0, 5, 25], |c| c, None)),
        [1, 1, 1]
    );
    // 10 s idle, as the scrimlet reconcilers keep theirs: 5 s later the
    // same connection, 20 s later a new one.
    let short = |c: HttpClient<Counting>| c.with_pool_idle_timeout(Some(Duration::from_secs(10)));
    assert_eq!(
        connections(&requests_at(&[0, 5, 25], short, None)),
        [1, 1, 2]
    );
}

/// dropshot closes a connection that waits 30 s for a request (hyper's
/// `header_read_timeout` with a timer), counted from its last answer, and
/// the client's pool sees the close: a request 31 s after the last answer
/// makes a new connection and succeeds, though the client would have kept
/// the old one for 90 s.
#[test]
fn the_server_closes_a_connection_idle_for_30_s() {
    assert_eq!(
        connections(&requests_at(&[0, 29, 40], |c| c, None)),
        [1, 1, 1]
    );
    assert_eq!(
        connections(&requests_at(&[0, 29, 60], |c| c, None)),
        [1, 1, 2]
    );
    assert_eq!(connections(&requests_at(&[0, 31], |c| c, None)), [1, 2]);
}

/// A client that keeps no connections makes one per request.
#[test]
fn without_kept_connections_every_request_connects() {
    let none = |c: HttpClient<Counting>| c.without_kept_connections();
    assert_eq!(connections(&requests_at(&[0, 1, 2], none, None)), [1, 2, 3]);
}

/// After the server's host reboots, the request sent on the kept
/// connection is answered by the new host's RST: it fails, as a reqwest
/// client's does, and the next request connects again and succeeds. A
/// client that keeps nothing never meets the reset.
#[test]
fn the_first_request_after_the_peers_reboot_meets_its_reset() {
    let got = requests_at(&[0, 10, 11], |c| c, Some((5, 6)));
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[0], (Ok(()), 1));
    match &got[1] {
        (Err(ClientError::Protocol { message, .. }), 1) => {
            assert!(message.contains("reset"), "{message}")
        }
        other => panic!("expected a reset on the kept connection, got {other:?}"),
    }
    assert_eq!(got[2], (Ok(()), 2));

    let none = |c: HttpClient<Counting>| c.without_kept_connections();
    let got = requests_at(&[0, 10, 11], none, Some((5, 6)));
    assert_eq!(connections(&got), [1, 2, 3]);
}
