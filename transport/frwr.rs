// SPDX-License-Identifier: GPL-2.0

//! The connection's pool of FRWR memory regions: registration for a
//! chunk, the REG_MR and LOCAL_INV work requests, and their completions.

use core::cell::UnsafeCell;

use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};
use kernel::sync::Arc;

use super::connection::{Ep, Shared, SharedRef};
use super::receive::{Pending, RecvCtx};
use crate::rdma::{CqEntry, CqHandler, Mr, PageSeg, Pd, Qp, Registered, Wc};
use crate::sys;

/// MR slot states.
const MR_FREE: u32 = 0;

pub(super) const MR_BUSY: u32 = 1;

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
    pub(super) state: Atomic<u32>,
    rkey: Atomic<u32>,
    shared: SharedRef,
}

// SAFETY: `mr` and the work requests are used only by the owner of the
// slot's `MR_BUSY` state (type invariant); the rest is atomic; `shared` is
// only used as `&Shared`, which is `Sync`.
unsafe impl Sync for MrSlot {}

crate::impl_has_cq_entry!(MrSlot, 0, cqe);

/// Completion of an unsignalled REG_MR or LOCAL_INV: only errors report.
impl CqHandler for MrSlot {
    fn done(&self, wc: &Wc<'_>) {
        let shared = &self.shared;
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
    pub(super) slots: KVec<MrSlot>,
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
    pub(super) fn new(
        shared: SharedRef,
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
    /// Fails once the connection is being drained: a
    /// LOCAL_INV posted then might complete after the Send queue was
    /// drained, and its Reply would never be finished. The caller leaves
    /// the MRs to the teardown, which destroys the QP. On failure the
    /// Reply comes back.
    pub(crate) fn invalidate(
        &self,
        shared: &Shared,
        mrs: &[u16],
        ctx: &RecvCtx,
        pending: Pending,
    ) -> core::result::Result<(), Pending> {
        let Some(first) = self.inv_chain(mrs, ctx) else {
            return Err(pending);
        };
        if shared.draining.load(Acquire) {
            return Err(pending);
        }
        // SAFETY: The QP lives until drained, which waits for this handler.
        let Some(qp) = (unsafe { Qp::from_ptr(shared.qp.load(Acquire)) }) else {
            return Err(pending);
        };
        // SAFETY: The Receive completion owns `pending` until it posts.
        unsafe { *ctx.pending.get() = Some(pending) };
        // SAFETY: A valid chain whose cqes live until the QP is drained.
        if unsafe { qp.post_chain(first) }.is_err() {
            // SAFETY: Nothing was posted, so the Reply is still ours.
            if let Some(pending) = unsafe { (*ctx.pending.get()).take() } {
                return Err(pending);
            }
        }
        Ok(())
    }

    /// Links the LOCAL_INVs of `mrs`, the last signalled on `ctx`'s
    /// `linv_cqe`; returns the chain's first work request.
    fn inv_chain(&self, mrs: &[u16], ctx: &RecvCtx) -> Option<*mut sys::ib_send_wr> {
        let mut chain = WrChain::new();
        let n = mrs.len();
        for (k, &i) in mrs.iter().enumerate() {
            let slot = self.slot(i)?;
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
        chain.ends().map(|(first, _)| first)
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

impl Ep {
    /// The MR pool.
    pub(crate) fn pool(&self) -> Option<&MrPool> {
        self.pool.as_deref()
    }
}
