// SPDX-License-Identifier: GPL-2.0

//! One client connection of the server: the `svc_xprt` nfsd sees, the CM
//! id with its QP, and the Receive and Send buffers.
//!
//! A connection is built and accepted in the listener's CM callback
//! (`listener`), with its Receives posted before `rdma_accept`, then
//! handed to nfsd through the listener's accept queue. Receive
//! completions queue the buffer and wake an nfsd thread once the
//! connection is established; every other kind of work runs in nfsd
//! threads (`recv`, `send`). Errors in completion and CM handlers only
//! mark the transport for closing, which an nfsd thread carries out.

use kernel::prelude::*;
use kernel::str::{CStr, CString};
use kernel::sync::atomic::{Atomic, Relaxed};
use kernel::sync::{new_condvar, new_spinlock, Arc, CondVar, SetOnce, SpinLock};

use super::backchannel::BC_SLOTS;
use super::{Counter, SvcConfig, TOTALS};
use crate::proto::pvt::{self, InlineThresholds, PrivateData};
use crate::proto::responder::{self, CallAt, MAX_PAYLOADS};
use crate::rdma::{
    read_wrs, CmEvent, CmHandler, ConnParam, Device, Endpoint, EpOwner, EpSizes, Parked, Pd,
    PendingConn, PostError, RecvBuf, RecvKind, Retired, SendBuf, SendKind, Wc, MAX_SENDS,
};
use crate::sunrpc::{new_object, trace, CounterDir, Net, Serv, SockAddr, SvcStat, SvcXprt};

/// Per-connection counters, summed into [`TOTALS`] as they count.
pub(crate) struct ConnStats {
    /// Connections accepted and closed (totals only).
    pub(crate) accepted: Counter,
    pub(crate) closed: Counter,
    /// Calls received and handed to nfsd.
    pub(crate) calls: Counter,
    /// Replies sent.
    pub(crate) replies: Counter,
    /// Version 2 Calls received and Replies sent: the negotiated version,
    /// seen from the server.
    pub(crate) v2_calls: Counter,
    pub(crate) v2_replies: Counter,
    /// RDMA Reads posted (a Read segment, or the part of one between two
    /// positions), Write chunks and Reply chunks pushed.
    pub(crate) read_segments: Counter,
    pub(crate) write_chunks: Counter,
    pub(crate) reply_chunks: Counter,
    /// Bytes moved by RDMA Read and by RDMA Write.
    pub(crate) read_bytes: Counter,
    pub(crate) write_bytes: Counter,
    /// RDMA_ERRORs sent, and messages dropped without an answer.
    pub(crate) errors_sent: Counter,
    pub(crate) dropped: Counter,
    /// Replies sent with Send With Invalidate.
    pub(crate) remote_inv: Counter,
    /// Backward Calls (NFSv4.1 callbacks) sent, Replies matched to them,
    /// and Calls that could not be sent.
    pub(crate) bc_calls: Counter,
    pub(crate) bc_replies: Counter,
    pub(crate) bc_failures: Counter,
    /// Connection requests that could not be accepted (the client gave
    /// up, or the accept failed), and requests refused because the
    /// accept queue was full (totals only).
    pub(crate) accept_failed: Counter,
    pub(crate) refused: Counter,
}

impl ConnStats {
    /// The counters' files: name and field.
    #[allow(clippy::type_complexity)]
    pub(crate) const FILES: [(&'static CStr, fn(&ConnStats) -> &Counter); 19] = [
        (c"backchannel_calls", |s| &s.bc_calls),
        (c"backchannel_replies", |s| &s.bc_replies),
        (c"backchannel_failures", |s| &s.bc_failures),
        (c"connections_accepted", |s| &s.accepted),
        (c"connections_closed", |s| &s.closed),
        (c"calls", |s| &s.calls),
        (c"replies", |s| &s.replies),
        (c"calls_v2", |s| &s.v2_calls),
        (c"replies_v2", |s| &s.v2_replies),
        (c"read_segments", |s| &s.read_segments),
        (c"write_chunks", |s| &s.write_chunks),
        (c"reply_chunks", |s| &s.reply_chunks),
        (c"rdma_read_bytes", |s| &s.read_bytes),
        (c"rdma_write_bytes", |s| &s.write_bytes),
        (c"errors_sent", |s| &s.errors_sent),
        (c"dropped", |s| &s.dropped),
        (c"remote_invalidations", |s| &s.remote_inv),
        (c"accepts_failed", |s| &s.accept_failed),
        (c"connections_refused", |s| &s.refused),
    ];

    pub(crate) const fn new() -> Self {
        Self {
            accepted: Counter::new(),
            closed: Counter::new(),
            calls: Counter::new(),
            replies: Counter::new(),
            v2_calls: Counter::new(),
            v2_replies: Counter::new(),
            read_segments: Counter::new(),
            write_chunks: Counter::new(),
            reply_chunks: Counter::new(),
            read_bytes: Counter::new(),
            write_bytes: Counter::new(),
            errors_sent: Counter::new(),
            dropped: Counter::new(),
            remote_inv: Counter::new(),
            bc_calls: Counter::new(),
            bc_replies: Counter::new(),
            bc_failures: Counter::new(),
            accept_failed: Counter::new(),
            refused: Counter::new(),
        }
    }
}

/// What a Receive buffer holds besides its bytes: where the Call in it
/// lies, the result payloads nfsd reported for it, and its Reads.
#[derive(Default)]
pub(crate) struct CallState {
    /// Where the Call in the buffer lies, found when it arrived: its Read
    /// chunks and its Reply use it instead of decoding the header again.
    pub(super) call: CallAt,
    /// The result payloads nfsd reported, in order: offset and length.
    pub(super) payloads: [Option<(u32, u32)>; MAX_PAYLOADS],
    /// Send Queue room the posted Reads hold, given back when they
    /// complete; what they move, for the counters.
    pub(super) read_wrs: u32,
    pub(super) segments: u64,
    pub(super) bytes: u64,
    /// When the Reads were posted, for `svcrdma_wc_read` (0: untraced).
    pub(super) read_posted: i64,
}

/// What a Send buffer holds besides its bytes.
#[derive(Default)]
pub(crate) struct ReplyState {
    /// Send Queue room reserved for the Writes posted with the Send,
    /// given back with the Send's when it completes.
    room: u32,
    /// The chunks those Writes fill, for `svcrdma_wc_write`/`_reply`.
    pub(super) chunks: trace::Chunks,
}

/// A ring of parked buffers, as long as the number of buffers.
pub(super) struct Ring<K> {
    ring: KVec<Option<Parked<K>>>,
    head: usize,
    len: usize,
}

impl<K> Ring<K> {
    fn new(cap: usize) -> Result<Self> {
        let mut ring = KVec::with_capacity(cap, GFP_KERNEL)?;
        for _ in 0..cap {
            ring.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            ring,
            head: 0,
            len: 0,
        })
    }

    /// Queues `p`; a buffer is queued at most once, so there is room.
    fn push(&mut self, p: Parked<K>) {
        let cap = self.ring.len();
        if self.len < cap {
            self.ring[(self.head + self.len) % cap] = Some(p);
            self.len += 1;
        }
    }

    fn pop(&mut self) -> Option<Parked<K>> {
        if self.len == 0 {
            return None;
        }
        let p = self.ring[self.head].take();
        self.head = (self.head + 1) % self.ring.len();
        self.len -= 1;
        p
    }
}

/// The Receive buffers waiting for an nfsd thread: new Calls, and Calls
/// whose Read chunks have arrived.
pub(super) struct Incoming {
    received: Ring<RecvKind>,
    pulled: Ring<RecvKind>,
    /// The connection is established: a queued buffer can be answered.
    established: bool,
}

impl Incoming {
    pub(super) fn is_empty(&self) -> bool {
        self.received.len == 0 && self.pulled.len == 0
    }

    /// The next buffer, and whether its Reads are done: those first, as
    /// svcrdma takes them, since they arrived before anything queued.
    pub(super) fn pop(&mut self) -> Option<(Parked<RecvKind>, bool)> {
        if let Some(p) = self.pulled.pop() {
            return Some((p, true));
        }
        self.received.pop().map(|p| (p, false))
    }
}

/// Free Send buffers and Send Queue room.
pub(super) struct SqState {
    free: KVec<Parked<SendKind>>,
    /// Work requests that may still be posted.
    room: u32,
    /// Closing: nobody may wait any more.
    closed: bool,
}

/// Receives posted again at once. Those waiting for their batch come out
/// of the slack of [`recv_count`]: the client never finds fewer posted
/// than its credits.
const RECV_BATCH: usize = 8;

crate::rdma::owner! {
    /// A client connection: `xprt` first (`repr(C)`,
    /// [`SvcObject`](crate::sunrpc::SvcObject)), then `ep`, dropped before
    /// every other field ([`owner!`](crate::rdma::owner)): its drop stops
    /// calling the connection's handlers, drains the QP and destroys the
    /// CM id (which waits for a running CM event) before anything a
    /// completion or a CM event reaches goes.
    #[repr(C)]
    #[pin_data]
    pub(crate) struct SvcConn(xprt: SvcXprt) {
        endpoint ep;
        pub(super) cfg: SvcConfig,
        /// Receive buffers waiting for an nfsd thread.
        #[pin]
        pub(super) ready: SpinLock<Incoming>,
        #[pin]
        sq: SpinLock<SqState>,
        #[pin]
        sq_cv: CondVar,
        sq_waiters: Atomic<u32>,
        /// All the Send Queue room, for the trace events.
        sq_depth: u32,
        /// Receive buffers released and not yet posted again (svcrdma posts
        /// in batches too).
        #[pin]
        reposts: SpinLock<[Option<Parked<RecvKind>>; RECV_BATCH]>,
        /// At most this many Sends in a row go unsignalled; fewer than the
        /// Send buffers, so that those they hold never starve a Reply.
        signal_every: u32,
        /// Send Queue room for RDMA Reads and Writes.
        pub(super) rw_room: u32,
        /// Calls handed to nfsd whose request has not released them yet.
        pub(super) in_nfsd: Atomic<u32>,
        /// Inline thresholds for each version: the smaller of the client's
        /// receive size (RFC 8797; on version 2 at least 4096) and ours.
        /// Our Send buffers hold version 2's, never the smaller.
        pub(super) inline: pvt::Negotiated,
        /// Both ends allow Send With Invalidate (RFC 8797 §5.1): the client's
        /// private data, and ours, set when the device can.
        pub(super) remote_inv: bool,
        /// This connection's counters in debugfs; declared (so dropped)
        /// before the counters.
        debug: SetOnce<CounterDir<ConnStats>>,
        pub(super) stats: Arc<ConnStats>,
        farewell: Farewell,
    }
}

crate::sunrpc::impl_svc_object!(SvcConn, xprt);

impl CmHandler for SvcConn {
    fn event(&self, event: CmEvent) {
        match event {
            CmEvent::Established { .. } => {
                // Under the lock `queue` reads it under, so that one of
                // the two always enqueues a Call that arrived first.
                self.ready.lock().established = true;
                self.xprt.enqueue();
            }
            CmEvent::Disconnected | CmEvent::DeviceRemoval => {
                if matches!(event, CmEvent::DeviceRemoval) {
                    self.trace_device_removal();
                }
                rdebug!("server: connection lost ({:?})\n", event);
                self.close();
            }
            CmEvent::Other(_) | CmEvent::AddrChange => {}
            _ => self.close(),
        }
    }

    fn qp_event(event: u32, dev: &CStr, peer: &SockAddr) {
        trace::svcrdma_qp_error(event, dev, peer);
    }
}

impl EpOwner for SvcConn {
    type RecvState = CallState;
    type SendState = ReplyState;

    fn received(&self, buf: RecvBuf<'_, Self>, wc: &Wc<'_>) {
        if !wc.ok() {
            if !wc.flushed() {
                rwarn!("server: Receive failed, status {}\n", wc.status());
            }
            trace::svcrdma_wc_recv_failed(wc, buf.idx());
            // The buffer stays with the endpoint until it goes.
            self.close();
            return;
        }
        trace::svcrdma_wc_recv(wc, buf.idx());
        self.queue(buf.park(), false);
    }

    fn reads_done(&self, mut buf: RecvBuf<'_, Self>, wc: &Wc<'_>) {
        let (idx, st) = (buf.idx(), buf.state());
        trace::svcrdma_wc_read(wc, idx, st.bytes, st.read_posted);
        if !wc.ok() {
            if !wc.flushed() {
                rwarn!("server: RDMA Read failed, status {}\n", wc.status());
            }
            self.put_wrs(core::mem::take(&mut buf.state().read_wrs));
            self.close();
            return;
        }
        if buf.reads_left() {
            // A Read list longer than the room: the next part, in the
            // same room.
            let room = buf.state().read_wrs;
            let Some(ep) = self.ep() else {
                return;
            };
            buf.state().read_posted = trace::read_post_time();
            // The part posted: all that is left, or what fits the room.
            let sqes = buf.parts().2.wrs_left().min(room);
            // Traced first: see `recv::pull`.
            trace::svcrdma_post_read_chunk(|| ep.cq_ids().0, idx, sqes);
            if let Err(PostError::NotPosted(e, _) | PostError::Lost(e)) = ep.post_reads(buf, room) {
                trace::svcrdma_sq_post_err(|| self.sq_view(idx as i32), e);
                rwarn!("server: cannot post RDMA Reads: {:?}\n", e);
                // The Call is lost with the connection (RFC 8166 §4.5.4).
                self.close();
            }
            return;
        }
        self.put_wrs(core::mem::take(&mut buf.state().read_wrs));
        self.queue(buf.park(), true);
    }

    fn sent(&self, bufs: Retired<'_, Self>, wc: &Wc<'_>) {
        let last = bufs.completed_idx();
        if !wc.ok() {
            if !wc.flushed() {
                rwarn!("server: Send failed, status {}\n", wc.status());
            }
            if let Some(idx) = last {
                trace::svcrdma_wc_send_failed(wc, idx);
            }
            self.close();
        } else if let Some(idx) = last {
            trace::svcrdma_wc_send(wc, idx);
        }
        // Each Send completed with every Write before it.
        self.give_back(bufs.map(|mut buf| {
            let (idx, chunks) = (buf.idx(), core::mem::take(&mut buf.state().chunks));
            trace::svcrdma_wc_chunks(wc, idx, Some(idx) == last, chunks);
            let wrs = core::mem::take(&mut buf.state().room);
            buf.writes().release();
            (buf.park(), wrs)
        }));
    }
}

/// A Send buffer taken off the free list, with room reserved on the Send
/// Queue for its Send and `wrs` RDMA Writes. Back on the list when
/// dropped unposted.
pub(super) struct SendSlot<'a> {
    conn: &'a SvcConn,
    buf: Option<SendBuf<'a, SvcConn>>,
    wrs: u32,
}

impl<'a> SendSlot<'a> {
    /// The buffer, ours until posted.
    pub(super) fn buf(&mut self) -> Result<&mut SendBuf<'a, SvcConn>> {
        self.buf.as_mut().ok_or(EINVAL)
    }

    /// Takes Send Queue room for the Writes set up in the buffer, waiting
    /// for it. The Writes are built in the slot, so its buffer is held
    /// while this waits, which starves nobody: a waiting thread holds the
    /// room of one Send, and there are no more of them than Send buffers;
    /// the rest, `rw_room` (what the largest Reply's Writes need), is held
    /// only by posted work requests, which complete. The one Write each
    /// unsignalled Send may carry comes out of room of its own
    /// ([`lazy_room`]).
    pub(super) fn reserve_writes(&mut self) -> Result {
        let conn = self.conn;
        let room = conn.rw_room;
        if self.buf()?.writes().wrs_left() > room {
            // More than the connection ever has room for (a client that
            // registers its chunks a page at a time): all the room, used
            // part after part, waiting for each.
            let ep = conn.ep().ok_or(ENOTCONN)?;
            let more = room.saturating_sub(self.wrs);
            let cid = self.buf()?.idx();
            conn.get_wrs(more, cid)?;
            self.wrs += more;
            while self.buf()?.writes().wrs_left() > room {
                if let Err(e) = ep.post_writes_part(self.buf()?, room) {
                    trace::svcrdma_sq_post_err(|| conn.sq_view(cid as i32), e);
                    conn.close();
                    return Err(e);
                }
            }
        }
        let wrs = self.buf()?.writes().wrs_left();
        let more = wrs.saturating_sub(self.wrs);
        if more > 0 {
            let cid = self.buf()?.idx();
            self.conn.get_wrs(more, cid)?;
            self.wrs += more;
        }
        Ok(())
    }

    /// Posts the Writes set up in the buffer, if any, then a Send of its
    /// first `len` bytes (With Invalidate of `invalidate` if given), in
    /// one call. The Writes' contexts and pages, and the buffer, are
    /// released when the Send completes.
    pub(super) fn post(mut self, len: usize, invalidate: Option<u32>) -> Result {
        let conn = self.conn;
        let ep = conn.ep().ok_or(ENOTCONN)?;
        let mut buf = self.buf.take().ok_or(EINVAL)?;
        let writes = buf.writes();
        if writes.wrs_left() > self.wrs {
            self.buf = Some(buf);
            return Err(EINVAL);
        }
        let has_writes = !writes.is_empty();
        let small = self.wrs <= 1 && writes.pages().len() <= LAZY_WRITE_PAGES;
        buf.state().room = self.wrs;
        let waiters = conn.sq_waiters.load(Relaxed);
        // Nothing more to answer (this Call is the only one nfsd holds,
        // and none waits): a Send that pins pages until a later signalled
        // one would keep them for as long as the client stays idle. Asked
        // only of the Sends it decides for, those with a small Write; and
        // of XPT_DATA, clear only while no Call waits (`queue` sets it
        // under the lock `recvfrom` clears it under), rather than under
        // that lock: a Reply took it once more than svcrdma's.
        let idle = has_writes
            && small
            && conn.in_nfsd.load(Relaxed) <= 1
            && !conn.xprt.test(crate::sunrpc::XptFlag::Data);
        // A Send completes, and gives its buffer back, only when signalled
        // or failed; a signalled one also gives back those posted before
        // it. Signalled: every `signal_every`-th, which spares most Replies
        // a completion to handle (svcrdma signals each), those that carry
        // more than one Write or a few pages (a large READ's pages go back
        // as soon as the client has the data; a 4 KiB READ's two may wait
        // for the next signalled Send, unless nothing else is coming), and
        // any while a thread waits for room.
        let signal = |unsignalled: u32| {
            (has_writes && (!small || idle)) || unsignalled + 1 >= conn.signal_every || waiters != 0
        };
        let cid = buf.idx();
        match ep.post_send(buf, len, invalidate, signal) {
            Ok(()) => {
                // One SGE: the Reply is copied into the Send buffer.
                trace::svcrdma_post_send(|| ep.cq_ids().0, cid, 1, invalidate.unwrap_or(0));
                // The completion gives back the buffer and the room.
                self.wrs = 0;
                Ok(())
            }
            Err(PostError::NotPosted(e, mut buf)) => {
                trace::svcrdma_sq_post_err(|| conn.sq_view(cid as i32), e);
                buf.state().room = 0;
                self.buf = Some(buf);
                Err(e)
            }
            Err(PostError::Lost(e)) => {
                trace::svcrdma_sq_post_err(|| conn.sq_view(cid as i32), e);
                // Some Writes may be posted: buffer and room stay taken
                // until the connection goes.
                self.wrs = 0;
                conn.close();
                Err(e)
            }
        }
    }
}

impl Drop for SendSlot<'_> {
    fn drop(&mut self) {
        // Once posted, the completion gives the buffer back.
        if let Some(mut buf) = self.buf.take() {
            // Released before the Send Queue lock is taken.
            buf.writes().release();
            // Nothing of it was posted, for the trace events either.
            buf.state().chunks = trace::Chunks::default();
            self.conn
                .give_back(core::iter::once((buf.park(), self.wrs)));
        }
    }
}

impl SvcConn {
    /// Builds and accepts the connection `req` asks for, on behalf of a
    /// listener of `serv` in `net`, from an nfsd thread (`xpo_accept`):
    /// returns it ready for nfsd, or `None` when it could not be accepted.
    pub(super) fn accept(req: PendingConn, serv: Serv, net: Net) -> Option<Pin<KBox<Self>>> {
        let cfg = SvcConfig::from_params();
        let ours = InlineThresholds {
            send: cfg.inline,
            recv: cfg.inline,
        };
        let peer = pvt::negotiate(ours, req.private());
        // Traced where it failed, as rpcrdma.ko: once, not as `qp` too.
        let mut pd_failed = false;
        let setup = (|| -> Result<_> {
            let dev = req.device()?;
            let pd = Pd::new(&dev).inspect_err(|e| {
                trace::svcrdma_accept_err(trace::AcceptErr::Pd, req.dst_addr(), *e);
                pd_failed = true;
            })?;
            let nsend = send_count(&cfg);
            let lazy = lazy_room(nsend);
            let rw = rw_wrs(&dev, req.port_num(), nsend + lazy);
            let (ep, sizes, sends) = Endpoint::new(
                &dev,
                pd,
                EpSizes {
                    recvs: recv_count(&cfg),
                    recv_len: cfg.inline as usize,
                    sends: nsend,
                    // The negotiated size is already within ours
                    // (`pvt::negotiate`); a Call in either version may
                    // come, and version 2's is the larger.
                    send_len: peer.inline_v2.send as usize,
                    send_extra: lazy,
                    rw_ctxs: rw,
                    send_sge: send_sges(&dev),
                },
            )?;
            let nrecv = sizes.recvs as usize;
            // Fewer Receives than asked for (a small device): grant fewer
            // credits, as svcrdma lowers its own.
            let mut cfg = cfg;
            cfg.credits = cfg
                .credits
                .min((sizes.recvs.saturating_sub(RECV_BATCH as u32 + BC_SLOTS)) / 2)
                .max(1);
            let swi = dev.can_send_with_inv();
            let counters = Arc::new(ConnStats::new(), GFP_KERNEL)?;
            let conn = new_object(
                try_pin_init!(Self {
                    xprt: SvcXprt::new(),
                    ep: SetOnce::new(),
                    cfg,
                    ready <- new_spinlock!(
                        Incoming {
                            received: Ring::new(nrecv)?,
                            pulled: Ring::new(nrecv)?,
                            established: false,
                        },
                        "rpcrdma_rs_svc_ready"
                    ),
                    sq <- new_spinlock!(
                        SqState {
                            free: sends,
                            room: sizes.sends + lazy + rw,
                            closed: false,
                        },
                        "rpcrdma_rs_svc_sq"
                    ),
                    sq_cv <- new_condvar!("rpcrdma_rs_svc_sq"),
                    sq_waiters: Atomic::new(0),
                    sq_depth: sizes.sends + lazy + rw,
                    reposts <- new_spinlock!(
                        [const { None }; RECV_BATCH],
                        "rpcrdma_rs_svc_reposts"
                    ),
                    signal_every: lazy,
                    rw_room: rw,
                    in_nfsd: Atomic::new(0),
                    inline: peer,
                    remote_inv: responder::remote_invalidation(peer.peer_remote_invalidate, swi),
                    debug: SetOnce::new(),
                    stats: counters.clone(),
                    farewell: Farewell {
                        stats: counters,
                        accepted: Atomic::new(false),
                    },
                }? Error),
                serv,
                net,
                false,
            )?;
            // Cannot fail: set only here.
            let _ = conn.ep.populate(ep);
            Ok((conn, swi))
        })();
        let (conn, swi) = match setup {
            Ok(parts) => parts,
            Err(e) => {
                if !pd_failed {
                    trace::svcrdma_accept_err(trace::AcceptErr::Qp, req.dst_addr(), e);
                }
                rwarn!("server: cannot set up a connection: {:?}\n", e);
                return None;
            }
        };
        let msg = PrivateData {
            remote_invalidate: swi,
            send_size: conn.cfg.inline,
            recv_size: conn.cfg.inline,
        }
        .encode();
        // We issue RDMA Reads: as many at once as the client takes, and
        // the device allows us to issue. svcrdma refuses a client that
        // takes none.
        let dev_depth = conn.ep().map_or(0, |ep| ep.device().max_qp_init_rd_atom());
        let depth = req.initiator_depth().min(dev_depth.min(255) as u8);
        if depth == 0 {
            trace::svcrdma_accept_err(trace::AcceptErr::InitDepth, req.dst_addr(), EINVAL);
            rwarn!("server: client accepts no RDMA Reads; refused\n");
            crate::sunrpc::discard(conn);
            return None;
        }
        // No RNR retries for the client's QP, as svcrdma: a Send that finds
        // no Receive is a flow-control fault, which must end the
        // connection (the client reconnects) rather than stall it.
        let mut param = ConnParam::new(&msg, 0, depth, 7, 0);
        if let Err(e) = Endpoint::accept(conn.as_ref(), req, &mut param) {
            if let Some(id) = conn.id() {
                trace::svcrdma_accept_err(trace::AcceptErr::Accept, id.dst_addr(), e);
            }
            rdebug!("server: accept failed: {:?}\n", e);
            TOTALS.accept_failed.inc();
            crate::sunrpc::discard(conn);
            return None;
        }
        if let Some(id) = conn.id() {
            conn.xprt.set_local_addr(id.src_addr());
            conn.xprt.set_remote_addr(id.dst_addr());
        }
        conn.farewell.accepted.store(true, Relaxed);
        let seq = TOTALS.accepted.inc();
        conn.publish_counters(seq);
        rdebug!(
            "server: connection accepted, credits {}, inline send {} (version 2: {}), remote invalidation {}\n",
            conn.cfg.credits,
            conn.inline.inline.send,
            conn.inline.inline_v2.send,
            conn.remote_inv
        );
        Some(conn)
    }

    /// `/sys/kernel/debug/rpcrdma_rs_server/<peer>-<seq>/`.
    fn publish_counters(&self, seq: u64) {
        let Ok(name) = CString::try_from_fmt(fmt!(
            "{}-{}",
            self.xprt.remote().to_str().unwrap_or("peer"),
            seq
        )) else {
            return;
        };
        let dir = super::SERVER_DIR.counters(&name, self.stats.clone(), &ConnStats::FILES);
        if let Some(dir) = dir {
            let _ = self.debug.populate(dir);
        }
    }

    pub(super) fn ep(&self) -> Option<&Endpoint<SvcConn>> {
        self.ep.as_ref()
    }

    pub(super) fn id(&self) -> Option<&crate::rdma::CmId<SvcConn>> {
        self.ep()?.id()
    }

    /// Queues a received buffer for an nfsd thread: a new Call, or one
    /// whose Reads are done (`pulled`).
    fn queue(&self, p: Parked<RecvKind>, pulled: bool) {
        let established = {
            let mut ready = self.ready.lock();
            if pulled {
                ready.pulled.push(p);
            } else {
                ready.received.push(p);
            }
            // Set under the lock that `recvfrom` clears it under, so a
            // buffer is never left queued with XPT_DATA clear.
            self.xprt.set(crate::sunrpc::XptFlag::Data);
            ready.established
        };
        // Before ESTABLISHED the QP cannot Send a reply yet; the CM
        // handler enqueues the transport then.
        if established {
            self.xprt.enqueue();
        }
    }

    /// Gives a Receive buffer back to the device, with the batch it
    /// completes: its Call was answered, dropped or refused.
    pub(super) fn repost(&self, buf: RecvBuf<'_, SvcConn>) {
        let Some(ep) = self.ep() else {
            return;
        };
        if self.xprt.is_dead() {
            // Stays with the endpoint until the connection goes.
            return;
        }
        let batch = {
            let mut pending = self.reposts.lock();
            let Some(free) = pending.iter_mut().find(|p| p.is_none()) else {
                // Cannot happen: a full batch is taken at once below.
                return;
            };
            *free = Some(buf.park());
            if pending.iter().any(Option::is_none) {
                return;
            }
            core::mem::replace(&mut *pending, [const { None }; RECV_BATCH])
        };
        let res = ep.post_recvs(batch.into_iter().flatten().filter_map(|p| {
            let buf = ep.recv(p)?;
            trace::svcrdma_post_recv(|| ep.cq_ids().1, buf.idx());
            Some(buf)
        }));
        if let Err(e) = res {
            trace::svcrdma_rq_post_err(self.xprt.remote(), e);
            rdebug!("server: cannot repost Receives: {:?}\n", e);
            self.close();
        }
    }

    /// Takes a Send buffer and room for its Send, waiting for them if
    /// need be; fails once the connection closes.
    pub(super) fn get_send(&self) -> Result<SendSlot<'_>> {
        let ep = self.ep().ok_or(ENOTCONN)?;
        let mut sq = self.sq.lock();
        let mut waited = false;
        let p = loop {
            if sq.closed {
                return Err(ENOTCONN);
            }
            if sq.room >= 1 {
                if let Some(p) = sq.free.pop() {
                    sq.room -= 1;
                    break p;
                }
            }
            if !waited {
                // Once per wait, as svcrdma's rdma_stat_sq_starve.
                SvcStat::SQ_STARVE.inc();
                // No Send buffer yet: no cid.
                trace::svcrdma_sq_wait(false, || self.sq_at(-1, sq.room));
            }
            waited = true;
            self.wait_room(&mut sq);
        };
        let room = sq.room;
        drop(sq);
        if waited {
            self.waited();
        }
        let buf = ep.send(p).ok_or(EINVAL)?;
        if waited {
            trace::svcrdma_sq_wait(true, || self.sq_at(buf.idx() as i32, room));
        }
        Ok(SendSlot {
            conn: self,
            buf: Some(buf),
            wrs: 0,
        })
    }

    /// Takes room for `wrs` work requests (RDMA Reads or Writes) of buffer
    /// `cid` (for the trace events), waiting for it.
    pub(super) fn get_wrs(&self, wrs: u32, cid: u32) -> Result {
        if wrs > self.rw_room {
            return Err(E2BIG);
        }
        let mut sq = self.sq.lock();
        let mut waited = false;
        loop {
            if sq.closed {
                return Err(ENOTCONN);
            }
            if sq.room >= wrs {
                sq.room -= wrs;
                break;
            }
            if !waited {
                // Once per wait, as svcrdma's rdma_stat_sq_starve.
                SvcStat::SQ_STARVE.inc();
                trace::svcrdma_sq_wait(false, || self.sq_at(cid as i32, sq.room));
            }
            waited = true;
            self.wait_room(&mut sq);
        }
        let room = sq.room;
        drop(sq);
        if waited {
            trace::svcrdma_sq_wait(true, || self.sq_at(cid as i32, room));
            self.waited();
        }
        Ok(())
    }

    fn wait_room(
        &self,
        sq: &mut kernel::sync::lock::Guard<
            '_,
            SqState,
            kernel::sync::lock::spinlock::SpinLockBackend,
        >,
    ) {
        self.sq_waiters.fetch_add(1, Relaxed);
        self.sq_cv.wait(sq);
        self.sq_waiters.fetch_sub(1, Relaxed);
    }

    /// A thread got the room it waited for. While threads waited,
    /// `has_wspace` kept sunrpc from handing out queued Calls, and nothing
    /// else offers them again once the last waiter is through: do it here.
    fn waited(&self) {
        if self.sq_waiters.load(Relaxed) == 0 && self.xprt.test(crate::sunrpc::XptFlag::Data) {
            self.xprt.enqueue();
        }
    }

    /// Gives back room for `wrs` work requests that completed.
    pub(super) fn put_wrs(&self, wrs: u32) {
        if wrs == 0 {
            return;
        }
        let mut sq = self.sq.lock();
        sq.room = sq.room.saturating_add(wrs);
        drop(sq);
        self.room_freed();
    }

    /// Wakes the threads waiting for room.
    /// Puts Send buffers, their Writes released, back on the free list,
    /// each with the Send Queue room of its Send and of the given count of
    /// Writes, and wakes the threads waiting for room.
    fn give_back(&self, bufs: impl Iterator<Item = (Parked<SendKind>, u32)>) {
        let mut wrs = 0u32;
        let mut sq = self.sq.lock();
        for (buf, writes) in bufs {
            wrs = wrs.saturating_add(1 + writes);
            // Room for every buffer was reserved at connect.
            let _ = sq.free.push_within_capacity(buf);
        }
        sq.room = sq.room.saturating_add(wrs);
        drop(sq);
        self.room_freed();
    }

    fn room_freed(&self) {
        if self.sq_waiters.load(Relaxed) != 0 {
            self.sq_cv.notify_all();
        }
    }

    /// The Send Queue for the trace events, `avail` entries free, for
    /// buffer `cid`.
    fn sq_at(&self, cid: i32, avail: u32) -> trace::Sq {
        trace::Sq {
            cq_id: self.ep().map_or(0, |ep| ep.cq_ids().0),
            cid,
            avail,
            depth: self.sq_depth,
        }
    }

    /// As [`Self::sq_at`], the Send Queue lock not held.
    pub(super) fn sq_view(&self, cid: i32) -> trace::Sq {
        let avail = self.sq.lock().room;
        self.sq_at(cid, avail)
    }

    /// `svcrdma_device_removal`: the connection's device goes away.
    fn trace_device_removal(&self) {
        if let Some(id) = self.id() {
            if let Ok(dev) = id.device() {
                trace::svcrdma_device_removal(dev.name(), id.dst_addr());
            }
        }
    }

    /// Whether no thread waits for Send Queue room.
    pub(super) fn has_wspace(&self) -> bool {
        self.sq_waiters.load(Relaxed) == 0
    }

    /// Marks the connection for closing by an nfsd thread, and wakes the
    /// threads waiting for Send Queue room so that they give up.
    pub(super) fn close(&self) {
        // Never from a handler once the endpoint shut down (none is
        // called then): the `svc_xprt` may have no reference left.
        self.xprt.deferred_close();
        self.wake_waiters();
    }

    /// Closes the connection at once, from rpciod (a backward Call that
    /// could not be sent).
    pub(super) fn close_now(&self) {
        self.wake_waiters();
        self.xprt.close();
    }

    /// `xpo_detach`: disconnect, and wake whoever waits.
    pub(super) fn detach(&self) {
        if let Some(id) = self.id() {
            id.disconnect();
        }
        self.wake_waiters();
    }

    fn wake_waiters(&self) {
        self.sq.lock().closed = true;
        self.sq_cv.notify_all();
    }

    /// Counts `n` in one of our counters and in the module's total.
    pub(super) fn count(&self, which: impl Fn(&ConnStats) -> &Counter, n: u64) {
        which(&self.stats).add(n);
        which(&TOTALS).add(n);
    }

    pub(super) fn xprt(&self) -> &SvcXprt {
        &self.xprt
    }
}

/// What a connection does last as it goes: counts it closed, if it was
/// accepted, and logs what it served. Its last field, so everything else
/// (the endpoint first, which drains the QP) is gone by then.
struct Farewell {
    stats: Arc<ConnStats>,
    accepted: Atomic<bool>,
}

impl Drop for Farewell {
    fn drop(&mut self) {
        if self.accepted.load(Relaxed) {
            TOTALS.closed.add(1);
        }
        let s = &self.stats;
        rdebug!(
            "server: connection freed: calls {} replies {} read segments {} write chunks {} reply chunks {} errors {} dropped {}\n",
            s.calls.get(),
            s.replies.get(),
            s.read_segments.get(),
            s.write_chunks.get(),
            s.reply_chunks.get(),
            s.errors_sent.get(),
            s.dropped.get()
        );
    }
}

/// Receive buffers: two per credit, as svcrdma posts (a Receive is
/// reposted only once its Call was answered and released, and the client
/// may send its next Call as soon as the Reply arrives), a batch more, and
/// one for each backward Call's Reply (RFC 8167: a Receive per backward
/// Call sent).
fn recv_count(cfg: &SvcConfig) -> u32 {
    cfg.credits
        .saturating_mul(2)
        .saturating_add(RECV_BATCH as u32 + BC_SLOTS)
}

/// Send buffers: Replies in flight at once. A Send completes once the
/// client's NIC acknowledged it, so a few dozen keep every nfsd thread
/// going.
fn send_count(cfg: &SvcConfig) -> u32 {
    cfg.credits.clamp(16, MAX_SENDS)
}

/// Sends in a row that may go unsignalled, fewer than the Send buffers;
/// also the Send Queue room kept for the Writes they carry, one each
/// ([`SendSlot::post`]), so that room for a waiting Reply never hangs on a
/// Send nobody signals.
fn lazy_room(nsend: u32) -> u32 {
    (nsend / 4).max(1)
}

/// Pages a Reply's one Write may hold past its Send's completion, until
/// a later signalled Send: a 4 KiB READ's head and data pages.
const LAZY_WRITE_PAGES: usize = 4;

/// Pages an RDMA Read or Write work request gathers or scatters: rdma_rw
/// takes the QP's `max_send_sge` (for Reads, no more than the device's
/// `max_sge_rd`), so the QP asks for up to this many. With one, every page
/// of a chunk was an RDMA Read of its own (a Read request and its
/// response on the wire, and at most `initiator_depth` of them in
/// flight): 1 MiB WRITEs ran at half rpcrdma.ko's speed. rpcrdma.ko's
/// server asks for 5 (3 plus its inline pages); 32 keeps the Send Queue's
/// entries small (rxe: 16 bytes per SGE each) and a 1 MiB chunk at 8
/// work requests.
const RW_SGES: u32 = 32;

/// SGEs of the QP's Send Queue entries.
fn send_sges(dev: &Device) -> u32 {
    RW_SGES.min(dev.max_send_sge()).max(1)
}

/// Send Queue room for RDMA Read and Write work requests: enough for
/// `RW_OPS` chunks of nfsd's largest payload (1 MiB) at once, beside
/// `others` entries (the Sends and the lazily retired Writes). It is also
/// the QP's rdma_rw contexts, so on iWARP the MRs the Reads register:
/// there a Read takes an MR per 256 pages and a Write a work request per
/// `send_sges` pages (siw: 344 rather than 2056 with its one-SGE Reads).
fn rw_wrs(dev: &Device, port: u32, others: u32) -> u32 {
    /// Largest chunks posted at once.
    const RW_OPS: u32 = 8;
    /// Pages of the largest chunk, one more when it starts mid-page.
    const CHUNK_PAGES: u32 = (1 << 20) / 4096 + 1;
    let sges = send_sges(dev);
    let writes = CHUNK_PAGES.div_ceil(sges);
    let reads = read_wrs(dev, port, CHUNK_PAGES, sges);
    let wrs = RW_OPS.saturating_mul(writes.max(reads));
    wrs.min(dev.max_qp_wr().saturating_sub(others + 1))
}
