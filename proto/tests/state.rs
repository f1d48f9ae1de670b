//! Version negotiation, credits and direction: scenarios and invariants
//! beyond the shared selftests.

// Test code: panicking is how a test fails, and the inputs are ours.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unwrap_used
)]

use proptest::prelude::*;
use rpcrdma_proto::backchannel::{self, Direction, Role};
use rpcrdma_proto::chunk::ChunkSlices;
use rpcrdma_proto::credits::{self, CreditWindow};
use rpcrdma_proto::header::{self, FixedHeader, MsgType};
use rpcrdma_proto::limits::Limits;
use rpcrdma_proto::negotiate::{Action, Answer, Negotiator, SendAs, Version};
use rpcrdma_proto::{v1, v2};

fn reply(
    vers: u32,
    build: impl FnOnce(&mut [u8], &FixedHeader) -> usize,
    payload: &[u8],
) -> Vec<u8> {
    let mut buf = vec![0u8; 256];
    let fixed = FixedHeader {
        xid: 7,
        vers,
        credits: 16,
    };
    let len = build(&mut buf, &fixed);
    buf.truncate(len);
    buf.extend_from_slice(payload);
    buf
}

const RPC_REPLY: [u8; 8] = [0, 0, 0, 7, 0, 0, 0, 1];

#[test]
fn a_v1_server_refusing_the_probe_makes_us_resend_as_v1() {
    // rpcrdma.ko's svc_rdma_send_error_msg echoes vers 2 and says 1..1.
    let wire = reply(
        2,
        |b, f| {
            v1::encode(
                b,
                f,
                &v1::Message::Error(v1::RdmaError::Vers { low: 1, high: 1 }),
            )
            .unwrap()
        },
        &[],
    );
    let answer = Answer::of(&header::decode(&wire, &Limits::DEFAULT).unwrap());
    assert_eq!(answer, Answer::ErrVers { low: 1, high: 1 });

    let mut n = Negotiator::new();
    assert_eq!(n.send(7), SendAs::Probe { max_inline: 1024 });
    assert_eq!(n.on_answer(7, answer), Action::ResendAsV1 { xid: 7 });
    assert_eq!(n.send(7), SendAs::Version(Version::V1));
}

#[test]
fn a_v2_reply_settles_on_v2_and_reconnects_probe_again() {
    let wire = reply(
        2,
        |b, f| {
            let chunks = v2::Chunks {
                direction: MsgType::Reply,
                inv_handle: 0,
                lists: ChunkSlices::NONE,
            };
            v2::encode(b, f, &v2::Message::Msg(chunks)).unwrap()
        },
        &RPC_REPLY,
    );
    let answer = Answer::of(&header::decode(&wire, &Limits::DEFAULT).unwrap());
    let mut n = Negotiator::new();
    n.send(7);
    assert_eq!(n.on_answer(7, answer), Action::None);
    assert_eq!(n.version(), Some(Version::V2));
    n.on_connect();
    assert_eq!(n.version(), None);
    assert_eq!(n.send(8), SendAs::Probe { max_inline: 1024 });
}

#[test]
fn a_v1_reply_to_the_probe_settles_on_v1_without_resending() {
    let wire = reply(
        1,
        |b, f| v1::encode(b, f, &v1::Message::Msg(ChunkSlices::NONE)).unwrap(),
        &RPC_REPLY,
    );
    let answer = Answer::of(&header::decode(&wire, &Limits::DEFAULT).unwrap());
    let mut n = Negotiator::new();
    n.send(7);
    assert_eq!(n.on_answer(7, answer), Action::None);
    assert_eq!(n.version(), Some(Version::V1));
}

#[test]
fn a_non_version_error_means_the_probe_was_understood() {
    let mut n = Negotiator::new();
    n.send(7);
    assert_eq!(n.on_answer(7, Answer::OtherError), Action::None);
    assert_eq!(n.version(), Some(Version::V2));
}

#[test]
fn answers_for_other_xids_or_after_settling_change_nothing() {
    let mut n = Negotiator::v1_only();
    assert_eq!(
        n.on_answer(1, Answer::ErrVers { low: 1, high: 1 }),
        Action::None
    );
    assert_eq!(n.send(1), SendAs::Version(Version::V1));
    assert_eq!(n.on_probe_lost(), Action::None);
    n.on_connect();
    assert_eq!(n.send(2), SendAs::Version(Version::V1));
}

#[test]
fn backward_errors_and_nomsg_are_routed_by_role() {
    let err = reply(
        1,
        |b, f| v1::encode(b, f, &v1::Message::Error(v1::RdmaError::Chunk)).unwrap(),
        &[],
    );
    let err = header::decode(&err, &Limits::DEFAULT).unwrap();
    assert_eq!(
        backchannel::classify(Role::Client, &err),
        Ok(Direction::ForwardReply)
    );
    assert_eq!(
        backchannel::classify(Role::Server, &err),
        Ok(Direction::BackwardReply)
    );

    let segment = [rpcrdma_proto::chunk::Segment {
        handle: 1,
        length: 4096,
        offset: 0,
    }];
    let lists = ChunkSlices {
        reply: Some(&segment),
        ..ChunkSlices::NONE
    };
    let nomsg = reply(
        1,
        |b, f| v1::encode(b, f, &v1::Message::Nomsg(lists)).unwrap(),
        &[],
    );
    let nomsg = header::decode(&nomsg, &Limits::DEFAULT).unwrap();
    assert_eq!(
        backchannel::classify(Role::Client, &nomsg),
        Ok(Direction::ForwardReply)
    );
    assert_eq!(
        backchannel::classify(Role::Server, &nomsg),
        Ok(Direction::ForwardCall)
    );
}

#[test]
fn credit_grants_are_sanitised_like_rpcrdma_reply_handler() {
    assert_eq!(credits::sanitize(0, 128), 1);
    assert_eq!(credits::sanitize(1, 128), 1);
    assert_eq!(credits::sanitize(128, 128), 128);
    assert_eq!(credits::sanitize(u32::MAX, 128), 128);
    assert_eq!(CreditWindow::new(0).update(5), 1);
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Send,
    Reply(u32),
    Reconnect,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Send),
        3 => any::<u32>().prop_map(Op::Reply),
        1 => Just(Op::Reconnect),
    ]
}

proptest! {
    /// Never more Calls in flight than the last sanitised grant allows.
    #[test]
    fn calls_in_flight_never_exceed_the_grant(max in 1u32..64, ops in proptest::collection::vec(op(), 0..200)) {
        let mut window = CreditWindow::new(max);
        let mut outstanding = 0u32;
        for op in ops {
            match op {
                Op::Send => {
                    let before = window.available();
                    if window.try_acquire() {
                        prop_assert!(before > 0);
                        outstanding += 1;
                    }
                }
                Op::Reply(raw) if outstanding > 0 => {
                    outstanding -= 1;
                    window.release();
                    let granted = window.update(raw);
                    prop_assert!((1..=max).contains(&granted));
                }
                Op::Reply(_) => {}
                Op::Reconnect => {
                    window.reset();
                    outstanding = 0;
                }
            }
            prop_assert_eq!(window.in_flight(), outstanding);
            prop_assert!(window.granted() >= 1 && window.granted() <= max);
            // A new Call may start only while below the grant.
            let mut probe = window;
            prop_assert_eq!(probe.try_acquire(), outstanding < window.granted());
        }
    }
}
