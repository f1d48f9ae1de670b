// SPDX-License-Identifier: GPL-2.0

//! A listening endpoint (`echo "rdma 20049" > /proc/fs/nfsd/portlist`).
//!
//! Its CM callback only queues each connection request; an nfsd thread
//! then builds and accepts the connection in `xpo_accept`, as svcrdma
//! does: building one (a QP, CQs and hundreds of DMA-mapped buffers) in
//! the callback made every request behind it wait, so a peer that sent
//! REQs and gave up on them delayed the next client by seconds, and made
//! the server build connections nobody would serve. Requests whose peer
//! gave up before nfsd got to them are dropped unbuilt, and the queue is
//! bounded.
//!
//! When a bond under a listener's address fails over, rdma_cm reports an
//! address change: an nfsd thread then listens again on a new id on the
//! same address (`accept`), so clients can still connect.

use kernel::prelude::*;
use kernel::sync::atomic::{Atomic, Full};
use kernel::sync::{new_mutex, Mutex};

use super::conn::SvcConn;
use super::TOTALS;
use crate::rdma::{CmEvent, ConnRequest, ListenHandler, ListenSlot, Listener, PendingConn};
use crate::sunrpc::{discard, new_object, Net, Serv, SockAddr, SvcXprt, XptFlag};

/// Connection requests waiting for the accept queue, as svcrdma allows.
const BACKLOG: i32 = 16;

/// Connection requests still wanted that may wait for nfsd. Past it, a
/// request is rejected at once: the clients that sent them retry, and a
/// peer that floods the listener with REQs holds no more than a few times
/// this many CM ids, and no connection is built for any of them.
const MAX_PENDING: usize = 256;

/// `AF_INET` and `AF_INET6`.
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

crate::rdma::owner! {
    /// A listener: `xprt` first (`repr(C)`,
    /// [`SvcObject`](crate::sunrpc::SvcObject)), then `id`, dropped before
    /// `accept_q` ([`owner!`](crate::rdma::owner)), so no request can be
    /// queued once the queue goes.
    #[repr(C)]
    #[pin_data]
    pub(crate) struct SvcListener(xprt: SvcXprt) {
        listener id;
        #[pin]
        accept_q: Mutex<KVec<PendingConn>>,
        /// The address moved to another device: an nfsd thread is to
        /// listen again on a new id.
        rebind: Atomic<bool>,
    }
}

crate::sunrpc::impl_svc_object!(SvcListener, xprt);

impl SvcListener {
    /// `xpo_create`: listens on `addr` in `net` for `serv`.
    pub(super) fn create(serv: Serv, net: Net, addr: &SockAddr) -> Result<Pin<KBox<Self>>> {
        if addr.family() != AF_INET && addr.family() != AF_INET6 {
            return Err(EAFNOSUPPORT);
        }
        let this = new_object(
            try_pin_init!(Self {
                xprt: SvcXprt::new(),
                id <- ListenSlot::new(),
                accept_q <- new_mutex!(KVec::new(), "rpcrdma_rs_svc_accept"),
                rebind: Atomic::new(false),
            }? Error),
            serv,
            net,
            true,
        )?;
        if let Err(e) = Listener::start(this.as_ref(), net, addr, BACKLOG) {
            rwarn!("server: cannot listen: {:?}\n", e);
            discard(this);
            return Err(e);
        }
        if let Some(addr) = this.id.local_addr() {
            // With the port chosen when 0 was asked for.
            this.xprt.set_local_addr(&addr);
        }
        rinfo!("server: listening for NFS/RDMA\n");
        Ok(this)
    }

    /// `xpo_accept`: listens again if the address moved; builds and
    /// accepts the oldest queued request whose peer still waits; drops
    /// those that gave up.
    pub(super) fn accept(self: Pin<&Self>) -> Option<Pin<KBox<SvcConn>>> {
        self.xprt.clear(XptFlag::Conn);
        if self.rebind.xchg(false, Full) {
            self.listen_again();
        }
        loop {
            let req = {
                let mut q = self.accept_q.lock();
                let req = if q.is_empty() { None } else { q.remove(0).ok() };
                if !q.is_empty() {
                    self.xprt.set(XptFlag::Conn);
                }
                req
            }?;
            if req.is_gone() {
                // Dropped here, in process context: destroys its id.
                TOTALS.accept_failed.inc();
                continue;
            }
            if let Some(conn) = SvcConn::accept(req, self.xprt.serv(), self.xprt.net()) {
                return Some(conn);
            }
        }
    }

    /// Replaces the id whose address moved with a new one on the same
    /// address, as svcrdma means to; closes the listener if that fails.
    /// Requests the old id queued stay queued: they are ids of their own.
    fn listen_again(self: Pin<&Self>) {
        if self.xprt.is_dead() {
            return;
        }
        match Listener::rebind(self, self.xprt.net()) {
            Ok(()) => rinfo!("server: listener's address changed, listening again\n"),
            Err(e) => {
                rwarn!(
                    "server: listener's address changed, cannot listen again: {:?}\n",
                    e
                );
                self.xprt.deferred_close();
            }
        }
    }
}

impl ListenHandler for SvcListener {
    fn connect_request(&self, req: ConnRequest<'_>) {
        if self.xprt.is_dead() {
            req.reject(&[]);
            return;
        }
        // Room, and the push into it, under one acquisition: the
        // per-device listeners of a wildcard address call this
        // concurrently.
        req.defer(|pending| {
            let mut q = self.accept_q.lock();
            // Requests whose peer gave up cost a CM id until nfsd drops
            // them: they count against a larger bound, so that a burst
            // of abandoned connects does not shut out a live client.
            let live = q.iter().filter(|p| !p.is_gone()).count();
            let full = live >= MAX_PENDING || q.len() >= 4 * MAX_PENDING;
            if full || q.reserve(1, GFP_KERNEL).is_err() {
                TOTALS.refused.inc();
                rwarn!("server: accept queue full, connection refused\n");
                return Err(pending);
            }
            q.push_within_capacity(pending).map_err(|e| e.0)
        });
        self.xprt.set(XptFlag::Conn);
        self.xprt.enqueue();
    }

    fn event(&self, event: CmEvent) {
        match event {
            CmEvent::DeviceRemoval => {
                rinfo!("server: listener's device removed\n");
                self.xprt.deferred_close();
            }
            CmEvent::AddrChange => {
                // A bond under the bound address failed over: the id's
                // device address is stale. An nfsd thread listens again
                // (`accept`): replacing the id here would destroy it from
                // its own callback. Full: the flag is seen by the
                // `accept` that clears `XPT_CONN` after this sets it.
                self.rebind.xchg(true, Full);
                self.xprt.set(XptFlag::Conn);
                self.xprt.enqueue();
            }
            other => rdebug!("server: listener event {:?}\n", other),
        }
    }
}
