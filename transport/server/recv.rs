// SPDX-License-Identifier: GPL-2.0

//! `xpo_recvfrom`: the next received message of a connection, decoded by
//! the protocol core; a Call goes to nfsd, with its Read chunks pulled
//! first.
//!
//! An inline Call is handed to nfsd in place: `rq_arg` points into the
//! Receive buffer, which the request holds until `xpo_release_ctxt`
//! reposts it. A Call with Read chunks is assembled in pages taken off
//! the request: RDMA Reads put each chunk where the protocol core places
//! it, and the thread goes back to nfsd without waiting. The Reads'
//! completion queues the buffer again; the thread that takes it then swaps
//! the pages into its own request and copies the inline parts around the
//! chunks. As svcrdma does (`sc_read_complete_q`), so that a client
//! slow to answer Reads holds no nfsd thread.

use kernel::page::PAGE_SIZE;
use kernel::prelude::*;

use super::conn::SvcConn;
use super::{backchannel, send};
use crate::proto::error::DecodeError;
use crate::proto::limits::Limits;
use crate::proto::responder::{self, Call, Cause, DropReason, ErrorBody, Piece, Received, Refusal};
use crate::proto::{v1, v2};
use crate::rdma::{PostError, Recv, RecvBuf};
use crate::sunrpc::{trace, HeldBytes, SvcRqst, SvcStat, XptFlag};

/// Limits on what one Call may ask of us.
pub(super) const LIMITS: Limits = Limits::DEFAULT;

/// A Receive buffer of a connection.
type Buf<'a> = RecvBuf<'a, SvcConn>;

pub(super) fn recvfrom(conn: &SvcConn, rqst: &mut SvcRqst<'_>) -> i32 {
    rqst.reset_reply_pages();
    let next = {
        let mut ready = conn.ready.lock();
        let next = ready.pop();
        // Cleared as the last buffer is taken, not when a later look
        // finds none: with XPT_DATA still set, `received` below would
        // wake another nfsd thread for nothing, once per Call at low
        // load, and on a busy CPU it runs while this one serves the Call.
        // A buffer queued after this sets it again, under this lock.
        if ready.is_empty() {
            conn.xprt().clear(XptFlag::Data);
        }
        next
    };
    // Another thread may take the next message now.
    conn.xprt().received();
    let Some((parked, pulled)) = next else {
        return 0;
    };
    let Some(mut buf) = conn.ep().and_then(|ep| ep.recv(parked)) else {
        return 0;
    };
    if pulled {
        return reads_done(conn, buf, rqst);
    }
    // As svcrdma: every message taken here, before it is decoded.
    SvcStat::RECV.inc();
    let msg = buf.bytes();
    let hdr = || trace_hdr(conn, &buf, msg);
    let call = match responder::receive(msg, &LIMITS) {
        Ok(Received::Call(call)) => call,
        Ok(Received::BackchannelReply {
            xid,
            credits,
            payload,
        }) => {
            if backchannel::reply(conn, xid, credits, payload) {
                conn.count(|s| &s.bc_replies, 1);
            } else {
                // No backchannel, or no backward Call with this XID.
                rdebug!("server: dropped a backchannel reply, xid {:#x}\n", xid);
                conn.count(|s| &s.dropped, 1);
            }
            conn.repost(buf);
            return 0;
        }
        Err(Refusal::Error {
            xid,
            vers,
            error,
            cause,
        }) => {
            let why = match cause {
                Cause::Header(DecodeError::BadVersion { .. }) => trace::BadReq::BadVers,
                Cause::Header(DecodeError::UnknownProc { .. }) => trace::BadReq::BadProc,
                _ => trace::BadReq::Parse,
            };
            trace::svcrdma_decode_err(why, hdr);
            rwarn!("server: refused a Call ({:?}), xid {:#x}\n", cause, xid);
            send::error(conn, xid, vers, error);
            conn.repost(buf);
            return 0;
        }
        Err(Refusal::Drop(why)) => {
            if why == DropReason::Short {
                trace::svcrdma_decode_short_err(hdr, msg.len());
            } else {
                trace::svcrdma_decode_err(trace::BadReq::Drop, hdr);
            }
            rdebug!("server: dropped a message ({:?})\n", why);
            conn.count(|s| &s.dropped, 1);
            conn.repost(buf);
            return 0;
        }
    };
    let Some(at) = call.locate(msg) else {
        // It was decoded from `msg`: cannot happen.
        conn.close();
        return 0;
    };
    if call.vers == v2::VERSION {
        conn.count(|s| &s.v2_calls, 1);
    }
    let xid = call.xid;
    let inline = call.inline.len();
    let nomsg = call.nomsg;
    let reads = call.chunks.reads.segment_count();
    let read_data = call.has_read_data();
    let inline_at = offset_in(msg, call.inline);
    // The transport header's length: where the inline RPC message starts,
    // or all of a Long Call's message.
    let hdrlen = if nomsg { Some(msg.len()) } else { inline_at };
    trace::svcrdma_decode_segs(hdr, &call.chunks);
    trace::svcrdma_decode_rqst(hdr, hdrlen.unwrap_or(msg.len()));
    let state = buf.state();
    state.call = at;
    state.payloads = Default::default();
    // A Read list that moves no byte leaves the Call its inline part.
    if !read_data {
        rdebug!("server: Call xid {:#x}, {} inline bytes\n", xid, inline);
        // The request holds the buffer until `xpo_release_ctxt`; its Call
        // is read in place.
        let Some(at) = inline_at else {
            // Decoded from `msg`: cannot happen.
            conn.close();
            return 0;
        };
        if rqst.set_arg_held(buf, at..at + inline).is_err() {
            return 0;
        }
        return handed_over(conn, rqst, inline);
    }
    rdebug!(
        "server: Call xid {:#x}, {} inline bytes, {} Read segments{}\n",
        xid,
        inline,
        reads,
        if nomsg { " (Long Call)" } else { "" }
    );
    pull(conn, buf, rqst, xid)
}

/// The fixed words of the transport header in `msg` (0 where it is too
/// short), and where it was received, for the decode events.
fn trace_hdr(conn: &SvcConn, buf: &Buf<'_>, msg: &[u8]) -> trace::RdmaHdr {
    let word = |k: usize| {
        msg.get(k * 4..k * 4 + 4)
            .and_then(|w| <[u8; 4]>::try_from(w).ok())
            .map_or(0, u32::from_be_bytes)
    };
    trace::RdmaHdr {
        cq_id: conn.ep().map_or(0, |ep| ep.cq_ids().1),
        cid: buf.idx(),
        xid: word(0),
        vers: word(1),
        credits: word(2),
        proc_: word(3),
    }
}

/// Where `part` lies in `msg`: `None` if not within it. An empty part
/// (a Long Call has no inline part) lies anywhere.
fn offset_in(msg: &[u8], part: &[u8]) -> Option<usize> {
    if part.is_empty() {
        return Some(0);
    }
    let off = (part.as_ptr() as usize).checked_sub(msg.as_ptr() as usize)?;
    (off.checked_add(part.len())? <= msg.len()).then_some(off)
}

/// The Reads of the Call in `buf` are done: the Call goes to nfsd,
/// assembled in `rqst`.
fn reads_done(conn: &SvcConn, mut buf: Buf<'_>, rqst: &mut SvcRqst<'_>) -> i32 {
    match assemble(conn, &mut buf, rqst) {
        Ok(len) => {
            rqst.set_ctxt(buf.into_ctxt());
            handed_over(conn, rqst, len)
        }
        Err((xid, vers, error)) => {
            send::error(conn, xid, vers, error);
            conn.repost(buf);
            0
        }
    }
}

/// A Call of `arg_len` bytes went to nfsd in `rqst`, which holds its
/// buffer until `xpo_release_ctxt`.
fn handed_over(conn: &SvcConn, rqst: &mut SvcRqst<'_>, arg_len: usize) -> i32 {
    conn.count(|s| &s.calls, 1);
    conn.in_nfsd.add(1, kernel::sync::atomic::Relaxed);
    rqst.received_on(conn.xprt());
    i32::try_from(arg_len).unwrap_or(0)
}

/// The Call in `buf`, found again where `recvfrom` recorded it.
fn call_of<'a>(
    buf: &'a mut Recv<'_, SvcConn>,
) -> Option<(
    Call<'a>,
    &'a mut crate::rdma::RwSet,
    &'a mut super::conn::CallState,
)> {
    let (bytes, state, rw) = buf.parts();
    let call = state.call.call(bytes)?;
    Some((call, rw, state))
}

/// Posts RDMA Reads that pull the Read chunks of the Call in `buf` into
/// pages taken off `rqst`, each chunk where the protocol core places it;
/// their completion queues the buffer again. A Call that cannot be read
/// is refused with ERR_CHUNK when the chunks are at fault, or closes the
/// connection (RFC 8166 §4.5.4: a Responder that cannot answer closes).
fn pull(conn: &SvcConn, mut buf: Buf<'_>, rqst: &mut SvcRqst<'_>, xid: u32) -> i32 {
    let vers = buf.state().call.vers();
    let room = u32::try_from(rqst.arg_room()).unwrap_or(u32::MAX);
    let res = prepare(&mut buf, rqst, room);
    let wrs = match res {
        Ok(Some(wrs)) => wrs,
        // No Read moves a byte: the Call is all there.
        Ok(None) => return reads_done(conn, buf, rqst),
        // `prepare` released what it had set up.
        Err(e) => {
            match e {
                Some(error) => {
                    send::error(conn, xid, vers, error);
                    conn.repost(buf);
                }
                None => {
                    rwarn!(
                        "server: cannot read the chunks of Call xid {:#x}: closing\n",
                        xid
                    );
                    conn.close();
                }
            }
            return 0;
        }
    };
    // Send Queue room for the Reads: a list longer than the room goes in
    // parts, each in the same room.
    let room = wrs.min(conn.rw_room);
    let idx = buf.idx();
    if let Err(e) = conn.get_wrs(room, idx) {
        if let Some((_, rw, _)) = call_of(&mut buf) {
            rw.release();
        }
        if e == E2BIG {
            rwarn!(
                "server: a Read of Call xid {:#x} needs more than {} work requests\n",
                xid,
                conn.rw_room
            );
            let error = Cause::Header(DecodeError::TooManySegments);
            send::error(conn, xid, vers, error.answer(vers));
            conn.repost(buf);
        }
        return 0;
    }
    buf.state().read_wrs = room;
    buf.state().read_posted = trace::read_post_time();
    let Some(ep) = conn.ep() else {
        return 0;
    };
    // Traced before the post, as svcrdma does: the Reads' completion may
    // be traced as soon as they are posted.
    trace::svcrdma_post_read_chunk(|| ep.cq_ids().0, idx, wrs.min(room));
    if let Err(PostError::NotPosted(e, _) | PostError::Lost(e)) = ep.post_reads(buf, room) {
        trace::svcrdma_sq_post_err(|| conn.sq_view(idx as i32), e);
        rwarn!("server: cannot post RDMA Reads: {:?}\n", e);
        conn.put_wrs(room);
        // The Call is lost with the connection (RFC 8166 §4.5.4).
        conn.close();
    }
    // The buffer comes back, its Reads done, to this or another thread.
    0
}

/// Takes the pages the Call needs off `rqst` into `buf`'s Reads, and sets
/// up a Read into them for each Read piece of its assembly: the Send
/// Queue room they need, or `None` when no Read moves a byte. An error to
/// answer with, or `None` to close the connection; on an error nothing
/// stays set up.
fn prepare(
    buf: &mut Buf<'_>,
    rqst: &mut SvcRqst<'_>,
    room: u32,
) -> Result<Option<u32>, Option<ErrorBody>> {
    let (bytes, state, mut reads) = buf.reads().map_err(|_| None)?;
    let call = state.call.call(bytes).ok_or(None)?;
    let asm = responder::assemble(&call, room).map_err(|cause| {
        rwarn!(
            "server: refused a Call ({:?}), xid {:#x}\n",
            cause,
            call.xid
        );
        Some(cause.answer(call.vers))
    })?;
    if !asm.clone().any(|p| matches!(p, Piece::Read { .. })) {
        return Ok(None);
    }
    let pages = (asm.total_len() as usize).div_ceil(PAGE_SIZE);
    let res = (|| {
        rqst.take_arg_pages(pages, reads.pages())
            .map_err(|_| None)?;
        state.segments = 0;
        state.bytes = 0;
        for piece in asm {
            if let Piece::Read {
                handle,
                length,
                offset,
                dest,
            } = piece
            {
                reads
                    .add(dest as usize, length as usize, offset, handle)
                    .map_err(|e| {
                        rwarn!("server: cannot set up an RDMA Read: {:?}\n", e);
                        None
                    })?;
                state.segments += 1;
                state.bytes += u64::from(length);
            }
        }
        Ok(reads.room())
    })();
    if res.is_err() {
        reads.release();
    }
    res.map(Some)
}

/// The answer to a Call that cannot be put together: ERR_CHUNK, or
/// RDMA2_ERR_BAD_XDR in version 2.
fn unassembled(vers: u32) -> ErrorBody {
    Cause::Header(DecodeError::Truncated).answer(vers)
}

/// The Reads of the Call in `buf` are done: their pages become `rqst`'s,
/// with the inline parts copied around the chunks. The Call's length, or
/// its XID and the error to answer with.
fn assemble(
    conn: &SvcConn,
    buf: &mut Buf<'_>,
    rqst: &mut SvcRqst<'_>,
) -> Result<usize, (u32, u32, ErrorBody)> {
    let Some((call, rw, state)) = call_of(buf) else {
        conn.close();
        return Err((0, v1::VERSION, unassembled(v1::VERSION)));
    };
    let (xid, vers) = (call.xid, call.vers);
    let err = |_| (xid, vers, unassembled(vers));
    rw.unmap();
    conn.count(|s| &s.read_segments, state.segments);
    SvcStat::READ.add(state.segments);
    conn.count(|s| &s.read_bytes, state.bytes);
    let res = rqst.put_arg_pages(rw.pages());
    rw.pages().release();
    res.map_err(err)?;
    let room = u32::try_from(rqst.arg_room()).unwrap_or(u32::MAX);
    // As when the Reads were posted: same Call, same room.
    let asm = responder::assemble(&call, room).map_err(|cause| {
        rwarn!("server: refused a Call ({:?}), xid {:#x}\n", cause, xid);
        (xid, vers, cause.answer(vers))
    })?;
    let total = asm.total_len() as usize;
    for piece in asm {
        let res = match piece {
            Piece::Inline { src, dest } => match call.inline.get(src) {
                Some(bytes) => rqst.arg_write(dest as usize, bytes),
                None => Err(EINVAL),
            },
            Piece::Zero { dest, len } => rqst.arg_zero(dest as usize, len as usize),
            Piece::Read { .. } => Ok(()),
        };
        res.map_err(err)?;
    }
    rqst.set_arg_pages(total).map_err(err)?;
    Ok(total)
}
