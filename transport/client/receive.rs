// SPDX-License-Identifier: GPL-2.0

//! Receiving: the Receive completion, matching a Reply to its request,
//! credit grants, invalidating the request's MRs before it completes, and
//! holding a Reply until its Call's Send completed.

use kernel::sync::atomic::{Acquire, Full, Relaxed, Release};
use kernel::sync::barrier::{smp_mb, Full as Barrier};

use super::classify_received;
use super::connection::{MrPool, Pending, RecvCtx, Shared, LINV, RECV};
use super::request::MAX_RPC_MRS;
use super::state::RdmaXprt;
use crate::params;
use crate::proto::plan;
use crate::proto::reply::{Inbound, ReplyBody};
use crate::rdma::{CqHandler, FrwrList, Qp, SendChain, Wc};
use crate::sunrpc::trace;

impl RdmaXprt {
    /// Handles one received message (Receive completion, process context):
    /// a Reply whose RPC holds MRs is finished by [`RdmaXprt::finish_reply`]
    /// once they are invalidated.
    pub(super) fn receive(
        &self,
        shared: &Shared,
        ctx: &RecvCtx,
        len: usize,
        invalidated: Option<u32>,
    ) -> Handled {
        // Any data means the conversation works: the next reconnect need
        // not back off (as `rpcrdma_reply_handler`).
        self.had_reply.store(true, Relaxed);
        let msg = ctx.msg(len);
        // A backward Call is routed before anything reads credits: its
        // grant is the backchannel's, not the forward window's.
        let (xid, credits, body) = match classify_received(msg, &self.stats, self.cfg.slots) {
            Inbound::Reply { xid, credits, body } => (xid, credits, body),
            Inbound::BackwardCall(call) => {
                // Copied out: the buffer is reposted at once.
                self.backward_call(shared, &call);
                return Handled::Done;
            }
            Inbound::Dropped(_) => return Handled::Done,
        };
        // `rq_xid` holds the XID as it is on the wire.
        let xid = xid.to_be();
        let Some((rqst, st)) = self.lookup(xid) else {
            rdebug!("reply for unknown xid {:#x}\n", u32::from_be(xid));
            return Handled::Done;
        };
        trace::xprtrdma_reply(|| rqst.trace_task(), credits);
        // Only a message that matched a waiting RPC may move the window.
        self.update_cwnd(credits);
        let reply = body
            .ok()
            .and_then(|body: ReplyBody<'_>| self.check_reply(msg, body, st));
        let pending = Pending {
            rqst,
            reply,
            mrs: FrwrList::new(),
        };
        // Without LOCAL_INVs, which complete after the Send on the same
        // queue, a Reply may overtake its Call's Send completion.
        let wait_send = |pending: Pending| {
            let seq = st.send_seq.load(Relaxed);
            if seq != 0 && st.gen.load(Relaxed) == shared.gen && seq > shared.sends_completed() {
                self.stats.reply_waits_for_send.add(1);
                return shared.defer_until_sent(ctx, seq, pending);
            }
            Err(pending)
        };
        let mut mrs = st.take_mrs(shared.gen);
        let pool = ctx.pool();
        if let (Some(rkey), false) = (invalidated, mrs.is_empty()) {
            let mut keys = [0u32; MAX_RPC_MRS];
            for (k, mr) in keys.iter_mut().zip(mrs.as_slice()) {
                *k = pool.rkey(mr);
            }
            match plan::remote_invalidation_ok(rkey, keys.get(..mrs.len()).unwrap_or(&[])) {
                Some(pos) => {
                    // The server invalidated it: nothing can reach it now.
                    if let Some(mr) = mrs.remove(pos) {
                        pool.release(mr, false);
                    }
                }
                None => {
                    rwarn!("server invalidated a key that is not the RPC's: closing\n");
                    self.stats.bad_remote_inv.add(1);
                    self.stats.bad_reply_count.add(1);
                    self.force_disconnect();
                    // The MRs stay on the request until the connection is
                    // gone; unpinned, the RPC is retransmitted after the
                    // reconnect.
                    st.hold_mrs(mrs);
                    drop(pending);
                    return Handled::Done;
                }
            }
        }
        if mrs.is_empty() {
            // Nothing left to invalidate (any MR the server invalidated
            // was released above).
            return match wait_send(pending) {
                Ok(()) => Handled::Deferred,
                Err(pending) => {
                    self.complete(pending.rqst, pending.reply, ctx.buffer());
                    Handled::Done
                }
            };
        }
        let n = mrs.len();
        match invalidate(shared, pool, ctx, Pending { mrs, ..pending }) {
            Ok(()) => {
                self.stats.local_inv_needed.add(n as u64);
                Handled::Deferred
            }
            Err(pending) => {
                // The QP is in error or going: the server may still reach
                // the MRs until it is destroyed. Leave them on the request
                // and the request to sunrpc: it is retransmitted on the
                // next connection, which comes after this one's teardown,
                // or released, which waits for it (`buffers_released`).
                self.force_disconnect();
                st.hold_mrs(pending.mrs);
                Handled::Done
            }
        }
    }

    /// Finishes a Reply whose RPC's MRs are now invalidated (`ok`) or
    /// flushed.
    pub(super) fn finish_reply(&self, ctx: &RecvCtx, pending: Pending, ok: bool) {
        let mut pending = pending;
        if !ok {
            self.stats.mrs_recycled.add(pending.mrs.len() as u64);
        }
        let pool = ctx.pool();
        while let Some(mr) = pending.mrs.pop() {
            pool.release(mr, !ok);
        }
        self.complete(pending.rqst, pending.reply, ctx.buffer());
    }
}

/// What the transport did with a received message.
pub(crate) enum Handled {
    /// Done: repost the buffer.
    Done,
    /// LOCAL_INVs were posted; [`linv_done`] finishes the Reply.
    Deferred,
}

/// A Receive completed.
impl CqHandler<RECV> for RecvCtx {
    fn done(&self, wc: &Wc<'_>) {
        let shared = self.shared();
        let xprt = shared.xprt();
        // Receives are not numbered in ours: completion_id is 0.
        trace::xprtrdma_wc_receive(wc, 0);
        if !wc.ok() {
            if !wc.flushed() {
                rwarn!("receive failed, status {}\n", wc.status());
                xprt.force_disconnect();
            }
            return;
        }
        let len = wc.byte_len().min(self.buf.len());
        self.buf.sync_for_cpu(len);
        if let Handled::Done = xprt.receive(shared, self, len, wc.invalidated_rkey()) {
            self.repost(shared);
        }
    }
}

/// The last (signalled) LOCAL_INV of a Reply's RPC completed.
impl CqHandler<LINV> for RecvCtx {
    fn done(&self, wc: &Wc<'_>) {
        let shared = self.shared();
        // The Receive completion handed the pending Reply to us.
        let pending = self.pending.take();
        if !wc.ok() && !wc.flushed() {
            rwarn!("local invalidate failed, status {}\n", wc.status());
            shared.xprt().force_disconnect();
        }
        if let Some(pending) = pending {
            shared.xprt().finish_reply(self, pending, wc.ok());
        }
        self.repost(shared);
    }
}

/// Posts LOCAL_INV for each MR of `pending`, the last one signalled on
/// `ctx`'s `linv_cqe`, whose completion then finishes the Reply.
///
/// Fails once the connection is being drained: a LOCAL_INV posted then
/// might complete after the Send queue was drained, and its Reply would
/// never be finished. The caller leaves the MRs to the teardown, which
/// destroys the QP. On failure the Reply comes back.
fn invalidate(
    shared: &Shared,
    pool: &MrPool,
    ctx: &RecvCtx,
    pending: Pending,
) -> core::result::Result<(), Pending> {
    let mut chain = SendChain::new();
    pool.chain_inv(pending.mrs.as_slice(), &ctx.linv_cqe, &mut chain);
    if chain.is_empty() || shared.draining.load(Acquire) {
        return Err(pending);
    }
    if params::injected(params::FAULT_LOCAL_INV) {
        rdebug!("fault injection: failing LOCAL_INV post\n");
        return Err(pending);
    }
    // SAFETY: The QP lives until drained, which waits for this handler.
    let Some(qp) = (unsafe { Qp::from_ptr(shared.qp.load(Acquire)) }) else {
        return Err(pending);
    };
    // Handed to the LOCAL_INV completion.
    ctx.pending.put(pending)?;
    // SAFETY: The chain's work requests live in the pool, and `linv_cqe`
    // in `ctx`, until the QP is drained.
    if unsafe { qp.post_send_chain(&chain) }.is_err() {
        // Nothing was posted, so the Reply is still ours.
        if let Some(pending) = ctx.pending.take() {
            return Err(pending);
        }
    }
    Ok(())
}

impl Shared {
    /// Sends completed so far: on an RC QP they complete in order, so
    /// the Send numbered `n` (see [`Ep::next_send_seq`]) has completed
    /// when this is at least `n`.
    pub(crate) fn sends_completed(&self) -> u64 {
        self.sends_done.load(Acquire)
    }

    /// Holds the Reply in `ctx` until the Send numbered `seq` completed,
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
        ctx: &RecvCtx,
        seq: u64,
        pending: Pending,
    ) -> core::result::Result<(), Pending> {
        // Ours (the Receive completion's) until we publish `wait_seq`.
        ctx.pending.put(pending)?;
        self.waiters.fetch_add(1, Full);
        // Release: whoever reads `seq` here also sees `pending`.
        ctx.wait_seq.store(seq, Release);
        smp_mb(Barrier);
        if self.sends_done.load(Relaxed) >= seq && ctx.wait_seq.cmpxchg(seq, 0, Full).is_ok() {
            self.waiters.fetch_sub(1, Full);
            // Winning the exchange kept the Reply ours.
            if let Some(pending) = ctx.pending.take() {
                return Err(pending);
            }
        }
        Ok(())
    }

    /// Records that every Send up to number `seq` completed (Sends
    /// complete in order), then finishes the Replies that waited for one
    /// of them; see [`Shared::defer_until_sent`] for the ordering.
    pub(super) fn sends_completed_to(&self, seq: u64) {
        let mut done = self.sends_done.load(Relaxed);
        while done < seq {
            match self.sends_done.cmpxchg(done, seq, Full) {
                Ok(_) => break,
                Err(now) => done = now,
            }
        }
        smp_mb(Barrier);
        if self.waiters.load(Relaxed) == 0 {
            return;
        }
        let done = self.sends_done.load(Relaxed);
        for ctx in self.rx_contexts() {
            // Acquire: pairs with the release store of `wait_seq`.
            let w = ctx.wait_seq.load(Acquire);
            if w == 0 || w > done {
                continue;
            }
            if ctx.wait_seq.cmpxchg(w, 0, Full).is_ok() {
                self.waiters.fetch_sub(1, Full);
                // Winning the exchange hands us the pending Reply.
                if let Some(pending) = ctx.pending.take() {
                    self.xprt().finish_reply(ctx, pending, true);
                }
                ctx.repost(self);
            }
        }
    }
}
