// SPDX-License-Identifier: GPL-2.0

//! The transport's lifecycle behind its `rpc_xprt_ops`: `connect` and the
//! connect worker, `destroy`, `set_connect_timeout` and `print_stats`.

use core::ffi::{c_int, c_ulong};

use kernel::prelude::*;
use kernel::seq_file::SeqFile;
use kernel::sync::atomic::Relaxed;

use super::connection::Ep;
use super::state::RdmaXprt;
use crate::sunrpc::{hz, jiffies, trace, XprtLocked};

/// Initial reconnect backoff, doubled per failure up to
/// `max_reconnect_timeout`.
fn init_reestablish() -> c_ulong {
    3 * hz()
}

/// The least time from the start of a refused connect to the start of
/// the next one.
///
/// sunrpc hands the connection to each waiting task in turn, so a refusal
/// would otherwise be retried as fast as the server can refuse. rpcrdma.ko
/// does not delay there (its endpoint is gone after a failed connect) and
/// is paced only by how long building one takes; a backoff doubled on
/// every refusal came back up to one doubled delay after nfsd did.
fn refused_pace() -> c_ulong {
    hz() / 2
}

/// `connect` (the task holds `XPRT_LOCKED`, which goes to the connect
/// worker): the delay before the worker runs.
pub(super) fn connect(rx: &RdmaXprt, locked: &XprtLocked<'_>) -> c_ulong {
    if rx.had_reply.xchg(false, Relaxed) {
        locked.reset_backoff();
    }
    let mut delay: c_ulong = 0;
    if rx.refused.xchg(false, Relaxed) {
        let since = jiffies().wrapping_sub(rx.refused_at.load(Relaxed));
        delay = refused_pace().saturating_sub(since);
    } else if rx.backoff.load(Relaxed) {
        delay = locked.backoff(init_reestablish());
    }
    rdebug!("connect in {} jiffies\n", delay);
    trace::xprtrdma_op_connect(rx.xprt(), delay);
    delay
}

/// The connect worker, with the `XPRT_LOCKED` that `connect` handed it;
/// the status for the tasks waiting for the connection.
pub(super) fn connect_worker(rx: &RdmaXprt, locked: &mut XprtLocked<'_>) -> c_int {
    rx.version_lost();
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
    let cfg = rx.cfg.at_connect();
    let result = if dying {
        Err(ENOTCONN)
    } else {
        Ep::connect(rx, &cfg)
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
            // Before any Call can see the new connection.
            // Its Receive buffers were sized for the versions it offers.
            rx.version_connected(cfg.offers_v2);
            drop(rx.replace_conn(locked, Some(ep)));
            rx.backoff.store(false, Relaxed);
            locked.connected();
            // rpcrdma.ko's connection status: 1 connected.
            rx.trace_connect(false, 0, 1);
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
            rx.trace_connect(false, err.to_errno(), err.to_errno());
            rx.backoff.store(true, Relaxed);
            if err == ECONNREFUSED {
                rx.refused_at.store(start, Relaxed);
                rx.refused.store(true, Relaxed);
            }
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
    trace::xprtrdma_op_set_cto(rx.xprt(), connect_timeout, reconnect_timeout);
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
