// SPDX-License-Identifier: GPL-2.0

//! The sunrpc side: transport class registration, the `rpc_xprt_ops`
//! entry points, and thin safe wrappers over `rpc_xprt` and `rpc_rqst`.

use core::ffi::{c_char, c_int, c_uint, c_ulong, c_ushort};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use kernel::prelude::*;
use kernel::str::CString;
use kernel::types::Opaque;

use super::conn::{Ep, SendError};
use super::{bump, classify_received, encode_call_header, Received, Stats, MAX_PAYLOAD, MAX_SLOTS};
use crate::sys;

/// `XPRT_TRANSPORT_RDMA`.
pub(crate) const IDENT: i32 = 256;
/// Longest wait for the outcome of one connection attempt, in seconds.
const CONNECT_WAIT_CAP_SECS: c_ulong = 180;
/// Slots preallocated per transport.
const MIN_SLOTS: u32 = 2;
/// `IPPROTO_TCP`: `xprt->prot` names the address family's TCP for the
/// benefit of side protocols, as rpcrdma.ko does.
const IPPROTO_TCP: i32 = 6;
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

fn hz() -> c_ulong {
    // SAFETY: Reads a constant.
    unsafe { sys::rpcrdma_rs_hz() }
}

fn jiffies() -> c_ulong {
    // SAFETY: Reads the jiffies counter.
    unsafe { sys::rpcrdma_rs_jiffies() }
}

/// The transport class followed by its netid list, like `struct
/// xprt_class` with its flexible `netid[]` array filled in.
#[repr(C)]
struct ClassWithNetids {
    class: sys::xprt_class,
    netid: [*const c_char; 3],
}

const _: () = assert!(
    core::mem::offset_of!(ClassWithNetids, netid) == core::mem::size_of::<sys::xprt_class>()
);

/// A registered transport class; unregistered on drop.
///
/// # Invariants
///
/// `class` is registered with sunrpc while this value exists.
pub(crate) struct Registration {
    class: Pin<KBox<Opaque<ClassWithNetids>>>,
}

// SAFETY: After registration the class is only read by sunrpc, under its
// own lock; we only pass its address to `xprt_unregister_transport`.
unsafe impl Send for Registration {}
// SAFETY: See above.
unsafe impl Sync for Registration {}

impl Registration {
    /// Registers the "rdma" client transport class.
    pub(crate) fn new(module: &'static ThisModule) -> Result<Self> {
        let mut name = [0 as c_char; 32];
        for (dst, src) in name.iter_mut().zip(b"rdma") {
            *dst = *src as c_char;
        }
        let class = KBox::pin(
            Opaque::new(ClassWithNetids {
                class: sys::xprt_class {
                    ident: IDENT,
                    setup: Some(xprt_setup),
                    owner: module.as_ptr().cast(),
                    name,
                    ..Default::default()
                },
                netid: [
                    c"rdma".as_char_ptr().cast(),
                    c"rdma6".as_char_ptr().cast(),
                    c"".as_char_ptr().cast(),
                ],
            }),
            GFP_KERNEL,
        )?;
        CLASS.store(class.get().cast(), Ordering::Release);
        // SAFETY: The class is pinned in the heap and stays registered
        // until `drop` unregisters it.
        kernel::error::to_result(unsafe { sys::xprt_register_transport(class.get().cast()) })?;
        Ok(Self { class })
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: The class was registered in `new`. Module references held
        // by live transports keep us from being dropped while one exists.
        unsafe { sys::xprt_unregister_transport(self.class.get().cast()) };
    }
}

/// Our transport, allocated by `xprt_alloc` (zeroed) with `struct
/// rpc_xprt` first.
///
/// # Invariants
///
/// `xprt` is a live `rpc_xprt` whose `ops` are ours. `ep` is only read or
/// changed with `XPRT_LOCKED` held (connect worker, `send_request`,
/// `close`, `destroy`); every other field is valid when zeroed.
#[repr(C)]
pub(crate) struct RdmaXprt {
    xprt: Opaque<sys::rpc_xprt>,
    connect_work: Opaque<sys::delayed_work>,
    timeout: Opaque<sys::rpc_timeout>,
    ep: AtomicPtr<Ep>,
    /// A connection attempt failed or a connection was lost: back off.
    backoff: AtomicBool,
    /// A Reply arrived since the last connect: reset the backoff.
    had_reply: AtomicBool,
    stats: Stats,
}

impl RdmaXprt {
    /// # Safety
    ///
    /// `xprt` must be a live transport created by our `setup`.
    unsafe fn from_raw<'a>(xprt: *mut sys::rpc_xprt) -> &'a Self {
        // SAFETY: `RdmaXprt` is `repr(C)` with the `rpc_xprt` first, and
        // `xprt_alloc` gave us `size_of::<RdmaXprt>()` zeroed bytes.
        unsafe { &*xprt.cast::<Self>() }
    }

    fn raw(&self) -> *mut sys::rpc_xprt {
        self.xprt.get()
    }

    pub(super) fn net(&self) -> *mut sys::net {
        // SAFETY: `xprt` is live; `xprt_net` is set by `xprt_alloc`.
        unsafe { (*self.raw()).xprt_net }
    }

    pub(super) fn dst_addr(&self) -> *const sys::sockaddr {
        // SAFETY: `xprt` is live.
        unsafe { (&raw const (*self.raw()).addr).cast() }
    }

    pub(super) fn resolve_timeout(&self) -> c_ulong {
        // A little over rdma_cm's own resolution timeout.
        hz().saturating_mul(c_ulong::from(crate::rdma::RESOLVE_TIMEOUT_MS / 1000 + 1))
    }

    /// How long to wait for rdma_cm's verdict on a connection attempt.
    ///
    /// rdma_cm retransmits the REQ by itself (about a minute in all) and
    /// then reports an error, and a peer that is slow to accept, for
    /// instance while it is still tearing down the connection we lost,
    /// answers a REQ it received long ago. Giving up earlier and starting
    /// over with a fresh REQ loses that, so like rpcrdma.ko we wait for the
    /// verdict; the cap only guards against a verdict that never comes.
    pub(super) fn connect_timeout(&self) -> c_ulong {
        // SAFETY: `xprt` is live; a racy read of a word is harmless here.
        let to = unsafe { (*self.raw()).connect_timeout };
        to.max(CONNECT_WAIT_CAP_SECS * hz())
    }

    /// The server address as printed in mountstats, for log messages.
    pub(super) fn peer(&self) -> &kernel::str::CStr {
        // SAFETY: `xprt` is live; the display strings are set in `setup`
        // and replaced only by `set_port`, before the first connect.
        let ptr = unsafe {
            (*self.raw()).address_strings[sys::rpc_display_format_t_RPC_DISPLAY_ADDR as usize]
        };
        if ptr.is_null() {
            return c"?";
        }
        // SAFETY: Display strings are NUL-terminated and live as long as
        // the transport.
        unsafe { kernel::str::CStr::from_char_ptr(ptr.cast()) }
    }

    /// Asks sunrpc to close the connection (through its autoclose work).
    pub(super) fn force_disconnect(&self) {
        // SAFETY: `xprt` is live.
        unsafe { sys::xprt_force_disconnect(self.raw()) };
    }

    fn connected(&self) -> bool {
        // SAFETY: `xprt` is live.
        unsafe { sys::rpcrdma_rs_xprt_connected(self.raw()) }
    }

    /// # Safety
    ///
    /// The caller holds `XPRT_LOCKED`.
    unsafe fn ep(&self) -> Option<&Ep> {
        // SAFETY: With `XPRT_LOCKED` held nobody frees the connection.
        unsafe { self.ep.load(Ordering::Acquire).as_ref() }
    }

    /// Tears down the current connection, if any.
    ///
    /// # Safety
    ///
    /// The caller holds `XPRT_LOCKED` (or is `destroy`).
    unsafe fn teardown(&self) {
        let ep = self.ep.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if !ep.is_null() {
            // SAFETY: `ep` came from `KBox::into_raw` in the connect
            // worker and was just unpublished.
            drop(unsafe { KBox::from_raw(ep) });
        }
    }

    fn update_cwnd(&self, grant: u32) {
        let xprt = self.raw();
        // SAFETY: `xprt` is live; `cwnd` is protected by `transport_lock`.
        unsafe {
            sys::rpcrdma_rs_spin_lock(&raw mut (*xprt).transport_lock);
            let cwnd = c_ulong::from(grant) << sys::RPC_CWNDSHIFT;
            if (*xprt).cwnd != cwnd {
                rdebug!("credits now {}\n", grant);
                (*xprt).cwnd = cwnd;
            }
            sys::rpcrdma_rs_spin_unlock(&raw mut (*xprt).transport_lock);
        }
    }

    fn reset_cwnd(&self) {
        let xprt = self.raw();
        // SAFETY: As for `update_cwnd`.
        unsafe {
            sys::rpcrdma_rs_spin_lock(&raw mut (*xprt).transport_lock);
            // `cong` is left alone: requests sent on the old connection
            // still hold their congestion slots and give them back when
            // they are released; zeroing it would make that underflow and
            // leave the transport congested for good.
            (*xprt).cwnd = c_ulong::from(1u32) << sys::RPC_CWNDSHIFT;
            sys::rpcrdma_rs_spin_unlock(&raw mut (*xprt).transport_lock);
        }
    }

    /// Handles one received message (Receive completion, process context).
    pub(super) fn receive(&self, msg: &[u8], _inline_recv: u32) {
        let Received::Reply {
            xid,
            credits,
            payload,
        } = classify_received(msg, &self.stats)
        else {
            return;
        };
        self.had_reply.store(true, Ordering::Relaxed);
        self.update_cwnd(credits);
        let xprt = self.raw();
        // SAFETY: `xprt` is live; `xprt_lookup_rqst` requires `queue_lock`,
        // and pinning keeps the request alive after we drop it.
        let rqst = unsafe {
            sys::rpcrdma_rs_spin_lock(&raw mut (*xprt).queue_lock);
            let rqst = sys::xprt_lookup_rqst(xprt, xid);
            if !rqst.is_null() {
                sys::xprt_pin_rqst(rqst);
            }
            sys::rpcrdma_rs_spin_unlock(&raw mut (*xprt).queue_lock);
            rqst
        };
        let Some(rqst) = NonNull::new(rqst) else {
            rdebug!("reply for unknown xid {:#x}\n", u32::from_be(xid));
            return;
        };
        let status = match payload {
            Ok(payload) => {
                // SAFETY: The request is pinned, so its receive buffer stays.
                unsafe { copy_to_rcv_buf(rqst, payload, &self.stats) }
            }
            Err(err) => err.to_errno(),
        };
        // SAFETY: The request is pinned; completing and unpinning need
        // `queue_lock`.
        unsafe {
            sys::rpcrdma_rs_spin_lock(&raw mut (*xprt).queue_lock);
            sys::xprt_complete_rqst((*rqst.as_ptr()).rq_task, status);
            sys::xprt_unpin_rqst(rqst.as_ptr());
            sys::rpcrdma_rs_spin_unlock(&raw mut (*xprt).queue_lock);
        }
    }
}

/// Copies a Reply into the request's private receive buffer, head then
/// pages then tail, as a byte stream transport does; returns the bytes
/// copied.
///
/// # Safety
///
/// `rqst` must be pinned (or otherwise kept alive).
unsafe fn copy_to_rcv_buf(rqst: NonNull<sys::rpc_rqst>, payload: &[u8], stats: &Stats) -> c_int {
    // SAFETY: The caller keeps `rqst` alive; the buffer layout is fixed
    // once the request is queued for receive.
    let buf = unsafe { &raw const (*rqst.as_ptr()).rq_private_buf };
    // SAFETY: `buf` is valid; reading the three lengths.
    let room =
        unsafe { (*buf).head[0].iov_len + (*buf).page_len as usize + (*buf).tail[0].iov_len };
    let len = payload.len().min(room);
    let Ok(len32) = c_uint::try_from(len) else {
        return EIO.to_errno();
    };
    // SAFETY: `len` fits the buffer's head, pages and tail; `payload` has
    // at least `len` bytes; the helper only reads from it.
    let rc =
        unsafe { sys::rpcrdma_rs_write_xdr_buf(buf, payload.as_ptr().cast_mut().cast(), len32) };
    if rc != 0 {
        return EIO.to_errno();
    }
    // Bytes that landed past the head: what rpcrdma.ko's fixup copies.
    // SAFETY: `buf` is valid.
    let head = unsafe { (*buf).head[0].iov_len };
    bump(&stats.fixup_copy_count, len.saturating_sub(head) as u64);
    c_int::try_from(len).unwrap_or(c_int::MAX)
}

/// Fails `setup` with `err`, as an `ERR_PTR`.
fn err_ptr(err: Error) -> *mut sys::rpc_xprt {
    err.to_errno() as isize as *mut sys::rpc_xprt
}

fn this_module() -> *mut sys::module {
    <crate::RpcRdma as kernel::ModuleMetadata>::THIS_MODULE
        .as_ptr()
        .cast()
}

/// `xprt_class.setup`.
///
/// # Safety
///
/// Called by sunrpc with valid `args`.
unsafe extern "C" fn xprt_setup(args: *mut sys::xprt_create) -> *mut sys::rpc_xprt {
    // SAFETY: sunrpc passes valid arguments.
    let args = unsafe { &*args };
    if args.addrlen > core::mem::size_of::<sys::__kernel_sockaddr_storage>() {
        return err_ptr(EBADF);
    }
    // SAFETY: Our own module pointer.
    if !unsafe { sys::rpcrdma_rs_try_module_get(this_module()) } {
        return err_ptr(EIO);
    }
    // SAFETY: `args.net` is valid; sunrpc zero-allocates at least our size.
    let xprt = unsafe {
        sys::xprt_alloc(
            args.net,
            core::mem::size_of::<RdmaXprt>(),
            MIN_SLOTS,
            MAX_SLOTS,
        )
    };
    if xprt.is_null() {
        // SAFETY: Balances the get above.
        unsafe { sys::rpcrdma_rs_module_put(this_module()) };
        return err_ptr(ENOMEM);
    }
    // SAFETY: `xprt` is fresh and ours alone; `args.dstaddr` holds
    // `args.addrlen` bytes.
    unsafe {
        let rx = RdmaXprt::from_raw(xprt);
        let hz = hz();
        let to = rx.timeout.get();
        (*to).to_initval = 60 * hz;
        (*to).to_maxval = 60 * hz;
        (*xprt).timeout = to;
        (*xprt).connect_timeout = (*to).to_initval;
        (*xprt).max_reconnect_timeout = (*to).to_maxval;
        (*xprt).bind_timeout = 60 * hz;
        (*xprt).reestablish_timeout = 0;
        (*xprt).idle_timeout = 5 * 60 * hz;
        (*xprt).ops = &OPS;
        (*xprt).prot = IPPROTO_TCP;
        (*xprt).xprt_class = CLASS.load(Ordering::Acquire);
        (*xprt).addrlen = args.addrlen;
        core::ptr::copy_nonoverlapping(
            args.dstaddr.cast::<u8>(),
            (&raw mut (*xprt).addr).cast::<u8>(),
            args.addrlen,
        );
        if addr_port(xprt) != 0 {
            sys::rpcrdma_rs_xprt_set_bound(xprt);
        }
        format_addresses(xprt);
        sys::rpcrdma_rs_init_delayed_work(rx.connect_work.get(), Some(connect_worker));
        (*xprt).max_payload = MAX_PAYLOAD;
        rdebug!("transport created\n");
    }
    xprt
}

/// The registered class, for `xprt->xprt_class` (`xprt_create` does not
/// carry it).
static CLASS: AtomicPtr<sys::xprt_class> = AtomicPtr::new(core::ptr::null_mut());

/// The port in `xprt->addr`, in host order.
///
/// # Safety
///
/// `xprt` must be live.
unsafe fn addr_port(xprt: *mut sys::rpc_xprt) -> u16 {
    // SAFETY: `sin_port` and `sin6_port` share offset 2 of the address.
    let bytes = unsafe { &*(&raw const (*xprt).addr).cast::<[u8; 4]>() };
    u16::from_be_bytes([bytes[2], bytes[3]])
}

/// Stores a formatted string as one of the transport's display strings.
///
/// # Safety
///
/// `xprt` must be live and not yet visible to other threads, or the
/// caller must hold `XPRT_LOCKED`.
unsafe fn set_display(xprt: *mut sys::rpc_xprt, which: u32, s: Option<CString>) {
    let ptr = match s {
        // SAFETY: `s` is NUL-terminated.
        Some(s) => unsafe { sys::rpcrdma_rs_kstrdup(s.as_char_ptr().cast()) },
        None => core::ptr::null_mut(),
    };
    // SAFETY: `which` is below RPC_DISPLAY_MAX; the old string, if any,
    // was allocated by us.
    unsafe {
        let slot = &raw mut (*xprt).address_strings[which as usize];
        sys::rpcrdma_rs_kfree((*slot).cast());
        *slot = ptr;
    }
}

/// Fills `xprt->address_strings` like `xprt_rdma_format_addresses`.
///
/// # Safety
///
/// `xprt` must be live and not yet visible to other threads.
unsafe fn format_addresses(xprt: *mut sys::rpc_xprt) {
    // SAFETY: `addr` is a sockaddr_storage of at least 28 bytes.
    let addr = unsafe { &*(&raw const (*xprt).addr).cast::<[u8; 28]>() };
    let family = u16::from_ne_bytes([addr[0], addr[1]]);
    let (hex, netid) = match family {
        AF_INET => {
            let a = u32::from_be_bytes([addr[4], addr[5], addr[6], addr[7]]);
            (CString::try_from_fmt(fmt!("{:08x}", a)).ok(), c"rdma")
        }
        AF_INET6 => {
            let a = u128::from_be_bytes(addr[8..24].try_into().unwrap_or([0; 16]));
            (CString::try_from_fmt(fmt!("{:032x}", a)).ok(), c"rdma6")
        }
        _ => {
            pr_err!("unrecognized address family\n");
            return;
        }
    };
    let mut buf = [0 as c_char; 128];
    // SAFETY: `addr` is a valid sockaddr; `buf` is writable for its size.
    let n = unsafe {
        sys::rpcrdma_rs_ntop(
            (&raw const (*xprt).addr).cast(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    let mut bytes = [0u8; 128];
    for (dst, src) in bytes.iter_mut().zip(buf.iter()) {
        *dst = *src as u8;
    }
    let printable = core::str::from_utf8(bytes.get(..n.min(127)).unwrap_or(&[])).unwrap_or("");
    // SAFETY: `xprt` is live and still private to us.
    unsafe {
        set_display(
            xprt,
            sys::rpc_display_format_t_RPC_DISPLAY_ADDR,
            CString::try_from_fmt(fmt!("{}", printable)).ok(),
        );
        set_display(xprt, sys::rpc_display_format_t_RPC_DISPLAY_HEX_ADDR, hex);
        (*xprt).address_strings[sys::rpc_display_format_t_RPC_DISPLAY_PROTO as usize] =
            c"rdma".as_char_ptr().cast();
        (*xprt).address_strings[sys::rpc_display_format_t_RPC_DISPLAY_NETID as usize] =
            netid.as_char_ptr().cast();
        format_port(xprt);
    }
}

/// # Safety
///
/// As for [`set_display`].
unsafe fn format_port(xprt: *mut sys::rpc_xprt) {
    // SAFETY: The caller guarantees `xprt` is live.
    let port = unsafe { addr_port(xprt) };
    // SAFETY: As above.
    unsafe {
        set_display(
            xprt,
            sys::rpc_display_format_t_RPC_DISPLAY_PORT,
            CString::try_from_fmt(fmt!("{}", port)).ok(),
        );
        set_display(
            xprt,
            sys::rpc_display_format_t_RPC_DISPLAY_HEX_PORT,
            CString::try_from_fmt(fmt!("{:4x}", port)).ok(),
        );
    }
}

/// Frees the display strings we allocated (not the constant PROTO and
/// NETID ones).
///
/// # Safety
///
/// `xprt` must be live and no longer used by anyone else.
unsafe fn free_addresses(xprt: *mut sys::rpc_xprt) {
    for which in [
        sys::rpc_display_format_t_RPC_DISPLAY_ADDR,
        sys::rpc_display_format_t_RPC_DISPLAY_PORT,
        sys::rpc_display_format_t_RPC_DISPLAY_HEX_ADDR,
        sys::rpc_display_format_t_RPC_DISPLAY_HEX_PORT,
    ] {
        // SAFETY: The caller owns `xprt`.
        unsafe { set_display(xprt, which, None) };
    }
}

/// The operations table.
static OPS: sys::rpc_xprt_ops = sys::rpc_xprt_ops {
    set_buffer_size: None,
    reserve_xprt: Some(sys::xprt_reserve_xprt_cong),
    release_xprt: Some(sys::xprt_release_xprt_cong),
    alloc_slot: Some(sys::xprt_alloc_slot),
    free_slot: Some(sys::xprt_free_slot),
    rpcbind: Some(sys::rpcb_getport_async),
    set_port: Some(op_set_port),
    connect: Some(op_connect),
    get_srcaddr: None,
    get_srcport: None,
    buf_alloc: Some(op_buf_alloc),
    buf_free: Some(op_buf_free),
    prepare_request: None,
    send_request: Some(op_send_request),
    abort_send_request: None,
    wait_for_reply_request: Some(sys::xprt_wait_for_reply_request_def),
    timer: Some(op_timer),
    release_request: Some(sys::xprt_release_rqst_cong),
    close: Some(op_close),
    destroy: Some(op_destroy),
    set_connect_timeout: Some(op_set_connect_timeout),
    print_stats: Some(op_print_stats),
    enable_swap: None,
    disable_swap: None,
    inject_disconnect: Some(op_inject_disconnect),
    bc_setup: Some(op_bc_setup),
    bc_maxpayload: Some(op_bc_maxpayload),
    bc_num_slots: Some(op_bc_num_slots),
    bc_free_rqst: None,
    bc_destroy: None,
};

/// Backchannel setup. The NFSv4.1 client requires the operation to
/// exist; backward-direction Calls are dropped (and counted) on receipt,
/// so there is nothing to preallocate.
///
/// # Safety
///
/// Called by sunrpc with a live transport.
unsafe extern "C" fn op_bc_setup(_xprt: *mut sys::rpc_xprt, _min_reqs: c_uint) -> c_int {
    0
}

/// Largest backward-direction message: one inline buffer less the
/// smallest transport header, as rpcrdma.ko computes it.
///
/// # Safety
///
/// Called by sunrpc with a live transport.
unsafe extern "C" fn op_bc_maxpayload(_xprt: *mut sys::rpc_xprt) -> usize {
    super::INLINE_SIZE - super::HDRLEN_MIN
}

/// Backward-direction slots offered in CREATE_SESSION: the minimum.
///
/// # Safety
///
/// Called by sunrpc with a live transport.
unsafe extern "C" fn op_bc_num_slots(_xprt: *mut sys::rpc_xprt) -> c_uint {
    1
}

/// Allocates the Call and Reply buffers of a request in one piece.
///
/// # Safety
///
/// Called by sunrpc with a live task that owns a request.
unsafe extern "C" fn op_buf_alloc(task: *mut sys::rpc_task) -> c_int {
    // SAFETY: sunrpc passes a task with a request.
    unsafe {
        let rqst = (*task).tk_rqstp;
        let call = (*rqst).rq_callsize;
        let Some(size) = call.checked_add((*rqst).rq_rcvsize) else {
            return ENOMEM.to_errno();
        };
        let buf = sys::rpcrdma_rs_task_alloc(size).cast::<u8>();
        if buf.is_null() {
            return ENOMEM.to_errno();
        }
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
unsafe extern "C" fn op_buf_free(task: *mut sys::rpc_task) {
    // SAFETY: sunrpc passes a task whose `rq_buffer` came from us.
    unsafe {
        let rqst = (*task).tk_rqstp;
        sys::rpcrdma_rs_kfree((*rqst).rq_buffer);
        (*rqst).rq_buffer = core::ptr::null_mut();
        (*rqst).rq_rbuffer = core::ptr::null_mut();
    }
}

/// Initial reconnect backoff, doubled per failure up to
/// `max_reconnect_timeout`.
fn init_reestablish() -> c_ulong {
    3 * hz()
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_set_port(xprt: *mut sys::rpc_xprt, port: c_ushort) {
    // SAFETY: sunrpc passes a live transport and holds it for rpcbind.
    unsafe {
        let bytes = (&raw mut (*xprt).addr).cast::<[u8; 4]>();
        let [hi, lo] = port.to_be_bytes();
        (*bytes)[2] = hi;
        (*bytes)[3] = lo;
        format_port(xprt);
    }
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_connect(xprt: *mut sys::rpc_xprt, task: *mut sys::rpc_task) {
    // SAFETY: sunrpc passes a live transport of ours.
    let rx = unsafe { RdmaXprt::from_raw(xprt) };
    // SAFETY: The task holds XPRT_LOCKED; the connect worker inherits it.
    let locked = unsafe { sys::xprt_lock_connect(xprt, task, xprt.cast()) };
    if !locked {
        pr_warn!("connect without the transport lock\n");
    }
    let mut delay: c_ulong = 0;
    // SAFETY: With XPRT_LOCKED held we own the reconnect state.
    unsafe {
        if rx.had_reply.swap(false, Ordering::Relaxed) {
            (*xprt).reestablish_timeout = 0;
        }
        if rx.backoff.load(Ordering::Relaxed) {
            delay = sys::xprt_reconnect_delay(xprt);
            sys::xprt_reconnect_backoff(xprt, init_reestablish());
        }
    }
    rdebug!("connect in {} jiffies\n", delay);
    // SAFETY: The work was initialised in setup.
    unsafe { sys::rpcrdma_rs_queue_delayed_work(rx.connect_work.get(), delay) };
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn connect_worker(work: *mut sys::work_struct) {
    // SAFETY: The work item is the `work` of our `connect_work`.
    let dwork = unsafe { kernel::container_of!(work, sys::delayed_work, work) };
    // SAFETY: `connect_work` is a field of a live `RdmaXprt`.
    let rx = unsafe {
        &*kernel::container_of!(
            dwork.cast::<Opaque<sys::delayed_work>>(),
            RdmaXprt,
            connect_work
        )
    };
    let xprt = rx.raw();
    // SAFETY: The connect lock (XPRT_LOCKED) is ours until unlocked below.
    unsafe { rx.teardown() };
    // SAFETY: As above.
    unsafe { sys::rpcrdma_rs_xprt_clear_connected(xprt) };
    rx.reset_cwnd();
    let start = jiffies();
    let result = Ep::connect(rx);
    let took_ms = jiffies().wrapping_sub(start).saturating_mul(1000) / hz().max(1);
    // SAFETY: `xprt` is live; we still hold the connect lock.
    let status = unsafe {
        sys::rpcrdma_rs_xprt_clear_connecting(xprt);
        match result {
            Ok(ep) => {
                let ep_inline = ep.inline();
                rx.ep.store(KBox::into_raw(ep), Ordering::Release);
                rx.backoff.store(false, Ordering::Relaxed);
                (*xprt).connect_cookie = (*xprt).connect_cookie.wrapping_add(1);
                (*xprt).stat.connect_count += 1;
                (*xprt).stat.connect_time = (*xprt)
                    .stat
                    .connect_time
                    .wrapping_add(jiffies().wrapping_sub((*xprt).stat.connect_start) as u64);
                let inline = ep_inline;
                sys::rpcrdma_rs_xprt_set_connected(xprt);
                pr_info!(
                    "connected to {} (inline send {} recv {}) in {} ms\n",
                    rx.peer(),
                    inline.send,
                    inline.recv,
                    took_ms
                );
                EAGAIN.to_errno()
            }
            Err(err) => {
                pr_info!(
                    "connect to {} failed ({}) after {} ms\n",
                    rx.peer(),
                    err.to_errno(),
                    took_ms
                );
                rx.backoff.store(true, Ordering::Relaxed);
                err.to_errno()
            }
        }
    };
    // SAFETY: Releases the lock taken in `op_connect`, then wakes waiters.
    unsafe {
        sys::xprt_unlock_connect(xprt, xprt.cast());
        sys::xprt_wake_pending_tasks(xprt, status);
    }
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_send_request(rqst: *mut sys::rpc_rqst) -> c_int {
    // SAFETY: sunrpc passes a live request with XPRT_LOCKED held.
    let (xprt, rx) = unsafe {
        let xprt = (*rqst).rq_xprt;
        (xprt, RdmaXprt::from_raw(xprt))
    };
    if !rx.connected() {
        return ENOTCONN.to_errno();
    }
    // SAFETY: Live transport and request.
    if !unsafe { sys::xprt_request_get_cong(xprt, rqst) } {
        return EBADSLT.to_errno();
    }
    // SAFETY: XPRT_LOCKED is held by the caller.
    let Some(ep) = (unsafe { rx.ep() }) else {
        return ENOTCONN.to_errno();
    };
    // SAFETY: Live transport and request.
    let (xid, cookie, snd) = unsafe {
        (
            (*rqst).rq_xid,
            (*rqst).rq_connect_cookie,
            &raw const (*rqst).rq_snd_buf,
        )
    };
    // A retransmission on the same connection would upset the credit
    // accounting: reconnect instead, as rpcrdma.ko does.
    // SAFETY: Live transport.
    if cookie == unsafe { (*xprt).connect_cookie } {
        // SAFETY: XPRT_LOCKED is held.
        unsafe { op_close(xprt) };
        return ENOTCONN.to_errno();
    }
    // SAFETY: Reading the length of the send buffer.
    let snd_len = unsafe { (*snd).len } as usize;
    let inline_send = ep.inline().send as usize;
    let sent = ep.send(|buf| {
        let hdr = encode_call_header(buf, xid)?;
        let total = hdr.checked_add(snd_len)?;
        if total > inline_send || total > buf.len() {
            return None;
        }
        let dst = buf.get_mut(hdr..total)?;
        // SAFETY: `snd` describes `snd_len` bytes of the request's Call,
        // stable while XPRT_LOCKED is held; `dst` has room for them.
        let rc = unsafe {
            sys::rpcrdma_rs_read_xdr_buf(snd, dst.as_mut_ptr().cast(), snd_len as c_uint)
        };
        (rc == 0).then_some(total)
    });
    match sent {
        Ok(()) => {}
        Err(SendError::NoBuffer) => {
            bump(&rx.stats.empty_sendctx_q, 1);
            return ENOBUFS.to_errno();
        }
        Err(SendError::TooBig) => {
            bump(&rx.stats.failed_marshal_count, 1);
            rwarn!("call of {} bytes exceeds the inline threshold\n", snd_len);
            return EMSGSIZE.to_errno();
        }
        Err(SendError::Post) => {
            // SAFETY: XPRT_LOCKED is held.
            unsafe { op_close(xprt) };
            return ENOTCONN.to_errno();
        }
    }
    // Everything past the head was pulled up into the Send buffer.
    // SAFETY: Reading the head length of the send buffer.
    let head = unsafe { (*snd).head[0].iov_len };
    bump(
        &rx.stats.pullup_copy_count,
        snd_len.saturating_sub(head) as u64,
    );
    // SAFETY: Live request and task.
    unsafe {
        (*rqst).rq_xtime = sys::ktime_get();
        (*rqst).rq_xmit_bytes_sent += snd_len;
        // A Call without Reply throws off the credit accounting.
        if !sys::rpcrdma_rs_reply_expected((*rqst).rq_task) {
            op_close(xprt);
            return ENOTCONN.to_errno();
        }
    }
    0
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_timer(xprt: *mut sys::rpc_xprt, _task: *mut sys::rpc_task) {
    // SAFETY: sunrpc passes a live transport.
    unsafe { sys::xprt_force_disconnect(xprt) };
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_close(xprt: *mut sys::rpc_xprt) {
    // SAFETY: sunrpc passes a live transport of ours and holds XPRT_LOCKED.
    let rx = unsafe { RdmaXprt::from_raw(xprt) };
    rdebug!("close\n");
    // SAFETY: XPRT_LOCKED is held.
    unsafe {
        if !rx.ep.load(Ordering::Acquire).is_null() {
            pr_info!("connection to {} closed\n", rx.peer());
            rx.backoff.store(true, Ordering::Relaxed);
        }
        rx.teardown();
        (*xprt).connect_cookie = (*xprt).connect_cookie.wrapping_add(1);
        sys::xprt_disconnect_done(xprt);
    }
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_destroy(xprt: *mut sys::rpc_xprt) {
    // SAFETY: sunrpc passes a live transport of ours; nothing else uses it.
    let rx = unsafe { RdmaXprt::from_raw(xprt) };
    rdebug!("destroy\n");
    // SAFETY: The work was initialised in setup; after it is cancelled and
    // the connection torn down, nothing refers to the transport.
    unsafe {
        sys::rpcrdma_rs_cancel_delayed_work_sync(rx.connect_work.get());
        rx.teardown();
        free_addresses(xprt);
        sys::xprt_free(xprt);
        sys::rpcrdma_rs_module_put(this_module());
    }
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_set_connect_timeout(
    xprt: *mut sys::rpc_xprt,
    connect_timeout: c_ulong,
    reconnect_timeout: c_ulong,
) {
    // SAFETY: sunrpc passes a live transport of ours; the timeouts are
    // protected by `transport_lock`.
    unsafe {
        let rx = RdmaXprt::from_raw(xprt);
        sys::rpcrdma_rs_spin_lock(&raw mut (*xprt).transport_lock);
        if connect_timeout < (*xprt).connect_timeout {
            let to = rx.timeout.get();
            let initval = connect_timeout.max(init_reestablish() << 1);
            (*to).to_initval = initval;
            (*to).to_maxval = initval;
            (*xprt).timeout = to;
            (*xprt).connect_timeout = connect_timeout;
        }
        if reconnect_timeout < (*xprt).max_reconnect_timeout {
            (*xprt).max_reconnect_timeout = reconnect_timeout;
        }
        sys::rpcrdma_rs_spin_unlock(&raw mut (*xprt).transport_lock);
    }
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_inject_disconnect(xprt: *mut sys::rpc_xprt) {
    // Through autoclose, which disconnects the QP with XPRT_LOCKED held, so
    // the connection cannot vanish under us.
    // SAFETY: sunrpc passes a live transport.
    unsafe { sys::xprt_force_disconnect(xprt) };
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_print_stats(xprt: *mut sys::rpc_xprt, seq: *mut sys::seq_file) {
    // SAFETY: sunrpc passes a live transport of ours and a seq_file owned by
    // this thread.
    let (rx, stat, last_used, m) = unsafe {
        (
            RdmaXprt::from_raw(xprt),
            &(*xprt).stat,
            (*xprt).last_used,
            kernel::seq_file::SeqFile::from_raw(seq.cast()),
        )
    };
    let hz = hz().max(1);
    let idle = if rx.connected() {
        (jiffies().wrapping_sub(last_used) as i64) / hz as i64
    } else {
        0
    };
    let s = &rx.stats;
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    kernel::seq_print!(
        m,
        "\txprt:\trdma {} {} {} {} {} {} {} {} {} {} ",
        0,
        stat.bind_count,
        stat.connect_count,
        stat.connect_time / hz as u64,
        idle,
        stat.sends,
        stat.recvs,
        stat.bad_xids,
        stat.req_u,
        stat.bklog_u
    );
    kernel::seq_print!(
        m,
        "{} {} {} {} {} {} {} {} {} {} {} ",
        0,
        0,
        0,
        0,
        0,
        get(&s.pullup_copy_count),
        get(&s.fixup_copy_count),
        0,
        get(&s.failed_marshal_count),
        get(&s.bad_reply_count),
        0
    );
    kernel::seq_print!(
        m,
        "{} {} {} {} {} {}\n",
        0,
        0,
        0,
        0,
        get(&s.empty_sendctx_q),
        0
    );
}
