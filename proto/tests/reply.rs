//! The Requester's receive rules (`reply::classify`): which messages fail
//! their RPC at once, which touch none, and where the credit grant comes
//! from.

// Test code: panicking is how a test fails, and the inputs are ours.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unwrap_used
)]

use rpcrdma_proto::chunk::ChunkSlices;
use rpcrdma_proto::error::DecodeError;
use rpcrdma_proto::header::FixedHeader;
use rpcrdma_proto::negotiate::{Action, Answer, Negotiator, SendAs, Version};
use rpcrdma_proto::reply::{classify, BadReply, Dropped, Inbound};
use rpcrdma_proto::{v1, v2};

const XID: u32 = 0x0bad_cafe;

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|w| w.to_be_bytes()).collect()
}

fn fails_with(msg: &[u8], want: BadReply) {
    match classify(msg, 128) {
        Inbound::Reply { xid, body, .. } => {
            assert_eq!(xid, XID);
            assert_eq!(body.map(|_| ()), Err(want));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn malformed_replies_fail_their_rpc() {
    fails_with(
        &words(&[XID, 1, 32, v1::proc::MSGP, 0, 0, 0, 0]),
        BadReply::Header(DecodeError::MsgpNotSupported),
    );
    fails_with(
        &words(&[XID, 1, 32, 7, 0, 0, 0, 0]),
        BadReply::Header(DecodeError::UnknownProc { proc: 7 }),
    );
    fails_with(
        &words(&[XID, 1, 32, v1::proc::DONE]),
        BadReply::Header(DecodeError::DoneNotSupported),
    );
    // ERR_VERS without its version range, and an unknown error code.
    fails_with(
        &words(&[XID, 1, 32, v1::proc::ERROR, 1]),
        BadReply::Header(DecodeError::MalformedError),
    );
    fails_with(
        &words(&[XID, 1, 32, v1::proc::ERROR, 99]),
        BadReply::Header(DecodeError::MalformedError),
    );
    fails_with(
        &words(&[XID, 1, 32, v1::proc::ERROR, 2]),
        BadReply::Error(v1::RdmaError::Chunk),
    );
    // Chunk lists cut short.
    fails_with(
        &words(&[XID, 1, 32, v1::proc::MSG, 1]),
        BadReply::Header(DecodeError::Truncated),
    );
    // RDMA_MSG whose RPC header names another XID.
    fails_with(
        &words(&[XID, 1, 32, v1::proc::MSG, 0, 0, 0, XID + 1, 1]),
        BadReply::Header(DecodeError::XidMismatch),
    );
}

#[test]
fn unmatched_or_unversioned_touch_no_rpc() {
    assert_eq!(
        classify(&words(&[XID, 1, 32]), 128),
        Inbound::Dropped(Dropped::Short)
    );
    assert_eq!(
        classify(&words(&[XID, 3, 32, 0, 0, 0, 0]), 128),
        Inbound::Dropped(Dropped::Version { vers: 3 })
    );
    assert_eq!(
        classify(&words(&[XID, 0xffff_ffff, 32, 0]), 128),
        Inbound::Dropped(Dropped::Version { vers: 0xffff_ffff })
    );
}

#[test]
fn credits_are_clamped_and_reply_body_kept() {
    let msg = words(&[XID, 1, 1000, v1::proc::MSG, 0, 0, 0, XID, 1, 0]);
    match classify(&msg, 128) {
        Inbound::Reply { credits, body, .. } => {
            assert_eq!(credits, 128);
            let body = body.unwrap();
            assert!(!body.nomsg);
            assert_eq!(body.payload.len(), 12);
        }
        other => panic!("{other:?}"),
    }
    let zero = words(&[XID, 1, 0, v1::proc::MSG, 0, 0, 0, XID, 1]);
    assert!(matches!(
        classify(&zero, 128),
        Inbound::Reply { credits: 1, .. }
    ));
}

#[test]
fn backward_calls_are_routed() {
    let mut buf = [0u8; 64];
    let fixed = FixedHeader {
        xid: XID,
        vers: 1,
        credits: 1,
    };
    let n = v1::encode(&mut buf, &fixed, &v1::Message::Msg(ChunkSlices::NONE)).unwrap();
    let mut msg = buf[..n].to_vec();
    msg.extend(words(&[XID, 0, 2]));
    assert!(matches!(classify(&msg, 128), Inbound::BackwardCall(_)));
    // With chunks: dropped.
    let call = words(&[
        XID,
        1,
        1,
        v1::proc::MSG,
        0,
        1,
        1,
        0x1234,
        16,
        0,
        0,
        0,
        0,
        XID,
        0,
    ]);
    assert_eq!(
        classify(&call, 128),
        Inbound::Dropped(Dropped::BackwardWithChunks)
    );
}

/// The peer's claim of 0x7fffffff bytes written into a Write chunk fails
/// the RPC; it never becomes a length or a status: `check_reply` refuses
/// any length beyond what was offered. (The decoder's byte limit is for
/// Read lists, which a Reply does not carry.)
#[test]
fn huge_write_segment_is_refused() {
    use rpcrdma_proto::plan::{check_reply, BadReply as Shape, Offered};
    let wire = |len| {
        words(&[
            XID,
            1,
            32,
            v1::proc::MSG,
            0,
            1,
            1,
            0xdead_beef,
            len,
            0,
            0,
            0,
            0,
            XID,
            1,
            0,
        ])
    };
    let huge = wire(0x7fff_ffff);
    let Inbound::Reply { body: Ok(body), .. } = classify(&huge, 128) else {
        panic!("not a reply");
    };
    let offered = Offered {
        write_chunk: Some(1 << 20),
        reply_chunk: None,
    };
    assert_eq!(
        check_reply(body.nomsg, &body.lists, &offered),
        Err(Shape::TooLong)
    );
    let msg = wire(1 << 20);
    let Inbound::Reply { body: Ok(body), .. } = classify(&msg, 128) else {
        panic!("not a reply");
    };
    let none = Offered {
        write_chunk: None,
        reply_chunk: None,
    };
    assert_eq!(
        check_reply(body.nomsg, &body.lists, &none),
        Err(Shape::NotOffered)
    );
    let small = Offered {
        write_chunk: Some(4096),
        reply_chunk: None,
    };
    assert_eq!(
        check_reply(body.nomsg, &body.lists, &small),
        Err(Shape::TooLong)
    );
}

// ---------------------------------------------------------------------
// Version 2: the Requester's side of the negotiation
// ---------------------------------------------------------------------

/// A version 2 Reply (RDMA2_MSG, direction REPLY) completes its RPC and
/// settles the probe on version 2.
#[test]
fn v2_reply_settles_on_v2() {
    let msg = words(&[XID, 2, 32, 0, 1, 0, 0, 0, 0, XID, 1, 0, 0]);
    let Inbound::Reply {
        xid: XID,
        body: Ok(body),
        answer,
        ..
    } = classify(&msg, 128)
    else {
        panic!("{:?}", classify(&msg, 128));
    };
    assert_eq!(body.payload.len(), 16);
    assert_eq!(answer, Answer::Reply { vers: 2 });
    let mut n = Negotiator::new();
    n.on_connect();
    assert!(matches!(n.send(XID), SendAs::Probe { max_inline: 1024 }));
    assert_eq!(n.on_answer(XID, answer), Action::None);
    assert_eq!(n.version(), Some(Version::V2));
}

/// rpcrdma.ko's server answers a version 2 Call with ERR_VERS 1..1,
/// echoing `rdma_vers` 2: the RPC is sent again as version 1, not failed.
#[test]
fn v1_server_err_vers_resends_as_v1() {
    let msg = words(&[XID, 2, 32, 4, 1, 1, 1]);
    let Inbound::Reply {
        xid: XID,
        body: Err(_),
        answer,
        ..
    } = classify(&msg, 128)
    else {
        panic!("{:?}", classify(&msg, 128));
    };
    assert_eq!(answer, Answer::ErrVers { low: 1, high: 1 });
    let mut n = Negotiator::new();
    n.on_connect();
    n.send(XID);
    // Everything else waits for the probe.
    assert_eq!(n.send(XID + 1), SendAs::Wait);
    assert_eq!(n.on_answer(XID, answer), Action::ResendAsV1 { xid: XID });
    assert_eq!(n.send(XID), SendAs::Version(Version::V1));
    // Never probed again, on any later connection.
    n.on_connect();
    assert_eq!(n.send(XID + 2), SendAs::Version(Version::V1));
    // ERR_CHUNK in a version 1 header: the server speaks version 1 (the
    // RPC fails, not resent).
    let chunk = words(&[XID, 1, 32, 4, 2]);
    let Inbound::Reply { answer, .. } = classify(&chunk, 128) else {
        panic!()
    };
    let mut m = Negotiator::new();
    m.send(XID);
    assert_eq!(m.on_answer(XID, answer), Action::None);
    assert_eq!(m.version(), Some(Version::V1));
    // The same refusal in a version 1 header.
    let v1 = words(&[XID, 1, 32, 4, 1, 1, 1]);
    assert!(matches!(
        classify(&v1, 128),
        Inbound::Reply {
            answer: Answer::ErrVers { low: 1, high: 1 },
            ..
        }
    ));
}

/// A version 2 error other than ERR_VERS fails the RPC; a version 2
/// backward Call (RDMA2_MSG, direction CALL, no chunks) is for the
/// backchannel; one with chunks or a handle to invalidate is dropped.
#[test]
fn v2_errors_and_backward_calls() {
    let msg = words(&[XID, 2, 32, 4, 2]);
    assert!(matches!(
        classify(&msg, 128),
        Inbound::Reply {
            body: Err(BadReply::Error2(v2::RdmaError::BadXdr)),
            answer: Answer::OtherError,
            ..
        }
    ));
    let call = words(&[XID, 2, 2, 0, 0, 0, 0, 0, 0, XID, 0]);
    match classify(&call, 128) {
        Inbound::BackwardCall2(h) => {
            assert_eq!(h.fixed.xid, XID);
            assert_eq!(h.payload, &words(&[XID, 0])[..]);
        }
        other => panic!("{other:?}"),
    }
    // A Write chunk of one segment.
    let chunked = words(&[XID, 2, 2, 0, 0, 0, 0, 1, 1, 7, 64, 0, 0, 0, 0, XID, 0]);
    assert_eq!(
        classify(&chunked, 128),
        Inbound::Dropped(Dropped::BackwardWithChunks)
    );
    // An `rdma_inv_handle` in a backward Call names nothing of ours.
    let inv = words(&[XID, 2, 2, 0, 0, 7, 0, 0, 0, XID, 0]);
    assert!(!matches!(classify(&inv, 128), Inbound::BackwardCall2(_)));
}

/// The probe fits version 1's 1024 bytes with its longer header and
/// plans with version 1's thresholds; version 2 Calls plan with version
/// 2's, 8 bytes less of inline room both ways.
#[test]
fn call_thresholds_follow_the_version() {
    use rpcrdma_proto::negotiate::call_thresholds;
    use rpcrdma_proto::pvt::{InlineThresholds, Negotiated};
    let t = |send, recv| InlineThresholds { send, recv };
    let n = Negotiated {
        inline: t(2048, 3072),
        inline_v2: t(8192, 4096),
        peer_remote_invalidate: false,
    };
    assert_eq!(call_thresholds(SendAs::Wait, n.inline, n.inline_v2), None);
    assert_eq!(
        call_thresholds(SendAs::Version(Version::V1), n.inline, n.inline_v2),
        Some((Version::V1, t(2048, 3072)))
    );
    assert_eq!(
        call_thresholds(SendAs::Version(Version::V2), n.inline, n.inline_v2),
        Some((Version::V2, t(8184, 4088)))
    );
    assert_eq!(
        call_thresholds(SendAs::Probe { max_inline: 1024 }, n.inline, n.inline_v2),
        Some((Version::V2, t(1016, 3064)))
    );
}

/// `rdma_inv_handle`: where the Reply lands first, zero without chunks.
#[test]
fn inv_handle_picks_one_of_the_calls_handles() {
    use rpcrdma_proto::chunk::{ReadSegment, Segment};
    use rpcrdma_proto::negotiate::inv_handle;
    let seg = |handle| Segment {
        handle,
        length: 4096,
        offset: 0,
    };
    assert_eq!(inv_handle(&ChunkSlices::NONE), 0);
    let reads = [ReadSegment {
        position: 0,
        segment: seg(7),
    }];
    let reply = [seg(9)];
    let w = [seg(8)];
    let writes: [&[Segment]; 1] = [&w];
    let all = ChunkSlices {
        reads: &reads,
        writes: &writes,
        reply: Some(&reply),
    };
    assert_eq!(inv_handle(&all), 8);
    let no_writes = ChunkSlices { writes: &[], ..all };
    assert_eq!(inv_handle(&no_writes), 9);
    let reads_only = ChunkSlices {
        reply: None,
        ..no_writes
    };
    assert_eq!(inv_handle(&reads_only), 7);
}

/// A probe that never reached the wire (its RPC failed to marshal) taught
/// nothing: the next Call probes, and the peer is not taken for version 1.
#[test]
fn an_unsent_probe_is_forgotten() {
    let mut n = Negotiator::new();
    assert!(matches!(n.send(XID), SendAs::Probe { .. }));
    assert_eq!(n.send(XID + 1), SendAs::Wait);
    n.on_unsent(XID + 1);
    assert_eq!(n.send(XID + 1), SendAs::Wait);
    n.on_unsent(XID);
    assert!(matches!(n.send(XID + 1), SendAs::Probe { .. }));
    assert_eq!(n.on_probe_lost(), Action::ResendAsV1 { xid: XID + 1 });
}

/// A probe whose RPC ended unanswered (killed by `umount -f`, timed out)
/// taught nothing: the next Call probes instead of waiting for an answer
/// nobody takes; the old probe's late answer is ignored, and a connection
/// lost afterwards does not make the peer a version 1 one.
#[test]
fn an_abandoned_probe_is_forgotten() {
    let mut n = Negotiator::new();
    assert!(matches!(n.send(XID), SendAs::Probe { .. }));
    assert_eq!(n.send(XID + 1), SendAs::Wait);
    // Another RPC ending changes nothing.
    n.on_abandoned(XID + 1);
    assert_eq!(n.send(XID + 1), SendAs::Wait);
    n.on_abandoned(XID);
    assert!(matches!(n.send(XID + 1), SendAs::Probe { .. }));
    assert_eq!(
        n.on_answer(XID, Answer::Reply { vers: 2 }),
        Action::None,
        "the abandoned probe's answer"
    );
    assert_eq!(n.version(), None);
    assert_eq!(n.send(XID + 2), SendAs::Wait);
    n.on_abandoned(XID + 1);
    assert_eq!(n.on_probe_lost(), Action::None);
    assert_eq!(n.version(), None);
    // Once settled, an RPC ending is nothing to the negotiation.
    let mut n = Negotiator::new();
    assert!(matches!(n.send(XID), SendAs::Probe { .. }));
    assert_eq!(n.on_answer(XID, Answer::Reply { vers: 2 }), Action::None);
    n.on_abandoned(XID);
    assert_eq!(n.version(), Some(Version::V2));
}
