// SPDX-License-Identifier: GPL-2.0

//! Per-request state, kept in the request's slot: the MRs registered for
//! it, whether a Send still reads its pages, and whether its Call was
//! posted on the connection a Reply comes from. Giving the buffers back
//! waits for the Send and the MRs to end.

use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed, Release};

use super::connection::Pending;
use super::state::RdmaXprt;
use crate::proto::plan::{self, Offered};
use crate::rdma::{AtomicPair, ExclusiveCell, PostedMrs};

/// Most MRs one RPC holds: a Read, a Write and a Reply chunk of at most
/// `RPCRDMA_MAX_HDR_SEGS` segments each.
pub(crate) const MAX_RPC_MRS: usize = crate::rdma::MAX_INV_MRS;

/// Where a request's Call stands on a connection, as a Reply sees it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum CallState {
    /// Not sent on this connection: no Reply can be for it.
    NotSent,
    /// The sender is posting it: its MRs are not on the request yet.
    Posting,
    /// Posted, its MRs (if any) on the request.
    Posted,
}

/// Where a request's Call stands: the connection's generation times
/// four plus a phase, 0 for none. The sender moves it to `POSTING` before
/// it posts and to `POSTED` once the Call and its REG_MRs are posted and
/// the MRs on the request; a Reply that finds `POSTING` may move it to
/// `EARLY`, leaving itself to the sender.
pub(super) struct CallPhase(Atomic<u64>);

const POSTING: u64 = 1;
const POSTED: u64 = 2;
const EARLY: u64 = 3;

const fn call_word(gen: u64, phase: u64) -> u64 {
    (gen << 2) | phase
}

impl CallPhase {
    pub(super) const fn new() -> Self {
        Self(Atomic::new(0))
    }

    /// None: a new RPC.
    fn clear(&self) {
        self.0.store(0, Relaxed);
    }

    /// The sender is about to post the Call on connection `gen`; what it
    /// stored for the Reply before is published with it.
    pub(super) fn start(&self, gen: u64) {
        self.0.store(call_word(gen, POSTING), Release);
    }

    /// Where the Call stands on connection `gen`.
    pub(super) fn on(&self, gen: u64) -> CallState {
        let word = self.0.load(Acquire);
        if word >> 2 != gen {
            return CallState::NotSent;
        }
        match word & 3 {
            POSTING => CallState::Posting,
            POSTED => CallState::Posted,
            // Another Reply already waits for the sender: this one is
            // no Reply to a Call posted.
            _ => CallState::NotSent,
        }
    }

    /// A Reply leaves itself to the sender posting on connection `gen`;
    /// false when the sender is done already.
    pub(super) fn leave_early(&self, gen: u64) -> bool {
        self.0
            .cmpxchg(call_word(gen, POSTING), call_word(gen, EARLY), Full)
            .is_ok()
    }

    /// The sender posted the Call on connection `gen`; true when a Reply
    /// was left to it meanwhile.
    pub(super) fn posted(&self, gen: u64) -> bool {
        let posted = call_word(gen, POSTED);
        match self.0.cmpxchg(call_word(gen, POSTING), posted, Full) {
            Err(w) if w == call_word(gen, EARLY) => {
                self.0.store(posted, Release);
                true
            }
            _ => false,
        }
    }

    /// The sender did not post the Call on connection `gen`; true when a
    /// Reply was left to it meanwhile.
    pub(super) fn unsent(&self, gen: u64) -> bool {
        self.0.xchg(0, Full) == call_word(gen, EARLY)
    }
}

/// Transport state of one request, kept in its slot (see
/// [`crate::sunrpc::SlotPool`]).
///
/// `mrs` is used by the sender (with `XPRT_LOCKED`) after it posted and
/// before it publishes `call` as posted with release; afterwards by the
/// Reply's handlers, which run one after the other: the cell checks that.
pub(crate) struct ReqState {
    /// Connection the MRs belong to.
    pub(super) gen: Atomic<u64>,
    /// Number of the Call's Send on that connection.
    pub(super) send_seq: Atomic<u64>,
    /// The last Call sent from this slot: its XID (as on the wire, host
    /// order; 0 before any: its RPC may be the version 2 probe) and the
    /// largest Reply it takes (`rq_rcv_buf.buflen`).
    sent: AtomicPair,
    nmrs: Atomic<u32>,
    /// Write and Reply chunk bytes registered, `u32::MAX` for none.
    offered: AtomicPair,
    /// Answered RDMA2_ERR_CANT_REPLY: every retry offers a Reply chunk
    /// over the whole receive buffer ([`plan::CantReply`]).
    reply_chunk: Atomic<bool>,
    mrs: ExclusiveCell<PostedMrs<MAX_RPC_MRS>>,
    /// Where the Call stands on which connection.
    call: CallPhase,
    /// A Reply that came while the Call was being posted: the sender
    /// finishes it once the Call's REG_MRs are posted.
    early: ExclusiveCell<Option<Pending>>,
}

impl Default for ReqState {
    fn default() -> Self {
        Self {
            gen: Atomic::new(0),
            send_seq: Atomic::new(0),
            sent: AtomicPair::new(0, 0),
            nmrs: Atomic::new(0),
            offered: AtomicPair::new(u32::MAX, u32::MAX),
            reply_chunk: Atomic::new(false),
            mrs: ExclusiveCell::new(PostedMrs::new()),
            call: CallPhase::new(),
            early: ExclusiveCell::new(None),
        }
    }
}

impl ReqState {
    /// Starts over for a new RPC in the slot. Only the request's owner
    /// calls this, before it is sent: nothing else refers to the state
    /// (`buffers_released` waited for the last RPC's Send and MRs).
    fn reset(&self) {
        // What the sender sets before it publishes the Call (`gen`,
        // `send_seq`, `offered`) nobody reads before: only the XID, read
        // when the request is released, unsent or not.
        self.sent.store(0, 0, Relaxed);
        self.reply_chunk.store(false, Relaxed);
        self.call.clear();
        self.forget_mrs();
    }

    /// The sender is about to send the Call of XID `xid` (host order),
    /// whose Reply takes at most `reply_max` bytes.
    pub(super) fn set_sent(&self, xid: u32, reply_max: u32) {
        self.sent.store(xid, reply_max, Relaxed);
    }

    /// XID of the last Call sent from this slot (host order), 0 for none.
    fn xid(&self) -> u32 {
        self.sent.load(Relaxed).0
    }

    /// The sender is about to post the Call on connection `gen`.
    pub(super) fn start_call(&self, gen: u64) {
        self.call.start(gen);
    }

    /// Where the Call stands on connection `gen`.
    pub(super) fn call_on(&self, gen: u64) -> CallState {
        self.call.on(gen)
    }

    /// Leaves `pending`, a Reply to the Call the sender is posting on
    /// connection `gen`, to the sender ([`ReqState::call_posted`]). Gives
    /// it back when the sender is done already.
    pub(super) fn park_early(&self, gen: u64, pending: Pending) -> Result<(), Pending> {
        self.early.put(pending)?;
        if self.call.leave_early(gen) {
            return Ok(());
        }
        // Not the sender's: still ours.
        match self.early.take() {
            Some(pending) => Err(pending),
            None => Ok(()),
        }
    }

    /// The sender posted the Call on connection `gen`, and put its MRs
    /// on the request: Replies may take them. Returns the Reply that came
    /// meanwhile, for the sender to finish.
    pub(super) fn call_posted(&self, gen: u64) -> Option<Pending> {
        self.call.posted(gen).then(|| self.early.take()).flatten()
    }

    /// The sender did not post the Call on connection `gen`: no Reply on
    /// it can be for the Call. Returns the Reply that came meanwhile, to
    /// drop.
    pub(super) fn call_unsent(&self, gen: u64) -> Option<Pending> {
        self.call.unsent(gen).then(|| self.early.take()).flatten()
    }

    /// What to do with RDMA2_ERR_CANT_REPLY naming `segment_index` and
    /// `length_needed`, to this request as last sent; a retry is planned
    /// with a Reply chunk from then on. Called by the Reply's handler,
    /// before it gives the request back.
    pub(super) fn cant_reply(&self, segment_index: u32, length_needed: u32) -> plan::CantReply {
        let (_, reply_max) = self.sent.load(Relaxed);
        let verdict = plan::on_cant_reply(segment_index, length_needed, &self.offered(), reply_max);
        if verdict == plan::CantReply::ResendWithReplyChunk {
            self.reply_chunk.store(true, Relaxed);
        }
        verdict
    }

    /// Whether the RPC is to offer a Reply chunk over its whole receive
    /// buffer (after RDMA2_ERR_CANT_REPLY). Read by the sender, which
    /// runs after the Reply's handler gave the request back.
    pub(super) fn wants_reply_chunk(&self) -> bool {
        self.reply_chunk.load(Relaxed)
    }

    /// Leaves `mrs`, registered for this request and posted, on it: for
    /// the Reply's handlers (published to them by the release store of
    /// `nmrs`), or, when they could not be invalidated, for the fence in
    /// `buf_free`. Only the current owner calls this, with no MRs held.
    pub(super) fn hold_mrs(&self, mrs: PostedMrs<MAX_RPC_MRS>) {
        let n = mrs.len() as u32;
        match self.mrs.try_borrow_mut() {
            Some(mut held) => *held = mrs,
            // Never: the MRs stay registered and unreachable, and `nmrs`
            // below makes `buf_free` fence them.
            None => rwarn!("request MRs in use twice\n"),
        }
        self.nmrs.store(n, Release);
    }

    /// Runs `post`, which moves the MRs it posts to the request's, in
    /// place, and leaves them on the request as [`ReqState::hold_mrs`]
    /// does. Only the current owner calls this, with no MRs held.
    pub(super) fn post_with_mrs<R>(
        &self,
        post: impl FnOnce(&mut PostedMrs<MAX_RPC_MRS>) -> R,
    ) -> R {
        let (r, n) = match self.mrs.try_borrow_mut() {
            Some(mut held) => {
                let r = post(&mut held);
                (r, held.len())
            }
            // Never: as in `hold_mrs`.
            None => {
                rwarn!("request MRs in use twice\n");
                let mut lost = PostedMrs::new();
                let r = post(&mut lost);
                (r, lost.len())
            }
        };
        // Published after the borrow ended.
        self.nmrs.store(n as u32, Release);
        r
    }

    /// Runs `f` on the MRs held on connection `gen`, in place; `None`,
    /// without running it, when there are none or they were registered
    /// on an older connection (they stay for the fence). What `f` leaves
    /// there is held again, as by [`ReqState::hold_mrs`]. Only the
    /// Reply's handler calls this.
    pub(super) fn with_mrs<R>(
        &self,
        gen: u64,
        f: impl FnOnce(&mut PostedMrs<MAX_RPC_MRS>) -> R,
    ) -> Option<R> {
        if self.nmrs.load(Acquire) == 0 || self.gen.load(Relaxed) != gen {
            return None;
        }
        // Taken, as by the LOCAL_INV path; held again below if `f`
        // leaves any.
        self.nmrs.store(0, Relaxed);
        let Some(mut held) = self.mrs.try_borrow_mut() else {
            rwarn!("request MRs in use twice\n");
            return None;
        };
        let r = f(&mut held);
        let n = held.len();
        drop(held);
        if n != 0 {
            self.nmrs.store(n as u32, Release);
        }
        Some(r)
    }

    /// Drops the MRs of an older connection, now gone with their keys
    /// (their pool counts them as orphaned). Only the request's owner
    /// calls this, before it posts the Call.
    pub(super) fn forget_mrs(&self) {
        // None held (the usual case): nothing to borrow.
        if self.nmrs.load(Relaxed) == 0 {
            return;
        }
        self.nmrs.store(0, Relaxed);
        if let Some(mut held) = self.mrs.try_borrow_mut() {
            held.forget();
        }
    }

    /// Whether MRs the peer may still reach are held.
    pub(super) fn has_mrs(&self) -> bool {
        self.nmrs.load(Acquire) != 0
    }

    pub(super) fn offered(&self) -> Offered {
        let (write, reply) = self.offered.load(Relaxed);
        let get = |v: u32| Some(v).filter(|&v| v != u32::MAX);
        Offered {
            write_chunk: get(write),
            reply_chunk: get(reply),
        }
    }

    /// The chunks the sender registered for the Call it is about to post.
    pub(super) fn set_offered(&self, offered: &Offered) {
        let put = |v: Option<u32>| v.unwrap_or(u32::MAX);
        let (write, reply) = (put(offered.write_chunk), put(offered.reply_chunk));
        self.offered.store(write, reply, Relaxed);
    }
}

/// A request got its buffers (`buf_alloc`), `grown` bytes of them new:
/// its state starts over.
pub(super) fn buffers_ready(rx: &RdmaXprt, st: &ReqState, grown: usize) {
    // As rpcrdma.ko counts its buffers reallocated for a request.
    if grown != 0 {
        rx.stats.hardway_register_count.add(grown as u64);
    }
    st.reset();
}

/// A request's buffers go back to its slot (`buf_free`).
pub(super) fn buffers_released(rx: &RdmaXprt, st: &ReqState) {
    // An RPC that ends before its answer (killed by `umount -f`, a soft
    // timeout) may have been the version 2 probe: the next Call probes,
    // rather than every Call waiting for an answer nobody will take.
    let xid = st.xid();
    if xid != 0 {
        rx.version_abandoned(xid);
    }
    // An RPC given up before its Reply (interrupted, timed out) may
    // still have its pages registered for the server: the connection
    // goes, with its keys. The glue then waits for the holds on the pages
    // (a Send not yet complete, an MR), asking `buffers_stuck` to end
    // them when that takes long.
    if st.has_mrs() {
        rx.fence_registered(st.gen.load(Relaxed));
    }
}

/// The holds on a released request's pages (a Send that gathers them, an
/// MR over them) have not gone for a while: the connection goes, which
/// flushes the Send and takes the MR's key with it.
pub(super) fn buffers_stuck(rx: &RdmaXprt, _st: &ReqState) {
    rwarn!(
        "send to {} not complete in {} s; still holding its pages\n",
        rx.peer(),
        crate::sunrpc::HOLD_WARN_SECS
    );
    rx.force_disconnect();
}
