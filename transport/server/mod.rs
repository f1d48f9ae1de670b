// SPDX-License-Identifier: GPL-2.0

//! The nfsd server transport: `svc_xprt_class` "rdma" and its ops, RPC-
//! over-RDMA version 1 as the Responder (RFC 8166).
//!
//! Files mirror the client's: `listener` (listening endpoints and the
//! accept queue), `conn` (one connection, its buffers and Send Queue
//! room), `recv` (`xpo_recvfrom`, with Read chunks), `send`
//! (`xpo_sendto`: Write and Reply chunks, Send With Invalidate,
//! RDMA_ERROR) and `backchannel` (class "rdma backchannel", for nfsd's NFSv4.1
//! callbacks). The protocol decisions are [`crate::proto::responder`]'s.

mod backchannel;
mod conn;
mod listener;
mod recv;
mod send;

use kernel::prelude::*;

use super::client::IDENT;
use super::Counter;
use crate::sunrpc::{
    BcClass, Ctxt, Net, RootDir, RootGuard, Serv, SockAddr, SvcClass, SvcRqst, SvcTransport,
};
use crate::sys;
use conn::{ConnStats, SvcConn};
use listener::SvcListener;

/// Server settings, read from the tunables (`sunrpc.svc_rdma` sysctls
/// and module parameters) when a connection is accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SvcConfig {
    /// Credits granted in every Reply (svcrdma's `max_requests`).
    pub(crate) credits: u32,
    /// Receive and Send buffer size: the largest Call we take and the
    /// largest Reply we send inline (svcrdma's `max_req_size`).
    pub(crate) inline: u32,
}

impl SvcConfig {
    fn from_params() -> Self {
        let (credits, inline) = crate::params::server();
        Self {
            credits: credits.clamp(4, 16384),
            inline: inline.clamp(4096, 65536),
        }
    }
}

/// What every connection counted, summed.
pub(crate) static TOTALS: ConnStats = ConnStats::new();

/// The transport, for [`SvcTransport`].
pub(crate) struct RdmaSvc;

impl SvcTransport for RdmaSvc {
    type Listener = SvcListener;
    type Conn = SvcConn;

    fn create(serv: Serv, net: Net, addr: &SockAddr) -> Result<Pin<KBox<SvcListener>>> {
        SvcListener::create(serv, net, addr)
    }

    fn accept(listener: Pin<&SvcListener>) -> Option<Pin<KBox<SvcConn>>> {
        SvcListener::accept(listener)
    }

    fn has_wspace(conn: &SvcConn) -> bool {
        conn.has_wspace()
    }

    fn recvfrom(conn: &SvcConn, rqst: &mut SvcRqst<'_>) -> i32 {
        recv::recvfrom(conn, rqst)
    }

    fn sendto(conn: &SvcConn, rqst: &mut SvcRqst<'_>) -> i32 {
        send::sendto(conn, rqst)
    }

    fn result_payload(conn: &SvcConn, rqst: &mut SvcRqst<'_>, offset: u32, len: u32) -> i32 {
        send::result_payload(conn, rqst, offset, len)
    }

    fn release_ctxt(conn: &SvcConn, ctxt: Ctxt) {
        send::release(conn, ctxt)
    }

    fn detach(conn: &SvcConn) {
        conn.detach()
    }

    fn detach_listener(_listener: &SvcListener) {}
}

/// The registered server class and its counters in debugfs.
pub(crate) struct Registration {
    _class: SvcClass,
    _backchannel: BcClass,
    _debug: RootGuard,
}

/// `/sys/kernel/debug/rpcrdma_rs_server/`: the totals, and a directory
/// per connection.
pub(super) static SERVER_DIR: RootDir = RootDir::new();

/// Registers the server class "rdma" (`EEXIST` if rpcrdma.ko has it) and
/// shows the totals in `/sys/kernel/debug/rpcrdma_rs_server/`, where each
/// connection adds a directory of its own.
pub(crate) fn register(module: &'static ThisModule) -> Result<Registration> {
    let totals = ConnStats::FILES.map(|(name, field)| (name, field(&TOTALS)));
    let debug = SERVER_DIR.install(c"rpcrdma_rs_server", &totals);
    let class = SvcClass::register::<RdmaSvc>(c"rdma", module, IDENT, sys::RPCSVC_MAXPAYLOAD)?;
    let bc = backchannel::register(module)?;
    Ok(Registration {
        _class: class,
        _backchannel: bc,
        _debug: debug,
    })
}
