// SPDX-License-Identifier: GPL-2.0

//! The server's backchannel (RFC 8167): transport class "rdma backchannel"
//! (`XPRT_TRANSPORT_BC_RDMA`), which nfsd asks for to send NFSv4.1
//! callbacks (CB_RECALL and the others) over a client's own connection.
//!
//! nfsd creates one `rpc_xprt` of this class per session's connection,
//! linked both ways with the connection ([`crate::sunrpc::BcClass`] does
//! that, and calls the connection through [`BackchannelOwner`]). A
//! backward Call goes out inline on the connection with the backchannel's
//! own credits; its Reply is recognised by `recvfrom` (an RDMA_MSG without
//! chunks whose RPC message is a REPLY) and copied into the waiting
//! request.

#![deny(unsafe_code)]

use kernel::prelude::*;

use super::conn::SvcConn;
use super::send;
use crate::sunrpc::{BackchannelOwner, BcClass, SendRqst, Xprt};
use crate::sys;

/// Backward requests at once: the slots of the rpc_xprt and the credits
/// each backward Call grants. rpcrdma.ko's server has 2
/// (`RPCRDMA_MAX_BC_REQUESTS` in 7.3, `svc_rdma.h`) and grants 2; the
/// Linux client offers 16 (`bc_num_slots`). Each Reply to a backward Call
/// takes a Receive beyond those of the forward credits (bidir-00 §2.2.2,
/// `proto::backchannel::server_receive_buffers`), so a connection's
/// Receive count (`recv_count`) must add `BC_SLOTS`.
pub(super) const BC_SLOTS: u32 = 16;

/// `XPRT_TRANSPORT_BC_RDMA`.
const IDENT: i32 = sys::xprt_transports_XPRT_TRANSPORT_BC_RDMA;

/// Registers the class.
pub(crate) fn register(module: &'static ThisModule) -> Result<BcClass> {
    BcClass::register::<SvcConn>(module, "rdma backchannel", IDENT)
}

impl BackchannelOwner for SvcConn {
    const SLOTS: u32 = BC_SLOTS;

    fn max_payload(&self) -> usize {
        send::bc_max_payload(self)
    }

    fn send_backward_call(&self, rqst: &SendRqst<'_>) -> Result {
        send::backward_call(self, rqst)
    }

    fn close_now(&self) {
        SvcConn::close_now(self)
    }
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
