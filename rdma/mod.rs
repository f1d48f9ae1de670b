// SPDX-License-Identifier: GPL-2.0

//! Safe RDMA abstractions over ib_core and rdma_cm.
//!
//! Each wrapper owns exactly one C object and releases it on drop. Work
//! requests are posted through typed functions; completions arrive through
//! an [`ib_cqe`](sys::ib_cqe) embedded in a caller-owned context, which the
//! caller recovers with `container_of!`. Together with the sunrpc wrappers
//! in `transport/`, this is the only place for `unsafe` above `sys`.

use core::ffi::{c_ulong, c_void};
use core::ptr::NonNull;

use kernel::error::{from_err_ptr, to_result};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

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
    unsafe fn from_raw(event: *const sys::rdma_cm_event) -> Self {
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

/// Receives the events of a [`CmId`]. Called in the CM's process context
/// with the id's handler mutex held: it may sleep, but must not destroy the
/// id.
pub(crate) trait CmHandler: Sync {
    /// One event.
    fn event(&self, event: CmEvent);
}

/// What a QP is made of: it holds a reference to each, so neither the PD
/// nor a CQ can be freed while the QP exists, whatever order its owner
/// drops things in.
struct QpParts {
    _pd: Arc<Pd>,
    _send_cq: Arc<Cq>,
    _recv_cq: Arc<Cq>,
}

/// An RDMA-CM identifier for an RC connection.
///
/// # Invariants
///
/// `ptr` is a live `rdma_cm_id` created by [`CmId::new`], whose context is a
/// `H` that outlives it. `qp` is `Some` exactly while the id has a QP
/// created by [`CmId::create_qp`], and holds what that QP uses.
pub(crate) struct CmId<H: CmHandler> {
    ptr: NonNull<sys::rdma_cm_id>,
    qp: Option<QpParts>,
    _handler: core::marker::PhantomData<*const H>,
}

// SAFETY: An `rdma_cm_id` may be used from any thread; the handler is `Sync`.
unsafe impl<H: CmHandler> Send for CmId<H> {}
// SAFETY: See above; `&CmId` only allows operations rdma_cm serialises.
unsafe impl<H: CmHandler> Sync for CmId<H> {}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn cm_event_handler<H: CmHandler>(
    id: *mut sys::rdma_cm_id,
    event: *mut sys::rdma_cm_event,
) -> i32 {
    // SAFETY: `id` is the id we created in `CmId::new`, whose context is a
    // `H` that outlives the id (type invariant of `CmId`).
    let handler = unsafe { &*(*id).context.cast::<H>() };
    // SAFETY: rdma_cm passes a valid event for the duration of the call.
    let event = unsafe { CmEvent::from_raw(event) };
    handler.event(event);
    // Never ask rdma_cm to destroy the id: its owner does.
    0
}

impl<H: CmHandler> CmId<H> {
    /// Creates an RC id in `net` whose events go to `handler`.
    ///
    /// # Safety
    ///
    /// `net` must be a valid network namespace, and `handler` must stay
    /// valid until the returned id is dropped.
    pub(crate) unsafe fn new(net: *mut sys::net, handler: *const H) -> Result<Self> {
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
        })
    }

    /// Starts resolving `dst` to a local device; completes with
    /// [`CmEvent::AddrResolved`] or [`CmEvent::AddrError`].
    ///
    /// # Safety
    ///
    /// `dst` must point to a valid socket address.
    pub(crate) unsafe fn resolve_addr(&self, dst: *const sys::sockaddr) -> Result {
        // SAFETY: `self.ptr` is live; `dst` is valid by the caller's promise.
        to_result(unsafe {
            sys::rdma_resolve_addr(
                self.ptr.as_ptr(),
                core::ptr::null_mut(),
                dst.cast_mut(),
                core::ffi::c_ulong::from(RESOLVE_TIMEOUT_MS),
            )
        })
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

    /// The device the address resolved to.
    pub(crate) fn device(&self) -> Result<Device> {
        // SAFETY: `self.ptr` is live.
        let dev = unsafe { (*self.ptr.as_ptr()).device };
        Ok(Device {
            ptr: NonNull::new(dev).ok_or(ENODEV)?,
        })
    }

    /// Creates the RC QP of this id on `pd`, completing on `send_cq` and
    /// `recv_cq`, with room for `send_wr` and `recv_wr` work requests and
    /// `send_sge` SGEs per Send. The id keeps the three alive until the QP
    /// is destroyed.
    pub(crate) fn create_qp(
        &mut self,
        pd: &Arc<Pd>,
        send_cq: &Arc<Cq>,
        recv_cq: &Arc<Cq>,
        send_wr: u32,
        recv_wr: u32,
        send_sge: u32,
    ) -> Result {
        if self.qp.is_some() {
            return Err(EBUSY);
        }
        let mut attr = sys::ib_qp_init_attr {
            send_cq: send_cq.ptr.as_ptr(),
            recv_cq: recv_cq.ptr.as_ptr(),
            cap: sys::ib_qp_cap {
                max_send_wr: send_wr,
                max_recv_wr: recv_wr,
                max_send_sge: send_sge.max(1),
                max_recv_sge: 1,
                ..Default::default()
            },
            sq_sig_type: sys::ib_sig_type_IB_SIGNAL_REQ_WR,
            qp_type: sys::ib_qp_type_IB_QPT_RC,
            port_num: u32::MAX,
            ..Default::default()
        };
        // SAFETY: `self.ptr`, the PD and both CQs are live; `attr` is a
        // fully initialised `ib_qp_init_attr` that rdma_cm only reads.
        to_result(unsafe { sys::rdma_create_qp(self.ptr.as_ptr(), pd.ptr.as_ptr(), &mut attr) })?;
        // INVARIANT: the QP exists, and holds its PD and CQs.
        self.qp = Some(QpParts {
            _pd: pd.clone(),
            _send_cq: send_cq.clone(),
            _recv_cq: recv_cq.clone(),
        });
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

    /// Flushes the QP's queues and waits for every completion, so that no
    /// posted buffer is in use afterwards: the Receive queue first, then
    /// the Send queue, as rpcrdma.ko does. A Reply handled while the
    /// Receive queue drains may still post work requests on the Send
    /// queue (they are flushed, the QP being in error); draining the Send
    /// queue last collects their completions too.
    pub(crate) fn drain_qp(&self) {
        if let Some(qp) = self.qp() {
            // SAFETY: The QP is live and was created with room for the
            // drain work request of each queue.
            unsafe {
                sys::ib_drain_rq(qp.ptr.as_ptr());
                sys::ib_drain_sq(qp.ptr.as_ptr());
            }
        }
    }

    /// Destroys the QP, if any; then its PD and CQs may go.
    pub(crate) fn destroy_qp(&mut self) {
        if self.qp.is_some() {
            // SAFETY: `self.ptr` is live and has a QP (type invariant).
            unsafe { sys::rdma_destroy_qp(self.ptr.as_ptr()) };
            // INVARIANT: the QP is gone, and so are its references.
            self.qp = None;
        }
    }
}

impl<H: CmHandler> Drop for CmId<H> {
    fn drop(&mut self) {
        self.destroy_qp();
        // SAFETY: `self.ptr` is live and owned by us; this waits for any
        // running event handler.
        unsafe { sys::rdma_destroy_id(self.ptr.as_ptr()) };
    }
}

/// Connection parameters for `rdma_connect`, borrowing the private data.
pub(crate) struct ConnParam<'a> {
    raw: sys::rdma_conn_param,
    _private: core::marker::PhantomData<&'a [u8]>,
}

impl<'a> ConnParam<'a> {
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

/// An `ib_device`, borrowed from a CM id that outlives this value.
///
/// # Invariants
///
/// `ptr` is a live `ib_device`.
#[derive(Clone, Copy)]
pub(crate) struct Device {
    ptr: NonNull<sys::ib_device>,
}

impl Device {
    fn attrs(&self) -> &sys::ib_device_attr {
        // SAFETY: `ptr` is live by the type invariant; attrs are constant
        // once the device is registered.
        unsafe { &(*self.ptr.as_ptr()).attrs }
    }

    /// Largest number of work requests per queue.
    pub(crate) fn max_qp_wr(&self) -> u32 {
        self.attrs().max_qp_wr
    }

    /// Largest number of incoming RDMA Reads.
    pub(crate) fn max_qp_rd_atom(&self) -> u32 {
        self.attrs().max_qp_rd_atom
    }

    /// Largest CQ.
    pub(crate) fn max_cqe(&self) -> u32 {
        self.attrs().max_cqe
    }

    /// Pages one fast-registration MR can map.
    pub(crate) fn max_fast_reg_page_list_len(&self) -> u32 {
        self.attrs().max_fast_reg_page_list_len
    }

    /// Largest scatter/gather list of an RDMA Read.
    pub(crate) fn max_sge_rd(&self) -> u32 {
        self.attrs().max_sge_rd
    }

    /// Largest Send scatter/gather list.
    pub(crate) fn max_send_sge(&self) -> u32 {
        self.attrs().max_send_sge
    }
}

/// A protection domain.
///
/// # Invariants
///
/// `ptr` is a live PD allocated by [`Pd::new`].
pub(crate) struct Pd {
    ptr: NonNull<sys::ib_pd>,
}

// SAFETY: PDs may be used and freed from any thread.
unsafe impl Send for Pd {}
// SAFETY: `&Pd` only reads the constant lkey.
unsafe impl Sync for Pd {}

impl Pd {
    /// Allocates a PD on `dev`, shared by the QP and the MRs made on it.
    pub(crate) fn new(dev: &Device) -> Result<Arc<Self>> {
        // SAFETY: `dev.ptr` is live.
        let ptr = from_err_ptr(unsafe { sys::rpcrdma_rs_alloc_pd(dev.ptr.as_ptr(), 0) })?;
        Arc::new(
            Self {
                ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
            },
            GFP_KERNEL,
        )
    }

    /// The lkey covering all DMA-mapped memory.
    pub(crate) fn local_dma_lkey(&self) -> u32 {
        // SAFETY: `ptr` is live; the lkey is constant.
        unsafe { (*self.ptr.as_ptr()).local_dma_lkey }
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: `ptr` is live and owned; its users (QP, MRs) each hold
        // a reference, so they are all gone.
        unsafe { sys::rpcrdma_rs_dealloc_pd(self.ptr.as_ptr()) };
    }
}

/// A completion queue polled from the `ib_comp_wq` workqueue: completion
/// callbacks run in process context.
///
/// # Invariants
///
/// `ptr` is a live CQ allocated by [`Cq::new`].
pub(crate) struct Cq {
    ptr: NonNull<sys::ib_cq>,
}

// SAFETY: CQs may be used and freed from any thread.
unsafe impl Send for Cq {}
// SAFETY: `&Cq` allows no operation.
unsafe impl Sync for Cq {}

impl Cq {
    /// Allocates a CQ of `entries` on `dev`.
    pub(crate) fn new(dev: &Device, entries: u32) -> Result<Arc<Self>> {
        // SAFETY: `dev.ptr` is live.
        let ptr = from_err_ptr(unsafe {
            sys::rpcrdma_rs_alloc_cq(
                dev.ptr.as_ptr(),
                core::ptr::null_mut(),
                i32::try_from(entries).map_err(|_| EINVAL)?,
                sys::ib_poll_context_IB_POLL_WORKQUEUE,
            )
        })?;
        Arc::new(
            Self {
                ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
            },
            GFP_KERNEL,
        )
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: `ptr` is live and owned; its QP holds a reference, so it
        // is destroyed. This waits for the polling work to finish.
        unsafe { sys::ib_free_cq(self.ptr.as_ptr()) };
    }
}

/// A queue pair, borrowed from its CM id.
///
/// # Invariants
///
/// `ptr` is a live QP.
#[derive(Clone, Copy)]
pub(crate) struct Qp {
    ptr: NonNull<sys::ib_qp>,
}

impl Qp {
    /// The raw pointer, for a completion context that reposts.
    pub(crate) fn as_ptr(&self) -> *mut sys::ib_qp {
        self.ptr.as_ptr()
    }

    /// Rebuilds a borrowed QP from [`Qp::as_ptr`].
    ///
    /// # Safety
    ///
    /// `ptr` must be a live QP for the lifetime of the returned value.
    pub(crate) unsafe fn from_ptr(ptr: *mut sys::ib_qp) -> Option<Self> {
        NonNull::new(ptr).map(|ptr| Self { ptr })
    }

    /// Posts the chain `before` (first and last work request), then a
    /// Send gathering `sges`, in one call. Only a `signalled` Send
    /// completes on `cqe` when it succeeds; any Send does when it fails.
    ///
    /// # Safety
    ///
    /// `cqe` must stay valid, and the memory of `sges` mapped and
    /// unmodified, until the Send completes (successfully, flushed, or
    /// implicitly by a later signalled work request). The work requests
    /// of `before` must be valid and linked from first to last, with
    /// every `wr_cqe` valid until its completion.
    pub(crate) unsafe fn post_send_after(
        &self,
        cqe: *mut sys::ib_cqe,
        sges: &mut [sys::ib_sge],
        signalled: bool,
        before: Option<(*mut sys::ib_send_wr, *mut sys::ib_send_wr)>,
    ) -> Result {
        let mut wr = sys::ib_send_wr {
            sg_list: sges.as_mut_ptr(),
            num_sge: i32::try_from(sges.len()).map_err(|_| EINVAL)?,
            opcode: sys::ib_wr_opcode_IB_WR_SEND,
            send_flags: if signalled {
                sys::ib_send_flags_IB_SEND_SIGNALED
            } else {
                0
            },
            ..Default::default()
        };
        wr.__bindgen_anon_1.wr_cqe = cqe;
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
            // SAFETY: As above; no dangling link to our stack is left.
            unsafe { (*last).next = core::ptr::null_mut() };
        }
        to_result(rc)
    }

    /// Posts a chain of work requests (e.g. LOCAL_INVs).
    ///
    /// # Safety
    ///
    /// `first` must head a valid, null-terminated chain whose `wr_cqe`s
    /// stay valid until their completions.
    pub(crate) unsafe fn post_chain(&self, first: *mut sys::ib_send_wr) -> Result {
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

/// Transfer direction of a [`DmaBuf`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum DmaDir {
    /// The device reads (Send buffers).
    ToDevice,
    /// The device writes (Receive buffers).
    FromDevice,
}

impl DmaDir {
    fn raw(self) -> sys::dma_data_direction {
        match self {
            Self::ToDevice => sys::dma_data_direction_DMA_TO_DEVICE,
            Self::FromDevice => sys::dma_data_direction_DMA_FROM_DEVICE,
        }
    }
}

/// A kmalloc'ed buffer, DMA-mapped for one device for its whole life.
///
/// # Invariants
///
/// `mem` is never resized, so its address is stable; `addr` is its mapping
/// on `dev`, which outlives the buffer (the owner frees buffers before the
/// CM id that holds the device).
pub(crate) struct DmaBuf {
    mem: KVec<u8>,
    addr: u64,
    dev: Device,
    dir: DmaDir,
}

// SAFETY: The buffer is plain memory; the device pointer is only used for
// DMA API calls, which any thread may make.
unsafe impl Send for DmaBuf {}
// SAFETY: `&DmaBuf` only reads.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    /// Allocates `len` zeroed bytes and maps them for `dev`.
    pub(crate) fn new(dev: &Device, len: usize, dir: DmaDir) -> Result<Self> {
        let mut mem = KVec::from_elem(0u8, len, GFP_KERNEL)?;
        // SAFETY: `dev` is live; `mem` is `len` bytes of kmalloc memory.
        let addr = unsafe {
            sys::rpcrdma_rs_dma_map_single(
                dev.ptr.as_ptr(),
                mem.as_mut_ptr().cast(),
                mem.len(),
                dir.raw(),
            )
        };
        // SAFETY: `dev` is live; `addr` came from the map call above.
        if unsafe { sys::rpcrdma_rs_dma_mapping_error(dev.ptr.as_ptr(), addr) } != 0 {
            return Err(EIO);
        }
        Ok(Self {
            mem,
            addr,
            dev: *dev,
            dir,
        })
    }

    fn len_u32(&self) -> u32 {
        u32::try_from(self.mem.len()).unwrap_or(u32::MAX)
    }

    /// Size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.mem.len()
    }

    /// An SGE over `len` bytes at `offset`, clamped to the buffer.
    pub(crate) fn sge(&self, offset: usize, len: usize, lkey: u32) -> sys::ib_sge {
        let offset = offset.min(self.mem.len());
        let len = len.min(self.mem.len() - offset);
        sys::ib_sge {
            addr: self.addr + offset as u64,
            length: u32::try_from(len).unwrap_or(0),
            lkey,
        }
    }

    /// Makes the first `len` bytes written by the device visible to the CPU.
    pub(crate) fn sync_for_cpu(&self, len: usize) {
        // SAFETY: `addr` maps `mem` on the live `dev`; `len` is clamped.
        unsafe {
            sys::rpcrdma_rs_dma_sync_for_cpu(
                self.dev.ptr.as_ptr(),
                self.addr,
                len.min(self.mem.len()),
                self.dir.raw(),
            )
        };
    }

    /// Hands the first `len` bytes written by the CPU to the device.
    pub(crate) fn sync_for_device(&self, len: usize) {
        // SAFETY: As for `sync_for_cpu`.
        unsafe {
            sys::rpcrdma_rs_dma_sync_for_device(
                self.dev.ptr.as_ptr(),
                self.addr,
                len.min(self.mem.len()),
                self.dir.raw(),
            )
        };
    }

    /// The contents.
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.mem
    }

    /// The contents, for the CPU to fill.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.mem
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: `addr` maps `mem` on the live `dev`; no work request uses
        // it any more (the owner drains the QP first).
        unsafe {
            sys::rpcrdma_rs_dma_unmap_single(
                self.dev.ptr.as_ptr(),
                self.addr,
                self.mem.len(),
                self.dir.raw(),
            )
        };
    }
}

/// Most pages one Send maps: a 64 KiB inline Call in 4 KiB pages, plus
/// one for an unaligned start.
pub(crate) const MAX_MAPPED_PAGES: usize = 17;

/// Pages of an RPC's `xdr_buf` DMA-mapped for one Send, unmapped on drop.
///
/// # Invariants
///
/// `maps[..n]` are live `DMA_TO_DEVICE` mappings on `dev` (set when `n` is
/// not zero), which outlives this value (the owner drops it before the CM id holding the device).
pub(crate) struct MappedPages {
    dev: Option<Device>,
    maps: [(u64, u32); MAX_MAPPED_PAGES],
    n: usize,
}

// SAFETY: Mappings are plain numbers; the device is only used for DMA API
// calls, which any thread may make.
unsafe impl Send for MappedPages {}

impl MappedPages {
    /// Maps `segs` for the device to read.
    ///
    /// # Safety
    ///
    /// The pages stay allocated, and their contents unchanged, until the
    /// returned value is dropped.
    pub(crate) unsafe fn map(dev: &Device, segs: &[PageSeg]) -> Result<Self> {
        if segs.len() > MAX_MAPPED_PAGES {
            return Err(EMSGSIZE);
        }
        let mut out = Self {
            dev: Some(*dev),
            maps: [(0, 0); MAX_MAPPED_PAGES],
            n: 0,
        };
        for (slot, seg) in out.maps.iter_mut().zip(segs) {
            // SAFETY: `dev` is live; the page is allocated (caller's
            // promise) and `offset + len` stays within it.
            let addr = unsafe {
                sys::rpcrdma_rs_dma_map_page(
                    dev.ptr.as_ptr(),
                    seg.page,
                    c_ulong::from(seg.offset),
                    seg.len as usize,
                    DmaDir::ToDevice.raw(),
                )
            };
            // SAFETY: `dev` is live; `addr` came from the map call above.
            if unsafe { sys::rpcrdma_rs_dma_mapping_error(dev.ptr.as_ptr(), addr) } != 0 {
                // `out` unmaps what was mapped so far.
                return Err(EIO);
            }
            *slot = (addr, seg.len);
            out.n += 1;
        }
        Ok(out)
    }

    /// Maps nothing: a placeholder that unmaps nothing on drop.
    pub(crate) fn empty() -> Self {
        // INVARIANT: no mapping is live.
        Self {
            dev: None,
            maps: [(0, 0); MAX_MAPPED_PAGES],
            n: 0,
        }
    }

    /// One SGE per mapped page.
    pub(crate) fn sges(&self, lkey: u32) -> impl Iterator<Item = sys::ib_sge> + '_ {
        self.maps
            .iter()
            .take(self.n)
            .map(move |&(addr, length)| sys::ib_sge { addr, length, lkey })
    }
}

impl Drop for MappedPages {
    fn drop(&mut self) {
        let Some(dev) = self.dev else {
            return;
        };
        for &(addr, len) in self.maps.iter().take(self.n) {
            // SAFETY: A live mapping on the live `dev` (type invariant);
            // no work request uses it any more (the owner drops it after
            // the Send completed or was flushed).
            unsafe {
                sys::rpcrdma_rs_dma_unmap_page(
                    dev.ptr.as_ptr(),
                    addr,
                    len as usize,
                    DmaDir::ToDevice.raw(),
                )
            };
        }
    }
}

/// A work completion, borrowed for the duration of a done callback.
pub(crate) struct Wc<'a>(&'a sys::ib_wc);

impl<'a> Wc<'a> {
    /// # Safety
    ///
    /// `wc` must be valid for `'a`.
    pub(crate) unsafe fn from_raw(wc: *const sys::ib_wc) -> Self {
        // SAFETY: The caller guarantees validity.
        Self(unsafe { &*wc })
    }

    /// The `ib_cqe` of the completed work request.
    pub(crate) fn cqe(&self) -> *mut sys::ib_cqe {
        // SAFETY: We always post with `wr_cqe`, so that is the active member.
        unsafe { self.0.__bindgen_anon_1.wr_cqe }
    }

    /// Whether the work request succeeded.
    pub(crate) fn ok(&self) -> bool {
        self.0.status == sys::ib_wc_status_IB_WC_SUCCESS
    }

    /// Whether the work request was flushed by a QP going to error.
    pub(crate) fn flushed(&self) -> bool {
        self.0.status == sys::ib_wc_status_IB_WC_WR_FLUSH_ERR
    }

    /// The raw status, for logging.
    pub(crate) fn status(&self) -> u32 {
        self.0.status
    }

    /// Bytes received.
    pub(crate) fn byte_len(&self) -> usize {
        self.0.byte_len as usize
    }

    /// The R_key the peer invalidated with Send With Invalidate, if it did.
    pub(crate) fn invalidated_rkey(&self) -> Option<u32> {
        if self.0.wc_flags & (sys::ib_wc_flags_IB_WC_WITH_INVALIDATE as i32) == 0 {
            return None;
        }
        // SAFETY: With IB_WC_WITH_INVALIDATE set, `invalidate_rkey` is the
        // active member of the union.
        Some(unsafe { self.0.ex.invalidate_rkey })
    }
}

/// One piece of memory to register: part of a single page.
#[derive(Clone, Copy)]
pub(crate) struct PageSeg {
    /// The page.
    pub(crate) page: *mut sys::page,
    /// Offset of the first byte in the page.
    pub(crate) offset: u32,
    /// Bytes, at most to the end of the page.
    pub(crate) len: u32,
}

/// What a registration gives the peer to address: one RDMA segment.
#[derive(Clone, Copy)]
pub(crate) struct Registered {
    /// Steering tag.
    pub(crate) rkey: u32,
    /// Bytes mapped.
    pub(crate) length: u32,
    /// I/O virtual address of the first byte.
    pub(crate) iova: u64,
}

/// A fast-registration (FRWR) memory region and its scatterlist.
///
/// # Invariants
///
/// `ptr` is a live `IB_MR_TYPE_MEM_REG` MR of `_pd` on `dev` with room for
/// `sg.len()` pages; when `mapped` is non-zero, the first `nsg` entries of
/// `sg` are DMA-mapped on `dev` in direction `dir` (`mapped` entries after
/// coalescing). `dev` outlives the MR: the owner frees MRs before the PD
/// and the CM id.
pub(crate) struct Mr {
    ptr: NonNull<sys::ib_mr>,
    _pd: Arc<Pd>,
    dev: Device,
    sg: KVec<sys::scatterlist>,
    nsg: i32,
    mapped: i32,
    dir: DmaDir,
}

// SAFETY: The MR and its scatterlist may be used from any thread; the owner
// serialises access (`&mut self` for every change).
unsafe impl Send for Mr {}
// SAFETY: `&Mr` only reads the keys.
unsafe impl Sync for Mr {}

impl Mr {
    /// Allocates an MR of `depth` pages on `pd`.
    pub(crate) fn new(pd: &Arc<Pd>, dev: &Device, depth: u32) -> Result<Self> {
        let depth_usize = usize::try_from(depth).map_err(|_| EINVAL)?;
        let sg = KVec::from_elem(sys::scatterlist::default(), depth_usize, GFP_KERNEL)?;
        // SAFETY: `pd` is live.
        let ptr = from_err_ptr(unsafe {
            sys::ib_alloc_mr(pd.ptr.as_ptr(), sys::ib_mr_type_IB_MR_TYPE_MEM_REG, depth)
        })?;
        Ok(Self {
            ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
            _pd: pd.clone(),
            dev: *dev,
            sg,
            nsg: 0,
            mapped: 0,
            dir: DmaDir::ToDevice,
        })
    }

    /// The current R_key.
    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: `ptr` is live.
        unsafe { (*self.ptr.as_ptr()).rkey }
    }

    /// DMA-maps `segs` (at most [`Mr::depth`] of them, without gaps between
    /// pages) and maps them into the MR's page list under a fresh key. The
    /// registration takes effect when the work request from
    /// [`Mr::reg_wr`] executes.
    ///
    /// # Safety
    ///
    /// The pages of `segs` must stay allocated until [`Mr::unmap`] (or the
    /// drop of the MR), and the peer must not be able to use the key
    /// afterwards (the MR is invalidated, or the QP is gone, before that).
    pub(crate) unsafe fn map(&mut self, segs: &[PageSeg], writing: bool) -> Result<Registered> {
        if self.mapped != 0 || segs.is_empty() || segs.len() > self.sg.len() {
            return Err(EINVAL);
        }
        let n = i32::try_from(segs.len()).map_err(|_| EINVAL)?;
        let sg = self.sg.as_mut_ptr();
        self.dir = if writing {
            DmaDir::FromDevice
        } else {
            DmaDir::ToDevice
        };
        // SAFETY: `sg` has at least `n` entries; the pages are live by the
        // caller's promise; `dev` is live.
        let mapped = unsafe {
            sys::rpcrdma_rs_sg_init_table(sg, n as u32);
            for (i, seg) in segs.iter().enumerate() {
                sys::rpcrdma_rs_sg_set_page(sg.add(i), seg.page, seg.len, seg.offset);
            }
            sys::rpcrdma_rs_dma_map_sg(self.dev.ptr.as_ptr(), sg, n, self.dir.raw())
        };
        if mapped <= 0 {
            return Err(EIO);
        }
        self.nsg = n;
        self.mapped = mapped;
        // SAFETY: `ptr` is live; `sg` holds `mapped` DMA-mapped entries.
        let done = unsafe {
            sys::ib_map_mr_sg(
                self.ptr.as_ptr(),
                sg,
                mapped,
                core::ptr::null_mut(),
                kernel::page::PAGE_SIZE as u32,
            )
        };
        if done != mapped {
            self.unmap();
            return Err(EIO);
        }
        let key = (self.rkey() & 0xff) as u8;
        // SAFETY: `ptr` is live and not registered (the previous
        // registration was invalidated before the MR was freed for reuse).
        unsafe { sys::rpcrdma_rs_update_fast_reg_key(self.ptr.as_ptr(), key.wrapping_add(1)) };
        // SAFETY: `ptr` is live.
        let (length, iova) = unsafe { ((*self.ptr.as_ptr()).length, (*self.ptr.as_ptr()).iova) };
        Ok(Registered {
            rkey: self.rkey(),
            length: u32::try_from(length).map_err(|_| EIO)?,
            iova,
        })
    }

    /// Fills `wr` with the REG_MR work request of the current mapping,
    /// completing on `cqe` (unsignalled: only an error reports).
    pub(crate) fn reg_wr(&self, wr: &mut sys::ib_reg_wr, writing: bool, cqe: *mut sys::ib_cqe) {
        let access = if writing {
            sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE | sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE
        } else {
            sys::ib_access_flags_IB_ACCESS_REMOTE_READ
        };
        *wr = sys::ib_reg_wr {
            wr: sys::ib_send_wr {
                opcode: sys::ib_wr_opcode_IB_WR_REG_MR,
                ..Default::default()
            },
            mr: self.ptr.as_ptr(),
            key: self.rkey(),
            access: access as i32,
        };
        wr.wr.__bindgen_anon_1.wr_cqe = cqe;
    }

    /// Fills `wr` with a LOCAL_INV of the current key, completing on `cqe`.
    pub(crate) fn inv_wr(&self, wr: &mut sys::ib_send_wr, cqe: *mut sys::ib_cqe, signalled: bool) {
        *wr = sys::ib_send_wr {
            opcode: sys::ib_wr_opcode_IB_WR_LOCAL_INV,
            send_flags: if signalled {
                sys::ib_send_flags_IB_SEND_SIGNALED
            } else {
                0
            },
            ..Default::default()
        };
        wr.__bindgen_anon_1.wr_cqe = cqe;
        wr.ex.invalidate_rkey = self.rkey();
    }

    /// DMA-unmaps the pages of the last [`Mr::map`], if any. The MR must
    /// be invalidated (or its QP gone) first.
    pub(crate) fn unmap(&mut self) {
        if self.mapped == 0 {
            return;
        }
        // SAFETY: By the type invariant the first `nsg` entries are mapped
        // on the live `dev` in `dir`.
        unsafe {
            sys::rpcrdma_rs_dma_unmap_sg(
                self.dev.ptr.as_ptr(),
                self.sg.as_mut_ptr(),
                self.nsg,
                self.dir.raw(),
            )
        };
        self.mapped = 0;
        self.nsg = 0;
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        self.unmap();
        // SAFETY: `ptr` is live and owned; its QP is destroyed.
        unsafe { sys::rpcrdma_rs_dereg_mr(self.ptr.as_ptr()) };
    }
}
