// SPDX-License-Identifier: GPL-2.0

//! A pool of fast-registration (FRWR) memory regions, each with its REG_MR
//! and LOCAL_INV work requests. [`FrwrPool::register_held`] hands out an owned
//! [`FrwrMr`]; [`FrwrPool::release`] takes it back, so an MR has exactly
//! one owner from registration until it is free again.
//!
//! Posting an MR's REG_MR turns its handle into a [`PostedMrs`], which
//! [`FrwrPool::release`] does not take: the device may not have executed
//! the REG_MR yet, and an MR unmapped (or registered anew) under it would
//! give the peer's key pages that are no longer the MR's. A posted MR
//! comes back as an [`FrwrMr`] only from a proof that its REG_MR is done:
//! the completion of a LOCAL_INV posted behind it
//! ([`super::RecvToken::invalidate`]), the peer's invalidation of its key
//! ([`PostedMrs::take_remote`]), or the drained QP
//! ([`FrwrPool::reclaim`]). Dropped, it stays in use until the pool goes.

use core::cell::UnsafeCell;

use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};
use kernel::sync::Arc;

use super::qp::SendChain;
use super::{
    CqEntry, CqHandler, Device, HasCqEntry, HeldPages, Mr, PageHold, PageSeg, Pd, QpGate,
    Registered, Wc,
};
use crate::sunrpc::trace;
use crate::sys;

/// Told when a REG_MR or an unsignalled LOCAL_INV of the pool fails or
/// is flushed: the QP is in the error state.
pub(crate) trait FrwrOwner: Send + Sync {
    /// A work request completed with `wc`, not successfully.
    fn mr_failed(&self, wc: &Wc<'_>);
}

const FREE: u32 = 0;
const BUSY: u32 = 1;
/// Taken out of use: its state is unknown after a failed operation.
const DEAD: u32 = 2;

/// An MR of a [`FrwrPool`], registered by [`FrwrPool::register_held`]; give it
/// back with [`FrwrPool::release`] once the peer can no longer use it. One
/// never released stays in use until its pool goes with the connection
/// (whose QP is destroyed first, so no key of it works any more).
#[must_use]
pub(crate) struct FrwrMr {
    idx: u16,
}

/// One MR with its work requests.
///
/// # Invariants
///
/// Whoever moved `state` from `FREE` to `BUSY` (and so holds the slot's
/// [`FrwrMr`]) owns `mr`, `reg_wr`, `inv_wr` and `kept` until it stores
/// `FREE` again. `kept`, when set, holds the
/// memory `mr` was last registered over, and is dropped after `mr`.
struct Slot<O: FrwrOwner> {
    mr: UnsafeCell<Mr>,
    reg_wr: UnsafeCell<sys::ib_reg_wr>,
    inv_wr: UnsafeCell<sys::ib_send_wr>,
    /// Where a failed REG_MR completes; `inv_cqe`, a failed unsignalled
    /// LOCAL_INV (two, to tell them apart in the trace events).
    cqe: CqEntry<Slot<O>, REG_CQE>,
    inv_cqe: CqEntry<Slot<O>, INV_CQE>,
    state: Atomic<u32>,
    rkey: Atomic<u32>,
    /// The MR's restrack id, for the trace events.
    mr_id: u32,
    /// Told of failures; every slot holds it.
    owner: Arc<O>,
    /// Memory the pool keeps for [`FrwrPool::register_owned`], or the
    /// hold on the pages of [`FrwrPool::register_held`].
    kept: UnsafeCell<Option<Kept>>,
}

// SAFETY: `mr` and the work requests are used only by the owner of the
// slot's `BUSY` state (type invariant); the rest is atomic, or an `Arc`
// of a `Send + Sync` owner.
unsafe impl<O: FrwrOwner> Sync for Slot<O> {}
// SAFETY: The MR may be used and freed from any thread; `owner` is an
// `Arc` of a `Send + Sync` owner.
unsafe impl<O: FrwrOwner> Send for Slot<O> {}

const REG_CQE: u64 = 0;
const INV_CQE: u64 = 1;

// SAFETY: `cqe` is a `CqEntry<Self, REG_CQE>` field at this offset.
unsafe impl<O: FrwrOwner> HasCqEntry<REG_CQE> for Slot<O> {
    const OFFSET: usize = core::mem::offset_of!(Self, cqe);
}

// SAFETY: `inv_cqe` is a `CqEntry<Self, INV_CQE>` field at this offset.
unsafe impl<O: FrwrOwner> HasCqEntry<INV_CQE> for Slot<O> {
    const OFFSET: usize = core::mem::offset_of!(Self, inv_cqe);
}

impl<O: FrwrOwner> Slot<O> {
    /// A REG_MR or an unsignalled LOCAL_INV completed: only errors and
    /// flushes do.
    fn failed(&self, wc: &Wc<'_>) {
        if !wc.ok() {
            self.owner.mr_failed(wc);
        }
    }
}

/// A REG_MR completed (unsignalled: it failed or was flushed).
impl<O: FrwrOwner> CqHandler<REG_CQE> for Slot<O> {
    fn done(&self, wc: &Wc<'_>) {
        trace::xprtrdma_wc_mr(trace::MrWc::FastReg, wc, || self.mr_id);
        self.failed(wc);
    }
}

/// A LOCAL_INV before a Reply's last completed (unsignalled: it failed
/// or was flushed).
impl<O: FrwrOwner> CqHandler<INV_CQE> for Slot<O> {
    fn done(&self, wc: &Wc<'_>) {
        trace::xprtrdma_wc_mr(trace::MrWc::Li, wc, || self.mr_id);
        self.failed(wc);
    }
}

/// What a slot keeps while its MR may be used: the memory it registers,
/// or a hold on it.
enum Kept {
    Buf(#[allow(dead_code)] KVec<u8>),
    Pages(#[allow(dead_code)] PageHold),
}

/// A connection's FRWR MRs.
///
/// # Invariants
///
/// `slots` is never resized after creation.
pub(crate) struct FrwrPool<O: FrwrOwner> {
    slots: KVec<Slot<O>>,
    next: Atomic<usize>,
    depth: u32,
    /// Closed (the QP drained) before the slots go.
    gate: Arc<QpGate>,
}

impl<O: FrwrOwner> Drop for FrwrPool<O> {
    fn drop(&mut self) {
        // No REG_MR or LOCAL_INV of ours is outstanding after this: their
        // work requests and completion entries may go.
        self.gate.close();
    }
}

impl<O: FrwrOwner> FrwrPool<O> {
    /// `count` MRs of `depth` pages on `pd`, registered and invalidated
    /// through `gate`, reporting failures to `owner`, which the pool keeps.
    pub(crate) fn new_shared(
        owner: Arc<O>,
        gate: Arc<QpGate>,
        pd: &Arc<Pd>,
        dev: &Device,
        depth: u32,
        count: usize,
    ) -> Result<Self> {
        // Every slot has a handle, and `NO_MR` is none of them.
        let count = count.min(usize::from(NO_MR));
        let mut slots = KVec::with_capacity(count, GFP_KERNEL)?;
        for _ in 0..count {
            let mr = Mr::new(pd, dev, depth)?;
            let (rkey, mr_id) = (mr.rkey(), mr.id());
            slots.push(
                // INVARIANT: free.
                Slot {
                    mr: UnsafeCell::new(mr),
                    reg_wr: UnsafeCell::new(sys::ib_reg_wr::default()),
                    inv_wr: UnsafeCell::new(sys::ib_send_wr::default()),
                    cqe: CqEntry::new(),
                    inv_cqe: CqEntry::new(),
                    state: Atomic::new(FREE),
                    rkey: Atomic::new(rkey),
                    mr_id,
                    owner: owner.clone(),
                    kept: UnsafeCell::new(None),
                },
                GFP_KERNEL,
            )?;
        }
        Ok(Self {
            slots,
            next: Atomic::new(0),
            depth,
            gate,
        })
    }

    /// The gate the pool posts through.
    pub(super) fn gate(&self) -> &Arc<QpGate> {
        &self.gate
    }

    /// Pages per MR.
    pub(crate) fn depth(&self) -> u32 {
        self.depth
    }

    /// MRs not free: registered and not yet released, or dead.
    pub(crate) fn in_use(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.state.load(Acquire) == BUSY)
            .count()
    }

    fn slot(&self, mr: &FrwrMr) -> Option<&Slot<O>> {
        self.slots.get(usize::from(mr.idx))
    }

    /// Takes a free MR.
    fn get(&self) -> Option<FrwrMr> {
        let n = self.slots.len();
        let start = self.next.load(Relaxed);
        for k in 0..n {
            let i = start.wrapping_add(k) % n.max(1);
            let slot = self.slots.get(i)?;
            if slot.state.cmpxchg(FREE, BUSY, Acquire).is_ok() {
                self.next.store(i.wrapping_add(1), Relaxed);
                return u16::try_from(i).ok().map(|idx| FrwrMr { idx });
            }
        }
        None
    }

    /// Registers the first `len` bytes of `buf` on a free MR for
    /// `writing`, as [`FrwrPool::register_held`] does. The pool keeps `buf`
    /// until the MR is released live ([`FrwrPool::release`]) or the pool
    /// is dropped, after the MR: its pages stay allocated as long as the
    /// peer may use the key.
    pub(crate) fn register_owned(
        &self,
        buf: KVec<u8>,
        len: usize,
        writing: bool,
    ) -> Result<(FrwrMr, Registered)> {
        const PAGE: usize = kernel::page::PAGE_SIZE;
        let mut segs = KVec::new();
        let mut at = buf.as_ptr() as usize;
        let end = at + len.min(buf.len());
        while at < end {
            let offset = at & (PAGE - 1);
            let n = (PAGE - offset).min(end - at);
            // SAFETY: `at` lies in `buf`, kmalloc memory, which is in the
            // kernel's direct map.
            let page = unsafe { sys::rpcrdma_rs_virt_to_page(at as *const core::ffi::c_void) };
            segs.push(
                PageSeg {
                    page,
                    offset: offset as u32,
                    len: n as u32,
                },
                GFP_KERNEL,
            )?;
            at += n;
        }
        // SAFETY: The pages are `buf`'s, which the slot keeps until the MR
        // is released or dropped.
        unsafe { self.register_keeping(&segs, writing, Some(Kept::Buf(buf))) }
    }

    /// Registers `pages` on a free MR for `writing` (the peer writes) and
    /// prepares its REG_MR (see [`FrwrPool::chain_reg`]), keeping their hold until the MR is
    /// released (when the peer can no longer use it) or, when it never is,
    /// dropped with the pool.
    pub(crate) fn register_held(
        &self,
        pages: HeldPages<'_>,
        writing: bool,
    ) -> Result<(FrwrMr, Registered)> {
        // SAFETY: The pages stay allocated while their hold lives (type
        // invariant of `HeldPages`), which the slot keeps as long as the
        // MR may be used.
        unsafe { self.register_keeping(pages.segs(), writing, Some(Kept::Pages(pages.hold()))) }
    }

    /// Registers `segs` on a free MR for `writing` (the peer writes),
    /// keeping `keep` with the MR, and prepares its REG_MR (see
    /// [`FrwrPool::chain_reg`]); returns the MR and the segment it gives the
    /// peer.
    ///
    /// # Safety
    ///
    /// As for [`Mr::map`]: the pages stay allocated until the MR is
    /// released, and the peer cannot use the key by then.
    unsafe fn register_keeping(
        &self,
        segs: &[PageSeg],
        writing: bool,
        keep: Option<Kept>,
    ) -> Result<(FrwrMr, Registered)> {
        let mr = self.get().ok_or(ENOBUFS)?;
        let slot = self.slot(&mr).ok_or(EINVAL)?;
        // SAFETY: We moved the slot to BUSY, so we own it (type invariant);
        // its last registration was released, so the memory it kept may
        // go.
        let (m, wr) = unsafe {
            *slot.kept.get() = keep;
            (&mut *slot.mr.get(), &mut *slot.reg_wr.get())
        };
        // SAFETY: The caller's promise.
        match unsafe { m.map(segs, writing) } {
            Ok(reg) => {
                m.reg_wr(wr, writing, slot.cqe.as_ptr());
                slot.rkey.store(reg.rkey, Relaxed);
                Ok((mr, reg))
            }
            Err(e) => {
                slot.state.store(FREE, Release);
                Err(e)
            }
        }
    }

    /// The R_key `mr` gave the peer.
    pub(crate) fn rkey(&self, mr: &FrwrMr) -> u32 {
        self.slot(mr).map_or(0, |s| s.rkey.load(Relaxed))
    }

    /// What `mr`'s registration gives the peer, for the trace events.
    pub(crate) fn registered(&self, mr: &FrwrMr) -> Option<Registered> {
        let slot = self.slot(mr)?;
        // SAFETY: Whoever holds the handle owns the slot's MR (type
        // invariant): nobody changes it while we read it.
        unsafe { (*slot.mr.get()).registered() }
    }

    /// `mr`'s restrack id, for the trace events.
    pub(crate) fn mr_id(&self, mr: &FrwrMr) -> u32 {
        self.slot(mr).map_or(0, |s| s.mr_id)
    }

    /// Posts the REG_MRs of `mrs`, registered and not yet posted. They are
    /// posted MRs whatever the result: a failed post may have queued some.
    pub(crate) fn post_reg<const N: usize>(&self, mrs: FrwrList<N>) -> (PostedMrs<N>, Result) {
        let mut chain = SendChain::new();
        self.chain_reg(&mrs, &mut chain);
        let res = match chain.first() {
            // SAFETY: The work requests are of slots we own (holding their
            // handles); they complete on the slots' entries, and register
            // memory the slots keep, all of which stay until the pool is
            // dropped, which closes the gate first.
            Some(first) => unsafe { self.gate.post_send(first) },
            None => Ok(()),
        };
        (PostedMrs::posted(mrs), res)
    }

    /// Appends the REG_MRs of `mrs`, registered and not yet posted, to
    /// `chain`. Once `chain` is posted (or its post tried), the caller
    /// turns `mrs` into [`PostedMrs`].
    pub(super) fn chain_reg<const N: usize>(&self, mrs: &FrwrList<N>, chain: &mut SendChain) {
        for mr in mrs.as_slice() {
            if let Some(slot) = self.slot(mr) {
                // SAFETY: Holding the handle, we own the slot's work
                // requests; the REG_MR's `ib_send_wr` is the first field of
                // its `ib_reg_wr`; the slot lives as long as the pool.
                unsafe { chain.push(slot.reg_wr.get().cast()) };
            }
        }
    }

    /// Appends a LOCAL_INV of each of `mrs` to `chain`, unsignalled but
    /// for the last, which completes on `last`. The LOCAL_INVs go behind
    /// the REG_MRs, which were posted before `mrs` existed.
    ///
    /// # Safety
    ///
    /// `chain` is posted through this pool's gate, if at all, before the
    /// handles of `mrs` are used again; `last` stays valid until that gate
    /// is closed.
    pub(super) unsafe fn chain_inv<const N: usize>(
        &self,
        mrs: &PostedMrs<N>,
        last: *mut sys::ib_cqe,
        chain: &mut SendChain,
    ) {
        let n = mrs.len();
        for (k, mr) in mrs.as_slice().iter().enumerate() {
            let Some(slot) = self.slot(mr) else {
                continue;
            };
            let signalled = k + 1 == n;
            let cqe = if signalled {
                last
            } else {
                slot.inv_cqe.as_ptr()
            };
            // SAFETY: Holding the handle, we own the slot's MR and work
            // requests (type invariant); the slot lives as long as the
            // pool, which closes the gate before it goes.
            unsafe {
                (*slot.mr.get()).inv_wr(&mut *slot.inv_wr.get(), cqe, signalled);
                chain.push(slot.inv_wr.get());
            }
        }
    }

    /// Drains the QP (closing its gate; not from one of its completion
    /// handlers), after which no REG_MR of `mrs` is outstanding and the QP
    /// lets the peer reach nothing, and returns them to the pool.
    pub(crate) fn reclaim<const N: usize>(&self, mut mrs: PostedMrs<N>) {
        self.gate.close();
        while let Some(mr) = mrs.list.pop() {
            self.release(mr, false);
        }
    }

    /// Unmaps `mr`, never posted or with its REG_MR proven done (see
    /// [`PostedMrs`]), and returns it to the pool; `dead` takes it out of
    /// use instead.
    pub(crate) fn release(&self, mr: FrwrMr, dead: bool) {
        let Some(slot) = self.slot(&mr) else {
            return;
        };
        // SAFETY: Holding the handle, we own the slot (type invariant).
        // An `FrwrMr` has no REG_MR outstanding (never posted, or proven
        // done: `PostedMrs`), so the device no longer reads its page list.
        // Released live, the MR cannot be used any more (invalidated,
        // never posted, or its QP drained): what it kept may go; a dead
        // one keeps it until the pool goes, after its QP.
        unsafe {
            (*slot.mr.get()).unmap();
            if !dead {
                *slot.kept.get() = None;
            }
        }
        slot.state.store(if dead { DEAD } else { FREE }, Release);
        if !dead {
            // Reuse the MR that was just released first, like rpcrdma.ko's
            // per-request MR cache: its page list is warm in the driver,
            // where a cursor walking the whole pool touches a cold one
            // each time.
            self.next.store(usize::from(mr.idx), Relaxed);
        }
    }
}

/// Up to `N` MRs, owned, in order: the MRs of one RPC.
pub(crate) struct FrwrList<const N: usize> {
    /// The first `n` are MRs; the rest are [`NO_MR`], which no pool has.
    mrs: [FrwrMr; N],
    n: u16,
}

/// A handle of no MR: pools have fewer slots.
const NO_MR: u16 = u16::MAX;

impl<const N: usize> FrwrList<N> {
    /// An empty list.
    pub(crate) const fn new() -> Self {
        const { assert!(N < NO_MR as usize) };
        Self {
            mrs: [const { FrwrMr { idx: NO_MR } }; N],
            n: 0,
        }
    }

    /// Appends `mr`; gives it back when the list is full.
    pub(crate) fn push(&mut self, mr: FrwrMr) -> core::result::Result<(), FrwrMr> {
        match self.mrs.get_mut(usize::from(self.n)) {
            Some(slot) => {
                *slot = mr;
                self.n += 1;
                Ok(())
            }
            None => Err(mr),
        }
    }

    /// Takes the last MR.
    pub(crate) fn pop(&mut self) -> Option<FrwrMr> {
        let last = self.n.checked_sub(1)?;
        self.n = last;
        self.mrs
            .get_mut(usize::from(last))
            .map(|m| core::mem::replace(m, FrwrMr { idx: NO_MR }))
    }

    /// Takes the MR at `pos`, keeping the order of the others.
    fn remove(&mut self, pos: usize) -> Option<FrwrMr> {
        // In place: the MRs after it move up one, it goes last.
        let n = self.len();
        self.mrs.get_mut(pos..n)?.rotate_left(1);
        self.pop()
    }

    /// The MRs.
    pub(crate) fn as_slice(&self) -> &[FrwrMr] {
        self.mrs.get(..self.len()).unwrap_or(&[])
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(self.n)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Moves the MRs of `other` behind ours, in order, leaving `other`
    /// empty: only the MRs there are copied, not the whole array. Past
    /// our capacity (never: the caller's list is empty) an MR is dropped,
    /// left in use until its pool goes.
    fn append(&mut self, other: &mut Self) {
        for mr in other.mrs.iter_mut().take(usize::from(other.n)) {
            let _ = self.push(core::mem::replace(mr, FrwrMr { idx: NO_MR }));
        }
        other.n = 0;
    }

    /// Drops the MRs, which stay in use until their pool goes: for MRs
    /// whose REG_MRs a failed post may have queued.
    pub(crate) fn forget(&mut self) {
        while self.pop().is_some() {}
    }
}

/// MRs whose REG_MRs were posted (or whose post was tried): the device may
/// still be about to execute them. See the module documentation for the
/// ways out; none unmaps an MR whose REG_MR may be outstanding.
///
/// # Invariants
///
/// Every REG_MR of `list` was posted, or its post tried, before the value
/// was made.
pub(crate) struct PostedMrs<const N: usize> {
    list: FrwrList<N>,
}

impl<const N: usize> PostedMrs<N> {
    /// None.
    pub(crate) const fn new() -> Self {
        Self {
            list: FrwrList::new(),
        }
    }

    /// `list`, whose REG_MRs the caller posted or tried to post.
    pub(super) fn posted(list: FrwrList<N>) -> Self {
        // INVARIANT: the caller's word.
        Self { list }
    }

    /// The MRs.
    pub(crate) fn as_slice(&self) -> &[FrwrMr] {
        self.list.as_slice()
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Moves the MRs of `list`, whose REG_MRs the caller posted or tried
    /// to post, behind ours, leaving `list` empty; in place, copying only
    /// the MRs.
    pub(super) fn append_posted(&mut self, list: &mut FrwrList<N>) {
        // INVARIANT: the caller's word.
        self.list.append(list);
    }

    /// Drops the MRs, which stay in use until their pool goes: MRs of a
    /// connection that went, with their keys.
    pub(crate) fn forget(&mut self) {
        self.list.forget();
    }

    /// The MRs, their REG_MRs proven done by the caller.
    pub(super) fn done(self) -> FrwrList<N> {
        self.list
    }

    /// Takes the MR of `pool` at `pos`, whose key the peer invalidated,
    /// as `inv` proves: the device matched the key of its registration,
    /// so that REG_MR executed, and the key no longer works. `None` if
    /// the MR at `pos` has another key.
    pub(crate) fn take_remote<O: FrwrOwner>(
        &mut self,
        pool: &FrwrPool<O>,
        pos: usize,
        inv: RemoteInv,
    ) -> Option<FrwrMr> {
        let mr = self.list.as_slice().get(pos)?;
        if pool.rkey(mr) != inv.0 {
            return None;
        }
        self.list.remove(pos)
    }
}

/// The R_key the peer invalidated with Send With Invalidate, read from a
/// successful Receive completion ([`super::Wc::invalidated`]).
#[derive(Clone, Copy)]
pub(crate) struct RemoteInv(u32);

impl RemoteInv {
    /// From a successful Receive completion that carried it.
    pub(super) fn new(rkey: u32) -> Self {
        Self(rkey)
    }

    /// The key.
    pub(crate) fn rkey(self) -> u32 {
        self.0
    }
}
