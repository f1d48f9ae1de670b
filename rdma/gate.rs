// SPDX-License-Identifier: GPL-2.0

//! [`QpGate`]: a QP that completion handlers and senders post on, shared
//! by every object whose memory work requests on it use.
//!
//! Each such object ([`RecvRing`](super::RecvRing),
//! [`SendRing`](super::SendRing), [`FrwrPool`](super::FrwrPool)) holds the
//! gate and closes it in its `Drop`, and so does the CM id before it
//! destroys the QP. Closing shuts the gate, so that nothing is posted any
//! more, then drains the QP: afterwards no work request is outstanding and
//! no completion handler of the QP runs. So memory a work request uses is
//! never freed while the device may use it, and no post ever reaches a
//! destroyed QP, whichever path drops what first.

use core::ptr::NonNull;

use kernel::error::to_result;
use kernel::prelude::*;
use kernel::sync::{new_mutex, new_spinlock, Arc, Mutex, SpinLock};

use super::Qp;
use crate::sys;

/// A live QP, while it is in an open gate.
struct QpPtr(NonNull<sys::ib_qp>);

// SAFETY: A QP may be posted on and drained from any thread.
unsafe impl Send for QpPtr {}

/// Posting on one QP, until it is closed; see the module documentation.
///
/// # Invariants
///
/// `qp` holds the QP it was made for until [`QpGate::close`] takes it;
/// the CM id that owns that QP closes the gate before destroying it, so
/// while `qp` holds it, it is live. Work is posted only under the `qp`
/// lock, so nothing is posted once `close` took it; `close` returns only
/// once the QP was drained (by it, or by the closer it waited for).
#[pin_data]
pub(crate) struct QpGate {
    #[pin]
    qp: SpinLock<Option<QpPtr>>,
    /// Held across a drain: a second closer waits for it.
    #[pin]
    closing: Mutex<()>,
    send_cq_id: u32,
}

impl QpGate {
    /// A gate open on `qp`.
    ///
    /// # Safety
    ///
    /// `qp` is live, and whoever destroys it calls [`QpGate::close`] on
    /// the returned gate first.
    pub(super) unsafe fn new(qp: Qp) -> Result<Arc<Self>> {
        let send_cq_id = qp.send_cq_id();
        Arc::pin_init(
            pin_init!(Self {
                qp <- new_spinlock!(Some(QpPtr(qp.ptr)), "rpcrdma_rs_qp_gate"),
                closing <- new_mutex!((), "rpcrdma_rs_qp_gate_close"),
                send_cq_id,
            }),
            GFP_KERNEL,
        )
    }

    /// The restrack id of the QP's Send CQ, for the trace events.
    pub(crate) fn send_cq_id(&self) -> u32 {
        self.send_cq_id
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

    /// Shuts the gate and drains the QP: on return nothing is posted on
    /// it any more and every completion handler of it has run. Must not be
    /// called from one of the QP's completion handlers (the drain waits
    /// for them). Idempotent.
    pub(crate) fn close(&self) {
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
