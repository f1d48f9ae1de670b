//! Runs the shared known-answer self tests (also run by KUnit).

use rpcrdma_proto::selftest;

#[test]
fn v1_header_vectors() {
    assert_eq!(selftest::v1_header_vectors(), Ok(()));
}

#[test]
fn v2_header_vectors() {
    assert_eq!(selftest::v2_header_vectors(), Ok(()));
}

#[test]
fn pvt_data_vectors() {
    assert_eq!(selftest::pvt_data_vectors(), Ok(()));
}

#[test]
fn malformed_input() {
    assert_eq!(selftest::malformed_input(), Ok(()));
}

#[test]
fn planner_decisions() {
    assert_eq!(selftest::planner_decisions(), Ok(()));
}

#[test]
fn negotiation() {
    assert_eq!(selftest::negotiation(), Ok(()));
}
