// SPDX-License-Identifier: GPL-2.0

//! `xpo_recvfrom`: the next received message of a connection, decoded by
//! the protocol core; a Call goes to nfsd, with its Read chunks pulled
//! first.
//!
//! An inline Call is handed to nfsd in place: `rq_arg` points into the
//! Receive buffer, which the request holds until `xpo_release_ctxt`
//! reposts it. A Call with Read chunks is assembled in the request's own
//! pages: RDMA Reads put each chunk where the protocol core places it, and
//! the inline parts are copied around them once the Reads are done.

use kernel::prelude::*;
use kernel::sync::atomic::Relaxed;

use super::conn::SvcConn;
use super::{backchannel, io, send};
use crate::proto::limits::Limits;
use crate::proto::responder::{self, Call, Piece, Received, Refusal};
use crate::proto::v1::RdmaError;
use crate::rdma::{PageSeg, RwCtx, RwOp};
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
        if next.is_none() {
            conn.xprt().clear(XptFlag::Data);
        }
        next
    };
    // Another thread may take the next message now.
    conn.xprt().received();
    let Some(idx) = next else {
        return 0;
    };
    let Some(ctx) = conn.ep().and_then(|ep| ep.recvs.get(idx as usize)) else {
        return 0;
    };
    let len = (ctx.len.load(Relaxed) as usize).min(ctx.buf.len());
    ctx.buf.sync_for_cpu(len);
    let msg = &ctx.buf.as_slice()[..len];
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
    rdebug!(
        "server: Call xid {:#x}, {} inline bytes, {} Read segments{}\n",
        call.xid,
        call.inline.len(),
        call.chunks.reads.segment_count(),
        if call.nomsg { " (Long Call)" } else { "" }
    );
    let arg_len = if call.chunks.reads.is_empty() {
        // SAFETY: The Receive buffer is the request's until its context,
        // set below, is released: only `release_ctxt` reposts it.
        unsafe { rqst.set_arg_inline(call.inline.as_ptr(), call.inline.len()) };
        call.inline.len()
    } else {
        match pull(conn, rqst, &call) {
            Ok(len) => len,
            Err(e) => {
                if let Some(error) = e {
                    send::error(conn, call.xid, crate::proto::v1::VERSION, error);
                }
                conn.repost(idx);
                return 0;
            }
        }
    };
    conn.count(|s| &s.calls, 1);
    rqst.set_ctxt(ctxt_of(idx));
    rqst.received_on(conn.xprt());
    i32::try_from(arg_len).unwrap_or(0)
}

/// Pulls the Read chunks of `call` into the request's pages and copies
/// the inline parts around them; the Call's length. An error to answer
/// with, if any, when the Call cannot be assembled; the connection is
/// closed when a Read failed.
fn pull(
    conn: &SvcConn,
    rqst: &mut SvcRqst<'_>,
    call: &Call<'_>,
) -> Result<usize, Option<RdmaError>> {
    let room = u32::try_from(rqst.arg_room()).unwrap_or(u32::MAX);
    let asm = responder::assemble(call, room).map_err(Some)?;
    let total = asm.total_len() as usize;
    let id = conn.id().ok_or(None)?;
    let mut segs = KVec::<PageSeg>::new();
    let mut ctxs = KVec::<RwCtx>::new();
    let mut segments = 0u64;
    let mut bytes = 0u64;
    for piece in asm.clone() {
        if let Piece::Read {
            handle,
            length,
            offset,
            dest,
        } = piece
        {
            segs.clear();
            rqst.arg_page_segs(&mut segs, dest as usize, length as usize)
                .map_err(|_| Some(RdmaError::Chunk))?;
            // SAFETY: The request's pages stay allocated, and are not
            // touched by the CPU, until `ctxs` is dropped at the end of
            // this function (after `io::run` waited for the Reads); the
            // QP lives as long as the connection.
            let ctx = unsafe { RwCtx::new(id, &segs, offset, handle, RwOp::Read) };
            let ctx = ctx.map_err(|e| {
                rwarn!("server: cannot set up an RDMA Read: {:?}\n", e);
                None
            })?;
            ctxs.push(ctx, GFP_KERNEL).map_err(|_| None)?;
            segments += 1;
            bytes += u64::from(length);
        }
    }
    // A chunk needing more Send Queue room than the connection has is
    // refused; any other failure closed the connection.
    io::run(conn, &mut ctxs).map_err(|e| (e == E2BIG).then_some(RdmaError::Chunk))?;
    // Unmapping makes the Read data visible to the CPU.
    drop(ctxs);
    conn.count(|s| &s.read_segments, segments);
    conn.count(|s| &s.read_bytes, bytes);
    for piece in asm {
        let res = match piece {
            Piece::Inline { src, dest } => match call.inline.get(src) {
                Some(bytes) => rqst.arg_write(dest as usize, bytes),
                None => Err(EINVAL),
            },
            Piece::Zero { dest, len } => rqst.arg_zero(dest as usize, len as usize),
            Piece::Read { .. } => Ok(()),
        };
        res.map_err(|_| Some(RdmaError::Chunk))?;
    }
    rqst.set_arg_pages(total)
        .map_err(|_| Some(RdmaError::Chunk))?;
    Ok(total)
}
