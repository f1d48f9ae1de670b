// SPDX-License-Identifier: GPL-2.0

//! [`ExclusiveCell`]: state that one thread at a time uses, by a protocol
//! the type system cannot see (completion order, `XPRT_LOCKED`, the winner
//! of an exchange). The cell checks the protocol instead of trusting it:
//! a second user finds it busy and gets nothing, so a mistake is an error
//! someone sees, never a data race. And [`AtomicPair`]: two values that go
//! together in one atomic word.

use core::cell::UnsafeCell;

use kernel::sync::atomic::ordering::{AcquireOrRelaxed, ReleaseOrRelaxed};
use kernel::sync::atomic::{Acquire, Atomic, Release};

/// Two `u32`s in one atomic word, stored and loaded together: one kernel
/// atomic (an out-of-line call without LTO) where two would be, and never
/// one pair's half with another's.
pub(crate) struct AtomicPair(Atomic<u64>);

impl AtomicPair {
    /// The pair `(hi, lo)`.
    pub(crate) const fn new(hi: u32, lo: u32) -> Self {
        Self(Atomic::new(join(hi, lo)))
    }

    /// The pair, as last stored.
    pub(crate) fn load<O: AcquireOrRelaxed>(&self, o: O) -> (u32, u32) {
        let word = self.0.load(o);
        ((word >> 32) as u32, word as u32)
    }

    /// Stores the pair `(hi, lo)`.
    pub(crate) fn store<O: ReleaseOrRelaxed>(&self, hi: u32, lo: u32, o: O) {
        self.0.store(join(hi, lo), o);
    }
}

const fn join(hi: u32, lo: u32) -> u64 {
    ((hi as u64) << 32) | lo as u64
}

/// Nobody uses the value.
const FREE: u32 = 0;
/// A [`CellGuard`] exists.
const BUSY: u32 = 1;

/// A value used by one thread at a time; see the module documentation.
///
/// # Invariants
///
/// While `state` is `BUSY` exactly one [`CellGuard`] exists, and only it
/// accesses `value`; while it is `FREE` nothing does.
pub(crate) struct ExclusiveCell<T> {
    state: Atomic<u32>,
    value: UnsafeCell<T>,
}

// SAFETY: The value is accessed only by the one guard holder (type
// invariant), which may be on any thread: `T: Send` suffices.
unsafe impl<T: Send> Sync for ExclusiveCell<T> {}
// SAFETY: The cell owns its value.
unsafe impl<T: Send> Send for ExclusiveCell<T> {}

impl<T> ExclusiveCell<T> {
    /// A cell holding `value`, free.
    pub(crate) const fn new(value: T) -> Self {
        // INVARIANT: free, no guard.
        Self {
            state: Atomic::new(FREE),
            value: UnsafeCell::new(value),
        }
    }

    /// The value, exclusively, until the guard is dropped; `None` while
    /// someone else has it.
    pub(crate) fn try_borrow_mut(&self) -> Option<CellGuard<'_, T>> {
        // Acquire: pairs with the release of the last guard's drop, so
        // its writes are seen.
        self.state.cmpxchg(FREE, BUSY, Acquire).ok()?;
        // INVARIANT: we moved the cell to BUSY: the one guard is ours.
        Some(CellGuard { cell: self })
    }

    /// The value, without a check: the cell is ours alone.
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

impl<U> ExclusiveCell<Option<U>> {
    /// Takes the value out; `None` when there is none or someone else has
    /// the cell.
    pub(crate) fn take(&self) -> Option<U> {
        self.try_borrow_mut()?.take()
    }

    /// Puts `value` in an empty cell; gives it back when the cell holds
    /// one already or someone else has it.
    pub(crate) fn put(&self, value: U) -> Result<(), U> {
        match self.try_borrow_mut() {
            Some(mut g) if g.is_none() => {
                *g = Some(value);
                Ok(())
            }
            _ => Err(value),
        }
    }
}

/// Exclusive use of an [`ExclusiveCell`]'s value.
///
/// # Invariants
///
/// `cell` is `BUSY` on behalf of this guard.
pub(crate) struct CellGuard<'a, T> {
    cell: &'a ExclusiveCell<T>,
}

impl<T> core::ops::Deref for CellGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: The guard is the one user of the value (type invariants
        // of both types).
        unsafe { &*self.cell.value.get() }
    }
}

impl<T> core::ops::DerefMut for CellGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: As for `deref`; `&mut self` makes this borrow unique.
        unsafe { &mut *self.cell.value.get() }
    }
}

impl<T> Drop for CellGuard<'_, T> {
    fn drop(&mut self) {
        // Release: the next guard sees our writes.
        // INVARIANT: no guard is left.
        self.cell.state.store(FREE, Release);
    }
}
