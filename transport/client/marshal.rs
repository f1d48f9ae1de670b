// SPDX-License-Identifier: GPL-2.0

//! `send_request`: marshalling a Call, the planner's decisions
//! ([`crate::proto::plan`]) applied to the request's `xdr_buf` (inline
//! copy behind the transport header, and chunks registered over the
//! request's own pages), and sending a backchannel Reply.

use core::ffi::c_int;

use kernel::prelude::*;
use kernel::sync::atomic::Relaxed;

use super::connection::MrPool;
use super::encode_call_header;
use super::request::{ReqState, MAX_RPC_MRS};
use super::send::SendError;
use super::state::RdmaXprt;
use crate::params;
use crate::proto::backchannel::{self, CLIENT_SLOTS};
use crate::proto::chunk::{ChunkSlices, ReadSegment, Segment};
use crate::proto::header::MsgType;
use crate::proto::negotiate::{self, Version};
use crate::proto::plan::{self, CallPlan};
use crate::proto::queue::SendSignals;
use crate::rdma::{FrwrList, HeldPages};
use crate::sunrpc::{trace, Buf, ForwardCall, PageList, SendRqst, XprtLocked};
use crate::sys;

/// `send_request` of a forward Call, whose slot state is `st`, with
/// `XPRT_LOCKED` held.
pub(super) fn send_request(
    rx: &RdmaXprt,
    call: &ForwardCall<'_, ReqState>,
    locked: &mut XprtLocked<'_>,
) -> c_int {
    let (rqst, st): (&SendRqst<'_>, &ReqState) = (call, call.state());
    // One look at the test faults for both of the sender's.
    let faults = params::injected(params::FAULT_SLOW_CALL | params::FAULT_QP_ERROR);
    if faults && params::injected(params::FAULT_SLOW_CALL) {
        rdebug!("fault injection: holding a Call back for 1 s\n");
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1000));
    }
    if !rx.connected() {
        return ENOTCONN.to_errno();
    }
    if !rqst.get_cong() {
        return EBADSLT.to_errno();
    }
    let Some(ep) = rx.ep(locked) else {
        return ENOTCONN.to_errno();
    };
    if faults && params::injected_once(params::FAULT_QP_ERROR) {
        if let Some(qp) = ep.id.as_ref().and_then(|id| id.qp()) {
            rdebug!("fault injection: QP to the error state\n");
            let _ = qp.force_error();
        }
    }
    let (xid, cookie, snd) = (rqst.xid(), rqst.connect_cookie(), rqst.snd_buf());
    // A retransmission on the same connection would upset the credit
    // accounting: reconnect instead, as rpcrdma.ko does.
    if cookie == locked.connect_cookie() {
        rx.close(locked);
        return ENOTCONN.to_errno();
    }
    let snd_len = snd.len() as usize;
    let Some(pool) = ep.pool() else {
        return ENOTCONN.to_errno();
    };
    // MRs from an earlier connection went with it.
    st.forget_mrs();
    let (rpc, call_buf, reply_buf) = rpc_shape(rqst);
    st.set_sent(u32::from_be(xid), rpc.reply_max);
    let send_as = rx.version_send(xid);
    let Some((version, inline)) = negotiate::call_thresholds(send_as, ep.inline(), ep.inline_v2())
    else {
        // The version 2 probe is out: try again shortly (sunrpc waits a
        // quarter second on ENOBUFS).
        return ENOBUFS.to_errno();
    };
    // The whole message, header included, within the version's threshold.
    let extra = if version == Version::V2 {
        negotiate::V2_EXTRA
    } else {
        0
    };
    let inline_send = inline.send.saturating_add(extra) as usize;
    let mut conn = plan::Connection::new(inline, &ep.limits);
    // A Call within the inline threshold always fits the Send buffer, so
    // the SGE limit only decides whether its pages are mapped or copied
    // (`plan::send_layout`), never whether it goes inline.
    conn.send_sges = u32::MAX;
    let mut chosen = plan::plan(&rpc, &conn);
    // Answered RDMA2_ERR_CANT_REPLY before: the most Reply room we have.
    if st.wants_reply_chunk() {
        chosen = plan::with_reply_chunk(chosen);
    }
    if rqst.prepare_rcv_pages().is_err() {
        return ENOBUFS.to_errno();
    }
    let regs = plan::registrations(&chosen, &call_buf, &reply_buf);
    let (mut nreads, mut nwrites, mut nreply) = (0usize, 0usize, 0usize);
    let mut offered = plan::Offered::default();
    let stats = &rx.stats;
    // The sender's, under XPRT_LOCKED.
    let Some(mut scratch) = ep.scratch.try_borrow_mut() else {
        rx.version_unsent(xid);
        return EIO.to_errno();
    };
    let CallScratch {
        pages: page_list,
        signals,
        held,
        reads,
        writes,
        reply,
        segs,
    } = &mut *scratch;
    // Left empty by the last Call (posted, released or dropped).
    while let Some(mr) = held.pop() {
        pool.release(mr, false);
    }
    let mut register = |buf: Buf, range: plan::Range, kind, out: &mut [Segment]| {
        let pages = call.pages(buf, range.offset, range.len, page_list)?;
        register_pages(rqst, pool, pages, kind, out, held)
    };
    let registered = (|| -> Result {
        if let Some((position, range)) = regs.read {
            let pos = trace::ChunkKind::Read { pos: position };
            let (n, _) = register(Buf::Call, range, pos, segs)?;
            for (r, seg) in reads.iter_mut().zip(segs.iter().take(n)) {
                *r = ReadSegment {
                    position,
                    segment: *seg,
                };
            }
            nreads = n;
            stats.read_chunk_count.add(n as u64);
        }
        if let Some((range, pad)) = regs.write {
            let write = trace::ChunkKind::Write;
            let (mut n, mut bytes) = register(Buf::Reply, range, write, writes)?;
            // Some servers want room for the XDR pad.
            if pad {
                let pad = ep.write_pad().ok_or(EIO)?;
                *writes.get_mut(n).ok_or(EMSGSIZE)? = Segment {
                    handle: pad.rkey,
                    length: pad.length,
                    offset: pad.iova,
                };
                trace::xprtrdma_chunk(trace::ChunkKind::WritePad, || rqst.trace_task(), &pad, true);
                n += 1;
                bytes = bytes.saturating_add(pad.length);
            }
            nwrites = n;
            // As in rpcrdma.ko: the bytes offered for the server to write,
            // Write and Reply chunks; Read chunks are not counted.
            stats.total_rdma_request.add(u64::from(bytes));
            offered.write_chunk = Some(bytes);
            stats.write_chunk_count.add(n as u64);
        }
        if let Some(range) = regs.reply {
            let (n, bytes) = register(Buf::Reply, range, trace::ChunkKind::Reply, reply)?;
            nreply = n;
            stats.total_rdma_request.add(u64::from(bytes));
            offered.reply_chunk = Some(bytes);
            stats.reply_chunk_count.add(n as u64);
        }
        Ok(())
    })();
    if let Err(err) = registered {
        while let Some(mr) = held.pop() {
            pool.release(mr, false);
        }
        if err == ENOBUFS {
            return ENOBUFS.to_errno();
        }
        rx.stats.failed_marshal_count.add(1);
        trace::xprtrdma_marshal_failed(|| rqst.trace_task(), EIO.to_errno());
        rx.version_unsent(xid);
        return EIO.to_errno();
    }
    st.set_offered(&offered);
    let write_list: [&[Segment]; 1] = [writes.get(..nwrites).unwrap_or(&[])];
    let chunks = ChunkSlices {
        reads: reads.get(..nreads).unwrap_or(&[]),
        writes: if nwrites > 0 { &write_list } else { &[] },
        reply: (nreply > 0).then(|| reply.get(..nreply).unwrap_or(&[])),
    };
    let nomsg = chosen.call == CallPlan::PositionZero;
    if nomsg {
        rx.stats.nomsg_call_count.add(1);
    }
    let mut layout = plan::send_layout(chosen.call, &call_buf, ep.limits.send_sges(), PAGE as u32);
    let mut mapped = layout.mapped.and_then(|r| {
        // The mapping holds the Call's pages until the Send completes.
        let pages = call.pages(Buf::Call, r.offset, r.len, page_list).ok()?;
        ep.map_pages(pages).ok()
    });
    if layout.mapped.is_some() && mapped.is_none() {
        // Could not map: copy it all, which always fits.
        layout = plan::send_layout(chosen.call, &call_buf, 0, PAGE as u32);
    }
    let gen = ep.shared().gen;
    st.gen.store(gen, Relaxed);
    // Only a Reply to a Call sent from the RPC's own pages must wait for
    // the Send to complete (see `receive`).
    let wait_seq = if mapped.is_some() {
        ep.next_send_seq()
    } else {
        0
    };
    st.send_seq.store(wait_seq, Relaxed);
    let credits = rx.cfg.slots;
    let mapped_len = layout.mapped.map_or(0, |r| r.len as usize);
    // The Reply may complete the RPC before `send` returns: the round
    // trip starts now.
    rqst.stamp_xmit();
    // rpcrdma.ko's chunk types (enum rpcrdma_chunktype) for the events.
    let rtype = match chosen.call {
        CallPlan::Inline if mapped_len > 0 => 2,
        CallPlan::Inline if snd.page_len() > 0 || snd.tail_len() > 0 => 1,
        CallPlan::Inline => 0,
        CallPlan::ReadChunk => 3,
        CallPlan::PositionZero => 4,
    };
    let wtype = match chosen.reply {
        plan::ReplyPlan::Inline => 0,
        plan::ReplyPlan::WriteChunk => 5,
        plan::ReplyPlan::ReplyChunk => 6,
    };
    // From here on a Reply may be for this Call: one that comes before the
    // post returned waits for us (`call_posted`).
    st.start_call(gen);
    // The MRs go, posted, straight to the request.
    let sent = st.post_with_mrs(|posted| {
        ep.send(
            pool,
            &mut *held,
            posted,
            signals,
            &mut mapped,
            rqst,
            |buf| {
                let hdr = encode_call_header(buf, xid, credits, nomsg, chunks, version)?;
                let xdr = [snd.head_len(), snd.page_len(), snd.tail_len()];
                trace::xprtrdma_marshal(|| rqst.trace_task(), hdr as u32, xdr, rtype, wtype);
                let mut at = hdr;
                // The mapped pages, if any, go between the two copied parts.
                let mut split = at;
                for (k, part) in layout.copy.iter().enumerate() {
                    if part.len != 0 {
                        let end = at.checked_add(part.len as usize)?;
                        snd.read(part.offset, buf.get_mut(at..end)?).ok()?;
                        at = end;
                    }
                    if k == 0 {
                        split = at;
                    }
                }
                if at.checked_add(mapped_len)? > inline_send {
                    return None;
                }
                Some((if mapped_len > 0 { split } else { at }, at))
            },
        )
    });
    let sent = match sent {
        Ok(()) => {
            // The chunk lists are in the Send buffer now.
            drop(scratch);
            // Only now may a Reply take the MRs: the LOCAL_INVs it posts
            // then go behind their REG_MRs.
            if let Some(early) = st.call_posted(gen) {
                ep.finish_early(rx, st, early);
            }
            Ok(())
        }
        Err(why) => {
            // Not posted: ours to release (a failed post dropped them),
            // and the pages' mapping, if the Send did not take it.
            while let Some(mr) = held.pop() {
                pool.release(mr, false);
            }
            drop(scratch);
            drop(mapped);
            if let Some(early) = st.call_unsent(gen) {
                ep.drop_early(early);
            }
            Err(why)
        }
    };
    if matches!(sent, Err(SendError::TooBig)) {
        trace::xprtrdma_marshal_failed(|| rqst.trace_task(), EMSGSIZE.to_errno());
    }
    match sent {
        Ok(()) => {}
        Err(SendError::NoBuffer) => {
            rx.stats.empty_sendctx_q.add(1);
            trace::xprtrdma_prepsend_failed(|| rqst.trace_task(), EAGAIN.to_errno());
            return ENOBUFS.to_errno();
        }
        Err(SendError::TooBig) => {
            rx.stats.failed_marshal_count.add(1);
            rwarn!("call of {} bytes exceeds the inline threshold\n", snd_len);
            rx.version_unsent(xid);
            return EMSGSIZE.to_errno();
        }
        Err(SendError::Post) => {
            rx.close(locked);
            return ENOTCONN.to_errno();
        }
    }
    // Everything past the head sent inline was pulled up into the Send
    // buffer, unless the pages were mapped.
    if chosen.call == CallPlan::Inline && mapped_len == 0 {
        rx.stats
            .pullup_copy_count
            .add(snd_len.saturating_sub(call_buf.head as usize) as u64);
    }
    rqst.add_bytes_sent(snd_len);
    // A Call without Reply throws off the credit accounting.
    if !rqst.reply_expected() {
        rx.close(locked);
        return ENOTCONN.to_errno();
    }
    0
}

/// Most segments in one chunk list of a Call.
const MAX_LIST_SEGS: usize = 16;

/// What a Call is marshalled in, kept with the connection (the sender's,
/// under `XPRT_LOCKED`): a Call writes only the segments it counts, so
/// none starts by zeroing a kilobyte of lists.
pub(super) struct CallScratch {
    /// The pages of the region being registered or mapped.
    pub(super) pages: PageList,
    /// Which Sends are signalled.
    pub(super) signals: SendSignals,
    /// The Call's MRs until they are posted, then empty: built in place,
    /// not moved on the way to the request.
    held: FrwrList<MAX_RPC_MRS>,
    reads: [ReadSegment; MAX_LIST_SEGS],
    writes: [Segment; MAX_LIST_SEGS],
    reply: [Segment; MAX_LIST_SEGS],
    /// One Read chunk's segments, before they get their position.
    segs: [Segment; MAX_LIST_SEGS],
}

impl CallScratch {
    pub(super) fn new(pages: PageList) -> Self {
        Self {
            pages,
            signals: SendSignals::new(1, 1),
            held: FrwrList::new(),
            reads: [ReadSegment::default(); MAX_LIST_SEGS],
            writes: [Segment::default(); MAX_LIST_SEGS],
            reply: [Segment::default(); MAX_LIST_SEGS],
            segs: [Segment::default(); MAX_LIST_SEGS],
        }
    }
}

/// What the planner needs to know of a request: its shape, and the parts
/// of its Call and Reply buffers.
fn rpc_shape(rqst: &SendRqst<'_>) -> (plan::Rpc, plan::CallBuf, plan::ReplyBuf) {
    let (snd, rcv) = (rqst.snd_buf(), rqst.rcv_buf());
    let rpc = plan::Rpc {
        call_len: snd.len(),
        call_page_len: snd.page_len(),
        call_page_base: snd.page_base(),
        call_ddp: snd.flags() & sys::XDRBUF_WRITE != 0,
        reply_max: rcv.buflen(),
        reply_nonpayload: rcv.head_len() + rcv.tail_len(),
        reply_ddp: rcv.flags() & sys::XDRBUF_READ != 0,
        ddp_allowed: rqst.ddp_allowed(),
    };
    let call = plan::CallBuf {
        head: snd.head_len(),
        page_base: snd.page_base(),
        page_len: snd.page_len(),
        tail: snd.tail_len(),
    };
    let reply = plan::ReplyBuf {
        head: rcv.head_len(),
        page_len: rcv.page_len(),
        tail: rcv.tail_len(),
    };
    (rpc, call, reply)
}

const PAGE: usize = kernel::page::PAGE_SIZE;

/// Registers the memory of `pages` for a chunk of `kind` on as many MRs
/// as needed, writing one segment each into `out`; returns the segments
/// and bytes. Each MR holds the pages until it is released.
fn register_pages(
    rqst: &SendRqst<'_>,
    pool: &MrPool,
    pages: HeldPages<'_>,
    kind: trace::ChunkKind,
    out: &mut [Segment],
    held: &mut FrwrList<MAX_RPC_MRS>,
) -> Result<(usize, u32)> {
    let mut rest = pages;
    let mut n = 0usize;
    let mut bytes = 0u32;
    while !rest.segs().is_empty() {
        let segs = rest.segs();
        let take = plan::mr_segments(
            segs.iter().map(|p| (p.offset, p.len)),
            pool.depth(),
            PAGE as u32,
        )
        .max(1)
        .min(segs.len());
        let (now, later) = rest.split_at(take);
        let slot = out.get_mut(n).ok_or(EMSGSIZE)?;
        // The server writes Write and Reply chunks, reads Read chunks.
        let writing = !matches!(kind, trace::ChunkKind::Read { .. });
        let (mr, reg) = pool.register_held(now, writing)?;
        trace::xprtrdma_mr(
            trace::MrEvent::Map,
            || Some(rqst.trace_task()),
            || Some(reg),
        );
        let last = later.segs().is_empty();
        trace::xprtrdma_chunk(kind, || rqst.trace_task(), &reg, last);
        if let Err(mr) = held.push(mr) {
            pool.release(mr, false);
            return Err(EMSGSIZE);
        }
        *slot = Segment {
            handle: reg.rkey,
            length: reg.length,
            offset: reg.iova,
        };
        bytes = bytes.saturating_add(reg.length);
        n += 1;
        rest = later;
    }
    Ok((n, bytes))
}

impl RdmaXprt {
    /// Sends the Reply of a backchannel request (`send_request`, with
    /// `XPRT_LOCKED`): inline, RDMA_MSG, the backchannel's credits. Never
    /// closes the connection: a failed post leaves that to autoclose.
    pub(super) fn send_bc_reply(&self, rqst: &SendRqst<'_>, locked: &XprtLocked<'_>) -> c_int {
        if !self.bc_pool().is_reply(rqst) {
            return EINVAL.to_errno();
        }
        if !self.connected() {
            return ENOTCONN.to_errno();
        }
        let Some(ep) = self.ep(locked) else {
            return ENOTCONN.to_errno();
        };
        let snd = rqst.snd_buf();
        let len = snd.len() as usize;
        let xid = u32::from_be(rqst.xid());
        // In the connection's version, which the server's backward Call
        // was in too.
        let version = self.version().unwrap_or(Version::V1);
        let inline_send = match version {
            Version::V1 => ep.inline().send,
            Version::V2 => ep.inline_v2().send,
        } as usize;
        let sent = ep.send_backward(rqst, |buf| {
            let hdr = backchannel::encode_backward(buf, xid, CLIENT_SLOTS, MsgType::Reply, version)
                .ok()?;
            let end = hdr.checked_add(len)?;
            if end > inline_send {
                return None;
            }
            snd.read(0, buf.get_mut(hdr..end)?).ok()?;
            // Marshalled, not yet posted, as rpcrdma.ko reports it.
            trace::xprtrdma_cb(true, self.xprt(), xid);
            Some((end, end))
        });
        match sent {
            Ok(()) => {
                rqst.add_bytes_sent(len);
                self.stats.bcall_replied.add(1);
                0
            }
            Err(SendError::NoBuffer) => {
                self.stats.empty_sendctx_q.add(1);
                trace::xprtrdma_prepsend_failed(|| rqst.trace_task(), EAGAIN.to_errno());
                ENOBUFS.to_errno()
            }
            Err(SendError::TooBig) => {
                rwarn!(
                    "backward reply of {} bytes exceeds the inline threshold\n",
                    len
                );
                EMSGSIZE.to_errno()
            }
            Err(SendError::Post) => {
                self.force_disconnect();
                ENOTCONN.to_errno()
            }
        }
    }
}
