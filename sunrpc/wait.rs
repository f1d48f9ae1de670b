// SPDX-License-Identifier: GPL-2.0

//! The two kernel objects a transport embeds in its `rpc_xprt` allocation,
//! which sunrpc makes (zeroed) and so cannot be pinned Rust objects from
//! the start: a wait queue and a delayed work item. Both are initialised
//! in place, through pin-init, when the transport is set up.

use core::ffi::c_ulong;
use core::marker::PhantomData;

use kernel::prelude::*;
use kernel::sync::atomic::Atomic;
use kernel::types::Opaque;

use crate::sys;

/// A `wait_queue_head` for waits on a condition over atomics.
///
/// # Invariants
///
/// Initialised by [`WaitQueue::new`] before any other use.
#[repr(transparent)]
pub(crate) struct WaitQueue(Opaque<sys::wait_queue_head>);

// SAFETY: A wait queue head is made for concurrent use: every operation
// takes its own lock; it may be used and freed from any thread.
unsafe impl Send for WaitQueue {}
// SAFETY: As above.
unsafe impl Sync for WaitQueue {}

impl WaitQueue {
    /// Initialises the wait queue in place.
    pub(crate) fn new() -> impl PinInit<Self> {
        // SAFETY: The closure initialises the whole slot and never fails.
        unsafe {
            pin_init::pin_init_from_closure(|slot: *mut Self| {
                sys::rpcrdma_rs_init_waitqueue_head(slot.cast());
                Ok(())
            })
        }
    }

    /// Wakes every waiter.
    pub(crate) fn wake_all(&self) {
        // SAFETY: Initialised (type invariant).
        unsafe { sys::rpcrdma_rs_wake_up_all(self.0.get()) };
    }

    /// Sleeps until `*value >= at_least`, for `timeout` jiffies at most;
    /// false on timeout. A waker changes `value` then calls `wake_all`.
    pub(crate) fn wait_until_reaches(
        &self,
        value: &Atomic<u64>,
        at_least: u64,
        timeout: c_ulong,
    ) -> bool {
        // SAFETY: Initialised (type invariant); `value` outlives the call.
        unsafe {
            sys::rpcrdma_rs_wait_until_gone(self.0.get(), value.as_ptr(), at_least, timeout) != 0
        }
    }
}

/// A `delayed_work` running `F::run` on the system workqueue.
///
/// # Invariants
///
/// Initialised by [`DelayedWork::new`] before any other use, with a work
/// function that recovers the `F` this work is embedded in.
#[repr(transparent)]
pub(crate) struct DelayedWork<F: HasDelayedWork>(Opaque<sys::delayed_work>, PhantomData<F>);

/// A type that embeds a [`DelayedWork`] and runs when it fires.
///
/// # Safety
///
/// `OFFSET` is the byte offset of a `DelayedWork<Self>` field in `Self`,
/// and a `Self` outlives every queueing of that work (its owner cancels
/// the work synchronously before it goes).
pub(crate) unsafe trait HasDelayedWork: Sized {
    /// Offset of the field.
    const OFFSET: usize;
    /// The work, on the system workqueue in process context.
    fn run(&self);
}

impl<F: HasDelayedWork> DelayedWork<F> {
    /// Initialises the work in place.
    pub(crate) fn new() -> impl PinInit<Self> {
        // SAFETY: The closure initialises the whole slot and never fails.
        unsafe {
            pin_init::pin_init_from_closure(|slot: *mut Self| {
                sys::rpcrdma_rs_init_delayed_work(slot.cast(), Some(Self::dispatch));
                Ok(())
            })
        }
    }

    /// Queues the work to run in `delay` jiffies, unless already queued.
    pub(crate) fn queue(&self, delay: c_ulong) {
        // SAFETY: Initialised (type invariant).
        unsafe { sys::rpcrdma_rs_queue_delayed_work(self.0.get(), delay) };
    }

    /// Cancels the work and waits for a running instance to finish.
    pub(crate) fn cancel_sync(&self) {
        // SAFETY: Initialised (type invariant).
        unsafe { sys::rpcrdma_rs_cancel_delayed_work_sync(self.0.get()) };
    }

    /// # Safety
    ///
    /// Called by the workqueue for a work initialised by `new`.
    unsafe extern "C" fn dispatch(work: *mut sys::work_struct) {
        // SAFETY: `work` is the first member of the `delayed_work` that is
        // this `DelayedWork`, at `F::OFFSET` of a live `F` (trait
        // contract).
        let owner = unsafe { &*work.cast::<u8>().sub(F::OFFSET).cast::<F>() };
        owner.run();
    }
}
