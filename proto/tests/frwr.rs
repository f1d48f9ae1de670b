//! The Requester's side of chunks: MR segmentation, checking a Reply's
//! chunk lists against what was offered, laying out a Reply that used a
//! Write chunk, and the Send With Invalidate key check.

// Test code: panicking is how a test fails, and the inputs are ours.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unwrap_used
)]

use rpcrdma_proto::chunk::{ChunkSlices, Segment};
use rpcrdma_proto::header::FixedHeader;
use rpcrdma_proto::limits::Limits;
use rpcrdma_proto::plan::{
    check_reply, mr_segments, remote_invalidation_ok, write_fixup, BadReply, Offered, ReplyShape,
    WriteFixup,
};
use rpcrdma_proto::pvt::InlineThresholds;
use rpcrdma_proto::v1;

const PAGE: u32 = 4096;

#[test]
fn mr_segments_follow_page_boundaries() {
    // Whole pages: as many as the depth allows.
    let pages = [(0, PAGE); 40];
    assert_eq!(mr_segments(pages, 32, PAGE), 32);
    assert_eq!(mr_segments(pages[32..].iter().copied(), 32, PAGE), 8);
    // A head ending mid-page stands alone.
    assert_eq!(mr_segments([(100, 200), (0, PAGE)], 32, PAGE), 1);
    // A first segment starting mid-page but ending on a boundary joins the next.
    assert_eq!(
        mr_segments([(100, PAGE - 100), (0, PAGE), (0, 5)], 32, PAGE),
        3
    );
    // A later segment starting mid-page starts a new MR.
    assert_eq!(mr_segments([(0, PAGE), (8, 100)], 32, PAGE), 1);
    assert_eq!(mr_segments([], 32, PAGE), 0);
    // Depth zero counts as one.
    assert_eq!(mr_segments(pages, 0, PAGE), 1);
}

fn reply(nomsg: bool, chunks: &ChunkSlices<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; 1024];
    let fixed = FixedHeader {
        xid: 7,
        vers: 1,
        credits: 32,
    };
    let msg = if nomsg {
        v1::Message::Nomsg(*chunks)
    } else {
        v1::Message::Msg(*chunks)
    };
    let n = v1::encode(&mut buf, &fixed, &msg).unwrap();
    buf.truncate(n);
    if !nomsg {
        // An RPC Reply header for xid 7.
        buf.extend_from_slice(&[0, 0, 0, 7, 0, 0, 0, 1]);
    }
    buf
}

fn check(nomsg: bool, chunks: &ChunkSlices<'_>, offered: &Offered) -> Result<ReplyShape, BadReply> {
    let wire = reply(nomsg, chunks);
    let hdr = v1::decode(&wire, &Limits::DEFAULT).unwrap();
    let lists = match hdr.body {
        v1::Body::Msg(l) | v1::Body::Nomsg(l) => l,
        v1::Body::Error(_) => panic!("error body"),
    };
    check_reply(nomsg, &lists, offered)
}

fn seg(length: u32) -> Segment {
    Segment {
        handle: 0x1234,
        length,
        offset: 0x1000,
    }
}

#[test]
fn reply_checked_against_offer() {
    let both = Offered {
        write_chunk: Some(8192),
        reply_chunk: Some(4096),
    };
    assert_eq!(
        check(false, &ChunkSlices::NONE, &both),
        Ok(ReplyShape::Inline)
    );
    let w = [seg(4096), seg(1000)];
    let writes: [&[Segment]; 1] = [&w];
    let chunks = ChunkSlices {
        writes: &writes,
        ..ChunkSlices::NONE
    };
    assert_eq!(
        check(false, &chunks, &both),
        Ok(ReplyShape::Write { written: 5096 })
    );
    // Not offered, or longer than registered: refused.
    assert_eq!(
        check(false, &chunks, &Offered::default()),
        Err(BadReply::NotOffered)
    );
    let small = Offered {
        write_chunk: Some(5095),
        reply_chunk: None,
    };
    assert_eq!(check(false, &chunks, &small), Err(BadReply::TooLong));
    // Two Write chunks.
    let two: [&[Segment]; 2] = [&w, &w];
    let chunks2 = ChunkSlices {
        writes: &two,
        ..ChunkSlices::NONE
    };
    assert_eq!(check(false, &chunks2, &both), Err(BadReply::UnexpectedList));
    // Reply chunk: NOMSG only, bounded.
    let r = [seg(3000)];
    let rc = ChunkSlices {
        reply: Some(&r),
        ..ChunkSlices::NONE
    };
    assert_eq!(
        check(true, &rc, &both),
        Ok(ReplyShape::Reply { written: 3000 })
    );
    assert_eq!(check(false, &rc, &both), Err(BadReply::UnexpectedList));
    let big = [seg(4097)];
    let rc_big = ChunkSlices {
        reply: Some(&big),
        ..ChunkSlices::NONE
    };
    assert_eq!(check(true, &rc_big, &both), Err(BadReply::TooLong));
    let rw = ChunkSlices {
        writes: &writes,
        reply: Some(&r),
        ..ChunkSlices::NONE
    };
    assert_eq!(check(true, &rw, &both), Err(BadReply::BadNomsg));
}

#[test]
fn write_list_trim() {
    // NFS READ of 1 MiB: the inline part is exactly the head.
    assert_eq!(
        write_fixup(120, 1 << 20, 120, 1 << 20),
        WriteFixup {
            trim_head: None,
            head_copy: 120,
            rest_offset: 120 + (1 << 20),
            total: 120 + (1 << 20),
        }
    );
    // Short read: 1001 bytes written, padded to 1004; head shorter than
    // estimated is trimmed so the data follows it.
    assert_eq!(
        write_fixup(140, 1 << 20, 112, 1001),
        WriteFixup {
            trim_head: Some(112),
            head_copy: 112,
            rest_offset: 112 + 1004,
            total: 112 + 1004,
        }
    );
    // Inline bytes after the data land past the data and its pad.
    let f = write_fixup(100, 8192, 116, 5);
    assert_eq!(f.head_copy, 100);
    assert_eq!(f.rest_offset, 108);
    assert_eq!(f.total, 124);
    // A written length past the page list is trimmed to it.
    assert_eq!(write_fixup(100, 4096, 100, 4099).total, 100 + 4096);
    // Nothing written: nothing trimmed.
    assert_eq!(write_fixup(140, 4096, 100, 0).trim_head, None);
}

#[test]
fn remote_invalidation_key_check() {
    assert_eq!(remote_invalidation_ok(0x105, [0x204, 0x105]), Some(1));
    assert_eq!(remote_invalidation_ok(0x106, [0x204, 0x105]), None);
    assert_eq!(remote_invalidation_ok(0, []), None);
}

#[test]
fn chunk_decisions_at_thresholds() {
    use rpcrdma_proto::plan::{plan, CallPlan, Connection, DeviceLimits, ReplyPlan, Rpc};
    let dev = DeviceLimits {
        max_fast_reg_page_list_len: 512,
        max_sge_rd: 32,
        max_send_sge: 32,
        page_size: PAGE,
    };
    for inline in [1024u32, 4096] {
        let mut conn = Connection::new(
            InlineThresholds {
                send: inline,
                recv: inline,
            },
            &dev,
        );
        conn.send_sges = u32::MAX;
        let edge_send = conn.max_inline_send;
        let edge_recv = conn.max_inline_recv;
        let small = Rpc {
            call_len: edge_send,
            reply_max: edge_recv,
            ddp_allowed: true,
            ..Rpc::default()
        };
        let p = plan(&small, &conn);
        assert_eq!((p.call, p.reply), (CallPlan::Inline, ReplyPlan::Inline));
        let over = Rpc {
            call_len: edge_send + 1,
            reply_max: edge_recv + 1,
            ..small
        };
        let p = plan(&over, &conn);
        assert_eq!(
            (p.call, p.reply),
            (CallPlan::PositionZero, ReplyPlan::ReplyChunk)
        );
        let ddp = Rpc {
            call_ddp: true,
            call_page_len: 1 << 20,
            reply_ddp: true,
            reply_nonpayload: 200,
            ..over
        };
        let p = plan(&ddp, &conn);
        assert_eq!(
            (p.call, p.reply),
            (CallPlan::ReadChunk, ReplyPlan::WriteChunk)
        );
        // RPCSEC_GSS integrity: no DDP.
        let gss = Rpc {
            ddp_allowed: false,
            ..ddp
        };
        let p = plan(&gss, &conn);
        assert_eq!(
            (p.call, p.reply),
            (CallPlan::PositionZero, ReplyPlan::ReplyChunk)
        );
    }
}

#[test]
fn zero_length_reply_chunk() {
    let both = Offered {
        write_chunk: Some(8192),
        reply_chunk: Some(4096),
    };
    let empty = [seg(0)];
    let rc = ChunkSlices {
        reply: Some(&empty),
        ..ChunkSlices::NONE
    };
    // Returned unused in an RDMA_MSG Reply: accepted (rpcrdma.ko does too).
    assert_eq!(check(false, &rc, &both), Ok(ReplyShape::Inline));
    // The only carrier of an RDMA_NOMSG Reply, empty: the RPC fails.
    assert_eq!(check(true, &rc, &both), Err(BadReply::BadNomsg));
}
