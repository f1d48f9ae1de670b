// SPDX-License-Identifier: GPL-2.0

//! Per-request state, kept in the request's slot: the MRs registered for
//! it and whether a Send still reads its pages. Giving the buffers back
//! waits for both to end.

use core::cell::UnsafeCell;
use core::ptr::NonNull;

use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};

use super::connection::MAX_RPC_MRS;
use super::xprt::RdmaXprt;
use crate::proto::plan::Offered;
use crate::rdma::FrwrList;
use crate::sunrpc::{Slot, SlotOwner, SlotPool};
use crate::sys;

/// Transport state of one request, kept in its slot (see
/// [`crate::sunrpc::SlotPool`]).
///
/// # Invariants
///
/// `mrs` is written by the sender (with `XPRT_LOCKED`) before it posts
/// and publishes `nmrs` with release; afterwards only by the Reply's
/// handlers, which run one after the other.
#[repr(C)]
pub(crate) struct ReqState {
    /// Connection the MRs belong to.
    pub(super) gen: Atomic<u64>,
    /// Number of the Call's Send on that connection.
    pub(super) send_seq: Atomic<u64>,
    nmrs: Atomic<u32>,
    /// Write chunk bytes registered, `u32::MAX` for none.
    pub(super) offered_write: Atomic<u32>,
    /// Reply chunk bytes registered, `u32::MAX` for none.
    pub(super) offered_reply: Atomic<u32>,
    /// Non-zero while a Send gathers this request's own pages (see
    /// `Ep::map_pages`): the request's memory must stay until it is clear.
    pub(super) send_busy: Atomic<u32>,
    mrs: UnsafeCell<FrwrList<MAX_RPC_MRS>>,
}

// SAFETY: See the type invariants.
unsafe impl Sync for ReqState {}

impl Default for ReqState {
    fn default() -> Self {
        Self {
            gen: Atomic::new(0),
            send_seq: Atomic::new(0),
            nmrs: Atomic::new(0),
            offered_write: Atomic::new(u32::MAX),
            offered_reply: Atomic::new(u32::MAX),
            send_busy: Atomic::new(0),
            mrs: UnsafeCell::new(FrwrList::new()),
        }
    }
}

impl ReqState {
    /// # Safety
    ///
    /// `rqst` is a live forward request of one of our transports.
    pub(super) unsafe fn of<'a>(rqst: NonNull<sys::rpc_rqst>) -> &'a Self {
        // SAFETY: Our transports' forward requests are slots of their
        // pools (`SlotOwner` contract).
        unsafe { Slot::<Self>::of(rqst) }.state()
    }

    /// Starts over for a new RPC in the slot. Only the request's owner
    /// calls this, before it is sent: nothing else refers to the state
    /// (`buffers_released` waited for the last RPC's Send and MRs).
    fn reset(&self) {
        self.gen.store(0, Relaxed);
        self.send_seq.store(0, Relaxed);
        self.offered_write.store(u32::MAX, Relaxed);
        self.offered_reply.store(u32::MAX, Relaxed);
        self.send_busy.store(0, Relaxed);
        self.forget_mrs();
    }

    /// Leaves `mrs`, registered for this request, on it: for the Reply's
    /// handlers (published to them by the release store of `nmrs`), or,
    /// when they could not be invalidated, for the fence in `buf_free`.
    /// Only the current owner calls this (type invariants), with no MRs
    /// held.
    pub(super) fn hold_mrs(&self, mrs: FrwrList<MAX_RPC_MRS>) {
        let n = mrs.len() as u32;
        // SAFETY: Only the current owner calls this (type invariants).
        unsafe { *self.mrs.get() = mrs };
        self.nmrs.store(n, Release);
    }

    /// Takes the MRs held on connection `gen`; none when they were
    /// registered on an older connection (they stay for the fence).
    pub(super) fn take_mrs(&self, gen: u64) -> FrwrList<MAX_RPC_MRS> {
        if self.nmrs.load(Acquire) == 0 || self.gen.load(Relaxed) != gen {
            return FrwrList::new();
        }
        self.nmrs.store(0, Relaxed);
        // SAFETY: Published by the release store of `nmrs`, and ours now
        // (type invariants).
        unsafe { core::mem::replace(&mut *self.mrs.get(), FrwrList::new()) }
    }

    /// Drops the MRs of an older connection, now gone with their keys
    /// (their pool counts them as orphaned). Only the request's owner
    /// calls this, before it posts the Call.
    pub(super) fn forget_mrs(&self) {
        self.nmrs.store(0, Relaxed);
        // SAFETY: The sender owns the state before it posts (type
        // invariants).
        unsafe { *self.mrs.get() = FrwrList::new() };
    }

    /// Whether MRs the peer may still reach are held.
    pub(super) fn has_mrs(&self) -> bool {
        self.nmrs.load(Acquire) != 0
    }

    pub(super) fn offered(&self) -> Offered {
        let get = |a: &Atomic<u32>| Some(a.load(Relaxed)).filter(|&v| v != u32::MAX);
        Offered {
            write_chunk: get(&self.offered_write),
            reply_chunk: get(&self.offered_reply),
        }
    }
}

// SAFETY: `RdmaXprt` is `repr(C)` with its `rpc_xprt` first and is
// allocated by `xprt_alloc` for its size; `setup` initialises `slots`
// before the transport is used, and its ops table holds the four slot
// and buffer operations of `crate::sunrpc` for `RdmaXprt`.
unsafe impl SlotOwner for RdmaXprt {
    type State = ReqState;

    fn slots(&self) -> &SlotPool<ReqState> {
        &self.slots
    }

    fn buffers_ready(&self, st: &ReqState, grown: usize) {
        // As rpcrdma.ko counts its buffers reallocated for a request.
        self.stats.hardway_register_count.add(grown as u64);
        st.reset();
    }

    fn buffers_released(&self, st: &ReqState) {
        // An RPC given up before its Reply (interrupted, timed out) may
        // still have its pages in use: by a Send not yet complete, or
        // registered for the server. Neither may reach the buffers once
        // the next RPC owns them.
        if st.send_busy.load(Acquire) != 0 {
            self.wait_send_done(&st.send_busy);
        }
        if st.has_mrs() {
            self.fence_registered(st.gen.load(Relaxed));
        }
    }
}
