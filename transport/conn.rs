// SPDX-License-Identifier: GPL-2.0

//! One RDMA connection of a client transport: CM id, PD, CQs, QP, the
//! posted Receive buffers and the pool of Send buffers.
//!
//! A connection is built by the connect worker and torn down by `close` or
//! `destroy`, all of which run with `XPRT_LOCKED` held, so at most one
//! thread owns an [`Ep`]. Completion and CM handlers see only the parts
//! they need through shared references: [`Shared`], [`RecvCtx`] and
//! [`SendCtx`], whose mutable state is atomic or handed over by
//! completion ordering.

use core::cell::UnsafeCell;

use kernel::error::to_result;
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed, Release};
use kernel::sync::barrier::{smp_mb, Full as Barrier};
use kernel::sync::Arc;
use kernel::types::Opaque;

use super::{Config, RdmaXprt};
use crate::proto::plan::DeviceLimits;
use crate::proto::pvt::{self, InlineThresholds, PrivateData};
use crate::proto::queue::{self, SendSignals};
use crate::rdma::{
    CmEvent, CmHandler, CmId, ConnParam, Cq, CqEntry, CqHandler, DmaBuf, DmaDir, MappedPages, Mr,
    PageSeg, Pd, Qp, QpCaps, RecvWr, Registered, Wc, MAX_MAPPED_PAGES,
};
use crate::sys;

/// Receive buffers: one per credit we ask for, two for backward-direction
/// Calls (which we drop), a quarter more because a buffer is reposted only
/// after its Reply's RPC completed, and a new Call may go out (and its
/// Reply come back) in between, and one batch that waits to be reposted.
fn recvs(cfg: &Config) -> u32 {
    cfg.slots + cfg.slots / 4 + 2 + queue::recv_batch(cfg.slots)
}

/// Send buffers per connection. Sends complete in order on an RC QP, so
/// the pool is a ring; twice the slot count makes it run dry only when
/// Send completions lag a whole window behind.
fn sends(cfg: &Config) -> u32 {
    cfg.slots * 2
}

/// Most MRs one RPC holds: a Read, a Write and a Reply chunk of at most
/// `RPCRDMA_MAX_HDR_SEGS` segments each.
pub(crate) const MAX_RPC_MRS: usize = 48;

/// Unique number of each connection, so that a request can tell whether
/// the MRs it remembers belong to the current one.
static GENERATION: Atomic<u64> = Atomic::new(1);

/// `fault_inject` bit (`sys/helpers.c`): fail the MR pool allocation at
/// connect, after the QP exists.
const FAULT_MR_POOL: u32 = 1;

/// Whether the test fault `bit` is switched on.
fn injected(bit: u32) -> bool {
    // SAFETY: Reads a module parameter; no preconditions.
    unsafe { sys::rpcrdma_rs_fault(bit) }
}

/// Connection status values kept in [`Shared::status`].
const PENDING: i32 = 0;
const ESTABLISHED: i32 = 1;

/// What the CM and completion handlers share with the connection owner.
///
/// # Invariants
///
/// `xprt` is the transport that owns this connection; it outlives the
/// connection, which is torn down before the transport is freed.
pub(crate) struct Shared {
    xprt: *const RdmaXprt,
    done: Opaque<sys::completion>,
    /// Result of address or route resolution.
    async_rc: Atomic<i32>,
    /// [`PENDING`], [`ESTABLISHED`] or a negative errno.
    status: Atomic<i32>,
    /// The QP, once created; for reposting Receives.
    qp: Atomic<*mut sys::ib_qp>,
    lkey: Atomic<u32>,
    /// Set before the QP is drained: Receives are not reposted.
    draining: Atomic<bool>,
    /// Receive buffers done with and not yet reposted, and the batch
    /// size at which they go back.
    recv_idle: Atomic<u32>,
    recv_batch: u32,
    /// Held by whoever is reposting Receives.
    recv_posting: Atomic<bool>,
    /// Negotiated inline thresholds.
    inline_send: Atomic<u32>,
    inline_recv: Atomic<u32>,
    /// The MR pool, once allocated; freed after the CQs.
    pool: Atomic<*mut MrPool>,
    /// This connection's number (see [`GENERATION`]).
    pub(crate) gen: u64,
    /// Number of the last Send known complete (successfully or flushed):
    /// Sends complete in order, and most are unsignalled, so this moves
    /// in steps, at each signalled or failed Send.
    sends_done: Atomic<u64>,
    /// The Receive contexts (a vector that never changes once set), for
    /// the Send completion to find Replies waiting for it.
    rx: Atomic<*mut RecvCtx>,
    rx_len: Atomic<usize>,
    /// Replies waiting for their Call's Send to complete.
    waiters: Atomic<u32>,
    /// What we advertise in the private data.
    ours: InlineThresholds,
}

// SAFETY: All mutable state is atomic or a C completion, which is
// thread-safe; `xprt` is only used for `&RdmaXprt`, which is `Sync`.
unsafe impl Send for Shared {}
// SAFETY: See above.
unsafe impl Sync for Shared {}

impl Shared {
    fn new(xprt: &RdmaXprt, cfg: &Config) -> Result<KBox<Self>> {
        let shared = KBox::new(
            Self {
                xprt,
                done: Opaque::uninit(),
                async_rc: Atomic::new(0),
                status: Atomic::new(PENDING),
                qp: Atomic::new(core::ptr::null_mut()),
                lkey: Atomic::new(0),
                draining: Atomic::new(false),
                recv_idle: Atomic::new(0),
                recv_batch: queue::recv_batch(cfg.slots),
                recv_posting: Atomic::new(false),
                inline_send: Atomic::new(pvt::MIN_SIZE),
                inline_recv: Atomic::new(pvt::MIN_SIZE),
                pool: Atomic::new(core::ptr::null_mut()),
                gen: GENERATION.fetch_add(1, Relaxed),
                sends_done: Atomic::new(0),
                rx: Atomic::new(core::ptr::null_mut()),
                rx_len: Atomic::new(0),
                waiters: Atomic::new(0),
                ours: InlineThresholds {
                    send: cfg.inline_write,
                    recv: cfg.inline_read,
                },
            },
            GFP_KERNEL,
        )?;
        // SAFETY: `done` is valid memory inside a box that is never moved
        // out of, so the completion's wait list stays in place.
        unsafe { sys::rpcrdma_rs_init_completion(shared.done.get()) };
        Ok(shared)
    }

    pub(crate) fn xprt(&self) -> &RdmaXprt {
        // SAFETY: By the type invariant `xprt` outlives us.
        unsafe { &*self.xprt }
    }

    fn rearm(&self) {
        // SAFETY: `done` was initialised in `new`.
        unsafe { sys::rpcrdma_rs_reinit_completion(self.done.get()) };
    }

    fn wake(&self) {
        // SAFETY: `done` was initialised in `new`.
        unsafe { sys::rpcrdma_rs_complete(self.done.get()) };
    }

    /// Waits for the next wake-up, at most `timeout` jiffies.
    fn wait(&self, timeout: core::ffi::c_ulong) -> Result {
        // SAFETY: `done` was initialised in `new`.
        let rc = unsafe { sys::rpcrdma_rs_wait_completion(self.done.get(), timeout) };
        match rc {
            0 => Err(ETIMEDOUT),
            rc if rc < 0 => Err(EINTR),
            _ => Ok(()),
        }
    }

    /// Sends completed so far: on an RC QP they complete in order, so
    /// the Send numbered `n` (see [`Ep::next_send_seq`]) has completed
    /// when this is at least `n`.
    pub(crate) fn sends_completed(&self) -> u64 {
        self.sends_done.load(Acquire)
    }

    /// Holds the Reply in `ctx` until the Send numbered `seq` completed,
    /// like rpcrdma.ko's `reply_waits_for_send`: an RPC completes only
    /// after its Call's Send did. Returns false when the Send completed in
    /// the meantime and the caller is to go on with the Reply itself.
    ///
    /// This and [`Shared::sends_completed_to`] are the two sides of a
    /// store-buffering pattern: each stores its own word, then reads the
    /// other's. With a full barrier between the store and the load on both
    /// sides, the kernel memory model forbids both from reading the old
    /// value, so either this side sees the Send done, or the completion
    /// side sees the waiting Reply; the exchange on `wait_seq` then picks
    /// exactly one of them to finish it.
    pub(crate) fn defer_until_sent(&self, ctx: &RecvCtx, seq: u64, pending: Pending) -> bool {
        // SAFETY: The Receive completion owns `pending` (type invariant of
        // `RecvCtx`) until it publishes `wait_seq`.
        unsafe { *ctx.pending.get() = pending };
        self.waiters.fetch_add(1, Full);
        // Release: whoever reads `seq` here also sees `pending`.
        ctx.wait_seq.store(seq, Release);
        smp_mb(Barrier);
        if self.sends_done.load(Relaxed) >= seq && ctx.wait_seq.cmpxchg(seq, 0, Full).is_ok() {
            self.waiters.fetch_sub(1, Full);
            return false;
        }
        true
    }

    /// Records that every Send up to number `seq` completed (Sends
    /// complete in order), then finishes the Replies that waited for one
    /// of them; see [`Shared::defer_until_sent`] for the ordering.
    fn sends_completed_to(&self, seq: u64) {
        let mut done = self.sends_done.load(Relaxed);
        while done < seq {
            match self.sends_done.cmpxchg(done, seq, Full) {
                Ok(_) => break,
                Err(now) => done = now,
            }
        }
        smp_mb(Barrier);
        if self.waiters.load(Relaxed) == 0 {
            return;
        }
        let done = self.sends_done.load(Relaxed);
        for ctx in self.rx_contexts() {
            // Acquire: pairs with the release store of `wait_seq`.
            let w = ctx.wait_seq.load(Acquire);
            if w == 0 || w > done {
                continue;
            }
            if ctx.wait_seq.cmpxchg(w, 0, Full).is_ok() {
                self.waiters.fetch_sub(1, Full);
                // SAFETY: Winning the exchange hands us the pending Reply.
                let pending = unsafe { *ctx.pending.get() };
                self.xprt().finish_reply(self, ctx, pending, true);
                ctx.repost(self);
            }
        }
    }

    /// The connection's Receive contexts; empty before they exist and
    /// after teardown began.
    fn rx_contexts(&self) -> &[RecvCtx] {
        let rx = self.rx.load(Acquire);
        let n = self.rx_len.load(Acquire);
        if rx.is_null() {
            return &[];
        }
        // SAFETY: `rx` points to the connection's Receive contexts, a
        // vector that is never resized and is freed only after the CQs,
        // i.e. after every handler, and after `Ep::drop` cleared `rx`.
        unsafe { core::slice::from_raw_parts(rx.cast_const(), n) }
    }

    /// Hands the idle Receive buffers back to the device, in one chain
    /// per pass. Whoever finds another thread at it leaves the work to
    /// that thread, which looks again before it stops.
    fn post_idle_recvs(&self) -> Result {
        loop {
            if self.draining.load(Acquire) || self.recv_posting.xchg(true, Full) {
                return Ok(());
            }
            // SAFETY: The QP pointer is set before any Receive is posted
            // and the QP is destroyed only after draining, i.e. after every
            // completion handler returned.
            let qp = unsafe { Qp::from_ptr(self.qp.load(Acquire)) };
            let mut head = core::ptr::null_mut();
            let mut n = 0u32;
            // Stop at the buffers counted so far: one counted but not yet
            // marked is posted by its own thread or the next pass.
            let want = self.recv_idle.load(Acquire);
            for ctx in self.rx_contexts() {
                if n >= want {
                    break;
                }
                // A plain load first: most buffers are posted, and a
                // failing compare-exchange still costs a locked operation.
                if ctx.idle.load(Relaxed) && ctx.idle.cmpxchg(true, false, Full).is_ok() {
                    ctx.buf.sync_for_device(ctx.buf.len());
                    // SAFETY: Clearing `idle` made the buffer ours until it
                    // is posted; contexts never move.
                    head = unsafe { ctx.wr.link(ctx.cqe.as_ptr(), head) };
                    n += 1;
                }
            }
            self.recv_idle.fetch_sub(n, Full);
            let posted = match (qp, n) {
                (_, 0) => Ok(()),
                // SAFETY: A chain of Receives whose buffers and cqes live
                // until the QP is drained.
                (Some(qp), _) => unsafe { qp.post_recv_chain(head) },
                (None, _) => Err(ENOTCONN),
            };
            self.recv_posting.store(false, Release);
            posted?;
            // A buffer marked idle while we held `recv_posting` was left
            // to us (its thread saw the flag set): between our release of
            // the flag and our look at the count, and its increment of the
            // count and its look at the flag, one of us sees the other.
            smp_mb(Barrier);
            if n == 0 || self.recv_idle.load(Relaxed) < self.recv_batch {
                return Ok(());
            }
        }
    }

    /// The negotiated inline thresholds.
    pub(crate) fn inline(&self) -> InlineThresholds {
        InlineThresholds {
            send: self.inline_send.load(Acquire),
            recv: self.inline_recv.load(Acquire),
        }
    }
}

impl CmHandler for Shared {
    fn event(&self, event: CmEvent) {
        rdebug!("cm event {:?}\n", event);
        match event {
            CmEvent::AddrResolved | CmEvent::RouteResolved => {
                self.async_rc.store(0, Release);
                self.wake();
            }
            CmEvent::AddrError => {
                self.async_rc.store(EPROTO.to_errno(), Release);
                self.wake();
            }
            CmEvent::RouteError => {
                self.async_rc.store(ENETUNREACH.to_errno(), Release);
                self.wake();
            }
            CmEvent::Established { private, len } => {
                let negotiated = pvt::negotiate(self.ours, private.get(..len).unwrap_or(&[]));
                self.inline_send.store(negotiated.inline.send, Release);
                self.inline_recv.store(negotiated.inline.recv, Release);
                rdebug!(
                    "connected, inline send {} recv {}\n",
                    negotiated.inline.send,
                    negotiated.inline.recv
                );
                self.status.store(ESTABLISHED, Release);
                self.wake();
            }
            CmEvent::ConnectError => self.fail(ENOTCONN),
            CmEvent::Unreachable => self.fail(ENETUNREACH),
            CmEvent::Rejected { stale: true } => self.fail(ENOTCONN),
            CmEvent::Rejected { stale: false } => self.fail(ECONNREFUSED),
            CmEvent::Disconnected => self.fail(ECONNABORTED),
            CmEvent::DeviceRemoval | CmEvent::AddrChange => self.fail(ENODEV),
            CmEvent::Other(_) => {}
        }
    }
}

impl Shared {
    /// Records a connection failure; a live connection is closed through
    /// sunrpc's autoclose.
    fn fail(&self, err: Error) {
        let was = self.status.xchg(err.to_errno(), Full);
        if was == ESTABLISHED {
            rdebug!("connection lost ({})\n", err.to_errno());
            self.xprt().force_disconnect();
        }
        self.wake();
    }
}

/// A Reply held between its Receive completion and the completion of the
/// LOCAL_INVs of its RPC's MRs.
#[derive(Clone, Copy)]
pub(crate) struct Pending {
    /// The request, pinned.
    pub(crate) rqst: *mut sys::rpc_rqst,
    /// Bytes received.
    pub(crate) len: usize,
}

/// A Receive buffer.
///
/// # Invariants
///
/// `pending` is only accessed by the Receive completion of this buffer
/// and, after it posted LOCAL_INVs on `linv_cqe`, by their completion, or
/// after it published `wait_seq`, by whoever resets `wait_seq` to zero;
/// the buffer is marked `idle` only after that, and whoever clears `idle`
/// owns the buffer and `wr` until it posts them.
pub(crate) struct RecvCtx {
    cqe: CqEntry<RecvCtx, RECV>,
    linv_cqe: CqEntry<RecvCtx, LINV>,
    buf: DmaBuf,
    wr: RecvWr,
    pending: UnsafeCell<Pending>,
    /// Number of the Send this buffer's Reply waits for; 0 for none.
    wait_seq: Atomic<u64>,
    /// Done with, waiting for the next batch of Receives.
    idle: Atomic<bool>,
    shared: *const Shared,
}

impl RecvCtx {
    fn new(shared: &Shared, dev: &crate::rdma::Device, size: usize, lkey: u32) -> Result<Self> {
        let buf = DmaBuf::new(dev, size, DmaDir::FromDevice)?;
        Ok(Self {
            cqe: CqEntry::new(),
            linv_cqe: CqEntry::new(),
            wr: RecvWr::new(&buf, lkey),
            buf,
            pending: UnsafeCell::new(Pending {
                rqst: core::ptr::null_mut(),
                len: 0,
            }),
            wait_seq: Atomic::new(0),
            // Not posted yet: the connect worker posts every idle buffer.
            idle: Atomic::new(true),
            shared,
        })
    }

    /// The first `len` bytes received.
    pub(crate) fn msg(&self, len: usize) -> &[u8] {
        self.buf.as_slice().get(..len).unwrap_or(&[])
    }

    /// Gives the buffer back: it is reposted with the next batch.
    fn repost(&self, shared: &Shared) {
        // Counted before it is marked, so the count never falls below
        // the number of marked buffers.
        let idle = shared.recv_idle.fetch_add(1, Full) + 1;
        self.idle.store(true, Release);
        if idle >= shared.recv_batch && shared.post_idle_recvs().is_err() {
            shared.xprt().force_disconnect();
        }
    }
}

/// What the transport did with a received message.
pub(crate) enum Handled {
    /// Done: repost the buffer.
    Done,
    /// LOCAL_INVs were posted; [`linv_done`] finishes the Reply.
    Deferred,
}

// SAFETY: `pending`, the buffer and its work request are used by one
// thread at a time (type invariant); the rest is atomic or set before the
// context is shared; `shared` is only used as `&Shared`, which is `Sync`.
unsafe impl Sync for RecvCtx {}

/// [`CqEntry`] ids of a [`RecvCtx`].
const RECV: u64 = 0;
const LINV: u64 = 1;
crate::impl_has_cq_entry!(RecvCtx, 0, cqe);
crate::impl_has_cq_entry!(RecvCtx, 1, linv_cqe);

impl RecvCtx {
    fn shared(&self) -> &Shared {
        // SAFETY: `shared` outlives every context of its connection.
        unsafe { &*self.shared }
    }
}

/// A Receive completed.
impl CqHandler<RECV> for RecvCtx {
    fn done(&self, wc: &Wc<'_>) {
        let shared = self.shared();
        let xprt = shared.xprt();
        if !wc.ok() {
            if !wc.flushed() {
                rwarn!("receive failed, status {}\n", wc.status());
                xprt.force_disconnect();
            }
            return;
        }
        let len = wc.byte_len().min(self.buf.len());
        self.buf.sync_for_cpu(len);
        if let Handled::Done = xprt.receive(shared, self, len, wc.invalidated_rkey()) {
            self.repost(shared);
        }
    }
}

/// The last (signalled) LOCAL_INV of a Reply's RPC completed.
impl CqHandler<LINV> for RecvCtx {
    fn done(&self, wc: &Wc<'_>) {
        let shared = self.shared();
        // SAFETY: By the type invariant, the Receive completion handed the
        // pending Reply to us.
        let pending = unsafe { *self.pending.get() };
        if !wc.ok() && !wc.flushed() {
            rwarn!("local invalidate failed, status {}\n", wc.status());
            shared.xprt().force_disconnect();
        }
        shared.xprt().finish_reply(shared, self, pending, wc.ok());
        self.repost(shared);
    }
}

/// MR slot states.
const MR_FREE: u32 = 0;
const MR_BUSY: u32 = 1;
/// Taken out of use: its state is unknown after a failed operation.
const MR_DEAD: u32 = 2;

/// One MR of the pool with its work requests.
///
/// # Invariants
///
/// Whoever moved `state` from [`MR_FREE`] to [`MR_BUSY`] owns `mr`,
/// `reg_wr` and `inv_wr` until it stores [`MR_FREE`] again: the sender
/// while it registers, then the Reply's handlers, which receive the MR
/// through the request state (released by the sender before posting, and
/// acquired by the Receive handler), and the LOCAL_INV completion.
pub(crate) struct MrSlot {
    mr: UnsafeCell<Mr>,
    reg_wr: UnsafeCell<sys::ib_reg_wr>,
    inv_wr: UnsafeCell<sys::ib_send_wr>,
    cqe: CqEntry<MrSlot>,
    state: Atomic<u32>,
    rkey: Atomic<u32>,
    shared: *const Shared,
}

// SAFETY: `mr` and the work requests are used only by the owner of the
// slot's `MR_BUSY` state (type invariant); the rest is atomic; `shared` is
// only used as `&Shared`, which is `Sync`.
unsafe impl Sync for MrSlot {}

crate::impl_has_cq_entry!(MrSlot, 0, cqe);

/// Completion of an unsignalled REG_MR or LOCAL_INV: only errors report.
impl CqHandler for MrSlot {
    fn done(&self, wc: &Wc<'_>) {
        // SAFETY: `shared` outlives the pool.
        let shared = unsafe { &*self.shared };
        if !wc.ok() && !wc.flushed() {
            rwarn!("memory registration failed, status {}\n", wc.status());
            shared.xprt().force_disconnect();
        }
    }
}

/// The connection's FRWR MRs.
///
/// # Invariants
///
/// `slots` is never resized after creation.
pub(crate) struct MrPool {
    slots: KVec<MrSlot>,
    next: Atomic<usize>,
    depth: u32,
}

// SAFETY: Every slot's mutable state is owned as described in `MrSlot`.
unsafe impl Send for MrPool {}
// SAFETY: See above.
unsafe impl Sync for MrPool {}

/// A chain of work requests being linked for one post.
struct WrChain {
    first: *mut sys::ib_send_wr,
    last: *mut sys::ib_send_wr,
}

impl WrChain {
    fn new() -> Self {
        Self {
            first: core::ptr::null_mut(),
            last: core::ptr::null_mut(),
        }
    }

    /// Appends `wr`, which ends the chain.
    ///
    /// # Safety
    ///
    /// `wr` is a valid work request, owned by the caller like every one
    /// already in the chain.
    unsafe fn append(&mut self, wr: *mut sys::ib_send_wr) {
        // SAFETY: `wr` and `last` (when set) are valid, by the caller's
        // promise for each append.
        unsafe {
            (*wr).next = core::ptr::null_mut();
            if self.last.is_null() {
                self.first = wr;
            } else {
                (*self.last).next = wr;
            }
        }
        self.last = wr;
    }

    /// The first and last work request, unless the chain is empty.
    fn ends(&self) -> Option<(*mut sys::ib_send_wr, *mut sys::ib_send_wr)> {
        (!self.first.is_null()).then_some((self.first, self.last))
    }
}

impl MrPool {
    fn new(
        shared: &Shared,
        pd: &Arc<Pd>,
        dev: &crate::rdma::Device,
        depth: u32,
        count: usize,
    ) -> Result<Self> {
        let mut slots = KVec::with_capacity(count, GFP_KERNEL)?;
        for _ in 0..count {
            let mr = Mr::new(pd, dev, depth)?;
            let rkey = mr.rkey();
            slots.push(
                MrSlot {
                    mr: UnsafeCell::new(mr),
                    reg_wr: UnsafeCell::new(sys::ib_reg_wr::default()),
                    inv_wr: UnsafeCell::new(sys::ib_send_wr::default()),
                    cqe: CqEntry::new(),
                    state: Atomic::new(MR_FREE),
                    rkey: Atomic::new(rkey),
                    shared,
                },
                GFP_KERNEL,
            )?;
        }
        Ok(Self {
            slots,
            next: Atomic::new(0),
            depth,
        })
    }

    /// Pages per MR.
    pub(crate) fn depth(&self) -> u32 {
        self.depth
    }

    /// Takes a free MR.
    fn get(&self) -> Option<u16> {
        let n = self.slots.len();
        let start = self.next.load(Relaxed);
        for k in 0..n {
            let i = start.wrapping_add(k) % n.max(1);
            let slot = self.slots.get(i)?;
            if slot.state.cmpxchg(MR_FREE, MR_BUSY, Acquire).is_ok() {
                self.next.store(i.wrapping_add(1), Relaxed);
                return u16::try_from(i).ok();
            }
        }
        None
    }

    fn slot(&self, i: u16) -> Option<&MrSlot> {
        self.slots.get(usize::from(i))
    }

    /// Registers `segs` on a free MR for `writing` (the peer writes) and
    /// prepares its REG_MR; returns the MR and the segment it gives.
    ///
    /// # Safety
    ///
    /// As for [`Mr::map`]: the pages stay allocated until the MR is
    /// released with [`MrPool::release`].
    pub(crate) unsafe fn register(
        &self,
        segs: &[PageSeg],
        writing: bool,
    ) -> Result<(u16, Registered)> {
        let i = self.get().ok_or(ENOBUFS)?;
        let slot = self.slot(i).ok_or(EINVAL)?;
        // SAFETY: We moved the slot to BUSY, so we own it (type invariant
        // of `MrSlot`).
        let mr = unsafe { &mut *slot.mr.get() };
        // SAFETY: The caller's promise.
        match unsafe { mr.map(segs, writing) } {
            Ok(reg) => {
                // SAFETY: As above, we own the slot's work requests.
                mr.reg_wr(
                    unsafe { &mut *slot.reg_wr.get() },
                    writing,
                    slot.cqe.as_ptr(),
                );
                slot.rkey.store(reg.rkey, Relaxed);
                Ok((i, reg))
            }
            Err(e) => {
                slot.state.store(MR_FREE, Release);
                Err(e)
            }
        }
    }

    /// Links the REG_MRs of `mrs` (registered by [`MrPool::register`] and
    /// not yet posted) into a chain: its first and last work request.
    pub(crate) fn reg_chain(
        &self,
        mrs: &[u16],
    ) -> Option<(*mut sys::ib_send_wr, *mut sys::ib_send_wr)> {
        let mut chain = WrChain::new();
        for &i in mrs {
            let slot = self.slot(i)?;
            // SAFETY: The caller owns the registered slots; the REG_MR's
            // `ib_send_wr` is the first field of its `ib_reg_wr`.
            unsafe { chain.append(slot.reg_wr.get().cast()) };
        }
        chain.ends()
    }

    /// The current R_key of MR `i`.
    pub(crate) fn rkey(&self, i: u16) -> Option<u32> {
        self.slot(i).map(|s| s.rkey.load(Relaxed))
    }

    /// Unmaps MR `i`, invalidated (or never posted), and returns it to the
    /// pool; `dead` takes it out of use instead.
    pub(crate) fn release(&self, i: u16, dead: bool) {
        let Some(slot) = self.slot(i) else {
            return;
        };
        // SAFETY: The caller owns the slot (it is BUSY and was handed to it).
        unsafe { (*slot.mr.get()).unmap() };
        slot.state
            .store(if dead { MR_DEAD } else { MR_FREE }, Release);
        if !dead {
            // Reuse the MR that was just released first, like rpcrdma.ko's
            // per-request MR cache: its page list is warm in the driver,
            // where a cursor walking the whole pool touches a cold one
            // each time.
            self.next.store(usize::from(i), Relaxed);
        }
    }

    /// Posts LOCAL_INV for each MR of `mrs`, the last one signalled on
    /// `ctx`'s `linv_cqe`, which then finishes `pending`.
    ///
    /// Fails with `ESHUTDOWN` once the connection is being drained: a
    /// LOCAL_INV posted then might complete after the Send queue was
    /// drained, and its Reply would never be finished. The caller leaves
    /// the MRs to the teardown, which destroys the QP.
    pub(crate) fn invalidate(
        &self,
        shared: &Shared,
        mrs: &[u16],
        ctx: &RecvCtx,
        pending: Pending,
    ) -> Result {
        let mut chain = WrChain::new();
        let n = mrs.len();
        for (k, &i) in mrs.iter().enumerate() {
            let slot = self.slot(i).ok_or(EINVAL)?;
            let wr = slot.inv_wr.get();
            let signalled = k + 1 == n;
            let cqe = if signalled {
                ctx.linv_cqe.as_ptr()
            } else {
                slot.cqe.as_ptr()
            };
            // SAFETY: The caller owns the slots and their work requests.
            unsafe {
                (*slot.mr.get()).inv_wr(&mut *wr, cqe, signalled);
                chain.append(wr);
            }
        }
        let (first, _) = chain.ends().ok_or(EINVAL)?;
        if shared.draining.load(Acquire) {
            return Err(ESHUTDOWN);
        }
        // SAFETY: The Receive completion owns `pending` until it posts.
        unsafe { *ctx.pending.get() = pending };
        // SAFETY: The QP lives until drained, which waits for this handler.
        let qp = unsafe { Qp::from_ptr(shared.qp.load(Acquire)) }.ok_or(ENOTCONN)?;
        // SAFETY: A valid chain whose cqes live until the QP is drained.
        unsafe { qp.post_chain(first) }
    }
}

impl Shared {
    /// The MR pool; present once the connection is up.
    pub(crate) fn pool(&self) -> Option<&MrPool> {
        // SAFETY: The pool is published before the first Send and freed
        // only after the CQs, i.e. after every handler that can see it.
        unsafe { self.pool.load(Acquire).as_ref() }
    }
}

/// A Send buffer of the ring.
///
/// # Invariants
///
/// The context carrying Send number `seq` is free again once
/// [`Shared::sends_completed`] reaches `seq`. Until then `buf` belongs to
/// the device, and `mapped` to this context's completion handler, which
/// runs (if at all) before that number is published. While free, both
/// belong to the sender, which holds `XPRT_LOCKED`.
pub(crate) struct SendCtx {
    cqe: CqEntry<SendCtx>,
    buf: UnsafeCell<DmaBuf>,
    /// RPC pages this Send gathers; unmapped when it completes.
    mapped: UnsafeCell<Option<MappedCall>>,
    seq: Atomic<u64>,
    shared: *const Shared,
}

impl SendCtx {
    fn new(shared: &Shared, dev: &crate::rdma::Device, size: usize) -> Result<Self> {
        Ok(Self {
            cqe: CqEntry::new(),
            buf: UnsafeCell::new(DmaBuf::new(dev, size, DmaDir::ToDevice)?),
            mapped: UnsafeCell::new(None),
            seq: Atomic::new(0),
            shared,
        })
    }
}

/// An RPC's pages mapped for one Send, and the request's mark that a Send
/// still reads them: the request is not freed while the mark is set (see
/// `op_buf_free`). Dropping it, once the Send completed or was never
/// posted, unmaps the pages, clears the mark and wakes whoever waits.
///
/// # Invariants
///
/// `busy` points into the request's state, which stays allocated while
/// `*busy` is non-zero; `shared` outlives every Send of its connection.
pub(crate) struct MappedCall {
    pages: MappedPages,
    busy: *const Atomic<u32>,
    shared: *const Shared,
}

// SAFETY: The mapping is plain numbers; the mark is atomic; `Shared` is
// `Sync`.
unsafe impl Send for MappedCall {}

impl Drop for MappedCall {
    fn drop(&mut self) {
        // Unmap first: the mark promises the pages are no longer in use.
        drop(core::mem::replace(&mut self.pages, MappedPages::empty()));
        // SAFETY: `busy` is valid while it is non-zero (type invariant),
        // and `shared` outlives us.
        unsafe {
            (*self.busy).store(0, Release);
            (*self.shared).xprt().wake_fence();
        }
    }
}

// SAFETY: `buf` and `mapped` have one owner at a time, as the type
// invariant says; `seq` is atomic; `shared` is only used as `&Shared`,
// which is `Sync`.
unsafe impl Sync for SendCtx {}

crate::impl_has_cq_entry!(SendCtx, 0, cqe);

/// A signalled Send completed, or any Send failed.
impl CqHandler for SendCtx {
    fn done(&self, wc: &Wc<'_>) {
        // SAFETY: `shared` outlives every context of its connection.
        let shared = unsafe { &*self.shared };
        // SAFETY: The Send completed, and its number is not yet published,
        // so the mapping is ours (type invariant); the device is done with
        // it.
        drop(unsafe { (*self.mapped.get()).take() });
        if !wc.ok() && !wc.flushed() {
            rwarn!("send failed, status {}\n", wc.status());
            shared.xprt().force_disconnect();
        }
        // This completion retires every Send posted before it, too.
        shared.sends_completed_to(self.seq.load(Acquire));
    }
}

/// A connection, owned by whoever holds `XPRT_LOCKED`.
///
/// Fields drop in declaration order after [`Ep::drop`] has drained and
/// destroyed the QP: first the CQs (freeing a CQ waits for its polling
/// work, so no completion handler runs afterwards, not even for a Receive
/// reposted while the QP was draining), then the buffers and MRs, the PD,
/// the CM id (which waits for its event handler), and last what the
/// handlers share.
pub(crate) struct Ep {
    send_cq: Option<Arc<Cq>>,
    recv_cq: Option<Arc<Cq>>,
    rx: KVec<RecvCtx>,
    tx: KVec<SendCtx>,
    /// Which Sends are signalled; the sender's (`XPRT_LOCKED`).
    signals: UnsafeCell<SendSignals>,
    /// The page list of the memory a Call registers or maps, rebuilt for
    /// each region; the sender's (`XPRT_LOCKED`). Sized at connect for the
    /// largest payload, so that marshalling allocates nothing.
    page_list: UnsafeCell<KVec<PageSeg>>,
    pool: Option<KBox<MrPool>>,
    pd: Option<Arc<Pd>>,
    id: Option<CmId<Shared>>,
    /// The device's registration limits.
    pub(crate) limits: DeviceLimits,
    /// The Write chunk pad: an MR over `pad_buf` registered for the whole
    /// connection, offered as the last segment of a Write chunk whose
    /// length is not a multiple of four (`re_write_pad_mr`).
    write_pad: Option<(u16, Registered)>,
    pad_buf: Option<KBox<[u8; 64]>>,
    /// Sends posted on this connection.
    sends_posted: Atomic<u64>,
    /// The device, for mapping the pages of large inline Calls.
    dev: Option<crate::rdma::Device>,
    shared: KBox<Shared>,
}

/// Result of trying to marshal and Send one RPC Call.
pub(crate) enum SendError {
    /// No Send buffer free.
    NoBuffer,
    /// The message does not fit the inline threshold.
    TooBig,
    /// Posting failed: the connection is unusable.
    Post,
}

impl Ep {
    /// Connects `xprt` to its server address. Blocks; runs in the connect
    /// worker.
    pub(crate) fn connect(xprt: &RdmaXprt, cfg: &Config) -> Result<KBox<Ep>> {
        let shared = Shared::new(xprt, cfg)?;
        let mut ep = KBox::new(
            Ep {
                send_cq: None,
                recv_cq: None,
                rx: KVec::new(),
                tx: KVec::new(),
                signals: UnsafeCell::new(SendSignals::new(1, 1)),
                page_list: UnsafeCell::new(KVec::new()),
                pool: None,
                pd: None,
                id: None,
                limits: DeviceLimits {
                    max_fast_reg_page_list_len: 1,
                    max_sge_rd: 1,
                    max_send_sge: 1,
                    page_size: kernel::page::PAGE_SIZE as u32,
                },
                sends_posted: Atomic::new(0),
                dev: None,
                write_pad: None,
                pad_buf: None,
                shared,
            },
            GFP_KERNEL,
        )?;
        let ep_ref: &mut Ep = &mut ep;
        let shared: *const Shared = &*ep_ref.shared;
        // SAFETY: The net is the transport's, which outlives it; `shared`
        // is boxed and dropped after the id (field order of `Ep`).
        let id = unsafe { CmId::new(xprt.net(), shared)? };
        let id = &*ep_ref.id.insert(id);
        let timeout = xprt.resolve_timeout();

        ep_ref.shared.rearm();
        // SAFETY: The transport's address is a valid sockaddr.
        unsafe { id.resolve_addr(xprt.dst_addr())? };
        ep_ref.shared.wait(timeout)?;
        to_result(ep_ref.shared.async_rc.load(Acquire))?;

        ep_ref.shared.rearm();
        id.resolve_route()?;
        ep_ref.shared.wait(timeout)?;
        to_result(ep_ref.shared.async_rc.load(Acquire))?;

        let dev = id.device()?;
        let limits = DeviceLimits {
            max_fast_reg_page_list_len: dev.max_fast_reg_page_list_len(),
            max_sge_rd: dev.max_sge_rd(),
            max_send_sge: dev.max_send_sge(),
            page_size: kernel::page::PAGE_SIZE as u32,
        };
        if limits.max_fast_reg_page_list_len == 0 {
            pr_warn!("device cannot do fast registration\n");
            return Err(EOPNOTSUPP);
        }
        ep_ref.limits = limits;
        // MRs per RPC: a Read, a Write and a Reply chunk at most, each of
        // `max_rdma_segs` segments; a connection keeps enough for every
        // slot to need about a chunk and a half.
        let segs = limits.max_rdma_segs().max(1);
        let nmrs = (cfg.slots.saturating_mul(segs.saturating_add(2))).min(4096);
        // A chunk's pages, plus the head and tail pages around them.
        let list = segs.saturating_mul(limits.max_fr_depth()).saturating_add(4);
        ep_ref.page_list = UnsafeCell::new(KVec::with_capacity(list as usize, GFP_KERNEL)?);
        let max_wr = dev.max_qp_wr().min(dev.max_cqe());
        // Send queue: every Send may come with a REG_MR per MR, and a
        // LOCAL_INV per MR follows its Reply. One extra each for ib_drain_qp.
        let want_send = sends(cfg).saturating_add(nmrs.saturating_mul(2));
        let send_wr = want_send.min(max_wr.saturating_sub(1)) + 1;
        let recv_wr = recvs(cfg).min(max_wr.saturating_sub(1)) + 1;
        // Each object goes into the connection as soon as it exists, so
        // that an error from here on releases it through `Ep::drop`, in
        // teardown order; the QP holds its PD and CQs, and each MR its PD,
        // so none of them can be freed under a user.
        let pd = ep_ref.pd.insert(Pd::new(&dev)?).clone();
        let send_cq = ep_ref.send_cq.insert(Cq::new(&dev, send_wr)?).clone();
        let recv_cq = ep_ref.recv_cq.insert(Cq::new(&dev, recv_wr)?).clone();
        // A quarter of the Send Queue may wait for a signalled completion.
        ep_ref.signals =
            UnsafeCell::new(SendSignals::new(queue::send_batch(cfg.slots), send_wr / 4));
        ep_ref.dev = Some(dev);
        let lkey = pd.local_dma_lkey();
        let id = ep_ref.id.as_mut().ok_or(ENOTCONN)?;
        let caps = QpCaps {
            send_wr,
            recv_wr,
            send_sge: limits.send_sges().min(MAX_MAPPED_PAGES as u32 + 2),
            rdma_ctxs: 0,
        };
        id.create_qp(&pd, &send_cq, &recv_cq, &caps)?;
        let qp = id.qp().ok_or(ENOTCONN)?;
        if injected(FAULT_MR_POOL) {
            rdebug!("fault injection: failing MR pool allocation\n");
            return Err(ENOMEM);
        }
        let pool = ep_ref.pool.insert(KBox::new(
            MrPool::new(
                &ep_ref.shared,
                &pd,
                &dev,
                limits.max_fr_depth(),
                nmrs as usize,
            )?,
            GFP_KERNEL,
        )?);
        xprt.stats().mrs_allocated.add(u64::from(nmrs));
        ep_ref
            .shared
            .pool
            .store(core::ptr::from_ref::<MrPool>(&**pool).cast_mut(), Release);

        // Buffers: the vectors are sized once and never grow afterwards, so
        // the contexts' addresses are stable while work requests use them.
        let nrecv = (recv_wr - 1) as usize;
        let nsend = sends(cfg) as usize;
        let mut rx = KVec::with_capacity(nrecv, GFP_KERNEL)?;
        for _ in 0..nrecv {
            rx.push(
                RecvCtx::new(&ep_ref.shared, &dev, cfg.inline_read as usize, lkey)?,
                GFP_KERNEL,
            )?;
        }
        let mut tx = KVec::with_capacity(nsend, GFP_KERNEL)?;
        for _ in 0..nsend {
            tx.push(
                SendCtx::new(&ep_ref.shared, &dev, cfg.inline_write as usize)?,
                GFP_KERNEL,
            )?;
        }
        ep_ref.rx = rx;
        ep_ref.tx = tx;
        ep_ref.shared.rx_len.store(ep_ref.rx.len(), Release);
        ep_ref
            .shared
            .rx
            .store(ep_ref.rx.as_ptr().cast_mut(), Release);
        ep_ref.shared.lkey.store(lkey, Relaxed);
        ep_ref.shared.qp.store(qp.as_ptr(), Release);
        // Every buffer starts idle; one chain posts them all.
        ep_ref
            .shared
            .recv_idle
            .store(ep_ref.rx.len() as u32, Release);
        ep_ref.shared.post_idle_recvs()?;

        let private = PrivateData {
            remote_invalidate: true,
            send_size: cfg.inline_write,
            recv_size: cfg.inline_read,
        }
        .encode();
        let responder_resources = u8::try_from(dev.max_qp_rd_atom()).unwrap_or(u8::MAX);
        // Like rpcrdma.ko: offer RDMA Read but never initiate, few
        // retries so a dead peer is noticed, and no RNR retries because
        // credits make RNR impossible.
        let mut param = ConnParam::new(&private, responder_resources, 0, 6, 0);
        ep_ref.shared.rearm();
        let Some(id) = ep.id.as_ref() else {
            return Err(ENOTCONN);
        };
        id.connect(&mut param)?;
        ep.shared.wait(xprt.connect_timeout())?;
        let status = ep.shared.status.load(Acquire);
        if status != ESTABLISHED {
            to_result(status)?;
            return Err(ENOTCONN);
        }
        ep.register_write_pad(&qp)?;
        Ok(ep)
    }

    /// Registers the Write chunk pad (`frwr_wp_create`), once the QP can
    /// send.
    fn register_write_pad(&mut self, qp: &Qp) -> Result {
        let buf = KBox::new([0u8; 64], GFP_KERNEL)?;
        // SAFETY: `buf` is kmalloc memory.
        let page = unsafe { sys::rpcrdma_rs_virt_to_page(buf.as_ptr().cast()) };
        let offset = (buf.as_ptr() as usize & (kernel::page::PAGE_SIZE - 1)) as u32;
        let pool = self.pool.as_deref().ok_or(ENOTCONN)?;
        // SAFETY: `buf` lives in `pad_buf` until after the pool is freed.
        let (i, reg) = unsafe {
            pool.register(
                &[PageSeg {
                    page,
                    offset,
                    len: 4,
                }],
                true,
            )?
        };
        self.pad_buf = Some(buf);
        self.write_pad = Some((i, reg));
        let (first, _) = pool.reg_chain(&[i]).ok_or(EINVAL)?;
        // SAFETY: A valid one-WR chain whose cqe lives with the pool.
        unsafe { qp.post_chain(first) }
    }

    /// The Write chunk pad segment.
    pub(crate) fn write_pad(&self) -> Option<Registered> {
        self.write_pad.map(|(_, reg)| reg)
    }

    /// The negotiated inline thresholds.
    pub(crate) fn inline(&self) -> InlineThresholds {
        self.shared.inline()
    }

    /// What the handlers share.
    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// The MR pool.
    pub(crate) fn pool(&self) -> Option<&MrPool> {
        self.pool.as_deref()
    }

    /// The sender's page-list scratch (see `page_list`).
    ///
    /// # Safety
    ///
    /// The caller holds `XPRT_LOCKED` and keeps no other reference from
    /// this function alive.
    // The list is the sender's, as `XPRT_LOCKED` is: a lock the type
    // system cannot see, hence `&self` in and `&mut` out.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn page_list(&self) -> &mut KVec<PageSeg> {
        // SAFETY: Only the sender uses the list, and it is serialised by
        // `XPRT_LOCKED` (the caller's promise).
        unsafe { &mut *self.page_list.get() }
    }

    /// Number the next Send gets; see [`Shared::send_completed`].
    pub(crate) fn next_send_seq(&self) -> u64 {
        self.sends_posted.load(Relaxed).wrapping_add(1)
    }

    /// Maps `pages` of an RPC for a Send; see [`Ep::send`]. Sets `busy`,
    /// which the Send's completion clears.
    ///
    /// # Safety
    ///
    /// The pages stay allocated and unchanged, and `busy` valid, until
    /// `busy` reads zero again.
    pub(crate) unsafe fn map_pages(
        &self,
        pages: &[PageSeg],
        busy: &Atomic<u32>,
    ) -> Result<MappedCall> {
        let dev = self.dev.as_ref().ok_or(ENOTCONN)?;
        // SAFETY: The caller's promise covers the mapping's life, which
        // ends when the `MappedCall` is dropped and clears `busy`.
        let pages = unsafe { MappedPages::map(dev, pages)? };
        busy.store(1, Relaxed);
        // INVARIANT: `busy` is set, and the caller keeps it valid until it
        // is clear.
        Ok(MappedCall {
            pages,
            busy,
            shared: &*self.shared,
        })
    }

    /// Fills the next free Send buffer with `fill` and posts it, after the
    /// `chained` work requests of `before`. `fill` returns `(split, len)`:
    /// the Send gathers the first `split` bytes of the buffer, then the
    /// `mapped` pages, then the buffer up to `len`; or `None` if the
    /// message does not fit. A Send with mapped pages is signalled, and
    /// they are unmapped when it completes.
    pub(crate) fn send(
        &self,
        before: Option<(*mut sys::ib_send_wr, *mut sys::ib_send_wr)>,
        chained: u32,
        mapped: Option<MappedCall>,
        fill: impl FnOnce(&mut [u8]) -> Option<(usize, usize)>,
    ) -> Result<(), SendError> {
        let n = self.tx.len() as u64;
        let posted = self.sends_posted.load(Relaxed);
        if n == 0 {
            return Err(SendError::Post);
        }
        if posted.wrapping_sub(self.shared.sends_completed()) >= n {
            return Err(SendError::NoBuffer);
        }
        let seq = posted.wrapping_add(1);
        let idx = usize::try_from(posted % n).map_err(|_| SendError::Post)?;
        let ctx = self.tx.get(idx).ok_or(SendError::Post)?;
        // SAFETY: Send `seq - n`, the last one in this context, has
        // completed: by the type invariant of `SendCtx` the sender (us,
        // under XPRT_LOCKED) owns the buffer and the mapping slot.
        let buf = unsafe { &mut *ctx.buf.get() };
        let Some((split, len)) = fill(buf.as_mut_slice()) else {
            return Err(SendError::TooBig);
        };
        let split = split.min(len);
        buf.sync_for_device(len);
        let qp = self
            .id
            .as_ref()
            .and_then(|id| id.qp())
            .ok_or(SendError::Post)?;
        let lkey = self.shared.lkey.load(Relaxed);
        let mut sges = [sys::ib_sge::default(); MAX_MAPPED_PAGES + 2];
        let mut k = 0;
        let first = core::iter::once(buf.sge(0, split, lkey));
        let pages = mapped.iter().flat_map(|m| m.pages.sges(lkey));
        let last = core::iter::once(buf.sge(split, len - split, lkey));
        let parts =
            Iterator::chain(Iterator::chain(first, pages), last).filter(|sge| sge.length > 0);
        for (slot, sge) in sges.iter_mut().zip(parts) {
            *slot = sge;
            k += 1;
        }
        let awaited = mapped.is_some();
        // SAFETY: The policy is the sender's, and we hold XPRT_LOCKED.
        let signalled = unsafe { (*self.signals.get()).next(chained, awaited) };
        ctx.seq.store(seq, Release);
        // SAFETY: As above, the slot is ours until the Send is posted.
        unsafe { *ctx.mapped.get() = mapped };
        // SAFETY: Context, buffer and mapped pages stay until the Send
        // completes (`SendCtx` invariant, `map_pages` contract); the
        // chain's WRs belong to the caller's MRs.
        let posted = unsafe {
            qp.post_send_after(
                ctx.cqe.as_ptr(),
                sges.get_mut(..k).unwrap_or(&mut []),
                signalled,
                before,
            )
        };
        if posted.is_err() {
            // SAFETY: Nothing was posted: the slot is still ours.
            drop(unsafe { (*ctx.mapped.get()).take() });
            return Err(SendError::Post);
        }
        self.sends_posted.store(seq, Relaxed);
        Ok(())
    }
}

impl Drop for Ep {
    fn drop(&mut self) {
        self.shared.draining.store(true, Release);
        // Our own disconnect must not schedule another close.
        self.shared.status.store(ECONNABORTED.to_errno(), Release);
        if let Some(id) = self.id.as_mut() {
            id.disconnect();
            // Flush every posted Receive and Send: afterwards no buffer is
            // in use by the device and no handler runs.
            id.drain_qp();
            id.destroy_qp();
        }
        // Explicit order, whatever the field order: freeing a CQ waits for
        // its polling work, so no completion handler runs afterwards; then
        // the buffers and MRs go (an MR still registered for an RPC that
        // got no Reply is orphaned: its QP is gone, so nobody can reach
        // its pages any more), the PD, and the CM id (which waits for its
        // event handler); `shared` is dropped with the fields, last.
        drop(self.send_cq.take());
        drop(self.recv_cq.take());
        self.shared.rx.store(core::ptr::null_mut(), Release);
        drop(core::mem::take(&mut self.rx));
        drop(core::mem::take(&mut self.tx));
        self.shared.pool.store(core::ptr::null_mut(), Release);
        if let Some(pool) = self.pool.take() {
            if let Some((i, _)) = self.write_pad.take() {
                pool.release(i, true);
            }
            let busy = pool
                .slots
                .iter()
                .filter(|s| s.state.load(Acquire) == MR_BUSY)
                .count();
            self.shared.xprt().stats().mrs_orphaned.add(busy as u64);
            drop(pool);
        }
        drop(self.pd.take());
        drop(self.id.take());
        rdebug!("connection torn down\n");
    }
}
