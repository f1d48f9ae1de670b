// SPDX-License-Identifier: GPL-2.0

//! Request slots that live as long as their transport, as rpcrdma.ko
//! keeps its `rpcrdma_req`s: sunrpc's `rpc_rqst`, the transport's state
//! for the request, and one buffer for its Call and Reply, allocated on
//! first use and kept for the next RPC. sunrpc's own slot allocator frees
//! every slot past the preallocated ones when its RPC ends, and
//! `buf_alloc` would allocate and free `rq_buffer` per RPC; with these
//! slots a busy transport allocates nothing per RPC.
//!
//! A transport that embeds a [`SlotPool`] ([`SlotOwner`]) puts
//! [`alloc_slot`], [`free_slot`], [`buf_alloc`] and [`buf_free`] in its
//! `rpc_xprt_ops`.

use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::ptr::NonNull;

use kernel::prelude::*;
use kernel::sync::{new_spinlock, SpinLock};
use kernel::types::Opaque;

use crate::rdma::HoldCount;
use crate::sys;

/// How long `buf_free` waits for the holds on a request's pages before it
/// asks the transport to make them go, in seconds (below the hung task
/// timeout, which each wake-up resets).
pub(crate) const HOLD_WARN_SECS: core::ffi::c_ulong = 30;

/// Smallest Call and Reply buffer of a slot: one page holds the buffers
/// of nearly every NFS request, so it is seldom reallocated.
const MIN_BUF: usize = kernel::page::PAGE_SIZE;

/// One request slot.
///
/// # Invariants
///
/// `rqst` comes first: sunrpc knows the slot by its `rpc_rqst`. A slot
/// belongs either to its pool's free list or to the task whose
/// `tk_rqstp` it is, and only that owner uses `buf`, `cap` and `next`.
/// `buf` is null or a kmalloc allocation of `cap` bytes. While `holds`
/// counts a hold, the request's buffers stay as they are: `buf_free` waits
/// until none is left before it gives them up.
#[repr(C)]
pub(crate) struct Slot<T> {
    rqst: Opaque<sys::rpc_rqst>,
    state: T,
    buf: UnsafeCell<*mut u8>,
    cap: UnsafeCell<usize>,
    next: UnsafeCell<*mut Slot<T>>,
    /// Holds on the request's pages ([`crate::rdma::PageHold`]).
    holds: HoldCount,
}

impl<T> Slot<T> {
    /// The slot of `rqst`.
    ///
    /// # Safety
    ///
    /// `rqst` is live and was handed out by a `SlotPool<T>` (a forward
    /// request, not a backchannel one, of a transport whose ops are this
    /// module's).
    pub(crate) unsafe fn of<'a>(rqst: NonNull<sys::rpc_rqst>) -> &'a Self {
        // SAFETY: The `rpc_rqst` is the first field of a `repr(C)` slot
        // (type invariant), which lives while its request does.
        unsafe { &*rqst.as_ptr().cast::<Self>() }
    }

    /// The transport's state for this request.
    pub(crate) fn state(&self) -> &T {
        &self.state
    }

    /// The count of holds on the request's pages.
    pub(super) fn holds(&self) -> &HoldCount {
        &self.holds
    }

    fn rqst(&self) -> *mut sys::rpc_rqst {
        self.rqst.get()
    }
}

/// The free slots of a transport, and how many exist.
struct FreeList<T> {
    head: *mut Slot<T>,
    allocated: u32,
}

// SAFETY: The slots on the list belong to the list, which is only used
// under its lock, from any thread.
unsafe impl<T: Send> Send for FreeList<T> {}

/// A transport's request slots: at most `max`, allocated when first
/// needed and freed with the transport.
#[pin_data]
pub(crate) struct SlotPool<T> {
    #[pin]
    free: SpinLock<FreeList<T>>,
    max: u32,
}

/// What taking a slot gave.
enum Taken<T> {
    Slot(NonNull<Slot<T>>),
    /// None free, but fewer than `max` exist: allocate one.
    Grow,
    /// All in use; the task waits on the backlog.
    Full,
}

impl<T: Default + Send> SlotPool<T> {
    /// A pool of at most `max` slots, initialised in place.
    pub(crate) fn new(max: u32) -> impl PinInit<Self> {
        pin_init!(Self {
            free <- new_spinlock!(
                FreeList {
                    head: core::ptr::null_mut(),
                    allocated: 0,
                },
                "rpcrdma_rs_slots"
            ),
            max,
        })
    }

    /// Takes a free slot or the right to allocate one; with all `max` in
    /// use, puts `task` on the transport's backlog, under the same lock
    /// that `release` wakes the backlog with, so that no slot goes back
    /// to the list while a task waits for one.
    ///
    /// # Safety
    ///
    /// `xprt` owns the pool and `task` is a live task asking it for a
    /// slot.
    unsafe fn take(&self, xprt: *mut sys::rpc_xprt, task: *mut sys::rpc_task) -> Taken<T> {
        let mut free = self.free.lock();
        if let Some(slot) = NonNull::new(free.head) {
            // SAFETY: Slots on the list are the list's (type invariant of
            // `Slot`), and we hold its lock.
            free.head = unsafe { *slot.as_ref().next.get() };
            return Taken::Slot(slot);
        }
        if free.allocated < self.max {
            free.allocated += 1;
            return Taken::Grow;
        }
        // SAFETY: The caller's promise; sunrpc's own allocator does this
        // under `reserve_lock`.
        unsafe { sys::xprt_add_backlog(xprt, task) };
        Taken::Full
    }

    /// Allocates a slot counted by `take`; gives the count back on
    /// failure.
    fn grow(&self) -> Option<NonNull<Slot<T>>> {
        // SAFETY: Plain allocation, with sunrpc's flags for the calling
        // task.
        let slot = NonNull::new(
            unsafe { sys::rpcrdma_rs_task_alloc(core::mem::size_of::<Slot<T>>()) }
                .cast::<Slot<T>>(),
        );
        let Some(slot) = slot else {
            self.free.lock().allocated -= 1;
            return None;
        };
        // SAFETY: Fresh memory of the right size; kmalloc aligns it for
        // the slot (checked below). A zeroed `rpc_rqst` is an unused one.
        unsafe {
            slot.as_ptr().write(Slot {
                rqst: Opaque::zeroed(),
                state: T::default(),
                buf: UnsafeCell::new(core::ptr::null_mut()),
                cap: UnsafeCell::new(0),
                next: UnsafeCell::new(core::ptr::null_mut()),
                holds: HoldCount::new(),
            })
        };
        Some(slot)
    }

    /// Gives the slot back: to the first task on the backlog, or to the
    /// free list.
    ///
    /// # Safety
    ///
    /// `slot` came from this pool, and its request is released: nothing
    /// uses it any more.
    unsafe fn release(&self, xprt: *mut sys::rpc_xprt, slot: &Slot<T>) {
        let rqst = slot.rqst();
        // An unused `rpc_rqst` is zeroed (as `xprt_free_slot` leaves it).
        // SAFETY: The request is released and ours (caller's promise).
        unsafe { rqst.write_bytes(0, 1) };
        let mut free = self.free.lock();
        // SAFETY: A live transport; the woken task gets the request
        // (`__xprt_set_rq` clears it again).
        if unsafe { sys::xprt_wake_up_backlog(xprt, rqst) } {
            return;
        }
        // SAFETY: The slot is ours until it is on the list, and the list's
        // after, under its lock.
        unsafe { *slot.next.get() = free.head };
        free.head = core::ptr::from_ref(slot).cast_mut();
    }

    /// Frees every slot, when the transport is destroyed. A slot still in
    /// use (which sunrpc never leaves) is leaked, not freed.
    pub(crate) fn free_all(&self) {
        let mut free = self.free.lock();
        while let Some(slot) = NonNull::new(free.head) {
            // SAFETY: Slots on the list are the list's (type invariant of
            // `Slot`); we take this one off and free it: its buffer, its
            // state and itself.
            unsafe {
                free.head = *slot.as_ref().next.get();
                sys::rpcrdma_rs_kfree((*slot.as_ref().buf.get()).cast());
                core::ptr::drop_in_place(slot.as_ptr());
                sys::rpcrdma_rs_kfree(slot.as_ptr().cast());
            }
            free.allocated -= 1;
        }
        if free.allocated != 0 {
            pr_warn!("{} request slots still in use: leaked\n", free.allocated);
        }
    }
}

const _: () = assert!(core::mem::align_of::<Slot<[u64; 4]>>() <= 8);

/// A transport that embeds a [`SlotPool`] and uses this module's slot
/// and buffer operations.
///
/// # Safety
///
/// `Self` is `repr(C)` with its `rpc_xprt` first, in an allocation that
/// `xprt_alloc` made for `size_of::<Self>()` bytes; [`SlotOwner::slots`]
/// is initialised before the transport is used; and the transport's ops
/// are [`alloc_slot::<Self>`], [`free_slot::<Self>`], [`buf_alloc::<Self>`]
/// and [`buf_free::<Self>`], so that every forward request of the
/// transport is a slot of its pool.
pub(crate) unsafe trait SlotOwner: Sized {
    /// What the transport keeps per request.
    type State: Default + Send + Sync;

    /// The pool.
    fn slots(&self) -> &SlotPool<Self::State>;

    /// A request got its buffers, `grown` bytes of them new (0 when the
    /// slot's were big enough): reset the state for the new RPC.
    fn buffers_ready(&self, state: &Self::State, grown: usize);

    /// The request's buffers go back to its slot: wait until nothing (a
    /// Send, the peer) can reach them. Sleeps. Afterwards `buf_free`
    /// itself waits for the holds on the request's pages.
    fn buffers_released(&self, state: &Self::State);

    /// `buf_free` has waited a while for the holds on the request's pages
    /// to go: make them go (close the connection).
    fn buffers_stuck(&self, state: &Self::State);
}

/// Whether `rqst` is a backchannel request (`bc_prealloc`): sunrpc's, not
/// a slot, though `xprt_release` hands it to `buf_free` if it has a
/// buffer.
///
/// # Safety
///
/// `rqst` is live.
pub(super) unsafe fn backchannel(rqst: NonNull<sys::rpc_rqst>) -> bool {
    // As `test_bit`, a single read of the word, inline: asked several
    // times per RPC, where a call into C costs more than the read.
    // SAFETY: A live request (caller's promise); sunrpc changes the word
    // only with atomic bit operations.
    let state = unsafe { (&raw const (*rqst.as_ptr()).rq_bc_pa_state).read_volatile() };
    state & (1 << sys::RPC_BC_PA_IN_USE) != 0
}

/// # Safety
///
/// `xprt` is a live transport of type `O` (trait contract).
unsafe fn owner<'a, O: SlotOwner>(xprt: *mut sys::rpc_xprt) -> &'a O {
    // SAFETY: The `rpc_xprt` is first in `O` (trait contract).
    unsafe { &*xprt.cast::<O>() }
}

/// `rpc_xprt_ops.alloc_slot`.
///
/// # Safety
///
/// Called by sunrpc for a live transport of type `O` and a live task.
pub(crate) unsafe extern "C" fn alloc_slot<O: SlotOwner>(
    xprt: *mut sys::rpc_xprt,
    task: *mut sys::rpc_task,
) {
    // SAFETY: The caller's promise.
    let pool = unsafe { owner::<O>(xprt) }.slots();
    // SAFETY: The caller's promise.
    let (slot, status) = match unsafe { pool.take(xprt, task) } {
        Taken::Slot(slot) => (Some(slot), 0),
        Taken::Grow => match pool.grow() {
            Some(slot) => (Some(slot), 0),
            // sunrpc delays the task and asks again.
            None => (None, ENOMEM.to_errno()),
        },
        // Woken with a slot: `xprt_complete_request_init`.
        Taken::Full => (None, EAGAIN.to_errno()),
    };
    // SAFETY: A live task (caller's promise); the slot is its own now.
    unsafe {
        (*task).tk_status = status;
        if let Some(slot) = slot {
            (*task).tk_rqstp = slot.as_ref().rqst();
        }
    }
}

/// `rpc_xprt_ops.free_slot`.
///
/// # Safety
///
/// Called by sunrpc for a live transport of type `O` and one of its
/// requests, released.
pub(crate) unsafe extern "C" fn free_slot<O: SlotOwner>(
    xprt: *mut sys::rpc_xprt,
    rqst: *mut sys::rpc_rqst,
) {
    let Some(rqst) = NonNull::new(rqst) else {
        return;
    };
    // SAFETY: A live request; sunrpc frees backchannel ones itself.
    if unsafe { backchannel(rqst) } {
        return;
    }
    // SAFETY: The transport is an `O`, whose forward requests are slots
    // of its pool, and sunrpc is done with this one.
    unsafe { owner::<O>(xprt).slots().release(xprt, Slot::of(rqst)) };
}

/// `rpc_xprt_ops.buf_alloc`: the Call and Reply buffers in one piece, the
/// slot's, grown when too small.
///
/// # Safety
///
/// Called by sunrpc with a live task that owns a request of a transport
/// of type `O`.
pub(crate) unsafe extern "C" fn buf_alloc<O: SlotOwner>(task: *mut sys::rpc_task) -> c_int {
    // SAFETY: The caller's promise: the task owns the request, a slot of
    // an `O` (trait contract), and so its buffer.
    unsafe {
        let Some(rqst) = NonNull::new((*task).tk_rqstp) else {
            return EINVAL.to_errno();
        };
        if backchannel(rqst) {
            return EINVAL.to_errno();
        }
        let r = rqst.as_ptr();
        let slot = Slot::<O::State>::of(rqst);
        let call = (*r).rq_callsize;
        let Some(size) = call.checked_add((*r).rq_rcvsize) else {
            return ENOMEM.to_errno();
        };
        let mut grown = 0;
        if *slot.cap.get() < size {
            let cap = size.next_power_of_two().max(MIN_BUF);
            let buf = sys::rpcrdma_rs_task_alloc(cap).cast::<u8>();
            if buf.is_null() {
                return ENOMEM.to_errno();
            }
            sys::rpcrdma_rs_kfree((*slot.buf.get()).cast());
            *slot.buf.get() = buf;
            *slot.cap.get() = cap;
            grown = cap;
        }
        let buf = *slot.buf.get();
        (*r).rq_buffer = buf.cast();
        (*r).rq_rbuffer = buf.add(call).cast();
        owner::<O>((*r).rq_xprt).buffers_ready(slot.state(), grown);
    }
    0
}

/// `rpc_xprt_ops.buf_free`: the buffers stay with the slot, once nothing
/// reaches them.
///
/// # Safety
///
/// Called by sunrpc with a live task whose request, of a transport of
/// type `O`, has buffers.
pub(crate) unsafe extern "C" fn buf_free<O: SlotOwner>(task: *mut sys::rpc_task) {
    // SAFETY: The caller's promise: the task owns the request, a slot of
    // an `O`.
    unsafe {
        let Some(rqst) = NonNull::new((*task).tk_rqstp) else {
            return;
        };
        let r = rqst.as_ptr();
        if (*r).rq_buffer.is_null() || backchannel(rqst) {
            return;
        }
        let owner = owner::<O>((*r).rq_xprt);
        let slot = Slot::<O::State>::of(rqst);
        owner.buffers_released(slot.state());
        // Nothing that holds the pages (a mapping, an MR) may outlive them.
        while !slot.holds.wait_released(HOLD_WARN_SECS) {
            owner.buffers_stuck(slot.state());
        }
        (*r).rq_buffer = core::ptr::null_mut();
        (*r).rq_rbuffer = core::ptr::null_mut();
    }
}
