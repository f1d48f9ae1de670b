// SPDX-License-Identifier: GPL-2.0

//! Posting work requests on a QP.

use core::ptr::NonNull;

use kernel::error::to_result;
use kernel::prelude::*;
use kernel::types::Opaque;

use super::{DmaBuf, RwCtx};
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
    /// The raw pointer, for a completion context that reposts.
    pub(crate) fn as_ptr(&self) -> *mut sys::ib_qp {
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

    /// Rebuilds a borrowed QP from [`Qp::as_ptr`].
    ///
    /// # Safety
    ///
    /// `ptr` must be a live QP for the lifetime of the returned value.
    pub(crate) unsafe fn from_ptr(ptr: *mut sys::ib_qp) -> Option<Self> {
        NonNull::new(ptr).map(|ptr| Self { ptr })
    }

    /// Posts the work requests of `before`, then a Send gathering `sges`,
    /// in one call. Only a `signalled` Send completes on `cqe` when it
    /// succeeds; any Send does when it fails.
    ///
    /// # Safety
    ///
    /// `cqe` must stay valid, and the memory of `sges` mapped and
    /// unmodified, until the Send completes (successfully, flushed, or
    /// implicitly by a later signalled work request); as for
    /// [`Qp::post_send_chain`] for `before`.
    pub(crate) unsafe fn post_send_after(
        &self,
        cqe: *mut sys::ib_cqe,
        sges: &mut [sys::ib_sge],
        signalled: bool,
        before: &SendChain,
    ) -> Result {
        let before = before.ends();
        let mut wr = send_wr(cqe, sges, signalled, None)?;
        let mut bad = core::ptr::null();
        let first = match before {
            Some((first, last)) => {
                // SAFETY: The caller promises `last` is a valid WR; it
                // points at our Send only for the duration of the post.
                unsafe { (*last).next = &mut wr };
                first.cast_const()
            }
            None => &raw const wr,
        };
        // SAFETY: `self.ptr` is live; the WRs and SGEs are consumed before
        // the call returns; `cqe` and the memory outlive the Send by the
        // caller's promise.
        let rc = unsafe { sys::rpcrdma_rs_post_send(self.ptr.as_ptr(), first, &mut bad) };
        if let Some((_, last)) = before {
            // SAFETY: `last` is valid (the caller's promise); unlinking it
            // leaves no pointer to our stack.
            unsafe { (*last).next = core::ptr::null_mut() };
        }
        to_result(rc)
    }

    /// Posts the work requests of `rw`, unsignalled, then a Send
    /// gathering `sges`, as a Send With Invalidate of `invalidate` when it
    /// is given (the peer's NIC invalidates that rkey of its own when the
    /// Send arrives: RFC 8797 remote invalidation), in one call. A
    /// `signalled` Send completes on `cqe` once all of them did; any Send
    /// does when it fails, and one of them that fails flushes the Send.
    ///
    /// # Safety
    ///
    /// As for [`Qp::post_send_after`]; `rw` must be valid for writes and
    /// not in use by anyone else during the call. Each of its contexts is
    /// left alone (not dropped, linked or posted again) until the Send
    /// completed or the QP was drained, even when this fails: some work
    /// requests may have been posted. It is a pointer, not a borrow: the
    /// Send's completion may release the contexts before this returns.
    pub(crate) unsafe fn post_send_after_rw(
        &self,
        cqe: *mut sys::ib_cqe,
        sges: &mut [sys::ib_sge],
        rw: *mut [RwCtx],
        invalidate: Option<u32>,
        signalled: bool,
    ) -> Result {
        let mut wr = send_wr(cqe, sges, signalled, invalidate)?;
        let mut first = NonNull::from(&mut wr);
        // SAFETY: Valid and ours until the post below (the caller's
        // promise); the borrow ends with the loop.
        for ctx in unsafe { (*rw).iter_mut().rev() } {
            // SAFETY: `first` is our Send or a work request of a context
            // linked before it, valid until the post below; the caller
            // leaves the contexts alone until the Send completes.
            first = unsafe { ctx.link_before(first) };
        }
        let mut bad = core::ptr::null();
        // SAFETY: `self.ptr` is live; the chain ends with our Send, which
        // the device has consumed when the call returns (the contexts' last
        // work requests still point at it, but are never posted again);
        // `cqe`, the memory and the contexts outlive the Send by the
        // caller's promise.
        to_result(unsafe { sys::rpcrdma_rs_post_send(self.ptr.as_ptr(), first.as_ptr(), &mut bad) })
    }

    /// Posts `chain` (REG_MRs, LOCAL_INVs) in one call.
    ///
    /// # Safety
    ///
    /// Every work request of `chain`, and its `wr_cqe`, stays valid until
    /// it completes (successfully, flushed, or implicitly by a later
    /// signalled work request).
    pub(crate) unsafe fn post_send_chain(&self, chain: &SendChain) -> Result {
        let Some((first, _)) = chain.ends() else {
            return Ok(());
        };
        let mut bad = core::ptr::null();
        // SAFETY: `self.ptr` is live; the chain is valid by the caller's
        // promise.
        to_result(unsafe { sys::rpcrdma_rs_post_send(self.ptr.as_ptr(), first, &mut bad) })
    }

    /// Posts a chain of Receives built with [`RecvWr::link`].
    ///
    /// # Safety
    ///
    /// `first` must head a valid, null-terminated chain whose buffers stay
    /// mapped, and not accessed by the CPU, and whose `wr_cqe`s stay
    /// valid, until each Receive completes (successfully or flushed).
    pub(crate) unsafe fn post_recv_chain(&self, first: *mut sys::ib_recv_wr) -> Result {
        let mut bad = core::ptr::null();
        // SAFETY: `self.ptr` is live; the chain is valid by the caller's
        // promise.
        to_result(unsafe { sys::rpcrdma_rs_post_recv(self.ptr.as_ptr(), first, &mut bad) })
    }
}

/// A Send of `sges`, completing on `cqe` if `signalled` (or if it fails).
fn send_wr(
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

/// A Receive work request over all of one [`DmaBuf`], kept with the
/// buffer so that several can be chained into one post.
///
/// # Invariants
///
/// `wr` and `sge` are only written by [`RecvWr::link`], whose caller owns
/// the buffer while it is not posted.
pub(crate) struct RecvWr {
    wr: Opaque<sys::ib_recv_wr>,
    sge: Opaque<sys::ib_sge>,
}

// SAFETY: `wr` and `sge` are written only by `link`, whose caller owns
// the buffer (type invariant), so never by two threads at once; ib_core
// reads them during the post, and the rest is plain data.
unsafe impl Send for RecvWr {}
// SAFETY: As above.
unsafe impl Sync for RecvWr {}

impl RecvWr {
    /// A Receive into all of `buf`.
    pub(crate) fn new(buf: &DmaBuf, lkey: u32) -> Self {
        Self {
            wr: Opaque::new(sys::ib_recv_wr {
                num_sge: 1,
                ..Default::default()
            }),
            sge: Opaque::new(sys::ib_sge {
                addr: buf.addr,
                length: buf.len_u32(),
                lkey,
            }),
        }
    }

    /// Puts this Receive, completing on `cqe`, in front of the chain
    /// `next` (null for none) and returns the new head.
    ///
    /// # Safety
    ///
    /// The caller owns the buffer (it is not posted), and `self` stays at
    /// its address until the chain is posted.
    pub(crate) unsafe fn link(
        &self,
        cqe: *mut sys::ib_cqe,
        next: *mut sys::ib_recv_wr,
    ) -> *mut sys::ib_recv_wr {
        let wr = self.wr.get();
        // SAFETY: By the caller's promise nobody else uses `wr` now; the
        // pointers are taken at their final addresses.
        unsafe {
            (*wr).sg_list = self.sge.get();
            (*wr).next = next;
            (*wr).__bindgen_anon_1.wr_cqe = cqe;
        }
        wr
    }
}

/// Send queue work requests linked for one post. Each stays owned by the
/// context it lives in (an MR's slot, say), which outlives the post.
///
/// # Invariants
///
/// `first` to `last` is a valid null-terminated chain of the work requests
/// pushed, or both are null.
pub(crate) struct SendChain {
    first: *mut sys::ib_send_wr,
    last: *mut sys::ib_send_wr,
}

impl SendChain {
    /// An empty chain.
    pub(crate) fn new() -> Self {
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

    /// The first and last work request, unless the chain is empty.
    fn ends(&self) -> Option<(*mut sys::ib_send_wr, *mut sys::ib_send_wr)> {
        (!self.first.is_null()).then_some((self.first, self.last))
    }

    /// Whether nothing was pushed.
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_null()
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
