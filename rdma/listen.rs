// SPDX-License-Identifier: GPL-2.0

//! Listening RDMA-CM identifiers and the connection requests they receive.
//!
//! rdma_cm delivers a connection request on a new child id, created with
//! the listener's handler and context, and holds the handler mutexes of
//! both ids during the call. Neither id may be destroyed there: a
//! rejected child is destroyed by rdma_cm itself when the callback
//! returns non-zero (cma.c, `cma_ib_req_handler`). A request is rejected
//! there, or deferred ([`ConnRequest::defer`]) and accepted later from
//! process context ([`PendingConn::accept`]).

use core::ffi::c_void;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;

use kernel::error::{from_err_ptr, to_result};
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Release};
use kernel::sync::{new_mutex, Mutex};

use super::cm::cm_event_handler;
use super::{CmEvent, CmHandler, CmId, ConnParam, Device, ListenHome};
use crate::sunrpc::{Net, SockAddr};
use crate::sys;

/// Private data bytes kept from a connection request: all an IB CM REQ
/// can carry after rdma_cm's own header (92 - 36).
pub(crate) const REQ_PVT_LEN: usize = 56;

/// `IB_CM_REJ_CONSUMER_DEFINED`.
const REJ_CONSUMER_DEFINED: u8 = 28;

/// Receives the events of a [`Listener`]. Called in the CM's process
/// context with the listener's handler mutex held: it may sleep, but must
/// not destroy the listener. It gets `&self`, never the `Pin<&Self>` that
/// [`Listener::rebind`] takes, which would destroy it.
pub(crate) trait ListenHandler: Sync {
    /// A connection request: defer it with [`ConnRequest::defer`], to
    /// accept it later, or reject it with [`ConnRequest::reject`] or by
    /// dropping it.
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
    backlog: i32,
    _handler: PhantomData<*const L>,
}

/// Where a [`ListenHome`] keeps its [`Listener`]: replaceable, so that
/// the owner can listen again on a new id when the old one's address
/// moved to another device ([`Listener::rebind`]).
#[pin_data]
pub(crate) struct ListenSlot<L: ListenHandler> {
    #[pin]
    id: Mutex<Option<Listener<L>>>,
}

impl<L: ListenHandler> ListenSlot<L> {
    /// An empty slot, for [`Listener::start`].
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            id <- new_mutex!(None, "rpcrdma_rs_listen_slot"),
        })
    }

    /// The bound address, with the port chosen if it was 0; `None` when
    /// nothing listens.
    pub(crate) fn local_addr(&self) -> Option<SockAddr> {
        self.id.lock().as_ref().map(Listener::local_addr)
    }
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
    unsafe fn new(
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
            backlog,
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
    /// Listens in `net` on `addr` with `backlog`, for `handler`, which
    /// keeps the listener ([`ListenHome`]), pinned: the id reaches it by
    /// address until the listener is dropped, which is before anything
    /// else of it ([`owner!`](super::owner)).
    pub(crate) fn start(handler: Pin<&L>, net: Net, addr: &SockAddr, backlog: i32) -> Result
    where
        L: ListenHome,
    {
        let handler = handler.get_ref();
        let mut slot = handler.listener().id.lock();
        if slot.is_some() {
            return Err(EBUSY);
        }
        // SAFETY: `net` came from sunrpc, `addr` is a socket address. The
        // handler is pinned and not `Unpin`, so it stays at its address
        // until dropped; dropping it drops the listener it keeps (its
        // field, `ListenHome`) before any other of its fields: it outlives
        // the id.
        *slot = Some(unsafe { Self::new(net.as_ptr(), handler, addr.as_ptr(), backlog) }?);
        Ok(())
    }

    /// Listens again, on a new id in `net`, on the address and with the
    /// backlog of the listener `handler` keeps, and destroys the old id:
    /// what [`CmEvent::AddrChange`] asks for, since the old id's device
    /// address is stale. The old id goes first (rdma_cm refuses a second
    /// listener on one address, which is why svcrdma's rebinding in its
    /// handler fails), and destroying it waits for its running callback:
    /// so this takes the handler pinned, which no callback is given, and
    /// is called from process context. On error nothing listens.
    pub(crate) fn rebind(handler: Pin<&L>, net: Net) -> Result
    where
        L: ListenHome,
    {
        let handler = handler.get_ref();
        let mut slot = handler.listener().id.lock();
        let old = slot.take().ok_or(ENOTCONN)?;
        let addr = old.local_addr();
        let backlog = old.backlog;
        // Callbacks never take the slot's lock: this cannot deadlock.
        drop(old);
        // SAFETY: As in `start`; `addr` is the old id's bound address.
        *slot = Some(unsafe { Self::new(net.as_ptr(), handler, addr.as_ptr(), backlog) }?);
        Ok(())
    }

    /// The bound address, with the port chosen if it was 0.
    fn local_addr(&self) -> SockAddr {
        // SAFETY: `ptr` is live (type invariant); its bound address is a
        // socket address storage that does not change while it listens.
        SockAddr::from_storage(unsafe {
            core::ptr::read((&raw const (*self.ptr.as_ptr()).route.addr.src_addr).cast())
        })
    }
}

impl<L: ListenHandler> Drop for Listener<L> {
    fn drop(&mut self) {
        // SAFETY: `ptr` is live and owned; this waits for any running
        // callback of the listener, including connection requests.
        unsafe { sys::rdma_destroy_id(self.ptr.as_ptr()) };
    }
}

/// A connection request, valid for the duration of
/// [`ListenHandler::connect_request`]. Dropping it without
/// [`ConnRequest::defer`] rejects it, and rdma_cm destroys the child id.
///
/// # Invariants
///
/// `id` is the live child id of the request, whose callback (holding its
/// handler mutex) is running for `'a`; `settled` is set once the request
/// was deferred or rejected, and `*destroy` once rdma_cm is to destroy the
/// child.
pub(crate) struct ConnRequest<'a> {
    id: NonNull<sys::rdma_cm_id>,
    private: [u8; REQ_PVT_LEN],
    private_len: usize,
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
            initiator_depth: conn.initiator_depth,
            settled: false,
            destroy,
        }
    }

    /// The peer's private data (at most [`REQ_PVT_LEN`] bytes of it).
    pub(crate) fn private(&self) -> &[u8] {
        &self.private[..self.private_len]
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
}

impl Drop for ConnRequest<'_> {
    fn drop(&mut self) {
        self.settle_rejected(&[]);
    }
}

/// What a deferred request keeps of its CONNECT_REQUEST, and what its
/// handler learns until it is accepted.
struct PendingInfo {
    private: [u8; REQ_PVT_LEN],
    private_len: usize,
    initiator_depth: u8,
    /// The peer gave up (REJ, disconnect), or the device is going.
    gone: Atomic<bool>,
}

/// A connection request taken out of the CM callback, to be accepted
/// later from process context, as svcrdma accepts in `svc_rdma_accept`:
/// building a connection (QP, CQs, hundreds of DMA-mapped buffers) in
/// the CM callback makes every request behind it wait, and lets any peer
/// that sends REQs make the server build them before nfsd sees one.
///
/// # Invariants
///
/// `id` is a live child id owned by this value, whose handler is
/// [`pending_handler`] and whose context is `info`, which outlives it.
pub(crate) struct PendingConn {
    id: NonNull<sys::rdma_cm_id>,
    info: Pin<KBox<PendingInfo>>,
}

// SAFETY: An `rdma_cm_id` may be used and destroyed from any thread; the
// info is read-only but for an atomic.
unsafe impl Send for PendingConn {}
// SAFETY: `&PendingConn` only reads.
unsafe impl Sync for PendingConn {}

/// The handler of a deferred request until it is accepted: it notes that
/// the request is no longer worth accepting.
///
/// # Safety
///
/// Only called by rdma_cm, for an id of a [`PendingConn`].
unsafe extern "C" fn pending_handler(
    id: *mut sys::rdma_cm_id,
    event: *mut sys::rdma_cm_event,
) -> i32 {
    // SAFETY: The context is the request's info, which outlives the id
    // (type invariant of `PendingConn`).
    let info = unsafe { &*(*id).context.cast::<PendingInfo>() };
    // SAFETY: rdma_cm passes a valid event for the duration of the call.
    let event = unsafe { CmEvent::from_raw(event) };
    rdebug!("server: event {:?} before accept\n", event);
    match event {
        CmEvent::Other(_) => {}
        _ => info.gone.store(true, Release),
    }
    0
}

/// The handler of a child id being rejected from within its own callback
/// after [`ConnRequest::defer`] gave it up: rdma_cm destroys it when the
/// callback returns, and calls nothing before.
///
/// # Safety
///
/// Only called by rdma_cm.
unsafe extern "C" fn ignore_handler(
    _id: *mut sys::rdma_cm_id,
    _event: *mut sys::rdma_cm_event,
) -> i32 {
    0
}

impl ConnRequest<'_> {
    /// Takes the request out of the callback, as a [`PendingConn`] that
    /// `keep` stores (in an accept queue) for process context to accept.
    /// If `keep` gives it back, the request is rejected. Either way the
    /// request is settled, and never destroyed within its own callback.
    pub(crate) fn defer(mut self, keep: impl FnOnce(PendingConn) -> Result<(), PendingConn>) {
        let info = KBox::pin(
            PendingInfo {
                private: self.private,
                private_len: self.private_len,
                initiator_depth: self.initiator_depth,
                gone: Atomic::new(false),
            },
            GFP_KERNEL,
        );
        let Ok(info) = info else {
            self.settle_rejected(&[]);
            return;
        };
        let raw = self.id.as_ptr();
        // SAFETY: `raw` is live with its handler mutex held (type
        // invariant of `ConnRequest`); the info outlives the id: it moves
        // into the `PendingConn` that owns the id.
        unsafe {
            (*raw).event_handler = Some(pending_handler);
            (*raw).context = (&raw const *info).cast_mut().cast::<c_void>();
        }
        // INVARIANT: the child is the pending request's now; settled.
        self.settled = true;
        let pending = PendingConn { id: self.id, info };
        if let Err(pending) = keep(pending) {
            let pending = ManuallyDrop::new(pending);
            // SAFETY: Still in the callback: the handler mutex is held.
            // rdma_cm destroys the child on return (`destroy`), calling
            // nothing before, so its context may go now.
            unsafe {
                (*raw).event_handler = Some(ignore_handler);
                (*raw).context = core::ptr::null_mut();
            }
            // SAFETY: `pending` is not used again; its info is dropped
            // here, its id destroyed by rdma_cm.
            drop(unsafe { core::ptr::read(&pending.info) });
            self.settled = false;
            self.settle_rejected(&[]);
        }
    }
}

impl PendingConn {
    /// The peer's private data (at most [`REQ_PVT_LEN`] bytes of it).
    pub(crate) fn private(&self) -> &[u8] {
        &self.info.private[..self.info.private_len]
    }

    /// RDMA Reads the peer wants to issue at once.
    pub(crate) fn initiator_depth(&self) -> u8 {
        self.info.initiator_depth
    }

    /// Whether the peer gave up on the request (or the device went).
    pub(crate) fn is_gone(&self) -> bool {
        self.info.gone.load(Acquire)
    }

    /// The port of the device the request arrived on.
    pub(crate) fn port_num(&self) -> u32 {
        // SAFETY: `id` is live (type invariant); its port is set before
        // the request was delivered.
        unsafe { (*self.id.as_ptr()).port_num }
    }

    /// The peer's address.
    pub(crate) fn dst_addr(&self) -> &SockAddr {
        // SAFETY: `id` is live (type invariant) while `self` is, and its
        // route was resolved before the request was delivered; rdma_cm
        // does not change it afterwards.
        unsafe { SockAddr::from_raw((&raw const (*self.id.as_ptr()).route.addr.dst_addr).cast()) }
    }

    /// The device the request arrived on.
    pub(crate) fn device(&self) -> Result<Device> {
        // SAFETY: `id` is live (type invariant); bound to the device
        // before the request was delivered.
        unsafe { Device::get((*self.id.as_ptr()).device) }
    }

    /// Accepts the request: with the id's handler mutex held, hands its
    /// events to `handler`, runs `setup` with the id (create the QP, post
    /// the Receives), then `rdma_accept` with `param`. The id is returned
    /// whenever it was handed over, even when a step failed: its owner
    /// must then drain and destroy it.
    ///
    /// # Safety
    ///
    /// `handler` must stay valid until the returned id is dropped.
    pub(crate) unsafe fn accept<H: CmHandler>(
        self,
        handler: *const H,
        setup: impl FnOnce(&mut CmId<H>) -> Result,
        param: &mut ConnParam<'_>,
    ) -> (Option<CmId<H>>, Result) {
        let raw = self.id.as_ptr();
        // SAFETY: `raw` is live (type invariant).
        unsafe { sys::rdma_lock_handler(raw) };
        if self.is_gone() {
            // SAFETY: Locked above.
            unsafe { sys::rdma_unlock_handler(raw) };
            // `self` destroys the id.
            return (None, Err(ECONNRESET));
        }
        // SAFETY: The handler mutex is held, so no event sees the switch
        // half done; `handler` outlives the id (the caller's promise).
        unsafe {
            (*raw).event_handler = Some(cm_event_handler::<H>);
            (*raw).context = handler.cast_mut().cast::<c_void>();
        }
        let this = ManuallyDrop::new(self);
        // SAFETY: The id is ours (type invariant), with handler and
        // context set for `H` above; `this` gives it up, and its info,
        // no longer the id's context, goes below.
        let mut id = unsafe { CmId::<H>::adopt(this.id) };
        // SAFETY: As above: `this` is not used again.
        let info = unsafe { core::ptr::read(&this.info) };
        let res = setup(&mut id).and_then(|()| {
            // SAFETY: `raw` is live with its handler mutex held; `param`
            // is valid for the call.
            to_result(unsafe { sys::rdma_accept(raw, param.as_raw()) })
        });
        // SAFETY: Locked above.
        unsafe { sys::rdma_unlock_handler(raw) };
        drop(info);
        (Some(id), res)
    }
}

impl Drop for PendingConn {
    fn drop(&mut self) {
        // SAFETY: `id` is live and ours (type invariant), and this never
        // runs within its callback (`defer` never drops it there); this
        // waits for a running `pending_handler`, before `info` goes.
        unsafe { sys::rdma_destroy_id(self.id.as_ptr()) };
    }
}
