// SPDX-License-Identifier: GPL-2.0

//! A client connection's Receive and Send buffers, posted through a
//! [`QpGate`].
//!
//! [`RecvRing`]: each Receive buffer belongs to the device (posted), to
//! the ring (idle, waiting for the next batch of reposts), or to the one
//! [`RecvToken`] a completion hands its owner. Only a token reaches the
//! bytes; reposting consumes it, and so does posting the LOCAL_INVs of a
//! Reply's MRs, whose completion hands it back, with the MRs free to go. A token that must wait is
//! parked ([`ParkedRecv`]), a number only its ring turns back into a
//! token, once.
//!
//! [`SendRing`]: Send buffers used in turn; Sends complete in order, so a
//! buffer is free again once a completion covered its Send. The ring
//! keeps the RPC pages a Send gathers mapped until then.
//!
//! Both close the gate (draining the QP) in their `Drop`: nothing they
//! posted is outstanding when their memory goes.

use core::num::NonZeroU32;

use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed, Release};
use kernel::sync::barrier::{smp_mb, Full as Barrier};
use kernel::sync::Arc;
use kernel::types::Opaque;

use super::qp::{send_wr, SendChain};
use super::{
    CqEntry, CqHandler, Device, DmaBuf, DmaDir, ExclusiveCell, FrwrList, FrwrOwner, FrwrPool,
    HasCqEntry, MappedPages, PostedMrs, QpGate, Wc, MAX_MAPPED_PAGES,
};
use crate::sys;

/// Most MRs a [`RecvToken::invalidate`] invalidates at once: those of one
/// RPC.
pub(crate) const MAX_INV_MRS: usize = 48;

/// The MRs of one RPC.
pub(crate) type InvList = FrwrList<MAX_INV_MRS>;

/// The MRs of one RPC, their REG_MRs posted.
pub(crate) type PostedList = PostedMrs<MAX_INV_MRS>;

/// What owns a [`RecvRing`] and receives its completions.
pub(crate) trait RecvOwner: Send + Sync + Sized + 'static {
    /// What the owner keeps with each buffer, shared: anyone holding the
    /// ring reads it.
    type State: Send + Sync;

    /// A Receive completed, successfully or not (then with no bytes).
    fn received(&self, ring: &RecvRing<Self>, buf: RecvToken<'_, Self>, wc: &Wc<'_>);
    /// The LOCAL_INVs of `mrs` posted by [`RecvToken::invalidate`]
    /// completed, successfully or not: their REG_MRs, before them on the
    /// Send Queue, are done.
    fn invalidated(
        &self,
        ring: &RecvRing<Self>,
        buf: RecvToken<'_, Self>,
        mrs: InvList,
        wc: &Wc<'_>,
    );
    /// Buffer `idx` is about to be posted, on the Receive CQ `cq_id`.
    fn posting(&self, _cq_id: u32, _idx: u32) {}
    /// A pass posted `count` buffers with result `res` (`ESHUTDOWN`, the
    /// connection going, is no failure: nothing was posted); `active`
    /// counts those posted before them.
    fn posted(&self, _cq_id: u32, _count: u32, _active: impl FnOnce() -> u32, _res: &Result) {}
}

/// Posted: the device's.
const POSTED: u32 = 0;
/// Handed to a token.
const HELD: u32 = 1;
/// Waiting for the next batch.
const IDLE: u32 = 2;

/// Unique numbers for rings, so that a parked token only goes back to its
/// own ring.
static NEXT_GEN: Atomic<u32> = Atomic::new(1);

/// One Receive buffer.
///
/// # Invariants
///
/// `wr`, `sge`, the buffer's bytes and `len` are reached only by whoever
/// owns the buffer by `state` (the token holder while `HELD`, the poster
/// that moved it from `IDLE` to `POSTED`, the completion handler while the
/// device gives it back). `ring` is set, to the ring holding the entry,
/// before anything is posted.
struct RecvEntry<O: RecvOwner> {
    cqe: CqEntry<RecvEntry<O>, RECV_CQE>,
    inv_cqe: CqEntry<RecvEntry<O>, INV_CQE>,
    wr: Opaque<sys::ib_recv_wr>,
    sge: Opaque<sys::ib_sge>,
    buf: DmaBuf,
    len: Atomic<usize>,
    state: Atomic<u32>,
    /// The MRs whose LOCAL_INVs this buffer's token waits for.
    inv: ExclusiveCell<PostedList>,
    idx: u32,
    ring: Atomic<*const RecvRing<O>>,
    user: O::State,
}

/// [`CqEntry`] ids of a [`RecvEntry`]: its Receive, and the last
/// LOCAL_INV of its Reply's MRs.
const RECV_CQE: u64 = 0;
const INV_CQE: u64 = 1;

// SAFETY: `cqe` is a `CqEntry<Self, RECV_CQE>` field at this offset.
unsafe impl<O: RecvOwner> HasCqEntry<RECV_CQE> for RecvEntry<O> {
    const OFFSET: usize = core::mem::offset_of!(Self, cqe);
}

// SAFETY: `inv_cqe` is a `CqEntry<Self, INV_CQE>` field at this offset.
unsafe impl<O: RecvOwner> HasCqEntry<INV_CQE> for RecvEntry<O> {
    const OFFSET: usize = core::mem::offset_of!(Self, inv_cqe);
}

// SAFETY: The plain parts are reached only by the entry's owner of the
// moment (type invariant), from whichever thread that is; the rest is
// atomic, in cells, or `Sync`.
unsafe impl<O: RecvOwner> Sync for RecvEntry<O> {}
// SAFETY: As above.
unsafe impl<O: RecvOwner> Send for RecvEntry<O> {}

impl<O: RecvOwner> RecvEntry<O> {
    /// The ring holding the entry.
    fn ring(&self) -> &RecvRing<O> {
        // SAFETY: Set to the holding ring before `RecvRing::new` returned
        // it, so before anything reached the entry (type invariant); the
        // ring owns the entry, so it outlives this borrow.
        unsafe { &*self.ring.load(Acquire) }
    }
}

/// A connection's Receive buffers; see the module documentation.
///
/// # Invariants
///
/// `entries` is never resized. Everything is posted through `gate`, which
/// `Drop` closes before the entries go.
pub(crate) struct RecvRing<O: RecvOwner> {
    entries: KVec<RecvEntry<O>>,
    gate: Arc<QpGate>,
    owner: O,
    gen: NonZeroU32,
    /// Buffers counted idle and not yet reposted, and the batch size at
    /// which they go back.
    idle: Atomic<u32>,
    batch: u32,
    /// Held by whoever is reposting.
    posting: Atomic<bool>,
    /// Where the next repost pass starts looking: past the last buffer
    /// posted. Buffers are posted in ring order and the device fills them
    /// in the order posted, so the idle ones mostly follow on from here;
    /// a pass from the start looked through half the ring for a batch.
    /// Only the holder of `posting` uses it.
    next: Atomic<u32>,
}

// SAFETY: The entries' plain parts are reached only by their owner of the
// moment (type invariant of `RecvEntry`), from whichever thread that is;
// the rest is atomic, in cells, or read-only.
unsafe impl<O: RecvOwner> Send for RecvRing<O> {}
// SAFETY: As above.
unsafe impl<O: RecvOwner> Sync for RecvRing<O> {}

impl<O: RecvOwner> RecvRing<O> {
    /// `n` Receive buffers of `size` bytes on `dev`, posted through `gate`
    /// with `lkey`, each with the state `state` makes, reposted `batch` at
    /// a time; their completions go to `owner`. Nothing is posted yet
    /// ([`RecvRing::post_all`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        owner: O,
        gate: Arc<QpGate>,
        dev: &Device,
        n: u32,
        size: usize,
        lkey: u32,
        batch: u32,
        mut state: impl FnMut() -> O::State,
    ) -> Result<Arc<Self>> {
        let mut entries = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        for idx in 0..n {
            let buf = DmaBuf::new(dev, size, DmaDir::FromDevice)?;
            let sge = sys::ib_sge {
                addr: buf.addr,
                length: buf.len_u32(),
                lkey,
            };
            entries.push(
                RecvEntry {
                    cqe: CqEntry::new(),
                    inv_cqe: CqEntry::new(),
                    wr: Opaque::new(sys::ib_recv_wr {
                        num_sge: 1,
                        ..Default::default()
                    }),
                    sge: Opaque::new(sge),
                    buf,
                    len: Atomic::new(0),
                    // Not posted yet: `post_all` posts every idle buffer.
                    state: Atomic::new(IDLE),
                    inv: ExclusiveCell::new(PostedList::new()),
                    idx,
                    ring: Atomic::new(core::ptr::null()),
                    user: state(),
                },
                GFP_KERNEL,
            )?;
        }
        let gen = NonZeroU32::new(NEXT_GEN.fetch_add(1, Relaxed)).unwrap_or(NonZeroU32::MIN);
        let ring = Arc::new(
            Self {
                entries,
                gate,
                owner,
                gen,
                idle: Atomic::new(n),
                batch: batch.max(1),
                posting: Atomic::new(false),
                next: Atomic::new(0),
            },
            GFP_KERNEL,
        )?;
        for e in &ring.entries {
            // INVARIANT: the ring holding the entry, which the `Arc` keeps
            // at this address; before anything is posted.
            e.ring.store(&*ring, Release);
        }
        Ok(ring)
    }

    /// Posts every idle buffer: at connect, before the peer can Send.
    pub(crate) fn post_all(&self) -> Result {
        self.post_idle()
    }

    /// The ring's owner.
    pub(crate) fn owner(&self) -> &O {
        &self.owner
    }

    /// The owner's state of each buffer.
    pub(crate) fn states(&self) -> impl Iterator<Item = &O::State> {
        self.entries.iter().map(|e| &e.user)
    }

    /// Turns a parked token of this ring back into a token.
    pub(crate) fn unpark(&self, p: ParkedRecv) -> Option<RecvToken<'_, O>> {
        if p.gen != self.gen {
            return None;
        }
        let entry = self.entries.get(p.idx as usize)?;
        // INVARIANT: `p`, the buffer's ownership, is consumed.
        Some(RecvToken { ring: self, entry })
    }

    /// The restrack id of the QP's Receive CQ.
    fn cq_id(&self) -> u32 {
        self.gate.recv_cq_id()
    }

    /// Buffers posted now: the device's.
    fn active(&self) -> u32 {
        self.entries
            .iter()
            .filter(|e| e.state.load(Relaxed) == POSTED)
            .count() as u32
    }

    /// Hands the idle buffers back to the device, in one chain per pass.
    /// Whoever finds another thread at it leaves the work to that thread,
    /// which looks again before it stops. Once the gate is closed, the
    /// buffers stay with the ring.
    fn post_idle(&self) -> Result {
        loop {
            if self.posting.xchg(true, Full) {
                return Ok(());
            }
            let mut head: *mut sys::ib_recv_wr = core::ptr::null_mut();
            let mut tail: *mut sys::ib_recv_wr = core::ptr::null_mut();
            let mut n = 0u32;
            // Stop at the buffers counted so far: one counted but not yet
            // marked is posted by its own thread or the next pass.
            let want = self.idle.load(Acquire);
            let start = (self.next.load(Relaxed) as usize).min(self.entries.len());
            let (looked, rest) = self.entries.split_at(start);
            for e in Iterator::chain(rest.iter(), looked) {
                if n >= want {
                    break;
                }
                // A plain load first: most buffers are posted, and a
                // failing compare-exchange still costs a locked operation.
                if e.state.load(Relaxed) == IDLE && e.state.cmpxchg(IDLE, POSTED, Full).is_ok() {
                    e.buf.sync_for_device(e.buf.len());
                    let wr = e.wr.get();
                    // SAFETY: Moving the buffer from IDLE made it, and its
                    // work request, ours until posted (type invariant);
                    // entries never move. `tail` is the work request of
                    // an entry moved from IDLE earlier in this pass.
                    unsafe {
                        (*wr).sg_list = e.sge.get();
                        (*wr).next = core::ptr::null_mut();
                        (*wr).__bindgen_anon_1.wr_cqe = e.cqe.as_ptr();
                        if tail.is_null() {
                            head = wr;
                        } else {
                            (*tail).next = wr;
                        }
                    }
                    tail = wr;
                    self.next.store(e.idx + 1, Relaxed);
                    n += 1;
                    self.owner.posting(self.cq_id(), e.idx);
                }
            }
            self.idle.fetch_sub(n, Full);
            let posted = if n == 0 {
                Ok(())
            } else {
                // SAFETY: A chain of our entries' Receives, whose buffers
                // and entries stay until the gate is closed (`Drop`).
                let res = unsafe { self.gate.post_recv(head) };
                let active = || self.active().saturating_sub(n);
                self.owner.posted(self.cq_id(), n, active, &res);
                match res {
                    // The connection is going: nothing to post on.
                    Err(e) if e == ESHUTDOWN => Ok(()),
                    res => res,
                }
            };
            self.posting.store(false, Release);
            posted?;
            // A buffer marked idle while we held `posting` was left to us
            // (its thread saw the flag set): between our release of the
            // flag and our look at the count, and its increment of the
            // count and its look at the flag, one of us sees the other.
            smp_mb(Barrier);
            if n == 0 || self.idle.load(Relaxed) < self.batch {
                return Ok(());
            }
        }
    }
}

impl<O: RecvOwner> Drop for RecvRing<O> {
    fn drop(&mut self) {
        // Nothing posted from the entries is outstanding after this.
        self.gate.close();
    }
}

/// A Receive buffer, owned; see the module documentation.
///
/// # Invariants
///
/// The one owner of `entry`, which is `HELD`: nothing else reaches its
/// bytes.
pub(crate) struct RecvToken<'a, O: RecvOwner> {
    ring: &'a RecvRing<O>,
    entry: &'a RecvEntry<O>,
}

/// A [`RecvToken`] put away. Neither `Clone` nor `Copy`: it stands for the
/// buffer's ownership until its ring takes it back.
pub(crate) struct ParkedRecv {
    gen: NonZeroU32,
    idx: u32,
}

impl<'a, O: RecvOwner> RecvToken<'a, O> {
    /// The bytes received.
    pub(crate) fn bytes(&self) -> &[u8] {
        let len = self.entry.len.load(Relaxed);
        self.entry.buf.as_slice().get(..len).unwrap_or(&[])
    }

    /// The whole buffer.
    pub(crate) fn buffer(&self) -> &[u8] {
        self.entry.buf.as_slice()
    }

    /// The buffer's number in its ring.
    pub(crate) fn idx(&self) -> u32 {
        self.entry.idx
    }

    /// The owner's state of this buffer.
    pub(crate) fn state(&self) -> &'a O::State {
        &self.entry.user
    }

    /// Puts the token away.
    pub(crate) fn park(self) -> ParkedRecv {
        ParkedRecv {
            gen: self.ring.gen,
            idx: self.entry.idx,
        }
    }

    /// Gives the buffer back: it is reposted with the next batch. An
    /// error means the connection cannot receive any more.
    pub(crate) fn repost(self) -> Result {
        let ring = self.ring;
        // Counted before it is marked, so the count never falls below
        // the number of marked buffers.
        let idle = ring.idle.fetch_add(1, Full) + 1;
        // INVARIANT: the token is given up here.
        self.entry.state.store(IDLE, Release);
        if idle >= ring.batch {
            ring.post_idle()
        } else {
            Ok(())
        }
    }

    /// Posts a LOCAL_INV of each of `mrs`, MRs of `pool`, whose
    /// completion hands the token and `mrs` to
    /// [`RecvOwner::invalidated`]. When nothing was posted, both come
    /// back; `ESHUTDOWN` once the connection is going.
    pub(crate) fn invalidate<F: FrwrOwner>(
        self,
        pool: &FrwrPool<F>,
        mrs: PostedList,
    ) -> core::result::Result<(), (Error, Self, PostedList)> {
        // The pool's LOCAL_INVs must go on this ring's QP, whose closing
        // drains them before our entries go.
        if !Arc::ptr_eq(pool.gate(), &self.ring.gate) || mrs.is_empty() {
            return Err((EINVAL, self, mrs));
        }
        let Some(mut inv) = self.entry.inv.try_borrow_mut() else {
            return Err((EBUSY, self, mrs));
        };
        *inv = mrs;
        let mut chain = SendChain::new();
        // SAFETY: The chain is posted through the pool's gate, which is
        // ours, before the handles, which only the token holder reaches in
        // `inv`, are used again; `inv_cqe` is in our entry and the other
        // entries are the pool's, which stay until that gate is closed.
        let res = unsafe {
            pool.chain_inv(&inv, self.entry.inv_cqe.as_ptr(), &mut chain);
            // Not holding `inv` during the post: the completion may take
            // it at once.
            drop(inv);
            chain
                .first()
                .map_or(Err(EINVAL), |first| self.ring.gate.post_send(first))
        };
        match res {
            // INVARIANT: the token is the completion's now.
            Ok(()) => Ok(()),
            Err(e) => {
                // The last, signalled LOCAL_INV was not posted: its
                // completion never comes, and the token and `inv` stay
                // ours.
                let mrs = self
                    .entry
                    .inv
                    .try_borrow_mut()
                    .map(|mut inv| core::mem::replace(&mut *inv, PostedList::new()))
                    .unwrap_or_else(PostedList::new);
                Err((e, self, mrs))
            }
        }
    }
}

/// A Receive completed.
impl<O: RecvOwner> CqHandler<RECV_CQE> for RecvEntry<O> {
    fn done(&self, wc: &Wc<'_>) {
        let ring = self.ring();
        let len = if wc.ok() {
            wc.byte_len().min(self.buf.len())
        } else {
            0
        };
        self.buf.sync_for_cpu(len);
        self.len.store(len, Relaxed);
        // INVARIANT: the device gave the buffer back: the one token.
        self.state.store(HELD, Relaxed);
        ring.owner
            .received(ring, RecvToken { ring, entry: self }, wc);
    }
}

/// The last LOCAL_INV of [`RecvToken::invalidate`] completed.
impl<O: RecvOwner> CqHandler<INV_CQE> for RecvEntry<O> {
    fn done(&self, wc: &Wc<'_>) {
        let ring = self.ring();
        // The LOCAL_INVs went behind the REG_MRs (`PostedMrs`): this
        // completion of the last says that the REG_MRs are done.
        let mrs = self
            .inv
            .try_borrow_mut()
            .map(|mut inv| core::mem::replace(&mut *inv, PostedList::new()).done())
            .unwrap_or_else(InvList::new);
        // INVARIANT: the token that `invalidate` gave up comes back.
        ring.owner
            .invalidated(ring, RecvToken { ring, entry: self }, mrs, wc);
    }
}

/// What owns a [`SendRing`] and learns of its completions.
pub(crate) trait SendOwner: Send + Sync + Sized + 'static {
    /// Every Send up to number `seq` completed (successfully or not: see
    /// `wc`).
    fn sent(&self, seq: u64, wc: &Wc<'_>);
}

/// Why [`SendRing::post`] did not send.
pub(crate) enum SendError {
    /// No Send buffer free.
    NoBuffer,
    /// The message does not fit.
    TooBig,
    /// Posting failed: the connection is unusable.
    Post,
}

/// What [`SendRing::post`] posted.
pub(crate) struct SendPosted {
    /// The Send's number.
    pub(crate) seq: u64,
    /// SGEs it gathers.
    pub(crate) sges: usize,
    pub(crate) signalled: bool,
}

/// One Send buffer.
///
/// # Invariants
///
/// While its Send (number `seq`) is outstanding, the device reads the
/// slot's `buf` and the pages of its `mapped`; they are the sender's
/// again once the ring's `done` reached `seq`, and `mapped` is the
/// completion handler's while it runs for this Send. `ring` is set as for
/// [`RecvEntry`].
struct SendEntry<O: SendOwner> {
    cqe: CqEntry<SendEntry<O>>,
    /// In one cell, borrowed once per Send: the sender fills the buffer
    /// and places the mapping together.
    slot: ExclusiveCell<SendSlot>,
    seq: Atomic<u64>,
    ring: Atomic<*const SendRing<O>>,
}

/// A Send buffer and the RPC pages its Send gathers, if any.
struct SendSlot {
    buf: DmaBuf,
    mapped: Option<MappedPages>,
}

// SAFETY: `cqe` is a `CqEntry<Self>` field at this offset.
unsafe impl<O: SendOwner> HasCqEntry for SendEntry<O> {
    const OFFSET: usize = core::mem::offset_of!(Self, cqe);
}

impl<O: SendOwner> SendEntry<O> {
    /// Drops the mapping, in place, if there is one and the slot is free.
    fn unmap(&self) {
        if let Some(mut slot) = self.slot.try_borrow_mut() {
            if slot.mapped.is_some() {
                slot.mapped = None;
            }
        }
    }

    /// The ring holding the entry.
    fn ring(&self) -> &SendRing<O> {
        // SAFETY: As for `RecvEntry::ring`.
        unsafe { &*self.ring.load(Acquire) }
    }
}

/// A connection's Send buffers; see the module documentation.
///
/// # Invariants
///
/// `entries` is never resized, and Send number `s` uses entry
/// `(s - 1) % len`. Everything is posted through `gate`, which `Drop`
/// closes before the entries go.
pub(crate) struct SendRing<O: SendOwner> {
    entries: KVec<SendEntry<O>>,
    gate: Arc<QpGate>,
    owner: O,
    lkey: u32,
    /// Sends posted.
    posted: Atomic<u64>,
    /// The number of the last Send a completion covered.
    done: Atomic<u64>,
    /// Held by the one sender posting.
    sender: ExclusiveCell<()>,
}

// SAFETY: The entries' parts are in cells or atomic; the rest is atomic,
// in a cell, or read-only.
unsafe impl<O: SendOwner> Send for SendRing<O> {}
// SAFETY: As above.
unsafe impl<O: SendOwner> Sync for SendRing<O> {}

impl<O: SendOwner> SendRing<O> {
    /// `n` Send buffers of `size` bytes on `dev`, posted through `gate`
    /// with `lkey`; their completions go to `owner`.
    pub(crate) fn new(
        owner: O,
        gate: Arc<QpGate>,
        dev: &Device,
        n: u32,
        size: usize,
        lkey: u32,
    ) -> Result<Arc<Self>> {
        let mut entries = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        for _ in 0..n {
            entries.push(
                SendEntry {
                    cqe: CqEntry::new(),
                    slot: ExclusiveCell::new(SendSlot {
                        buf: DmaBuf::new(dev, size, DmaDir::ToDevice)?,
                        mapped: None,
                    }),
                    seq: Atomic::new(0),
                    ring: Atomic::new(core::ptr::null()),
                },
                GFP_KERNEL,
            )?;
        }
        let ring = Arc::new(
            Self {
                entries,
                gate,
                owner,
                lkey,
                posted: Atomic::new(0),
                done: Atomic::new(0),
                sender: ExclusiveCell::new(()),
            },
            GFP_KERNEL,
        )?;
        for e in &ring.entries {
            // INVARIANT: as for `RecvRing::new`.
            e.ring.store(&*ring, Release);
        }
        Ok(ring)
    }

    /// The number the next Send gets.
    pub(crate) fn next_seq(&self) -> u64 {
        self.posted.load(Relaxed).wrapping_add(1)
    }

    /// The restrack id of the QP's Send CQ, for the trace events.
    pub(crate) fn cq_id(&self) -> u32 {
        self.gate.send_cq_id()
    }

    /// Fills the next free Send buffer with `fill` and posts it, after the
    /// REG_MRs of `mrs`, MRs of `regs` registered and not yet posted, in
    /// one call; returns the Send, and moves the MRs, posted, to `posted`
    /// (in place: the lists are large, the MRs few). `fill` returns
    /// `(split, len)`: the Send gathers the first `split` bytes of the
    /// buffer, then the `mapped` pages, then the buffer up to `len`; or
    /// `None` if the message does not fit. `signal` decides, told whether
    /// pages are mapped, whether the Send is signalled. The pages stay
    /// mapped until the Send completed (`mapped` is left empty once they
    /// are the Send's). At least `keep` free buffers are
    /// left. `posting` sees the Send just before it is posted (its
    /// completion may run before the post returns), as rpcrdma.ko traces
    /// it; `failed` gets the error of a post that failed. Not sent, the
    /// MRs stay in `mrs`, free to release, unless the post failed, which
    /// may have queued some: then they are dropped, in use until the pool
    /// goes (a failed post closes the connection).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn post<F: FrwrOwner>(
        &self,
        keep: u64,
        regs: Option<&FrwrPool<F>>,
        mrs: &mut InvList,
        posted_to: &mut PostedList,
        mapped: &mut Option<MappedPages>,
        signal: impl FnOnce(bool) -> bool,
        fill: impl FnOnce(&mut [u8]) -> Option<(usize, usize)>,
        posting: impl FnOnce(&SendPosted),
        failed: impl FnOnce(Error),
    ) -> core::result::Result<SendPosted, SendError> {
        let Some(_sender) = self.sender.try_borrow_mut() else {
            return Err(SendError::Post);
        };
        let n = self.entries.len() as u64;
        if n == 0 {
            return Err(SendError::Post);
        }
        let posted = self.posted.load(Relaxed);
        if posted.wrapping_sub(self.done.load(Acquire)) >= n.saturating_sub(keep) {
            return Err(SendError::NoBuffer);
        }
        let seq = posted.wrapping_add(1);
        let Some(e) = usize::try_from(posted % n)
            .ok()
            .and_then(|idx| self.entries.get(idx))
        else {
            return Err(SendError::Post);
        };
        // Send `seq - n`, the last one of this entry, has completed (the
        // check above): the buffer and the mapping are ours.
        let Some(mut slot) = e.slot.try_borrow_mut() else {
            return Err(SendError::Post);
        };
        let SendSlot { buf, mapped: held } = &mut *slot;
        let Some((split, len)) = fill(buf.as_mut_slice()) else {
            return Err(SendError::TooBig);
        };
        let len = len.min(buf.len());
        let split = split.min(len);
        buf.sync_for_device(len);
        let lkey = self.lkey;
        // Without mapped pages (the usual Send) two SGEs at most: zeroing
        // room for a mapping's SGEs on every Send costs more than filling it.
        let mut inline = [sys::ib_sge::default(); 2];
        let mut gathered;
        let sges: &mut [sys::ib_sge] = if mapped.is_some() {
            gathered = [sys::ib_sge::default(); MAX_MAPPED_PAGES + 2];
            &mut gathered
        } else {
            &mut inline
        };
        let mut k = 0;
        {
            let first = core::iter::once(buf.sge(0, split, lkey));
            let pages = mapped.iter().flat_map(|m| m.sges(lkey));
            let last = core::iter::once(buf.sge(split, len - split, lkey));
            let parts =
                Iterator::chain(Iterator::chain(first, pages), last).filter(|sge| sge.length > 0);
            for (slot, sge) in sges.iter_mut().zip(parts) {
                *slot = sge;
                k += 1;
            }
        }
        let signalled = signal(mapped.is_some());
        e.seq.store(seq, Release);
        // In place: the mapping is large and rarely there, and moving an
        // empty one still copies all of it. One left in the entry is of a
        // Send that completed.
        if held.is_some() {
            *held = None;
        }
        if mapped.is_some() {
            core::mem::swap(held, mapped);
        }
        // The CPU is done with the buffer; the device reads it until the
        // Send completes.
        drop(slot);
        let mut chain = SendChain::new();
        if let Some(pool) = regs {
            // The REG_MRs go on our QP only, whose closing drains them.
            if !Arc::ptr_eq(pool.gate(), &self.gate) {
                e.unmap();
                return Err(SendError::Post);
            }
            pool.chain_reg(mrs, &mut chain);
        }
        let Ok(mut wr) = send_wr(
            e.cqe.as_ptr(),
            sges.get_mut(..k).unwrap_or(&mut []),
            signalled,
            None,
        ) else {
            e.unmap();
            return Err(SendError::Post);
        };
        let sent = SendPosted {
            seq,
            sges: k,
            signalled,
        };
        posting(&sent);
        // SAFETY: `wr` stays on this stack until the post, which consumes
        // it (a pool work request that still points at it is re-linked
        // before it is posted again: `SendChain::push`). The Send's
        // entry, buffer and mapped pages stay until it completed or the
        // gate, closed by our `Drop`, drained the QP (type invariants);
        // the REG_MRs are the pool's, which keeps them, and their memory,
        // likewise.
        let res = unsafe {
            chain.push(&mut wr);
            chain
                .first()
                .map_or(Err(EINVAL), |first| self.gate.post_send(first))
        };
        if let Err(err) = res {
            failed(err);
            // The Send, last in the chain, was not posted: the mapping is
            // still ours. The post may have queued some REG_MRs: their MRs
            // (dropped here) stay in use until the pool goes with the
            // connection, which the caller closes.
            e.unmap();
            mrs.forget();
            return Err(SendError::Post);
        }
        self.posted.store(seq, Relaxed);
        posted_to.append_posted(mrs);
        Ok(sent)
    }
}

impl<O: SendOwner> Drop for SendRing<O> {
    fn drop(&mut self) {
        // No Send of ours is outstanding after this.
        self.gate.close();
    }
}

/// A signalled or failed Send completed.
impl<O: SendOwner> CqHandler for SendEntry<O> {
    fn done(&self, wc: &Wc<'_>) {
        let ring = self.ring();
        // The Send completed and its number is not yet published: the
        // mapping is ours, and the device is done with it.
        self.unmap();
        let seq = self.seq.load(Acquire);
        // Sends complete in order: this one covers every Send before it.
        let mut done = ring.done.load(Relaxed);
        while done < seq {
            match ring.done.cmpxchg(done, seq, Full) {
                Ok(_) => break,
                Err(now) => done = now,
            }
        }
        ring.owner.sent(seq, wc);
    }
}
