//! A branch of a join that is polled only when something woke it.
//!
//! Nexus runs its background tasks as the branches of one `tokio::join!`
//! ([`crate::serve`]). A join polls every unfinished branch whenever any
//! one of them is woken, so each wake of, say, the V2P task's HTTP
//! exchange also polled the seven other tasks, which found nothing to do:
//! on the full rack about 3% of a simulated run.
//!
//! [`Woken`] wraps a branch and hands it a waker of its own. Polled by the
//! join, it polls the branch only if that waker fired since the branch's
//! last poll (or the branch was never polled), and otherwise returns
//! `Pending` at once. The join itself is unchanged: it visits the branches
//! in the order it always did, and each branch is woken through the same
//! task waker as before, at the same moment.
//!
//! Why this changes nothing a run does: a future that returns `Pending`
//! must arrange for its waker to be woken when it can make progress, so a
//! branch not woken since its last poll would return `Pending` again and
//! change nothing. Nexus's branches are tokio's timers, watch channels,
//! `Notify`, and HTTP exchanges over tokio and hyper, which keep that rule;
//! none draws from tokio's random source when polled (their `select!`s are
//! `biased`). `tests.rs` checks both halves: a branch not woken is not
//! polled, and a woken one is, whoever wakes it and however often.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    task::{Context, Poll, Wake, Waker},
};

/// `inner`, polled only when woken (see the module's doc).
pub(crate) struct Woken<F> {
    inner: Pin<Box<F>>,
    signal: Arc<Signal>,
    /// `signal` as a waker, made once.
    waker: Waker,
}

/// What a branch's waker does: remember the wake, and pass it on to the
/// task that polls the join.
struct Signal {
    woken: AtomicBool,
    task: Mutex<Option<Waker>>,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(task) = task.as_ref() {
            task.wake_by_ref();
        }
    }
}

impl<F: Future> Woken<F> {
    pub(crate) fn new(inner: F) -> Self {
        let signal = Arc::new(Signal {
            // Never polled yet: the first poll must reach the branch.
            woken: AtomicBool::new(true),
            task: Mutex::new(None),
        });
        Woken {
            inner: Box::pin(inner),
            waker: Waker::from(signal.clone()),
            signal,
        }
    }
}

impl<F: Future> Future for Woken<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        {
            // The task that polls the join is the one to wake; it is the
            // same task at every poll, so this stores a waker once.
            let mut task = this.signal.task.lock().unwrap_or_else(|e| e.into_inner());
            match task.as_ref() {
                Some(t) if t.will_wake(cx.waker()) => {}
                _ => *task = Some(cx.waker().clone()),
            }
        }
        // Cleared before the branch runs, so that a wake during its poll
        // (a timer due now, tokio's cooperative budget spent) is kept for
        // the next one.
        if !this.signal.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        this.inner
            .as_mut()
            .poll(&mut Context::from_waker(&this.waker))
    }
}

#[cfg(test)]
mod tests;
