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

use super::conn::{CallReads, RecvCtx, SvcConn};
use super::{backchannel, send};
use crate::proto::limits::Limits;
use crate::proto::responder::{self, Assembly, Call, Piece, Received, Refusal};
use crate::proto::v1::RdmaError;
use crate::rdma::{CmId, PageSeg, RwCtx, RwOp};
use crate::sunrpc::{Ctxt, SvcRqst, XptFlag};

/// Limits on what one Call may ask of us.
pub(super) const LIMITS: Limits = Limits::DEFAULT;

/// The request context for Receive buffer `idx`.
pub(super) fn ctxt_of(idx: u32) -> Option<Ctxt> {
    Ctxt::new(idx as usize + 1)
}

/// The Receive buffer of a request context.
pub(super) fn idx_of(ctxt: Ctxt) -> u32 {
    (ctxt.get() - 1) as u32
}

pub(super) fn recvfrom(conn: &SvcConn, rqst: &mut SvcRqst<'_>) -> i32 {
    rqst.reset_reply_pages();
    rqst.set_ctxt(None);
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
    let Some((idx, pulled)) = next else {
        return 0;
    };
    let Some(ctx) = conn.ep().and_then(|ep| ep.recvs.get(idx as usize)) else {
        return 0;
    };
    if pulled {
        return reads_done(conn, ctx, rqst, idx);
    }
    let msg = ctx.received();
    ctx.buf.sync_for_cpu(msg.len());
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
            conn.repost(idx);
            return 0;
        }
        Err(Refusal::Error {
            xid,
            vers,
            error,
            cause,
        }) => {
            rwarn!("server: refused a Call ({:?}), xid {:#x}\n", cause, xid);
            send::error(conn, xid, vers, error);
            conn.repost(idx);
            return 0;
        }
        Err(Refusal::Drop(why)) => {
            rdebug!("server: dropped a message ({:?})\n", why);
            conn.count(|s| &s.dropped, 1);
            conn.repost(idx);
            return 0;
        }
    };
    let Some(at) = call.locate(msg) else {
        // It was decoded from `msg`: cannot happen.
        conn.close();
        return 0;
    };
    // SAFETY: We hold the buffer: it came off the receive queue.
    unsafe { ctx.set_call(at) };
    // A Read list that moves no byte leaves the Call its inline part.
    if !call.has_read_data() {
        rdebug!(
            "server: Call xid {:#x}, {} inline bytes\n",
            call.xid,
            call.inline.len()
        );
        // SAFETY: The Receive buffer is the request's until its context,
        // set below, is released: only `release_ctxt` reposts it.
        unsafe { rqst.set_arg_inline(call.inline.as_ptr(), call.inline.len()) };
        handed_over(conn, rqst, idx, call.inline.len())
    } else {
        rdebug!(
            "server: Call xid {:#x}, {} inline bytes, {} Read segments{}\n",
            call.xid,
            call.inline.len(),
            call.chunks.reads.segment_count(),
            if call.nomsg { " (Long Call)" } else { "" }
        );
        if let Err(e) = pull(conn, ctx, rqst, &call) {
            if let Some(error) = e {
                send::error(conn, call.xid, crate::proto::v1::VERSION, error);
            }
            conn.repost(idx);
        }
        // The buffer comes back, its Reads done, to this or another thread.
        0
    }
}

/// The Reads of the Call in buffer `idx` are done: the Call goes to
/// nfsd, assembled in `rqst`.
fn reads_done(conn: &SvcConn, ctx: &RecvCtx, rqst: &mut SvcRqst<'_>, idx: u32) -> i32 {
    // SAFETY: We hold the buffer: it came off the receive queue.
    let Some(call) = (unsafe { ctx.call() }) else {
        conn.close();
        return 0;
    };
    match assemble(conn, ctx, rqst, &call) {
        Ok(len) => handed_over(conn, rqst, idx, len),
        Err(error) => {
            send::error(conn, call.xid, crate::proto::v1::VERSION, error);
            conn.repost(idx);
            0
        }
    }
}

/// The Call in buffer `idx`, `arg_len` bytes, goes to nfsd in `rqst`,
/// which holds the buffer until `xpo_release_ctxt`.
fn handed_over(conn: &SvcConn, rqst: &mut SvcRqst<'_>, idx: u32, arg_len: usize) -> i32 {
    conn.count(|s| &s.calls, 1);
    rqst.set_ctxt(ctxt_of(idx));
    rqst.received_on(conn.xprt());
    i32::try_from(arg_len).unwrap_or(0)
}

/// Posts RDMA Reads that pull the Read chunks of `call`, in `ctx`, into
/// pages taken off `rqst`, each chunk where the protocol core places it;
/// their completion queues the buffer again. An error to answer with, if
/// any, when they cannot be posted; the buffer is then still ours.
fn pull(
    conn: &SvcConn,
    ctx: &RecvCtx,
    rqst: &mut SvcRqst<'_>,
    call: &Call<'_>,
) -> Result<(), Option<RdmaError>> {
    let room = u32::try_from(rqst.arg_room()).unwrap_or(u32::MAX);
    let asm = responder::assemble(call, room).map_err(|cause| {
        rwarn!("server: refused a Call ({:?}), xid {:#x}\n", cause, call.xid);
        Some(RdmaError::from(cause))
    })?;
    let pages = (asm.total_len() as usize).div_ceil(PAGE_SIZE);
    let id = conn.id().ok_or(None)?;
    let wrs = {
        // SAFETY: We hold the buffer: it came off the receive queue. The
        // reference is gone before the post.
        let reads = unsafe { ctx.reads() };
        let res = prepare(id, rqst, reads, &asm, pages);
        if res.is_err() {
            reads.release();
        }
        res?
    };
    // A chunk needing more Send Queue room than the connection has is
    // refused; any other failure closes the connection.
    if let Err(e) = conn.get_wrs(wrs) {
        // SAFETY: As above; nothing was posted.
        let reads = unsafe { ctx.reads() };
        reads.release();
        if e == E2BIG {
            rwarn!(
                "server: refused a Call (its Reads need {} work requests, more than the Send Queue has), xid {:#x}\n",
                wrs,
                call.xid
            );
        }
        return Err((e == E2BIG).then_some(RdmaError::Chunk));
    }
    // SAFETY: We hold the buffer and give it up; no reference from
    // `reads` is held.
    if let Err(e) = unsafe { ctx.post_reads(wrs) } {
        rwarn!("server: cannot post RDMA Reads: {:?}\n", e);
        // Some may be posted: the connection releases them after its
        // drain; the Call is lost with it.
        conn.close();
    }
    Ok(())
}

/// Takes `pages` pages off `rqst` into `reads`, and sets up a Read into
/// them for each Read piece of `asm`; the Send Queue room they need.
fn prepare(
    id: &CmId<SvcConn>,
    rqst: &mut SvcRqst<'_>,
    reads: &mut CallReads,
    asm: &Assembly<'_>,
    pages: usize,
) -> Result<u32, Option<RdmaError>> {
    rqst.take_arg_pages(pages, &mut reads.pages)
        .map_err(|_| None)?;
    let mut segs = KVec::<PageSeg>::new();
    reads.segments = 0;
    reads.bytes = 0;
    for piece in asm.clone() {
        if let Piece::Read {
            handle,
            length,
            offset,
            dest,
        } = piece
        {
            segs.clear();
            reads
                .pages
                .segs(&mut segs, dest as usize, length as usize)
                .map_err(|e| {
                    rwarn!("server: refused a Call (a Read outside its pages: {:?})\n", e);
                    Some(RdmaError::Chunk)
                })?;
            // SAFETY: The pages stay in `reads`, untouched by the CPU,
            // until the contexts, declared before them, are dropped (after
            // the Reads completed, or the QP was drained); the QP lives as
            // long as the connection, which owns `reads`.
            let ctx =
                unsafe { RwCtx::new(&mut reads.spares, id, &segs, offset, handle, RwOp::Read) };
            let ctx = ctx.map_err(|e| {
                rwarn!("server: cannot set up an RDMA Read: {:?}\n", e);
                None
            })?;
            reads.ctxs.push(ctx, GFP_KERNEL).map_err(|_| None)?;
            reads.segments += 1;
            reads.bytes += u64::from(length);
        }
    }
    Ok(RwCtx::total_wrs(&reads.ctxs))
}

/// The Reads of `call`, in `ctx`, are done: their pages become `rqst`'s,
/// with the inline parts copied around the chunks. The Call's length.
fn assemble(
    conn: &SvcConn,
    ctx: &RecvCtx,
    rqst: &mut SvcRqst<'_>,
    call: &Call<'_>,
) -> Result<usize, RdmaError> {
    // SAFETY: We hold the buffer: it came off the queue its Reads'
    // completion put it on.
    let reads = unsafe { ctx.reads() };
    reads.unmap();
    conn.count(|s| &s.read_segments, reads.segments);
    conn.count(|s| &s.read_bytes, reads.bytes);
    let res = rqst.put_arg_pages(&mut reads.pages);
    reads.pages.release();
    res.map_err(|_| RdmaError::Chunk)?;
    let room = u32::try_from(rqst.arg_room()).unwrap_or(u32::MAX);
    // As when the Reads were posted: same Call, same room.
    let asm = responder::assemble(call, room).map_err(|cause| {
        rwarn!("server: refused a Call ({:?}), xid {:#x}\n", cause, call.xid);
        RdmaError::from(cause)
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
        res.map_err(|_| RdmaError::Chunk)?;
    }
    rqst.set_arg_pages(total).map_err(|_| RdmaError::Chunk)?;
    Ok(total)
}
