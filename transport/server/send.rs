// SPDX-License-Identifier: GPL-2.0

//! `xpo_sendto` and its helpers: a Reply planned by the protocol core,
//! its result payload RDMA-Written into the client's Write chunk, its
//! body sent inline or RDMA-Written into the Reply chunk, and the Send
//! that carries the transport header (With Invalidate when the client
//! allows it and one rkey covers the Call). Also the RDMA_ERROR answers.

use kernel::prelude::*;
use kernel::sync::atomic::Relaxed;

use super::backchannel::BC_SLOTS;
use super::conn::{SvcConn, NO_PAYLOAD};
use super::recv::idx_of;
use crate::proto::chunk::ChunkSlices;
use crate::proto::header::FixedHeader;
use crate::proto::responder::{self, Call, ReplyPlan, ReplyShape};
use crate::proto::v1::{self, RdmaError};
use crate::rdma::{RwCtx, RwOp};
use crate::sunrpc::{Ctxt, SendRqst, SvcRqst, XptFlag};

pub(super) fn sendto(conn: &SvcConn, rqst: &mut SvcRqst<'_>) -> i32 {
    let Some(ctxt) = rqst.ctxt() else {
        return ENOTCONN.to_errno();
    };
    if conn.xprt().is_dead() {
        return ENOTCONN.to_errno();
    }
    let Some(ctx) = conn.ep().and_then(|ep| ep.recvs.get(idx_of(ctxt) as usize)) else {
        return ENOTCONN.to_errno();
    };
    // SAFETY: The request holds the buffer until `xpo_release_ctxt`.
    let Some(call) = (unsafe { ctx.call() }) else {
        conn.close();
        return ENOTCONN.to_errno();
    };
    let shape = ReplyShape {
        len: rqst.res().len(),
        payloads: ctx.payloads.each_ref().map(|p| {
            let word = p.load(Relaxed);
            (word != NO_PAYLOAD).then_some(((word >> 32) as u32, word as u32))
        }),
    };
    let inline_max = conn.inline_send;
    let plan = match responder::plan_reply(&call.chunks, shape, inline_max) {
        Ok(plan) => plan,
        Err(cause) => {
            rwarn!(
                "server: cannot send a Reply of {} bytes ({:?}), xid {:#x}\n",
                shape.len,
                cause,
                call.xid
            );
            error(conn, call.xid, v1::VERSION, cause.into());
            return 0;
        }
    };
    rdebug!(
        "server: Reply xid {:#x}, {} bytes, payload {}, {}\n",
        call.xid,
        shape.len,
        plan.payload_len(),
        if plan.nomsg() {
            "by Reply chunk"
        } else {
            "inline"
        }
    );
    match reply(conn, rqst, &call, &plan) {
        Ok(()) => 0,
        Err(e) => {
            rdebug!("server: cannot send a Reply: {:?}\n", e);
            conn.close();
            ENOTCONN.to_errno()
        }
    }
}

fn reply(conn: &SvcConn, rqst: &mut SvcRqst<'_>, call: &Call<'_>, plan: &ReplyPlan<'_>) -> Result {
    let id = conn.id().ok_or(ENOTCONN)?;
    let mut slot = conn.get_send()?;
    let mut bytes = 0u64;
    let io = slot.io();
    for w in plan.writes() {
        rqst.res().page_segs(&mut io.segs, w.src, w.len)?;
        // SAFETY: The Reply's pages go, with the context, into the Send
        // slot, where nothing writes or puts them until the Send after the
        // Writes completed (`ReplyIo`); on an early return the slot drops
        // the context, the pages still the request's. The QP lives as long
        // as the connection.
        let ctx = unsafe {
            RwCtx::new(
                &mut io.spares,
                id,
                &io.segs,
                w.offset,
                w.handle,
                RwOp::Write,
            )?
        };
        io.writes.push(ctx, GFP_KERNEL)?;
        bytes += u64::from(w.len);
    }
    // The Send buffer is held meanwhile: see `SendSlot::reserve_writes`.
    slot.reserve_writes()?;
    let buf = slot.buf().as_mut_slice();
    let mut pos = plan
        .encode_header(buf, call.xid, conn.cfg.credits)
        .map_err(|_| EMSGSIZE)?;
    for r in plan.inline_ranges() {
        let n = (r.end - r.start) as usize;
        let dst = buf.get_mut(pos..pos + n).ok_or(EMSGSIZE)?;
        rqst.res().read(r.start, dst)?;
        pos += n;
    }
    if !slot.io().writes.is_empty() {
        rqst.take_reply_pages(&mut slot.io().pages)?;
    }
    let invalidate = responder::invalidate_handle(&call.chunks, conn.remote_inv);
    slot.post(pos, invalidate)?;
    conn.count(|s| &s.replies, 1);
    conn.count(|s| &s.write_bytes, bytes);
    conn.count(|s| &s.write_chunks, plan.write_chunks_used() as u64);
    if plan.nomsg() {
        conn.count(|s| &s.reply_chunks, 1);
    }
    if invalidate.is_some() {
        conn.count(|s| &s.remote_inv, 1);
    }
    Ok(())
}

/// Header of a backward Call: xid, version, credits, RDMA_MSG, three
/// empty chunk lists.
const BC_HEADER: usize = 28;

/// Largest backward Call the backchannel carries: one inline Send the
/// client can receive, less our header.
pub(super) fn bc_max_payload(conn: &SvcConn) -> usize {
    (conn.inline_send as usize).saturating_sub(BC_HEADER)
}

/// Sends a backward Call (RFC 8167 §4): inline, with the backchannel's
/// own credits, no chunks.
pub(super) fn backward_call(conn: &SvcConn, rqst: &SendRqst<'_>) -> Result {
    if conn.xprt().test(XptFlag::Dead) {
        return Err(ENOTCONN);
    }
    let res = (|| {
        let snd = rqst.snd_buf();
        let len = snd.len() as usize;
        if len > bc_max_payload(conn) {
            return Err(EMSGSIZE);
        }
        let mut slot = conn.get_send()?;
        let buf = slot.buf().as_mut_slice();
        let fixed = FixedHeader {
            // `rq_xid` is as on the wire; the encoder takes host order.
            xid: u32::from_be(rqst.xid()),
            vers: v1::VERSION,
            credits: BC_SLOTS,
        };
        let hlen =
            v1::encode(buf, &fixed, &v1::Message::Msg(ChunkSlices::NONE)).map_err(|_| EMSGSIZE)?;
        let dst = buf.get_mut(hlen..hlen + len).ok_or(EMSGSIZE)?;
        snd.read(0, dst)?;
        rqst.stamp_xmit();
        slot.post(hlen + len, None)
    })();
    match res {
        Ok(()) => conn.count(|s| &s.bc_calls, 1),
        Err(_) => conn.count(|s| &s.bc_failures, 1),
    }
    res
}

/// Answers `xid` with RDMA_ERROR (RFC 8166 §4.5), in header version `vers`.
pub(super) fn error(conn: &SvcConn, xid: u32, vers: u32, err: RdmaError) {
    conn.count(|s| &s.errors_sent, 1);
    let Ok(mut slot) = conn.get_send() else {
        return;
    };
    let len = responder::encode_error(slot.buf().as_mut_slice(), xid, vers, conn.cfg.credits, err);
    let Ok(len) = len else {
        return;
    };
    if slot.post(len, None).is_err() {
        conn.close();
    }
}

/// `xpo_result_payload`: remember where nfsd put a data item that may go
/// in a Write chunk: the `i`-th one, empty or not, goes in Write chunk
/// `i`, if the client offered that many (the Linux client offers one, for
/// the one READ of a COMPOUND). An empty one (a READ at end of file)
/// takes its slot too, its word never [`NO_PAYLOAD`]: its chunk goes back
/// unused and the next one gets the next chunk (RFC 8166 §3.4.6).
pub(super) fn result_payload(conn: &SvcConn, rqst: &SvcRqst<'_>, offset: u32, len: u32) -> i32 {
    let Some(ctx) = rqst
        .ctxt()
        .and_then(|c| conn.ep().and_then(|ep| ep.recvs.get(idx_of(c) as usize)))
    else {
        return 0;
    };
    let word = (u64::from(offset) << 32) | u64::from(len);
    // The request's thread alone calls this, in Reply order.
    if let Some(slot) = ctx.payloads.iter().find(|p| p.load(Relaxed) == NO_PAYLOAD) {
        slot.store(word, Relaxed);
    }
    0
}

/// `xpo_release_ctxt`: the request is done with its Receive buffer.
pub(super) fn release(conn: &SvcConn, ctxt: Ctxt) {
    conn.repost(idx_of(ctxt));
}
