// SPDX-License-Identifier: GPL-2.0

//! [`RdmaXprt`], our `rpc_xprt`: connection state kept across
//! connections, the congestion window, the fence that keeps an RPC's
//! memory until the peer can no longer reach it, and the connection
//! lifecycle entry points (connect worker, close, destroy, timer, stats).

use core::ffi::{c_int, c_ulong};

use kernel::prelude::*;
use kernel::seq_file::SeqFile;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};

use super::backchannel::Backchannel;
use super::connection::Ep;
use super::{Config, Stats};
use crate::sunrpc::{hz, jiffies, ClientXprt, WaitQueue, XprtLocked};
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
    backoff: Atomic<bool>,
    /// A Reply arrived since the last connect: reset the backoff.
    pub(super) had_reply: Atomic<bool>,
    /// The last credit grant applied to `cwnd`; 0 after a reset.
    granted: Atomic<u32>,
    pub(super) stats: Stats,
    /// Settings from the module parameters, fixed at setup.
    pub(super) cfg: Config,
    /// Generation of the last connection torn down: its QP is destroyed,
    /// so the peer can reach none of its MRs any more.
    gone_gen: Atomic<u64>,
    /// Woken when `gone_gen` moves, and when a Send that gathered an
    /// RPC's own pages completes.
    #[pin]
    pub(super) fence_wq: WaitQueue,
    /// The backchannel's negotiated thresholds and debugfs state.
    pub(super) bc: Backchannel,
}

/// Our transport: sunrpc's `rpc_xprt` with [`XprtState`] behind it; its
/// current connection is an [`Ep`], its per-request state a
/// [`ReqState`](super::request::ReqState).
pub(crate) type RdmaXprt = ClientXprt<XprtState>;

impl XprtState {
    /// A transport's state with settings `cfg`.
    pub(super) fn new(cfg: Config) -> impl PinInit<Self> {
        pin_init!(Self {
            backoff: Atomic::new(false),
            had_reply: Atomic::new(false),
            granted: Atomic::new(0),
            stats: Stats::default(),
            cfg,
            gone_gen: Atomic::new(0),
            fence_wq <- WaitQueue::new(),
            bc: Backchannel::new(),
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

    /// Asks sunrpc to close the connection (through its autoclose work).
    pub(super) fn force_disconnect(&self) {
        self.xprt().force_disconnect();
    }

    pub(super) fn connected(&self) -> bool {
        self.xprt().connected()
    }

    /// The current connection, which only the `XPRT_LOCKED` holder may
    /// use or replace.
    pub(super) fn ep<'a>(&'a self, locked: &'a XprtLocked<'_>) -> Option<&'a Ep> {
        self.conn(locked)
    }

    /// Tears down the current connection, if any.
    fn teardown(&self, locked: &mut XprtLocked<'_>) {
        if let Some(ep) = self.replace_conn(locked, None) {
            let gen = ep.shared().gen;
            drop(ep);
            // Generations only grow, and only the XPRT_LOCKED holder
            // tears down: a plain store is the maximum.
            self.gone_gen.store(gen, Release);
            self.wake_fence();
        }
    }

    /// Closes the connection: `close`, and the sender when the connection
    /// cannot carry a Call.
    pub(super) fn close(&self, locked: &mut XprtLocked<'_>) {
        rdebug!("close\n");
        if self.ep(locked).is_some() {
            rdebug!("connection to {} closed\n", self.peer());
            self.backoff.store(true, Relaxed);
        }
        self.teardown(locked);
        locked.disconnect_done();
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

    /// Waits until no Send gathers the pages of the request whose mark is
    /// `busy` (see `Ep::map_pages`). Sleeps.
    pub(super) fn wait_send_done(&self, busy: &Atomic<u32>) {
        while !self.fence_wq.wait_until_clear(busy, FENCE_WARN_SECS * hz()) {
            rwarn!(
                "send to {} not complete in {} s; still holding its pages\n",
                self.peer(),
                FENCE_WARN_SECS
            );
            self.force_disconnect();
        }
    }

    pub(super) fn update_cwnd(&self, grant: u32) {
        // Replies are handled one at a time (one Receive CQ), and most
        // repeat the last grant: like rpcrdma.ko, take the lock only when
        // it changes.
        if self.granted.xchg(grant, Relaxed) == grant {
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
    fn reset_cwnd(&self) {
        self.xprt()
            .lock_transport()
            .set_cwnd(c_ulong::from(1u32) << sys::RPC_CWNDSHIFT);
        self.granted.store(0, Relaxed);
    }
}

/// Initial reconnect backoff, doubled per failure up to
/// `max_reconnect_timeout`.
fn init_reestablish() -> c_ulong {
    3 * hz()
}

/// `connect` (the task holds `XPRT_LOCKED`, which goes to the connect
/// worker): the delay before the worker runs.
pub(super) fn connect(rx: &RdmaXprt, locked: &XprtLocked<'_>) -> c_ulong {
    if rx.had_reply.xchg(false, Relaxed) {
        locked.reset_backoff();
    }
    let mut delay: c_ulong = 0;
    if rx.backoff.load(Relaxed) {
        delay = locked.backoff(init_reestablish());
    }
    rdebug!("connect in {} jiffies\n", delay);
    delay
}

/// The connect worker, with the `XPRT_LOCKED` that `connect` handed it;
/// the status for the tasks waiting for the connection.
pub(super) fn connect_worker(rx: &RdmaXprt, locked: &mut XprtLocked<'_>) -> c_int {
    rx.teardown(locked);
    locked.clear_connected();
    rx.reset_cwnd();
    let start = jiffies();
    // A connect that `op_connect` delayed (our backoff) holds
    // XPRT_LOCKED until it runs. When the RPC that asked for it gives
    // up meanwhile (past its major timeout) and its client is shut
    // down, `xprt_destroy` waits for that lock: connecting now would
    // set up a connection nothing is ever sent on, torn down by
    // `destroy` as soon as we unlock (issue 11, defect 5).
    let dying = locked.dying();
    let result = if dying {
        Err(ENOTCONN)
    } else {
        Ep::connect(rx, &rx.cfg)
    };
    let took_ms = jiffies().wrapping_sub(start).saturating_mul(1000) / hz().max(1);
    locked.clear_connecting();
    match result {
        Err(_) if dying => {
            rdebug!("transport being destroyed: no connect\n");
            ENOTCONN.to_errno()
        }
        Ok(ep) => {
            let ep_inline = ep.inline();
            drop(rx.replace_conn(locked, Some(ep)));
            rx.backoff.store(false, Relaxed);
            locked.connected();
            rdebug!(
                "connected to {} (inline send {} recv {}) in {} ms\n",
                rx.peer(),
                ep_inline.send,
                ep_inline.recv,
                took_ms
            );
            EAGAIN.to_errno()
        }
        Err(err) => {
            rinfo!(
                "connect to {} failed ({}) after {} ms\n",
                rx.peer(),
                err.to_errno(),
                took_ms
            );
            rx.backoff.store(true, Relaxed);
            // Running out of memory is transient: ENOBUFS makes sunrpc
            // retry the connect (after our backoff), where ENOMEM
            // would fail the RPC that asked for it.
            if err == ENOMEM {
                ENOBUFS.to_errno()
            } else {
                err.to_errno()
            }
        }
    }
}

/// `destroy`: the connection goes; the glue frees the rest.
pub(super) fn destroy(rx: &RdmaXprt, locked: &mut XprtLocked<'_>) {
    rx.teardown(locked);
}

/// `set_connect_timeout`.
pub(super) fn set_connect_timeout(
    rx: &RdmaXprt,
    connect_timeout: c_ulong,
    reconnect_timeout: c_ulong,
) {
    let initval = connect_timeout.max(init_reestablish() << 1);
    rx.lower_timeouts(initval, connect_timeout, reconnect_timeout);
}

/// `print_stats`: the `xprt: rdma` line of mountstats, in rpcrdma.ko's
/// column order.
pub(super) fn print_stats(rx: &RdmaXprt, m: &SeqFile) {
    let stat = rx.xprt().stat();
    let last_used = rx.xprt().last_used();
    let hz = hz().max(1);
    let idle = if rx.connected() {
        (jiffies().wrapping_sub(last_used) as i64) / hz as i64
    } else {
        0
    };
    let s = &rx.stats;
    let get = |c: &super::Counter| c.get();
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
        get(&s.read_chunk_count),
        get(&s.write_chunk_count),
        get(&s.reply_chunk_count),
        get(&s.total_rdma_request),
        get(&s.total_rdma_reply),
        get(&s.pullup_copy_count),
        get(&s.fixup_copy_count),
        get(&s.hardway_register_count),
        get(&s.failed_marshal_count),
        get(&s.bad_reply_count),
        get(&s.nomsg_call_count)
    );
    kernel::seq_print!(
        m,
        "{} {} {} {} {} {}\n",
        get(&s.mrs_recycled),
        get(&s.mrs_orphaned),
        get(&s.mrs_allocated),
        get(&s.local_inv_needed),
        get(&s.empty_sendctx_q),
        get(&s.reply_waits_for_send)
    );
}
