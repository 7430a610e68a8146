//! The instance API: create, start, stop, delete. Each request runs in its
//! own task, so requests race as they would against a real API; the tasks
//! belong to [`instance_api`]'s future, so a crash (dropping it) aborts
//! them mid-operation, and an orderly stop refuses the requests not yet
//! started and waits for those that are.

use std::future::Future;

use tokio::{sync::watch, task::JoinSet};

use crate::{fmt_op, stop_requested, Event, InstanceRequest, Lane, NexusHost, Ops};

/// Where a Nexus's instance API requests come from: the simulation's
/// driver queues them in the world, live mode's control API sends them on
/// a channel.
pub trait Requests: Send {
    /// The requests waiting now, oldest first.
    fn take(&mut self) -> Vec<InstanceRequest>;
    /// Resolves when more may be waiting: `false` once none ever will.
    /// Must be cancel-safe: the API drops it whenever something else
    /// happens first.
    fn wait(&mut self) -> impl Future<Output = bool> + Send;
}

/// Live mode's requests: an unbounded channel.
pub struct ChannelRequests {
    rx: tokio::sync::mpsc::UnboundedReceiver<InstanceRequest>,
    received: Vec<InstanceRequest>,
}

impl ChannelRequests {
    pub fn new(rx: tokio::sync::mpsc::UnboundedReceiver<InstanceRequest>) -> Self {
        ChannelRequests {
            rx,
            received: Vec::new(),
        }
    }
}

impl Requests for ChannelRequests {
    fn take(&mut self) -> Vec<InstanceRequest> {
        while let Ok(req) = self.rx.try_recv() {
            self.received.push(req);
        }
        std::mem::take(&mut self.received)
    }

    async fn wait(&mut self) -> bool {
        // Cancel-safe: `recv` loses no message when dropped, and a message
        // received is kept until `take`.
        match self.rx.recv().await {
            Some(req) => {
                self.received.push(req);
                true
            }
            None => false,
        }
    }
}

/// Serves `requests` until an orderly stop on `stop`.
pub async fn instance_api<H: NexusHost>(
    host: &H,
    ops: &Ops<H>,
    mut requests: impl Requests,
    mut stop: watch::Receiver<bool>,
) {
    let mut running = JoinSet::new();
    loop {
        for req in requests.take() {
            let (ops, h) = (ops.clone(), host.clone());
            host.spawn(&mut running, async move {
                let instance = h.instance_name(req.instance());
                let op = req.op();
                let (what, outcome) = match req {
                    InstanceRequest::Create { instance: i, sled } => (
                        format!("create {} on {}", h.instance_name(i), h.sled_name(sled)),
                        ops.create(i, sled).await,
                    ),
                    InstanceRequest::Start { instance: i, sled } => (
                        format!("start {} on {}", h.instance_name(i), h.sled_name(sled)),
                        ops.start(i, sled).await,
                    ),
                    InstanceRequest::Stop { instance: i } => {
                        (format!("stop {}", h.instance_name(i)), ops.stop(i).await)
                    }
                    InstanceRequest::Delete { instance: i } => (
                        format!("delete {}", h.instance_name(i)),
                        ops.delete(i).await,
                    ),
                };
                h.op_done(&req, &outcome);
                h.record(
                    Event::new(
                        Lane::Instance,
                        format!("nexus: {what}: {}", h.names(&fmt_op(&outcome))),
                    )
                    .field("instance", &instance)
                    .field("op", op)
                    .field("outcome", if outcome.is_ok() { "ok" } else { "failed" }),
                );
            });
        }
        tokio::select! {
            biased;
            // An orderly stop: no more API (requests not yet started are
            // refused), and the operations in flight run to completion.
            // Cancel-safe: observing a watch channel.
            () = stop_requested(&mut stop) => {
                host.stopping();
                refuse(host, requests.take(), "the control plane is stopping");
                while running.join_next().await.is_some() {}
                return;
            }
            // Cancel-safe: `Requests::wait` must be.
            more = requests.wait() => {
                if !more {
                    return;
                }
            }
            // Cancel-safe: a task not yet joined stays in the set.
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
}

/// Answers `requests` with a refusal — what their callers hear is a
/// failure — and says so on each instance's lane; `why` ends the line.
pub fn refuse<H: NexusHost>(
    host: &H,
    requests: impl IntoIterator<Item = InstanceRequest>,
    why: &str,
) {
    for req in requests {
        let instance = host.instance_name(req.instance());
        host.record(
            Event::new(
                Lane::Instance,
                format!("nexus: request for {instance} refused: {why}"),
            )
            .field("instance", &instance)
            .field("op", req.op())
            .field("outcome", "failed"),
        );
    }
}

#[cfg(test)]
mod tests;
