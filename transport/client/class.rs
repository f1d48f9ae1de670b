// SPDX-License-Identifier: GPL-2.0

//! Transport class "rdma" (netids "rdma" and "rdma6"): registration with
//! sunrpc, `setup` of a new `rpc_xprt`, its address strings, and the
//! `rpc_xprt_ops` table whose entries live in the files named for their
//! jobs.

use core::ffi::c_ushort;

use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Release};

use super::backchannel::{
    op_bc_destroy, op_bc_free_rqst, op_bc_maxpayload, op_bc_num_slots, op_bc_setup,
};
use super::marshal::op_send_request;
use super::xprt::{
    op_close, op_connect, op_destroy, op_inject_disconnect, op_print_stats, op_set_connect_timeout,
    op_timer, RdmaXprt,
};
use super::{Config, MAX_PAYLOAD};
use crate::sunrpc::{
    addr_port, alloc_slot, buf_alloc, buf_free, format_addresses, format_port, free_slot, hz,
    DelayedWork, SlotPool, WaitQueue, XprtClass,
};
use crate::sys;

/// `XPRT_TRANSPORT_RDMA`.
pub(crate) const IDENT: i32 = 256;

/// `IPPROTO_TCP`: `xprt->prot` names the address family's TCP for the
/// benefit of side protocols, as rpcrdma.ko does.
const IPPROTO_TCP: i32 = 6;

/// The registered "rdma" client transport class.
pub(crate) struct Registration {
    _class: XprtClass,
}

impl Registration {
    /// Registers the "rdma" client transport class.
    pub(crate) fn new(module: &'static ThisModule) -> Result<Self> {
        let class = XprtClass::register(
            module,
            "rdma",
            IDENT,
            xprt_setup,
            &[c"rdma", c"rdma6"],
            |class| CLASS.store(class, Release),
        )?;
        Ok(Self { _class: class })
    }
}

/// Fails `setup` with `err`, as an `ERR_PTR`.
fn err_ptr(err: Error) -> *mut sys::rpc_xprt {
    err.to_errno() as isize as *mut sys::rpc_xprt
}

pub(super) fn this_module() -> *mut sys::module {
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
    let cfg = Config::from_params();
    // SAFETY: `args.net` is valid; sunrpc zero-allocates at least our size.
    let xprt = unsafe {
        sys::xprt_alloc(
            args.net,
            core::mem::size_of::<RdmaXprt>(),
            // None preallocated by sunrpc: the slots are our own.
            0,
            cfg.slots,
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
        (&raw mut (*xprt.cast::<RdmaXprt>()).cfg).write(cfg);
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
        (*xprt).xprt_class = CLASS.load(Acquire);
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
        let rxp = xprt.cast::<RdmaXprt>();
        // None of the initialisers fails.
        let _ = DelayedWork::new().__init(&raw mut (*rxp).connect_work);
        let _ = WaitQueue::new().__init(&raw mut (*rxp).fence_wq);
        let _ = SlotPool::new(cfg.slots).__init(&raw mut (*rxp).slots);
        (*xprt).max_payload = MAX_PAYLOAD;
        rdebug!("transport created\n");
    }
    xprt
}

/// The registered class, for `xprt->xprt_class` (`xprt_create` does not
/// carry it).
static CLASS: Atomic<*mut sys::xprt_class> = Atomic::new(core::ptr::null_mut());

/// The operations table.
static OPS: sys::rpc_xprt_ops = sys::rpc_xprt_ops {
    set_buffer_size: None,
    reserve_xprt: Some(sys::xprt_reserve_xprt_cong),
    release_xprt: Some(sys::xprt_release_xprt_cong),
    alloc_slot: Some(alloc_slot::<RdmaXprt>),
    free_slot: Some(free_slot::<RdmaXprt>),
    rpcbind: Some(sys::rpcb_getport_async),
    set_port: Some(op_set_port),
    connect: Some(op_connect),
    get_srcaddr: None,
    get_srcport: None,
    buf_alloc: Some(buf_alloc::<RdmaXprt>),
    buf_free: Some(buf_free::<RdmaXprt>),
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
    bc_free_rqst: Some(op_bc_free_rqst),
    bc_destroy: Some(op_bc_destroy),
};

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
