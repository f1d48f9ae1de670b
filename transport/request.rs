// SPDX-License-Identifier: GPL-2.0

//! Per-request state, kept in front of the request's buffers: the MRs
//! registered for it and whether a Send still reads its pages. Freeing a
//! request waits for both to end.

use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::ptr::NonNull;

use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};

use super::connection::MAX_RPC_MRS;
use super::xprt::RdmaXprt;
use crate::proto::plan::Offered;
use crate::rdma::FrwrList;
use crate::sys;

/// Transport state of one request, kept in front of its buffers (see
/// [`op_buf_alloc`]).
///
/// # Invariants
///
/// `mrs` is written by the sender (with `XPRT_LOCKED`) before it posts
/// and publishes `nmrs` with release; afterwards only by the Reply's
/// handlers, which run one after the other.
#[repr(C)]
pub(super) struct ReqState {
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

/// Bytes in front of `rq_buffer`: the state, rounded up to 16.
const REQ_PREFIX: usize = (core::mem::size_of::<ReqState>() + 15) & !15;

impl ReqState {
    fn new() -> Self {
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

    /// # Safety
    ///
    /// `rqst` is live and has buffers from [`op_buf_alloc`].
    pub(super) unsafe fn of<'a>(rqst: NonNull<sys::rpc_rqst>) -> &'a Self {
        // SAFETY: `op_buf_alloc` put a `ReqState` `REQ_PREFIX` bytes before
        // `rq_buffer`.
        unsafe {
            &*(*rqst.as_ptr())
                .rq_buffer
                .cast::<u8>()
                .sub(REQ_PREFIX)
                .cast::<Self>()
        }
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
    /// (their pool counts them as orphaned). Only the sender calls this.
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

/// Allocates the Call and Reply buffers of a request in one piece.
///
/// # Safety
///
/// Called by sunrpc with a live task that owns a request.
pub(super) unsafe extern "C" fn op_buf_alloc(task: *mut sys::rpc_task) -> c_int {
    // SAFETY: sunrpc passes a task with a request.
    unsafe {
        let rqst = (*task).tk_rqstp;
        let call = (*rqst).rq_callsize;
        let Some(size) = call
            .checked_add((*rqst).rq_rcvsize)
            .and_then(|n| n.checked_add(REQ_PREFIX))
        else {
            return ENOMEM.to_errno();
        };
        let base = sys::rpcrdma_rs_task_alloc(size).cast::<u8>();
        if base.is_null() {
            return ENOMEM.to_errno();
        }
        // kmalloc memory is aligned for `ReqState`.
        base.cast::<ReqState>().write(ReqState::new());
        let buf = base.add(REQ_PREFIX);
        (*rqst).rq_buffer = buf.cast();
        (*rqst).rq_rbuffer = buf.add(call).cast();
    }
    0
}

/// Frees what [`op_buf_alloc`] allocated.
///
/// # Safety
///
/// Called by sunrpc with a live task whose request has buffers.
pub(super) unsafe extern "C" fn op_buf_free(task: *mut sys::rpc_task) {
    // SAFETY: sunrpc passes a task whose `rq_buffer` came from us, the
    // request state in front of it.
    unsafe {
        let rqst = (*task).tk_rqstp;
        if (*rqst).rq_buffer.is_null() {
            return;
        }
        let st = ReqState::of(NonNull::new_unchecked(rqst));
        let rx = RdmaXprt::from_raw((*rqst).rq_xprt);
        // An RPC given up before its Reply (interrupted, timed out) may
        // still have its pages in use: by a Send not yet complete, or
        // registered for the server. Neither may outlive the memory.
        if st.send_busy.load(Acquire) != 0 {
            rx.wait_send_done(&st.send_busy);
        }
        if st.has_mrs() {
            rx.fence_registered(st.gen.load(Relaxed));
        }
        sys::rpcrdma_rs_kfree((*rqst).rq_buffer.cast::<u8>().sub(REQ_PREFIX).cast());
        (*rqst).rq_buffer = core::ptr::null_mut();
        (*rqst).rq_rbuffer = core::ptr::null_mut();
    }
}
