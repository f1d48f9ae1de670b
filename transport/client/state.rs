// SPDX-License-Identifier: GPL-2.0

//! [`XprtState`], what the transport keeps across connections behind its
//! `rpc_xprt` ([`RdmaXprt`]), and what every layer above asks of it: the
//! counters, the peer's name, a forced disconnect, the congestion window,
//! the fence that keeps an RPC's memory until the peer can no longer
//! reach it, and the backchannel's negotiated thresholds.

use core::ffi::c_ulong;

use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};
use kernel::sync::{new_spinlock, SpinLock};

use super::{Config, Stats};
use crate::proto::backchannel;
use crate::proto::negotiate::Negotiator;
use crate::proto::pvt::InlineThresholds;
use crate::sunrpc::{hz, ClientXprt, WaitQueue, BC_BUF};
use crate::sys;

/// Longest wait for the outcome of one connection attempt, in seconds.
const CONNECT_WAIT_CAP_SECS: c_ulong = 180;

/// A request whose memory the peer may still reach waits for that to end
/// without a deadline, and warns at this interval (below the hung task
/// timeout, which each wake-up resets).
const FENCE_WARN_SECS: c_ulong = 30;

/// What the transport keeps across connections, behind its `rpc_xprt`
/// in a [`ClientXprt`] (see [`RdmaXprt`]).
#[pin_data]
pub(crate) struct XprtState {
    /// A connection attempt failed or a connection was lost: back off.
    pub(super) backoff: Atomic<bool>,
    /// The last connect was refused: the server's host answered and
    /// nothing listened (nfsd restarting). The next one is paced, not
    /// backed off.
    pub(super) refused: Atomic<bool>,
    /// When that refused connect started, in jiffies.
    pub(super) refused_at: Atomic<u64>,
    /// A Reply arrived since the last connect: reset the backoff.
    pub(super) had_reply: Atomic<bool>,
    /// The last credit grant applied to `cwnd`; 0 after a reset.
    granted: Atomic<u32>,
    pub(super) stats: Stats,
    /// Settings from the module parameters, fixed at setup.
    pub(super) cfg: Config,
    /// Generation of the last connection torn down: its QP is destroyed,
    /// so the peer can reach none of its MRs any more.
    pub(super) gone_gen: Atomic<u64>,
    /// Woken when `gone_gen` moves, and when a Send that gathered an
    /// RPC's own pages completes.
    #[pin]
    pub(super) fence_wq: WaitQueue,
    /// The backchannel's negotiated thresholds and debugfs state.
    pub(super) bc: Backchannel,
    /// The RPC-over-RDMA version of the current connection
    /// (`version.rs`).
    #[pin]
    pub(super) neg: SpinLock<Negotiator>,
    /// `neg`'s settled version (its `rdma_vers`), 0 while unsettled:
    /// written under `neg`'s lock with every change of it, so that the
    /// per-RPC questions, which change nothing once the version is
    /// settled, need not take the lock.
    pub(super) settled: Atomic<u32>,
    /// `rdma_version` is in debugfs.
    pub(super) version_published: Atomic<bool>,
}

/// Our transport: sunrpc's `rpc_xprt` with [`XprtState`] behind it; its
/// current connection is an [`Ep`](super::connection::Ep), its
/// per-request state a [`ReqState`](super::request::ReqState).
pub(crate) type RdmaXprt = ClientXprt<XprtState>;

impl XprtState {
    /// A transport's state with settings `cfg`.
    pub(super) fn new(cfg: Config) -> impl PinInit<Self> {
        pin_init!(Self {
            backoff: Atomic::new(false),
            refused: Atomic::new(false),
            refused_at: Atomic::new(0),
            had_reply: Atomic::new(false),
            granted: Atomic::new(0),
            stats: Stats::default(),
            cfg,
            gone_gen: Atomic::new(0),
            fence_wq <- WaitQueue::new(),
            bc: Backchannel::new(),
            neg <- new_spinlock!(Negotiator::v1_only()),
            settled: Atomic::new(crate::proto::negotiate::Version::V1.number()),
            version_published: Atomic::new(false),
        })
    }
}

impl RdmaXprt {
    /// The counters.
    pub(super) fn stats(&self) -> &Stats {
        &self.stats
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
        self.xprt()
            .connect_timeout()
            .max(CONNECT_WAIT_CAP_SECS * hz())
    }

    /// The server address as printed in mountstats, for log messages.
    pub(super) fn peer(&self) -> &str {
        self.xprt().display_addr()
    }

    /// Fires `xprtrdma_connect` (or `xprtrdma_disconnect`) for this
    /// transport's peer.
    pub(super) fn trace_connect(&self, disconnect: bool, rc: i32, status: i32) {
        let xprt = self.xprt();
        crate::sunrpc::trace::xprtrdma_connect(
            disconnect,
            xprt.display_cstr(false),
            xprt.display_cstr(true),
            rc,
            status,
        );
    }

    /// Asks sunrpc to close the connection (through its autoclose work).
    pub(super) fn force_disconnect(&self) {
        self.xprt().force_disconnect();
    }

    pub(super) fn connected(&self) -> bool {
        self.xprt().connected()
    }

    /// Wakes the threads waiting in [`RdmaXprt::fence_registered`] or for
    /// a Send that gathered their pages.
    pub(super) fn wake_fence(&self) {
        self.fence_wq.wake_all();
    }

    /// Makes sure the peer can no longer reach memory registered on
    /// connection `gen`, for a request released before its Reply (an
    /// interrupted or timed-out RPC) whose pages are about to be reused.
    ///
    /// Tearing the connection down destroys its QP, after which none of
    /// its keys is usable; that costs a reconnect, but needs no hold on a
    /// connection that may be going away under us. Waits as long as that
    /// takes: freeing the pages earlier would let the server write into
    /// memory that has a new owner. Sleeps.
    pub(super) fn fence_registered(&self, gen: u64) {
        if self.gone_gen.load(Acquire) >= gen {
            return;
        }
        self.force_disconnect();
        while !self
            .fence_wq
            .wait_until_reaches(&self.gone_gen, gen, FENCE_WARN_SECS * hz())
        {
            rwarn!(
                "connection to {} not torn down in {} s; still holding registered memory\n",
                self.peer(),
                FENCE_WARN_SECS
            );
        }
    }

    pub(super) fn update_cwnd(&self, grant: u32) {
        // Replies are handled one at a time (one Receive CQ), and most
        // repeat the last grant: like rpcrdma.ko, take the lock only when
        // it changes.
        // A plain load first: a locked exchange costs more, and the grant
        // rarely changes.
        if self.granted.load(Relaxed) == grant || self.granted.xchg(grant, Relaxed) == grant {
            return;
        }
        let cwnd = c_ulong::from(grant) << sys::RPC_CWNDSHIFT;
        let mut lock = self.xprt().lock_transport();
        if lock.cwnd() != cwnd {
            rdebug!("credits now {}\n", grant);
            lock.set_cwnd(cwnd);
        }
    }

    /// One credit until the new connection's first Reply grants more.
    /// `cong` is left alone: requests sent on the old connection still
    /// hold their congestion slots and give them back when released;
    /// zeroing it would make that underflow and leave the transport
    /// congested for good.
    pub(super) fn reset_cwnd(&self) {
        self.xprt()
            .lock_transport()
            .set_cwnd(c_ulong::from(1u32) << sys::RPC_CWNDSHIFT);
        self.granted.store(0, Relaxed);
    }
}

/// The backchannel of a transport; its requests are the transport's
/// [`crate::sunrpc::BcPool`].
pub(crate) struct Backchannel {
    /// Negotiated inline thresholds of the last connection, for
    /// `bc_maxpayload`; zero before the first.
    inline_send: Atomic<u32>,
    inline_recv: Atomic<u32>,
    /// The counters are in debugfs.
    pub(super) published: Atomic<bool>,
}

impl Backchannel {
    pub(super) fn new() -> Self {
        Self {
            inline_send: Atomic::new(0),
            inline_recv: Atomic::new(0),
            published: Atomic::new(false),
        }
    }

    /// Records the inline thresholds a new connection negotiated.
    pub(super) fn connected(&self, inline: InlineThresholds) {
        self.inline_send.store(inline.send, Release);
        self.inline_recv.store(inline.recv, Release);
    }
}

impl RdmaXprt {
    /// Largest backward-direction RPC message, both ways: what the last
    /// connection negotiated, or before one, what we would offer.
    pub(super) fn bc_max_payload(&self) -> u32 {
        let (send, recv) = (
            self.bc.inline_send.load(Acquire),
            self.bc.inline_recv.load(Acquire),
        );
        let (send, recv) = if send == 0 || recv == 0 {
            (self.cfg.inline_write, self.cfg.inline_read)
        } else {
            (send, recv)
        };
        // Told to the server once, it must hold in whichever version
        // the connection speaks.
        if self.cfg.offers_v2 {
            backchannel::client_max_payload_v2(send, recv, BC_BUF as u32)
        } else {
            backchannel::client_max_payload(send, recv, BC_BUF as u32)
        }
    }
}
