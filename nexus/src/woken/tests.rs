use super::*;
use std::{cell::RefCell, rc::Rc, sync::atomic::AtomicUsize, time::Duration};
use tokio::{sync::Notify, time::Instant};

/// A task waker that counts its wakes.
#[derive(Default)]
struct CountingTask(AtomicUsize);

impl Wake for CountingTask {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A branch that is never ready: it counts its polls, keeps the waker it
/// was last given, and wakes itself during a poll when `wake_self` is set.
struct Probe {
    polls: Rc<RefCell<usize>>,
    waker: Rc<RefCell<Option<Waker>>>,
    wake_self: Rc<RefCell<bool>>,
}

impl Future for Probe {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *self.polls.borrow_mut() += 1;
        *self.waker.borrow_mut() = Some(cx.waker().clone());
        if std::mem::take(&mut *self.wake_self.borrow_mut()) {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

#[test]
fn a_branch_is_polled_only_after_its_waker_fires() {
    let (polls, waker, wake_self) = Default::default();
    let probe = Probe {
        polls: Rc::clone(&polls),
        waker: Rc::clone(&waker),
        wake_self: Rc::clone(&wake_self),
    };
    let mut branch = Woken::new(probe);
    let task = Arc::new(CountingTask::default());
    let task_waker = Waker::from(task.clone());
    let mut cx = Context::from_waker(&task_waker);

    // The first poll reaches the branch; polls with no wake in between
    // do not.
    assert!(Pin::new(&mut branch).poll(&mut cx).is_pending());
    assert!(Pin::new(&mut branch).poll(&mut cx).is_pending());
    assert!(Pin::new(&mut branch).poll(&mut cx).is_pending());
    assert_eq!(*polls.borrow(), 1);
    assert_eq!(task.0.load(Ordering::SeqCst), 0);

    // A wake through the waker the branch was given reaches the task, and
    // the next poll reaches the branch, once however often it was woken.
    let given = waker.borrow().clone().expect("the branch kept its waker");
    given.wake_by_ref();
    given.wake_by_ref();
    assert_eq!(task.0.load(Ordering::SeqCst), 2);
    assert!(Pin::new(&mut branch).poll(&mut cx).is_pending());
    assert!(Pin::new(&mut branch).poll(&mut cx).is_pending());
    assert_eq!(*polls.borrow(), 2);

    // A wake from inside the branch's own poll is kept for the next poll.
    *wake_self.borrow_mut() = true;
    given.wake();
    assert!(Pin::new(&mut branch).poll(&mut cx).is_pending());
    assert_eq!(*polls.borrow(), 3);
    assert!(Pin::new(&mut branch).poll(&mut cx).is_pending());
    assert_eq!(*polls.borrow(), 4);
    assert!(Pin::new(&mut branch).poll(&mut cx).is_pending());
    assert_eq!(*polls.borrow(), 4);
}

#[test]
fn the_task_woken_is_the_one_that_polled_last() {
    let (polls, waker, wake_self) = Default::default();
    let mut branch = Woken::new(Probe {
        polls: Rc::clone(&polls),
        waker: Rc::clone(&waker),
        wake_self,
    });
    let (first, second) = (
        Arc::new(CountingTask::default()),
        Arc::new(CountingTask::default()),
    );
    let first_waker = Waker::from(first.clone());
    let second_waker = Waker::from(second.clone());
    assert!(Pin::new(&mut branch)
        .poll(&mut Context::from_waker(&first_waker))
        .is_pending());
    assert!(Pin::new(&mut branch)
        .poll(&mut Context::from_waker(&second_waker))
        .is_pending());
    waker.borrow().as_ref().expect("kept").wake_by_ref();
    assert_eq!(first.0.load(Ordering::SeqCst), 0);
    assert_eq!(second.0.load(Ordering::SeqCst), 1);
}

/// Three branches as Nexus's are made: a periodic task, a task activated
/// through a `Notify`, and one that activates it now and then. Each
/// records what it did and when; the log shows the order in which the
/// join reached them at each instant.
async fn three_branches(wrap: bool) -> Vec<(Duration, &'static str)> {
    let start = Instant::now();
    let log = RefCell::new(Vec::new());
    let notify = Notify::new();
    let note = |what| log.borrow_mut().push((start.elapsed(), what));
    let periodic = async {
        let mut interval = tokio::time::interval(Duration::from_secs(3));
        for _ in 0..10 {
            interval.tick().await;
            note("tick");
        }
    };
    let activated = async {
        for _ in 0..4 {
            notify.notified().await;
            note("activated");
            tokio::time::sleep(Duration::from_millis(1500)).await;
            note("activation done");
        }
    };
    let activator = async {
        for _ in 0..4 {
            tokio::time::sleep(Duration::from_secs(6)).await;
            note("activate");
            notify.notify_one();
        }
    };
    if wrap {
        tokio::join!(
            Woken::new(periodic),
            Woken::new(activated),
            Woken::new(activator)
        );
    } else {
        tokio::join!(periodic, activated, activator);
    }
    log.into_inner()
}

#[tokio::test(start_paused = true)]
async fn a_join_of_woken_branches_runs_as_the_plain_join_does() {
    // A gated join that lost a wake would wait for ever: on the paused
    // clock, a simulated hour's timeout turns that into a failure.
    let hour = Duration::from_secs(3600);
    let plain = tokio::time::timeout(hour, three_branches(false))
        .await
        .expect("the plain join finishes");
    let woken = tokio::time::timeout(hour, three_branches(true))
        .await
        .expect("the gated join finishes");
    assert_eq!(plain.len(), 10 + 4 * 2 + 4);
    assert_eq!(woken, plain);
}
