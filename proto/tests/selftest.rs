//! Runs the shared known-answer self tests (also run by KUnit).

// Test code: panicking is how a test fails, and the inputs are ours.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unwrap_used
)]

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

#[test]
fn requester_chunk_rules() {
    assert_eq!(selftest::requester_chunk_rules(), Ok(()));
}

#[test]
fn requester_receive_rules() {
    assert_eq!(selftest::requester_receive_rules(), Ok(()));
}

#[test]
fn send_economy() {
    assert_eq!(selftest::send_economy(), Ok(()));
}

#[test]
fn responder_receive_rules() {
    assert_eq!(selftest::responder_receive_rules(), Ok(()));
}

#[test]
fn responder_reply_rules() {
    assert_eq!(selftest::responder_reply_rules(), Ok(()));
}
