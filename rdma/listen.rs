// SPDX-License-Identifier: GPL-2.0

//! Listening RDMA-CM identifiers and the connection requests they receive.
//!
//! rdma_cm delivers a connection request on a new child id, created with
//! the listener's handler and context, and holds the handler mutexes of
//! both ids during the call. So the child can be accepted right there
//! (`rdma_accept` wants its handler mutex held), but neither id may be
//! destroyed there: a rejected child is destroyed by rdma_cm itself when
//! the callback returns non-zero (cma.c, `cma_ib_req_handler`).

use core::ffi::c_void;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;

use kernel::error::{from_err_ptr, to_result};
use kernel::prelude::*;
use kernel::sync::Arc;

use super::cm::cm_event_handler;
use super::{CmEvent, CmHandler, CmId, ConnParam, Cq, Device, Pd, Qp, QpCaps};
use crate::sys;

/// Private data bytes kept from a connection request: all an IB CM REQ
/// can carry after rdma_cm's own header (92 - 36).
pub(crate) const REQ_PVT_LEN: usize = 56;

/// `IB_CM_REJ_CONSUMER_DEFINED`.
const REJ_CONSUMER_DEFINED: u8 = 28;

/// Receives the events of a [`Listener`]. Called in the CM's process
/// context with the listener's handler mutex held: it may sleep, but must
/// not destroy the listener.
pub(crate) trait ListenHandler: Sync {
    /// A connection request: accept it with [`ConnRequest::accept`], or
    /// reject it with [`ConnRequest::reject`] or by dropping it.
    fn connect_request(&self, req: ConnRequest<'_>);

    /// Any other event of the listening id (address change, device
    /// removal).
    fn event(&self, _event: CmEvent) {}
}

/// A listening RC id.
///
/// # Invariants
///
/// `ptr` is a live `rdma_cm_id` owned by this value, whose handler is
/// [`listen_handler::<L>`] and whose context is a `L` that outlives it.
pub(crate) struct Listener<L: ListenHandler> {
    ptr: NonNull<sys::rdma_cm_id>,
    _handler: PhantomData<*const L>,
}

// SAFETY: An `rdma_cm_id` may be used and destroyed from any thread; the
// handler is `Sync`.
unsafe impl<L: ListenHandler> Send for Listener<L> {}
// SAFETY: `&Listener` allows no operation.
unsafe impl<L: ListenHandler> Sync for Listener<L> {}

/// Entry point called by rdma_cm for the listener and for each new child
/// id until its request is settled.
///
/// # Safety
///
/// Only called by rdma_cm, with the arguments its contract promises.
unsafe extern "C" fn listen_handler<L: ListenHandler>(
    id: *mut sys::rdma_cm_id,
    event: *mut sys::rdma_cm_event,
) -> i32 {
    // SAFETY: `id` is the listener or a child of it, which inherits its
    // context: a `L` that outlives the listener (type invariant), and so
    // this call, which destroying the listener waits for.
    let handler = unsafe { &*(*id).context.cast::<L>() };
    // SAFETY: rdma_cm passes a valid event for the duration of the call.
    if unsafe { (*event).event } == sys::rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_REQUEST {
        let mut destroy = false;
        let id = NonNull::new(id);
        if let Some(id) = id {
            // SAFETY: `id` is the new child, `event` its request; both are
            // valid for this call, which `req` cannot outlive.
            let req = unsafe { ConnRequest::new(id, event, &mut destroy) };
            handler.connect_request(req);
        }
        // Non-zero has rdma_cm destroy the child: the only way to do it
        // from within its own callback.
        return i32::from(destroy || id.is_none());
    }
    // SAFETY: As above.
    handler.event(unsafe { CmEvent::from_raw(event) });
    // Never destroy the listener here: its owner does.
    0
}

impl<L: ListenHandler> Listener<L> {
    /// Creates an RC id in `net`, bound to `addr` and listening with
    /// `backlog`, whose events and connection requests go to `handler`.
    ///
    /// # Safety
    ///
    /// `net` must be a valid network namespace, `addr` a valid socket
    /// address, and `handler` must stay valid until the returned listener
    /// is dropped.
    pub(crate) unsafe fn new(
        net: *mut sys::net,
        handler: *const L,
        addr: *const sys::sockaddr,
        backlog: i32,
    ) -> Result<Self> {
        // SAFETY: The callback has the right signature; `handler` outlives
        // the id by the caller's guarantee.
        let ptr = from_err_ptr(unsafe {
            sys::rpcrdma_rs_create_id(
                net,
                Some(listen_handler::<L>),
                handler.cast_mut().cast::<c_void>(),
                sys::rdma_ucm_port_space_RDMA_PS_TCP,
                sys::ib_qp_type_IB_QPT_RC,
            )
        })?;
        // INVARIANT: a new id with our handler; dropped (destroyed) on
        // any error below.
        let this = Self {
            ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
            _handler: PhantomData,
        };
        // SAFETY: `this.ptr` is live and not yet bound; `addr` is valid
        // by the caller's guarantee (rdma_bind_addr copies it).
        unsafe {
            // An IPv6 wildcard must not take IPv4 too (as svcrdma does).
            to_result(sys::rdma_set_afonly(this.ptr.as_ptr(), 1))?;
            to_result(sys::rdma_bind_addr(this.ptr.as_ptr(), addr.cast_mut()))?;
            to_result(sys::rdma_listen(this.ptr.as_ptr(), backlog))?;
        }
        Ok(this)
    }
}

impl<L: ListenHandler> Listener<L> {
    /// The bound address (with the port chosen, if it was 0), valid while
    /// the listener lives.
    pub(crate) fn src_addr(&self) -> *const sys::sockaddr {
        // SAFETY: `ptr` is live (type invariant); only the address is taken.
        unsafe { (&raw const (*self.ptr.as_ptr()).route.addr.src_addr).cast() }
    }
}

impl<L: ListenHandler> Drop for Listener<L> {
    fn drop(&mut self) {
        // SAFETY: `ptr` is live and owned; this waits for any running
        // callback of the listener, including connection requests.
        unsafe { sys::rdma_destroy_id(self.ptr.as_ptr()) };
    }
}

/// What [`ConnRequest::accept`] builds the QP of: a PD, two CQs (maybe
/// one twice) and the queue sizes.
pub(crate) struct QpInit<'a> {
    pub(crate) pd: &'a Arc<Pd>,
    pub(crate) send_cq: &'a Arc<Cq>,
    pub(crate) recv_cq: &'a Arc<Cq>,
    pub(crate) caps: QpCaps,
}

/// A connection request, valid for the duration of
/// [`ListenHandler::connect_request`]. Dropping it without
/// [`ConnRequest::accept`] rejects it, and rdma_cm destroys the child id.
///
/// # Invariants
///
/// `id` is the live child id of the request, whose callback (holding its
/// handler mutex) is running for `'a`; `settled` is set once the request
/// was accepted or rejected, and `*destroy` once rdma_cm is to destroy the
/// child.
pub(crate) struct ConnRequest<'a> {
    id: NonNull<sys::rdma_cm_id>,
    private: [u8; REQ_PVT_LEN],
    private_len: usize,
    responder_resources: u8,
    initiator_depth: u8,
    settled: bool,
    destroy: &'a mut bool,
}

impl<'a> ConnRequest<'a> {
    /// # Safety
    ///
    /// `id` and `event` must be the child id and the CONNECT_REQUEST event
    /// of the callback running for `'a`.
    unsafe fn new(
        id: NonNull<sys::rdma_cm_id>,
        event: *const sys::rdma_cm_event,
        destroy: &'a mut bool,
    ) -> Self {
        // SAFETY: For CONNECT_REQUEST on an RC id, `param.conn` is the
        // active member of the union; the event is valid (caller).
        let conn = unsafe { &(*event).param.conn };
        let mut private = [0u8; REQ_PVT_LEN];
        let private_len = usize::from(conn.private_data_len).min(REQ_PVT_LEN);
        if !conn.private_data.is_null() && private_len > 0 {
            // SAFETY: rdma_cm guarantees `private_data` holds
            // `private_data_len` bytes, and `private_len` is not more.
            let src =
                unsafe { core::slice::from_raw_parts(conn.private_data.cast::<u8>(), private_len) };
            private[..private_len].copy_from_slice(src);
        }
        // INVARIANT: nothing is settled yet.
        Self {
            id,
            private,
            private_len,
            responder_resources: conn.responder_resources,
            initiator_depth: conn.initiator_depth,
            settled: false,
            destroy,
        }
    }

    /// The peer's private data (at most [`REQ_PVT_LEN`] bytes of it).
    pub(crate) fn private(&self) -> &[u8] {
        &self.private[..self.private_len]
    }

    /// RDMA Reads the peer accepts at once, as it offered.
    pub(crate) fn responder_resources(&self) -> u8 {
        self.responder_resources
    }

    /// RDMA Reads the peer wants to issue at once.
    pub(crate) fn initiator_depth(&self) -> u8 {
        self.initiator_depth
    }

    /// The device the request arrived on.
    pub(crate) fn device(&self) -> Result<Device> {
        // SAFETY: `id` is live (type invariant); rdma_cm bound it to the
        // device before delivering the request.
        unsafe { Device::get((*self.id.as_ptr()).device) }
    }

    /// Rejects the request, sending `private` (up to 255 bytes) to the peer.
    pub(crate) fn reject(mut self, private: &[u8]) {
        self.settle_rejected(private);
    }

    fn settle_rejected(&mut self, private: &[u8]) {
        if self.settled {
            return;
        }
        let len = u8::try_from(private.len()).unwrap_or(u8::MAX);
        // SAFETY: `id` is live and its handler mutex is held (type
        // invariant); rdma_reject copies `len` bytes of `private`.
        let _ = unsafe {
            sys::rdma_reject(
                self.id.as_ptr(),
                private.as_ptr().cast(),
                len,
                REJ_CONSUMER_DEFINED,
            )
        };
        // INVARIANT: rejected; rdma_cm destroys the child on return.
        self.settled = true;
        *self.destroy = true;
    }

    /// Accepts the request: the child id's events go to `handler` from now
    /// on, it gets an RC QP on `pd` and the CQs sized by `caps`,
    /// `ready` runs with the QP (to post Receives before the peer can
    /// Send), and `param` (with our private data) goes to the peer. The peer sees
    /// ESTABLISHED, and so does `handler`, after this callback returns.
    /// On error the request is rejected and rdma_cm destroys the child.
    ///
    /// # Safety
    ///
    /// `handler` must stay valid until the returned id is dropped, and the
    /// returned id must not be dropped before this callback returned
    /// (destroying an id waits for its running callback): hand it over to
    /// process context.
    pub(crate) unsafe fn accept<H: CmHandler>(
        mut self,
        handler: *const H,
        qp: QpInit<'_>,
        param: &mut ConnParam<'_>,
        ready: impl FnOnce(Qp) -> Result,
    ) -> Result<CmId<H>> {
        let raw = self.id.as_ptr();
        // The handler mutex is held, so no event can see the id half way
        // through the switch (svcrdma swaps them the same way).
        // SAFETY: `raw` is live (type invariant); `handler` outlives the id
        // by the caller's guarantee.
        unsafe {
            (*raw).event_handler = Some(cm_event_handler::<H>);
            (*raw).context = handler.cast_mut().cast::<c_void>();
        }
        // Not dropped on error: rdma_cm destroys the child then, and only
        // the QP is ours to destroy.
        // SAFETY: The id is the child, owned by nobody yet, with handler
        // and context set for `H` above.
        let mut id = ManuallyDrop::new(unsafe { CmId::<H>::adopt(self.id) });
        if let Err(e) = id.create_qp(qp.pd, qp.send_cq, qp.recv_cq, &qp.caps) {
            self.settle_rejected(&[]);
            return Err(e);
        }
        if let Err(e) = id.qp().ok_or(ENOTCONN).and_then(ready) {
            id.destroy_qp();
            self.settle_rejected(&[]);
            return Err(e);
        }
        // SAFETY: `raw` is live with its handler mutex held (type
        // invariant); `param` is valid for the call.
        let rc = to_result(unsafe { sys::rdma_accept(raw, param.as_raw()) });
        // INVARIANT: settled either way: accepted, or rejected by
        // rdma_accept itself on failure.
        self.settled = true;
        if let Err(e) = rc {
            id.destroy_qp();
            *self.destroy = true;
            return Err(e);
        }
        Ok(ManuallyDrop::into_inner(id))
    }
}

impl Drop for ConnRequest<'_> {
    fn drop(&mut self) {
        self.settle_rejected(&[]);
    }
}
