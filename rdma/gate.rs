// SPDX-License-Identifier: GPL-2.0

//! [`QpGate`]: a QP that completion handlers and senders post on, shared
//! by every object whose memory work requests on it use.
//!
//! Every work request reaches its QP through the gate: the client's
//! [`RecvRing`](super::RecvRing), [`SendRing`](super::SendRing) and
//! [`FrwrPool`](super::FrwrPool), and the server's
//! [`Endpoint`](super::Endpoint). Each holds the gate and closes it before
//! the memory its work requests use goes, and so does the CM id, which
//! makes the gate with the QP ([`CmId::create_qp`](super::CmId)), before
//! it destroys the QP. Closing shuts the gate, so that nothing is posted
//! any more, then drains the QP: afterwards no work request is
//! outstanding and no completion handler of the QP runs. So memory a work
//! request uses is never freed while the device may use it, and no post
//! ever reaches a destroyed QP, whichever path drops what first, even a
//! post from a completion handler that began before the close.

use core::ptr::NonNull;

use kernel::error::to_result;
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Release};
use kernel::sync::{new_mutex, new_spinlock, Arc, Mutex, SpinLock};

use super::qp::send_wr;
use super::{Qp, RwCtx};
use crate::sys;

/// A live QP, while it is in an open gate.
struct QpPtr(NonNull<sys::ib_qp>);

// SAFETY: A QP may be posted on and drained from any thread.
unsafe impl Send for QpPtr {}

/// Posting on one QP, until it is closed; see the module documentation.
///
/// # Invariants
///
/// `qp` holds the QP it was opened on ([`QpGate::open`]) until
/// [`QpGate::close`] takes it; the CM id that owns that QP closes the gate
/// before destroying it, so while `qp` holds it, it is live. Work is
/// posted only under the `qp` lock, so nothing is posted once `close`
/// took it; `close` returns only once the QP was drained (by it, or by
/// the closer it waited for). `closed` is set before `close` takes the QP,
/// and never cleared.
#[pin_data]
pub(crate) struct QpGate {
    #[pin]
    qp: SpinLock<Option<QpPtr>>,
    /// Held across a drain: a second closer waits for it.
    #[pin]
    closing: Mutex<()>,
    /// Set once closing began: completion handlers that see it leave
    /// their work to the drain (a lock-free look, unlike a post).
    closed: Atomic<bool>,
    send_cq_id: Atomic<u32>,
    recv_cq_id: Atomic<u32>,
}

impl QpGate {
    /// A gate with no QP yet: a post fails until [`QpGate::open`].
    /// Allocated before the QP, so that a QP once created always has its
    /// gate.
    pub(super) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                qp <- new_spinlock!(None, "rpcrdma_rs_qp_gate"),
                closing <- new_mutex!((), "rpcrdma_rs_qp_gate_close"),
                closed: Atomic::new(false),
                send_cq_id: Atomic::new(0),
                recv_cq_id: Atomic::new(0),
            }),
            GFP_KERNEL,
        )
    }

    /// Opens the gate on `qp`.
    ///
    /// # Safety
    ///
    /// `qp` is live, the gate was never opened, and whoever destroys `qp`
    /// calls [`QpGate::close`] on this gate first.
    pub(super) unsafe fn open(&self, qp: Qp) {
        self.send_cq_id.store(qp.send_cq_id(), Release);
        self.recv_cq_id.store(qp.recv_cq_id(), Release);
        // INVARIANT: live until closed, by the caller's promise.
        *self.qp.lock() = Some(QpPtr(qp.ptr));
    }

    /// The restrack id of the QP's Send CQ, for the trace events.
    pub(crate) fn send_cq_id(&self) -> u32 {
        self.send_cq_id.load(Acquire)
    }

    /// The restrack id of the QP's Receive CQ, for the trace events.
    pub(crate) fn recv_cq_id(&self) -> u32 {
        self.recv_cq_id.load(Acquire)
    }

    /// Whether closing began: from then on nothing is posted, and every
    /// work request still outstanding completes flushed.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Acquire)
    }

    /// Posts the Send Queue chain starting at `first`. `ESHUTDOWN` once
    /// closed.
    ///
    /// # Safety
    ///
    /// `first` heads a valid, null-terminated chain, valid for the call;
    /// every `wr_cqe` and every byte its SGEs or MRs reach stays valid
    /// until its work request completed or the QP was drained, i.e.
    /// until this gate is closed.
    pub(super) unsafe fn post_send(&self, first: *const sys::ib_send_wr) -> Result {
        let qp = self.qp.lock();
        let Some(qp) = qp.as_ref() else {
            return Err(ESHUTDOWN);
        };
        let mut bad = core::ptr::null();
        // SAFETY: The QP is live while the gate holds it (type
        // invariant), and we hold the lock; the chain by the caller's
        // promise.
        to_result(unsafe { sys::rpcrdma_rs_post_send(qp.0.as_ptr(), first, &mut bad) })
    }

    /// Posts the Receive chain starting at `first`, as
    /// [`QpGate::post_send`].
    ///
    /// # Safety
    ///
    /// As for [`QpGate::post_send`].
    pub(super) unsafe fn post_recv(&self, first: *const sys::ib_recv_wr) -> Result {
        let qp = self.qp.lock();
        let Some(qp) = qp.as_ref() else {
            return Err(ESHUTDOWN);
        };
        let mut bad = core::ptr::null();
        // SAFETY: As for `post_send`.
        to_result(unsafe { sys::rpcrdma_rs_post_recv(qp.0.as_ptr(), first, &mut bad) })
    }

    /// Posts the work requests of every context of `rw`, in order, with
    /// only the last signalled, on `cqe` (by which time the others have
    /// completed too: a failing one completes with no handler and flushes
    /// the rest), in one call.
    ///
    /// # Safety
    ///
    /// `rw` must be valid for writes, on this gate's QP, and not in use by
    /// anyone else during the call; its contexts and `cqe` stay valid and
    /// unchanged until that completion ran or the QP was drained, even
    /// when this fails (some may be posted). It is a pointer, not a
    /// borrow, as for [`QpGate::post_send_after_rw`].
    pub(super) unsafe fn post_rw(&self, rw: *mut [RwCtx], cqe: *mut sys::ib_cqe) -> Result {
        let first = {
            // SAFETY: Valid and ours until the post below (the caller's
            // promise); the borrow ends with this block.
            let rw = unsafe { &mut *rw };
            let Some((last, rest)) = rw.split_last_mut() else {
                return Err(EINVAL);
            };
            // SAFETY: `last` stays until its completion (the caller's
            // promise).
            let mut first = unsafe { last.signalled_wrs(cqe) }?;
            for ctx in rest.iter_mut().rev() {
                // SAFETY: `first` heads the chain built so far, valid until
                // the post below; the contexts stay (the caller's promise).
                first = unsafe { ctx.link_before(first) };
            }
            first
        };
        // SAFETY: The chain is of contexts on our QP, which stay until it
        // completed or the QP was drained (the caller's promise).
        unsafe { self.post_send(first.as_ptr()) }
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
    /// `cqe` must stay valid, and the memory of `sges` mapped and
    /// unmodified, until the Send completes (successfully, flushed, or
    /// implicitly by a later signalled work request) or the QP was
    /// drained; `rw` must be valid for writes, on this gate's QP, and not
    /// in use by anyone else during the call. Each of its contexts is
    /// left alone (not dropped, linked or posted again) until the Send
    /// completed or the QP was drained, even when this fails: some work
    /// requests may have been posted. It is a pointer, not a borrow: the
    /// Send's completion may release the contexts before this returns.
    pub(super) unsafe fn post_send_after_rw(
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
        // SAFETY: The chain ends with our Send, which the device has
        // consumed when the call returns (the contexts' last work
        // requests still point at it, but are never posted again);
        // `cqe`, the memory and the contexts outlive the Send by the
        // caller's promise.
        unsafe { self.post_send(first.as_ptr()) }
    }

    /// Shuts the gate and drains the QP, the Receive Queue first, then the
    /// Send Queue, as rpcrdma.ko does: on return nothing is posted on it
    /// any more and every completion handler of it has run. Must not be
    /// called from one of the QP's completion handlers (the drain waits
    /// for them). Idempotent.
    pub(crate) fn close(&self) {
        self.closed.store(true, Release);
        let _closing = self.closing.lock();
        let Some(qp) = self.qp.lock().take() else {
            return;
        };
        // SAFETY: The QP was in the gate, so it is live, and its owner
        // waits for this close before destroying it (type invariant).
        // Queues sized with room for the drain's work requests are the
        // owner's part (`+ 1` each).
        unsafe {
            sys::ib_drain_rq(qp.0.as_ptr());
            sys::ib_drain_sq(qp.0.as_ptr());
        }
    }
}
