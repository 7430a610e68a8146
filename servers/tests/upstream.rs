//! The operations the fakes serve ([`racksim_fakes::upstream`]) against
//! the documents the API traits generate.

use racksim_fakes::upstream::{operations_of, served_operations, Service};

/// The served operations come from the committed documents; they are those
/// of the documents the API traits generate (tests/openapi.rs compares the
/// whole documents byte for byte).
#[test]
fn served_operations_are_those_the_api_traits_generate() {
    for (service, generated) in [
        (Service::Dpd, racksim_servers::dpd_openapi()),
        (Service::Mgs, racksim_servers::mgs_openapi()),
        (Service::SledAgent, racksim_servers::sled_agent_openapi()),
    ] {
        assert_eq!(
            served_operations(service),
            operations_of(&generated),
            "{service:?}"
        );
    }
}
