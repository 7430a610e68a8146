//! A run's operations: each API request paired with its answer from the
//! trace.

use std::time::Duration;

use racksim_sim::run::operations::{operations, Answer};
use racksim_sim::{
    plan::{Action, ResolvedStep},
    trace::{Kind, TraceLine},
};

fn step(secs: u64, action: Action) -> ResolvedStep {
    ResolvedStep {
        at: Duration::from_secs(secs),
        action,
        drawn_from: None,
    }
}

fn answer(ms: u64, instance: &str, text: &str, outcome: &str) -> TraceLine {
    let op = text.split(' ').nth(1).unwrap_or_default().to_string();
    TraceLine::new(Duration::from_millis(ms), "sled0", Kind::Instance, text)
        .field("instance", instance)
        .field("op", op)
        .field("outcome", outcome)
}

#[test]
fn each_request_gets_its_own_answer_or_none() {
    let start = |secs| {
        step(
            secs,
            Action::InstanceStart {
                instance: "web1".into(),
                sled: "sled1".into(),
            },
        )
    };
    let steps = [
        start(60),
        step(
            60,
            Action::InstanceStop {
                instance: "web2".into(),
            },
        ),
        start(120),
        start(180),
        // Not a request to the instance API.
        step(10, Action::ControlPlaneCrash),
    ];
    let trace = [
        // An answer before a request is not its answer.
        answer(
            59_000,
            "web1",
            "nexus: start web1 on sled1: ok, running",
            "ok",
        ),
        answer(60_100, "web2", "nexus: stop web2: ok, stopped", "ok"),
        answer(
            60_200,
            "web1",
            "nexus: start web1 on sled1: ok, running",
            "ok",
        ),
        answer(
            120_050,
            "web1",
            "nexus: start web1 on sled1: failed: instance 1 is starting: start refused",
            "failed",
        ),
        // A line without an outcome (a saga's progress) answers nothing.
        TraceLine::new(
            Duration::from_secs(181),
            "sled0",
            Kind::Instance,
            "nexus: start web1 on sled1: saga created",
        )
        .field("instance", "web1"),
    ];
    let ops = operations(&steps, &trace);
    assert_eq!(ops.len(), 4, "{ops:?}");
    assert_eq!(
        ops[0].answer,
        Answer::Ok {
            at: Duration::from_millis(60_200),
            text: "ok, running".into()
        }
    );
    assert_eq!(ops[0].took(), Some(Duration::from_millis(200)));
    assert!(ops[1].succeeded(), "{:?}", ops[1]);
    assert_eq!(
        ops[2].answer,
        Answer::Failed {
            at: Duration::from_millis(120_050),
            text: "failed: instance 1 is starting: start refused".into()
        }
    );
    assert!(!ops[2].succeeded());
    assert_eq!(ops[3].answer, Answer::None);
    assert_eq!(ops[3].took(), None);
    assert_eq!(
        ops[2].to_string(),
        "00:02:00.000000  API: start instance web1 on sled1: failed: instance 1 is starting: \
         start refused (after 50ms)"
    );
    assert_eq!(
        ops[3].to_string(),
        "00:03:00.000000  API: start instance web1 on sled1: no answer by the end of the run"
    );
}

/// A request refused while the control plane stops answered failure.
#[test]
fn a_refusal_is_a_failed_answer() {
    let steps = [step(
        60,
        Action::InstanceStop {
            instance: "web1".into(),
        },
    )];
    let refusal = TraceLine::new(
        Duration::from_secs(61),
        "sled0",
        Kind::Instance,
        "nexus: request for web1 refused: the control plane is stopping",
    )
    .field("instance", "web1")
    .field("op", "stop")
    .field("outcome", "failed");
    let ops = operations(&steps, &[refusal]);
    assert_eq!(
        ops[0].answer,
        Answer::Failed {
            at: Duration::from_secs(61),
            text: "failed: request for web1 refused: the control plane is stopping".into()
        }
    );
}
