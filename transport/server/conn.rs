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

use core::cell::UnsafeCell;
use core::ptr::NonNull;

use kernel::prelude::*;
use kernel::str::CString;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};
use kernel::sync::{new_condvar, new_spinlock, CondVar, SetOnce, SpinLock};

use super::{Counter, SvcConfig, TOTALS};
use crate::proto::pvt::{self, InlineThresholds, PrivateData};
use crate::proto::responder::{Call, CallAt, MAX_PAYLOADS};
use crate::rdma::{
    CmEvent, CmHandler, CmId, ConnParam, ConnRequest, Cq, CqEntry, CqHandler, Device, DmaBuf,
    DmaDir, PageSeg, Pd, Qp, QpCaps, QpInit, RecvWr, RwCtx, RwSpares, Wc,
};
use crate::sunrpc::{new_object, DebugDir, Net, PageRefs, Serv, SvcObject, SvcXprt};
use crate::sys;

/// Per-connection counters, summed into [`TOTALS`] as they count.
pub(crate) struct ConnStats {
    /// Connections accepted and closed (totals only).
    pub(crate) accepted: Counter,
    pub(crate) closed: Counter,
    /// Calls received and handed to nfsd.
    pub(crate) calls: Counter,
    /// Replies sent.
    pub(crate) replies: Counter,
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
}

impl ConnStats {
    /// Shows the counters in `dir`.
    ///
    /// # Safety
    ///
    /// `self` must outlive `dir`.
    pub(crate) unsafe fn publish(&self, dir: &DebugDir) {
        let files: [(&CStr, &Counter); 15] = [
            (c"backchannel_calls", &self.bc_calls),
            (c"backchannel_replies", &self.bc_replies),
            (c"backchannel_failures", &self.bc_failures),
            (c"connections_accepted", &self.accepted),
            (c"connections_closed", &self.closed),
            (c"calls", &self.calls),
            (c"replies", &self.replies),
            (c"read_segments", &self.read_segments),
            (c"write_chunks", &self.write_chunks),
            (c"reply_chunks", &self.reply_chunks),
            (c"rdma_read_bytes", &self.read_bytes),
            (c"rdma_write_bytes", &self.write_bytes),
            (c"errors_sent", &self.errors_sent),
            (c"dropped", &self.dropped),
            (c"remote_invalidations", &self.remote_inv),
        ];
        for (name, counter) in files {
            // SAFETY: The counters outlive `dir` (caller).
            unsafe { dir.counter(name, counter.as_ptr()) };
        }
    }

    pub(crate) const fn new() -> Self {
        Self {
            accepted: Counter::new(),
            closed: Counter::new(),
            calls: Counter::new(),
            replies: Counter::new(),
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
        }
    }
}

/// How a context reaches the connection that owns it.
///
/// # Invariants
///
/// Points to a connection that outlives every context holding this: the
/// contexts live in the connection's [`Ep`], dropped after its QP was
/// drained.
#[derive(Clone, Copy)]
struct ConnRef(NonNull<SvcConn>);

// SAFETY: Only gives `&SvcConn`, which is `Sync`.
unsafe impl Send for ConnRef {}
// SAFETY: As above.
unsafe impl Sync for ConnRef {}

impl core::ops::Deref for ConnRef {
    type Target = SvcConn;

    fn deref(&self) -> &SvcConn {
        // SAFETY: Alive by the type invariant.
        unsafe { self.0.as_ref() }
    }
}

/// A Receive buffer and its work request, and the RDMA Reads of the Call
/// it holds.
///
/// # Invariants
///
/// `conn` is the connection owning the [`Ep`] this context lives in; it
/// outlives the context. The buffer belongs to the device while posted,
/// to the receive queue or an nfsd request while received, and is
/// reposted only by [`SvcConn::repost`]. `call` and `reads` are used
/// only by whoever holds the buffer: the nfsd thread that took it off the receive queue,
/// until it posts the Reads; after their completion queued the buffer
/// again, the thread that takes it off; or the connection's drop, after
/// the drain.
pub(super) struct RecvCtx {
    cqe: CqEntry<RecvCtx>,
    read_cqe: CqEntry<RecvCtx, READ_DONE>,
    wr: RecvWr,
    pub(super) buf: DmaBuf,
    conn: ConnRef,
    pub(super) idx: u32,
    /// Bytes received.
    pub(super) len: Atomic<u32>,
    /// The result payloads nfsd reported for the Call in this buffer, in
    /// order: offset << 32 | length each, [`NO_PAYLOAD`] for none.
    pub(super) payloads: [Atomic<u64>; MAX_PAYLOADS],
    /// Where the Call in the buffer lies, found when it arrived: its Read
    /// chunks and its Reply use it instead of decoding the header again.
    call: UnsafeCell<CallAt>,
    reads: UnsafeCell<CallReads>,
    /// Send Queue room the posted Reads took, given back when they
    /// complete.
    read_wrs: Atomic<u32>,
}

/// The RDMA Reads of a Call's chunks and the pages they fill, from the
/// post until an nfsd thread takes the Call on (or the connection is
/// freed): the thread that posted them does not wait.
pub(super) struct CallReads {
    /// Declared first: unmapped, which makes the data visible to the CPU,
    /// before the pages are put.
    pub(super) ctxs: KVec<RwCtx>,
    pub(super) pages: PageRefs,
    /// Memory of the contexts of earlier Calls.
    pub(super) spares: RwSpares,
    pub(super) segments: u64,
    pub(super) bytes: u64,
}

impl CallReads {
    /// Unmaps the pages, which makes the Reads' data visible to the CPU,
    /// and keeps the contexts' memory for the next Call.
    pub(super) fn unmap(&mut self) {
        self.spares.reclaim(&mut self.ctxs);
    }

    /// Unmaps and puts the pages.
    pub(super) fn release(&mut self) {
        self.unmap();
        self.pages.release();
    }
}

/// A slot of [`RecvCtx::payloads`] that holds none.
pub(super) const NO_PAYLOAD: u64 = u64::MAX;

/// The completion entry of a Call's last RDMA Read.
const READ_DONE: u64 = 1;

crate::impl_has_cq_entry!(RecvCtx, 0, cqe);
crate::impl_has_cq_entry!(RecvCtx, 1, read_cqe);

// SAFETY: Shared state is atomic; `conn` only gives `&SvcConn`, which is
// `Sync`; the buffer and `reads` are handed over by completion ordering
// and the receive queue's lock (type invariant).
unsafe impl Send for RecvCtx {}
// SAFETY: As above.
unsafe impl Sync for RecvCtx {}

impl RecvCtx {
    fn conn(&self) -> &SvcConn {
        &self.conn
    }

    /// The bytes the device received into the buffer.
    pub(super) fn received(&self) -> &[u8] {
        let len = (self.len.load(Relaxed) as usize).min(self.buf.len());
        &self.buf.as_slice()[..len]
    }

    /// The Call in the buffer, found again where [`RecvCtx::set_call`]
    /// recorded it, over the received bytes, which nobody wrote since they
    /// were checked; `None` if their length changed.
    ///
    /// # Safety
    ///
    /// The caller holds the buffer (type invariant).
    pub(super) unsafe fn call(&self) -> Option<Call<'_>> {
        // SAFETY: Nobody writes `call` while the caller holds the buffer
        // (type invariant).
        let at = unsafe { *self.call.get() };
        at.call(self.received())
    }

    /// Records where the Call in the buffer lies.
    ///
    /// # Safety
    ///
    /// The caller holds the buffer (type invariant).
    pub(super) unsafe fn set_call(&self, call: CallAt) {
        // SAFETY: Nobody else uses `call` while the caller holds the
        // buffer (type invariant).
        unsafe { *self.call.get() = call };
    }

    /// The Call's Reads.
    ///
    /// # Safety
    ///
    /// The caller holds the buffer (type invariant), and drops the
    /// reference before giving it up.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn reads(&self) -> &mut CallReads {
        // SAFETY: Nobody else uses `reads` while the caller holds the
        // buffer (type invariant).
        unsafe { &mut *self.reads.get() }
    }

    /// Posts the Reads in [`RecvCtx::reads`], which took `wrs` of the Send
    /// Queue's room. Their completion gives the room back and queues the
    /// buffer for an nfsd thread, which finds the pages filled.
    ///
    /// # Safety
    ///
    /// The caller holds the buffer, holds no reference from
    /// [`RecvCtx::reads`], and gives the buffer up: even when this fails
    /// (some Reads may be posted), it is the connection's to release.
    pub(super) unsafe fn post_reads(&self, wrs: u32) -> Result {
        self.read_wrs.store(wrs, Relaxed);
        // SAFETY: We hold the buffer (the caller's promise); the contexts
        // and this context stay until the completion ran or the QP was
        // drained: only the thread that takes the buffer off the queue
        // after the completion, or the connection's drop, touches them.
        let chain = unsafe { RwCtx::chain(&mut (*self.reads.get()).ctxs, &self.read_cqe) };
        let chain = chain.ok_or(EINVAL)?;
        // SAFETY: As above; no borrow of `reads` is held across the post.
        unsafe { chain.post() }
    }
}

impl CqHandler<READ_DONE> for RecvCtx {
    /// The Call's last RDMA Read completed, and every one before it.
    fn done(&self, wc: &Wc<'_>) {
        let conn = self.conn();
        conn.put_wrs(self.read_wrs.load(Relaxed));
        if !wc.ok() {
            // Flushed: the connection is already going, as with a flushed
            // Receive.
            if !wc.flushed() {
                rwarn!("server: RDMA Read failed, status {}\n", wc.status());
            }
            // The Reads and pages stay with the buffer until the
            // connection is freed.
            conn.close();
            return;
        }
        conn.queue(self.idx, true);
    }
}

impl CqHandler for RecvCtx {
    fn done(&self, wc: &Wc<'_>) {
        let conn = self.conn();
        if !wc.ok() {
            if !wc.flushed() {
                rwarn!("server: Receive failed, status {}\n", wc.status());
            }
            conn.close();
            return;
        }
        self.len.store(wc.byte_len() as u32, Relaxed);
        conn.queue(self.idx, false);
    }
}

/// A Send buffer, with what the RDMA Writes posted before its Send use.
///
/// # Invariants
///
/// As for [`RecvCtx`]; `buf` and `io` are only accessed by whoever took
/// the context off the free list (a [`SendSlot`]), until its Send is
/// posted, then, once it completed, by the completion handler that takes
/// it out of [`PostedSends`]: its own, or that of a Send posted after it.
pub(super) struct SendCtx {
    cqe: CqEntry<SendCtx>,
    buf: UnsafeCell<DmaBuf>,
    io: UnsafeCell<ReplyIo>,
    conn: ConnRef,
    idx: u32,
}

/// The RDMA Writes of a Reply (its Write and Reply chunks) and the pages
/// they read, held from the post until the Send that follows them
/// completes: the nfsd thread does not wait for them.
pub(super) struct ReplyIo {
    /// Declared first: unmapped before the pages are put.
    pub(super) writes: KVec<RwCtx>,
    pub(super) pages: PageRefs,
    /// Where the pieces of each Write's pages are gathered, kept for the
    /// next Reply so that a Reply with Writes allocates no list.
    pub(super) segs: KVec<PageSeg>,
    /// Memory of the Writes of earlier Replies, likewise.
    pub(super) spares: RwSpares,
    /// Send Queue room the slot reserved for the Writes, given back with
    /// the Send's when it completes.
    room: u32,
}

impl ReplyIo {
    fn new() -> Result<Self> {
        Ok(Self {
            writes: KVec::new(),
            pages: PageRefs::new(),
            segs: KVec::new(),
            spares: RwSpares::with_room(RW_SPARES)?,
            room: 0,
        })
    }

    /// Unmaps and releases everything; returns the room reserved for the
    /// Writes.
    fn release(&mut self) -> u32 {
        self.spares.reclaim(&mut self.writes);
        self.pages.release();
        core::mem::take(&mut self.room)
    }
}

crate::impl_has_cq_entry!(SendCtx, 0, cqe);

// SAFETY: `buf` and `io` have one user at a time (type invariant);
// `conn` only gives `&SvcConn`.
unsafe impl Send for SendCtx {}
// SAFETY: As above.
unsafe impl Sync for SendCtx {}

impl CqHandler for SendCtx {
    /// This Send completed, signalled or failed, and so did every Send
    /// posted before it.
    fn done(&self, wc: &Wc<'_>) {
        let conn = &self.conn;
        if !wc.ok() {
            if !wc.flushed() {
                rwarn!("server: Send failed, status {}\n", wc.status());
            }
            conn.close();
        }
        conn.retire_sends(self.idx);
    }
}

/// A Send buffer taken off the free list, with room reserved on the Send
/// Queue for its Send and `wrs` RDMA Writes. Back on the list when
/// dropped unposted.
pub(super) struct SendSlot<'a> {
    ctx: &'a SendCtx,
    wrs: u32,
    posted: bool,
}

impl<'a> SendSlot<'a> {
    /// The buffer, ours until posted.
    pub(super) fn buf(&mut self) -> &mut DmaBuf {
        // SAFETY: Taken off the free list, so ours alone (type invariant
        // of `SendCtx`); `&mut self` makes the borrow unique.
        unsafe { &mut *self.ctx.buf.get() }
    }

    /// What the Writes posted with the Send hold, ours until posted.
    pub(super) fn io(&mut self) -> &mut ReplyIo {
        // SAFETY: As for `buf`.
        unsafe { &mut *self.ctx.io.get() }
    }

    /// Takes Send Queue room for the Writes in [`SendSlot::io`], waiting
    /// for it. The Writes are built in the slot, so its buffer is held
    /// while this waits, which starves nobody: a waiting thread holds the
    /// room of one Send, and there are no more of them than Send buffers;
    /// the rest, `rw_room` (what the largest Reply's Writes need), is
    /// held only by posted work requests, which complete. The one Write
    /// each unsignalled Send may carry comes out of room of its own
    /// ([`lazy_room`]).
    pub(super) fn reserve_writes(&mut self) -> Result {
        let wrs = RwCtx::total_wrs(&self.io().writes);
        let more = wrs.saturating_sub(self.wrs);
        if more > 0 {
            self.conn().get_wrs(more)?;
            self.wrs += more;
        }
        Ok(())
    }

    /// Posts the Writes in [`SendSlot::io`], if any, then a Send of the
    /// first `len` bytes (With Invalidate of `invalidate` if given), in one
    /// call. The Writes' contexts and pages, and the buffer, are released
    /// when the Send completes.
    pub(super) fn post(mut self, len: usize, invalidate: Option<u32>) -> Result {
        let conn = self.conn();
        let qp = conn.qp().ok_or(ENOTCONN)?;
        if RwCtx::total_wrs(&self.io().writes) > self.wrs {
            return Err(EINVAL);
        }
        let lkey = conn.lkey;
        let buf = self.buf();
        buf.sync_for_device(len);
        let mut sge = [buf.sge(0, len, lkey)];
        let (writes, has_writes, small): (*mut [RwCtx], bool, bool) = {
            // SAFETY: We own the context until the Send completes (type
            // invariant of `SendCtx`); the borrow ends before the post.
            let io = unsafe { &mut *self.ctx.io.get() };
            io.room = self.wrs;
            (
                io.writes.as_mut_slice(),
                !io.writes.is_empty(),
                self.wrs <= 1 && io.pages.len() <= LAZY_WRITE_PAGES,
            )
        };
        // A Send alone that fails is not posted: its buffer goes back.
        self.posted = has_writes;
        // Held across the post: `order` is the order the QP took them in.
        let mut posted = conn.posted.lock();
        // A Send completes, and gives its buffer back, only when signalled
        // or failed; a signalled one also gives back those posted before
        // it. Signalled: every `signal_every`-th, which spares most Replies
        // a completion to handle (svcrdma signals each), those that carry
        // more than one Write or a few pages (a large READ's pages go back
        // as soon as the client has the data; a 4 KiB READ's two may wait
        // for the next signalled Send), and any while a thread waits for
        // room.
        let signalled = (has_writes && !small)
            || posted.unsignalled + 1 >= conn.signal_every
            || conn.sq_waiters.load(Relaxed) != 0;
        // SAFETY: The context, `conn` which owns it, and its Writes live
        // until the QP is drained; nothing touches them, the buffer or
        // the pages until the completion of this Send or of a later one
        // releases them (`retire_sends`). On failure some Writes may be
        // posted: the context stays off the free list, and its Writes are
        // released when the connection is freed, after the drain.
        let res = unsafe {
            qp.post_send_after_rw(
                self.ctx.cqe.as_ptr(),
                &mut sge,
                writes,
                invalidate,
                signalled,
            )
        };
        if res.is_ok() {
            posted.order.push(self.ctx.idx);
            posted.unsignalled = if signalled { 0 } else { posted.unsignalled + 1 };
            self.posted = true;
        }
        res
    }

    fn conn(&self) -> &'a SvcConn {
        &self.ctx.conn
    }
}

impl Drop for SendSlot<'_> {
    fn drop(&mut self) {
        // Once posted, the completion gives the buffer back.
        if !self.posted {
            // SAFETY: Ours until back on the free list (type invariant of
            // `SendCtx`), and nothing was posted.
            let _ = unsafe { (*self.ctx.io.get()).release() };
            self.conn().put_send(self.ctx.idx, 1 + self.wrs);
        }
    }
}

/// Free Send buffers and Send Queue room.
pub(super) struct SqState {
    free: KVec<u32>,
    /// Work requests that may still be posted.
    room: u32,
    /// Closing: nobody may wait any more.
    closed: bool,
}

/// Sends on the Send Queue whose buffers have not come back, in the
/// order they were posted: the Send Queue completes in that order.
pub(super) struct PostedSends {
    order: BufRing,
    /// Sends posted unsignalled since the last signalled one.
    unsignalled: u32,
}

/// Receive buffers given back by their requests, posted again together:
/// one post per [`RECV_BATCH`] Calls rather than one each (svcrdma posts
/// in batches too).
pub(super) struct RepostBatch {
    idxs: [u32; RECV_BATCH],
    len: usize,
}

/// Receives posted again at once. Those waiting for their batch come out
/// of the slack of [`recv_count`]: the client never finds fewer posted
/// than its credits.
const RECV_BATCH: usize = 8;

/// The buffers of a connection, built once the connection is at its final
/// address.
pub(super) struct Ep {
    pub(super) recvs: KVec<RecvCtx>,
    sends: KVec<SendCtx>,
}

/// A client connection.
///
/// # Invariants
///
/// `xprt` comes first (`repr(C)`, [`SvcObject`]). `id` is set once the
/// request was accepted, `ep` before that; the contexts of `ep` only run
/// while the QP exists, which [`PinnedDrop`] drains before anything is
/// freed. `ep` is declared before `id`, so the buffers are unmapped while
/// the id still holds the device ([`DmaBuf`]'s invariant).
#[repr(C)]
#[pin_data(PinnedDrop)]
pub(crate) struct SvcConn {
    xprt: SvcXprt,
    pub(super) cfg: SvcConfig,
    ep: SetOnce<Ep>,
    id: SetOnce<CmId<SvcConn>>,
    dev: Device,
    lkey: u32,
    qp: Atomic<*mut sys::ib_qp>,
    /// Receive buffers waiting for an nfsd thread.
    #[pin]
    pub(super) ready: SpinLock<Incoming>,
    #[pin]
    sq: SpinLock<SqState>,
    #[pin]
    sq_cv: CondVar,
    sq_waiters: Atomic<u32>,
    #[pin]
    posted: SpinLock<PostedSends>,
    /// Receive buffers released and not yet posted again.
    #[pin]
    reposts: SpinLock<RepostBatch>,
    /// At most this many Sends in a row go unsignalled; fewer than the
    /// Send buffers, so that those they hold never starve a Reply.
    signal_every: u32,
    /// Send Queue room for RDMA Reads and Writes.
    rw_room: u32,
    established: Atomic<bool>,
    /// Being freed: the flushes of the drain must not touch the
    /// `svc_xprt`, whose last reference is gone.
    freeing: Atomic<bool>,
    /// Largest Send: the smaller of the client's receive size (RFC 8797)
    /// and ours; the size of our Send buffers.
    pub(super) inline_send: u32,
    /// The client accepts Send With Invalidate.
    pub(super) remote_inv: bool,
    /// This connection's counters in debugfs; declared (so dropped)
    /// before the counters.
    debug: SetOnce<DebugDir>,
    pub(super) stats: ConnStats,
}

// SAFETY: `SvcConn` is `repr(C)` with its `SvcXprt` first.
unsafe impl SvcObject for SvcConn {
    fn xprt(&self) -> &SvcXprt {
        &self.xprt
    }
}

// SAFETY: Raw pointers are to the QP (used from any thread) and to
// contexts; everything mutable is atomic or locked.
unsafe impl Send for SvcConn {}
// SAFETY: As above.
unsafe impl Sync for SvcConn {}

/// A ring of buffer numbers, as long as the number of buffers.
pub(super) struct BufRing {
    ring: KVec<u32>,
    head: usize,
    len: usize,
}

impl BufRing {
    fn new(cap: usize) -> Result<Self> {
        Ok(Self {
            ring: KVec::from_elem(0, cap, GFP_KERNEL)?,
            head: 0,
            len: 0,
        })
    }

    fn push(&mut self, idx: u32) {
        let cap = self.ring.len();
        // A buffer is queued at most once, so there is always room.
        if self.len < cap {
            self.ring[(self.head + self.len) % cap] = idx;
            self.len += 1;
        }
    }

    fn pop(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let idx = self.ring[self.head];
        self.head = (self.head + 1) % self.ring.len();
        self.len -= 1;
        Some(idx)
    }

    fn contains(&self, idx: u32) -> bool {
        let cap = self.ring.len();
        (0..self.len).any(|i| self.ring[(self.head + i) % cap] == idx)
    }
}

/// The Receive buffers waiting for an nfsd thread: new Calls, and Calls
/// whose Read chunks have arrived.
pub(super) struct Incoming {
    received: BufRing,
    pulled: BufRing,
}

impl Incoming {
    fn new(cap: usize) -> Result<Self> {
        Ok(Self {
            received: BufRing::new(cap)?,
            pulled: BufRing::new(cap)?,
        })
    }

    pub(super) fn is_empty(&self) -> bool {
        self.received.len == 0 && self.pulled.len == 0
    }

    /// The next buffer, and whether its Reads are done: those first, as
    /// svcrdma takes them, since they arrived before anything queued.
    pub(super) fn pop(&mut self) -> Option<(u32, bool)> {
        if let Some(idx) = self.pulled.pop() {
            return Some((idx, true));
        }
        self.received.pop().map(|idx| (idx, false))
    }
}

impl CmHandler for SvcConn {
    fn event(&self, event: CmEvent) {
        match event {
            CmEvent::Established { .. } => {
                self.established.store(true, Release);
                self.xprt.enqueue();
            }
            CmEvent::Disconnected | CmEvent::DeviceRemoval => {
                rdebug!("server: connection lost ({:?})\n", event);
                self.close();
            }
            CmEvent::Other(_) | CmEvent::AddrChange => {}
            _ => self.close(),
        }
    }
}

impl SvcConn {
    /// Builds and accepts the connection `req` asks for, on behalf of a
    /// listener of `serv` in `net`: returns it ready for nfsd, or `None`
    /// when it was rejected.
    pub(super) fn accept(req: ConnRequest<'_>, serv: Serv, net: Net) -> Option<Pin<KBox<Self>>> {
        let cfg = SvcConfig::from_params();
        let ours = InlineThresholds {
            send: cfg.inline,
            recv: cfg.inline,
        };
        let peer = pvt::negotiate(ours, req.private());
        let setup = (|| -> Result<_> {
            let dev = req.device()?;
            let pd = Pd::new(&dev)?;
            let nrecv = recv_count(&cfg);
            let nsend = send_count(&cfg);
            let lazy = lazy_room(nsend);
            let rw = rw_wrs(&dev, nsend + lazy);
            let lkey = pd.local_dma_lkey();
            // Every work request completes when the QP is flushed.
            let send_cq = Cq::new(&dev, (nsend + 1 + lazy + rw).min(dev.max_cqe()))?;
            let recv_cq = Cq::new(&dev, nrecv.min(dev.max_cqe()))?;
            let conn = new_object(
                try_pin_init!(Self {
                    xprt: SvcXprt::new(),
                    cfg,
                    id: SetOnce::new(),
                    ep: SetOnce::new(),
                    dev,
                    lkey,
                    qp: Atomic::new(core::ptr::null_mut()),
                    ready <- new_spinlock!(Incoming::new(nrecv as usize)?, "rpcrdma_rs_svc_ready"),
                    sq <- new_spinlock!(
                        SqState {
                            free: KVec::with_capacity(nsend as usize, GFP_KERNEL)?,
                            room: nsend + lazy + rw,
                            closed: false,
                        },
                        "rpcrdma_rs_svc_sq"
                    ),
                    sq_cv <- new_condvar!("rpcrdma_rs_svc_sq"),
                    sq_waiters: Atomic::new(0),
                    posted <- new_spinlock!(
                        PostedSends {
                            order: BufRing::new(nsend as usize)?,
                            unsignalled: 0,
                        },
                        "rpcrdma_rs_svc_posted"
                    ),
                    signal_every: lazy,
                    reposts <- new_spinlock!(
                        RepostBatch {
                            idxs: [0; RECV_BATCH],
                            len: 0,
                        },
                        "rpcrdma_rs_svc_reposts"
                    ),
                    rw_room: rw,
                    established: Atomic::new(false),
                    freeing: Atomic::new(false),
                    inline_send: peer.inline.send,
                    remote_inv: peer.peer_remote_invalidate,
                    debug: SetOnce::new(),
                    stats: ConnStats::new(),
                }? Error),
                serv,
                net,
                false,
            )?;
            Ok((conn, pd, send_cq, recv_cq, nrecv, nsend, lazy, rw))
        })();
        let (conn, pd, send_cq, recv_cq, nrecv, nsend, lazy, rw) = match setup {
            Ok(parts) => parts,
            Err(e) => {
                rwarn!("server: cannot set up a connection: {:?}\n", e);
                return None;
            }
        };
        if let Err(e) = conn.build_ep(nrecv, nsend) {
            rwarn!("server: no memory for connection buffers: {:?}\n", e);
            crate::sunrpc::discard(conn);
            return None;
        }
        let caps = QpCaps {
            send_wr: nsend + 1 + lazy,
            recv_wr: nrecv,
            send_sge: send_sges(&conn.dev),
            rdma_ctxs: rw,
        };
        let msg = PrivateData {
            remote_invalidate: false,
            send_size: conn.cfg.inline,
            recv_size: conn.cfg.inline,
        }
        .encode();
        // We issue RDMA Reads: as many at once as the client takes, and
        // the device allows. svcrdma refuses a client that takes none.
        let depth = req
            .initiator_depth()
            .min(conn.dev.max_qp_rd_atom().min(255) as u8);
        if depth == 0 {
            rwarn!("server: client accepts no RDMA Reads; refused\n");
            crate::sunrpc::discard(conn);
            return None;
        }
        let mut param = ConnParam::new(&msg, 0, depth, 7, 7);
        // SAFETY: The handler is the connection, which owns the id and so
        // outlives it; the id is stored in the connection and not dropped
        // in this callback (only in `xpo_free`, or by `discard` below,
        // which runs when `accept` failed and rdma_cm destroys the child).
        let id = unsafe {
            let qp = QpInit {
                pd: &pd,
                send_cq: &send_cq,
                recv_cq: &recv_cq,
                caps,
            };
            req.accept(&*conn, qp, &mut param, |qp| conn.post_all(qp))
        };
        let id = match id {
            Ok(id) => id,
            Err(e) => {
                rwarn!("server: accept failed: {:?}\n", e);
                crate::sunrpc::discard(conn);
                return None;
            }
        };
        let (src, dst) = id.addrs();
        // SAFETY: The id's addresses are valid socket addresses.
        unsafe {
            conn.xprt.set_local(src);
            conn.xprt.set_remote(dst);
        }
        // Cannot fail: set only here.
        let _ = conn.id.populate(id);
        let seq = TOTALS.accepted.inc();
        conn.publish_counters(seq);
        rdebug!(
            "server: connection accepted, credits {}, inline send {}, remote invalidation {}\n",
            conn.cfg.credits,
            conn.inline_send,
            conn.remote_inv
        );
        Some(conn)
    }

    /// `/sys/kernel/debug/rpcrdma_rs_server/<peer>-<seq>/`.
    fn publish_counters(&self, seq: u64) {
        let Some(parent) = super::server_dir() else {
            return;
        };
        let Ok(name) = CString::try_from_fmt(fmt!(
            "{}-{}",
            self.xprt.remote().to_str().unwrap_or("peer"),
            seq
        )) else {
            return;
        };
        let dir = DebugDir::new(&name, Some(parent));
        // SAFETY: `stats` is declared after `debug`, so it outlives the
        // directory.
        unsafe { self.stats.publish(&dir) };
        let _ = self.debug.populate(dir);
    }

    fn build_ep(&self, nrecv: u32, nsend: u32) -> Result {
        // INVARIANT: the contexts go into `self.ep`.
        let this = ConnRef(NonNull::from(self));
        let mut recvs = KVec::with_capacity(nrecv as usize, GFP_KERNEL)?;
        for idx in 0..nrecv {
            let buf = DmaBuf::new(&self.dev, self.cfg.inline as usize, DmaDir::FromDevice)?;
            let wr = RecvWr::new(&buf, self.lkey);
            // INVARIANT: owned by this connection's `ep`.
            recvs.push(
                RecvCtx {
                    cqe: CqEntry::new(),
                    read_cqe: CqEntry::new(),
                    wr,
                    buf,
                    conn: this,
                    idx,
                    len: Atomic::new(0),
                    payloads: [const { Atomic::new(NO_PAYLOAD) }; MAX_PAYLOADS],
                    call: UnsafeCell::new(CallAt::default()),
                    reads: UnsafeCell::new(CallReads {
                        ctxs: KVec::new(),
                        pages: PageRefs::new(),
                        spares: RwSpares::with_room(RW_SPARES)?,
                        segments: 0,
                        bytes: 0,
                    }),
                    read_wrs: Atomic::new(0),
                },
                GFP_KERNEL,
            )?;
        }
        let mut sends = KVec::with_capacity(nsend as usize, GFP_KERNEL)?;
        // The negotiated size is already within ours (`pvt::negotiate`).
        let send_len = self.inline_send as usize;
        for idx in 0..nsend {
            let buf = DmaBuf::new(&self.dev, send_len, DmaDir::ToDevice)?;
            // INVARIANT: as above; on the free list below.
            sends.push(
                SendCtx {
                    cqe: CqEntry::new(),
                    buf: UnsafeCell::new(buf),
                    io: UnsafeCell::new(ReplyIo::new()?),
                    conn: this,
                    idx,
                },
                GFP_KERNEL,
            )?;
        }
        {
            let mut sq = self.sq.lock();
            for idx in 0..nsend {
                sq.free.push(idx, GFP_KERNEL)?;
            }
        }
        if !self.ep.populate(Ep { recvs, sends }) {
            return Err(EBUSY);
        }
        Ok(())
    }

    pub(super) fn ep(&self) -> Option<&Ep> {
        self.ep.as_ref()
    }

    pub(super) fn id(&self) -> Option<&CmId<SvcConn>> {
        self.id.as_ref()
    }

    pub(super) fn qp(&self) -> Option<Qp> {
        // SAFETY: Set before the first post, to the QP that lives until
        // the connection is dropped.
        unsafe { Qp::from_ptr(self.qp.load(Acquire)) }
    }

    /// Posts every Receive, before the connection is accepted.
    fn post_all(&self, qp: Qp) -> Result {
        self.qp.store(qp.as_ptr(), Release);
        let ep = self.ep().ok_or(ENOMEM)?;
        self.post_recvs(ep, 0..ep.recvs.len() as u32)
    }

    /// Posts Receive buffers `idxs` in one call.
    fn post_recvs(&self, ep: &Ep, idxs: impl DoubleEndedIterator<Item = u32>) -> Result {
        let qp = self.qp().ok_or(ENOTCONN)?;
        let mut first = core::ptr::null_mut();
        for idx in idxs.rev() {
            let ctx = ep.recvs.get(idx as usize).ok_or(EINVAL)?;
            for p in &ctx.payloads {
                p.store(NO_PAYLOAD, Relaxed);
            }
            // SAFETY: The buffer is ours (not posted, not held by a
            // request: the callers own it); the context stays at its
            // address, in `ep`, until the QP is drained.
            first = unsafe { ctx.wr.link(ctx.cqe.as_ptr(), first) };
        }
        if first.is_null() {
            return Ok(());
        }
        // SAFETY: As above, for each buffer of the chain just built.
        unsafe { qp.post_recv_chain(first) }
    }

    /// Queues buffer `idx` for an nfsd thread: a new Call, or one whose
    /// Reads are done (`pulled`).
    fn queue(&self, idx: u32, pulled: bool) {
        // Completions that ran before the drain's flush: nobody takes
        // the buffer any more, and the `svc_xprt` is gone.
        if self.freeing.load(Acquire) {
            return;
        }
        {
            let mut ready = self.ready.lock();
            if pulled {
                ready.pulled.push(idx);
            } else {
                ready.received.push(idx);
            }
            // Set under the lock that `recvfrom` clears it under, so a
            // buffer is never left queued with XPT_DATA clear.
            self.xprt.set(crate::sunrpc::XptFlag::Data);
        }
        // Before ESTABLISHED the QP cannot Send a reply yet; the CM
        // handler enqueues the transport then.
        if self.established.load(Acquire) {
            self.xprt.enqueue();
        }
    }

    /// Gives Receive buffer `idx` back to the device, with the batch it
    /// completes: its Call was answered, dropped or refused.
    pub(super) fn repost(&self, idx: u32) {
        let Some(ep) = self.ep() else {
            return;
        };
        if self.xprt.is_dead() {
            return;
        }
        let batch = {
            let mut pending = self.reposts.lock();
            let len = pending.len;
            let Some(slot) = pending.idxs.get_mut(len) else {
                return;
            };
            *slot = idx;
            pending.len += 1;
            if pending.len < RECV_BATCH {
                return;
            }
            pending.len = 0;
            pending.idxs
        };
        if let Err(e) = self.post_recvs(ep, batch.into_iter()) {
            rdebug!("server: cannot repost Receives: {:?}\n", e);
            self.close();
        }
    }

    /// Takes a Send buffer and room for its Send, waiting for them if
    /// need be; fails once the connection closes.
    pub(super) fn get_send(&self) -> Result<SendSlot<'_>> {
        let ep = self.ep().ok_or(ENOTCONN)?;
        let mut sq = self.sq.lock();
        loop {
            if sq.closed {
                return Err(ENOTCONN);
            }
            if sq.room >= 1 {
                if let Some(idx) = sq.free.pop() {
                    sq.room -= 1;
                    drop(sq);
                    let ctx = ep.sends.get(idx as usize).ok_or(EINVAL)?;
                    return Ok(SendSlot {
                        ctx,
                        wrs: 0,
                        posted: false,
                    });
                }
            }
            self.sq_waiters.fetch_add(1, Relaxed);
            self.sq_cv.wait(&mut sq);
            self.sq_waiters.fetch_sub(1, Relaxed);
        }
    }

    /// Takes room for `wrs` work requests (RDMA Reads or Writes), waiting
    /// for it.
    pub(super) fn get_wrs(&self, wrs: u32) -> Result {
        let mut sq = self.sq.lock();
        if wrs > self.rw_room {
            return Err(E2BIG);
        }
        loop {
            if sq.closed {
                return Err(ENOTCONN);
            }
            if sq.room >= wrs {
                sq.room -= wrs;
                return Ok(());
            }
            self.sq_waiters.fetch_add(1, Relaxed);
            self.sq_cv.wait(&mut sq);
            self.sq_waiters.fetch_sub(1, Relaxed);
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

    fn put_send(&self, idx: u32, wrs: u32) {
        self.put_sends(&[idx], wrs);
    }

    fn put_sends(&self, idxs: &[u32], wrs: u32) {
        let mut sq = self.sq.lock();
        for &idx in idxs {
            // Room for every buffer was reserved at connect.
            let _ = sq.free.push(idx, GFP_ATOMIC);
        }
        sq.room = sq.room.saturating_add(wrs);
        drop(sq);
        self.room_freed();
    }

    /// Send `last` completed: gives back its buffer and those of the
    /// Sends posted before it, with the Writes they carried.
    fn retire_sends(&self, last: u32) {
        let Some(ep) = self.ep() else {
            return;
        };
        let mut done = [0u32; MAX_SENDS as usize];
        let mut n = 0;
        {
            let mut posted = self.posted.lock();
            // Every posted Send is in `order` until it completes once.
            if !posted.order.contains(last) {
                rwarn!("server: completion of a Send not posted\n");
                return;
            }
            while let Some(idx) = posted.order.pop() {
                if let Some(slot) = done.get_mut(n) {
                    *slot = idx;
                    n += 1;
                }
                if idx == last {
                    break;
                }
            }
        }
        let mut wrs = 0;
        for &idx in &done[..n] {
            if let Some(ctx) = ep.sends.get(idx as usize) {
                // SAFETY: Its Send completed, since `last`, posted after
                // it, did: with every Write before it. The context is
                // ours until it is back on the free list (type invariant).
                wrs += 1 + unsafe { (*ctx.io.get()).release() };
            }
        }
        self.put_sends(&done[..n], wrs);
    }

    /// Wakes the threads waiting for room. While they waited,
    /// `has_wspace` kept sunrpc from handing out queued Calls: offer them
    /// again.
    fn room_freed(&self) {
        if self.sq_waiters.load(Relaxed) != 0 && !self.freeing.load(Acquire) {
            self.sq_cv.notify_all();
            self.xprt.enqueue();
        }
    }

    /// Whether no thread waits for Send Queue room.
    pub(super) fn has_wspace(&self) -> bool {
        self.sq_waiters.load(Relaxed) == 0
    }

    /// Marks the connection for closing by an nfsd thread, and wakes the
    /// threads waiting for Send Queue room so that they give up.
    pub(super) fn close(&self) {
        if self.freeing.load(Acquire) {
            return;
        }
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

#[pinned_drop]
impl PinnedDrop for SvcConn {
    fn drop(self: Pin<&mut Self>) {
        // Flush every posted work request and wait for its completion,
        // so that no handler runs once the contexts go. A connection that
        // sunrpc never took (`discard`) has no XPT_CLOSE set: without
        // `freeing`, its flushed Receives would enqueue a transport whose
        // last reference is gone.
        self.freeing.store(true, Release);
        if let Some(id) = self.id() {
            id.drain_qp();
        }
        if self.id().is_some() {
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
        // Fields drop next, in declaration order: the buffers (nothing
        // is posted any more) before the id, which destroys the QP, then
        // the CQs and the PD it holds, and lets go of the device. The
        // other way round, a device being removed could be freed before
        // the buffers are unmapped from it: its unregistration goes on
        // as soon as the last id is destroyed. svc_rdma_free frees its
        // contexts before rdma_destroy_id for the same reason.
    }
}

/// Receive buffers: two per credit, as svcrdma posts (a Receive is
/// reposted only once its Call was answered and released, and the client
/// may send its next Call as soon as the Reply arrives), and a batch more.
fn recv_count(cfg: &SvcConfig) -> u32 {
    cfg.credits
        .saturating_mul(2)
        .saturating_add(RECV_BATCH as u32)
}

/// Send buffers: Replies in flight at once. A Send completes once the
/// client's NIC acknowledged it, so a few dozen keep every nfsd thread
/// going.
fn send_count(cfg: &SvcConfig) -> u32 {
    cfg.credits.clamp(16, MAX_SENDS)
}

/// Most Send buffers of a connection.
const MAX_SENDS: u32 = 64;

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

/// rdma_rw contexts' memory kept per Send and Receive buffer: a READ's
/// payload or a Reply chunk takes one, a WRITE's data one, rarely more.
const RW_SPARES: usize = 2;

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
/// `others` entries (the Sends and the lazily retired Writes).
fn rw_wrs(dev: &Device, others: u32) -> u32 {
    /// Largest chunks posted at once.
    const RW_OPS: u32 = 8;
    /// Pages of the largest chunk, one more when it starts mid-page.
    const CHUNK_PAGES: u32 = (1 << 20) / 4096 + 1;
    let per_wr = send_sges(dev).min(dev.max_sge_rd()).max(1);
    let wrs = RW_OPS * CHUNK_PAGES.div_ceil(per_wr);
    wrs.min(dev.max_qp_wr().saturating_sub(others + 1))
}
