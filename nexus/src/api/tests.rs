use tokio::sync::mpsc;

use super::{ChannelRequests, Requests};
use crate::InstanceRequest;

#[tokio::test(flavor = "current_thread")]
async fn channel_requests_keep_what_a_wait_received_and_end_when_closed() {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut requests = ChannelRequests::new(rx);
    assert!(requests.take().is_empty());
    tx.send(InstanceRequest::Stop { instance: 1 }).unwrap();
    // `wait` receives the message itself; `take` must still hand it out.
    assert!(requests.wait().await);
    tx.send(InstanceRequest::Delete { instance: 2 }).unwrap();
    assert_eq!(
        requests.take(),
        vec![
            InstanceRequest::Stop { instance: 1 },
            InstanceRequest::Delete { instance: 2 }
        ]
    );
    assert!(requests.take().is_empty());
    drop(tx);
    assert!(!requests.wait().await, "a closed channel ends the API");
}

#[test]
fn a_request_names_its_instance() {
    for (req, id) in [
        (
            InstanceRequest::Create {
                instance: 3,
                sled: 0,
            },
            3,
        ),
        (
            InstanceRequest::Start {
                instance: 4,
                sled: 1,
            },
            4,
        ),
        (InstanceRequest::Stop { instance: 5 }, 5),
        (InstanceRequest::Delete { instance: 6 }, 6),
    ] {
        assert_eq!(req.instance(), id);
    }
}
