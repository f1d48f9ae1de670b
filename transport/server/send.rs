// SPDX-License-Identifier: GPL-2.0

//! `xpo_sendto` and its helpers: a Reply planned by the protocol core,
//! its result payload RDMA-Written into the client's Write chunk, its
//! body sent inline or RDMA-Written into the Reply chunk, and the Send
//! that carries the transport header (With Invalidate when the client
//! allows it and one rkey covers the Call). Also the RDMA_ERROR answers.

use kernel::prelude::*;

use super::backchannel::BC_SLOTS;
use super::conn::SvcConn;
use crate::proto::backchannel;
use crate::proto::chunk::ChunkLists;
use crate::proto::header::MsgType;
use crate::proto::negotiate::Version;
use crate::proto::responder::{self, Cause, ErrorBody, ReplyPlan, ReplyShape};
use crate::proto::v2;
use crate::rdma::RecvBuf;
use crate::sunrpc::{trace, Ctxt, HeldBytes, SendRqst, SvcRqst, SvcStat, XptFlag};

pub(super) fn sendto(conn: &SvcConn, rqst: &mut SvcRqst<'_>) -> i32 {
    if conn.xprt().is_dead() {
        return ENOTCONN.to_errno();
    }
    let Some(ep) = conn.ep() else {
        return ENOTCONN.to_errno();
    };
    // The request's Receive buffer: the Call it holds says how the Reply
    // goes. Taken for the call and given back, so that the request still
    // holds it until `xpo_release_ctxt`.
    let Some(mut buf) = rqst.take_ctxt().and_then(|c| ep.recv_from(c)) else {
        return ENOTCONN.to_errno();
    };
    let res = answer(conn, rqst, &mut buf);
    rqst.set_ctxt(buf.into_ctxt());
    res
}

/// Plans and sends the Reply to the Call in `buf`.
fn answer(conn: &SvcConn, rqst: &mut SvcRqst<'_>, buf: &mut RecvBuf<'_, SvcConn>) -> i32 {
    let (bytes, state, _) = buf.parts();
    let Some(call) = state.call.call(bytes) else {
        conn.close();
        return ENOTCONN.to_errno();
    };
    let shape = ReplyShape {
        len: rqst.res().len(),
        payloads: state.payloads,
    };
    // Each Call is answered in its own version, within that version's
    // threshold.
    let version = Version::from_number(call.vers).unwrap_or(Version::V1);
    let inline_send = conn.inline.for_version(version).send;
    let plan = match responder::plan_call_reply(&call, shape, inline_send) {
        Ok(plan) => plan,
        Err(cause) => {
            if let Cause::PayloadTooLong { segment, needed } = cause {
                let chunk = || short_write_chunk(&call.chunks, segment, needed);
                trace::svcrdma_small_wrch_err(|| ep_cq(conn), chunk);
            }
            rwarn!(
                "server: cannot send a Reply of {} bytes ({:?}), xid {:#x}\n",
                shape.len,
                cause,
                call.xid
            );
            error(conn, call.xid, call.vers, cause.answer(call.vers));
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
    let invalidate = responder::call_invalidate_handle(&call, conn.remote_inv);
    match reply(conn, rqst, call.xid, &plan, invalidate) {
        Ok(()) => {
            if call.vers == v2::VERSION {
                conn.count(|s| &s.v2_replies, 1);
            }
            0
        }
        Err(e) => {
            trace::svcrdma_send_err(conn.xprt().remote(), call.xid, e);
            rwarn!(
                "server: cannot send a Reply ({:?}): closing the connection\n",
                e
            );
            conn.close();
            ENOTCONN.to_errno()
        }
    }
}

fn reply(
    conn: &SvcConn,
    rqst: &mut SvcRqst<'_>,
    xid: u32,
    plan: &ReplyPlan<'_>,
    invalidate: Option<u32>,
) -> Result {
    let mut slot = conn.get_send()?;
    // The inline parts first: taking the Reply's pages for the Writes
    // below empties `rq_res`.
    let buf = slot.buf()?.buf();
    let mut pos = plan
        .encode_header(buf, xid, conn.cfg.credits)
        .map_err(|_| EMSGSIZE)?;
    for r in plan.inline_ranges() {
        let n = (r.end - r.start) as usize;
        let dst = buf.get_mut(pos..pos + n).ok_or(EMSGSIZE)?;
        rqst.res().read(r.start, dst)?;
        pos += n;
    }
    // svcrdma's rdma_stat_write counts an rdma_rw context per segment
    // and per part of the Reply (head, pages, tail) it writes: count the
    // parts each of our Writes spans.
    let res = rqst.res();
    let (head_end, pages_end) = (
        res.head_len(),
        res.head_len().saturating_add(res.page_len()),
    );
    let mut nwrites = 0u64;
    // The payloads' Writes come first: those into Write chunks.
    let (payload, mut written, mut payload_writes) = (plan.payload_len(), 0u32, 0usize);
    let writes = plan.writes().map(|w| {
        let end = w.src.saturating_add(w.len);
        let inside = |b: u32| w.src < b && b < end;
        nwrites +=
            1 + u64::from(inside(head_end)) + u64::from(pages_end != head_end && inside(pages_end));
        if written < payload {
            written = written.saturating_add(w.len);
            payload_writes += 1;
        }
        (w.src, w.len, w.offset, w.handle)
    });
    let bytes = slot.buf()?.add_reply_writes(rqst, writes)?;
    SvcStat::WRITE.add(nwrites);
    let chunks = trace::Chunks {
        write: plan.write_chunks_used() > 0,
        reply: plan.nomsg(),
    };
    let sbuf = slot.buf()?;
    sbuf.state().chunks = chunks;
    trace::svcrdma_post_chunks(
        || ep_cq(conn),
        sbuf.idx(),
        chunks,
        || sbuf.writes().wrs_split(payload_writes),
    );
    trace::svcrdma_encode_wseg(|| ep_cq(conn), sbuf.idx(), || plan.echoed_write_segments());
    // The Send buffer is held meanwhile: see `SendSlot::reserve_writes`.
    slot.reserve_writes()?;
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

/// The connection's Send CQ, for the trace events.
/// The Write chunk that holds segment `segment` (counted from 1 over the
/// Write list) which would need `needed` bytes: the bytes the payload
/// overruns it by, and its segment count.
fn short_write_chunk(chunks: &ChunkLists<'_>, segment: u32, needed: u32) -> Option<(u32, u32)> {
    let mut first = 1u32;
    for chunk in chunks.writes.chunks() {
        let n = u32::try_from(chunk.len()).unwrap_or(u32::MAX);
        if segment < first.saturating_add(n) {
            let last = chunk.segments().last().map_or(0, |s| s.length);
            return Some((needed.saturating_sub(last), n));
        }
        first = first.saturating_add(n);
    }
    None
}

fn ep_cq(conn: &SvcConn) -> u32 {
    conn.ep().map_or(0, |ep| ep.cq_ids().0)
}

/// The version of backward Calls on `conn`: the client's, version 2
/// once it sent a version 2 Call (the draft makes the backward direction
/// part of version 2; a client's session, and so its callbacks, come
/// after its first Calls), else version 1.
fn bc_version(conn: &SvcConn) -> Version {
    if conn.stats.v2_calls.get() > 0 {
        Version::V2
    } else {
        Version::V1
    }
}

/// Largest backward Call the backchannel carries: one inline Send the
/// client can receive, less our header, in the connection's version.
pub(super) fn bc_max_payload(conn: &SvcConn) -> usize {
    let version = bc_version(conn);
    let inline = conn.inline.for_version(version).send;
    backchannel::server_max_payload(inline, version) as usize
}

/// Sends a backward Call (RFC 8167 §4): inline, with the backchannel's
/// own credits, no chunks, in the connection's version.
pub(super) fn backward_call(conn: &SvcConn, rqst: &SendRqst<'_>) -> Result {
    if conn.xprt().test(XptFlag::Dead) {
        return Err(ENOTCONN);
    }
    let res = (|| {
        let snd = rqst.snd_buf();
        let len = snd.len() as usize;
        let version = bc_version(conn);
        let inline = conn.inline.for_version(version).send;
        if len > backchannel::server_max_payload(inline, version) as usize {
            return Err(EMSGSIZE);
        }
        let mut slot = conn.get_send()?;
        let buf = slot.buf()?.buf();
        // `rq_xid` is as on the wire; the encoder takes host order.
        let xid = u32::from_be(rqst.xid());
        let hlen = backchannel::encode_backward(buf, xid, BC_SLOTS, MsgType::Call, version)
            .map_err(|_| EMSGSIZE)?;
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

/// Answers `xid` with RDMA_ERROR (RFC 8166 §4.5; RDMA2_ERROR for a
/// version 2 `err`), in header version `vers`.
pub(super) fn error(conn: &SvcConn, xid: u32, vers: u32, err: ErrorBody) {
    conn.count(|s| &s.errors_sent, 1);
    trace::svcrdma_err(err.is_vers(), xid);
    let Ok(mut slot) = conn.get_send() else {
        return;
    };
    let Ok(buf) = slot.buf() else {
        return;
    };
    let len = responder::encode_error(buf.buf(), xid, vers, conn.cfg.credits, err);
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
/// the one READ of a COMPOUND). An empty one (a READ at end of file) takes
/// its chunk too, which goes back unused, and the next one gets the next
/// chunk (RFC 8166 §3.4.6).
pub(super) fn result_payload(conn: &SvcConn, rqst: &mut SvcRqst<'_>, offset: u32, len: u32) -> i32 {
    let Some(ep) = conn.ep() else {
        return 0;
    };
    let Some(mut buf) = rqst.ctxt_mut().and_then(|c| ep.recv_in(c)) else {
        return 0;
    };
    if let Some(slot) = buf.state().payloads.iter_mut().find(|p| p.is_none()) {
        *slot = Some((offset, len));
    }
    0
}

/// `xpo_release_ctxt`: the request is done with its Receive buffer.
pub(super) fn release(conn: &SvcConn, ctxt: Ctxt) {
    conn.in_nfsd.fetch_sub(1, kernel::sync::atomic::Relaxed);
    if let Some(buf) = conn.ep().and_then(|ep| ep.recv_from(ctxt)) {
        conn.repost(buf);
    }
}
