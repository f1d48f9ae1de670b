//! The Responder's rules (`responder`): which messages become Calls, how a
//! Call is assembled from its Read chunks, and how a Reply is planned.

// Test code: panicking is how a test fails, and the inputs are ours.
#![allow(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unwrap_used
)]

use std::collections::HashMap;

use rpcrdma_proto::chunk::{ChunkLists, Segment};
use rpcrdma_proto::error::DecodeError;
use rpcrdma_proto::limits::Limits;
use rpcrdma_proto::responder::{
    assemble, call_invalidate_handle, encode_error, invalidate_handle, plan_call_reply, plan_reply,
    receive, remote_invalidation, Call, Cause, DropReason, ErrorBody, Piece, Received, Refusal,
    ReplyShape,
};
use rpcrdma_proto::v1::{self, RdmaError};
use rpcrdma_proto::v2;

const XID: u32 = 0x1234_5678;
const CR: u32 = 64;

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|w| w.to_be_bytes()).collect()
}

fn seg(s: Segment) -> [u32; 4] {
    [s.handle, s.length, (s.offset >> 32) as u32, s.offset as u32]
}

fn s(handle: u32, length: u32, offset: u64) -> Segment {
    Segment {
        handle,
        length,
        offset,
    }
}

/// A header: fixed words, then `reads` (position, segment), `writes`,
/// `reply`, then the inline bytes.
fn msg(
    proc: u32,
    reads: &[(u32, Segment)],
    writes: &[&[Segment]],
    reply: Option<&[Segment]>,
    inline: &[u8],
) -> Vec<u8> {
    let mut w = vec![XID, 1, CR, proc];
    for (p, sg) in reads {
        w.push(1);
        w.push(*p);
        w.extend(seg(*sg));
    }
    w.push(0);
    for c in writes {
        w.push(1);
        w.push(c.len() as u32);
        c.iter().for_each(|sg| w.extend(seg(*sg)));
    }
    w.push(0);
    match reply {
        Some(c) => {
            w.push(1);
            w.push(c.len() as u32);
            c.iter().for_each(|sg| w.extend(seg(*sg)));
        }
        None => w.push(0),
    }
    let mut b = words(&w);
    b.extend_from_slice(inline);
    b
}

/// An RPC Call message start, padded to `len` bytes.
fn rpc(dir: u32, len: usize) -> Vec<u8> {
    let mut b = words(&[XID, dir]);
    b.resize(len.max(8), 0xa5);
    b
}

fn call(buf: &[u8]) -> Call<'_> {
    match receive(buf, &Limits::DEFAULT) {
        Ok(Received::Call(c)) => c,
        other => panic!("{other:?}"),
    }
}

fn chunk_err(buf: &[u8]) -> Cause {
    match receive(buf, &Limits::DEFAULT) {
        Err(Refusal::Error {
            xid: XID,
            vers: 1,
            error: ErrorBody::V1(RdmaError::Chunk),
            cause,
        }) => cause,
        other => panic!("{other:?}"),
    }
}

fn dropped(buf: &[u8]) -> DropReason {
    match receive(buf, &Limits::DEFAULT) {
        Err(Refusal::Drop(r)) => r,
        other => panic!("{other:?}"),
    }
}

const A: Segment = Segment {
    handle: 0xa,
    length: 4096,
    offset: 0x1000,
};

#[test]
fn short_messages_are_dropped() {
    let full = words(&[XID, 1, CR, 0]);
    for n in 0..12 {
        assert_eq!(dropped(&full[..n]), DropReason::Short, "{n}");
    }
}

/// RFC 8166 §4.5: a message shorter than the minimal 28-byte header
/// (xid, vers, credit, proc and three list discriminators) "MUST [be]
/// silently discard[ed] ... before performing any parsing": its XID cannot
/// be trusted, so nothing is answered, not even ERR_VERS.
#[test]
fn headers_shorter_than_28_bytes_are_dropped() {
    let full = msg(0, &[], &[], None, &[]);
    assert_eq!(full.len(), 28);
    for n in 12..28 {
        assert_eq!(dropped(&full[..n]), DropReason::Short, "{n}");
    }
    let v2 = words(&[XID, 2, CR, 0, 0, 0]);
    assert_eq!(dropped(&v2), DropReason::Short);
    // An RDMA_ERROR is 20 bytes: dropped either way.
    assert_eq!(dropped(&words(&[XID, 1, CR, 4, 2])), DropReason::Short);
    // At 28 bytes the header is parsed (and here has no RPC message).
    assert_eq!(dropped(&full), DropReason::ShortRpc);
    let v3 = words(&[XID, 3, CR, 0, 0, 0, 0]);
    assert!(matches!(
        receive(&v3, &Limits::DEFAULT),
        Err(Refusal::Error {
            xid: XID,
            vers: 3,
            error: ErrorBody::V1(RdmaError::Vers { low: 1, high: 2 }),
            ..
        })
    ));
}

#[test]
fn other_versions_get_err_vers_echoing_theirs() {
    for vers in [0, 3, 7, u32::MAX] {
        let buf = words(&[XID, vers, CR, 0, 0, 0, 0, XID, 0]);
        assert_eq!(
            receive(&buf, &Limits::DEFAULT),
            Err(Refusal::Error {
                xid: XID,
                vers,
                error: ErrorBody::V1(RdmaError::Vers { low: 1, high: 2 }),
                cause: Cause::Header(DecodeError::BadVersion { vers }),
            })
        );
    }
    // Even a version 3 header that is only fixed words and padding.
    assert!(matches!(
        receive(&words(&[XID, 3, CR, 0, 0, 0, 0]), &Limits::DEFAULT),
        Err(Refusal::Error {
            error: ErrorBody::V1(RdmaError::Vers { .. }),
            ..
        })
    ));
}

#[test]
fn done_and_error_are_dropped() {
    // Padded to the 28 bytes below which nothing is parsed.
    assert_eq!(dropped(&words(&[XID, 1, CR, 3, 0, 0, 0])), DropReason::Done);
    assert_eq!(
        dropped(&words(&[XID, 1, CR, 4, 2, 0, 0])),
        DropReason::Error
    );
    assert_eq!(
        dropped(&words(&[XID, 1, CR, 4, 1, 1, 1])),
        DropReason::Error
    );
    // Malformed errors too: an error is never answered.
    assert_eq!(
        dropped(&words(&[XID, 1, CR, 4, 99, 0, 0])),
        DropReason::Error
    );
}

#[test]
fn msgp_and_unknown_procedures_get_err_chunk() {
    assert_eq!(
        chunk_err(&words(&[XID, 1, CR, 2, 0, 0, 0, 0, 0])),
        Cause::Header(DecodeError::MsgpNotSupported)
    );
    for proc in [5, 6, 0x8000_0000, u32::MAX] {
        assert_eq!(
            chunk_err(&words(&[XID, 1, CR, proc, 0, 0, 0])),
            Cause::Header(DecodeError::UnknownProc { proc })
        );
    }
}

#[test]
fn malformed_lists_get_err_chunk() {
    let good = msg(0, &[(8, A)], &[&[A]], Some(&[A]), &rpc(0, 8));
    // Every truncation inside the lists.
    let hdr_len = good.len() - 8;
    for n in 28..hdr_len {
        assert_eq!(
            chunk_err(&good[..n]),
            Cause::Header(DecodeError::Truncated),
            "{n}"
        );
    }
    assert_eq!(
        chunk_err(&words(&[XID, 1, CR, 0, 2, 0, 0, XID, 0])),
        Cause::Header(DecodeError::BadDiscriminator { value: 2 })
    );
    assert_eq!(
        chunk_err(&msg(0, &[(6, A)], &[], None, &rpc(0, 8))),
        Cause::Header(DecodeError::MisalignedPosition { position: 6 })
    );
    assert_eq!(
        chunk_err(&msg(0, &[(16, A)], &[], None, &rpc(0, 12))),
        Cause::Header(DecodeError::PositionBeyondPayload)
    );
    // The first chunk (4096 bytes at 8) runs over the second at 12.
    assert_eq!(
        chunk_err(&msg(0, &[(8, A), (12, A)], &[], None, &rpc(0, 16))),
        Cause::Header(DecodeError::OverlappingReadChunks)
    );
    let big = s(1, 17 << 20, 0);
    assert_eq!(
        chunk_err(&msg(0, &[(8, big)], &[], None, &rpc(0, 8))),
        Cause::Header(DecodeError::TooManyBytes)
    );
    let many = [A; 17];
    let many: Vec<&[Segment]> = many.iter().map(std::slice::from_ref).collect();
    assert_eq!(
        chunk_err(&msg(0, &[], &many, None, &rpc(0, 8))),
        Cause::Header(DecodeError::TooManyChunks)
    );
    let tight = Limits {
        max_segments_per_chunk: 2,
        ..Limits::DEFAULT
    };
    let buf = msg(0, &[], &[], Some(&[A, A, A]), &rpc(0, 8));
    assert!(matches!(
        receive(&buf, &tight),
        Err(Refusal::Error {
            cause: Cause::Header(DecodeError::TooManySegments),
            ..
        })
    ));
    assert!(matches!(
        receive(&buf, &Limits::DEFAULT),
        Ok(Received::Call(_))
    ));
}

/// RFC 8166 §3.4.6 defines the "empty Write chunk" (no segment, length
/// zero) as a form a Write chunk may take; nothing forbids it. It takes a
/// result payload like any Write chunk, with nothing written: the data
/// stays in the body, as for a payload without a Write chunk, and the
/// chunk is echoed as it came, with no segment.
#[test]
fn empty_write_and_reply_chunks_are_accepted() {
    let buf = msg(0, &[], &[&[], &[A]], None, &rpc(0, 8));
    let c = call(&buf);
    assert_eq!(c.chunks.writes.chunk_count(), 2);
    // Two READs: the first meets the empty chunk, the second takes A.
    let mut sh = shape(800, Some((100, 300)));
    sh.payloads[1] = Some((400, 200));
    let p = plan_reply(&c.chunks, sh, 1024).unwrap();
    assert_eq!(p.payload_len(), 200);
    assert_eq!(
        p.writes()
            .map(|w| (w.src, w.len, w.handle))
            .collect::<Vec<_>>(),
        vec![(400, 200, 0xa)]
    );
    assert_eq!(
        p.inline_ranges().collect::<Vec<_>>(),
        vec![0..400, 600..800]
    );
    let mut hdr = [0u8; 256];
    let n = p.encode_header(&mut hdr, XID, 1).unwrap();
    let mut want = vec![XID, 1, 1, 0, 0, 1, 0, 1, 1];
    want.extend(seg(s(0xa, 200, 0x1000)));
    want.extend([0, 0]);
    assert_eq!(&hdr[..n], &words(&want)[..]);
    // The segments as echoed, for the encode_wseg trace events: the
    // empty chunk has none; A's one took the 200 bytes.
    assert_eq!(
        p.echoed_write_segments().collect::<Vec<_>>(),
        vec![(1, 0, s(0xa, 200, 0x1000))]
    );
    // An empty Reply chunk has room for nothing, and is echoed empty.
    let buf = msg(0, &[], &[], Some(&[]), &rpc(0, 8));
    let l = lists(&buf);
    let p = plan_reply(&l, shape(100, None), 1024).unwrap();
    let n = p.encode_header(&mut hdr, XID, 1).unwrap();
    assert_eq!(&hdr[..n], &words(&[XID, 1, 1, 0, 0, 0, 1, 0])[..]);
    assert_eq!(
        plan_reply(&l, shape(2000, None), 1024).map(|_| ()),
        Err(Cause::ReplyChunkTooSmall {
            segment: 0,
            needed: 2000
        })
    );
    // A chunk of empty segments is unused, not empty: accepted too.
    call(&msg(0, &[], &[&[s(1, 0, 0)]], None, &rpc(0, 8)));
}

#[test]
fn nomsg_needs_a_position_zero_chunk_and_nothing_inline() {
    assert_eq!(
        chunk_err(&msg(1, &[], &[], None, &[])),
        Cause::Header(DecodeError::NomsgWithoutChunks)
    );
    assert_eq!(
        chunk_err(&msg(1, &[], &[], Some(&[A]), &[])),
        Cause::NomsgWithoutCall
    );
    assert_eq!(
        chunk_err(&msg(1, &[], &[&[A]], None, &[])),
        Cause::NomsgWithoutCall
    );
    assert_eq!(
        chunk_err(&msg(1, &[(8, A)], &[], None, &[])),
        Cause::Header(DecodeError::PositionBeyondPayload)
    );
    assert_eq!(
        chunk_err(&msg(1, &[(0, A)], &[], None, &[0, 0, 0, 0])),
        Cause::NomsgWithInline
    );
    let buf = msg(
        1,
        &[(0, A), (0, s(0xb, 100, 0)), (64, A)],
        &[&[A]],
        Some(&[A]),
        &[],
    );
    let c = call(&buf);
    assert!(c.nomsg);
    assert!(c.inline.is_empty());
    assert_eq!(c.chunks.reads.chunk_count(), 2);
    assert_eq!((c.xid, c.credits), (XID, CR));
}

#[test]
fn msg_must_not_carry_position_zero() {
    assert_eq!(
        chunk_err(&msg(0, &[(0, A)], &[], None, &rpc(0, 8))),
        Cause::MsgWithPositionZero
    );
}

#[test]
fn short_or_undirected_rpc_messages_are_dropped() {
    for n in [0, 4, 7] {
        let buf = msg(0, &[], &[], None, &rpc(0, 8)[..n]);
        assert_eq!(dropped(&buf), DropReason::ShortRpc, "{n}");
    }
    assert_eq!(
        dropped(&msg(0, &[], &[], None, &words(&[XID, 2]))),
        DropReason::BadDirection { value: 2 }
    );
    assert_eq!(
        chunk_err(&msg(0, &[], &[], None, &words(&[XID + 1, 0]))),
        Cause::Header(DecodeError::XidMismatch)
    );
}

#[test]
fn replies_go_to_the_backchannel() {
    let body = rpc(1, 40);
    let buf = msg(0, &[], &[], None, &body);
    assert_eq!(
        receive(&buf, &Limits::DEFAULT),
        Ok(Received::BackchannelReply {
            xid: XID,
            credits: CR,
            payload: &body[..],
        })
    );
    for buf in [
        msg(0, &[], &[&[A]], None, &body),
        msg(0, &[], &[], Some(&[A]), &body),
        msg(0, &[(8, A)], &[], None, &body),
    ] {
        assert_eq!(dropped(&buf), DropReason::BackwardWithChunks);
    }
}

/// A Requester never answers a Reply (RFC 8166 §4.5): a backward Reply
/// with a bad header is dropped, not answered with ERR_CHUNK, whose XID
/// the client would look up among its own Calls.
#[test]
fn malformed_backward_replies_are_dropped() {
    let body = words(&[XID, 1, 0, 0, 0, 0]);
    let bad = |buf: &[u8]| match receive(buf, &Limits::DEFAULT) {
        Err(Refusal::Drop(DropReason::BadReply(e))) => e,
        other => panic!("{other:?}"),
    };
    let mut other_xid = body.clone();
    other_xid[..4].copy_from_slice(&(XID + 1).to_be_bytes());
    assert_eq!(
        bad(&msg(0, &[], &[], None, &other_xid)),
        DecodeError::XidMismatch
    );
    assert_eq!(
        bad(&msg(0, &[(6, A)], &[], None, &body)),
        DecodeError::MisalignedPosition { position: 6 }
    );
    assert_eq!(
        bad(&msg(0, &[(64, A)], &[], None, &body)),
        DecodeError::PositionBeyondPayload
    );
    let many = [A; 17];
    let many: Vec<&[Segment]> = many.iter().map(std::slice::from_ref).collect();
    assert_eq!(
        bad(&msg(0, &[], &many, None, &body)),
        DecodeError::TooManyChunks
    );
    // The same faults in a Call are answered.
    assert_eq!(
        chunk_err(&msg(0, &[(6, A)], &[], None, &rpc(0, 24))),
        Cause::Header(DecodeError::MisalignedPosition { position: 6 })
    );
    // Where the lists cannot be walked, nothing says it is a Reply.
    assert_eq!(
        chunk_err(&words(&[XID, 1, CR, 0, 2, 0, 0, XID, 1])),
        Cause::Header(DecodeError::BadDiscriminator { value: 2 })
    );
}

/// Bidir §2.4: a message "too small to convey a complete and valid
/// RPC-over-RDMA and RPC message": its credits are ignored, and it is
/// dropped. The smallest RPC Reply: xid, REPLY, MSG_ACCEPTED, a verifier
/// (flavor, length, body) and accept_stat; or MSG_DENIED with its
/// reject_stat and body.
#[test]
fn short_backward_replies_are_dropped_with_their_credits() {
    let short = |rpc: &[u32]| match receive(&msg(0, &[], &[], None, &words(rpc)), &Limits::DEFAULT)
    {
        Err(Refusal::Drop(DropReason::ShortReply { len })) => len,
        other => panic!("{rpc:?}: {other:?}"),
    };
    let ok = |rpc: &[u32]| {
        let body = words(rpc);
        let buf = msg(0, &[], &[], None, &body);
        assert_eq!(
            receive(&buf, &Limits::DEFAULT),
            Ok(Received::BackchannelReply {
                xid: XID,
                credits: CR,
                payload: &body[..],
            }),
            "{rpc:?}"
        );
    };
    assert_eq!(short(&[XID, 1]), 8);
    assert_eq!(short(&[XID, 1, 0]), 12);
    assert_eq!(short(&[XID, 1, 0, 0, 0]), 20);
    ok(&[XID, 1, 0, 0, 0, 0]);
    // A verifier body of 6 bytes (8 with its pad).
    assert_eq!(short(&[XID, 1, 0, 6, 6, 0, 0]), 28);
    ok(&[XID, 1, 0, 6, 6, 0, 0, 0]);
    assert_eq!(short(&[XID, 1, 0, 6, u32::MAX, 0, 0, 0]), 32);
    // MSG_DENIED: RPC_MISMATCH low, high; AUTH_ERROR stat.
    assert_eq!(short(&[XID, 1, 1, 0, 2]), 20);
    ok(&[XID, 1, 1, 0, 2, 2]);
    assert_eq!(short(&[XID, 1, 1, 1]), 16);
    ok(&[XID, 1, 1, 1, 5]);
}

#[test]
fn a_full_call_decodes() {
    let inline = rpc(0, 120);
    let w = s(0xc, 8192, 0x2000);
    let r = s(0xd, 1024, 0x3000);
    let buf = msg(0, &[(100, A)], &[&[w, w]], Some(&[r]), &inline);
    let c = call(&buf);
    assert!(!c.nomsg);
    assert_eq!(c.inline, &inline[..]);
    assert_eq!(c.chunks.writes.chunk_count(), 1);
    assert_eq!(c.chunks.reply.unwrap().total_length(), 1024);
}

#[test]
fn a_located_call_comes_back_over_its_message() {
    let inline = rpc(0, 120);
    let w = s(0xc, 8192, 0x2000);
    let r = s(0xd, 1024, 0x3000);
    let long = s(0xe, 300, 0x4000);
    let bufs = [
        msg(0, &[(100, A)], &[&[w, w], &[r]], Some(&[r]), &inline),
        msg(0, &[], &[], None, &inline),
        msg(0, &[], &[&[w]], None, &inline),
        msg(1, &[(0, long), (0, A), (32, r)], &[], Some(&[w]), &[]),
    ];
    for buf in &bufs {
        let c = call(buf);
        let at = c.locate(buf).unwrap();
        assert_eq!(at.xid(), XID);
        let back = at.call(buf).unwrap();
        assert_eq!(back, c);
        // The same bytes, not a copy of them.
        if !c.inline.is_empty() {
            assert_eq!(back.inline.as_ptr_range(), c.inline.as_ptr_range());
        }
        // A message of another length is not the Call's.
        assert_eq!(at.call(&buf[..buf.len() - 4]), None);
        let mut longer = buf.clone();
        longer.extend_from_slice(&[0; 4]);
        assert_eq!(at.call(&longer), None);
        // Nor does it locate in a copy of its message.
        let copy = buf.clone();
        assert_eq!(c.locate(&copy), None);
    }
}

#[test]
fn a_located_call_over_other_bytes_does_not_panic() {
    let inline = rpc(0, 64);
    let buf = msg(0, &[(32, A)], &[&[A, A]], Some(&[A]), &inline);
    let at = call(&buf).locate(&buf).unwrap();
    // The contract is the same bytes; others of the same length give
    // views of those bytes, which iterate without panicking.
    for fill in [0x00, 0xff, 0x5a] {
        let other = vec![fill; buf.len()];
        let c = at.call(&other).unwrap();
        let _ = c.chunks.reads.segments().count();
        let _ = c.chunks.writes.chunks().flat_map(|w| w.segments()).count();
        let _ = c.chunks.sole_handle();
        let _ = plan_reply(&c.chunks, shape(4000, Some((100, 3000))), 1024);
        let _ = assemble(&c, u32::MAX).map(|a| a.count());
    }
}

// ---------------------------------------------------------------------
// Assembly
// ---------------------------------------------------------------------

/// The client's memory: bytes a function of handle and offset.
fn remote(handle: u32, offset: u64) -> u8 {
    (u64::from(handle) * 131 + offset * 7 + (offset >> 8)) as u8
}

/// Runs the pieces, checking order and contiguity.
fn run(c: &Call<'_>, max: u32) -> Result<Vec<u8>, Cause> {
    let a = assemble(c, max)?;
    let total = a.total_len();
    let mut out = Vec::new();
    for p in a {
        assert_eq!(p.dest() as usize, out.len(), "{p:?}");
        assert!(!p.is_empty(), "{p:?}");
        match p {
            Piece::Inline { src, .. } => out.extend_from_slice(&c.inline[src]),
            Piece::Read {
                handle,
                length,
                offset,
                ..
            } => out.extend((0..u64::from(length)).map(|i| remote(handle, offset + i))),
            Piece::Zero { len, .. } => {
                assert!((1..4).contains(&len));
                out.extend(std::iter::repeat(0).take(len as usize));
            }
        }
    }
    assert_eq!(out.len(), total as usize);
    Ok(out)
}

fn data(sg: Segment) -> Vec<u8> {
    (0..u64::from(sg.length))
        .map(|i| remote(sg.handle, sg.offset + i))
        .collect()
}

#[test]
fn no_chunks_is_the_inline_message() {
    let inline = rpc(0, 100);
    let buf = msg(0, &[], &[], None, &inline);
    assert_eq!(run(&call(&buf), 100).unwrap(), inline);
    assert_eq!(run(&call(&buf), 99), Err(Cause::CallTooLong));
}

#[test]
fn one_read_chunk_is_inserted_and_padded() {
    // WRITE-like: 40 bytes of header, 4097 bytes of data, 8 bytes after.
    let inline = rpc(0, 48);
    let x = s(0x11, 4000, 0x10_0000);
    let y = s(0x12, 97, 0x20_0000);
    let buf = msg(0, &[(40, x), (40, y)], &[], None, &inline);
    let got = run(&call(&buf), 1 << 20).unwrap();
    let mut want = inline[..40].to_vec();
    want.extend(data(x));
    want.extend(data(y));
    want.extend([0, 0, 0]);
    want.extend(&inline[40..]);
    assert_eq!(got, want);
    assert_eq!(got.len(), 48 + 4100);
    // The pad comes at the very end too: nfsd decodes the roundup.
    let buf = msg(0, &[(48, y)], &[], None, &inline);
    let got = run(&call(&buf), 1 << 20).unwrap();
    assert_eq!(got.len(), 48 + 100);
    assert_eq!(&got[145..], &[0, 0, 0]);
    // Exactly at the limit, and one byte under.
    assert!(run(&call(&buf), 148).is_ok());
    assert_eq!(run(&call(&buf), 147), Err(Cause::CallTooLong));
}

#[test]
fn a_chunk_may_follow_an_unaligned_one_at_the_end() {
    // 8 inline bytes, a 5-byte chunk at 8 (padded to 16), a chunk at 16.
    let inline = rpc(0, 8);
    let x = s(1, 5, 0);
    let y = s(2, 8, 0);
    let buf = msg(0, &[(8, x), (16, y)], &[], None, &inline);
    let got = run(&call(&buf), 100).unwrap();
    let mut want = inline.clone();
    want.extend(data(x));
    want.extend([0, 0, 0]);
    want.extend(data(y));
    assert_eq!(got, want);
}

#[test]
fn the_client_may_send_the_roundup_in_the_chunk() {
    let inline = rpc(0, 12);
    let x = s(1, 5, 0);
    let pad = s(3, 3, 0);
    let buf = msg(0, &[(8, x), (8, pad)], &[], None, &inline);
    let got = run(&call(&buf), 100).unwrap();
    assert_eq!(got.len(), 20);
    assert_eq!(&got[13..16], &data(pad)[..]);
}

#[test]
fn empty_segments_add_no_piece() {
    let inline = rpc(0, 8);
    let buf = msg(
        0,
        &[(8, s(1, 0, 0)), (8, s(2, 8, 0)), (8, s(3, 0, 0))],
        &[],
        None,
        &inline,
    );
    let c = call(&buf);
    assert_eq!(assemble(&c, 100).unwrap().count(), 2);
    assert_eq!(run(&c, 100).unwrap().len(), 16);
}

/// A Read list that moves no byte (a zero-length Position Zero chunk, or
/// zero-length data items) is served: the Call is its inline part, with
/// nothing to read. The transport posted no Read for it, and closed the
/// connection when the empty Read chain failed to post.
#[test]
fn a_read_list_that_moves_no_byte_is_the_inline_call() {
    let empty = s(0xe, 0, 0x100);
    let inline = rpc(0, 24);
    for buf in [
        msg(0, &[(8, empty)], &[], None, &inline),
        msg(
            0,
            &[(8, empty), (8, s(0xf, 0, 0)), (24, empty)],
            &[],
            None,
            &inline,
        ),
        msg(1, &[(0, empty)], &[], None, &[]),
    ] {
        let c = call(&buf);
        assert!(!c.has_read_data());
        let asm = assemble(&c, 1 << 20).unwrap();
        assert!(!asm.has_reads());
        assert_eq!(asm.total_len() as usize, c.inline.len());
        assert!(asm.clone().all(|p| matches!(p, Piece::Inline { .. })));
        assert_eq!(run(&c, u32::MAX).unwrap(), c.inline);
    }
    // One byte to read is a Read.
    let buf = msg(0, &[(8, empty), (8, s(0xf, 1, 0))], &[], None, &inline);
    let c = call(&buf);
    assert!(c.has_read_data());
    assert!(assemble(&c, 1 << 20).unwrap().has_reads());
    let buf = msg(0, &[], &[], None, &inline);
    let c = call(&buf);
    assert!(!c.has_read_data());
    assert!(!assemble(&c, 1 << 20).unwrap().has_reads());
}

#[test]
fn a_long_call_is_its_position_zero_chunk() {
    let p1 = s(0x21, 30, 0x5000);
    let p2 = s(0x22, 70, 0x9000);
    let buf = msg(1, &[(0, p1), (0, p2)], &[], None, &[]);
    let mut want = data(p1);
    want.extend(data(p2));
    assert_eq!(run(&call(&buf), 100).unwrap(), want);
    assert_eq!(run(&call(&buf), 99), Err(Cause::CallTooLong));
    // With a data chunk at 48 of the unreduced stream: the Position Zero
    // chunk is split there, its second segment read in two parts.
    let d = s(0x23, 10, 0x7000);
    let buf = msg(1, &[(0, p1), (0, p2), (48, d)], &[], None, &[]);
    let c = call(&buf);
    let pieces: Vec<Piece> = assemble(&c, 200).unwrap().collect();
    assert_eq!(
        pieces,
        vec![
            Piece::Read {
                handle: 0x21,
                length: 30,
                offset: 0x5000,
                dest: 0
            },
            Piece::Read {
                handle: 0x22,
                length: 18,
                offset: 0x9000,
                dest: 30
            },
            Piece::Read {
                handle: 0x23,
                length: 10,
                offset: 0x7000,
                dest: 48
            },
            Piece::Zero { dest: 58, len: 2 },
            Piece::Read {
                handle: 0x22,
                length: 52,
                offset: 0x9000 + 18,
                dest: 60
            },
        ]
    );
}

#[test]
fn positions_outside_the_message_fail_assembly() {
    // 4 bytes at 8 leave 4 inline bytes: a chunk at 16 is the last
    // possible, one at 20 is refused on receipt.
    let inline = rpc(0, 12);
    let buf = msg(0, &[(8, s(1, 4, 0)), (16, s(2, 4, 0))], &[], None, &inline);
    assert_eq!(run(&call(&buf), 100).unwrap().len(), 20);
    let buf = msg(0, &[(8, s(1, 4, 0)), (20, s(2, 4, 0))], &[], None, &inline);
    assert_eq!(
        chunk_err(&buf),
        Cause::Header(DecodeError::PositionBeyondPayload)
    );
    // A hand-made Call that breaks the receive rules.
    let inline = rpc(0, 8);
    let buf = msg(0, &[(8, s(1, 4, 0))], &[], None, &inline);
    let mut c = call(&buf);
    c.nomsg = true;
    assert!(assemble(&c, 100).is_err());
    let buf = msg(1, &[(0, s(1, 4, 0))], &[], None, &[]);
    let mut c = call(&buf);
    c.nomsg = false;
    assert!(assemble(&c, 100).is_err());
}

/// A tiny deterministic generator for the property loops.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Splits `len` bytes into 1 to 4 segments (some empty) of `handle`
/// starting at `offset`, so that the client's memory holds `want` there.
fn split(rng: &mut Rng, handle: u32, len: u32) -> Vec<Segment> {
    let n = 1 + rng.below(4) as u32;
    let mut out = Vec::new();
    let mut left = len;
    let mut off = 0x1_0000u64 * u64::from(handle);
    for i in 0..n {
        let l = if i + 1 == n {
            left
        } else {
            rng.below(u64::from(left) + 1) as u32
        };
        out.push(s(handle, l, off));
        off += u64::from(l) + 64;
        left -= l;
    }
    out
}

/// `reads` in a random order that keeps the segments of each position in
/// theirs.
fn interleave(rng: &mut Rng, reads: &[(u32, Segment)]) -> Vec<(u32, Segment)> {
    let mut groups: Vec<std::collections::VecDeque<(u32, Segment)>> = Vec::new();
    for &r in reads {
        match groups.iter_mut().find(|g| g[0].0 == r.0) {
            Some(g) => g.push_back(r),
            None => groups.push([r].into()),
        }
    }
    let mut out = Vec::new();
    while !groups.is_empty() {
        let i = rng.below(groups.len() as u64) as usize;
        out.push(groups[i].pop_front().unwrap());
        if groups[i].is_empty() {
            groups.remove(i);
        }
    }
    out
}

/// RFC 8166 §3.4.5 does not order the Read list; rpcrdma.ko takes it in
/// any order (`svc_rdma_pcl.c`: "The list might not be in order by
/// position"), sorting chunks by position and joining the segments of a
/// position in list order. Only overlapping chunks are refused.
#[test]
fn read_chunks_in_any_order_are_taken_by_position() {
    let a = s(0xa, 5, 0x100);
    let b = s(0xb, 8, 0x200);
    let b2 = s(0xc, 4, 0x300);
    let inline = rpc(0, 24);
    let sorted = msg(0, &[(8, a), (20, b), (20, b2)], &[], None, &inline);
    let want = run(&call(&sorted), u32::MAX).unwrap();
    for reads in [[(20, b), (20, b2), (8, a)], [(20, b), (8, a), (20, b2)]] {
        let buf = msg(0, &reads, &[], None, &inline);
        let c = call(&buf);
        assert_eq!(c.chunks.reads.chunk_count(), 2);
        let positions: Vec<u32> = c.chunks.reads.chunks().map(|c| c.position()).collect();
        assert_eq!(positions, vec![8, 20]);
        assert_eq!(run(&c, u32::MAX).unwrap(), want, "{reads:?}");
    }
    // A Long Call's Position Zero chunk, listed last.
    let long = msg(1, &[(16, a), (0, A)], &[], None, &[]);
    let c = call(&long);
    assert_eq!(
        c.chunks.reads.position_zero().map(|c| c.position()),
        Some(0)
    );
    assert_eq!(run(&c, u32::MAX).unwrap().len(), 4096 + 8);
    // Overlap is refused whatever the order.
    assert_eq!(
        chunk_err(&msg(0, &[(12, A), (8, A)], &[], None, &rpc(0, 16))),
        Cause::Header(DecodeError::OverlappingReadChunks)
    );
    // Positions still count against the limit on chunks.
    let many: Vec<(u32, Segment)> = (0..17).rev().map(|i| (8 + 4 * i, s(1, 0, 0))).collect();
    assert_eq!(
        chunk_err(&msg(0, &many, &[], None, &rpc(0, 80))),
        Cause::Header(DecodeError::TooManyChunks)
    );
    let tight = Limits {
        max_segments_per_chunk: 2,
        ..Limits::DEFAULT
    };
    let spread = msg(0, &[(8, a), (20, b), (8, a), (8, a)], &[], None, &inline);
    assert!(matches!(
        receive(&spread, &tight),
        Err(Refusal::Error {
            cause: Cause::Header(DecodeError::TooManySegments),
            ..
        })
    ));
}

#[test]
fn random_calls_assemble_to_the_unreduced_stream() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..2000 {
        let nomsg = round % 3 == 0;
        // The reduced stream: inline bytes, or the Position Zero chunk.
        let base_len = 8 + 4 * rng.below(20) as usize;
        let mut reads = Vec::new();
        let base: Vec<u8> = if nomsg {
            let segs = split(&mut rng, 1, base_len as u32);
            let b: Vec<u8> = segs.iter().flat_map(|&sg| data(sg)).collect();
            reads.extend(segs.into_iter().map(|sg| (0, sg)));
            b
        } else {
            let mut b = rpc(0, base_len);
            for (i, x) in b.iter_mut().enumerate().skip(8) {
                *x = i as u8;
            }
            b
        };
        // Chunks at increasing aligned offsets of the reduced stream.
        let mut want = Vec::new();
        // (Past 0 for a Long Call: a chunk at 0 would join the Call's.)
        let mut at = if nomsg { 4 } else { 8 };
        let mut taken = 0;
        for k in 0..rng.below(4) {
            at += 4 * rng.below(((base_len - at) / 4 + 1) as u64) as usize;
            let len = 1 + rng.below(300) as u32;
            want.extend_from_slice(&base[taken..at]);
            taken = at;
            let position = want.len() as u32;
            let segs = split(&mut rng, 2 + k as u32, len);
            for sg in segs {
                want.extend(data(sg));
                reads.push((position, sg));
            }
            while want.len() % 4 != 0 {
                want.push(0);
            }
        }
        want.extend_from_slice(&base[taken..]);
        // Every other round, the list in another order: any interleaving
        // that keeps each chunk's segments in their order.
        if round % 2 == 1 {
            reads = interleave(&mut rng, &reads);
        }
        let buf = if nomsg {
            msg(1, &reads, &[], None, &[])
        } else {
            msg(0, &reads, &[], None, &base)
        };
        let c = call(&buf);
        assert_eq!(run(&c, u32::MAX).unwrap(), want, "round {round}");
        // As the server assembles it: from where the Call lies.
        let back = c.locate(&buf).unwrap().call(&buf).unwrap();
        assert_eq!(run(&back, u32::MAX).unwrap(), want, "round {round}");
        let len = want.len() as u32;
        assert!(run(&c, len).is_ok());
        assert_eq!(run(&c, len - 1), Err(Cause::CallTooLong));
    }
}

// ---------------------------------------------------------------------
// Reply planning
// ---------------------------------------------------------------------

fn lists(buf: &[u8]) -> ChunkLists<'_> {
    call(buf).chunks
}

fn shape(len: u32, payload: Option<(u32, u32)>) -> ReplyShape {
    ReplyShape::new(len, payload)
}

#[test]
fn a_short_reply_goes_inline() {
    let buf = msg(0, &[], &[], None, &rpc(0, 8));
    let p = plan_reply(&lists(&buf), shape(100, None), 1024).unwrap();
    assert!(!p.nomsg());
    assert_eq!(p.header_len(), 28);
    assert_eq!(p.writes().count(), 0);
    assert_eq!(p.inline_ranges().collect::<Vec<_>>(), vec![0..100]);
    let mut hdr = [0u8; 28];
    assert_eq!(p.encode_header(&mut hdr, XID, 7), Ok(28));
    assert_eq!(&hdr[..], &words(&[XID, 1, 7, 0, 0, 0, 0])[..]);
    assert!(p.encode_header(&mut hdr[..27], XID, 7).is_err());
}

#[test]
fn inline_fits_exactly_or_takes_the_reply_chunk() {
    let r = s(0x77, 4096, 0x4000);
    let buf = msg(0, &[], &[], Some(&[r]), &rpc(0, 8));
    let l = lists(&buf);
    // 48 bytes of header, the unused Reply chunk echoed, + 976 = 1024.
    let p = plan_reply(&l, shape(976, None), 1024).unwrap();
    assert!(!p.nomsg());
    assert_eq!(p.header_len(), 48);
    let p = plan_reply(&l, shape(977, None), 1024).unwrap();
    assert!(p.nomsg());
    assert_eq!(p.header_len(), 16 + 4 + 4 + 8 + 16);
    assert_eq!(p.inline_ranges().count(), 0);
    assert_eq!(
        p.writes().collect::<Vec<_>>(),
        vec![rpcrdma_proto::responder::RdmaWrite {
            src: 0,
            len: 977,
            handle: 0x77,
            offset: 0x4000
        }]
    );
    let mut hdr = [0u8; 64];
    let n = p.encode_header(&mut hdr, XID, 9).unwrap();
    assert_eq!(n as u32, p.header_len());
    assert_eq!(
        &hdr[..n],
        &words(&[XID, 1, 9, 1, 0, 0, 1, 1, 0x77, 977, 0, 0x4000])[..]
    );
    // Without a Reply chunk there is no way to send it.
    let buf = msg(0, &[], &[], None, &rpc(0, 8));
    assert_eq!(
        plan_reply(&lists(&buf), shape(997, None), 1024),
        Err(Cause::ReplyTooLong)
    );
    // A Reply chunk too small.
    assert_eq!(
        plan_reply(&l, shape(4097, None), 1024),
        Err(Cause::ReplyChunkTooSmall {
            segment: 1,
            needed: 4097
        })
    );
    assert!(plan_reply(&l, shape(4096, None), 1024).is_ok());
}

#[test]
fn the_payload_fills_write_chunk_segments_in_order() {
    let w1 = s(0x51, 1000, 0x1_0000);
    let w2 = s(0x52, 0, 0x2_0000);
    let w3 = s(0x53, 8192, 0x3_0000);
    let unused = s(0x54, 4096, 0x4_0000);
    let buf = msg(0, &[], &[&[w1, w2, w3], &[unused]], None, &rpc(0, 8));
    let l = lists(&buf);
    // 100 bytes of header, 3001 bytes of payload + 3 pad, 20 bytes after.
    let p = plan_reply(&l, shape(3124, Some((100, 3001))), 1024).unwrap();
    assert!(!p.nomsg());
    assert_eq!(p.payload_len(), 3001);
    assert_eq!(p.body_len(), 120);
    assert_eq!(
        p.inline_ranges().collect::<Vec<_>>(),
        vec![0..100, 3104..3124]
    );
    let writes: Vec<_> = p
        .writes()
        .map(|w| (w.src, w.len, w.handle, w.offset))
        .collect();
    assert_eq!(
        writes,
        vec![(100, 1000, 0x51, 0x1_0000), (1100, 2001, 0x53, 0x3_0000)]
    );
    let mut hdr = [0u8; 256];
    let n = p.encode_header(&mut hdr, XID, 1).unwrap();
    assert_eq!(n as u32, p.header_len());
    let mut want = vec![XID, 1, 1, 0, 0];
    want.extend([1, 3]);
    want.extend(seg(w1));
    want.extend(seg(s(0x52, 0, 0x2_0000)));
    want.extend(seg(s(0x53, 2001, 0x3_0000)));
    want.extend([1, 1]);
    want.extend(seg(s(0x54, 0, 0x4_0000)));
    want.extend([0, 0]);
    assert_eq!(&hdr[..n], &words(&want)[..]);
    // The same segments, one by one, as the encode_wseg events see them.
    assert_eq!(
        p.echoed_write_segments().collect::<Vec<_>>(),
        vec![
            (0, 0, w1),
            (0, 1, s(0x52, 0, 0x2_0000)),
            (0, 2, s(0x53, 2001, 0x3_0000)),
            (1, 0, s(0x54, 0, 0x4_0000)),
        ]
    );
    // One byte more than the chunk holds.
    assert_eq!(
        plan_reply(&l, shape(20000, Some((100, 9193))), 1 << 20),
        Err(Cause::PayloadTooLong {
            segment: 3,
            needed: 8193
        })
    );
    assert!(plan_reply(&l, shape(20000, Some((100, 9192))), 1 << 20).is_ok());
    // A payload range outside the Reply.
    assert_eq!(
        plan_reply(&l, shape(200, Some((100, 101))), 1024),
        Err(Cause::BadPayload)
    );
    assert_eq!(
        plan_reply(&l, shape(200, Some((u32::MAX, 2))), 1024),
        Err(Cause::BadPayload)
    );
}

#[test]
fn each_payload_takes_the_next_write_chunk() {
    let w1 = s(0x71, 2000, 0x1_0000);
    let w2 = s(0x72, 300, 0x2_0000);
    let w3 = s(0x73, 300, 0x3_0000);
    let unused = s(0x74, 4096, 0x4_0000);
    let buf = msg(0, &[], &[&[w1], &[w2, w3], &[unused]], None, &rpc(0, 8));
    let l = lists(&buf);
    // Two READs: 1001 bytes at 100 (+3 pad), 500 at 1200; 50 bytes after.
    let mut sh = shape(1750, Some((100, 1001)));
    sh.payloads[1] = Some((1200, 500));
    let p = plan_reply(&l, sh, 1024).unwrap();
    assert_eq!(p.payload_len(), 1501);
    assert_eq!(p.write_chunks_used(), 2);
    assert_eq!(
        p.inline_ranges().collect::<Vec<_>>(),
        vec![0..100, 1104..1200, 1700..1750]
    );
    let writes: Vec<_> = p.writes().map(|w| (w.src, w.len, w.handle)).collect();
    assert_eq!(
        writes,
        vec![(100, 1001, 0x71), (1200, 300, 0x72), (1500, 200, 0x73)]
    );
    let mut hdr = [0u8; 256];
    let n = p.encode_header(&mut hdr, XID, 1).unwrap();
    assert_eq!(n as u32, p.header_len());
    let mut want = vec![XID, 1, 1, 0, 0];
    want.extend([1, 1]);
    want.extend(seg(s(0x71, 1001, 0x1_0000)));
    want.extend([1, 2]);
    want.extend(seg(w2));
    want.extend(seg(s(0x73, 200, 0x3_0000)));
    want.extend([1, 1]);
    want.extend(seg(s(0x74, 0, 0x4_0000)));
    want.extend([0, 0]);
    assert_eq!(&hdr[..n], &words(&want)[..]);
    // A third payload takes the third chunk...
    let mut sh3 = sh;
    sh3.payloads[2] = Some((1704, 8));
    let p = plan_reply(&l, sh3, 1024);
    assert_eq!(p.map(|p| p.write_chunks_used()), Ok(3));
    // ...while with two chunks it stays in the body.
    let two = msg(0, &[], &[&[w1], &[w2, w3]], None, &rpc(0, 8));
    let p = plan_reply(&lists(&two), sh3, 1024).unwrap();
    assert_eq!(p.write_chunks_used(), 2);
    assert_eq!(
        p.inline_ranges().collect::<Vec<_>>(),
        vec![0..100, 1104..1200, 1700..1750]
    );
    // Payloads out of order, or overlapping the one before (or its
    // pad), are nfsd's mistake: refused rather than sent wrong.
    let mut bad = sh;
    bad.payloads[1] = Some((1102, 10));
    assert_eq!(plan_reply(&l, bad, 1024), Err(Cause::BadPayload));
    bad.payloads[1] = Some((50, 10));
    assert_eq!(plan_reply(&l, bad, 1024), Err(Cause::BadPayload));
}

#[test]
fn a_payload_without_write_chunk_stays_in_the_body() {
    let buf = msg(0, &[], &[], None, &rpc(0, 8));
    let p = plan_reply(&lists(&buf), shape(500, Some((100, 300))), 1024).unwrap();
    assert_eq!(p.payload_len(), 0);
    assert_eq!(p.inline_ranges().collect::<Vec<_>>(), vec![0..500]);
    // An empty payload leaves its Write chunk unused.
    let buf = msg(0, &[], &[&[A]], None, &rpc(0, 8));
    let p = plan_reply(&lists(&buf), shape(500, Some((100, 0))), 1024).unwrap();
    assert_eq!(p.writes().count(), 0);
    assert_eq!(p.inline_ranges().collect::<Vec<_>>(), vec![0..500]);
}

/// RFC 8166 §4.3.3: "When a Requester provides a Reply chunk in an RPC
/// Call message, the Responder MUST copy that chunk into the Transport
/// header of the RPC Reply": a Reply sent inline returns it unused, every
/// segment length 0. The Requester's side (`plan::check_reply`, and
/// rpcrdma.ko's `rpcrdma_decode_msg`) accepts such a Reply as inline.
#[test]
fn an_unused_reply_chunk_is_echoed_with_zero_lengths() {
    let r1 = s(0x81, 1 << 20, 0x1_0000);
    let r2 = s(0x82, 4096, 0x2_0000);
    let buf = msg(0, &[], &[], Some(&[r1, r2]), &rpc(0, 8));
    let p = plan_reply(&lists(&buf), shape(100, None), 1024).unwrap();
    assert!(!p.nomsg());
    assert_eq!(p.writes().count(), 0);
    let mut hdr = [0u8; 256];
    let n = p.encode_header(&mut hdr, XID, 1).unwrap();
    assert_eq!(n as u32, p.header_len());
    let mut want = vec![XID, 1, 1, 0, 0, 0, 1, 2];
    want.extend(seg(s(0x81, 0, 0x1_0000)));
    want.extend(seg(s(0x82, 0, 0x2_0000)));
    assert_eq!(&hdr[..n], &words(&want)[..]);
    let mut reply = hdr[..n].to_vec();
    reply.extend(words(&[XID, 1]));
    let h = v1::decode(&reply, &Limits::DEFAULT).unwrap();
    let v1::Body::Msg(got) = h.body else {
        panic!("{:?}", h.body)
    };
    let offered = rpcrdma_proto::plan::Offered {
        write_chunk: None,
        reply_chunk: Some((1 << 20) + 4096),
    };
    assert_eq!(
        rpcrdma_proto::plan::check_reply(false, &got, &offered),
        Ok(rpcrdma_proto::plan::ReplyShape::Inline)
    );
}

/// RFC 8166 §3.4.6: "For each Write chunk provided by a Requester, the
/// Responder pushes one data item", in order: as many as the decode limit
/// lets a Write list hold.
#[test]
fn every_write_chunk_takes_a_payload() {
    let max = Limits::DEFAULT.max_chunks_per_list;
    let segs: Vec<Segment> = (0..max).map(|i| s(0x100 + i, 64, 0)).collect();
    let chunks: Vec<&[Segment]> = segs.iter().map(std::slice::from_ref).collect();
    let buf = msg(0, &[], &chunks, None, &rpc(0, 8));
    let l = lists(&buf);
    // A COMPOUND of `max` READs of 32 bytes, 100 bytes apart.
    let mut sh = shape(100 * max, None);
    for (i, slot) in sh.payloads.iter_mut().enumerate() {
        *slot = Some((100 * i as u32 + 20, 32));
    }
    let p = plan_reply(&l, sh, 4096).unwrap();
    assert_eq!(p.write_chunks_used(), max as usize);
    let handles: Vec<u32> = p.writes().map(|w| w.handle).collect();
    assert_eq!(handles, (0..max).map(|i| 0x100 + i).collect::<Vec<_>>());
}

/// A READ at end of file has an empty result payload; it still takes its
/// Write chunk (returned with nothing written), so that the next READ's
/// data goes into the next chunk, where the client looks for it.
#[test]
fn a_zero_length_payload_consumes_its_write_chunk() {
    let w1 = s(0x91, 4096, 0x1_0000);
    let w2 = s(0x92, 4096, 0x2_0000);
    let buf = msg(0, &[], &[&[w1], &[w2]], None, &rpc(0, 8));
    let mut sh = shape(800, Some((100, 0)));
    sh.payloads[1] = Some((200, 500));
    let p = plan_reply(&lists(&buf), sh, 1024).unwrap();
    assert_eq!(
        p.writes()
            .map(|w| (w.src, w.len, w.handle))
            .collect::<Vec<_>>(),
        vec![(200, 500, 0x92)]
    );
    assert_eq!(p.write_chunks_used(), 1);
    assert_eq!(
        p.inline_ranges().collect::<Vec<_>>(),
        vec![0..200, 700..800]
    );
    let mut hdr = [0u8; 256];
    let n = p.encode_header(&mut hdr, XID, 1).unwrap();
    let mut want = vec![XID, 1, 1, 0, 0, 1, 1];
    want.extend(seg(s(0x91, 0, 0x1_0000)));
    want.extend([1, 1]);
    want.extend(seg(s(0x92, 500, 0x2_0000)));
    want.extend([0, 0]);
    assert_eq!(&hdr[..n], &words(&want)[..]);
}

#[test]
fn payload_and_reply_chunk_together() {
    let w = s(0x61, 1 << 20, 0x10_0000);
    let r1 = s(0x62, 100, 0x1000);
    let r2 = s(0x63, 2000, 0x2000);
    let buf = msg(0, &[], &[&[w]], Some(&[r1, r2]), &rpc(0, 8));
    let l = lists(&buf);
    // Body: 1500 before, 201 after the 5000-byte payload.
    let p = plan_reply(&l, shape(6701, Some((1500, 5000))), 1024).unwrap();
    assert!(p.nomsg());
    assert_eq!(p.body_len(), 1701);
    let writes: Vec<_> = p.writes().map(|w| (w.src, w.len, w.handle)).collect();
    assert_eq!(
        writes,
        vec![
            (1500, 5000, 0x61),
            (0, 100, 0x62),
            (100, 1400, 0x63),
            (6500, 201, 0x63)
        ]
    );
    let mut hdr = [0u8; 256];
    let n = p.encode_header(&mut hdr, XID, 1).unwrap();
    let mut want = vec![XID, 1, 1, 1, 0, 1, 1];
    want.extend(seg(s(0x61, 5000, 0x10_0000)));
    want.extend([0, 1, 2]);
    want.extend(seg(r1));
    want.extend(seg(s(0x63, 1601, 0x2000)));
    assert_eq!(&hdr[..n], &words(&want)[..]);
    // The Reply chunk is sized for the body, not the whole Reply.
    assert!(plan_reply(&l, shape(2100 + 5000, Some((0, 5000))), 100).is_ok());
    assert!(plan_reply(&l, shape(2101 + 5000, Some((0, 5000))), 100).is_err());
}

#[test]
fn a_nomsg_header_must_fit_the_send_too() {
    let r = [s(1, 100, 0); 100];
    let buf = msg(0, &[], &[], Some(&r), &rpc(0, 8));
    let l = lists(&buf);
    // 32 + 1600 bytes of header.
    assert_eq!(
        plan_reply(&l, shape(1700, None), 1024),
        Err(Cause::HeaderTooLong)
    );
    assert!(plan_reply(&l, shape(1700, None), 1632).unwrap().nomsg());
    assert!(plan_reply(&l, shape(1700, None), 1631).is_err());
}

// ---------------------------------------------------------------------
// What other clients may send: legal, and served
// ---------------------------------------------------------------------

/// A Reply chunk of many segments (a client registering page by page)
/// and far larger than a small Reply: the Reply goes inline, the chunk
/// echoed unused when the echo fits the Send. When only the echo keeps
/// the Reply from fitting, and the Reply chunk cannot be used either
/// (its echo is as long in an RDMA_NOMSG header), the Reply goes inline
/// without it rather than not at all: rpcrdma.ko's client takes either.
#[test]
fn a_reply_chunk_far_larger_than_the_reply_is_served() {
    let pages: Vec<Segment> = (0..256).map(|i| s(0x300 + i, 4096, 0)).collect();
    let buf = msg(0, &[], &[], Some(&pages), &rpc(0, 8));
    let l = lists(&buf);
    // 28 - 4 + 8 + 256 * 16 = 4128 bytes of echo: too long for 4096.
    let p = plan_reply(&l, shape(200, None), 4096).unwrap();
    assert!(!p.nomsg());
    assert_eq!(p.header_len(), 28);
    assert_eq!(p.inline_ranges().collect::<Vec<_>>(), vec![0..200]);
    let mut hdr = [0u8; 64];
    let n = p.encode_header(&mut hdr, XID, 1).unwrap();
    assert_eq!(&hdr[..n], &words(&[XID, 1, 1, 0, 0, 0, 0])[..]);
    // With room for the echo, it is echoed.
    let p = plan_reply(&l, shape(200, None), 8192).unwrap();
    assert!(!p.nomsg());
    assert_eq!(p.header_len(), 4128);
    // A body too long for inline still goes by the chunk, where its
    // header fits.
    let p = plan_reply(&l, shape(10000, None), 8192).unwrap();
    assert!(p.nomsg());
    assert_eq!(p.writes().count(), 3);
    // A 1 MiB Reply chunk in one segment for a 100-byte Reply.
    let buf = msg(0, &[], &[], Some(&[s(0x40, 1 << 20, 0)]), &rpc(0, 8));
    let p = plan_reply(&lists(&buf), shape(100, None), 1024).unwrap();
    assert!(!p.nomsg());
    assert_eq!(p.header_len(), 48);
}

/// Write and Reply chunks describe the client's memory, of which the
/// server writes only its Reply: however much they offer (16 READs of
/// 2 MiB, a 64 MiB Reply chunk), there is nothing to bound. The byte
/// limit is for the Read list, which the server pulls into its own pages.
#[test]
fn write_and_reply_chunks_beyond_the_byte_limit_are_served() {
    let max = Limits::DEFAULT.max_chunks_per_list;
    let segs: Vec<Segment> = (0..max).map(|i| s(0x200 + i, 2 << 20, 0)).collect();
    let chunks: Vec<&[Segment]> = segs.iter().map(std::slice::from_ref).collect();
    let buf = msg(0, &[], &chunks, Some(&[s(0x300, 64 << 20, 0)]), &rpc(0, 8));
    let l = lists(&buf);
    let p = plan_reply(&l, shape(4200, Some((100, 4096))), 1024).unwrap();
    assert_eq!(p.write_chunks_used(), 1);
    // The Read list stays bounded.
    let big = s(1, 17 << 20, 0);
    assert_eq!(
        chunk_err(&msg(0, &[(8, big)], &[], None, &rpc(0, 8))),
        Cause::Header(DecodeError::TooManyBytes)
    );
}

/// A Write list longer than the Reply needs: the unused chunks come back
/// with zero lengths (RFC 8166 §3.4.6, as `svc_rdma_encode_write_list`).
#[test]
fn a_write_list_longer_than_the_reply_needs_is_served() {
    let max = Limits::DEFAULT.max_chunks_per_list;
    let segs: Vec<Segment> = (0..max).map(|i| s(0x200 + i, 1 << 20, 0)).collect();
    let chunks: Vec<&[Segment]> = segs.iter().map(std::slice::from_ref).collect();
    let buf = msg(0, &[], &chunks, None, &rpc(0, 8));
    let l = lists(&buf);
    let p = plan_reply(&l, shape(4200, Some((100, 4096))), 1024).unwrap();
    assert_eq!(p.write_chunks_used(), 1);
    let mut hdr = [0u8; 1024];
    let n = p.encode_header(&mut hdr, XID, 1).unwrap();
    let mut want = vec![XID, 1, 1, 0, 0, 1, 1];
    want.extend(seg(s(0x200, 4096, 0)));
    for i in 1..max {
        want.extend([1, 1]);
        want.extend(seg(s(0x200 + i, 0, 0)));
    }
    want.extend([0, 0]);
    assert_eq!(&hdr[..n], &words(&want)[..]);
    // And with no payload at all.
    let p = plan_reply(&l, shape(300, None), 1024).unwrap();
    assert_eq!(p.writes().count(), 0);
}

/// A Read chunk of as many small, unaligned segments as the decode limit
/// allows, and a Long Call likewise split, are read segment by segment.
#[test]
fn a_read_chunk_of_many_small_segments_is_served() {
    let most = Limits::DEFAULT.max_segments_per_chunk;
    let small: Vec<(u32, Segment)> = (0..most).map(|i| (8, s(0x500 + i, 3, 0x10))).collect();
    let inline = rpc(0, 16);
    let buf = msg(0, &small, &[], None, &inline);
    let c = call(&buf);
    let a = assemble(&c, 1 << 20).unwrap();
    assert!(a.has_reads());
    let reads = a
        .clone()
        .filter(|p| matches!(p, Piece::Read { .. }))
        .count();
    assert_eq!(reads, most as usize);
    let len = 3 * most as usize;
    assert_eq!(a.total_len() as usize, 16 + len + (4 - len % 4) % 4);
    assert_eq!(run(&c, u32::MAX).unwrap().len(), a.total_len() as usize);
    // A Long Call of 260 segments of 5 bytes.
    let long: Vec<(u32, Segment)> = (0..most).map(|i| (0, s(0x600 + i, 5, 0))).collect();
    let buf = msg(1, &long, &[], None, &[]);
    let c = call(&buf);
    assert_eq!(assemble(&c, 1 << 20).unwrap().count(), most as usize);
}

#[test]
fn random_replies_put_every_byte_in_one_place() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut multi = 0u32;
    for round in 0..3000 {
        // Up to three Write chunks (handles 5, 7, 8), some empty (no
        // segment), and three payloads, some empty (READ at EOF).
        let wsegs: Vec<Vec<Segment>> = (0..rng.below(4))
            .map(|i| {
                let wl = rng.below(3000) as u32;
                let mut w = split(&mut rng, [5, 7, 8][i as usize], wl);
                if rng.below(8) == 0 {
                    w.clear();
                }
                w
            })
            .collect();
        let rl = rng.below(3000) as u32;
        let rsegs = split(&mut rng, 6, rl);
        let with_r = rng.below(2) == 0;
        let writes: Vec<&[Segment]> = wsegs.iter().map(|w| &w[..]).collect();
        let buf = msg(0, &[], &writes, with_r.then_some(&rsegs[..]), &rpc(0, 8));
        let l = lists(&buf);
        let len = 4 * rng.below(1000) as u32;
        let mut shape = ReplyShape::new(len, None);
        let mut at = 0u32;
        let mut payloads: Vec<(u32, u32)> = Vec::new();
        for slot in shape.payloads.iter_mut().take(rng.below(4) as usize) {
            let off = at + 4 * rng.below(u64::from(len - at) / 4 + 1) as u32;
            let plen = if rng.below(8) == 0 {
                0
            } else {
                1 + rng.below(u64::from(len - off) + 1) as u32
            };
            if off + plen > len {
                break;
            }
            *slot = Some((off, plen));
            payloads.push((off, plen));
            at = ((off + plen + 3) & !3).min(len);
        }
        let inline_max = 28 + rng.below(2000) as u32;
        let Ok(p) = plan_reply(&l, shape, inline_max) else {
            continue;
        };
        // Client memory after the Writes, and the Send.
        let reply: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        let mut mem: HashMap<(u32, u64), u8> = HashMap::new();
        for w in p.writes() {
            assert!(w.len > 0);
            for i in 0..w.len {
                let old = mem.insert(
                    (w.handle, w.offset + u64::from(i)),
                    reply[(w.src + i) as usize],
                );
                assert!(old.is_none(), "round {round}: written twice");
            }
        }
        let mut hdr = vec![0u8; p.header_len() as usize];
        assert_eq!(p.encode_header(&mut hdr, XID, 1).unwrap(), hdr.len());
        let inline: Vec<u8> = p
            .inline_ranges()
            .flat_map(|r| reply[r.start as usize..r.end as usize].to_vec())
            .collect();
        assert!(hdr.len() + inline.len() <= inline_max as usize);
        // Decode what the client gets and rebuild the Reply from it.
        let mut send = hdr.clone();
        send.extend(words(&[XID, 1]));
        let h = v1::decode(&send, &Limits::DEFAULT).unwrap();
        let (nomsg, got) = match h.body {
            v1::Body::Msg(g) => (false, g),
            v1::Body::Nomsg(g) => (true, g),
            v1::Body::Error(_) => panic!(),
        };
        assert_eq!(nomsg, p.nomsg());
        // An offered Reply chunk comes back, unused when the Reply is
        // inline; left out only when its echo would not fit the Send.
        let echo = 8 + 16 * rsegs.len();
        if with_r && got.reply.is_none() {
            assert!(!nomsg);
            assert!(hdr.len() + inline.len() + echo > inline_max as usize);
        } else {
            assert_eq!(got.reply.is_some(), with_r, "round {round}");
        }
        if !nomsg {
            assert_eq!(got.reply.map_or(0, |r| r.total_length()), 0);
        }
        let read = |c: &rpcrdma_proto::chunk::WriteChunk<'_>| -> Vec<u8> {
            c.segments()
                .flat_map(|sg| (0..u64::from(sg.length)).map(move |i| (sg.handle, sg.offset + i)))
                .map(|k| mem[&k])
                .collect()
        };
        let body: Vec<u8> = if nomsg {
            read(&got.reply.unwrap())
        } else {
            inline
        };
        // Rebuild as the client does: Write chunk i holds the i-th
        // payload, whose place it knows; the body has the rest, without
        // the payloads' pads.
        let mut rebuilt: Vec<u8> = Vec::new();
        let (mut b, mut r) = (0usize, 0usize);
        let mut placed = 0u32;
        for (i, chunk) in got.writes.chunks().enumerate() {
            let data = read(&chunk);
            if data.is_empty() {
                continue;
            }
            let (off, plen) = payloads[i];
            assert_eq!(data.len(), plen as usize, "round {round}");
            assert_eq!(&data[..], &reply[off as usize..(off + plen) as usize]);
            let gap = off as usize - r;
            rebuilt.extend(&body[b..b + gap]);
            b += gap;
            let pad_end = ((off + plen + 3) & !3).min(len) as usize;
            rebuilt.extend(&reply[off as usize..pad_end]);
            r = pad_end;
            placed += plen;
        }
        rebuilt.extend(&body[b..]);
        assert_eq!(placed, p.payload_len(), "round {round}");
        assert!(p.write_chunks_used() <= wsegs.len().min(payloads.len()));
        multi += u32::from(p.write_chunks_used() >= 2);
        assert_eq!(rebuilt, reply, "round {round}");
    }
    assert!(multi > 100, "only {multi} Replies with two payloads placed");
}

#[test]
fn remote_invalidation_needs_the_flag_and_one_handle() {
    let one = msg(0, &[(8, A)], &[&[A]], Some(&[A]), &rpc(0, 8));
    assert_eq!(invalidate_handle(&lists(&one), true), Some(0xa));
    assert_eq!(invalidate_handle(&lists(&one), false), None);
    let two = msg(0, &[(8, A)], &[&[s(0xb, 1, 0)]], None, &rpc(0, 8));
    assert_eq!(invalidate_handle(&lists(&two), true), None);
    let none = msg(0, &[], &[], None, &rpc(0, 8));
    assert_eq!(invalidate_handle(&lists(&none), true), None);
    let zero = msg(0, &[], &[], Some(&[s(0, 8, 0)]), &rpc(0, 8));
    assert_eq!(invalidate_handle(&lists(&zero), true), None);
    // A Long Call's Position Zero chunk counts too.
    let long = msg(1, &[(0, A)], &[], Some(&[A]), &[]);
    assert_eq!(invalidate_handle(&lists(&long), true), Some(0xa));
    let long = msg(1, &[(0, s(0xe, 8, 0))], &[], Some(&[A]), &[]);
    assert_eq!(invalidate_handle(&lists(&long), true), None);
}

/// RFC 8797 §5.1: "When either peer on a connection clears this flag, the
/// responder MUST use only RDMA Send when transmitting RPC Replies." The
/// server's own flag is the one it advertised, set only when its device
/// can post Send With Invalidate.
#[test]
fn remote_invalidation_needs_both_peers_flags() {
    assert!(remote_invalidation(true, true));
    assert!(!remote_invalidation(true, false));
    assert!(!remote_invalidation(false, true));
    assert!(!remote_invalidation(false, false));
    let one = msg(0, &[(8, A)], &[&[A]], Some(&[A]), &rpc(0, 8));
    let l = lists(&one);
    assert_eq!(
        invalidate_handle(&l, remote_invalidation(true, true)),
        Some(0xa)
    );
    assert_eq!(
        invalidate_handle(&l, remote_invalidation(true, false)),
        None
    );
    assert_eq!(
        invalidate_handle(&l, remote_invalidation(false, true)),
        None
    );
}

#[test]
fn errors_encode_as_rpcrdma_ko_sends_them() {
    let mut buf = [0u8; 28];
    let n = encode_error(
        &mut buf,
        XID,
        2,
        32,
        ErrorBody::V1(RdmaError::Vers { low: 1, high: 1 }),
    )
    .unwrap();
    assert_eq!(&buf[..n], &words(&[XID, 2, 32, 4, 1, 1, 1])[..]);
    let n = encode_error(&mut buf, XID, 1, 32, ErrorBody::V1(RdmaError::Chunk)).unwrap();
    assert_eq!(&buf[..n], &words(&[XID, 1, 32, 4, 2])[..]);
    assert!(encode_error(&mut buf[..19], XID, 1, 32, ErrorBody::V1(RdmaError::Chunk)).is_err());
}

#[test]
fn every_prefix_and_corruption_of_a_call_is_handled() {
    let inline = rpc(0, 64);
    let buf = msg(
        0,
        &[(40, s(1, 13, 0x100)), (56, s(2, 8, 0x200))],
        &[&[s(3, 1000, 0)]],
        Some(&[s(4, 500, 0)]),
        &inline,
    );
    let mut rng = Rng(77);
    for n in 0..=buf.len() {
        let _ = exercise(&buf[..n]);
    }
    for _ in 0..5000 {
        let mut b = buf.clone();
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(b.len() as u64) as usize;
            b[i] = rng.next() as u8;
        }
        let _ = exercise(&b);
    }
}

/// What the fuzz target does.
fn exercise(buf: &[u8]) -> Option<()> {
    let Ok(Received::Call(c)) = receive(buf, &Limits::DEFAULT) else {
        return None;
    };
    if let Ok(a) = assemble(&c, 1 << 20) {
        assert_eq!(a.has_reads(), c.has_read_data());
        let total = a.total_len();
        let mut at = 0;
        for p in a {
            assert_eq!(p.dest(), at);
            at += p.len();
        }
        assert_eq!(at, total);
    }
    let p = plan_reply(&c.chunks, shape(4000, Some((100, 2000))), 1024).ok()?;
    let mut hdr = [0u8; 4096];
    p.encode_header(&mut hdr, c.xid, 1).ok()?;
    Some(())
}

// ---------------------------------------------------------------------
// Version 2 (draft-cel-nfsv4-rpcrdma-version-two-02, sections 4 to 6)
// ---------------------------------------------------------------------

/// [`msg`] in version 2: `rdma_direction` and `rdma_inv_handle` after
/// the fixed words.
fn msg2(
    proc: u32,
    dir: u32,
    inv: u32,
    reads: &[(u32, Segment)],
    writes: &[&[Segment]],
    reply: Option<&[Segment]>,
    inline: &[u8],
) -> Vec<u8> {
    let v1 = msg(proc, reads, writes, reply, inline);
    let mut b = words(&[XID, 2, CR, proc, dir, inv]);
    b.extend_from_slice(&v1[16..]);
    b
}

fn refused(buf: &[u8]) -> (ErrorBody, Cause) {
    match receive(buf, &Limits::DEFAULT) {
        Err(Refusal::Error {
            xid: XID,
            vers,
            error,
            cause,
        }) => {
            // "copies the values of the rdma_xid and rdma_vers fields"
            assert_eq!(vers, 2);
            (error, cause)
        }
        other => panic!("{other:?}"),
    }
}

/// Responders reply in the Call's version: a version 2 Call is accepted
/// and remembers its version and `rdma_inv_handle`.
#[test]
fn v2_calls_are_accepted() {
    let w = s(0xa, 4096, 0x1000);
    let buf = msg2(0, 0, 0xa, &[], &[&[w]], None, &rpc(0, 40));
    let c = call(&buf);
    assert_eq!((c.vers, c.inv_handle, c.inline.len()), (2, 0xa, 40));
    // Version 1 Calls carry neither.
    let buf = msg(0, &[], &[&[w]], None, &rpc(0, 40));
    let c = call(&buf);
    assert_eq!((c.vers, c.inv_handle), (1, 0));
    // A Long Call: RDMA2_NOMSG with a Position Zero Read chunk.
    let buf = msg2(1, 0, 0, &[(0, s(0xb, 2000, 0))], &[], None, &[]);
    let c = call(&buf);
    assert!(c.nomsg && c.vers == 2);
}

/// "Remote Invalidation": the Reply invalidates the Call's
/// `rdma_inv_handle` and no other handle; none when it is zero, even
/// where version 1 would pick the sole handle.
#[test]
fn v2_send_with_invalidate_uses_only_inv_handle() {
    let (a, b) = (s(0xa, 4096, 0x1000), s(0xb, 4096, 0x2000));
    let buf = msg2(0, 0, 0xb, &[], &[&[a]], Some(&[b]), &rpc(0, 40));
    let c = call(&buf);
    assert_eq!(call_invalidate_handle(&c, true), Some(0xb));
    assert_eq!(call_invalidate_handle(&c, false), None);
    let buf = msg2(0, 0, 0, &[], &[&[a]], None, &rpc(0, 40));
    let c = call(&buf);
    assert_eq!(call_invalidate_handle(&c, true), None);
    assert_eq!(invalidate_handle(&c.chunks, true), Some(0xa));
    // "MUST NOT set the value ... to any other value": refused.
    let (error, cause) = refused(&msg2(0, 0, 0xc, &[], &[&[a]], None, &rpc(0, 40)));
    assert_eq!(cause, Cause::ForeignInvHandle);
    assert_eq!(error, ErrorBody::V2(v2::RdmaError::BadXdr));
    // Version 1 keeps the sole handle rule.
    let buf = msg(0, &[], &[&[a]], None, &rpc(0, 40));
    let c = call(&buf);
    assert_eq!(call_invalidate_handle(&c, true), Some(0xa));
}

/// The Reply header: version 2, RDMA2_MSG or RDMA2_NOMSG, direction
/// REPLY, the Call's `rdma_inv_handle` echoed, two words longer than
/// version 1's, and the inline room shrinks by as much.
#[test]
fn v2_replies_carry_direction_and_inv_handle() {
    let r = s(0x77, 4096, 0x4000);
    let buf = msg2(0, 0, 0x77, &[], &[], Some(&[r]), &rpc(0, 8));
    let c = call(&buf);
    let p = plan_call_reply(&c, shape(968, None), 1024).unwrap();
    assert!(!p.nomsg());
    assert_eq!(p.header_len(), 56);
    let mut hdr = [0u8; 64];
    let n = p.encode_header(&mut hdr, XID, 9).unwrap();
    assert_eq!(n, 56);
    assert_eq!(
        &hdr[..n],
        &words(&[XID, 2, 9, 0, 1, 0x77, 0, 0, 1, 1, 0x77, 0, 0, 0x4000])[..]
    );
    // Decodes as a valid version 2 Reply.
    let mut reply = hdr[..n].to_vec();
    reply.extend(rpc(1, 968));
    let h = v2::decode(&reply, &Limits::DEFAULT).unwrap();
    assert!(matches!(h.body, v2::Body::Msg(c) if c.inv_handle == 0x77));
    // One byte more goes by Reply chunk, as RDMA2_NOMSG.
    let p = plan_call_reply(&c, shape(969, None), 1024).unwrap();
    assert!(p.nomsg());
    let n = p.encode_header(&mut hdr, XID, 9).unwrap();
    assert_eq!(
        &hdr[..n],
        &words(&[XID, 2, 9, 1, 1, 0x77, 0, 0, 1, 1, 0x77, 969, 0, 0x4000])[..]
    );
    // The same Call in version 1 fits 8 bytes more inline.
    let buf = msg(0, &[], &[], Some(&[r]), &rpc(0, 8));
    let c = call(&buf);
    assert!(!plan_call_reply(&c, shape(976, None), 1024).unwrap().nomsg());
}

/// "Transport Errors": RDMA2_ERR_INVAL_PROC for an unknown `rdma_proc`,
/// RDMA2_ERR_BAD_XDR for a header that does not parse, both in version
/// 2's RDMA2_ERROR; an RDMA2_ERROR received is never answered.
#[test]
fn v2_header_errors() {
    let (error, cause) = refused(&words(&[XID, 2, CR, 7, 0, 0, 0, 0, 0]));
    assert_eq!(error, ErrorBody::V2(v2::RdmaError::InvalProc));
    assert_eq!(cause, Cause::Header(DecodeError::UnknownProc { proc: 7 }));
    // A Write list discriminator that is not a boolean.
    let (error, _) = refused(&words(&[XID, 2, CR, 0, 0, 0, 0, 5, 0, 0]));
    assert_eq!(error, ErrorBody::V2(v2::RdmaError::BadXdr));
    // `rdma_direction` neither CALL nor REPLY.
    let mut bad = msg2(0, 0, 0, &[], &[], None, &rpc(0, 40));
    bad[16..20].copy_from_slice(&7u32.to_be_bytes());
    assert_eq!(refused(&bad).0, ErrorBody::V2(v2::RdmaError::BadXdr));
    // CALL direction, but the RPC message is a REPLY.
    let (error, cause) = refused(&msg2(0, 0, 0, &[], &[], None, &rpc(1, 40)));
    assert_eq!(error, ErrorBody::V2(v2::RdmaError::BadXdr));
    assert_eq!(cause, Cause::Header(DecodeError::DirectionMismatch));
    // RDMA2_NOMSG without a chunk.
    assert_eq!(
        refused(&msg2(1, 0, 0, &[], &[], None, &[])).0,
        ErrorBody::V2(v2::RdmaError::BadXdr)
    );
    // An RDMA2_ERROR is dropped.
    assert_eq!(
        dropped(&words(&[XID, 2, CR, 4, 2, 0, 0])),
        DropReason::Error
    );
    // A REPLY-direction header that does not parse: never answered.
    let mut bad = msg2(0, 1, 0, &[], &[], None, &rpc(0, 40));
    bad.truncate(24);
    bad.resize(28, 0);
    assert!(matches!(dropped(&bad), DropReason::BadReply(_)));
}

/// "Optional Features": an RDMA2_OPTIONAL of an unknown `rdma_opttype`
/// (we know none) is answered RDMA2_ERR_INVAL_OPTION; one in the REPLY
/// direction is dropped, as every Reply.
#[test]
fn v2_unknown_options_get_inval_option() {
    let opt = words(&[XID, 2, CR, 5, 0, 99, 4, 0xdead_beef]);
    let (error, cause) = refused(&opt);
    assert_eq!(error, ErrorBody::V2(v2::RdmaError::InvalOption));
    assert_eq!(cause, Cause::UnknownOption { opttype: 99 });
    let mut buf = [0u8; 32];
    let n = encode_error(&mut buf, XID, 2, CR, error).unwrap();
    assert_eq!(&buf[..n], &words(&[XID, 2, CR, 4, 5])[..]);
    let back = words(&[XID, 2, CR, 5, 1, 99, 0, 0]);
    assert_eq!(dropped(&back), DropReason::BackwardOption { opttype: 99 });
    // An RDMA2_OPTIONAL whose optinfo runs past the message: BAD_XDR.
    let (error, _) = refused(&words(&[XID, 2, CR, 5, 0, 99, 64, 0]));
    assert_eq!(error, ErrorBody::V2(v2::RdmaError::BadXdr));
}

/// RDMA2_ERR_CANT_REPLY: after processing, with the first segment too
/// short (counted from 1 over the Write list, then the Reply chunk) and
/// the bytes it needs; zeros when no segment can be named. The same
/// shortfall in version 1 stays ERR_CHUNK.
#[test]
fn v2_cant_reply_names_the_short_segment() {
    let (w1, w2) = (s(0x51, 1000, 0x1_0000), s(0x52, 500, 0x2_0000));
    let r = s(0x77, 2048, 0x4000);
    let buf = msg2(0, 0, 0, &[], &[&[w1, w2]], Some(&[r]), &rpc(0, 40));
    let c = call(&buf);
    let cause = plan_call_reply(&c, shape(3000, Some((100, 2000))), 1024).unwrap_err();
    assert_eq!(
        cause,
        Cause::PayloadTooLong {
            segment: 2,
            needed: 1000
        }
    );
    let want = v2::RdmaError::CantReply {
        processed: true,
        segment_index: 2,
        length_needed: 1000,
    };
    assert_eq!(cause.answer(2), ErrorBody::V2(want));
    assert_eq!(cause.answer(1), ErrorBody::V1(RdmaError::Chunk));
    let mut buf = [0u8; 32];
    let n = encode_error(&mut buf, XID, 2, CR, cause.answer(2)).unwrap();
    assert_eq!(&buf[..n], &words(&[XID, 2, CR, 4, 3, 1, 2, 1000])[..]);
    // The Reply chunk's segment comes after both Write list segments.
    let cause = plan_call_reply(&c, shape(3000, None), 1024).unwrap_err();
    assert_eq!(
        cause,
        Cause::ReplyChunkTooSmall {
            segment: 3,
            needed: 3000
        }
    );
    // No Reply chunk at all: no segment to name.
    let buf = msg2(0, 0, 0, &[], &[], None, &rpc(0, 40));
    let c = call(&buf);
    let cause = plan_call_reply(&c, shape(3000, None), 1024).unwrap_err();
    assert_eq!(
        cause.answer(2),
        ErrorBody::V2(v2::RdmaError::CantReply {
            processed: true,
            segment_index: 0,
            length_needed: 0
        })
    );
}

/// A version 2 backward-direction Reply (RFC 8167 over version 2) is a
/// backchannel Reply, as in version 1.
#[test]
fn v2_backward_replies_reach_the_backchannel() {
    let buf = msg2(0, 1, 0, &[], &[], None, &rpc(1, 24));
    assert!(matches!(
        receive(&buf, &Limits::DEFAULT),
        Ok(Received::BackchannelReply { xid: XID, .. })
    ));
    // RDMA2_NOMSG in the REPLY direction has chunks: dropped.
    let buf = msg2(1, 1, 0, &[(0, s(0xb, 100, 0))], &[], None, &[]);
    assert_eq!(dropped(&buf), DropReason::BackwardWithChunks);
}

/// A version 2 backward Reply whose RPC XID is not its `rdma_xid`
/// (hostile case v2-bc-reply-xid): dropped, never answered, since an
/// RDMA2_ERROR with that XID would be looked up among the client's own
/// Calls.
#[test]
fn v2_backward_reply_with_wrong_xid_is_dropped() {
    let mut buf = msg2(0, 1, 0, &[], &[], None, &rpc(1, 24));
    // The RPC message starts after nine header words.
    buf[36..40].copy_from_slice(&(XID ^ 0x00ff_0000).to_be_bytes());
    assert!(matches!(dropped(&buf), DropReason::BadReply(_)));
}
