// SPDX-License-Identifier: GPL-2.0

//! The server's backchannel (RFC 8167): the `rpc_xprt` class that nfsd's
//! callback client gets for one of our server connections (`rpc_create`
//! with `bc_xprt`), whose requests the connection sends as backward Calls.
//!
//! The connection type implements the safe [`BackchannelOwner`]; the class
//! ([`BcClass`]), the `rpc_xprt` ([`BcXprt`]) and its ops, and the links
//! between the two transports (`xpt_bc_xprt`, `bc_xprt`) live here.
//!
//! References, as in Linux 7.3:
//! - `xprt_alloc` gives the new `rpc_xprt` one reference, which goes to
//!   the caller: `rpc_create` keeps it as its client's `cl_xprt`, put by
//!   `rpc_free_client_work` (clnt.c).
//! - `setup` takes one for the connection's `xpt_bc_xprt`, put by
//!   `svc_xprt_free` (svc_xprt.c), as the TCP backchannel does
//!   (`xs_setup_bc_tcp`). Later callback clients on the same connection
//!   find the transport there and take their own (`rpc_create`).
//! - svcrdma takes a third that nobody puts: one `rpc_xprt` and one
//!   network namespace leaked per connection, and its debugfs files left
//!   pointing into the module. Not here.
//! - Each backchannel holds a module reference, as the TCP one does: the
//!   callback client puts its transport from a work item, possibly after
//!   the connection (and its module reference) went, and `destroy` is
//!   our code.

use core::ffi::{c_int, c_ulong};

use kernel::prelude::*;

use super::svc::{conn_of, this_module};
use super::{format_addresses, free_addresses, hz, SendRqst, SvcObject, XprtClass};
use crate::sys;

/// A server connection that carries a backchannel: what the backchannel
/// `rpc_xprt`'s ops call.
pub(crate) trait BackchannelOwner: SvcObject {
    /// Backward Calls at once: the backchannel's request slots.
    const SLOTS: u32;

    /// Largest backward Call (RPC message bytes) the connection sends.
    fn max_payload(&self) -> usize;

    /// Sends the backward Call `rqst` on the connection.
    fn send_backward_call(&self, rqst: &SendRqst<'_>) -> Result;

    /// Closes the connection at once: a backward Call could not be sent
    /// (called from rpciod, so `svc_xprt_close` is allowed).
    fn close_now(&self);
}

/// A registered backchannel class; unregistered on drop.
pub(crate) struct BcClass {
    _class: XprtClass,
}

impl BcClass {
    /// Registers class `name` with transport `ident` (`XPRT_TRANSPORT_BC`
    /// set) for connections of type `C`: nfsd asks for it with the ident of
    /// the connection's class ored with `XPRT_TRANSPORT_BC`.
    pub(crate) fn register<C: BackchannelOwner>(
        module: &'static ThisModule,
        name: &str,
        ident: i32,
    ) -> Result<Self> {
        let class = XprtClass::register(module, name, ident, setup::<C>, &[], |_| ())?;
        Ok(Self { _class: class })
    }
}

/// A backchannel transport: sunrpc's `rpc_xprt` and the timeouts it
/// points to.
///
/// # Invariants
///
/// Allocated by `xprt_alloc` with this size in [`setup`]`::<C>`, the only
/// place that installs `ops::<C>()`, so a transport whose ops are
/// `ops::<C>()` is a `BcXprt` whose `xprt.bc_xprt` is the `svc_xprt` of a
/// `C` ([`conn_of`] checked it). That connection is alive whenever sunrpc
/// sends on the backchannel: nfsd holds a reference to it (`cb_xprt`)
/// from before `rpc_create` until after `rpc_shutdown_client` waited for
/// every task of the callback client (`nfsd4_process_cb_update`,
/// nfs4callback.c). `timeout` is what `xprt.timeout` points to.
#[repr(C)]
struct BcXprt {
    xprt: sys::rpc_xprt,
    timeout: sys::rpc_timeout,
}

/// The ops of the backchannel of `C`.
fn ops<C: BackchannelOwner>() -> &'static sys::rpc_xprt_ops {
    struct Table<C>(core::marker::PhantomData<C>);
    impl<C: BackchannelOwner> Table<C> {
        const OPS: sys::rpc_xprt_ops = sys::rpc_xprt_ops {
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
            send_request: Some(send_request::<C>),
            abort_send_request: None,
            wait_for_reply_request: Some(sys::xprt_wait_for_reply_request_def),
            timer: None,
            release_request: Some(sys::xprt_release_rqst_cong),
            close: Some(close),
            destroy: Some(destroy),
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
    }
    &Table::<C>::OPS
}

/// `xprt_class.setup`: the backchannel of `args->bc_xprt`, a connection of
/// type `C`.
///
/// # Safety
///
/// Called by sunrpc (`xprt_create_transport`) with valid `args`.
unsafe extern "C" fn setup<C: BackchannelOwner>(args: *mut sys::xprt_create) -> *mut sys::rpc_xprt {
    // SAFETY: sunrpc passes valid arguments.
    let args = unsafe { &*args };
    if args.addrlen > core::mem::size_of::<sys::__kernel_sockaddr_storage>()
        || args.bc_xprt.is_null()
    {
        return EBADF.to_ptr();
    }
    // SAFETY: An initialised `svc_xprt` (of some class), which the caller
    // holds a reference to for this call: nfsd's `cb_xprt`, taken before
    // `rpc_create` (`nfsd4_process_cb_update`).
    let Some(owner) = (unsafe { conn_of::<C>(args.bc_xprt) }) else {
        return EBADF.to_ptr();
    };
    // SAFETY: Our own module, loaded while its code runs, referenced for
    // the transport's life (put by `destroy`, or here on failure);
    // `args.net` is valid (the caller's); sunrpc zero-allocates our size.
    let xprt = unsafe {
        if !sys::rpcrdma_rs_try_module_get(this_module()) {
            return EIO.to_ptr();
        }
        let xprt = sys::xprt_alloc(args.net, core::mem::size_of::<BcXprt>(), C::SLOTS, C::SLOTS);
        if xprt.is_null() {
            sys::rpcrdma_rs_module_put(this_module());
            return ENOMEM.to_ptr();
        }
        xprt
    };
    // SAFETY: `xprt` is fresh and ours alone, `BcXprt`-sized with the
    // `rpc_xprt` first; `args.dstaddr` holds `args.addrlen` bytes, which
    // fit in `addr`; `args.bc_xprt` is live (above).
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
        // The class's ident: sunrpc found this class by it.
        (*xprt).prot = args.ident;
        // INVARIANT: a `BcXprt` of `C`, linked to `owner` below.
        (*xprt).ops = ops::<C>();
        core::ptr::copy_nonoverlapping(
            args.dstaddr.cast::<u8>(),
            (&raw mut (*xprt).addr).cast::<u8>(),
            args.addrlen,
        );
        (*xprt).addrlen = args.addrlen;
        format_addresses(xprt);
        // `resvport` stays 0 (zero-allocated): no privileged port here.
        (*xprt).max_payload = owner.max_payload();
        // `xprt_alloc`'s reference goes to the caller (the callback
        // client's `cl_xprt`); this one to the connection, put by
        // `svc_xprt_free`.
        sys::xprt_get(xprt);
        (*args.bc_xprt).xpt_bc_xprt = xprt;
        (*xprt).bc_xprt = args.bc_xprt;
    }
    rdebug!("server: backchannel set up\n");
    xprt
}

/// `send_request`: a backward Call, inline on the connection. A
/// connection that cannot take it is closed, and the Call fails with
/// `ENOTCONN`.
///
/// Failing only the Call (with `EMSGSIZE` for one too large) would leave
/// nfsd spinning: a callback whose Reply never came (`cb_seq_status` 1)
/// marks the backchannel FAULT and is requeued at once on the same
/// callback client (`nfsd4_cb_sequence_done`), to fail the same way until
/// the client resets its session. A closed connection makes nfsd drop
/// the callback client (`nfsd4_conn_lost` → `nfsd4_probe_callback`) and
/// wait for the client to come back, as svcrdma does.
///
/// # Safety
///
/// Called by sunrpc with a request of a backchannel of `C`, holding
/// `XPRT_LOCKED`.
unsafe extern "C" fn send_request<C: BackchannelOwner>(rqst: *mut sys::rpc_rqst) -> c_int {
    // SAFETY: sunrpc passes a live request being sent under XPRT_LOCKED,
    // its buffers allocated by our `buf_alloc`. Its transport has
    // `ops::<C>()`, so (invariant of `BcXprt`) its `bc_xprt` is the
    // `svc_xprt` of a `C`, the first field of it (`SvcObject`), alive
    // while sunrpc sends on the backchannel.
    let (rqst, owner) = unsafe {
        let rqst = SendRqst::from_raw(rqst);
        let owner = &*(*rqst.xprt().as_ptr()).bc_xprt.cast::<C>();
        (rqst, owner)
    };
    match owner.send_backward_call(&rqst) {
        Ok(()) => 0,
        Err(e) => {
            rdebug!("server: backward Call not sent: {:?}\n", e);
            owner.close_now();
            ENOTCONN.to_errno()
        }
    }
}

/// `close`: forget the connection state and the client's grant (as
/// svcrdma's `xprt_rdma_bc_close`).
///
/// # Safety
///
/// Called by sunrpc with a live backchannel.
unsafe extern "C" fn close(xprt: *mut sys::rpc_xprt) {
    // SAFETY: Live (the caller's promise); sunrpc calls `close` where a
    // transport may reset its state (`xprt_autoclose`, `xprt_destroy`).
    unsafe {
        sys::xprt_disconnect_done(xprt);
        (*xprt).cwnd = c_ulong::from(sys::RPC_CWNDSHIFT);
    }
}

/// `destroy`: the last reference went.
///
/// # Safety
///
/// Called by sunrpc once, with a backchannel nobody uses any more.
unsafe extern "C" fn destroy(xprt: *mut sys::rpc_xprt) {
    // SAFETY: Ours and unused (the caller's promise), allocated by
    // `xprt_alloc` in `setup`, which took the module reference put here
    // last: only our return follows it, as in `xs_destroy`, and sunrpc
    // calls nothing of ours for this transport afterwards.
    unsafe {
        free_addresses(xprt);
        sys::xprt_free(xprt);
        sys::rpcrdma_rs_module_put(this_module());
    }
}
