// SPDX-License-Identifier: GPL-2.0

//! Backward-direction requests of a client transport (RFC 8167): the
//! `rpc_rqst`s that carry NFSv4.1 callbacks from the transport to the
//! callback service and its Replies back.
//!
//! A [`BcPool`] holds a fixed set of slots, allocated when the NFS client
//! sets the backchannel up (`bc_setup`, process context) and freed with
//! the transport: the receive path never allocates. Each slot is an
//! `rpc_rqst` with one page the Call is copied into (so the Receive
//! buffer goes back to the device at once) and one page the callback
//! service encodes its Reply into. A slot is free in the pool, claimed by
//! the receive path ([`BcCall`]), or owned by sunrpc from
//! `xprt_enqueue_bc_request` until `bc_free_rqst` gives it back.
//!
//! sunrpc's own backchannel helpers (`xprt_setup_bc`,
//! `xprt_lookup_bc_request`) are for socket transports and not exported;
//! like rpcrdma.ko, the transport keeps its own requests and only hands
//! them to the service with `xprt_enqueue_bc_request`.

use core::cell::UnsafeCell;
use core::ptr::NonNull;

use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed, Release};
use kernel::types::Opaque;

use super::{SendRqst, Xprt};
use crate::proto::backchannel::{SlotMask, CLIENT_SLOTS};
use crate::sys;

/// Slots of a pool.
const SLOTS: usize = CLIENT_SLOTS as usize;

const _: () = assert!(SLOTS <= 32, "the free mask has 32 bits");

/// Size of each slot's Call and Reply buffer: the callback service
/// decodes from and encodes into a single page (`svcxdr_init_encode`
/// ends the Reply's stream one page past its head).
pub(crate) const BC_BUF: usize = kernel::page::PAGE_SIZE;

/// Pool states in [`BcPool::state`].
const NONE: u32 = 0;
const SETTING_UP: u32 = 1;
const READY: u32 = 2;

/// One backchannel request.
///
/// # Invariants
///
/// `rqst` comes first, so sunrpc's request pointer is the slot's. `call`
/// and `reply` hold [`BC_BUF`] bytes each, are never resized, and are
/// used only by the slot's owner (see the module documentation); the
/// request's `xdr_buf`s point into them while sunrpc owns the slot.
#[repr(C)]
struct BcSlot {
    rqst: Opaque<sys::rpc_rqst>,
    call: UnsafeCell<KVec<u8>>,
    reply: UnsafeCell<KVec<u8>>,
}

impl BcSlot {
    fn new() -> Result<KBox<Self>> {
        Ok(KBox::new(
            Self {
                rqst: Opaque::zeroed(),
                call: UnsafeCell::new(KVec::from_elem(0u8, BC_BUF, GFP_KERNEL)?),
                reply: UnsafeCell::new(KVec::from_elem(0u8, BC_BUF, GFP_KERNEL)?),
            },
            GFP_KERNEL,
        )?)
    }
}

/// The backchannel requests of one transport.
///
/// Valid when zeroed (no slots, none free), as part of a transport that
/// `xprt_alloc` zero-allocates.
///
/// # Invariants
///
/// A non-null `slots[k]` is a `KBox<BcSlot>` leaked by [`BcPool::setup`]
/// and freed only by [`BcPool::free_all`]. Bit `k` of `free` is set
/// exactly while slot `k` exists and nobody owns it.
pub(crate) struct BcPool {
    slots: [Atomic<*mut BcSlot>; SLOTS],
    free: Atomic<u32>,
    state: Atomic<u32>,
}

// SAFETY: The slots are handed from owner to owner through `free`, with
// full ordering; everything else is atomic.
unsafe impl Sync for BcPool {}

// SAFETY: As above; the pool owns its slots' allocations.
unsafe impl Send for BcPool {}

impl BcPool {
    /// A pool without slots, until [`BcPool::setup`].
    pub(crate) const fn new() -> Self {
        // INVARIANT: no slot exists, none is free.
        Self {
            slots: [const { Atomic::new(core::ptr::null_mut()) }; SLOTS],
            free: Atomic::new(0),
            state: Atomic::new(NONE),
        }
    }

    /// Allocates the slots, once (sleeps). A later call finds them there;
    /// one racing with the first returns at once and the slots appear as
    /// the first allocates them.
    pub(crate) fn setup(&self) -> Result {
        if self.state.cmpxchg(NONE, SETTING_UP, Full).is_err() {
            return Ok(());
        }
        let mut made = 0usize;
        let mut result = Ok(());
        for (k, cell) in self.slots.iter().enumerate() {
            if !cell.load(Acquire).is_null() {
                made += 1;
                continue;
            }
            match BcSlot::new() {
                Ok(slot) => {
                    cell.store(KBox::into_raw(slot), Release);
                    made += 1;
                    // INVARIANT: the slot exists and is nobody's.
                    self.give_back(k as u32);
                }
                Err(err) => {
                    result = Err(err);
                    break;
                }
            }
        }
        // Partial success is success: fewer slots mean more dropped
        // Calls, not a broken mount; none at all lets a later setup retry.
        if made == 0 {
            self.state.store(NONE, Release);
            return result;
        }
        self.state.store(READY, Release);
        Ok(())
    }

    /// Claims a free slot for a received Call; `None` when every slot is
    /// in use (or none was set up).
    pub(crate) fn claim(&self) -> Option<BcCall<'_>> {
        let mut mask = self.free.load(Relaxed);
        loop {
            let (k, rest) = SlotMask(mask).claim()?;
            match self.free.cmpxchg(mask, rest.0, Full) {
                Ok(_) => {
                    let slot = NonNull::new(self.slots.get(k as usize)?.load(Acquire))?;
                    return Some(BcCall {
                        pool: self,
                        k,
                        slot,
                    });
                }
                Err(now) => mask = now,
            }
        }
    }

    /// Marks slot `k` free.
    fn give_back(&self, k: u32) {
        let mut mask = self.free.load(Relaxed);
        loop {
            let Some(next) = SlotMask(mask).release(k) else {
                pr_warn!("backchannel slot {} released twice\n", k);
                return;
            };
            match self.free.cmpxchg(mask, next.0, Full) {
                Ok(_) => return,
                Err(now) => mask = now,
            }
        }
    }

    /// The slot of `rqst`, if it is one of ours.
    fn index_of(&self, rqst: *const sys::rpc_rqst) -> Option<u32> {
        self.slots
            .iter()
            .position(|s| core::ptr::eq(s.load(Acquire).cast_const().cast(), rqst))
            .map(|k| k as u32)
    }

    /// Whether `rqst` is a backchannel Reply of this pool (a request
    /// sunrpc owns, marked `RPC_BC_PA_IN_USE`), rather than a forward
    /// Call.
    pub(crate) fn is_reply(&self, rqst: &SendRqst<'_>) -> bool {
        let Some(raw) = NonNull::new(rqst.as_ptr()) else {
            return false;
        };
        // SAFETY: A live request being sent; the flag is set before the
        // request is handed to sunrpc and cleared after it comes back.
        let flagged = unsafe { super::slots::backchannel(raw) };
        flagged && self.index_of(rqst.as_ptr()).is_some()
    }

    /// Takes back the request sunrpc is done with (`bc_free_rqst`), and
    /// drops the transport reference `xprt_enqueue_bc_request` took for
    /// it. `pool_of` finds the pool of the request's transport.
    ///
    /// # Safety
    ///
    /// `rqst` is a request sunrpc gives back through `bc_free_rqst` of a
    /// live transport whose pool `pool_of` returns: nobody uses the
    /// request any more.
    pub(crate) unsafe fn free_rqst<'a>(
        rqst: *mut sys::rpc_rqst,
        pool_of: impl FnOnce(*mut sys::rpc_xprt) -> &'a BcPool,
    ) {
        // SAFETY: A live request of a live transport (the caller's
        // promise); read before the slot can be claimed again.
        let xprt = unsafe { (*rqst).rq_xprt };
        let pool = pool_of(xprt);
        let Some(k) = pool.index_of(rqst) else {
            pr_warn!("backchannel request {:p} is not ours\n", rqst);
            return;
        };
        // SAFETY: One of our slots, given back by sunrpc (the caller's
        // promise).
        unsafe { sys::rpcrdma_rs_bc_clear_in_use(rqst) };
        // INVARIANT: sunrpc no longer owns it; from here it may be
        // claimed again, so neither it nor `pool` is touched below.
        pool.give_back(k);
        // SAFETY: Balances the `xprt_get` of `xprt_enqueue_bc_request`
        // for this request; the transport may go right after.
        unsafe { sys::xprt_put(xprt) };
    }

    /// Frees every slot, when the transport is destroyed.
    ///
    /// # Safety
    ///
    /// No slot is claimed or owned by sunrpc (each request sunrpc owns
    /// holds a transport reference, so none is left when the transport
    /// is destroyed), and the pool is not used concurrently.
    pub(crate) unsafe fn free_all(&self) {
        self.free.store(0, Relaxed);
        for cell in &self.slots {
            let slot = cell.xchg(core::ptr::null_mut(), Full);
            if !slot.is_null() {
                // SAFETY: Leaked by `setup` (type invariant), owned by
                // nobody (the caller's promise), and unpublished above.
                drop(unsafe { KBox::from_raw(slot) });
            }
        }
        self.state.store(NONE, Release);
    }
}

/// A slot claimed by the receive path for one backward Call; released to
/// the pool when dropped, unless [`BcCall::deliver`] handed it to sunrpc.
pub(crate) struct BcCall<'a> {
    pool: &'a BcPool,
    k: u32,
    slot: NonNull<BcSlot>,
}

impl BcCall<'_> {
    /// Copies the RPC Call `msg` (from its XID on) into the slot and hands
    /// the request to the callback service of `xprt`, which takes a
    /// transport reference for it (`xprt_enqueue_bc_request`). Without a
    /// service, sunrpc gives the request straight back through
    /// `bc_free_rqst`.
    pub(crate) fn deliver(self, xprt: &Xprt, msg: &[u8]) -> Result {
        let len = msg.len();
        if !(8..=BC_BUF).contains(&len) {
            return Err(EMSGSIZE);
        }
        let xid = msg
            .first_chunk::<4>()
            .map(|b| u32::from_ne_bytes(*b))
            .ok_or(EMSGSIZE)?;
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: Claimed: the slot and its buffers are ours alone until
        // the request is enqueued (type invariant of `BcPool`); slots are
        // freed only with the transport, which outlives its receive path.
        let slot = unsafe { this.slot.as_ref() };
        // SAFETY: As above: nobody else uses the buffers now.
        let (call, reply) = unsafe { (&mut *slot.call.get(), &mut *slot.reply.get()) };
        let Some(dst) = call.get_mut(..len) else {
            // Unreachable (`len <= BC_BUF`); give the slot back anyway.
            drop(core::mem::ManuallyDrop::into_inner(this));
            return Err(EMSGSIZE);
        };
        dst.copy_from_slice(msg);
        let rqst = slot.rqst.get();
        // SAFETY: The request is ours; zeroing it forgets its last use,
        // then sunrpc finds what `xprt_alloc_bc_req` and
        // `xprt_lookup_bc_request` would have set: its transport, XID,
        // the Call in `rq_rcv_buf` (`rq_private_buf.len` is its length),
        // and an empty page-sized `rq_snd_buf` for the Reply.
        unsafe {
            core::ptr::write_bytes(rqst, 0, 1);
            (*rqst).rq_xprt = xprt.as_ptr();
            (*rqst).rq_xid = xid;
            let rcv = &raw mut (*rqst).rq_rcv_buf;
            (*rcv).head[0].iov_base = call.as_mut_ptr().cast();
            (*rcv).head[0].iov_len = len;
            (*rcv).len = len as u32;
            (*rcv).buflen = BC_BUF as u32;
            core::ptr::copy_nonoverlapping(rcv, &raw mut (*rqst).rq_private_buf, 1);
            let snd = &raw mut (*rqst).rq_snd_buf;
            (*snd).head[0].iov_base = reply.as_mut_ptr().cast();
            (*snd).buflen = BC_BUF as u32;
            sys::rpcrdma_rs_bc_mark_in_use(rqst);
            // `svc_process_bc` counts the request out of `bc_slot_count`
            // (and so does `xprt_enqueue_bc_request` when there is no
            // service): count it in.
            sys::rpcrdma_rs_bc_slot_count_inc(xprt.as_ptr());
            // From here sunrpc owns the slot, until `bc_free_rqst`.
            sys::xprt_enqueue_bc_request(rqst);
        }
        Ok(())
    }
}

impl Drop for BcCall<'_> {
    fn drop(&mut self) {
        // INVARIANT: not handed to sunrpc: back to the pool.
        self.pool.give_back(self.k);
    }
}

impl Xprt {
    /// Whether a callback service listens on this transport. A hint: the
    /// service may go right after, and `xprt_enqueue_bc_request` checks
    /// again under `bc_pa_lock`.
    pub(crate) fn has_bc_serv(&self) -> bool {
        // SAFETY: Live by the type invariant; a `READ_ONCE` of a pointer.
        !unsafe { sys::rpcrdma_rs_xprt_bc_serv(self.as_ptr()) }.is_null()
    }

    /// Publishes `value` read-only as `name` in the transport's sunrpc
    /// debugfs directory, if there is one.
    ///
    /// # Safety
    ///
    /// `value` stays valid until sunrpc removes the directory, which it
    /// does before it calls the transport's `destroy`.
    pub(crate) unsafe fn debugfs_u64(&self, name: &CStr, value: *mut u64) {
        // SAFETY: Live transport; the name is copied by debugfs; the
        // caller keeps `value` valid for the file's life.
        unsafe {
            sys::rpcrdma_rs_xprt_debugfs_u64(self.as_ptr(), name.as_char_ptr().cast(), value)
        };
    }
}

#[kunit_tests(rpcrdma_rs_backchannel)]
mod tests {
    use super::*;

    fn empty_pool() -> BcPool {
        BcPool {
            slots: [const { Atomic::new(core::ptr::null_mut()) }; SLOTS],
            free: Atomic::new(0),
            state: Atomic::new(NONE),
        }
    }

    #[test]
    fn slots_are_handed_out_once() {
        let pool = empty_pool();
        // Before `bc_setup` a backward Call finds no slot.
        assert!(pool.claim().is_none());
        assert!(pool.setup().is_ok());
        // A second session's setup finds the slots there.
        assert!(pool.setup().is_ok());
        let mut held = KVec::new();
        while let Some(call) = pool.claim() {
            assert!(held.push(call, GFP_KERNEL).is_ok());
        }
        // More Calls than slots: the next one is dropped.
        assert_eq!(held.len(), SLOTS);
        assert!(pool.claim().is_none());
        // A Call not delivered gives its slot back.
        drop(held.pop());
        assert!(pool.claim().is_some());
        drop(held);
        assert_eq!(pool.free.load(Relaxed), SlotMask::all(CLIENT_SLOTS).0);
        // SAFETY: Nothing is claimed any more, and the pool is ours.
        unsafe { pool.free_all() };
        assert!(pool.claim().is_none());
    }
}
