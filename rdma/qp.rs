// SPDX-License-Identifier: GPL-2.0

//! A QP borrowed from its CM id, and the Send work requests posted on it
//! (through its [`QpGate`](super::QpGate)).

use core::ptr::NonNull;

use kernel::prelude::*;

use crate::sys;

/// A queue pair, borrowed from its CM id.
///
/// # Invariants
///
/// `ptr` is a live QP.
#[derive(Clone, Copy)]
pub(crate) struct Qp {
    pub(super) ptr: NonNull<sys::ib_qp>,
}

impl Qp {
    /// The raw pointer, for rdma_rw.
    pub(super) fn as_ptr(&self) -> *mut sys::ib_qp {
        self.ptr.as_ptr()
    }

    /// The restrack id of the QP's Send CQ (rpcrdma.ko's `cq_id` in its
    /// trace events).
    pub(crate) fn send_cq_id(&self) -> u32 {
        // SAFETY: A live QP (type invariant) keeps its CQs.
        unsafe { cq_id((*self.ptr.as_ptr()).send_cq) }
    }

    /// As [`Qp::send_cq_id`], of the Receive CQ.
    pub(crate) fn recv_cq_id(&self) -> u32 {
        // SAFETY: A live QP (type invariant) keeps its CQs.
        unsafe { cq_id((*self.ptr.as_ptr()).recv_cq) }
    }

    /// Moves the QP to the error state, as a responder error does, with
    /// no error completion and no CM event: a test fault. What is posted
    /// is flushed, and completes as every flushed work request does.
    pub(crate) fn force_error(&self) -> Result {
        // SAFETY: A live QP (type invariant); a state change is allowed
        // whatever is posted.
        kernel::error::to_result(unsafe { sys::rpcrdma_rs_qp_error(self.ptr.as_ptr()) })
    }
}

/// A Send of `sges`, completing on `cqe` if `signalled` (or if it fails).
pub(super) fn send_wr(
    cqe: *mut sys::ib_cqe,
    sges: &mut [sys::ib_sge],
    signalled: bool,
    invalidate: Option<u32>,
) -> Result<sys::ib_send_wr> {
    let mut wr = sys::ib_send_wr {
        sg_list: sges.as_mut_ptr(),
        num_sge: i32::try_from(sges.len()).map_err(|_| EINVAL)?,
        opcode: if invalidate.is_some() {
            sys::ib_wr_opcode_IB_WR_SEND_WITH_INV
        } else {
            sys::ib_wr_opcode_IB_WR_SEND
        },
        send_flags: if signalled {
            sys::ib_send_flags_IB_SEND_SIGNALED
        } else {
            0
        },
        ..Default::default()
    };
    wr.__bindgen_anon_1.wr_cqe = cqe;
    if let Some(rkey) = invalidate {
        wr.ex.invalidate_rkey = rkey;
    }
    Ok(wr)
}

/// Send queue work requests linked for one post. Each stays owned by the
/// context it lives in (an MR's slot, say), which outlives the post.
///
/// # Invariants
///
/// `first` to `last` is a valid null-terminated chain of the work requests
/// pushed, or both are null.
pub(super) struct SendChain {
    first: *mut sys::ib_send_wr,
    last: *mut sys::ib_send_wr,
}

impl SendChain {
    /// An empty chain.
    pub(super) fn new() -> Self {
        Self {
            first: core::ptr::null_mut(),
            last: core::ptr::null_mut(),
        }
    }

    /// Appends `wr`, which ends the chain.
    ///
    /// # Safety
    ///
    /// `wr` is a valid work request, not in any other chain, that stays
    /// valid and untouched by anyone else until the chain is posted.
    pub(super) unsafe fn push(&mut self, wr: *mut sys::ib_send_wr) {
        // SAFETY: `wr` is valid by the caller's promise, and so is `last`
        // (type invariant).
        unsafe {
            (*wr).next = core::ptr::null_mut();
            if self.last.is_null() {
                self.first = wr;
            } else {
                (*self.last).next = wr;
            }
        }
        // INVARIANT: `wr` ends the chain.
        self.last = wr;
    }

    /// The first work request, unless the chain is empty.
    pub(super) fn first(&self) -> Option<*const sys::ib_send_wr> {
        (!self.first.is_null()).then_some(self.first.cast_const())
    }
}

/// The restrack id of `cq`, 0 for none.
///
/// # Safety
///
/// `cq` is null or a live CQ.
pub(super) unsafe fn cq_id(cq: *const sys::ib_cq) -> u32 {
    if cq.is_null() {
        return 0;
    }
    // SAFETY: The caller's promise.
    unsafe { (*cq).res.id }
}
