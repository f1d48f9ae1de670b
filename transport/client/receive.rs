// SPDX-License-Identifier: GPL-2.0

//! Receiving: the Receive completion, matching a Reply to its request,
//! credit grants, invalidating the request's MRs before it completes, and
//! holding a Reply until its Call's Send completed.

use kernel::error::{code::ESHUTDOWN, Result};
use kernel::sync::atomic::{Acquire, Full, Relaxed, Release};
use kernel::sync::barrier::{smp_mb, Full as Barrier};

use super::classify_received;
use super::connection::{Ep, Pending, Receiver, RecvState, RpcMrs, RpcPosted, Sender, Shared};
use super::placement::Verdict;
use super::request::{CallState, ReqState};
use super::state::RdmaXprt;
use crate::params;
use crate::proto::error::DecodeError;
use crate::proto::negotiate::{Action, Version};
use crate::proto::plan::{self, CantReply};
use crate::proto::reply::{BadReply, Dropped, Inbound, ReplyBody};
use crate::proto::{v1, v2};
use crate::rdma::{RecvOwner, RecvRing, RecvToken, RemoteInv, Wc};
use crate::sunrpc::trace;

/// A Receive buffer of the connection, owned.
pub(crate) type RecvBuf<'a> = RecvToken<'a, Receiver>;

impl RdmaXprt {
    /// Handles one received message (Receive completion, process context):
    /// a Reply is taken for its RPC once the Call was posted on this
    /// connection ([`RdmaXprt::proceed`]); one that comes while the Call
    /// is being posted waits for the sender. The buffer is reposted, or
    /// handed on with the Reply.
    pub(super) fn receive<'a>(
        &self,
        rcv: &Receiver,
        ring: &'a RecvRing<Receiver>,
        buf: RecvBuf<'a>,
        inv: Option<RemoteInv>,
    ) {
        let shared = &*rcv.shared;
        // Any data means the conversation works: the next reconnect need
        // not back off (as `rpcrdma_reply_handler`).
        self.had_reply.store(true, Relaxed);
        let Some((rqst, st, credits, reply)) = self.match_reply(shared, buf.bytes()) else {
            repost(shared, buf);
            return;
        };
        let pending = Pending {
            rqst,
            reply,
            buf: None,
            credits,
            inv,
        };
        match st.call_on(shared.gen) {
            CallState::Posted => self.proceed(rcv, ring, buf, st, pending),
            CallState::Posting => {
                // Its REG_MRs may not be posted yet: a LOCAL_INV posted now
                // could overtake them. The sender finishes the Reply once
                // they are.
                let pending = Pending {
                    buf: Some(buf.park()),
                    ..pending
                };
                let Err(mut pending) = st.park_early(shared.gen, pending) else {
                    self.stats.reply_waits_for_post.add(1);
                    return;
                };
                // The sender was done meanwhile.
                let Some(buf) = pending.buf.take().and_then(|p| ring.unpark(p)) else {
                    return;
                };
                if st.call_on(shared.gen) == CallState::Posted {
                    self.proceed(rcv, ring, buf, st, pending);
                } else {
                    repost(shared, buf);
                }
            }
            // The sender gave up on the Call meanwhile.
            CallState::NotSent => repost(shared, buf),
        }
    }

    /// Takes `pending`, in `buf`, for the RPC of `st`, whose Call was
    /// posted on this connection: the RPC is finished by
    /// [`RdmaXprt::finish_reply`] once its MRs are invalidated.
    pub(super) fn proceed<'a>(
        &self,
        rcv: &Receiver,
        ring: &'a RecvRing<Receiver>,
        buf: RecvBuf<'a>,
        st: &ReqState,
        mut pending: Pending,
    ) {
        let shared = &*rcv.shared;
        // Only a message that matched a waiting RPC may move the window.
        self.update_cwnd(pending.credits);
        let pool = &*rcv.pool;
        let inv = pending.inv.take();
        // In place: the list is large, and with the server's remote
        // invalidation usually empty after it; moved out only to be
        // invalidated here.
        let left = st.with_mrs(shared.gen, |mrs| {
            if let Some(inv) = inv {
                // Only a key of this RPC's MRs (RFC 8166 §3.3.4).
                let keys = mrs.as_slice().iter().map(|mr| pool.rkey(mr));
                let pos = plan::remote_invalidation_ok(inv.rkey(), keys).ok_or(())?;
                let mr = mrs.take_remote(pool, pos, inv).ok_or(())?;
                // The server invalidated it: nothing can reach it now.
                trace::xprtrdma_mr(
                    trace::MrEvent::RemInv,
                    || Some(pending.rqst.trace_task()),
                    || pool.registered(&mr),
                );
                pool.release(mr, false);
            }
            Ok((!mrs.is_empty()).then(|| core::mem::replace(mrs, RpcPosted::new())))
        });
        let mrs = match left {
            Some(Err(())) => {
                rwarn!("server invalidated a key that is not the RPC's: closing\n");
                self.stats.bad_remote_inv.add(1);
                self.stats.bad_reply_count.add(1);
                self.force_disconnect();
                // The MRs stay on the request until the connection is
                // gone; unpinned, the RPC is retransmitted after the
                // reconnect.
                drop(pending);
                repost(shared, buf);
                return;
            }
            Some(Ok(mrs)) => mrs,
            None => None,
        };
        let Some(mrs) = mrs else {
            // Nothing left to invalidate (any MR the server invalidated
            // was released above). Without LOCAL_INVs, which complete
            // after the Send on the same queue, a Reply may overtake its
            // Call's Send completion.
            let seq = st.send_seq.load(Relaxed);
            if seq != 0 && st.gen.load(Relaxed) == shared.gen && seq > shared.sends_completed() {
                self.stats.reply_waits_for_send.add(1);
                let state = buf.state();
                let pending = Pending {
                    buf: Some(buf.park()),
                    ..pending
                };
                let Err(mut pending) = shared.defer_until_sent(state, seq, pending) else {
                    return;
                };
                // The Send completed meanwhile: the Reply is ours again.
                let Some(buf) = pending.buf.take().and_then(|p| ring.unpark(p)) else {
                    return;
                };
                self.complete(pending.rqst, pending.reply, buf.buffer());
                repost(shared, buf);
                return;
            }
            self.complete(pending.rqst, pending.reply, buf.buffer());
            repost(shared, buf);
            return;
        };
        let n = mrs.len();
        match invalidate(shared, rcv, buf, pending, mrs) {
            Ok(()) => self.stats.local_inv_needed.add(n as u64),
            Err((buf, mrs)) => {
                // The QP is in error or going: the server may still reach
                // the MRs until it is destroyed. Leave them on the request
                // and the request to sunrpc: it is retransmitted on the
                // next connection, which comes after this one's teardown,
                // or released, which waits for it (`buffers_released`).
                self.force_disconnect();
                st.hold_mrs(mrs);
                repost(shared, buf);
            }
        }
    }

    /// The waiting request a received message is the Reply of, with its
    /// state, credit grant and checked Reply; `None` when it is not one
    /// (a backward Call is handled here, copied out).
    fn match_reply<'a>(
        &'a self,
        shared: &Shared,
        msg: &[u8],
    ) -> Option<(
        crate::sunrpc::PinnedRqst,
        &'a super::request::ReqState,
        u32,
        Verdict,
    )> {
        // A backward Call is routed before anything reads credits: its
        // grant is the backchannel's, not the forward window's.
        let (xid, credits, body, answer) = match classify_received(msg, &self.stats, self.cfg.slots)
        {
            Inbound::Reply {
                xid,
                credits,
                body,
                answer,
            } => (xid, credits, body, answer),
            Inbound::BackwardCall(call) => {
                // Copied out: the buffer is reposted at once.
                self.backward_call(shared, call.fixed.xid, call.payload, Version::V1);
                return None;
            }
            Inbound::BackwardCall2(call) => {
                self.backward_call(shared, call.fixed.xid, call.payload, Version::V2);
                return None;
            }
            Inbound::Dropped(why) => {
                let why = match why {
                    Dropped::Short => trace::ReplyErr::Short,
                    Dropped::Version { .. } => trace::ReplyErr::Vers,
                    // rpcrdma.ko takes it for a Reply no Call waits for.
                    Dropped::BackwardWithChunks => trace::ReplyErr::Rqst,
                };
                trace::xprtrdma_reply_err(why, self.xprt(), msg);
                return None;
            }
        };
        // The negotiation learns from the probe's answer even when its
        // RPC is gone (killed, timed out): otherwise every other Call
        // would wait on until the connection is lost.
        let action = self.version_answer(xid, answer);
        // `rq_xid` holds the XID as it is on the wire. A Reply to a Call not
        // sent on this connection is none: the server cannot have it.
        let found = self.lookup(xid.to_be());
        let sent = matches!(&found, Some((_, st)) if st.call_on(shared.gen) != CallState::NotSent);
        if found.is_some() && !sent {
            self.stats.unsent_replies.add(1);
        }
        let Some((rqst, st)) = found.filter(|_| sent) else {
            rdebug!("reply for unknown or unsent xid {:#x}\n", xid);
            trace::xprtrdma_reply_err(trace::ReplyErr::Rqst, self.xprt(), msg);
            return None;
        };
        trace::xprtrdma_reply(|| rqst.trace_task(), credits);
        if let Ok(b) = &body {
            trace::xprtrdma_decode_segs(&b.lists);
        }
        if let Err(bad) = body {
            if let Some(err) = trace_rdma_error(bad, msg) {
                trace::xprtrdma_err(err, || rqst.trace_task());
            }
        }
        if matches!(action, Action::ResendAsV1 { .. }) {
            return Some((rqst, st, credits, Verdict::Resend));
        }
        let body = match body {
            Err(BadReply::Error2(v2::RdmaError::CantReply {
                segment_index,
                length_needed,
                ..
            })) => {
                let verdict = st.cant_reply(segment_index, length_needed);
                rdebug!(
                    "xid {:#x}: RDMA2_ERR_CANT_REPLY, segment {} needs {}: {:?}\n",
                    xid,
                    segment_index,
                    length_needed,
                    verdict
                );
                if verdict == CantReply::ResendWithReplyChunk {
                    self.stats.cant_reply_resends.add(1);
                    return Some((rqst, st, credits, Verdict::Resend));
                }
                return Some((rqst, st, credits, Verdict::Fail));
            }
            body => body.ok(),
        };
        let reply = body
            .and_then(|body: ReplyBody<'_>| self.check_reply(msg, body, st))
            .map_or(Verdict::Fail, Verdict::Place);
        if matches!(reply, Verdict::Fail) {
            trace::xprtrdma_reply_err(trace::ReplyErr::Hdr, self.xprt(), msg);
        }
        Some((rqst, st, credits, reply))
    }

    /// Finishes a Reply in `buf` whose RPC's MRs, `mrs`, are now
    /// invalidated (`ok`) or flushed.
    pub(super) fn finish_reply(
        &self,
        rcv: &Receiver,
        buf: &RecvBuf<'_>,
        pending: Pending,
        mut mrs: RpcMrs,
        ok: bool,
    ) {
        if !ok {
            self.stats.mrs_recycled.add(mrs.len() as u64);
        }
        while let Some(mr) = mrs.pop() {
            rcv.pool.release(mr, !ok);
        }
        self.complete(pending.rqst, pending.reply, buf.buffer());
    }
}

/// What `xprtrdma_err_*` reports of the RDMA_ERROR that failed a Reply
/// (`msg`) as `bad`, as rpcrdma.ko's `rpcrdma_decode_error` does: the
/// code of one it does not know, nothing for a truncated one or another
/// failure.
fn trace_rdma_error(bad: BadReply, msg: &[u8]) -> Option<trace::RdmaErr> {
    let word = |i: usize| {
        msg.get(i * 4..i * 4 + 4)
            .and_then(|w| <[u8; 4]>::try_from(w).ok())
            .map(u32::from_be_bytes)
    };
    match bad {
        BadReply::Error(v1::RdmaError::Vers { low, high })
        | BadReply::Error2(v2::RdmaError::Vers { low, high }) => Some(trace::RdmaErr::Vers {
            min: low,
            max: high,
        }),
        BadReply::Error(v1::RdmaError::Chunk) => Some(trace::RdmaErr::Chunk),
        // Version 2's other errors are codes rpcrdma.ko does not know.
        BadReply::Error2(_) => word(4).map(|procedure| trace::RdmaErr::Unrecognized { procedure }),
        // A version 1 RDMA_ERROR with an unknown code does not decode.
        BadReply::Header(DecodeError::MalformedError) if word(3) == Some(v1::proc::ERROR) => {
            match word(4)? {
                v1::err::VERS | v1::err::CHUNK => None,
                procedure => Some(trace::RdmaErr::Unrecognized { procedure }),
            }
        }
        BadReply::Header(_) => None,
    }
}

/// Gives `buf` back for the next batch of Receives; a connection that
/// cannot repost is closed.
fn repost(shared: &Shared, buf: RecvBuf<'_>) {
    if buf.repost().is_err() {
        shared.xprt().force_disconnect();
    }
}

impl RecvOwner for Receiver {
    type State = RecvState;

    fn received(&self, ring: &RecvRing<Self>, buf: RecvBuf<'_>, wc: &Wc<'_>) {
        let xprt = self.shared.xprt();
        // The buffer's number, as `xprtrdma_post_recv` gave it.
        trace::xprtrdma_wc_receive(wc, buf.idx());
        if !wc.ok() {
            self.shared.wr_failed("receive", wc);
            return;
        }
        xprt.receive(self, ring, buf, wc.invalidated());
    }

    fn posting(&self, cq_id: u32, idx: u32) {
        trace::xprtrdma_post_recv(cq_id, idx);
    }

    fn posted(&self, cq_id: u32, count: u32, active: impl FnOnce() -> u32, res: &Result) {
        // ESHUTDOWN: nothing was posted, the connection is going.
        let rc = match res {
            Err(e) if *e != ESHUTDOWN => Err(*e),
            _ => Ok(()),
        };
        trace::xprtrdma_post_recvs(self.shared.xprt().xprt(), cq_id, count, active, rc);
    }

    /// The last (signalled) LOCAL_INV of a Reply's RPC completed.
    fn invalidated(&self, _ring: &RecvRing<Self>, buf: RecvBuf<'_>, mrs: RpcMrs, wc: &Wc<'_>) {
        let shared = &*self.shared;
        trace::xprtrdma_wc_mr(trace::MrWc::LiDone, wc, || {
            mrs.as_slice().last().map_or(0, |mr| self.pool.mr_id(mr))
        });
        // The Receive completion handed the pending Reply to us.
        let pending = buf.state().pending.take();
        if !wc.ok() {
            shared.wr_failed("local invalidate", wc);
        }
        if let Some(pending) = pending {
            shared
                .xprt()
                .finish_reply(self, &buf, pending, mrs, wc.ok());
        }
        // (Never without: `invalidate` hands the Reply over first.)
        repost(shared, buf);
    }
}

/// Posts LOCAL_INV for each MR of `mrs`, the last one signalled, whose
/// completion then finishes the Reply of `pending` in `buf`
/// ([`RecvOwner::invalidated`]).
///
/// Fails once the connection is going: the caller leaves the MRs to the
/// teardown, which destroys the QP. On failure the buffer and the MRs
/// come back (and the Reply is dropped: the RPC is retransmitted).
fn invalidate<'a>(
    _shared: &Shared,
    rcv: &Receiver,
    buf: RecvBuf<'a>,
    pending: Pending,
    mrs: RpcPosted,
) -> core::result::Result<(), (RecvBuf<'a>, RpcPosted)> {
    if params::injected(params::FAULT_LOCAL_INV) {
        rdebug!("fault injection: failing LOCAL_INV post\n");
        return Err((buf, mrs));
    }
    for mr in mrs.as_slice() {
        trace::xprtrdma_mr(
            trace::MrEvent::LocalInv,
            || Some(pending.rqst.trace_task()),
            || rcv.pool.registered(mr),
        );
    }
    let state = buf.state();
    // Handed to the LOCAL_INV completion.
    if state.pending.put(pending).is_err() {
        return Err((buf, mrs));
    }
    match buf.invalidate(&rcv.pool, mrs) {
        Ok(()) => Ok(()),
        Err((_, buf, mrs)) => {
            // Nothing was posted, so the Reply is still ours.
            drop(state.pending.take());
            Err((buf, mrs))
        }
    }
}

impl Shared {
    /// Sends completed so far: on an RC QP they complete in order, so
    /// the Send numbered `n` (see [`Ep::next_send_seq`]) has completed
    /// when this is at least `n`.
    pub(crate) fn sends_completed(&self) -> u64 {
        self.sends_done.load(Acquire)
    }

    /// Holds the Reply of `state`'s buffer until the Send numbered `seq` completed,
    /// like rpcrdma.ko's `reply_waits_for_send`: an RPC completes only
    /// after its Call's Send did. Gives `pending` back when the Send
    /// completed in the meantime and the caller is to go on with the Reply
    /// itself.
    ///
    /// This and [`Shared::sends_completed_to`] are the two sides of a
    /// store-buffering pattern: each stores its own word, then reads the
    /// other's. With a full barrier between the store and the load on both
    /// sides, the kernel memory model forbids both from reading the old
    /// value, so either this side sees the Send done, or the completion
    /// side sees the waiting Reply; the exchange on `wait_seq` then picks
    /// exactly one of them to finish it.
    pub(crate) fn defer_until_sent(
        &self,
        state: &RecvState,
        seq: u64,
        pending: Pending,
    ) -> core::result::Result<(), Pending> {
        // Ours (the Receive completion's) until we publish `wait_seq`.
        state.pending.put(pending)?;
        self.waiters.fetch_add(1, Full);
        // Release: whoever reads `seq` here also sees `pending`.
        state.wait_seq.store(seq, Release);
        smp_mb(Barrier);
        if self.sends_done.load(Relaxed) >= seq && state.wait_seq.cmpxchg(seq, 0, Full).is_ok() {
            self.waiters.fetch_sub(1, Full);
            // Winning the exchange kept the Reply ours.
            if let Some(pending) = state.pending.take() {
                return Err(pending);
            }
        }
        Ok(())
    }
}

impl Sender {
    /// Records that every Send up to number `seq` completed (Sends
    /// complete in order), then finishes the Replies that waited for one
    /// of them; see [`Shared::defer_until_sent`] for the ordering.
    pub(super) fn sends_completed_to(&self, seq: u64) {
        let shared = &*self.shared;
        let mut done = shared.sends_done.load(Relaxed);
        while done < seq {
            match shared.sends_done.cmpxchg(done, seq, Full) {
                Ok(_) => break,
                Err(now) => done = now,
            }
        }
        smp_mb(Barrier);
        if shared.waiters.load(Relaxed) == 0 {
            return;
        }
        let done = shared.sends_done.load(Relaxed);
        let ring = &*self.rx;
        for state in ring.states() {
            // Acquire: pairs with the release store of `wait_seq`.
            let w = state.wait_seq.load(Acquire);
            if w == 0 || w > done {
                continue;
            }
            if state.wait_seq.cmpxchg(w, 0, Full).is_ok() {
                shared.waiters.fetch_sub(1, Full);
                // Winning the exchange hands us the pending Reply, and
                // its buffer.
                let Some(mut pending) = state.pending.take() else {
                    continue;
                };
                let Some(buf) = pending.buf.take().and_then(|p| ring.unpark(p)) else {
                    continue;
                };
                shared
                    .xprt()
                    .complete(pending.rqst, pending.reply, buf.buffer());
                repost(shared, buf);
            }
        }
    }
}

impl Ep {
    /// Finishes `pending`, a Reply that came while the sender was posting
    /// the Call of `st`, now posted (and its MRs on the request).
    pub(super) fn finish_early(&self, xprt: &RdmaXprt, st: &ReqState, mut pending: Pending) {
        let Some(ring) = self.recv_ring() else {
            return;
        };
        let Some(buf) = pending.buf.take().and_then(|p| ring.unpark(p)) else {
            return;
        };
        xprt.proceed(ring.owner(), ring, buf, st, pending);
    }

    /// Drops `pending`, a Reply that came while the sender was posting a
    /// Call it then did not post: it answers nothing sent.
    pub(super) fn drop_early(&self, mut pending: Pending) {
        let ring = self.recv_ring();
        if let Some(buf) = pending.buf.take().and_then(|p| ring?.unpark(p)) {
            repost(&self.shared, buf);
        }
    }
}
