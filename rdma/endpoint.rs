// SPDX-License-Identifier: GPL-2.0

//! A connection's queue pair together with the buffers posted on it.
//!
//! Posted work is owned in types. Each Receive and Send buffer lives in a
//! slot of an [`Endpoint`], at a fixed address, and at any time belongs to
//! exactly one of: the device (posted), or one token, [`RecvBuf`] or
//! [`SendBuf`], which gives access to its bytes and its state. Posting
//! consumes the token; the completion hands it back to the owner's
//! handler ([`EpOwner`]). A token that must wait (on a queue, or in an
//! nfsd request) is [`Parked`]: a plain number that only its endpoint can
//! turn back into a token, once.
//!
//! Every work request goes through the QP's [`QpGate`], which refuses
//! posts once it is closed. Dropping an [`Endpoint`] closes the gate, which
//! drains the QP, before anything posted on it is freed, whatever path
//! drops it (so not even a completion handler that began before may post
//! behind the drain), and destroys the rdma_rw contexts before the QP. So no buffer can be freed, reused or read while the device
//! owns it, and no completion can run once its context is gone: the rules
//! the server review found broken on the accept path are properties of
//! these types now.

use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::num::NonZeroUsize;
use core::ptr::NonNull;

use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};
use kernel::sync::{new_condvar, new_spinlock, Arc, CondVar, SetOnce, SpinLock};
use kernel::types::Opaque;

use super::{
    CmHandler, CmId, Cq, CqEntry, CqHandler, Device, DmaBuf, DmaDir, EpHome, PageSeg, Pd, QpCaps,
    QpGate, RwCtx, RwOp, RwSpares, Wc,
};
use crate::sunrpc::{Ctxt, HeldBytes, PageRefs, SvcRqst};
use crate::sys;

/// Most Send buffers an endpoint has: a completion retires at most this
/// many at once, without allocating.
pub(crate) const MAX_SENDS: u32 = 64;

/// What owns an [`Endpoint`] and receives its completions: a connection,
/// declared with [`owner!`](super::owner), which keeps the endpoint inside
/// it ([`EpHome`]). The handlers run in process context, from the CQ's
/// polling work; they are never called once the QP's gate is closed
/// ([`Endpoint::shutdown`], or the endpoint's drop).
pub(crate) trait EpOwner: CmHandler + EpHome {
    /// What the owner keeps with each Receive buffer.
    type RecvState: Send;
    /// What the owner keeps with each Send buffer.
    type SendState: Send;

    /// A Receive completed, successfully or not: `buf` is the owner's.
    fn received(&self, buf: RecvBuf<'_, Self>, wc: &Wc<'_>);
    /// The RDMA Reads posted with `buf` ([`Endpoint::post_reads`])
    /// completed, successfully or not.
    fn reads_done(&self, buf: RecvBuf<'_, Self>, wc: &Wc<'_>);
    /// A signalled or failed Send completed: it and every Send posted
    /// before it are the owner's again, in posting order.
    fn sent(&self, bufs: Retired<'_, Self>, wc: &Wc<'_>);
}

/// Unique numbers for endpoints, so that a [`Parked`] token is only ever
/// taken back by the endpoint it came from.
static NEXT_GEN: Atomic<u32> = Atomic::new(1);

/// Marks a [`Parked`] Receive buffer.
pub(crate) enum RecvKind {}
/// Marks a [`Parked`] Send buffer.
pub(crate) enum SendKind {}

/// A token put away: the endpoint's number and the buffer's.
///
/// # Invariants
///
/// Made only from a token (`RecvBuf` or `SendBuf` of kind `K`) that was
/// consumed; neither `Clone` nor `Copy`: it stands for the buffer's
/// ownership until turned back into a token.
pub(crate) struct Parked<K> {
    raw: NonZeroUsize,
    _kind: PhantomData<K>,
}

/// Bits of a [`Parked`] number that hold the buffer's; the rest hold the
/// endpoint's (which wraps sooner on 32-bit machines).
const IDX_BITS: u32 = usize::BITS / 2;

impl<K> Parked<K> {
    fn new(gen: u32, idx: u32) -> Self {
        let raw = ((gen as usize) << IDX_BITS) | idx as usize;
        Self {
            // `gen` is never zero.
            raw: NonZeroUsize::new(raw).unwrap_or(NonZeroUsize::MIN),
            _kind: PhantomData,
        }
    }

    fn gen(&self) -> u32 {
        split(self.raw.get()).0
    }

    fn idx(&self) -> u32 {
        split(self.raw.get()).1
    }
}

/// The endpoint's and the buffer's number in a parked token.
fn split(raw: usize) -> (u32, u32) {
    (
        (raw >> IDX_BITS) as u32,
        (raw & ((1 << IDX_BITS) - 1)) as u32,
    )
}

/// An endpoint's number as a parked token holds it: never zero.
fn gen_of(n: u32) -> u32 {
    let gen = n & ((1u64 << (usize::BITS - IDX_BITS)) - 1) as u32;
    gen.max(1)
}

impl From<Parked<RecvKind>> for Ctxt {
    fn from(p: Parked<RecvKind>) -> Ctxt {
        // SAFETY: The parked token is consumed here: the context is its
        // only copy.
        unsafe { Ctxt::from_raw(p.raw) }
    }
}

/// The Reads of a Call or the Writes of a Reply, with the pages they move
/// and the memory kept for the next ones. Lives in an endpoint's slot:
/// the contexts are destroyed before the pages are put, and before the QP
/// they were set up on is destroyed.
///
/// # Invariants
///
/// Every context of `ctxs` is on the endpoint's QP and moves bytes of
/// pages that `pages` holds (or, for a Reply's Writes, that
/// [`SvcRqst::reply_writes`](crate::sunrpc::SvcRqst) moved into it).
/// `ctxs` is declared first: unmapped, which makes a Read's data visible
/// to the CPU, before the pages are put.
///
/// The CPU reaches the pages only with the token of the buffer holding
/// the set, never while its Reads or Writes are posted. It fills the
/// pages of Writes before setting them up, and reads those of Reads after
/// [`RwSet::unmap`]: in between, where DMA is not coherent, it and the
/// device may see different bytes.
pub(crate) struct RwSet {
    ctxs: KVec<RwCtx>,
    pages: PageRefs,
    segs: KVec<PageSeg>,
    spares: RwSpares,
    /// The first context not posted yet: a set needing more Send Queue
    /// entries than a connection has room for goes in parts.
    next: usize,
}

/// rdma_rw contexts' memory kept per buffer: a READ's payload or a Reply
/// chunk takes one, a WRITE's data one, rarely more.
const RW_SPARES: usize = 2;

impl RwSet {
    fn new() -> Result<Self> {
        Ok(Self {
            ctxs: KVec::new(),
            pages: PageRefs::new(),
            segs: KVec::new(),
            spares: RwSpares::with_room(RW_SPARES)?,
            next: 0,
        })
    }

    /// The pages, for the request to fill or take back.
    pub(crate) fn pages(&mut self) -> &mut PageRefs {
        &mut self.pages
    }

    /// Contexts' memory kept for the next Reads or Writes.
    pub(crate) fn spares(&self) -> usize {
        self.spares.len()
    }

    /// Whether no Read or Write is set up.
    pub(crate) fn is_empty(&self) -> bool {
        self.ctxs.is_empty()
    }

    /// Send Queue entries the contexts post.
    pub(crate) fn wrs(&self) -> u32 {
        RwCtx::total_wrs(&self.ctxs)
    }

    /// Sets up an RDMA Read on `qp` of the peer's `len` bytes at `remote`
    /// under `rkey` into byte `dest` of the pages held.
    fn add_read(&mut self, qp: QpRef, dest: usize, len: usize, remote: u64, rkey: u32) -> Result {
        self.segs.clear();
        self.pages.segs(&mut self.segs, dest, len)?;
        // SAFETY: The pages are this set's, which drops its contexts
        // first; the QP outlives the set, whose endpoint destroys its
        // contexts before the QP (`QpRef`).
        let ctx = unsafe {
            RwCtx::on_qp(
                &mut self.spares,
                qp.ptr,
                qp.port,
                &self.segs,
                remote,
                rkey,
                RwOp::Read,
            )
        }?;
        self.ctxs.push(ctx, GFP_KERNEL)?;
        Ok(())
    }

    /// Sets up an RDMA Write on `qp` of the pieces the caller put in
    /// `self.segs` to the peer's memory at `remote` under `rkey`. The
    /// list is filled in place, not taken out and put back: dropping the
    /// empty `KVec` left behind calls the allocator, once per Reply.
    ///
    /// # Safety
    ///
    /// The pages of `self.segs` must be in this set's pages, or moved
    /// into them before the set is used again (or the contexts released
    /// first), and not written by the CPU while a Write of them is
    /// posted.
    unsafe fn add_write(&mut self, qp: QpRef, remote: u64, rkey: u32) -> Result {
        // SAFETY: The pages stay (the caller's promise); the QP outlives
        // the set, as for `add_read`.
        let ctx = unsafe {
            RwCtx::on_qp(
                &mut self.spares,
                qp.ptr,
                qp.port,
                &self.segs,
                remote,
                rkey,
                RwOp::Write,
            )
        }?;
        self.ctxs.push(ctx, GFP_KERNEL)?;
        Ok(())
    }

    /// Send Queue entries of the first `n` contexts, and of the rest.
    pub(crate) fn wrs_split(&self, n: usize) -> (u32, u32) {
        let (a, b) = self.ctxs.split_at(n.min(self.ctxs.len()));
        (RwCtx::total_wrs(a), RwCtx::total_wrs(b))
    }

    /// Send Queue entries of the contexts not posted yet.
    pub(crate) fn wrs_left(&self) -> u32 {
        RwCtx::total_wrs(self.ctxs.get(self.next..).unwrap_or(&[]))
    }

    /// The most Send Queue entries one context of the set takes: the
    /// least room it can go in.
    pub(crate) fn max_ctx_wrs(&self) -> u32 {
        self.ctxs.iter().map(RwCtx::wr_count).max().unwrap_or(0)
    }

    /// The contexts of the next part: from the first not posted, as many
    /// as fit in `room` entries (at least one). Marks them posted.
    fn next_part(&mut self, room: u32) -> Result<&mut [RwCtx]> {
        let start = self.next;
        let mut end = start;
        let mut wrs = 0u32;
        for ctx in self.ctxs.get(start..).unwrap_or(&[]) {
            let n = wrs.saturating_add(ctx.wr_count());
            if n > room {
                break;
            }
            wrs = n;
            end += 1;
        }
        if end == start {
            return Err(if start < self.ctxs.len() {
                E2BIG
            } else {
                EINVAL
            });
        }
        self.next = end;
        self.ctxs.get_mut(start..end).ok_or(EINVAL)
    }

    /// Unmaps the pages, which makes the Reads' data visible to the CPU,
    /// and keeps the contexts' memory for the next ones; the pages stay.
    pub(crate) fn unmap(&mut self) {
        self.next = 0;
        self.spares.reclaim(&mut self.ctxs);
    }

    /// Unmaps and puts the pages.
    pub(crate) fn release(&mut self) {
        self.unmap();
        self.pages.release();
    }
}

/// A Receive buffer's Reads being set up, on its endpoint's QP.
pub(crate) struct Reads<'a> {
    rw: &'a mut RwSet,
    qp: QpRef,
}

impl Reads<'_> {
    /// The pages the Reads fill.
    pub(crate) fn pages(&mut self) -> &mut PageRefs {
        self.rw.pages()
    }

    /// Sets up an RDMA Read of the peer's `len` bytes at `remote` under
    /// `rkey` into byte `dest` of the pages.
    pub(crate) fn add(&mut self, dest: usize, len: usize, remote: u64, rkey: u32) -> Result {
        self.rw.add_read(self.qp, dest, len, remote, rkey)
    }

    /// The Send Queue room the Reads need at once: all of it, or at least
    /// the largest one's, which cannot be split.
    pub(crate) fn room(&self) -> u32 {
        self.rw.wrs().max(self.rw.max_ctx_wrs())
    }

    /// Releases what was set up.
    pub(crate) fn release(&mut self) {
        self.rw.release();
    }
}

/// The endpoint's QP, for the rdma_rw contexts of its slots.
///
/// # Invariants
///
/// A live QP that outlives every slot of the endpoint it came from.
#[derive(Clone, Copy)]
struct QpRef {
    ptr: NonNull<sys::ib_qp>,
    port: u32,
}

impl<O: EpOwner> EpCore<O> {
    fn qp(&self) -> Result<QpRef> {
        let id = self.id.as_ref().ok_or(ENOTCONN)?;
        let qp = id.qp().ok_or(ENOTCONN)?;
        // INVARIANT: the endpoint destroys its slots before the id, which
        // destroys the QP.
        Ok(QpRef {
            ptr: qp.ptr,
            port: id.port_num(),
        })
    }
}

/// The endpoint's core, from one of its slots.
///
/// # Invariants
///
/// Points to the core of the endpoint whose slot holds it: the core is
/// pinned, and dropped after the slots ([`Endpoint`]'s fields).
struct CoreRef<O: EpOwner>(NonNull<EpCore<O>>);

impl<O: EpOwner> CoreRef<O> {
    fn get(&self) -> &EpCore<O> {
        // SAFETY: The core outlives the slot holding this (type
        // invariant), and is only ever shared.
        unsafe { self.0.as_ref() }
    }
}

/// The [`CqEntry`] ids of a slot's two completions: a Receive's and its
/// Reads', a Send's and its part's.
const MAIN: u64 = 0;
const SIDE: u64 = 1;

/// A Receive buffer's slot.
///
/// # Invariants
///
/// `held`, `wr` and `sge` are accessed only by the holder of the slot's
/// token (or by the completion handler that makes one, while the device
/// gave it back), or by the endpoint's drop once the QP was drained.
struct RecvSlot<O: EpOwner> {
    cqe: CqEntry<Self, MAIN>,
    read_cqe: CqEntry<Self, SIDE>,
    wr: Opaque<sys::ib_recv_wr>,
    sge: Opaque<sys::ib_sge>,
    core: CoreRef<O>,
    idx: u32,
    held: UnsafeCell<RecvHeld<O>>,
}

// SAFETY: What is not read-only is reached only by the holder of the
// slot's one token (type invariant), on whichever thread holds it; the
// state it reaches is `Send`.
unsafe impl<O: EpOwner> Sync for RecvSlot<O> {}

struct RecvHeld<O: EpOwner> {
    /// Declared first: its contexts go before the QP does.
    rw: RwSet,
    buf: DmaBuf,
    len: usize,
    state: O::RecvState,
}

crate::impl_has_cq_entry!(impl<O: EpOwner> RecvSlot<O>, MAIN, cqe);
crate::impl_has_cq_entry!(impl<O: EpOwner> RecvSlot<O>, SIDE, read_cqe);

impl<O: EpOwner> RecvSlot<O> {
    fn core(&self) -> &EpCore<O> {
        self.core.get()
    }
}

/// A Send buffer's slot; as [`RecvSlot`], with `held`.
struct SendSlot<O: EpOwner> {
    cqe: CqEntry<Self, MAIN>,
    /// Completes the Writes of a part posted ahead of the Send.
    part_cqe: CqEntry<Self, SIDE>,
    part: Atomic<u32>,
    core: CoreRef<O>,
    idx: u32,
    held: UnsafeCell<SendHeld<O>>,
}

// SAFETY: As for `RecvSlot`.
unsafe impl<O: EpOwner> Sync for SendSlot<O> {}

crate::impl_has_cq_entry!(impl<O: EpOwner> SendSlot<O>, MAIN, cqe);
crate::impl_has_cq_entry!(impl<O: EpOwner> SendSlot<O>, SIDE, part_cqe);

impl<O: EpOwner> SendSlot<O> {
    fn core(&self) -> &EpCore<O> {
        self.core.get()
    }
}

struct SendHeld<O: EpOwner> {
    rw: RwSet,
    buf: DmaBuf,
    state: O::SendState,
}

/// Sends posted and not yet completed, in posting order (the order the
/// Send Queue completes them in).
struct Posted {
    ring: [u32; MAX_SENDS as usize],
    head: usize,
    len: usize,
    /// Sends posted unsignalled since the last signalled one.
    unsignalled: u32,
}

impl Posted {
    fn push(&mut self, idx: u32) -> bool {
        if self.len >= self.ring.len() {
            return false;
        }
        self.ring[(self.head + self.len) % self.ring.len()] = idx;
        self.len += 1;
        true
    }

    fn contains(&self, idx: u32) -> bool {
        (0..self.len).any(|i| self.ring[(self.head + i) % self.ring.len()] == idx)
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
}

/// What the completion handlers reach: the owner, the CM id and QP, the
/// order of posted Sends.
///
/// # Invariants
///
/// `owner` is null, or set once, before the QP is created, to the CM
/// id's handler: the pinned owner ([`EpHome`]) this endpoint is a field
/// of, which does not move and is not dropped before the endpoint is, and
/// so outlives the id and every completion of the QP. `gate` is the QP's,
/// set before anything is posted on it; once it is closed no handler is
/// called.
#[pin_data]
struct EpCore<O: EpOwner> {
    owner: Atomic<*const O>,
    gate: SetOnce<Arc<QpGate>>,
    gen: u32,
    lkey: u32,
    dev: Device,
    pd: Arc<Pd>,
    send_cq: Arc<Cq>,
    recv_cq: Arc<Cq>,
    caps: QpCaps,
    id: SetOnce<CmId<O>>,
    #[pin]
    posted: SpinLock<Posted>,
    /// Where threads wait for a part of a Reply's Writes.
    #[pin]
    part_lock: SpinLock<()>,
    #[pin]
    part_cv: CondVar,
}

/// States of a Send slot's part of Writes.
const PART_OK: u32 = 0;
const PART_POSTED: u32 = 1;
const PART_FAILED: u32 = 2;

/// The sizes of an [`Endpoint`].
#[derive(Clone, Copy)]
pub(crate) struct EpSizes {
    /// Receive buffers, and their size.
    pub(crate) recvs: u32,
    pub(crate) recv_len: usize,
    /// Send buffers (at most [`MAX_SENDS`]), and their size.
    pub(crate) sends: u32,
    pub(crate) send_len: usize,
    /// Send Queue entries beside the Sends (unsignalled Writes of each
    /// Send, say); room for the drain's is added.
    pub(crate) send_extra: u32,
    /// rdma_rw contexts posted at once, and SGEs per work request.
    pub(crate) rw_ctxs: u32,
    pub(crate) send_sge: u32,
}

/// A connection's buffers and, once [`Endpoint::accept`] created it, its
/// QP on the CM id it owns.
///
/// # Invariants
///
/// `slots` are posted only through `core.gate`, the gate of the QP of
/// `core.id`. The slots are dropped after the gate was closed (the QP
/// drained, and nothing posted since) and before the QP is destroyed
/// ([`Drop`]), so no work request refers to freed memory and every
/// rdma_rw context is destroyed on a live QP.
pub(crate) struct Endpoint<O: EpOwner> {
    recvs: KVec<RecvSlot<O>>,
    sends: KVec<SendSlot<O>>,
    core: Pin<KBox<EpCore<O>>>,
}

// SAFETY: The slots' `held` parts are only reached through the unique
// token of each (type invariant of the slots), from whichever thread holds
// it; everything else is atomic, locked, or read-only.
unsafe impl<O: EpOwner> Send for Endpoint<O> {}
// SAFETY: As above.
unsafe impl<O: EpOwner> Sync for Endpoint<O> {}

impl<O: EpOwner> Endpoint<O>
where
    O::RecvState: Default,
    O::SendState: Default,
{
    /// Allocates two CQs and the buffers on `dev`, with `pd` (a PD of
    /// `dev`, allocated by the caller, which traces its failure), sized
    /// by `sizes` and clamped to what the device allows: the sizes used,
    /// and the tokens of the Send buffers. The Receives are posted by
    /// [`Endpoint::accept`].
    #[allow(clippy::type_complexity)]
    pub(crate) fn new(
        dev: &Device,
        pd: Arc<Pd>,
        sizes: EpSizes,
    ) -> Result<(Self, EpSizes, KVec<Parked<SendKind>>)> {
        let mut sizes = sizes;
        // Room for the drain's work request on each queue, within the
        // device's limits (svcrdma: `+ 1 /* drain */`).
        let max_wr = dev.max_qp_wr();
        sizes.recvs = sizes.recvs.min(max_wr.saturating_sub(1)).max(1);
        sizes.sends = sizes.sends.clamp(1, MAX_SENDS);
        let send_wr = (sizes.sends + sizes.send_extra + 1).min(max_wr);
        let recv_cq = Cq::new(dev, (sizes.recvs + 1).min(dev.max_cqe()))?;
        let send_cq = Cq::new(dev, (send_wr + sizes.rw_ctxs).min(dev.max_cqe()))?;
        let caps = QpCaps {
            send_wr: send_wr - 1,
            recv_wr: sizes.recvs + 1,
            send_sge: sizes.send_sge,
            rdma_ctxs: sizes.rw_ctxs,
        };
        let gen = gen_of(NEXT_GEN.fetch_add(1, Relaxed));
        let lkey = pd.local_dma_lkey();
        let core = KBox::pin_init(
            try_pin_init!(EpCore {
                owner: Atomic::new(core::ptr::null()),
                gate: SetOnce::new(),
                gen,
                lkey,
                dev: dev.clone(),
                pd,
                send_cq,
                recv_cq,
                caps,
                id: SetOnce::new(),
                posted <- new_spinlock!(
                    Posted {
                        ring: [0; MAX_SENDS as usize],
                        head: 0,
                        len: 0,
                        unsignalled: 0,
                    },
                    "rpcrdma_rs_ep_posted"
                ),
                part_lock <- new_spinlock!((), "rpcrdma_rs_ep_part"),
                part_cv <- new_condvar!("rpcrdma_rs_ep_part"),
            }? Error),
            GFP_KERNEL,
        )?;
        // INVARIANT: each slot holds its endpoint's core.
        let core_ptr = NonNull::from(&*core);
        let mut recvs = KVec::with_capacity(sizes.recvs as usize, GFP_KERNEL)?;
        for idx in 0..sizes.recvs {
            let buf = DmaBuf::new(dev, sizes.recv_len, DmaDir::FromDevice)?;
            let sge = sys::ib_sge {
                addr: buf.addr,
                length: buf.len_u32(),
                lkey,
            };
            recvs.push(
                RecvSlot {
                    cqe: CqEntry::new(),
                    read_cqe: CqEntry::new(),
                    wr: Opaque::new(sys::ib_recv_wr {
                        num_sge: 1,
                        ..Default::default()
                    }),
                    sge: Opaque::new(sge),
                    core: CoreRef(core_ptr),
                    idx,
                    held: UnsafeCell::new(RecvHeld {
                        rw: RwSet::new()?,
                        buf,
                        len: 0,
                        state: Default::default(),
                    }),
                },
                GFP_KERNEL,
            )?;
        }
        let mut sends = KVec::with_capacity(sizes.sends as usize, GFP_KERNEL)?;
        let mut initial = KVec::with_capacity(sizes.sends as usize, GFP_KERNEL)?;
        for idx in 0..sizes.sends {
            let buf = DmaBuf::new(dev, sizes.send_len, DmaDir::ToDevice)?;
            sends.push(
                SendSlot {
                    cqe: CqEntry::new(),
                    part_cqe: CqEntry::new(),
                    part: Atomic::new(PART_OK),
                    core: CoreRef(core_ptr),
                    idx,
                    held: UnsafeCell::new(SendHeld {
                        rw: RwSet::new()?,
                        buf,
                        state: Default::default(),
                    }),
                },
                GFP_KERNEL,
            )?;
            // INVARIANT: the one token of each Send buffer.
            initial.push(Parked::new(gen, idx), GFP_KERNEL)?;
        }
        // INVARIANT: no token exists yet but these; the QP does not.
        let ep = Self { recvs, sends, core };
        Ok((ep, sizes, initial))
    }
}

impl<O: EpOwner> Endpoint<O> {
    /// Accepts `req` for `owner`, with the endpoint it holds: creates the QP,
    /// posts every Receive and sends `param` (with our private data) to
    /// the peer. From now on the id's events go to `owner`, and so do the
    /// completions. On error the QP is drained at once: nothing stays
    /// posted, and the endpoint is only waiting to be dropped.
    ///
    /// `owner` is pinned: the id and the completions reach it by address
    /// until its endpoint is dropped, which is before anything else of it
    /// ([`owner!`](super::owner)).
    pub(crate) fn accept(
        owner: Pin<&O>,
        req: super::PendingConn,
        param: &mut super::ConnParam<'_>,
    ) -> Result {
        let owner = owner.get_ref();
        let this = owner.endpoint().as_ref().ok_or(EINVAL)?;
        let core = &*this.core;
        // INVARIANT: `owner` is pinned, and becomes the id's handler
        // below; this endpoint is its field (`EpHome`), which owns the
        // id. Set once, by whichever of `accept` and `connect` claims
        // the endpoint.
        if core.id.as_ref().is_some()
            || core
                .owner
                .cmpxchg(core::ptr::null(), core::ptr::from_ref(owner), Release)
                .is_err()
        {
            return Err(EBUSY);
        }
        let caps = core.caps;
        // SAFETY: `owner` is pinned and not `Unpin`, so it stays at its
        // address until dropped; dropping it drops this endpoint, and so
        // the id, before any other of its fields (`EpHome`): it outlives
        // the id.
        let (id, res) = unsafe {
            req.accept(
                owner,
                |id| {
                    id.create_qp(&core.pd, &core.send_cq, &core.recv_cq, &caps)?;
                    this.post_all_recvs(id)
                },
                param,
            )
        };
        if let Some(id) = id {
            // Cannot fail: claimed above.
            let _ = core.id.populate(id);
        }
        if res.is_err() {
            this.shutdown();
        }
        res
    }

    /// Connects over `dialing`, whose route is resolved and whose events
    /// go to `owner`, with the endpoint `owner` holds: creates the QP,
    /// posts every Receive and starts connecting with `param` (with our
    /// private data). The id's events tell how it ends
    /// ([`CmEvent::Established`](super::CmEvent) or an error), and the
    /// completions go to `owner`, pinned as for [`Endpoint::accept`]. On
    /// error the QP is drained at once, as for [`Endpoint::accept`].
    pub(crate) fn connect(
        owner: Pin<&O>,
        dialing: super::Dialing<'_, O>,
        param: &mut super::ConnParam<'_>,
    ) -> Result {
        let owner = owner.get_ref();
        // The id must be the owner's, which owns the endpoint it goes in.
        if !core::ptr::eq(dialing.handler(), owner) {
            return Err(EINVAL);
        }
        let this = owner.endpoint().as_ref().ok_or(EINVAL)?;
        let core = &*this.core;
        // INVARIANT: `owner` is pinned and is the id's handler (checked
        // above); this endpoint is its field (`EpHome`), which owns the
        // id. Set once, as in `accept`.
        if core.id.as_ref().is_some()
            || core
                .owner
                .cmpxchg(core::ptr::null(), core::ptr::from_ref(owner), Release)
                .is_err()
        {
            return Err(EBUSY);
        }
        // SAFETY: The id goes into this endpoint, which `owner`, its
        // handler, pinned, drops before any other of its fields
        // (`EpHome`), and so outlives.
        let mut id = unsafe { dialing.into_id() };
        let caps = core.caps;
        let res = id
            .create_qp(&core.pd, &core.send_cq, &core.recv_cq, &caps)
            .and_then(|()| this.post_all_recvs(&id));
        // Cannot fail: claimed above. Dropped otherwise, the id drains
        // its QP before it goes, while the slots still exist.
        let _ = core.id.populate(id);
        let res = res.and_then(|()| this.id().ok_or(EBUSY)?.connect(param));
        if res.is_err() {
            this.shutdown();
        }
        res
    }

    /// The protection domain of the QP: for memory the peer reaches
    /// through it.
    pub(crate) fn pd(&self) -> &Arc<Pd> {
        &self.core.pd
    }

    /// Takes the gate of `id`'s new QP for every post, then posts every
    /// Receive, before the peer can Send.
    fn post_all_recvs(&self, id: &CmId<O>) -> Result {
        let gate = id.gate().ok_or(ENOTCONN)?;
        if !self.core.gate.populate(gate.clone()) {
            return Err(EBUSY);
        }
        // INVARIANT: the one token of each Receive buffer, posted at once.
        let bufs = self.recvs.iter().map(RecvBuf::new);
        post_recvs(gate, bufs)
    }

    /// The QP's gate, once it exists.
    fn gate(&self) -> Result<&QpGate> {
        self.core.gate.as_ref().map(|g| &**g).ok_or(ENOTCONN)
    }

    /// The restrack ids of the QP's Send and Receive CQs (0 before
    /// accept), for the trace events.
    pub(crate) fn cq_ids(&self) -> (u32, u32) {
        self.id()
            .and_then(|id| id.qp())
            .map_or((0, 0), |qp| (qp.send_cq_id(), qp.recv_cq_id()))
    }

    /// The CM id, once accepted.
    pub(crate) fn id(&self) -> Option<&CmId<O>> {
        self.core.id.as_ref()
    }

    /// The device.
    pub(crate) fn device(&self) -> &Device {
        &self.core.dev
    }

    /// Turns a parked Receive token of this endpoint back into a token.
    pub(crate) fn recv(&self, p: Parked<RecvKind>) -> Option<RecvBuf<'_, O>> {
        let slot = self.recv_slot(p.gen(), p.idx())?;
        // INVARIANT: `p`, the buffer's ownership, is consumed.
        Some(RecvBuf::new(slot))
    }

    /// The Receive buffer a request context holds, borrowed with it.
    pub(crate) fn recv_in<'a>(&'a self, ctxt: &'a mut Ctxt) -> Option<Recv<'a, O>> {
        // Not consumed: `ctxt` still holds the buffer, and stays borrowed
        // as long as the view.
        let (gen, idx) = split(ctxt.raw().get());
        let slot = self.recv_slot(gen, idx)?;
        Some(Recv { slot })
    }

    /// Takes back the Receive buffer a request context held.
    pub(crate) fn recv_from(&self, ctxt: Ctxt) -> Option<RecvBuf<'_, O>> {
        self.recv(Parked {
            raw: ctxt.into_raw(),
            _kind: PhantomData,
        })
    }

    fn recv_slot(&self, gen: u32, idx: u32) -> Option<&RecvSlot<O>> {
        if gen != self.core.gen {
            return None;
        }
        self.recvs.get(idx as usize)
    }

    /// Turns a parked Send token of this endpoint back into a token.
    pub(crate) fn send(&self, p: Parked<SendKind>) -> Option<SendBuf<'_, O>> {
        if p.gen() != self.core.gen {
            return None;
        }
        let slot = self.sends.get(p.idx() as usize)?;
        // INVARIANT: `p` is consumed.
        Some(SendBuf {
            slot,
            _ep: PhantomData,
        })
    }

    /// Posts the Receives of `bufs` in one call. On failure those not
    /// posted stay with the endpoint until it is dropped: the connection
    /// has to close.
    pub(crate) fn post_recvs<'a>(&'a self, bufs: impl Iterator<Item = RecvBuf<'a, O>>) -> Result {
        post_recvs(self.gate()?, bufs)
    }

    /// Posts the RDMA Reads set up in `buf`'s [`RwSet`], which took `wrs`
    /// Send Queue entries; their completion hands `buf` to
    /// [`EpOwner::reads_done`]. With no Read set up, `buf` comes back. On
    /// a failed post (some Reads may be posted) the buffer stays with the
    /// endpoint: the connection has to close.
    ///
    /// At most `room` Send Queue entries are posted at once: a longer set
    /// goes in parts, each posted once the one before completed (the
    /// owner calls this again from [`EpOwner::reads_done`] while
    /// [`Recv::reads_left`]).
    pub(crate) fn post_reads<'a>(
        &'a self,
        buf: RecvBuf<'a, O>,
        room: u32,
    ) -> Result<(), PostError<RecvBuf<'a, O>>> {
        let gate = match self.gate() {
            Ok(gate) => gate,
            Err(e) => return Err(PostError::NotPosted(e, buf)),
        };
        let mut buf = buf;
        let cqe = buf.slot.read_cqe.as_ptr();
        let part: *mut [RwCtx] = match buf.held_mut().rw.next_part(room) {
            Ok(part) => part,
            Err(e) => return Err(PostError::NotPosted(e, buf)),
        };
        // SAFETY: The contexts are on the gate's QP (type invariant of
        // `RwSet`); they and the slot stay, unchanged, until the
        // completion on `read_cqe` hands the token back or the QP is
        // drained: the token is consumed here.
        let res = unsafe { gate.post_rw(part, cqe) };
        buf.consume();
        res.map_err(PostError::Lost)
    }

    /// Posts the RDMA Writes set up in `buf`'s [`RwSet`], then a Send of
    /// its first `len` bytes (With Invalidate of `invalidate` if given),
    /// in one call. `signal` decides whether the Send is signalled, from
    /// the count of Sends posted unsignalled since the last signalled one.
    /// The completion of this Send, or of a later one, hands the buffer to
    /// [`EpOwner::sent`]. A Send without Writes that fails to post comes
    /// back; with Writes, some may be posted, and the buffer stays with
    /// the endpoint: the connection has to close.
    pub(crate) fn post_send<'a>(
        &'a self,
        buf: SendBuf<'a, O>,
        len: usize,
        invalidate: Option<u32>,
        signal: impl FnOnce(u32) -> bool,
    ) -> Result<(), PostError<SendBuf<'a, O>>> {
        let gate = match self.gate() {
            Ok(gate) => gate,
            Err(e) => return Err(PostError::NotPosted(e, buf)),
        };
        let mut buf = buf;
        let slot = buf.slot;
        let held = buf.held();
        held.buf.sync_for_device(len);
        let mut sge = [held.buf.sge(0, len, self.core.lkey)];
        let start = held.rw.next.min(held.rw.ctxs.len());
        let has_writes = start < held.rw.ctxs.len();
        let writes: *mut [RwCtx] = &mut held.rw.ctxs[start..];
        // Held across the post: the ring's order is the Send Queue's.
        let mut posted = self.core.posted.lock();
        let signalled = signal(posted.unsignalled);
        // SAFETY: The slot's memory and its Writes stay, unchanged, until
        // the completion of this Send or of a later one hands the token
        // back (its `CqHandler`, in Send Queue order), or the QP is drained:
        // the token is consumed below once anything may be posted.
        let res = unsafe {
            gate.post_send_after_rw(slot.cqe.as_ptr(), &mut sge, writes, invalidate, signalled)
        };
        match res {
            Ok(()) => {
                // Cannot overflow: one entry per Send buffer.
                posted.push(slot.idx);
                posted.unsignalled = if signalled { 0 } else { posted.unsignalled + 1 };
                buf.consume();
                Ok(())
            }
            Err(e) if !has_writes => Err(PostError::NotPosted(e, buf)),
            Err(e) => {
                buf.consume();
                Err(PostError::Lost(e))
            }
        }
    }

    /// Posts the next Writes of `buf`'s set that fit in `room` Send Queue
    /// entries, ahead of its Send, and waits for them to complete: for a
    /// Reply whose Writes need more room than the connection has. Call it
    /// while [`SendBuf::writes`]' `wrs_left` is above `room`; the rest go
    /// with the Send.
    pub(crate) fn post_writes_part(&self, buf: &mut SendBuf<'_, O>, room: u32) -> Result {
        let gate = self.gate()?;
        let slot = buf.slot;
        slot.part.store(PART_POSTED, Relaxed);
        let part: *mut [RwCtx] = buf.held().rw.next_part(room)?;
        // SAFETY: The contexts are on the gate's QP (type invariant of
        // `RwSet`); they stay, unchanged, until the completion on
        // `part_cqe`, which this waits for below while it holds the token
        // (mutably borrowed): nothing else reaches them meanwhile. If the
        // post fails part way, the completion of a posted Write, flushed
        // or not, still comes, or the QP is drained.
        let res = unsafe { gate.post_rw(part, slot.part_cqe.as_ptr()) };
        if let Err(e) = res {
            // Some Writes may be posted, whose completion may never be
            // signalled: drain, so that none is in use when the caller
            // releases them. The connection is done for.
            self.shutdown();
            return Err(e);
        }
        let core = &*self.core;
        let mut guard = core.part_lock.lock();
        while slot.part.load(Acquire) == PART_POSTED {
            core.part_cv.wait(&mut guard);
        }
        drop(guard);
        if slot.part.load(Acquire) == PART_OK {
            Ok(())
        } else {
            Err(EIO)
        }
    }

    /// Closes the QP's gate, if the QP exists: the owner's handlers are
    /// not called any more, every posted work request completes
    /// (flushed), and nothing is posted afterwards. Must not be called
    /// from a completion handler (the drain waits for them). Idempotent.
    pub(crate) fn shutdown(&self) {
        // The id's: the gate every post goes through (`core.gate` is a
        // copy, set before the first), closed even if that copy is not.
        if let Some(gate) = self.id().and_then(CmId::gate) {
            gate.close();
        }
    }
}

impl<O: EpOwner> Drop for Endpoint<O> {
    fn drop(&mut self) {
        // No CM event reaches the owner from here on: its handler could
        // otherwise reach the slots (through tokens it keeps) while they
        // go, or post work nothing drains.
        if let Some(id) = self.id() {
            id.silence();
        }
        // INVARIANT: drained before the slots go, and nothing posted after
        // (a closed gate refuses posts; after an earlier `shutdown` this
        // returns at once, or once that drain is done); the slots go
        // (their rdma_rw contexts destroyed) before `core`, and with it
        // the id and its QP.
        self.shutdown();
        self.recvs.clear();
        self.sends.clear();
    }
}

/// Why a post did not take a token.
pub(crate) enum PostError<T> {
    /// Nothing was posted: the token comes back.
    NotPosted(Error, T),
    /// Some work may be posted: the buffer stays with the endpoint.
    Lost(Error),
}

/// Links and posts the Receives of `bufs` through `gate`.
fn post_recvs<'a, O: EpOwner>(gate: &QpGate, bufs: impl Iterator<Item = RecvBuf<'a, O>>) -> Result {
    let mut first: *mut sys::ib_recv_wr = core::ptr::null_mut();
    let mut last: *mut sys::ib_recv_wr = core::ptr::null_mut();
    for buf in bufs {
        let slot = buf.slot;
        let wr = slot.wr.get();
        // SAFETY: We hold the token, so the slot's work request is ours to
        // write (type invariant of `RecvSlot`), and so is the one `last`
        // points to (its token consumed by this loop, not yet posted); it
        // stays at its address (the slot's) until posted.
        unsafe {
            (*wr).sg_list = slot.sge.get();
            (*wr).next = core::ptr::null_mut();
            (*wr).__bindgen_anon_1.wr_cqe = slot.cqe.as_ptr();
            if last.is_null() {
                first = wr;
            } else {
                (*last).next = wr;
            }
        }
        last = wr;
        // Given to the device below; on failure it stays with the
        // endpoint.
        buf.consume();
    }
    if first.is_null() {
        return Ok(());
    }
    // SAFETY: The chain is of slots whose tokens were consumed: their
    // buffers stay mapped and untouched until each Receive completes and
    // its handler hands it back, or the gate is closed (the QP drained)
    // before the endpoint frees them.
    unsafe { gate.post_recv(first) }
}

/// A Receive buffer, owned: see the module documentation.
///
/// # Invariants
///
/// The one token of its slot: while it exists, nothing else reaches the
/// slot's `held` part, and the device does not own the buffer.
pub(crate) struct RecvBuf<'a, O: EpOwner> {
    view: Recv<'a, O>,
}

/// A Receive buffer borrowed: from its token, or with the request context
/// that holds it.
///
/// # Invariants
///
/// Made only from the slot's token or from the request context holding
/// it, and borrowing that: while it exists, nothing else reaches the
/// slot's `held` part.
pub(crate) struct Recv<'a, O: EpOwner> {
    slot: &'a RecvSlot<O>,
}

impl<'a, O: EpOwner> RecvBuf<'a, O> {
    /// The token of `slot`'s buffer. Only where it becomes the one token:
    /// its completion handed it back, or the token was parked.
    fn new(slot: &'a RecvSlot<O>) -> Self {
        Self {
            view: Recv { slot },
        }
    }

    /// The token is given up: the buffer is the device's now, or stays
    /// with the endpoint until it is dropped.
    fn consume(self) {}

    /// The buffer's index among the connection's Receive buffers (our
    /// completion id in the trace events).
    pub(crate) fn idx(&self) -> u32 {
        self.slot.idx
    }

    /// Puts the token away.
    pub(crate) fn park(self) -> Parked<RecvKind> {
        let gen = self.slot.core().gen;
        Parked::new(gen, self.slot.idx)
    }
}

impl<O: EpOwner> Recv<'_, O> {
    /// The one access to the slot's held part, shared.
    fn held(&self) -> &RecvHeld<O> {
        // SAFETY: The view borrows the slot's token (or the request
        // context holding it), so nothing else reaches `held` (type
        // invariant).
        unsafe { &*self.slot.held.get() }
    }

    /// The one access to the slot's held part, unique.
    fn held_mut(&mut self) -> &mut RecvHeld<O> {
        // SAFETY: As for `held`; `&mut self` makes the borrow unique.
        unsafe { &mut *self.slot.held.get() }
    }

    /// The bytes the device received.
    pub(crate) fn bytes(&self) -> &[u8] {
        let held = self.held();
        &held.buf.as_slice()[..held.len.min(held.buf.len())]
    }

    /// The owner's state.
    pub(crate) fn state(&mut self) -> &mut O::RecvState {
        &mut self.held_mut().state
    }

    /// The received bytes, the state, and the Reads to set up on the
    /// endpoint's QP, together: the Call is read while its Reads are set up.
    pub(crate) fn reads(&mut self) -> Result<(&[u8], &mut O::RecvState, Reads<'_>)> {
        let qp = self.slot.core().qp()?;
        let held = self.held_mut();
        let len = held.len.min(held.buf.len());
        let reads = Reads {
            rw: &mut held.rw,
            qp,
        };
        Ok((&held.buf.as_slice()[..len], &mut held.state, reads))
    }

    /// Whether Reads set up are not posted yet.
    pub(crate) fn reads_left(&self) -> bool {
        self.held().rw.wrs_left() > 0
    }

    /// The received bytes, the state and the Reads, together.
    pub(crate) fn parts(&mut self) -> (&[u8], &mut O::RecvState, &mut RwSet) {
        let held = self.held_mut();
        let len = held.len.min(held.buf.len());
        (&held.buf.as_slice()[..len], &mut held.state, &mut held.rw)
    }
}

impl<'a, O: EpOwner> core::ops::Deref for RecvBuf<'a, O> {
    type Target = Recv<'a, O>;

    fn deref(&self) -> &Recv<'a, O> {
        &self.view
    }
}

impl<'a, O: EpOwner> core::ops::DerefMut for RecvBuf<'a, O> {
    fn deref_mut(&mut self) -> &mut Recv<'a, O> {
        &mut self.view
    }
}

// SAFETY: The token is unique; while it, or the context it turns into,
// is held, the buffer is not posted and nothing writes its bytes (no
// method gives them mutably), so they stay.
unsafe impl<O: EpOwner> HeldBytes for RecvBuf<'_, O> {
    fn bytes(&self) -> &[u8] {
        Recv::bytes(self)
    }

    fn into_ctxt(self) -> Ctxt {
        self.park().into()
    }
}

/// A Send buffer, owned; as [`RecvBuf`].
pub(crate) struct SendBuf<'a, O: EpOwner> {
    slot: &'a SendSlot<O>,
    _ep: PhantomData<&'a Endpoint<O>>,
}

impl<O: EpOwner> SendBuf<'_, O> {
    /// As [`RecvBuf::consume`].
    fn consume(self) {}

    /// As [`RecvBuf::idx`], among the Send buffers.
    pub(crate) fn idx(&self) -> u32 {
        self.slot.idx
    }

    /// The one access to the slot's held part.
    fn held(&mut self) -> &mut SendHeld<O> {
        // SAFETY: The token is unique (type invariant); `&mut self` makes
        // the borrow unique.
        unsafe { &mut *self.slot.held.get() }
    }

    /// Puts the token away.
    pub(crate) fn park(self) -> Parked<SendKind> {
        let gen = self.slot.core().gen;
        Parked::new(gen, self.slot.idx)
    }

    /// The buffer, for the CPU to fill.
    pub(crate) fn buf(&mut self) -> &mut [u8] {
        self.held().buf.as_mut_slice()
    }

    /// The owner's state.
    pub(crate) fn state(&mut self) -> &mut O::SendState {
        &mut self.held().state
    }

    /// The Writes to post with the Send.
    pub(crate) fn writes(&mut self) -> &mut RwSet {
        &mut self.held().rw
    }

    /// Sets up in [`SendBuf::writes`] an RDMA Write of `len` bytes at
    /// byte `src` of the set's own pages ([`RwSet::pages`]) to the peer's
    /// memory at `remote` under `rkey`.
    pub(crate) fn add_write(&mut self, src: usize, len: usize, remote: u64, rkey: u32) -> Result {
        let qp = self.slot.core().qp()?;
        let rw = &mut self.held().rw;
        rw.segs.clear();
        rw.pages.segs(&mut rw.segs, src, len)?;
        // SAFETY: The pieces lie in the set's own pages, which it puts
        // only after its contexts are gone (type invariant of `RwSet`).
        unsafe { rw.add_write(qp, remote, rkey) }
    }

    /// Sets up in [`SendBuf::writes`] an RDMA Write of each
    /// `(src, len, remote, rkey)` of `writes`: `len` bytes at byte `src`
    /// of `rqst`'s Reply to the peer's memory at `remote`. The Reply's
    /// pages then move into the set, which holds them until the Writes are
    /// released; the Reply is left empty. The bytes written.
    pub(crate) fn add_reply_writes(
        &mut self,
        rqst: &mut SvcRqst<'_>,
        writes: impl Iterator<Item = (u32, u32, u64, u32)>,
    ) -> Result<u64> {
        let qp = self.slot.core().qp()?;
        let rw = &mut self.held().rw;
        let mut bytes = 0u64;
        let mut res = Ok(());
        for (src, len, remote, rkey) in writes {
            res = rqst.res().page_segs(&mut rw.segs, src, len).and_then(|()| {
                // SAFETY: The pieces lie in the Reply's pages, which move
                // into the set below before it is used again, or, on an
                // error, the contexts are released first.
                unsafe { rw.add_write(qp, remote, rkey) }
            });
            if res.is_err() {
                break;
            }
            bytes += u64::from(len);
        }
        if res.is_ok() && !rw.is_empty() {
            res = rqst.take_reply_pages(&mut rw.pages);
        }
        if let Err(e) = res {
            rw.unmap();
            return Err(e);
        }
        Ok(bytes)
    }
}

/// The Send buffers a completion hands back, in posting order.
pub(crate) struct Retired<'a, O: EpOwner> {
    sends: &'a [SendSlot<O>],
    idxs: [u32; MAX_SENDS as usize],
    len: usize,
    next: usize,
}

impl<O: EpOwner> Retired<'_, O> {
    /// The index of the Send whose completion this is, the last one.
    pub(crate) fn completed_idx(&self) -> Option<u32> {
        self.idxs.get(self.len.checked_sub(1)?).copied()
    }
}

impl<'a, O: EpOwner> Iterator for Retired<'a, O> {
    type Item = SendBuf<'a, O>;

    fn next(&mut self) -> Option<SendBuf<'a, O>> {
        while self.next < self.len {
            let idx = self.idxs[self.next];
            self.next += 1;
            if let Some(slot) = self.sends.get(idx as usize) {
                // INVARIANT: taken off the posted ring once, by the
                // completion that covers it.
                return Some(SendBuf {
                    slot,
                    _ep: PhantomData,
                });
            }
        }
        None
    }
}

/// The owner of an endpoint's completions, unless its gate is closed.
fn owner_of<O: EpOwner>(core: &EpCore<O>) -> Option<&O> {
    // Completions come only once the gate exists (every post goes
    // through it); those the drain flushes are the endpoint's own.
    if core.gate.as_ref().is_none_or(|gate| gate.is_closed()) {
        return None;
    }
    // SAFETY: Null, or set before the QP was created to the pinned
    // owner, which outlives the id and so this completion of its QP (type
    // invariant of `EpCore`).
    unsafe { core.owner.load(Acquire).as_ref() }
}

// The completion handlers. The slots are private to this module, and
// their entries are posted only with the work requests whose completions
// these are: only the CQ calls them.

/// A Receive completed, successfully or not.
impl<O: EpOwner> CqHandler<MAIN> for RecvSlot<O> {
    fn done(&self, wc: &Wc<'_>) {
        // INVARIANT: the completion of the post that took the token: the
        // buffer is the token's again.
        let mut buf = RecvBuf::new(self);
        let held = buf.held_mut();
        held.len = if wc.ok() { wc.byte_len() } else { 0 };
        if wc.ok() {
            held.buf.sync_for_cpu(held.len);
        }
        if let Some(owner) = owner_of(self.core()) {
            owner.received(buf, wc);
        }
    }
}

/// The last RDMA Read of a Receive buffer's Call completed
/// ([`Endpoint::post_reads`]).
impl<O: EpOwner> CqHandler<SIDE> for RecvSlot<O> {
    fn done(&self, wc: &Wc<'_>) {
        // INVARIANT: the signalled last Read completed, and every Read
        // before it: the buffer is the token's again.
        let buf = RecvBuf::new(self);
        if let Some(owner) = owner_of(self.core()) {
            owner.reads_done(buf, wc);
        }
    }
}

/// A signalled or failed Send completed ([`Endpoint::post_send`]).
impl<O: EpOwner> CqHandler<MAIN> for SendSlot<O> {
    fn done(&self, wc: &Wc<'_>) {
        let core = self.core();
        let mut idxs = [0u32; MAX_SENDS as usize];
        let mut len = 0;
        {
            let mut posted = core.posted.lock();
            // Every posted Send is on the ring until a completion covers
            // it.
            if !posted.contains(self.idx) {
                return;
            }
            // The Send Queue completes in order: this Send completed, and
            // so did every Send posted before it.
            while let Some(idx) = posted.pop() {
                if let Some(s) = idxs.get_mut(len) {
                    *s = idx;
                    len += 1;
                }
                if idx == self.idx {
                    break;
                }
            }
        }
        let Some(owner) = owner_of(core) else {
            return;
        };
        // The owner's endpoint is this slot's (type invariant of
        // `EpCore`); checked, since its slots become tokens below.
        let Some(ep) = owner.endpoint().as_ref() else {
            return;
        };
        if !core::ptr::eq(&*ep.core, core) {
            return;
        }
        owner.sent(
            Retired {
                sends: &ep.sends,
                idxs,
                len,
                next: 0,
            },
            wc,
        );
    }
}

/// The last Write of a part posted ahead of a Send completed
/// ([`Endpoint::post_writes_part`]).
impl<O: EpOwner> CqHandler<SIDE> for SendSlot<O> {
    fn done(&self, wc: &Wc<'_>) {
        let core = self.core();
        let status = if wc.ok() { PART_OK } else { PART_FAILED };
        // Under the lock the waiter checks it under: no wake-up is lost.
        let _guard = core.part_lock.lock();
        self.part.store(status, Release);
        core.part_cv.notify_all();
    }
}
