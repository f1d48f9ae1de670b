// SPDX-License-Identifier: GPL-2.0

//! RDMA-CM identifiers: address and route resolution, the RC QP an id
//! owns, connection parameters and events.

use core::ffi::{c_ulong, c_void};
use core::ptr::NonNull;

use kernel::error::{from_err_ptr, to_result};
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::Arc;

use super::{Cq, Device, Pd, Qp, QpGate};
use crate::sunrpc::{hz, jiffies, DelayedWork, HasDelayedWork, Net, SockAddr};
use crate::sys;

/// Timeout for address and route resolution, in milliseconds
/// (`RDMA_RESOLVE_TIMEOUT` in rpcrdma.ko).
pub(crate) const RESOLVE_TIMEOUT_MS: u32 = 5000;

/// An RDMA-CM event, decoded from `struct rdma_cm_event`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmEvent {
    /// Address resolution finished.
    AddrResolved,
    /// Address resolution failed.
    AddrError,
    /// Route resolution finished.
    RouteResolved,
    /// Route resolution failed.
    RouteError,
    /// The connection is up; the peer's private data (RFC 8797) is
    /// attached, at most [`PVT_LEN`] bytes of it.
    Established {
        /// The first bytes of the peer's private data.
        private: [u8; PVT_LEN],
        /// How many bytes of `private` are valid.
        len: usize,
    },
    /// The connection attempt failed.
    ConnectError,
    /// The peer is unreachable.
    Unreachable,
    /// The peer rejected the connection; `stale` when the reject reason was
    /// a stale connection.
    Rejected {
        /// The reject reason was `IB_CM_REJ_STALE_CONN`.
        stale: bool,
    },
    /// The connection was closed.
    Disconnected,
    /// The device is being removed.
    DeviceRemoval,
    /// The local address changed.
    AddrChange,
    /// Any other event, by number.
    Other(u32),
}

/// Private data bytes kept from an ESTABLISHED event.
pub(crate) const PVT_LEN: usize = 8;

/// `IB_CM_REJ_STALE_CONN`.
const REJ_STALE_CONN: i32 = 10;

impl CmEvent {
    /// # Safety
    ///
    /// `event` must point to a valid `rdma_cm_event` for the duration of
    /// the call.
    pub(super) unsafe fn from_raw(event: *const sys::rdma_cm_event) -> Self {
        // SAFETY: The caller guarantees `event` is valid.
        let event = unsafe { &*event };
        match event.event {
            sys::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_RESOLVED => Self::AddrResolved,
            sys::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_ERROR => Self::AddrError,
            sys::rdma_cm_event_type_RDMA_CM_EVENT_ROUTE_RESOLVED => Self::RouteResolved,
            sys::rdma_cm_event_type_RDMA_CM_EVENT_ROUTE_ERROR => Self::RouteError,
            sys::rdma_cm_event_type_RDMA_CM_EVENT_ESTABLISHED => {
                let mut private = [0u8; PVT_LEN];
                // SAFETY: For ESTABLISHED on an RC id, `param.conn` is the
                // active member of the union.
                let conn = unsafe { &event.param.conn };
                let len = usize::from(conn.private_data_len).min(PVT_LEN);
                if !conn.private_data.is_null() && len > 0 {
                    // SAFETY: rdma_cm guarantees `private_data` holds
                    // `private_data_len` bytes, and `len` is not more.
                    let src =
                        unsafe { core::slice::from_raw_parts(conn.private_data.cast::<u8>(), len) };
                    private[..len].copy_from_slice(src);
                }
                Self::Established { private, len }
            }
            sys::rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_ERROR => Self::ConnectError,
            sys::rdma_cm_event_type_RDMA_CM_EVENT_UNREACHABLE => Self::Unreachable,
            sys::rdma_cm_event_type_RDMA_CM_EVENT_REJECTED => Self::Rejected {
                stale: event.status == REJ_STALE_CONN,
            },
            sys::rdma_cm_event_type_RDMA_CM_EVENT_DISCONNECTED => Self::Disconnected,
            sys::rdma_cm_event_type_RDMA_CM_EVENT_DEVICE_REMOVAL => Self::DeviceRemoval,
            sys::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_CHANGE => Self::AddrChange,
            other => Self::Other(other),
        }
    }
}

/// A network namespace, borrowed.
///
/// # Invariants
///
/// `ptr` is a live `struct net` for `'a`.
#[derive(Clone, Copy)]
pub(crate) struct NetNs<'a> {
    ptr: NonNull<sys::net>,
    _life: core::marker::PhantomData<&'a sys::net>,
}

impl NetNs<'_> {
    /// # Safety
    ///
    /// `ptr` is a live network namespace for the returned lifetime.
    pub(crate) unsafe fn from_raw(ptr: *mut sys::net) -> Option<Self> {
        // INVARIANT: the caller's promise.
        NonNull::new(ptr).map(|ptr| Self {
            ptr,
            _life: core::marker::PhantomData,
        })
    }
}

/// Receives the events of a [`CmId`]. Called in the CM's process context
/// with the id's handler mutex held: it may sleep, but must not destroy the
/// id.
pub(crate) trait CmHandler: Sync {
    /// One event.
    fn event(&self, event: CmEvent);

    /// Device `dev` is being removed, and with it the connection to
    /// `peer`; [`CmHandler::event`] gets [`CmEvent::DeviceRemoval`] next.
    fn device_removal(&self, _dev: &CStr, _peer: &SockAddr) {}

    /// The QP of the id's connection to `peer`, on `dev`, had asynchronous
    /// event `event` (an `enum ib_event_type`). Called by the driver,
    /// maybe in atomic context: must not sleep. A fatal one also moves the
    /// QP to the error state, whose flushed completions the owner sees.
    fn qp_event(_event: u32, _dev: &CStr, _peer: &SockAddr)
    where
        Self: Sized,
    {
    }
}

/// The size of a QP, for [`CmId::create_qp`].
#[derive(Clone, Copy, Default)]
pub(crate) struct QpCaps {
    /// Send Queue work requests (not counting those of `rdma_ctxs`).
    pub(crate) send_wr: u32,
    /// Receive Queue work requests.
    pub(crate) recv_wr: u32,
    /// SGEs per Send (at least one).
    pub(crate) send_sge: u32,
    /// [`RwCtx`](super::RwCtx)s that may be posted at once; zero when the
    /// QP does no RDMA Read or Write through rdma_rw.
    pub(crate) rdma_ctxs: u32,
}

/// What a QP is made of: it holds a reference to each, so neither the PD
/// nor a CQ can be freed while the QP exists, whatever order its owner
/// drops things in; and the gate every post on it goes through.
struct QpParts {
    gate: Arc<QpGate>,
    _pd: Arc<Pd>,
    _send_cq: Arc<Cq>,
    _recv_cq: Arc<Cq>,
}

/// An RDMA-CM identifier for an RC connection.
///
/// # Invariants
///
/// `ptr` is a live `rdma_cm_id` created by [`CmId::new`] (or a child id
/// adopted by [`PendingConn::accept`](super::PendingConn::accept)), owned
/// by this value, whose handler is [`cm_event_handler::<H>`] (or, once
/// [`CmId::silence`]d, [`silent_handler`]) and whose context is a `H`
/// that outlives it (the one `owner` holds, when it is set). `qp` is
/// `Some` exactly while the id has a QP created by [`CmId::create_qp`],
/// and holds what that QP uses, and its gate, open on it until it is
/// closed, which is before the QP is destroyed.
pub(crate) struct CmId<H: CmHandler> {
    ptr: NonNull<sys::rdma_cm_id>,
    qp: Option<QpParts>,
    _handler: core::marker::PhantomData<*const H>,
    /// The handler, for an id made by [`CmId::new_shared`]: dropped after
    /// the id is destroyed, or handed over to the CM by [`CmId::linger`].
    owner: Option<Arc<H>>,
}

// SAFETY: An `rdma_cm_id` may be used from any thread; the handler is `Sync`.
unsafe impl<H: CmHandler> Send for CmId<H> {}
// SAFETY: `&CmId` only allows operations rdma_cm serialises itself, and
// the handler is `Sync`.
unsafe impl<H: CmHandler> Sync for CmId<H> {}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
pub(super) unsafe extern "C" fn cm_event_handler<H: CmHandler>(
    id: *mut sys::rdma_cm_id,
    event: *mut sys::rdma_cm_event,
) -> i32 {
    // SAFETY: `id` is the id we created in `CmId::new`, whose context is a
    // `H` that outlives the id (type invariant of `CmId`).
    let handler = unsafe { &*(*id).context.cast::<H>() };
    // SAFETY: rdma_cm passes a valid event for the duration of the call.
    let event = unsafe { CmEvent::from_raw(event) };
    if matches!(event, CmEvent::DeviceRemoval) {
        // SAFETY: `id` is live for the call. rdma_cm reports a device's
        // removal to its ids before the device is freed, so the device
        // the id is bound to is allocated, its `name` NUL-terminated.
        let dev = unsafe { (*id).device };
        if !dev.is_null() {
            // SAFETY: As above.
            let (name, peer) = unsafe {
                (
                    CStr::from_char_ptr((*dev).name.as_ptr().cast()),
                    SockAddr::from_raw((&raw const (*id).route.addr.dst_addr).cast()),
                )
            };
            handler.device_removal(name, peer);
        }
    }
    handler.event(event);
    // Never ask rdma_cm to destroy the id: its owner does.
    0
}

/// A QP's asynchronous event handler, called by C.
///
/// # Safety
///
/// Only called by ib_core with a valid event of a QP that
/// [`CmId::create_qp`] created, whose context is that id's `rdma_cm_id`.
unsafe extern "C" fn qp_event_handler<H: CmHandler>(event: *mut sys::ib_event, ctx: *mut c_void) {
    let id = ctx.cast::<sys::rdma_cm_id>();
    // SAFETY: The event is valid for the call, and its device is live;
    // `name` is NUL-terminated. The id outlives its QP (`destroy_qp` comes
    // first), and its peer address is set before the QP is created and
    // left alone while it lives (as for `CmId::dst_addr`).
    let (ev, dev, peer) = unsafe {
        (
            (*event).event,
            CStr::from_char_ptr((*(*event).device).name.as_ptr().cast()),
            SockAddr::from_raw((&raw const (*id).route.addr.dst_addr).cast()),
        )
    };
    H::qp_event(ev, dev, peer);
}

impl<H: CmHandler> CmId<H> {
    /// Creates an RC id in `net` whose events go to `handler`.
    ///
    /// # Safety
    ///
    /// `net` must be a valid network namespace, and `handler` must stay
    /// valid until the returned id is dropped.
    unsafe fn new(net: *mut sys::net, handler: *const H) -> Result<Self> {
        // SAFETY: The callback has the right signature; `handler` outlives
        // the id by the caller's guarantee.
        let ptr = from_err_ptr(unsafe {
            sys::rpcrdma_rs_create_id(
                net,
                Some(cm_event_handler::<H>),
                handler.cast_mut().cast::<c_void>(),
                sys::rdma_ucm_port_space_RDMA_PS_TCP,
                sys::ib_qp_type_IB_QPT_RC,
            )
        })?;
        let ptr = NonNull::new(ptr).ok_or(ENOMEM)?;
        Ok(Self {
            ptr,
            qp: None,
            _handler: core::marker::PhantomData,
            owner: None,
        })
    }

    /// Creates an RC id in `net` whose events go to `handler`, which the
    /// id keeps until it is destroyed.
    pub(crate) fn new_shared(net: NetNs<'_>, handler: Arc<H>) -> Result<Self> {
        // SAFETY: `net` is live during the call (type invariant of
        // `NetNs`), and rdma_cm takes its own reference; the id holds
        // `handler` (below) until it is destroyed or no longer delivers
        // events to it (`linger`), so it outlives its use.
        let mut id = unsafe { Self::new(net.ptr.as_ptr(), &*handler)? };
        // INVARIANT: the context is the `H` of `owner`.
        id.owner = Some(handler);
        Ok(id)
    }

    /// Starts resolving `dst` to a local device; completes with
    /// [`CmEvent::AddrResolved`] or [`CmEvent::AddrError`].
    pub(crate) fn resolve(&self, dst: &SockAddr) -> Result {
        // SAFETY: `self.ptr` is live; `dst` holds a whole
        // `sockaddr_storage`, valid as an address of any family (rdma_cm
        // reads what its family needs, and copies it).
        to_result(unsafe {
            sys::rdma_resolve_addr(
                self.ptr.as_ptr(),
                core::ptr::null_mut(),
                dst.as_ptr().cast_mut(),
                core::ffi::c_ulong::from(RESOLVE_TIMEOUT_MS),
            )
        })
    }

    /// Takes ownership of `ptr`, whose handler and context the caller
    /// has set to [`cm_event_handler::<H>`] and a `H`.
    ///
    /// # Safety
    ///
    /// `ptr` must be a live id, not owned by anyone else, with that handler
    /// and a context that outlives the returned value.
    pub(super) unsafe fn adopt(ptr: NonNull<sys::rdma_cm_id>) -> Self {
        // INVARIANT: the caller's guarantees are the type invariant.
        Self {
            ptr,
            qp: None,
            _handler: core::marker::PhantomData,
            owner: None,
        }
    }

    /// The port of the device the id is bound to.
    pub(crate) fn port_num(&self) -> u32 {
        // SAFETY: `self.ptr` is live; the port is set once the address is
        // resolved (or the request arrived) and does not change after.
        unsafe { (*self.ptr.as_ptr()).port_num }
    }

    /// Starts route resolution; completes with [`CmEvent::RouteResolved`]
    /// or [`CmEvent::RouteError`].
    pub(crate) fn resolve_route(&self) -> Result {
        // SAFETY: `self.ptr` is live.
        to_result(unsafe {
            sys::rdma_resolve_route(
                self.ptr.as_ptr(),
                core::ffi::c_ulong::from(RESOLVE_TIMEOUT_MS),
            )
        })
    }

    /// The local address.
    pub(crate) fn src_addr(&self) -> &SockAddr {
        // SAFETY: `self.ptr` is live; the address is a socket address
        // storage (a member of its union) that rdma_cm sets before the id
        // is connected or accepted and leaves alone while it lives.
        unsafe { SockAddr::from_raw((&raw const (*self.ptr.as_ptr()).route.addr.src_addr).cast()) }
    }

    /// The peer's address.
    pub(crate) fn dst_addr(&self) -> &SockAddr {
        // SAFETY: As for `src_addr`.
        unsafe { SockAddr::from_raw((&raw const (*self.ptr.as_ptr()).route.addr.dst_addr).cast()) }
    }

    /// The device the address resolved to.
    pub(crate) fn device(&self) -> Result<Device> {
        // SAFETY: `self.ptr` is live, and so is the device it is bound to.
        unsafe { Device::get((*self.ptr.as_ptr()).device) }
    }

    /// Creates the RC QP of this id on `pd`, completing on `send_cq` and
    /// `recv_cq`, sized by `caps`, with its [`QpGate`]. The id keeps the
    /// three alive until the QP is destroyed.
    pub(crate) fn create_qp(
        &mut self,
        pd: &Arc<Pd>,
        send_cq: &Arc<Cq>,
        recv_cq: &Arc<Cq>,
        caps: &QpCaps,
    ) -> Result {
        if self.qp.is_some() {
            return Err(EBUSY);
        }
        // Before the QP: once it exists, nothing can fail.
        let gate = QpGate::new()?;
        let mut attr = sys::ib_qp_init_attr {
            send_cq: send_cq.ptr.as_ptr(),
            recv_cq: recv_cq.ptr.as_ptr(),
            cap: sys::ib_qp_cap {
                max_send_wr: caps.send_wr,
                max_recv_wr: caps.recv_wr,
                max_send_sge: caps.send_sge.max(1),
                max_recv_sge: 1,
                // ib_core adds the Send Queue room (and the MRs) these
                // contexts need; rdma_create_qp sets `port_num`.
                max_rdma_ctxs: caps.rdma_ctxs,
                ..Default::default()
            },
            sq_sig_type: sys::ib_sig_type_IB_SIGNAL_REQ_WR,
            qp_type: sys::ib_qp_type_IB_QPT_RC,
            event_handler: Some(qp_event_handler::<H>),
            qp_context: self.ptr.as_ptr().cast(),
            ..Default::default()
        };
        // SAFETY: `self.ptr`, the PD and both CQs are live; `attr` is a
        // fully initialised `ib_qp_init_attr` that rdma_cm only reads; the
        // event handler's context is this id, which outlives the QP.
        to_result(unsafe { sys::rdma_create_qp(self.ptr.as_ptr(), pd.ptr.as_ptr(), &mut attr) })?;
        // INVARIANT: the QP exists, holds its PD and CQs, and its gate is
        // opened on it below.
        self.qp = Some(QpParts {
            gate,
            _pd: pd.clone(),
            _send_cq: send_cq.clone(),
            _recv_cq: recv_cq.clone(),
        });
        if let (Some(qp), Some(gate)) = (self.qp(), self.gate()) {
            // SAFETY: The QP was just created, so it is live, and the gate
            // is new; `destroy_qp`, the only place the QP goes, closes the
            // gate first.
            unsafe { gate.open(qp) };
        }
        Ok(())
    }

    /// The QP, once created.
    pub(crate) fn qp(&self) -> Option<Qp> {
        self.qp.as_ref()?;
        // SAFETY: `self.ptr` is live; `qp` is set by a successful
        // `rdma_create_qp` (type invariant).
        let qp = unsafe { (*self.ptr.as_ptr()).qp };
        NonNull::new(qp).map(|ptr| Qp { ptr })
    }

    /// The QP's [`QpGate`], which every post goes through; the id closes
    /// it (draining the QP) before it destroys the QP.
    pub(crate) fn gate(&self) -> Option<&Arc<QpGate>> {
        self.qp.as_ref().map(|parts| &parts.gate)
    }

    /// Starts connecting with `param`; completes with an ESTABLISHED or an
    /// error event.
    pub(crate) fn connect(&self, param: &mut ConnParam<'_>) -> Result {
        // SAFETY: `self.ptr` is live, `param.raw` points into `param`.
        to_result(unsafe { sys::rdma_connect(self.ptr.as_ptr(), &mut param.raw) })
    }

    /// Disconnects (best effort; any error is ignored).
    pub(crate) fn disconnect(&self) {
        // SAFETY: `self.ptr` is live.
        let _ = unsafe { sys::rdma_disconnect(self.ptr.as_ptr()) };
    }

    /// Closes the QP's gate, which flushes its queues and waits for
    /// every completion, so that no posted buffer is in use afterwards
    /// and nothing is posted any more ([`QpGate::close`]). Idempotent.
    pub(crate) fn drain_qp(&self) {
        if let Some(gate) = self.gate() {
            gate.close();
        }
    }

    /// Destroys the QP, if any, draining it first unless that was done:
    /// no work request posted on it may be outstanding when it goes (a
    /// completion would then run for memory its owner may free). Then its
    /// PD and CQs may go.
    pub(crate) fn destroy_qp(&mut self) {
        if let Some(parts) = self.qp.take() {
            // Returns once closed and drained, whoever began it.
            parts.gate.close();
            // SAFETY: `self.ptr` is live and had a QP (type invariant),
            // whose gate is closed: nothing is posted on it any more.
            unsafe { sys::rdma_destroy_qp(self.ptr.as_ptr()) };
            // INVARIANT: the QP is gone; its references go with `parts`.
        }
    }

    /// Stops delivering the id's events to its handler, once a running
    /// one returned: from then on the handler may go before the id does,
    /// and what it reaches may be torn down.
    pub(crate) fn silence(&self) {
        let id = self.ptr.as_ptr();
        // SAFETY: `id` is live. rdma_lock_handler waits for a running
        // event and excludes the next until rdma_unlock_handler; rdma_cm
        // reads the handler only under that lock. The context stays:
        // still a `H` (type invariant), for `linger`.
        unsafe {
            sys::rdma_lock_handler(id);
            (*id).event_handler = Some(silent_handler);
            sys::rdma_unlock_handler(id);
        }
    }

    /// Gives up the id after [`CmId::disconnect`], without cutting its
    /// disconnect short: while `awaiting(handler)` says the CM has not
    /// reported the end of the connection yet, the id is left to the CM,
    /// which keeps resending its DREQ until the peer answers or the CM
    /// gives up (about a minute on RoCE), and is destroyed then, by
    /// rdma_cm itself, or after [`LINGER_MAX_SECS`] or at module unload
    /// ([`LingeringIds`]).
    /// Destroying it at once stops those retries: a DREQ lost while the
    /// link was down then never reaches the peer, which keeps its end of
    /// the connection until one of its own Sends times out (rpcrdma.ko
    /// keeps the id until DISCONNECTED for the same reason).
    ///
    /// `awaiting` runs with the id's handler lock held, so no event races
    /// with the answer; afterwards the handler is never called again.
    pub(crate) fn linger(mut self, awaiting: impl FnOnce(&H) -> bool) {
        self.destroy_qp();
        let id = self.ptr.as_ptr();
        // SAFETY: `id` is live; rdma_lock_handler excludes the CM's event
        // delivery until rdma_unlock_handler.
        unsafe { sys::rdma_lock_handler(id) };
        // SAFETY: The context is a `H` that outlives the id (type
        // invariant), and no event handler runs.
        let wait = awaiting(unsafe { &*(*id).context.cast::<H>() });
        let kept = wait && LINGERING.lock().keep(self.ptr);
        if kept {
            // SAFETY: The handler lock is held; rdma_cm reads both fields
            // only under it. From now on no event reaches `H`.
            unsafe {
                (*id).event_handler = Some(linger_handler);
                (*id).context = core::ptr::null_mut();
            }
        }
        // SAFETY: Locked above.
        unsafe { sys::rdma_unlock_handler(id) };
        if kept {
            // No event reaches the handler any more: it may go.
            drop(self.owner.take());
            // The id now belongs to the CM and `LINGERING`.
            core::mem::forget(self);
        }
    }
}

/// How long an id may wait for the end of its disconnect. The CM gives
/// up on an unanswered DREQ well before (about a minute on RoCE) and
/// reports DISCONNECTED then; but a DREQ that could not be allocated
/// leaves ib_cm in timewait while rdma_disconnect returns 0, and rdma_cm,
/// still in its CONNECT state, reports nothing at all: that id would
/// wait until unload (make alloc-faults found it).
const LINGER_MAX_SECS: c_ulong = 90;

/// An id handed over by [`CmId::linger`], waiting for the end of its
/// disconnect since `since` (jiffies).
///
/// # Invariants
///
/// A live id without a QP, whose handler is [`linger_handler`]; owned by
/// [`LINGERING`] while it is listed there.
struct Lingering {
    id: NonNull<sys::rdma_cm_id>,
    since: c_ulong,
}

// SAFETY: An `rdma_cm_id` may be destroyed from any thread.
unsafe impl Send for Lingering {}

/// The lingering ids, and the work that destroys those past their time.
struct LingerList {
    ids: KVec<Lingering>,
    /// Set while the module's [`LingeringIds`] exists.
    reaper: Option<NonNull<LingeringIds>>,
}

// SAFETY: `reaper` is only read under the list's lock, and points to a
// `LingeringIds`, whose work may be queued from any thread.
unsafe impl Send for LingerList {}

impl LingerList {
    const fn new() -> Self {
        Self {
            ids: KVec::new(),
            reaper: None,
        }
    }

    /// Keeps `id` until its disconnect ends or its time is up; false if
    /// there is no memory to list it.
    fn keep(&mut self, id: NonNull<sys::rdma_cm_id>) -> bool {
        let since = jiffies();
        if self.ids.push(Lingering { id, since }, GFP_KERNEL).is_err() {
            return false;
        }
        if let Some(reaper) = self.reaper {
            // SAFETY: Set, under this lock, only while the `LingeringIds`
            // it points to exists; its drop clears it under this lock
            // before the work and the memory go.
            unsafe { reaper.as_ref() }
                .reap
                .queue(LINGER_MAX_SECS * hz());
        }
        true
    }

    /// Takes one id off the list that is past its time (any, with
    /// `all`).
    fn take_expired(&mut self, all: bool) -> Option<Lingering> {
        let (now, max) = (jiffies(), LINGER_MAX_SECS * hz());
        let i = self
            .ids
            .iter()
            .position(|l| all || now.wrapping_sub(l.since) >= max)?;
        self.ids.remove(i).ok()
    }

    /// Jiffies until the oldest id is past its time, if any lingers.
    fn next_due(&self) -> Option<c_ulong> {
        let (now, max) = (jiffies(), LINGER_MAX_SECS * hz());
        self.ids
            .iter()
            .map(|l| max.saturating_sub(now.wrapping_sub(l.since)))
            .min()
    }
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `LingeringIds::init` in the module initialiser,
    // before any connection exists.
    unsafe(uninit) static LINGERING: Mutex<LingerList> = LingerList::new();
}

/// Destroys the lingering ids past their time (all of them, with `all`);
/// with the list's lock not held: rdma_destroy_id waits for a running
/// [`linger_handler`], which takes it.
fn reap(all: bool) {
    loop {
        let Some(l) = LINGERING.lock().take_expired(all) else {
            break;
        };
        // SAFETY: Taken off the list, the id is ours (type invariant of
        // `Lingering`); a concurrent `linger_handler` finds it missing and
        // leaves it to us, and rdma_destroy_id waits for it.
        unsafe { sys::rdma_destroy_id(l.id.as_ptr()) };
    }
}

/// The module's hold on [`LINGERING`]: made once at load, before any
/// connection; dropped at unload, after the last connection is gone, it
/// destroys the ids still lingering, so that no event reaches the
/// module's code afterwards. Meanwhile its work destroys those whose
/// disconnect outlived [`LINGER_MAX_SECS`].
#[pin_data(PinnedDrop)]
pub(crate) struct LingeringIds {
    #[pin]
    reap: DelayedWork<LingeringIds>,
}

// SAFETY: Its only field is a work item, which the workqueue API lets any
// thread queue and cancel, and which runs on any thread.
unsafe impl Send for LingeringIds {}
// SAFETY: As for `Send`: `&LingeringIds` only queues or runs the work.
unsafe impl Sync for LingeringIds {}

impl LingeringIds {
    /// Sets up the list; called once, by the module initialiser.
    pub(crate) fn init() -> Result<Pin<KBox<Self>>> {
        // SAFETY: Called once, from the module initialiser, before any id
        // can linger.
        unsafe { LINGERING.init() };
        let this = KBox::pin_init(pin_init!(Self { reap <- DelayedWork::new() }), GFP_KERNEL)?;
        LINGERING.lock().reaper = Some(NonNull::from(&*this));
        Ok(this)
    }
}

// SAFETY: `reap` is a `DelayedWork<Self>` field at this offset; the drop
// cancels it synchronously, after no one can queue it any more, before
// the memory goes.
unsafe impl HasDelayedWork for LingeringIds {
    const OFFSET: usize = core::mem::offset_of!(Self, reap);

    fn run(&self) {
        reap(false);
        let list = LINGERING.lock();
        if let Some(due) = list.next_due() {
            self.reap.queue(due.max(1));
        }
    }
}

#[pinned_drop]
impl PinnedDrop for LingeringIds {
    fn drop(self: Pin<&mut Self>) {
        LINGERING.lock().reaper = None;
        self.reap.cancel_sync();
        let left = LINGERING.lock().ids.len();
        if left > 0 {
            rdebug!("{} ids still disconnecting at unload\n", left);
        }
        reap(true);
    }
}

/// The handler of a lingering id: at the end of the connection it asks
/// rdma_cm to destroy the id (by returning non-zero), unless [`reap`]
/// took it first (its time was up, or the module unloads). Device removal ends it too, which also keeps
/// the device's removal from waiting on it.
///
/// # Safety
///
/// Only called by rdma_cm, for ids set up by [`CmId::linger`].
unsafe extern "C" fn linger_handler(
    id: *mut sys::rdma_cm_id,
    event: *mut sys::rdma_cm_event,
) -> i32 {
    // SAFETY: rdma_cm passes a valid event for the duration of the call.
    let kind = unsafe { (*event).event };
    if !matches!(
        kind,
        sys::rdma_cm_event_type_RDMA_CM_EVENT_DISCONNECTED
            | sys::rdma_cm_event_type_RDMA_CM_EVENT_DEVICE_REMOVAL
            | sys::rdma_cm_event_type_RDMA_CM_EVENT_TIMEWAIT_EXIT
    ) {
        return 0;
    }
    let mut list = LINGERING.lock();
    match list.ids.iter().position(|l| l.id.as_ptr() == id) {
        Some(i) => {
            // The list no longer owns it: rdma_cm destroys it on return.
            let _ = list.ids.remove(i);
            1
        }
        None => 0,
    }
}

/// The handler of a [`CmId::silence`]d id: ignores every event (its
/// owner destroys the id).
///
/// # Safety
///
/// Only called by rdma_cm.
unsafe extern "C" fn silent_handler(
    _id: *mut sys::rdma_cm_id,
    _event: *mut sys::rdma_cm_event,
) -> i32 {
    0
}

impl<H: CmHandler> Drop for CmId<H> {
    fn drop(&mut self) {
        self.destroy_qp();
        // SAFETY: `self.ptr` is live and owned by us; this waits for any
        // running event handler.
        unsafe { sys::rdma_destroy_id(self.ptr.as_ptr()) };
    }
}

/// An RC id being resolved for a connection, whose events go to a
/// handler it borrows: the id cannot outlive it. It becomes a connection
/// once it moves into something the handler owns
/// ([`Endpoint::connect`](super::Endpoint::connect)).
///
/// # Invariants
///
/// `handler` is the handler of `id`.
pub(crate) struct Dialing<'a, H: CmHandler> {
    id: CmId<H>,
    handler: &'a H,
}

impl<'a, H: CmHandler> Dialing<'a, H> {
    /// Creates an RC id in `net` whose events go to `handler`, and starts
    /// resolving `dst`: [`CmEvent::AddrResolved`] or
    /// [`CmEvent::AddrError`] follows.
    pub(crate) fn new(net: Net, handler: &'a H, dst: &SockAddr) -> Result<Self> {
        // SAFETY: `net` is a live namespace (type invariant of `Net`);
        // rdma_cm takes its own reference. The id stays in `Self`, which
        // borrows `handler`, until it is dropped or handed to an owner
        // that `handler` outlives (`into_id`'s contract).
        let id = unsafe { CmId::new(net.as_ptr(), handler) }?;
        id.resolve(dst)?;
        // INVARIANT: `handler` is the id's handler.
        Ok(Self { id, handler })
    }

    /// The id: to resolve the route once the address is, and to find the
    /// device.
    pub(crate) fn id(&self) -> &CmId<H> {
        &self.id
    }

    /// The handler the id's events go to.
    pub(super) fn handler(&self) -> &'a H {
        self.handler
    }

    /// The id, no longer tied to the handler's borrow.
    ///
    /// # Safety
    ///
    /// The id must be kept in something that [`Dialing::handler`]
    /// outlives.
    pub(super) unsafe fn into_id(self) -> CmId<H> {
        self.id
    }
}

/// Connection parameters for `rdma_connect`, borrowing the private data.
pub(crate) struct ConnParam<'a> {
    raw: sys::rdma_conn_param,
    _private: core::marker::PhantomData<&'a [u8]>,
}

impl<'a> ConnParam<'a> {
    /// The raw parameters, valid while `self` is.
    pub(super) fn as_raw(&mut self) -> *mut sys::rdma_conn_param {
        &mut self.raw
    }

    /// RC connection parameters carrying `private`.
    pub(crate) fn new(
        private: &'a [u8],
        responder_resources: u8,
        initiator_depth: u8,
        retry_count: u8,
        rnr_retry_count: u8,
    ) -> Self {
        Self {
            raw: sys::rdma_conn_param {
                private_data: private.as_ptr().cast(),
                private_data_len: u8::try_from(private.len()).unwrap_or(u8::MAX),
                responder_resources,
                initiator_depth,
                flow_control: 0,
                retry_count,
                rnr_retry_count,
                ..Default::default()
            },
            _private: core::marker::PhantomData,
        }
    }
}
