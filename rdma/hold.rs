// SPDX-License-Identifier: GPL-2.0

//! Holds on memory that the device may reach: [`PageHold`], counted in a
//! word of whoever owns the memory, which keeps it allocated until the
//! count is back at zero, and [`HeldPages`], pages under such a hold. A
//! DMA mapping ([`super::MappedPages::map_held`]) or an MR registration
//! ([`super::FrwrPool::register_held`]) of held pages keeps a hold until
//! the device can no longer reach them, so mapping and registering them
//! is safe.

use core::ptr::NonNull;

use kernel::sync::atomic::{Atomic, Full, Relaxed};

use super::PageSeg;
use crate::sys;

/// One count on a hold word.
///
/// # Invariants
///
/// `count` is valid while it is not zero, and this value is one of its
/// counts.
pub(crate) struct PageHold {
    count: NonNull<Atomic<u32>>,
}

// SAFETY: The count is atomic; dropping the hold on another thread is
// what it is for.
unsafe impl Send for PageHold {}
// SAFETY: `&PageHold` only clones, which adds a count atomically.
unsafe impl Sync for PageHold {}

impl PageHold {
    /// Adds a count to `count`.
    ///
    /// # Safety
    ///
    /// `count` stays valid while it is not zero, and its owner keeps the
    /// memory of every [`HeldPages`] made with this hold (or a clone)
    /// allocated until it is zero, waking on it with `wake_up_var`.
    pub(crate) unsafe fn new(count: &Atomic<u32>) -> Self {
        count.add(1, Relaxed);
        // INVARIANT: counted just now; valid while non-zero (the caller's
        // promise).
        Self {
            count: NonNull::from(count),
        }
    }
}

impl Clone for PageHold {
    fn clone(&self) -> Self {
        // SAFETY: Valid: we count on it (type invariant).
        unsafe { self.count.as_ref() }.add(1, Relaxed);
        // INVARIANT: counted just now.
        Self { count: self.count }
    }
}

impl Drop for PageHold {
    fn drop(&mut self) {
        let count = self.count.as_ptr();
        // SAFETY: Valid while we count on it (type invariant); full
        // ordering before the wake-up, which `wake_up_var` asks for.
        if unsafe { (*count).fetch_sub(1, Full) } == 1 {
            // SAFETY: Only the address is used, as the key of the waiters:
            // the word may be gone already.
            unsafe { sys::rpcrdma_rs_wake_up_var(count.cast()) };
        }
    }
}

/// Pages under a [`PageHold`].
///
/// # Invariants
///
/// The pages of `segs` stay allocated, and the CPU does not write them,
/// while `hold` or a clone of it lives.
#[derive(Clone, Copy)]
pub(crate) struct HeldPages<'a> {
    segs: &'a [PageSeg],
    hold: &'a PageHold,
}

impl<'a> HeldPages<'a> {
    /// # Safety
    ///
    /// The pages of `segs` stay allocated, and the CPU does not write
    /// them, while `hold` or a clone of it lives.
    pub(crate) unsafe fn new(segs: &'a [PageSeg], hold: &'a PageHold) -> Self {
        // INVARIANT: the caller's promise.
        Self { segs, hold }
    }

    /// The pages.
    pub(crate) fn segs(&self) -> &'a [PageSeg] {
        self.segs
    }

    /// The first `n` pages and the rest, each under the same hold.
    pub(crate) fn split_at(&self, n: usize) -> (Self, Self) {
        let (a, b) = self.segs.split_at(n.min(self.segs.len()));
        // INVARIANT: parts of pages under `hold`.
        (
            Self {
                segs: a,
                hold: self.hold,
            },
            Self {
                segs: b,
                hold: self.hold,
            },
        )
    }

    /// A count on the hold, for what reaches the pages.
    pub(crate) fn hold(&self) -> PageHold {
        self.hold.clone()
    }
}
