//! Version 2's Requester rules beyond the negotiation itself: the 4096-byte
//! default inline threshold both ways (draft-cel-nfsv4-rpcrdma-version-two-02,
//! "Default Values") and the retry after RDMA2_ERR_CANT_REPLY ("Transport
//! Errors").

// Test code: panicking is how a test fails, and the inputs are ours.
#![allow(clippy::panic, clippy::unwrap_used)]

use rpcrdma_proto::negotiate::{call_thresholds, SendAs, Version};
use rpcrdma_proto::plan::{
    self, on_cant_reply, with_reply_chunk, CallPlan, CantReply, Offered, Plan, ReplyPlan,
};
use rpcrdma_proto::pvt::{self, InlineThresholds, PrivateData};

fn t(send: u32, recv: u32) -> InlineThresholds {
    InlineThresholds { send, recv }
}

fn pd(send_size: u32, recv_size: u32) -> [u8; pvt::LEN] {
    PrivateData {
        remote_invalidate: true,
        send_size,
        recv_size,
    }
    .encode()
}

/// Without private data (rpcrdma.ko's server sends none to some peers, a
/// version 2 peer need not): version 1 assumes 1024 bytes, version 2
/// 4096, both ways, within our own sizes.
#[test]
fn v2_default_is_4096_without_private_data() {
    let n = pvt::negotiate(t(65536, 65536), &[]);
    assert_eq!(n.inline, t(1024, 1024));
    assert_eq!(n.inline_v2, t(4096, 4096));
    assert_eq!(n.for_version(Version::V1), n.inline);
    assert_eq!(n.for_version(Version::V2), n.inline_v2);
    // Garbage private data counts as none.
    let n = pvt::negotiate(t(65536, 65536), &[0xde, 0xad, 0xbe, 0xef, 1, 0, 3, 3]);
    assert_eq!(n.inline_v2, t(4096, 4096));
}

/// Private data that says more than 4096 counts on version 2 as on
/// version 1; less does not lower version 2's 4096, which every version
/// 2 receiver must take.
#[test]
fn v2_private_data_only_raises_it() {
    let n = pvt::negotiate(t(65536, 65536), &pd(16384, 8192));
    assert_eq!(n.inline, t(8192, 16384));
    assert_eq!(n.inline_v2, t(8192, 16384));
    let n = pvt::negotiate(t(65536, 65536), &pd(1024, 2048));
    assert_eq!(n.inline, t(2048, 1024));
    assert_eq!(n.inline_v2, t(4096, 4096));
    // Mixed: each way on its own.
    let n = pvt::negotiate(t(65536, 65536), &pd(1024, 32768));
    assert_eq!(n.inline_v2, t(32768, 4096));
}

/// Our own sizes bound both versions: we never send more than our Send
/// buffers hold nor let the peer send more than our Receive buffers do.
#[test]
fn v2_thresholds_stay_within_ours() {
    let n = pvt::negotiate(t(2048, 4096), &[]);
    assert_eq!(n.inline_v2, t(2048, 4096));
    let n = pvt::negotiate(t(2048, 4096), &pd(65536, 65536));
    assert_eq!(n.inline_v2, t(2048, 4096));
}

/// Version 2's thresholds are never below version 1's, so buffers sized
/// for version 2 (the server's Send buffers) fit both.
#[test]
fn v2_thresholds_are_never_below_v1() {
    let sizes = [1024, 2048, 4096, 8192, 65536, 262_144];
    for &os in &sizes {
        for &or in &sizes {
            for &ps in &sizes {
                for &pr in &sizes {
                    for data in [&pd(ps, pr)[..], &[][..]] {
                        let n = pvt::negotiate(t(os, or), data);
                        assert!(n.inline_v2.send >= n.inline.send, "{os} {or} {ps} {pr}");
                        assert!(n.inline_v2.recv >= n.inline.recv, "{os} {or} {ps} {pr}");
                        assert!(n.inline_v2.send <= os && n.inline_v2.recv <= or);
                    }
                }
            }
        }
    }
}

/// A Requester that may speak version 2 receives at least 4096 bytes
/// whatever `max_inline_read` says; version 1 only keeps the setting.
#[test]
fn receive_buffers_take_v2_default() {
    assert_eq!(pvt::recv_size(1024, true), 4096);
    assert_eq!(pvt::recv_size(8192, true), 8192);
    assert_eq!(pvt::recv_size(1024, false), 1024);
}

/// The Requester switches thresholds when the connection settles on
/// version 2, without reconnecting: the probe plans with version 1's
/// 1024 bytes (no private data), later Calls with 4096 less version 2's
/// 8 header bytes.
#[test]
fn settling_on_v2_raises_the_calls_thresholds() {
    let n = pvt::negotiate(t(4096, 4096), &[]);
    assert_eq!(
        call_thresholds(SendAs::Probe { max_inline: 1024 }, n.inline, n.inline_v2),
        Some((Version::V2, t(1016, 1016)))
    );
    assert_eq!(
        call_thresholds(SendAs::Version(Version::V2), n.inline, n.inline_v2),
        Some((Version::V2, t(4088, 4088)))
    );
    assert_eq!(
        call_thresholds(SendAs::Version(Version::V1), n.inline, n.inline_v2),
        Some((Version::V1, t(1024, 1024)))
    );
}

/// A 3000-byte Reply comes back inline on version 2 where version 1
/// needs a Reply chunk (a Long Reply), on a connection without private
/// data.
#[test]
fn v2_default_removes_long_replies() {
    let dev = plan::DeviceLimits {
        max_fast_reg_page_list_len: 256,
        max_sge_rd: 1,
        max_send_sge: 32,
        page_size: 4096,
    };
    let rpc = plan::Rpc {
        call_len: 200,
        reply_max: 3000,
        reply_nonpayload: 3000,
        ..plan::Rpc::default()
    };
    let n = pvt::negotiate(t(4096, 4096), &[]);
    let plan_as = |send_as| {
        let (_, inline) = call_thresholds(send_as, n.inline, n.inline_v2).unwrap();
        plan::plan(&rpc, &plan::Connection::new(inline, &dev)).reply
    };
    assert_eq!(plan_as(SendAs::Version(Version::V1)), ReplyPlan::ReplyChunk);
    assert_eq!(plan_as(SendAs::Version(Version::V2)), ReplyPlan::Inline);
}

const WRITE_ONLY: Offered = Offered {
    write_chunk: Some(4096),
    reply_chunk: None,
};

/// RDMA2_ERR_CANT_REPLY that names the short segment and its length: the
/// RPC goes again with its whole receive buffer as a Reply chunk.
#[test]
fn cant_reply_with_a_length_resends_with_a_reply_chunk() {
    assert_eq!(
        on_cant_reply(1, 8192, &WRITE_ONLY, 65536),
        CantReply::ResendWithReplyChunk
    );
    // A Call whose Reply was planned inline offered nothing yet.
    assert_eq!(
        on_cant_reply(1, 100, &Offered::default(), 4096),
        CantReply::ResendWithReplyChunk
    );
    let p = Plan {
        call: CallPlan::Inline,
        reply: ReplyPlan::WriteChunk,
    };
    assert_eq!(
        with_reply_chunk(p),
        Plan {
            call: CallPlan::Inline,
            reply: ReplyPlan::ReplyChunk
        }
    );
}

/// Otherwise the RPC fails (EIO): the error does not say how much (zero
/// segment index or length), more than the whole receive buffer is
/// needed, or a Reply chunk over it was offered already (which also ends
/// the retries of a resent Call).
#[test]
fn cant_reply_otherwise_fails() {
    assert_eq!(on_cant_reply(0, 0, &WRITE_ONLY, 65536), CantReply::Fail);
    assert_eq!(on_cant_reply(0, 8192, &WRITE_ONLY, 65536), CantReply::Fail);
    assert_eq!(on_cant_reply(2, 0, &WRITE_ONLY, 65536), CantReply::Fail);
    assert_eq!(on_cant_reply(1, 65537, &WRITE_ONLY, 65536), CantReply::Fail);
    let reply = Offered {
        write_chunk: None,
        reply_chunk: Some(65536),
    };
    assert_eq!(on_cant_reply(1, 70000, &reply, 131_072), CantReply::Fail);
    assert_eq!(on_cant_reply(1, 100, &reply, 65536), CantReply::Fail);
}
