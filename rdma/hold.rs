// SPDX-License-Identifier: GPL-2.0

//! Holds on memory that the device may reach: [`PageHold`], counted in a
//! [`HoldCount`] of whoever owns the memory, which keeps it allocated until
//! the count is back at zero, and [`HeldPages`], pages under such a hold. A
//! DMA mapping ([`super::MappedPages::map_held`]) or an MR registration
//! ([`super::FrwrPool::register_held`]) of held pages keeps a hold until
//! the device can no longer reach them, so mapping and registering them
//! is safe.

use core::ffi::c_ulong;
use core::ptr::NonNull;

use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed};

use super::PageSeg;
use crate::sys;

/// Set in a [`HoldCount`] while its owner waits: the last hold to go
/// wakes it. Without it no hold wakes anyone, which is the usual case (a
/// wake-up is a hashed wait-queue lookup, once per RPC).
const WAITING: u32 = 1 << 31;
/// The count proper.
const COUNT: u32 = !WAITING;

/// The holds on some memory, counted by its owner, who keeps the memory
/// until none is left ([`HoldCount::wait_released`]).
pub(crate) struct HoldCount(Atomic<u32>);

impl HoldCount {
    /// No hold.
    pub(crate) const fn new() -> Self {
        Self(Atomic::new(0))
    }

    /// Waits until no hold is left, at most `secs` seconds; whether none
    /// is. The owner takes no new hold meanwhile.
    pub(crate) fn wait_released(&self, secs: c_ulong) -> bool {
        // Acquire: pairs with the last hold's full-ordered decrement, so
        // what it did with the memory is done.
        let mut now = self.0.load(Acquire);
        while now & COUNT != 0 {
            if let Err(seen) = self.0.cmpxchg(now, now | WAITING, Full) {
                now = seen;
                continue;
            }
            let timeout = secs.saturating_mul(crate::sunrpc::hz());
            // SAFETY: The word lives as long as `self`; the helper only
            // reads it, waiting on its address.
            let left = unsafe { sys::rpcrdma_rs_wait_var_masked(self.0.as_ptr(), COUNT, timeout) };
            if left == 0 {
                // Still held; the flag stays for the next wait.
                return false;
            }
            now = self.0.load(Acquire);
        }
        // None left and none to come: no one to wake any more.
        if now != 0 {
            self.0.store(0, Relaxed);
        }
        true
    }
}

/// One count on a [`HoldCount`].
///
/// # Invariants
///
/// `count` is valid while it counts a hold, and this value is one of its
/// holds.
pub(crate) struct PageHold {
    count: NonNull<HoldCount>,
}

// SAFETY: The count is atomic; dropping the hold on another thread is
// what it is for.
unsafe impl Send for PageHold {}
// SAFETY: `&PageHold` only clones, which adds a count atomically.
unsafe impl Sync for PageHold {}

impl PageHold {
    /// Adds a hold to `count`.
    ///
    /// # Safety
    ///
    /// `count` stays valid while it counts a hold, and its owner keeps the
    /// memory of every [`HeldPages`] made with this hold (or a clone)
    /// allocated until [`HoldCount::wait_released`] says none is left.
    pub(crate) unsafe fn new(count: &HoldCount) -> Self {
        count.0.add(1, Relaxed);
        // INVARIANT: counted just now; valid while it counts a hold (the
        // caller's promise).
        Self {
            count: NonNull::from(count),
        }
    }
}

impl Clone for PageHold {
    fn clone(&self) -> Self {
        // SAFETY: Valid: we count on it (type invariant).
        unsafe { self.count.as_ref() }.0.add(1, Relaxed);
        // INVARIANT: counted just now.
        Self { count: self.count }
    }
}

impl Drop for PageHold {
    fn drop(&mut self) {
        let count = self.count.as_ptr();
        // SAFETY: Valid while we count on it (type invariant); full
        // ordering before the wake-up, which `wake_up_var` asks for.
        let was = unsafe { (*count).0.fetch_sub(1, Full) };
        // The last hold, and the owner waits.
        if was == WAITING | 1 {
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

#[kunit_tests(rpcrdma_rs_hold)]
mod tests {
    use super::*;

    #[test]
    fn owner_waits_only_while_held() {
        let count = HoldCount::new();
        // No hold: nothing to wait for.
        assert!(count.wait_released(0));
        // SAFETY: `count` outlives both holds, dropped below; they hold no
        // pages.
        let hold = unsafe { PageHold::new(&count) };
        let second = hold.clone();
        // A hold that goes with nobody waiting leaves no flag behind.
        drop(second);
        assert_eq!(count.0.load(Relaxed), 1);
        let second = hold.clone();
        // Held: the wait (no time to wait) fails and marks the word.
        assert!(!count.wait_released(0));
        assert_eq!(count.0.load(Relaxed), WAITING | 2);
        drop(hold);
        assert!(!count.wait_released(0));
        // The last hold goes (and wakes the owner): released, unmarked.
        drop(second);
        assert_eq!(count.0.load(Relaxed), WAITING);
        assert!(count.wait_released(0));
        assert_eq!(count.0.load(Relaxed), 0);
    }
}
