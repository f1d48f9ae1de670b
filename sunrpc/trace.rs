// SPDX-License-Identifier: GPL-2.0

//! The `rpcrdma` trace events of `sys/rpcrdma_rs_trace.h`, with
//! rpcrdma.ko's names and fields, as safe functions.
//!
//! Each tests its event's static key inline and calls into C only when
//! someone listens, as `kernel::tracepoint::declare_trace!` does for
//! in-tree crates; that macro names `kernel::bindings`, which does not
//! hold an out-of-tree module's events, hence this copy. Arguments that
//! cost something to gather come as closures, run only when the event is
//! on: an event nobody listens to costs one load and one branch (a
//! patched jump with `CONFIG_JUMP_LABEL`), not a call.

use kernel::str::{CStr, CStrExt};

use crate::proto::chunk::{ChunkLists, Segment};
use crate::rdma::Wc;
use crate::sys;

/// Whether event `$name` is on.
macro_rules! on {
    ($name:ident) => {
        kernel::macros::paste! {{
            #[cfg(not(CONFIG_JUMP_LABEL))]
            // SAFETY: The tracepoint is a static that `sys/trace.c`
            // defines. Its key's count is an aligned int that C updates
            // atomically; a volatile load of it is the C side's
            // `static_key_count()` (`raw_atomic_read`, a `READ_ONCE`),
            // without the call to a helper that every event nobody
            // listens to would pay.
            let on = unsafe {
                core::ptr::read_volatile(
                    &raw const sys::[<__tracepoint_ $name>].key.key.enabled.counter,
                ) > 0
            };
            #[cfg(CONFIG_JUMP_LABEL)]
            // SAFETY: The key is a real static key defined by C.
            let on = unsafe {
                kernel::arch_static_branch! {
                    sys::[<__tracepoint_ $name>], sys::tracepoint, key, false
                }
            };
            on
        }}
    };
}

/// Fires event `$name` with `$arg`s; test [`on!`] first.
macro_rules! call {
    ($name:ident($($arg:expr),* $(,)?)) => {
        kernel::macros::paste! {
            // SAFETY: The arguments are plain values, or strings that live
            // through the call; the event copies what it keeps.
            unsafe { sys::[<rust_do_trace_ $name>]($($arg),*) }
        }
    };
}

/// `xprtrdma_connect` / `xprtrdma_disconnect`: the client connected
/// (`rc` 0) or failed to, or its connection went away. `status` is the
/// connection's state: 1 connected, 0 not yet, negative an errno.
pub(crate) fn xprtrdma_connect(disconnect: bool, addr: &CStr, port: &CStr, rc: i32, status: i32) {
    // bindgen's `char` is `core::ffi::c_char`, the kernel crate's is `u8`.
    let (addr, port) = (addr.as_char_ptr().cast(), port.as_char_ptr().cast());
    if disconnect {
        if on!(xprtrdma_disconnect) {
            call!(xprtrdma_disconnect(addr, port, rc, status));
        }
    } else if on!(xprtrdma_connect) {
        call!(xprtrdma_connect(addr, port, rc, status));
    }
}

/// What the client's events report of a Call.
pub(crate) struct Task {
    /// The RPC task's `tk_pid`.
    pub(crate) task_id: u32,
    /// Its client's `cl_clid`.
    pub(crate) client_id: u32,
    /// The Call's XID, host order.
    pub(crate) xid: u32,
}

/// `xprtrdma_marshal`: a Call's transport header is built. `hdrlen` is
/// the RPC-over-RDMA header's length, `xdr` the Call's head, page and
/// tail lengths, `rtype`/`wtype` rpcrdma.ko's chunk types.
#[inline(always)]
pub(crate) fn xprtrdma_marshal(
    task: impl FnOnce() -> Task,
    hdrlen: u32,
    xdr: [u32; 3],
    rtype: u32,
    wtype: u32,
) {
    if on!(xprtrdma_marshal) {
        let (t, [head, page, tail]) = (task(), xdr);
        call!(xprtrdma_marshal(
            t.task_id,
            t.client_id,
            t.xid,
            hdrlen,
            head,
            page,
            tail,
            rtype,
            wtype
        ));
    }
}

/// `xprtrdma_marshal_failed`: a Call could not be marshalled (`ret` a
/// negative errno).
#[inline(always)]
pub(crate) fn xprtrdma_marshal_failed(task: impl FnOnce() -> Task, ret: i32) {
    if on!(xprtrdma_marshal_failed) {
        let t = task();
        call!(xprtrdma_marshal_failed(t.task_id, t.client_id, t.xid, ret));
    }
}

/// `xprtrdma_post_send`: a Call's Send is posted, as the connection's
/// `cid`th Send, on the CQ `cq_id` gives.
#[inline(always)]
pub(crate) fn xprtrdma_post_send(
    cq_id: impl FnOnce() -> u32,
    cid: u64,
    task: impl FnOnce() -> Task,
    num_sge: usize,
    signaled: bool,
) {
    if on!(xprtrdma_post_send) {
        let t = task();
        call!(xprtrdma_post_send(
            cq_id(),
            cid as i32,
            t.task_id,
            t.client_id,
            num_sge as i32,
            i32::from(signaled)
        ));
    }
}

/// `xprtrdma_inline_thresh`: the client connected from `src` to `dst`
/// with the negotiated inline thresholds `neg` (send, receive) and the
/// largest RPC Call and Reply they leave room for inline, `calc`.
#[inline(always)]
pub(crate) fn xprtrdma_inline_thresh(
    neg: (u32, u32),
    calc: impl FnOnce() -> (u32, u32),
    src: &super::SockAddr,
    dst: &super::SockAddr,
) {
    if on!(xprtrdma_inline_thresh) {
        let (max_send, max_recv) = calc();
        call!(xprtrdma_inline_thresh(
            neg.0,
            neg.1,
            max_send,
            max_recv,
            src.as_ptr(),
            dst.as_ptr()
        ));
    }
}

/// `xprtrdma_prepsend_failed`: a marshalled Call got no Send (`ret` a
/// negative errno: `-EAGAIN` when no Send buffer is free).
#[inline(always)]
pub(crate) fn xprtrdma_prepsend_failed(task: impl FnOnce() -> Task, ret: i32) {
    if on!(xprtrdma_prepsend_failed) {
        let t = task();
        call!(xprtrdma_prepsend_failed(t.task_id, t.client_id, t.xid, ret));
    }
}

/// Which chunk a segment a Call offers belongs to, as rpcrdma.ko's
/// `xprtrdma_chunk_*` events name it.
#[derive(Clone, Copy)]
pub(crate) enum ChunkKind {
    /// `xprtrdma_chunk_read`: a Read chunk at XDR position `pos`.
    Read { pos: u32 },
    /// `xprtrdma_chunk_write`: the Write chunk.
    Write,
    /// `xprtrdma_chunk_reply`: the Reply chunk.
    Reply,
    /// `xprtrdma_chunk_wp`: the Write chunk pad.
    WritePad,
}

/// `xprtrdma_chunk_{read,write,reply,wp}`: a segment of the Call `task`
/// gives is encoded, registered as `reg`; `is_last` for its chunk's last.
#[inline(always)]
pub(crate) fn xprtrdma_chunk(
    kind: ChunkKind,
    task: impl FnOnce() -> Task,
    reg: &crate::rdma::Registered,
    is_last: bool,
) {
    let on = match kind {
        ChunkKind::Read { .. } => on!(xprtrdma_chunk_read),
        ChunkKind::Write => on!(xprtrdma_chunk_write),
        ChunkKind::Reply => on!(xprtrdma_chunk_reply),
        ChunkKind::WritePad => on!(xprtrdma_chunk_wp),
    };
    if !on {
        return;
    }
    let t = task();
    let (c, n, h, l, o) = (t.client_id, reg.nents, reg.rkey, reg.length, reg.iova);
    match kind {
        ChunkKind::Read { pos } => {
            call!(xprtrdma_chunk_read(t.task_id, c, pos, n, h, l, o, is_last))
        }
        ChunkKind::Write => call!(xprtrdma_chunk_write(t.task_id, c, n, h, l, o, is_last)),
        ChunkKind::Reply => call!(xprtrdma_chunk_reply(t.task_id, c, n, h, l, o, is_last)),
        ChunkKind::WritePad => call!(xprtrdma_chunk_wp(t.task_id, c, n, h, l, o, is_last)),
    }
}

/// `xprtrdma_post_send_err`: posting the Send of the Call `task` gives
/// failed with `rc`, on the connection whose Send CQ is `cq_id`.
#[inline(always)]
pub(crate) fn xprtrdma_post_send_err(
    cq_id: impl FnOnce() -> u32,
    task: impl FnOnce() -> Task,
    rc: i32,
) {
    if on!(xprtrdma_post_send_err) {
        let t = task();
        call!(xprtrdma_post_send_err(cq_id(), t.task_id, t.client_id, rc));
    }
}

/// `xprtrdma_post_recv`: Receive buffer `cid` is about to be posted on
/// the Receive CQ `cq_id`.
#[inline(always)]
pub(crate) fn xprtrdma_post_recv(cq_id: u32, cid: u32) {
    if on!(xprtrdma_post_recv) {
        call!(xprtrdma_post_recv(cq_id, cid as i32));
    }
}

/// `xprtrdma_post_recvs` (`count` Receives posted, `active()` were
/// posted before them) or, if `rc` is an error, `xprtrdma_post_recvs_err`
/// first: a pass of reposting on `xprt`'s connection, Receive CQ `cq_id`.
#[inline(always)]
pub(crate) fn xprtrdma_post_recvs(
    xprt: &super::Xprt,
    cq_id: u32,
    count: u32,
    active: impl FnOnce() -> u32,
    rc: kernel::error::Result,
) {
    if let Err(e) = rc {
        if on!(xprtrdma_post_recvs_err) {
            let (a, p) = peer(xprt);
            call!(xprtrdma_post_recvs_err(a, p, cq_id, e.to_errno()));
        }
    }
    if on!(xprtrdma_post_recvs) {
        let (a, p) = peer(xprt);
        call!(xprtrdma_post_recvs(a, p, cq_id, count, active() as i32));
    }
}

/// `xprtrdma_fixup`: `fixup` bytes of an inline Reply were copied past
/// the head of the Call's receive buffer, whose parts are `xdr` long.
#[inline(always)]
pub(crate) fn xprtrdma_fixup(
    task: impl FnOnce() -> Task,
    fixup: u64,
    xdr: impl FnOnce() -> [u32; 3],
) {
    if on!(xprtrdma_fixup) {
        let (t, [head, page, tail]) = (task(), xdr());
        call!(xprtrdma_fixup(
            t.task_id,
            t.client_id,
            fixup as core::ffi::c_ulong,
            head as usize,
            page,
            tail as usize
        ));
    }
}

/// `xprtrdma_decode_seg` for each segment of the Write list and the Reply
/// chunk a Reply returned, in rpcrdma.ko's order.
#[inline(always)]
pub(crate) fn xprtrdma_decode_segs(chunks: &ChunkLists<'_>) {
    if on!(xprtrdma_decode_seg) {
        for chunk in chunks.writes.chunks().chain(chunks.reply) {
            for s in chunk.segments() {
                call!(xprtrdma_decode_seg(s.handle, s.length, s.offset));
            }
        }
    }
}

/// `xprtrdma_wc_receive`: a Receive completed (any status), the `cid`th
/// of its connection.
#[inline(always)]
pub(crate) fn xprtrdma_wc_receive(wc: &Wc<'_>, cid: u32) {
    if on!(xprtrdma_wc_receive) {
        call!(xprtrdma_wc_receive(
            wc.cq_id(true),
            cid as i32,
            wc.byte_len() as u32,
            wc.status().into(),
            wc.vendor_err()
        ));
    }
}

/// What happened to a Call's MR, as rpcrdma.ko's `xprtrdma_mr_class`
/// events name it.
#[derive(Clone, Copy)]
pub(crate) enum MrEvent {
    /// `xprtrdma_mr_map`: pages mapped on it for a chunk.
    Map,
    /// `xprtrdma_mr_fastreg`: its REG_MR goes out with the Call's Send.
    FastReg,
    /// `xprtrdma_mr_localinv`: a LOCAL_INV of it is posted.
    LocalInv,
    /// `xprtrdma_mr_reminv`: the server invalidated it (Send With
    /// Invalidate).
    RemInv,
}

/// `xprtrdma_mr_{map,fastreg,localinv,reminv}` of MR `reg` of the Call
/// `task` gives, or of none (the Write chunk pad: task 0, client -1, as
/// rpcrdma.ko reports an MR without a request).
#[inline(always)]
pub(crate) fn xprtrdma_mr(
    what: MrEvent,
    task: impl FnOnce() -> Option<Task>,
    reg: impl FnOnce() -> Option<crate::rdma::Registered>,
) {
    let on = match what {
        MrEvent::Map => on!(xprtrdma_mr_map),
        MrEvent::FastReg => on!(xprtrdma_mr_fastreg),
        MrEvent::LocalInv => on!(xprtrdma_mr_localinv),
        MrEvent::RemInv => on!(xprtrdma_mr_reminv),
    };
    if !on {
        return;
    }
    let Some(r) = reg() else {
        return;
    };
    let (t, c) = task().map_or((0, u32::MAX), |t| (t.task_id, t.client_id));
    let (id, n, h, l, o, d) = (r.mr_id, r.nents, r.rkey, r.length, r.iova, r.dir);
    match what {
        MrEvent::Map => call!(xprtrdma_mr_map(t, c, id, n, h, l, o, d)),
        MrEvent::FastReg => call!(xprtrdma_mr_fastreg(t, c, id, n, h, l, o, d)),
        MrEvent::LocalInv => call!(xprtrdma_mr_localinv(t, c, id, n, h, l, o, d)),
        MrEvent::RemInv => call!(xprtrdma_mr_reminv(t, c, id, n, h, l, o, d)),
    }
}

/// `xprtrdma_mr_unmap`: MR `reg`'s pages are DMA-unmapped as it goes back
/// to its pool.
#[inline(always)]
pub(crate) fn xprtrdma_mr_unmap(reg: impl FnOnce() -> Option<crate::rdma::Registered>) {
    if on!(xprtrdma_mr_unmap) {
        if let Some(r) = reg() {
            call!(xprtrdma_mr_unmap(
                r.mr_id, r.nents, r.rkey, r.length, r.iova, r.dir
            ));
        }
    }
}

/// `xprtrdma_frwr_alloc`: an MR could not be allocated (`err`); it has
/// no id (0).
#[inline(always)]
pub(crate) fn xprtrdma_frwr_alloc(err: kernel::error::Error) {
    if on!(xprtrdma_frwr_alloc) {
        call!(xprtrdma_frwr_alloc(0, err.to_errno()));
    }
}

/// `xprtrdma_frwr_dereg`: deregistering MR `mr_id`, last registered as
/// `reg` if at all, failed with `rc`.
#[inline(always)]
pub(crate) fn xprtrdma_frwr_dereg(mr_id: u32, reg: Option<crate::rdma::Registered>, rc: i32) {
    if on!(xprtrdma_frwr_dereg) {
        let (n, h, l, o, d) = reg.map_or((0, 0, 0, 0, sys::dma_data_direction_DMA_NONE), |r| {
            (r.nents, r.rkey, r.length, r.iova, r.dir)
        });
        call!(xprtrdma_frwr_dereg(mr_id, n, h, l, o, d, rc));
    }
}

/// `xprtrdma_frwr_sgerr`: the `sg_nents` entries of MR `mr_id`'s
/// scatterlist, the first at DMA address `addr`, could not be DMA-mapped
/// in direction `dir`.
#[inline(always)]
pub(crate) fn xprtrdma_frwr_sgerr(mr_id: u32, addr: u64, dir: u32, sg_nents: i32) {
    if on!(xprtrdma_frwr_sgerr) {
        call!(xprtrdma_frwr_sgerr(mr_id, addr, dir, sg_nents));
    }
}

/// `xprtrdma_frwr_maperr`: only `num_mapped` of the `nents` DMA-mapped
/// entries of MR `mr_id` went into its page list.
#[inline(always)]
pub(crate) fn xprtrdma_frwr_maperr(mr_id: u32, addr: u64, dir: u32, num_mapped: i32, nents: i32) {
    if on!(xprtrdma_frwr_maperr) {
        call!(xprtrdma_frwr_maperr(mr_id, addr, dir, num_mapped, nents));
    }
}

/// `xprtrdma_wc_send`: a signalled (or failed) Send completed, the
/// `cid`th of its connection, as `xprtrdma_post_send` numbered it.
#[inline(always)]
pub(crate) fn xprtrdma_wc_send(wc: &Wc<'_>, cid: u64) {
    if on!(xprtrdma_wc_send) {
        call!(xprtrdma_wc_send(
            wc.cq_id(false),
            cid as i32,
            wc.status().into(),
            wc.vendor_err()
        ));
    }
}

/// Which of rpcrdma.ko's MR completion events a completion is.
#[derive(Clone, Copy)]
pub(crate) enum MrWc {
    /// `xprtrdma_wc_fastreg`: a REG_MR (unsignalled: failures only).
    FastReg,
    /// `xprtrdma_wc_li`: a LOCAL_INV before the last of a Reply's
    /// (unsignalled: failures only).
    Li,
    /// `xprtrdma_wc_li_done`: the last LOCAL_INV of a Reply's, which
    /// finishes it.
    LiDone,
}

/// `xprtrdma_wc_{fastreg,li,li_done}` of MR `mr_id`.
#[inline(always)]
pub(crate) fn xprtrdma_wc_mr(what: MrWc, wc: &Wc<'_>, mr_id: impl FnOnce() -> u32) {
    let on = match what {
        MrWc::FastReg => on!(xprtrdma_wc_fastreg),
        MrWc::Li => on!(xprtrdma_wc_li),
        MrWc::LiDone => on!(xprtrdma_wc_li_done),
    };
    if !on {
        return;
    }
    let (q, id, (s, v)) = (wc.cq_id(false), mr_id() as i32, failure(wc));
    match what {
        MrWc::FastReg => call!(xprtrdma_wc_fastreg(q, id, s, v)),
        MrWc::Li => call!(xprtrdma_wc_li(q, id, s, v)),
        MrWc::LiDone => call!(xprtrdma_wc_li_done(q, id, s, v)),
    }
}

/// `xprtrdma_reply`: a Reply matched its Call; `credits` is the grant it
/// carried.
#[inline(always)]
pub(crate) fn xprtrdma_reply(task: impl FnOnce() -> Task, credits: u32) {
    if on!(xprtrdma_reply) {
        let t = task();
        call!(xprtrdma_reply(t.task_id, t.client_id, t.xid, credits));
    }
}

/// The server's address and port as the client's events print them.
fn peer(xprt: &super::Xprt) -> (*const core::ffi::c_char, *const core::ffi::c_char) {
    (
        xprt.display_cstr(false).as_char_ptr().cast(),
        xprt.display_cstr(true).as_char_ptr().cast(),
    )
}

/// Why a received message failed, as rpcrdma.ko's `xprtrdma_reply_*_err`
/// events name it.
#[derive(Clone, Copy)]
pub(crate) enum ReplyErr {
    /// `xprtrdma_reply_vers_err`: a version we never send.
    Vers,
    /// `xprtrdma_reply_rqst_err`: no Call waits for its XID.
    Rqst,
    /// `xprtrdma_reply_short_err`: too short for a transport header.
    Short,
    /// `xprtrdma_reply_hdr_err`: its header fails its Call.
    Hdr,
}

/// `xprtrdma_reply_{vers,rqst,short,hdr}_err` of the message `msg` from
/// `xprt`'s server: its XID, version and procedure as far as it holds
/// them (0 past its end).
#[inline(always)]
pub(crate) fn xprtrdma_reply_err(why: ReplyErr, xprt: &super::Xprt, msg: &[u8]) {
    let on = match why {
        ReplyErr::Vers => on!(xprtrdma_reply_vers_err),
        ReplyErr::Rqst => on!(xprtrdma_reply_rqst_err),
        ReplyErr::Short => on!(xprtrdma_reply_short_err),
        ReplyErr::Hdr => on!(xprtrdma_reply_hdr_err),
    };
    if !on {
        return;
    }
    let word = |i: usize| {
        msg.get(i * 4..i * 4 + 4)
            .and_then(|w| <[u8; 4]>::try_from(w).ok())
            .map_or(0, u32::from_be_bytes)
    };
    let (x, v, p) = (word(0), word(1), word(3));
    let (a, port) = peer(xprt);
    match why {
        ReplyErr::Vers => call!(xprtrdma_reply_vers_err(x, v, p, a, port)),
        ReplyErr::Rqst => call!(xprtrdma_reply_rqst_err(x, v, p, a, port)),
        ReplyErr::Short => call!(xprtrdma_reply_short_err(x, v, p, a, port)),
        ReplyErr::Hdr => call!(xprtrdma_reply_hdr_err(x, v, p, a, port)),
    }
}

/// An RDMA_ERROR as rpcrdma.ko's `xprtrdma_err_*` events report it.
#[derive(Clone, Copy)]
pub(crate) enum RdmaErr {
    /// `xprtrdma_err_vers`: ERR_VERS with the versions the server takes.
    Vers { min: u32, max: u32 },
    /// `xprtrdma_err_chunk`: ERR_CHUNK.
    Chunk,
    /// `xprtrdma_err_unrecognized`: another error code.
    Unrecognized { procedure: u32 },
}

/// `xprtrdma_err_{vers,chunk,unrecognized}`: the server answered the Call
/// `task` gives with RDMA_ERROR.
#[inline(always)]
pub(crate) fn xprtrdma_err(err: RdmaErr, task: impl FnOnce() -> Task) {
    match err {
        RdmaErr::Vers { min, max } if on!(xprtrdma_err_vers) => {
            let t = task();
            call!(xprtrdma_err_vers(t.task_id, t.client_id, t.xid, min, max));
        }
        RdmaErr::Chunk if on!(xprtrdma_err_chunk) => {
            let t = task();
            call!(xprtrdma_err_chunk(t.task_id, t.client_id, t.xid));
        }
        RdmaErr::Unrecognized { procedure } if on!(xprtrdma_err_unrecognized) => {
            let t = task();
            call!(xprtrdma_err_unrecognized(
                t.task_id,
                t.client_id,
                t.xid,
                procedure
            ));
        }
        _ => {}
    }
}

/// `xprtrdma_cb_call` (a backward Call, `xid` host order, goes to the
/// callback service) or `xprtrdma_cb_reply` (its Reply is marshalled).
#[inline(always)]
pub(crate) fn xprtrdma_cb(reply: bool, xprt: &super::Xprt, xid: u32) {
    if reply {
        if on!(xprtrdma_cb_reply) {
            let (a, p) = peer(xprt);
            call!(xprtrdma_cb_reply(a, p, xid));
        }
    } else if on!(xprtrdma_cb_call) {
        let (a, p) = peer(xprt);
        call!(xprtrdma_cb_call(a, p, xid));
    }
}

/// `xprtrdma_cb_setup`: the backchannel is set up for `reqs` requests.
#[inline(always)]
pub(crate) fn xprtrdma_cb_setup(xprt: &super::Xprt, reqs: u32) {
    if on!(xprtrdma_cb_setup) {
        let (a, p) = peer(xprt);
        call!(xprtrdma_cb_setup(a, p, reqs));
    }
}

/// `xprtrdma_op_connect`: a connect is scheduled `delay` jiffies out.
#[inline(always)]
pub(crate) fn xprtrdma_op_connect(xprt: &super::Xprt, delay: core::ffi::c_ulong) {
    if on!(xprtrdma_op_connect) {
        let (a, p) = peer(xprt);
        call!(xprtrdma_op_connect(a, p, delay));
    }
}

/// `xprtrdma_op_set_cto`: the upper layer sets the connect and reconnect
/// timeouts (jiffies).
#[inline(always)]
pub(crate) fn xprtrdma_op_set_cto(
    xprt: &super::Xprt,
    connect: core::ffi::c_ulong,
    reconnect: core::ffi::c_ulong,
) {
    if on!(xprtrdma_op_set_cto) {
        let (a, p) = peer(xprt);
        call!(xprtrdma_op_set_cto(a, p, connect, reconnect));
    }
}

/// `xprtrdma_op_inject_dsc`: a disconnect is injected (sunrpc's fault
/// injection).
#[inline(always)]
pub(crate) fn xprtrdma_op_inject_dsc(xprt: &super::Xprt) {
    if on!(xprtrdma_op_inject_dsc) {
        let (a, p) = peer(xprt);
        call!(xprtrdma_op_inject_dsc(a, p));
    }
}

/// The server's decode events' view of a received message: where it came
/// in and its transport header's fixed words, host order.
#[derive(Clone, Copy)]
pub(crate) struct RdmaHdr {
    /// The connection's Receive CQ.
    pub(crate) cq_id: u32,
    /// Our number of the Receive buffer.
    pub(crate) cid: u32,
    /// XID.
    pub(crate) xid: u32,
    /// RPC-over-RDMA version.
    pub(crate) vers: u32,
    /// Credits asked for.
    pub(crate) credits: u32,
    /// Message type (`RDMA_MSG` ...).
    pub(crate) proc_: u32,
}

/// Why the server refused a message, as rpcrdma.ko's events name it.
#[derive(Clone, Copy)]
pub(crate) enum BadReq {
    /// `svcrdma_decode_badvers_err`: an unsupported version.
    BadVers,
    /// `svcrdma_decode_drop_err`: dropped without an answer.
    Drop,
    /// `svcrdma_decode_badproc_err`: an unknown message type.
    BadProc,
    /// `svcrdma_decode_parse_err`: a malformed header or chunk list.
    Parse,
}

/// `svcrdma_decode_rqst`: a Call's transport header, `hdrlen` bytes long,
/// decoded.
#[inline(always)]
pub(crate) fn svcrdma_decode_rqst(hdr: impl FnOnce() -> RdmaHdr, hdrlen: usize) {
    if on!(svcrdma_decode_rqst) {
        let h = hdr();
        call!(svcrdma_decode_rqst(
            h.cq_id,
            h.cid as i32,
            h.xid,
            h.vers,
            h.credits,
            h.proc_,
            hdrlen as u32
        ));
    }
}

/// `svcrdma_decode_short_err`: a message of `hdrlen` bytes, too short for
/// a transport header.
#[inline(always)]
pub(crate) fn svcrdma_decode_short_err(hdr: impl FnOnce() -> RdmaHdr, hdrlen: usize) {
    if on!(svcrdma_decode_short_err) {
        let h = hdr();
        call!(svcrdma_decode_short_err(
            h.cq_id,
            h.cid as i32,
            hdrlen as u32
        ));
    }
}

/// `svcrdma_decode_*_err`: a message refused for `why`.
#[inline(always)]
pub(crate) fn svcrdma_decode_err(why: BadReq, hdr: impl FnOnce() -> RdmaHdr) {
    let fields = |h: RdmaHdr| (h.cq_id, h.cid as i32, h.xid, h.vers, h.credits, h.proc_);
    match why {
        BadReq::BadVers if on!(svcrdma_decode_badvers_err) => {
            let (q, c, x, v, cr, p) = fields(hdr());
            call!(svcrdma_decode_badvers_err(q, c, x, v, cr, p));
        }
        BadReq::Drop if on!(svcrdma_decode_drop_err) => {
            let (q, c, x, v, cr, p) = fields(hdr());
            call!(svcrdma_decode_drop_err(q, c, x, v, cr, p));
        }
        BadReq::BadProc if on!(svcrdma_decode_badproc_err) => {
            let (q, c, x, v, cr, p) = fields(hdr());
            call!(svcrdma_decode_badproc_err(q, c, x, v, cr, p));
        }
        BadReq::Parse if on!(svcrdma_decode_parse_err) => {
            let (q, c, x, v, cr, p) = fields(hdr());
            call!(svcrdma_decode_parse_err(q, c, x, v, cr, p));
        }
        _ => {}
    }
}

/// `svcrdma_err_vers` (`vers`) or `svcrdma_err_chunk`: the server answers
/// the Call `xid` (host order) with RDMA_ERROR.
#[inline(always)]
pub(crate) fn svcrdma_err(vers: bool, xid: u32) {
    if vers {
        if on!(svcrdma_err_vers) {
            call!(svcrdma_err_vers(xid));
        }
    } else if on!(svcrdma_err_chunk) {
        call!(svcrdma_err_chunk(xid));
    }
}

/// `svcrdma_post_send`: a Reply's Send is posted from Send buffer `cid`
/// with `num_sge` SGEs, invalidating `inv_rkey` (0: a plain Send), on the
/// CQ `cq_id` gives.
#[inline(always)]
pub(crate) fn svcrdma_post_send(
    cq_id: impl FnOnce() -> u32,
    cid: u32,
    num_sge: u32,
    inv_rkey: u32,
) {
    if on!(svcrdma_post_send) {
        call!(svcrdma_post_send(cq_id(), cid as i32, num_sge, inv_rkey));
    }
}

/// `svcrdma_wc_send`: a signalled Send, from Send buffer `cid`, completed
/// successfully.
#[inline(always)]
pub(crate) fn svcrdma_wc_send(wc: &Wc<'_>, cid: u32) {
    if on!(svcrdma_wc_send) {
        call!(svcrdma_wc_send(wc.cq_id(false), cid as i32));
    }
}

/// `svcrdma_wc_recv`: a Receive into buffer `cid` completed successfully.
#[inline(always)]
pub(crate) fn svcrdma_wc_recv(wc: &Wc<'_>, cid: u32) {
    if on!(svcrdma_wc_recv) {
        call!(svcrdma_wc_recv(
            wc.cq_id(true),
            cid as i32,
            wc.byte_len() as u32
        ));
    }
}

/// A failed completion's status and vendor error, as rpcrdma.ko's flush
/// classes report them.
fn failure(wc: &Wc<'_>) -> (core::ffi::c_ulong, u32) {
    (wc.status().into(), wc.vendor_err())
}

/// `svcrdma_post_recv`: Receive buffer `cid` is posted, on the CQ `cq_id`
/// gives.
#[inline(always)]
pub(crate) fn svcrdma_post_recv(cq_id: impl FnOnce() -> u32, cid: u32) {
    if on!(svcrdma_post_recv) {
        call!(svcrdma_post_recv(cq_id(), cid as i32));
    }
}

/// `svcrdma_wc_recv_flush` / `svcrdma_wc_recv_err`: a Receive into buffer
/// `cid` completed with an error, flushed or not.
#[inline(always)]
pub(crate) fn svcrdma_wc_recv_failed(wc: &Wc<'_>, cid: u32) {
    if wc.flushed() {
        if on!(svcrdma_wc_recv_flush) {
            let (s, v) = failure(wc);
            call!(svcrdma_wc_recv_flush(wc.cq_id(true), cid as i32, s, v));
        }
    } else if on!(svcrdma_wc_recv_err) {
        let (s, v) = failure(wc);
        call!(svcrdma_wc_recv_err(wc.cq_id(true), cid as i32, s, v));
    }
}

/// `svcrdma_wc_send_flush` / `svcrdma_wc_send_err`: a Send from buffer
/// `cid` completed with an error, flushed or not.
#[inline(always)]
pub(crate) fn svcrdma_wc_send_failed(wc: &Wc<'_>, cid: u32) {
    if wc.flushed() {
        if on!(svcrdma_wc_send_flush) {
            let (s, v) = failure(wc);
            call!(svcrdma_wc_send_flush(wc.cq_id(false), cid as i32, s, v));
        }
    } else if on!(svcrdma_wc_send_err) {
        let (s, v) = failure(wc);
        call!(svcrdma_wc_send_err(wc.cq_id(false), cid as i32, s, v));
    }
}

/// The monotonic clock, as the events' `ktime_t` fields take it.
fn now() -> i64 {
    <kernel::time::Monotonic as kernel::time::ClockSource>::ktime_get()
}

/// When a Call's RDMA Reads are posted, for `svcrdma_wc_read`'s latency:
/// `ktime_get()`, or 0 while that event is off.
#[inline(always)]
pub(crate) fn read_post_time() -> i64 {
    if on!(svcrdma_wc_read) {
        now()
    } else {
        0
    }
}

/// `svcrdma_post_read_chunk`: RDMA Reads of the Call in Receive buffer
/// `cid` are posted, `sqecount` Send Queue entries, on the Send CQ
/// `cq_id` gives.
#[inline(always)]
pub(crate) fn svcrdma_post_read_chunk(cq_id: impl FnOnce() -> u32, cid: u32, sqecount: u32) {
    if on!(svcrdma_post_read_chunk) {
        call!(svcrdma_post_read_chunk(
            cq_id(),
            cid as i32,
            sqecount as i32
        ));
    }
}

/// `svcrdma_wc_read` (with `totalbytes` read for the Call and the latency
/// since `posttime`, a [`read_post_time`]), or `_flush` / `_err`: the
/// Reads of the Call in Receive buffer `cid` completed.
#[inline(always)]
pub(crate) fn svcrdma_wc_read(wc: &Wc<'_>, cid: u32, totalbytes: u64, posttime: i64) {
    let cq = || wc.cq_id(false);
    if wc.ok() {
        if on!(svcrdma_wc_read) {
            // Enabled while the Reads were in flight: no post time.
            let t = if posttime != 0 { posttime } else { now() };
            call!(svcrdma_wc_read(cq(), cid as i32, totalbytes as u32, t));
        }
    } else if wc.flushed() {
        if on!(svcrdma_wc_read_flush) {
            let (s, v) = failure(wc);
            call!(svcrdma_wc_read_flush(cq(), cid as i32, s, v));
        }
    } else if on!(svcrdma_wc_read_err) {
        let (s, v) = failure(wc);
        call!(svcrdma_wc_read_err(cq(), cid as i32, s, v));
    }
}

/// Which chunks a Reply's RDMA Writes fill.
#[derive(Clone, Copy, Default)]
pub(crate) struct Chunks {
    /// Write chunks.
    pub(crate) write: bool,
    /// The Reply chunk.
    pub(crate) reply: bool,
}

/// `svcrdma_post_write_chunk` / `svcrdma_post_reply_chunk`: the Writes
/// of the Reply in Send buffer `cid` into its Write chunks and Reply
/// chunk go with its Send, `sqes()` Send Queue entries each, on the Send
/// CQ `cq_id` gives.
#[inline(always)]
pub(crate) fn svcrdma_post_chunks(
    cq_id: impl Fn() -> u32,
    cid: u32,
    chunks: Chunks,
    sqes: impl FnOnce() -> (u32, u32),
) {
    let write = chunks.write && on!(svcrdma_post_write_chunk);
    let reply = chunks.reply && on!(svcrdma_post_reply_chunk);
    if write || reply {
        let (w, r) = sqes();
        if write {
            call!(svcrdma_post_write_chunk(cq_id(), cid as i32, w as i32));
        }
        if reply {
            call!(svcrdma_post_reply_chunk(cq_id(), cid as i32, r as i32));
        }
    }
}

/// `svcrdma_wc_write` / `svcrdma_wc_reply`, or their `_flush` / `_err`:
/// the Writes of the Reply in Send buffer `cid` completed with its Send,
/// which `wc` reports if `last` (else a later one's completion covers
/// it: it succeeded).
#[inline(always)]
pub(crate) fn svcrdma_wc_chunks(wc: &Wc<'_>, cid: u32, last: bool, chunks: Chunks) {
    if !chunks.write && !chunks.reply {
        return;
    }
    let cq = || wc.cq_id(false);
    let c = cid as i32;
    if !last || wc.ok() {
        if chunks.write && on!(svcrdma_wc_write) {
            call!(svcrdma_wc_write(cq(), c));
        }
        if chunks.reply && on!(svcrdma_wc_reply) {
            call!(svcrdma_wc_reply(cq(), c));
        }
        return;
    }
    let (s, v) = failure(wc);
    if wc.flushed() {
        if chunks.write && on!(svcrdma_wc_write_flush) {
            call!(svcrdma_wc_write_flush(cq(), c, s, v));
        }
        if chunks.reply && on!(svcrdma_wc_reply_flush) {
            call!(svcrdma_wc_reply_flush(cq(), c, s, v));
        }
    } else {
        if chunks.write && on!(svcrdma_wc_write_err) {
            call!(svcrdma_wc_write_err(cq(), c, s, v));
        }
        if chunks.reply && on!(svcrdma_wc_reply_err) {
            call!(svcrdma_wc_reply_err(cq(), c, s, v));
        }
    }
}

/// The Send Queue as `svcrdma_sq_*` report it.
pub(crate) struct Sq {
    /// The Send CQ.
    pub(crate) cq_id: u32,
    /// The buffer that waits or failed, -1 for none yet.
    pub(crate) cid: i32,
    /// Entries free, and all of them.
    pub(crate) avail: u32,
    pub(crate) depth: u32,
}

/// `svcrdma_sq_full` (`retry` false) as a thread starts waiting for Send
/// Queue room, `svcrdma_sq_retry` once it has it.
#[inline(always)]
pub(crate) fn svcrdma_sq_wait(retry: bool, sq: impl FnOnce() -> Sq) {
    if retry {
        if on!(svcrdma_sq_retry) {
            let q = sq();
            call!(svcrdma_sq_retry(
                q.cq_id,
                q.cid,
                q.avail as i32,
                q.depth as i32
            ));
        }
    } else if on!(svcrdma_sq_full) {
        let q = sq();
        call!(svcrdma_sq_full(
            q.cq_id,
            q.cid,
            q.avail as i32,
            q.depth as i32
        ));
    }
}

/// `svcrdma_sq_post_err`: posting on the Send Queue failed with `err`.
#[inline(always)]
pub(crate) fn svcrdma_sq_post_err(sq: impl FnOnce() -> Sq, err: kernel::error::Error) {
    if on!(svcrdma_sq_post_err) {
        let q = sq();
        call!(svcrdma_sq_post_err(
            q.cq_id,
            q.cid,
            q.avail as i32,
            q.depth as i32,
            err.to_errno()
        ));
    }
}

/// `svcrdma_send_err`: the Reply to `xid` (host order) could not be sent
/// to `addr` (`err`); the connection closes.
#[inline(always)]
pub(crate) fn svcrdma_send_err(addr: &CStr, xid: u32, err: kernel::error::Error) {
    if on!(svcrdma_send_err) {
        call!(svcrdma_send_err(
            addr.as_char_ptr().cast(),
            xid,
            err.to_errno()
        ));
    }
}

/// `svcrdma_rq_post_err`: Receives for `addr` could not be posted.
#[inline(always)]
pub(crate) fn svcrdma_rq_post_err(addr: &CStr, err: kernel::error::Error) {
    if on!(svcrdma_rq_post_err) {
        call!(svcrdma_rq_post_err(
            addr.as_char_ptr().cast(),
            err.to_errno()
        ));
    }
}

/// `svcrdma_device_removal`: device `name` goes away, and with it the
/// connection to `peer`.
#[inline(always)]
pub(crate) fn svcrdma_device_removal(name: &CStr, peer: &super::SockAddr) {
    if on!(svcrdma_device_removal) {
        call!(svcrdma_device_removal(
            name.as_char_ptr().cast(),
            peer.as_ptr()
        ));
    }
}

/// `xprtrdma_device_removal`: device `name` goes away, and with it the
/// client's connection to `peer`.
#[inline(always)]
pub(crate) fn xprtrdma_device_removal(name: &CStr, peer: &super::SockAddr) {
    if on!(xprtrdma_device_removal) {
        call!(xprtrdma_device_removal(
            name.as_char_ptr().cast(),
            peer.as_ptr()
        ));
    }
}

/// `svcrdma_qp_error`: the QP of the connection to `peer` on device
/// `dev` had asynchronous event `event` (`enum ib_event_type`).
#[inline(always)]
pub(crate) fn svcrdma_qp_error(event: u32, dev: &CStr, peer: &super::SockAddr) {
    if on!(svcrdma_qp_error) {
        call!(svcrdma_qp_error(
            event,
            dev.as_char_ptr().cast(),
            peer.as_ptr()
        ));
    }
}

/// Why a connection request could not be accepted, as rpcrdma.ko's
/// events name it.
#[derive(Clone, Copy)]
pub(crate) enum AcceptErr {
    /// `svcrdma_pd_err`: its protection domain could not be allocated.
    Pd,
    /// `svcrdma_qp_err`: its QP, CQs or buffers could not be set up.
    Qp,
    /// `svcrdma_initdepth_err`: the client takes no RDMA Reads.
    InitDepth,
    /// `svcrdma_accept_err`: `rdma_accept` failed.
    Accept,
}

/// `svcrdma_{pd,qp,initdepth,accept}_err`: the request from `peer` could not
/// be accepted (`err`).
#[inline(always)]
pub(crate) fn svcrdma_accept_err(
    why: AcceptErr,
    peer: &super::SockAddr,
    err: kernel::error::Error,
) {
    let on = match why {
        AcceptErr::Pd => on!(svcrdma_pd_err),
        AcceptErr::Qp => on!(svcrdma_qp_err),
        AcceptErr::InitDepth => on!(svcrdma_initdepth_err),
        AcceptErr::Accept => on!(svcrdma_accept_err),
    };
    if !on {
        return;
    }
    // As `xpt_remotebuf`, which the C module's events print.
    let mut buf = [0 as core::ffi::c_char; 64];
    // SAFETY: `peer` is a valid socket address; `buf` is writable for its
    // length, and the helper NUL-terminates within it.
    unsafe { sys::rpcrdma_rs_addr_str(peer.as_ptr(), buf.as_mut_ptr(), buf.len()) };
    let (addr, status) = (buf.as_ptr(), err.to_errno().into());
    match why {
        AcceptErr::Pd => call!(svcrdma_pd_err(addr, status)),
        AcceptErr::Qp => call!(svcrdma_qp_err(addr, status)),
        AcceptErr::InitDepth => call!(svcrdma_initdepth_err(addr, status)),
        AcceptErr::Accept => call!(svcrdma_accept_err(addr, status)),
    }
}

/// `svcrdma_decode_rseg` for each Read segment and `svcrdma_decode_wseg`
/// for each segment of the Write chunks and the Reply chunk of a Call
/// that arrived as `hdr` says, in rpcrdma.ko's order. A Read segment's
/// `segno` is its index among those of its position (its chunk).
#[inline(always)]
pub(crate) fn svcrdma_decode_segs(hdr: impl FnOnce() -> RdmaHdr, chunks: &ChunkLists<'_>) {
    let (r, w) = (on!(svcrdma_decode_rseg), on!(svcrdma_decode_wseg));
    if !r && !w {
        return;
    }
    let h = hdr();
    let (q, c) = (h.cq_id, h.cid as i32);
    if r {
        for (i, rs) in chunks.reads.segments().enumerate() {
            let segno = chunks
                .reads
                .segments()
                .take(i)
                .filter(|p| p.position == rs.position)
                .count() as u32;
            let s = rs.segment;
            call!(svcrdma_decode_rseg(
                q,
                c,
                segno,
                rs.position,
                s.handle,
                s.length,
                s.offset
            ));
        }
    }
    if w {
        for chunk in chunks.writes.chunks().chain(chunks.reply) {
            for (j, s) in chunk.segments().enumerate() {
                call!(svcrdma_decode_wseg(
                    q, c, j as u32, s.handle, s.length, s.offset
                ));
            }
        }
    }
}

/// `svcrdma_encode_wseg` for each Write list segment the Reply in Send
/// buffer `cid` echoes, `segs()` giving them: (chunk, index in it,
/// segment with the length written).
#[inline(always)]
pub(crate) fn svcrdma_encode_wseg<I: Iterator<Item = (usize, usize, Segment)>>(
    cq_id: impl FnOnce() -> u32,
    cid: u32,
    segs: impl FnOnce() -> I,
) {
    if on!(svcrdma_encode_wseg) {
        let q = cq_id();
        for (_, j, s) in segs() {
            call!(svcrdma_encode_wseg(
                q, cid as i32, j as u32, s.handle, s.length, s.offset
            ));
        }
    }
}

/// `svcrdma_small_wrch_err`: a result payload is `remaining` bytes longer
/// than its Write chunk of `num_segs` segments, all taken (`seg_no`, as
/// rpcrdma.ko counts them when it gives up); `chunk` gives the two, if it
/// finds the chunk. The Reply has no Send buffer yet: cid -1, on the Send
/// CQ `cq_id` gives.
#[inline(always)]
pub(crate) fn svcrdma_small_wrch_err(
    cq_id: impl FnOnce() -> u32,
    chunk: impl FnOnce() -> Option<(u32, u32)>,
) {
    if on!(svcrdma_small_wrch_err) {
        if let Some((remaining, num_segs)) = chunk() {
            call!(svcrdma_small_wrch_err(
                cq_id(),
                -1,
                remaining,
                num_segs,
                num_segs
            ));
        }
    }
}
