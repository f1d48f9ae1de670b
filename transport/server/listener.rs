// SPDX-License-Identifier: GPL-2.0

//! A listening endpoint (`echo "rdma 20049" > /proc/fs/nfsd/portlist`):
//! its CM id accepts each connection request in the CM callback and
//! queues the new connection, which an nfsd thread then takes with
//! `xpo_accept`.

use kernel::prelude::*;
use kernel::sync::{new_mutex, Mutex, SetOnce};

use super::conn::SvcConn;
use crate::rdma::{CmEvent, ConnRequest, ListenHandler, Listener};
use crate::sunrpc::{discard, new_object, Net, Serv, SockAddr, SvcObject, SvcXprt, XptFlag};

/// Connection requests waiting for the accept queue, as svcrdma allows.
const BACKLOG: i32 = 16;

/// `AF_INET` and `AF_INET6`.
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// A connection accepted but not yet taken by nfsd. Dropped unclaimed (the
/// listener went first), it is released through sunrpc like any other.
struct Queued(Option<Pin<KBox<SvcConn>>>);

impl Drop for Queued {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            discard(conn);
        }
    }
}

/// A listener.
///
/// # Invariants
///
/// `xprt` comes first (`repr(C)`, [`SvcObject`]). `id` is dropped before
/// `accept_q` (field order), so no request can queue a connection once
/// the queue goes.
#[repr(C)]
#[pin_data]
pub(crate) struct SvcListener {
    xprt: SvcXprt,
    id: SetOnce<Listener<SvcListener>>,
    #[pin]
    accept_q: Mutex<KVec<Queued>>,
}

// SAFETY: `SvcListener` is `repr(C)` with its `SvcXprt` first.
unsafe impl SvcObject for SvcListener {
    fn xprt(&self) -> &SvcXprt {
        &self.xprt
    }
}

impl SvcListener {
    /// `xpo_create`: listens on `addr` in `net` for `serv`.
    pub(super) fn create(serv: Serv, net: Net, addr: &SockAddr) -> Result<Pin<KBox<Self>>> {
        if addr.family() != AF_INET && addr.family() != AF_INET6 {
            return Err(EAFNOSUPPORT);
        }
        let this = new_object(
            try_pin_init!(Self {
                xprt: SvcXprt::new(),
                id: SetOnce::new(),
                accept_q <- new_mutex!(KVec::new(), "rpcrdma_rs_svc_accept"),
            }? Error),
            serv,
            net,
            true,
        )?;
        // SAFETY: `net` came from sunrpc and `addr` is a socket address;
        // the handler is the listener, which owns the id and drops it
        // first.
        let id = unsafe { Listener::new(net.as_ptr(), &*this, addr.as_ptr(), BACKLOG) };
        let id = match id {
            Ok(id) => id,
            Err(e) => {
                rwarn!("server: cannot listen: {:?}\n", e);
                discard(this);
                return Err(e);
            }
        };
        // SAFETY: The bound address is a valid socket address; it carries
        // the port chosen when 0 was asked for.
        unsafe { this.xprt.set_local(id.src_addr()) };
        let _ = this.id.populate(id);
        rinfo!("server: listening for NFS/RDMA\n");
        Ok(this)
    }

    /// `xpo_accept`: the oldest queued connection.
    pub(super) fn accept(&self) -> Option<Pin<KBox<SvcConn>>> {
        self.xprt.clear(XptFlag::Conn);
        let mut q = self.accept_q.lock();
        let conn = if q.is_empty() {
            None
        } else {
            q.remove(0).ok().and_then(|mut queued| queued.0.take())
        };
        if !q.is_empty() {
            self.xprt.set(XptFlag::Conn);
        }
        conn
    }
}

impl ListenHandler for SvcListener {
    fn connect_request(&self, req: ConnRequest<'_>) {
        if self.xprt.is_dead() || self.accept_q.lock().reserve(1, GFP_KERNEL).is_err() {
            req.reject(&[]);
            return;
        }
        let Some(conn) = SvcConn::accept(req, self.xprt.serv(), self.xprt.net()) else {
            return;
        };
        if let Err(e) = self
            .accept_q
            .lock()
            .push_within_capacity(Queued(Some(conn)))
        {
            // Room was reserved above, and only this callback (serialised
            // by rdma_cm) pushes. Never drop the connection here: that
            // would destroy its id from within its own callback.
            core::mem::forget(e);
            return;
        }
        self.xprt.set(XptFlag::Conn);
        self.xprt.enqueue();
    }

    fn event(&self, event: CmEvent) {
        match event {
            CmEvent::DeviceRemoval => {
                rinfo!("server: listener's device removed\n");
                self.xprt.deferred_close();
            }
            other => rdebug!("server: listener event {:?}\n", other),
        }
    }
}
