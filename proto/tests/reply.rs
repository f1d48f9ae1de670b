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
use rpcrdma_proto::reply::{classify, BadReply, Dropped, Inbound};
use rpcrdma_proto::v1;

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
        classify(&words(&[XID, 2, 32, 0, 0, 0, 0]), 128),
        Inbound::Dropped(Dropped::Version { vers: 2 })
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
