// SPDX-License-Identifier: GPL-2.0

//! Receiving: the Receive buffers and their completion, matching a Reply
//! to its request, credit grants, invalidating the request's MRs before
//! it completes, and reposting the buffers in batches.

use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed, Release};
use kernel::sync::barrier::{smp_mb, Full as Barrier};
use kernel::sync::Arc;

use super::classify_received;
use super::connection::{MrPool, Shared, MAX_RPC_MRS};
use super::placement::Checked;
use super::xprt::RdmaXprt;
use crate::params;
use crate::proto::plan;
use crate::proto::reply::{Inbound, ReplyBody};
use crate::rdma::{
    CqEntry, CqHandler, DmaBuf, DmaDir, ExclusiveCell, FrwrList, Qp, RecvWr, SendChain, Wc,
};
use crate::sunrpc::PinnedRqst;

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

impl Shared {
    /// The connection's Receive contexts; empty before they exist and
    /// after teardown began.
    pub(super) fn rx_contexts(&self) -> &[RecvCtx] {
        let rx = self.rx.load(Acquire);
        let n = self.rx_len.load(Acquire);
        if rx.is_null() {
            return &[];
        }
        // SAFETY: `rx` points to the connection's Receive contexts, a
        // vector that is never resized and is freed only after the CQs,
        // i.e. after every handler, and after `Ep::drop` cleared `rx`.
        unsafe { core::slice::from_raw_parts(rx.cast_const(), n) }
    }

    /// Hands the idle Receive buffers back to the device, in one chain
    /// per pass. Whoever finds another thread at it leaves the work to
    /// that thread, which looks again before it stops.
    pub(super) fn post_idle_recvs(&self) -> Result {
        loop {
            if self.draining.load(Acquire) || self.recv_posting.xchg(true, Full) {
                return Ok(());
            }
            // SAFETY: The QP pointer is set before any Receive is posted
            // and the QP is destroyed only after draining, i.e. after every
            // completion handler returned.
            let qp = unsafe { Qp::from_ptr(self.qp.load(Acquire)) };
            let mut head = core::ptr::null_mut();
            let mut n = 0u32;
            // Stop at the buffers counted so far: one counted but not yet
            // marked is posted by its own thread or the next pass.
            let want = self.recv_idle.load(Acquire);
            for ctx in self.rx_contexts() {
                if n >= want {
                    break;
                }
                // A plain load first: most buffers are posted, and a
                // failing compare-exchange still costs a locked operation.
                if ctx.idle.load(Relaxed) && ctx.idle.cmpxchg(true, false, Full).is_ok() {
                    ctx.buf.sync_for_device(ctx.buf.len());
                    // SAFETY: Clearing `idle` made the buffer ours until it
                    // is posted; contexts never move.
                    head = unsafe { ctx.wr.link(ctx.cqe.as_ptr(), head) };
                    n += 1;
                }
            }
            self.recv_idle.fetch_sub(n, Full);
            let posted = match (qp, n) {
                (_, 0) => Ok(()),
                // SAFETY: A chain of Receives whose buffers and cqes live
                // until the QP is drained.
                (Some(qp), _) => unsafe { qp.post_recv_chain(head) },
                (None, _) => Err(ENOTCONN),
            };
            self.recv_posting.store(false, Release);
            posted?;
            // A buffer marked idle while we held `recv_posting` was left
            // to us (its thread saw the flag set): between our release of
            // the flag and our look at the count, and its increment of the
            // count and its look at the flag, one of us sees the other.
            smp_mb(Barrier);
            if n == 0 || self.recv_idle.load(Relaxed) < self.recv_batch {
                return Ok(());
            }
        }
    }
}

/// A Reply held between its Receive completion and the completion of the
/// LOCAL_INVs of its RPC's MRs (or of its Call's Send).
pub(crate) struct Pending {
    /// The request, pinned.
    pub(crate) rqst: PinnedRqst,
    /// The MRs being invalidated.
    pub(crate) mrs: FrwrList<MAX_RPC_MRS>,
    /// The Reply as checked on arrival; `None` fails the RPC.
    pub(crate) reply: Option<Checked>,
}

/// A Receive buffer.
///
/// # Invariants
///
/// `pending` is filled by the Receive completion of this buffer and
/// emptied, after it posted LOCAL_INVs on `linv_cqe`, by their completion,
/// or after it published `wait_seq`, by whoever resets `wait_seq` to zero
/// (its cell checks that they take turns); the buffer is marked `idle`
/// only after that, and whoever clears `idle` owns the buffer and `wr`
/// until it posts them.
pub(crate) struct RecvCtx {
    cqe: CqEntry<RecvCtx, RECV>,
    pub(super) linv_cqe: CqEntry<RecvCtx, LINV>,
    buf: DmaBuf,
    wr: RecvWr,
    pub(super) pending: ExclusiveCell<Option<Pending>>,
    /// Number of the Send this buffer's Reply waits for; 0 for none.
    pub(super) wait_seq: Atomic<u64>,
    /// Done with, waiting for the next batch of Receives.
    idle: Atomic<bool>,
    shared: Arc<Shared>,
    /// The connection's MRs, for invalidating a Reply's.
    pool: Arc<MrPool>,
}

impl RecvCtx {
    pub(super) fn new(
        shared: Arc<Shared>,
        pool: Arc<MrPool>,
        dev: &crate::rdma::Device,
        size: usize,
        lkey: u32,
    ) -> Result<Self> {
        let buf = DmaBuf::new(dev, size, DmaDir::FromDevice)?;
        Ok(Self {
            cqe: CqEntry::new(),
            linv_cqe: CqEntry::new(),
            wr: RecvWr::new(&buf, lkey),
            buf,
            pending: ExclusiveCell::new(None),
            wait_seq: Atomic::new(0),
            // Not posted yet: the connect worker posts every idle buffer.
            idle: Atomic::new(true),
            shared,
            pool,
        })
    }

    /// The first `len` bytes received.
    pub(crate) fn msg(&self, len: usize) -> &[u8] {
        self.buf.as_slice().get(..len).unwrap_or(&[])
    }

    /// The whole buffer, for a Reply placed by its [`Checked`] offsets.
    fn buffer(&self) -> &[u8] {
        self.buf.as_slice()
    }

    /// Gives the buffer back: it is reposted with the next batch.
    pub(super) fn repost(&self, shared: &Shared) {
        // Counted before it is marked, so the count never falls below
        // the number of marked buffers.
        let idle = shared.recv_idle.fetch_add(1, Full) + 1;
        self.idle.store(true, Release);
        if idle >= shared.recv_batch && shared.post_idle_recvs().is_err() {
            shared.xprt().force_disconnect();
        }
    }
}

/// What the transport did with a received message.
pub(crate) enum Handled {
    /// Done: repost the buffer.
    Done,
    /// LOCAL_INVs were posted; [`linv_done`] finishes the Reply.
    Deferred,
}

/// [`CqEntry`] ids of a [`RecvCtx`].
const RECV: u64 = 0;

const LINV: u64 = 1;

crate::impl_has_cq_entry!(RecvCtx, 0, cqe);

crate::impl_has_cq_entry!(RecvCtx, 1, linv_cqe);

impl RecvCtx {
    fn shared(&self) -> &Shared {
        &self.shared
    }

    /// The connection's MRs.
    pub(super) fn pool(&self) -> &MrPool {
        &self.pool
    }
}

/// A Receive completed.
impl CqHandler<RECV> for RecvCtx {
    fn done(&self, wc: &Wc<'_>) {
        let shared = self.shared();
        let xprt = shared.xprt();
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
