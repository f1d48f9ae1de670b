//! The client backchannel's rules (RFC 8167): a backward Call is routed
//! before any credit is read from it, its size is bounded by the
//! backchannel's payload, its slots are a fixed set, and its Reply header
//! carries the backchannel's own credits.

// Test code: panicking is how a test fails, and the inputs are ours.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unwrap_used
)]

use rpcrdma_proto::backchannel::{
    check_call, client_max_payload, client_receive_buffers, encode_backward_v1, CallDropped,
    SlotMask, CLIENT_SLOTS, V1_HDRLEN_MIN,
};
use rpcrdma_proto::reply::{classify, Inbound};
use rpcrdma_proto::v1;

const XID: u32 = 0x1234_5678;

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|w| w.to_be_bytes()).collect()
}

#[test]
fn backward_call_carries_no_forward_credit() {
    // The Linux server sends its backward Calls with credits 2: routed as
    // a Call, the grant never reaches the forward window, whatever it is.
    for credits in [0, 1, 2, 500, u32::MAX] {
        let msg = words(&[XID, 1, credits, v1::proc::MSG, 0, 0, 0, XID, 0, 2]);
        match classify(&msg, 128) {
            Inbound::BackwardCall(h) => {
                assert_eq!(h.fixed.credits, credits);
                assert_eq!(h.payload.len(), 12);
            }
            other => panic!("{other:?}"),
        }
    }
    // The same header with a Reply is a forward Reply, clamped.
    let msg = words(&[XID, 1, 2, v1::proc::MSG, 0, 0, 0, XID, 1]);
    assert!(matches!(
        classify(&msg, 128),
        Inbound::Reply { credits: 2, .. }
    ));
    // An RPC XID that differs from the transport XID is no Call.
    let msg = words(&[XID, 1, 2, v1::proc::MSG, 0, 0, 0, XID + 1, 0]);
    assert!(!matches!(classify(&msg, 128), Inbound::BackwardCall(_)));
}

#[test]
fn max_payload_is_one_inline_page_less_the_header() {
    assert_eq!(client_max_payload(4096, 4096, 4096), 4096 - 28);
    assert_eq!(client_max_payload(1024, 4096, 4096), 1024 - 28);
    assert_eq!(client_max_payload(4096, 2048, 4096), 2048 - 28);
    assert_eq!(client_max_payload(65536, 65536, 4096), 4096 - 28);
    assert_eq!(client_max_payload(10, 10, 4096), 0);
    assert_eq!(V1_HDRLEN_MIN, 28);
}

#[test]
fn long_calls_are_dropped() {
    let max = client_max_payload(4096, 4096, 4096);
    assert_eq!(check_call(&[0; 4068], max), Ok(()));
    assert_eq!(
        check_call(&[0; 4069], max),
        Err(CallDropped::TooLong { len: 4069, max })
    );
    assert_eq!(check_call(&[], 0), Ok(()));
}

#[test]
fn slots_are_claimed_once() {
    let mut mask = SlotMask::all(CLIENT_SLOTS);
    let mut got = Vec::new();
    while let Some((k, rest)) = mask.claim() {
        got.push(k);
        mask = rest;
    }
    assert_eq!(got, (0..CLIENT_SLOTS).collect::<Vec<_>>());
    assert_eq!(mask, SlotMask(0));
    // More Calls than slots: none left.
    assert!(mask.claim().is_none());
    let mask = mask.release(3).unwrap();
    assert_eq!(mask.claim(), Some((3, SlotMask(0))));
    // A double release and an out of range slot are refused.
    assert!(mask.release(3).is_none());
    assert!(SlotMask(0).release(32).is_none());
    assert_eq!(SlotMask::all(0), SlotMask(0));
    assert_eq!(SlotMask::all(32), SlotMask(u32::MAX));
    assert_eq!(SlotMask::all(40), SlotMask(u32::MAX));
}

#[test]
fn reply_header_carries_backchannel_credits() {
    let mut buf = [0u8; 28];
    let n = encode_backward_v1(&mut buf, XID, CLIENT_SLOTS).unwrap();
    assert_eq!(n, 28);
    assert_eq!(
        buf.to_vec(),
        words(&[XID, 1, CLIENT_SLOTS, v1::proc::MSG, 0, 0, 0])
    );
    // Receives: the forward window plus every backward slot.
    assert_eq!(client_receive_buffers(128, CLIENT_SLOTS), 144);
}

/// Version 2 backward direction (the draft makes it mandatory): the
/// server's Call and the client's Reply go as RDMA2_MSG with
/// `rdma_direction` naming the RPC message, no handle to invalidate and
/// no chunks, 8 bytes longer than version 1's; each decodes as the other
/// end's classifier expects.
#[test]
fn v2_backward_headers() {
    use rpcrdma_proto::backchannel::{
        backward_header_len, client_max_payload_v2, encode_backward, server_max_payload,
    };
    use rpcrdma_proto::header::MsgType;
    use rpcrdma_proto::limits::Limits;
    use rpcrdma_proto::negotiate::Version;
    use rpcrdma_proto::responder::{receive, Received};
    use rpcrdma_proto::v2;
    let mut buf = [0u8; 64];
    let n = encode_backward(&mut buf, XID, 16, MsgType::Call, Version::V2).unwrap();
    assert_eq!(n, backward_header_len(Version::V2) as usize);
    assert_eq!(
        buf[..n].to_vec(),
        words(&[XID, 2, 16, v2::proc::MSG, 0, 0, 0, 0, 0])
    );
    // The client takes it as a backward Call.
    let mut call = buf[..n].to_vec();
    call.extend(words(&[XID, 0, 2, 0x4000_0000, 1, 4]));
    assert!(matches!(classify(&call, 128), Inbound::BackwardCall2(_)));
    // The client's Reply: direction REPLY, the server takes it for its
    // backchannel.
    let n = encode_backward(&mut buf, XID, CLIENT_SLOTS, MsgType::Reply, Version::V2).unwrap();
    assert_eq!(
        buf[..n].to_vec(),
        words(&[XID, 2, CLIENT_SLOTS, v2::proc::MSG, 1, 0, 0, 0, 0])
    );
    let mut reply = buf[..n].to_vec();
    reply.extend(words(&[XID, 1, 0, 0, 0, 0]));
    assert!(matches!(
        receive(&reply, &Limits::DEFAULT),
        Ok(Received::BackchannelReply { xid: XID, .. })
    ));
    // Version 1 is unchanged.
    let n = encode_backward(&mut buf, XID, CLIENT_SLOTS, MsgType::Reply, Version::V1).unwrap();
    assert_eq!(
        buf[..n].to_vec(),
        words(&[XID, 1, CLIENT_SLOTS, v1::proc::MSG, 0, 0, 0])
    );
    // Payload limits leave room for the longer header.
    assert_eq!(server_max_payload(4096, Version::V1), 4096 - 28);
    assert_eq!(server_max_payload(4096, Version::V2), 4096 - 36);
    assert_eq!(client_max_payload_v2(4096, 4096, 4096), 4096 - 36);
    assert_eq!(client_max_payload_v2(10, 10, 4096), 0);
}
