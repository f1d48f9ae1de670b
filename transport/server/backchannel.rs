// SPDX-License-Identifier: GPL-2.0

//! The server's backchannel (RFC 8167): transport class "rdma backchannel"
//! (`XPRT_TRANSPORT_BC_RDMA`), which nfsd asks for to send NFSv4.1
//! callbacks (CB_RECALL and the others) over a client's own connection.
//!
//! nfsd creates one `rpc_xprt` of this class per session's connection,
//! linked both ways with the `svc_xprt` (`xpt_bc_xprt`, `bc_xprt`). A
//! backward Call goes out inline on the connection with the backchannel's
//! own credits; its Reply is recognised by `recvfrom` (an RDMA_MSG without
//! chunks whose RPC message is a REPLY) and copied into the waiting
//! request.

use kernel::prelude::*;

use super::conn::SvcConn;
use super::send;
use crate::sunrpc::{format_addresses, free_addresses, hz, SendRqst, Xprt, XprtClass};
use crate::sys;

/// Backward requests at once: the slots of the rpc_xprt and the credits
/// each backward Call grants (`RPCRDMA_MAX_BC_REQUESTS` is the same 64 in
/// rpcrdma.ko; NFSv4.1 sessions ask for far fewer).
pub(super) const BC_SLOTS: u32 = 16;

/// `XPRT_TRANSPORT_BC_RDMA`.
const IDENT: i32 = sys::xprt_transports_XPRT_TRANSPORT_BC_RDMA;

/// The backchannel transport: sunrpc's `rpc_xprt` and its timeouts, which
/// it points to.
#[repr(C)]
struct BcXprt {
    xprt: sys::rpc_xprt,
    timeout: sys::rpc_timeout,
}

/// Registers the class.
pub(crate) fn register(module: &'static ThisModule) -> Result<XprtClass> {
    XprtClass::register(module, "rdma backchannel", IDENT, bc_setup, &[], |_| ())
}

/// `xprt_class.setup`: the backchannel of `args->bc_xprt`.
///
/// # Safety
///
/// Called by sunrpc with valid `args` naming a live server connection of
/// ours.
unsafe extern "C" fn bc_setup(args: *mut sys::xprt_create) -> *mut sys::rpc_xprt {
    // SAFETY: sunrpc passes valid arguments.
    let args = unsafe { &*args };
    if args.addrlen > core::mem::size_of::<sys::__kernel_sockaddr_storage>()
        || args.bc_xprt.is_null()
    {
        return EBADF.to_ptr();
    }
    let slots = BC_SLOTS;
    // SAFETY: Our own module, loaded while its code runs. The transport
    // holds the reference (put by `bc_destroy`), as the TCP backchannel
    // does: it can outlive the server connection (the callback client
    // puts it from a work item), and `bc_destroy` is ours.
    if !unsafe { sys::rpcrdma_rs_try_module_get(this_module()) } {
        return EIO.to_ptr();
    }
    // SAFETY: `args.net` is valid; sunrpc zero-allocates our size.
    let xprt = unsafe { sys::xprt_alloc(args.net, core::mem::size_of::<BcXprt>(), slots, slots) };
    if xprt.is_null() {
        // SAFETY: Balances the get above.
        unsafe { sys::rpcrdma_rs_module_put(this_module()) };
        return ENOMEM.to_ptr();
    }
    // SAFETY: `xprt` is fresh and ours alone, `BcXprt`-sized with the
    // `rpc_xprt` first; `args.dstaddr` holds `args.addrlen` bytes; the
    // server connection is live (nfsd holds it while it sets up its
    // callback client).
    unsafe {
        let bx = xprt.cast::<BcXprt>();
        let to = &raw mut (*bx).timeout;
        (*to).to_initval = 60 * hz();
        (*to).to_maxval = 60 * hz();
        (*xprt).timeout = to;
        sys::rpcrdma_rs_xprt_set_bound(xprt);
        sys::rpcrdma_rs_xprt_set_connected(xprt);
        (*xprt).bind_timeout = 0;
        (*xprt).reestablish_timeout = 0;
        (*xprt).idle_timeout = 0;
        (*xprt).prot = IDENT;
        (*xprt).ops = &BC_OPS;
        core::ptr::copy_nonoverlapping(
            args.dstaddr.cast::<u8>(),
            (&raw mut (*xprt).addr).cast::<u8>(),
            args.addrlen,
        );
        (*xprt).addrlen = args.addrlen;
        format_addresses(xprt);
        // `resvport` stays 0 (zero-allocated): no privileged port here.
        let conn = &*args.bc_xprt.cast::<SvcConn>();
        (*xprt).max_payload = send::bc_max_payload(conn);
        // `xprt_alloc`'s reference goes to the caller (`rpc_create` keeps
        // it as the callback client's `cl_xprt`, put when the client is
        // freed); this one to the server connection, put when it is freed
        // (`svc_xprt_free`). Not a third, as svcrdma takes: one rpc_xprt
        // and one netns leaked per connection.
        sys::xprt_get(xprt);
        (*args.bc_xprt).xpt_bc_xprt = xprt;
        (*xprt).bc_xprt = args.bc_xprt;
    }
    rdebug!("server: backchannel set up\n");
    xprt
}

static BC_OPS: sys::rpc_xprt_ops = sys::rpc_xprt_ops {
    set_buffer_size: None,
    reserve_xprt: Some(sys::xprt_reserve_xprt_cong),
    release_xprt: Some(sys::xprt_release_xprt_cong),
    alloc_slot: Some(sys::xprt_alloc_slot),
    free_slot: Some(sys::xprt_free_slot),
    rpcbind: None,
    set_port: None,
    connect: None,
    get_srcaddr: None,
    get_srcport: None,
    buf_alloc: Some(sys::rpcrdma_rs_svc_bc_buf_alloc),
    buf_free: Some(sys::rpcrdma_rs_svc_bc_buf_free),
    prepare_request: None,
    send_request: Some(bc_send_request),
    abort_send_request: None,
    wait_for_reply_request: Some(sys::xprt_wait_for_reply_request_def),
    timer: None,
    release_request: Some(sys::xprt_release_rqst_cong),
    close: Some(bc_close),
    destroy: Some(bc_destroy),
    set_connect_timeout: None,
    print_stats: None,
    enable_swap: None,
    disable_swap: None,
    inject_disconnect: None,
    bc_setup: None,
    bc_maxpayload: None,
    bc_num_slots: None,
    bc_free_rqst: None,
    bc_destroy: None,
};

/// `send_request`: a backward Call, inline on the server connection. A
/// connection that cannot take it is closed (nfsd then marks the callback
/// path down and retries on a new one).
///
/// # Safety
///
/// Called by sunrpc with a request of a backchannel set up by
/// [`bc_setup`], holding `XPRT_LOCKED`.
unsafe extern "C" fn bc_send_request(rqst: *mut sys::rpc_rqst) -> i32 {
    // SAFETY: sunrpc passes a live request being sent under XPRT_LOCKED.
    let rqst = unsafe { SendRqst::from_raw(rqst) };
    // SAFETY: The backchannel's `bc_xprt` is the server connection that
    // holds a reference to it, alive while nfsd sends callbacks on it.
    let conn = unsafe { &*(*rqst.xprt().as_ptr()).bc_xprt.cast::<SvcConn>() };
    match send::backward_call(conn, &rqst) {
        Ok(()) => 0,
        Err(e) => {
            rdebug!("server: backward Call not sent: {:?}\n", e);
            conn.close_now();
            ENOTCONN.to_errno()
        }
    }
}

/// `close`.
///
/// # Safety
///
/// Called by sunrpc with a live backchannel.
unsafe extern "C" fn bc_close(xprt: *mut sys::rpc_xprt) {
    // SAFETY: Live (caller).
    unsafe {
        sys::xprt_disconnect_done(xprt);
        (*xprt).cwnd = core::ffi::c_ulong::from(sys::RPC_CWNDSHIFT);
    }
}

/// `destroy`: the last reference went.
///
/// # Safety
///
/// Called by sunrpc once, with a backchannel nobody uses any more.
unsafe extern "C" fn bc_destroy(xprt: *mut sys::rpc_xprt) {
    // SAFETY: Ours, unused (caller); allocated by `xprt_alloc` in
    // `bc_setup`, which took the module reference put last here.
    unsafe {
        free_addresses(xprt);
        sys::xprt_free(xprt);
        sys::rpcrdma_rs_module_put(this_module());
    }
}

fn this_module() -> *mut sys::module {
    <crate::RpcRdma as kernel::ModuleMetadata>::THIS_MODULE
        .as_ptr()
        .cast()
}

/// A backchannel Reply arrived on `conn`: complete the backward Call it
/// answers. `false` if there is no backchannel or no such Call.
pub(super) fn reply(conn: &SvcConn, xid: u32, credits: u32, payload: &[u8]) -> bool {
    let Some(xprt) = conn.xprt().bc_xprt() else {
        return false;
    };
    // `rq_xid` is as on the wire.
    let Some(mut rqst) = xprt.lookup_pinned(xid.to_be()) else {
        return false;
    };
    if rqst.write(0, payload).is_err() {
        rqst.complete(Err(EIO));
        return false;
    }
    set_cwnd(xprt, credits);
    rqst.complete(Ok(payload.len() as u32));
    true
}

/// The client's backward grant, as the congestion window (never zero, so
/// the backchannel cannot deadlock; never above our slots).
fn set_cwnd(xprt: &Xprt, credits: u32) {
    let credits = credits.clamp(1, BC_SLOTS);
    let mut lock = xprt.lock_transport();
    lock.set_cwnd(core::ffi::c_ulong::from(credits) << sys::RPC_CWNDSHIFT);
}
