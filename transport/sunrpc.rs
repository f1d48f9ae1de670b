// SPDX-License-Identifier: GPL-2.0

//! The sunrpc side: transport class registration, the `rpc_xprt_ops`
//! entry points, and thin safe wrappers over `rpc_xprt` and `rpc_rqst`.

use core::cell::UnsafeCell;
use core::ffi::{c_char, c_int, c_uint, c_ulong, c_ushort, c_void};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use kernel::prelude::*;
use kernel::str::CString;
use kernel::types::Opaque;

use super::conn::{Ep, Handled, MrPool, Pending, RecvCtx, SendError, Shared, MAX_RPC_MRS};
use super::{
    bump, classify_received, encode_call_header, Config, Received, ReplyBody, Stats, MAX_PAYLOAD,
};
use crate::proto::chunk::{ChunkSlices, ReadSegment, Segment};
use crate::proto::plan::{self, CallPlan, Offered, ReplyShape};
use crate::rdma::PageSeg;
use crate::sys;

/// `XPRT_TRANSPORT_RDMA`.
pub(crate) const IDENT: i32 = 256;
/// Longest wait for the outcome of one connection attempt, in seconds.
const CONNECT_WAIT_CAP_SECS: c_ulong = 180;
/// Longest wait for a connection to be torn down before a request's
/// registered memory is freed; below the hung task timeout.
const FENCE_WAIT_SECS: c_ulong = 30;
/// Slots preallocated per transport.
const MIN_SLOTS: u32 = 2;
/// `IPPROTO_TCP`: `xprt->prot` names the address family's TCP for the
/// benefit of side protocols, as rpcrdma.ko does.
const IPPROTO_TCP: i32 = 6;
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

fn hz() -> c_ulong {
    // SAFETY: Reads a constant.
    unsafe { sys::rpcrdma_rs_hz() }
}

/// The module parameters: max_inline_read, max_inline_write and
/// slot_table_entries.
pub(super) fn module_params() -> (u32, u32, u32) {
    let (mut inline_read, mut inline_write, mut slots) = (0, 0, 0);
    // SAFETY: The helper only writes the three integers.
    unsafe { sys::rpcrdma_rs_params(&mut inline_read, &mut inline_write, &mut slots) };
    (inline_read, inline_write, slots)
}

fn jiffies() -> c_ulong {
    // SAFETY: Reads the jiffies counter.
    unsafe { sys::rpcrdma_rs_jiffies() }
}

/// The transport class followed by its netid list, like `struct
/// xprt_class` with its flexible `netid[]` array filled in.
#[repr(C)]
struct ClassWithNetids {
    class: sys::xprt_class,
    netid: [*const c_char; 3],
}

const _: () = assert!(
    core::mem::offset_of!(ClassWithNetids, netid) == core::mem::size_of::<sys::xprt_class>()
);

/// A registered transport class; unregistered on drop.
///
/// # Invariants
///
/// `class` is registered with sunrpc while this value exists.
pub(crate) struct Registration {
    class: Pin<KBox<Opaque<ClassWithNetids>>>,
}

// SAFETY: After registration the class is only read by sunrpc, under its
// own lock; we only pass its address to `xprt_unregister_transport`.
unsafe impl Send for Registration {}
// SAFETY: See above.
unsafe impl Sync for Registration {}

impl Registration {
    /// Registers the "rdma" client transport class.
    pub(crate) fn new(module: &'static ThisModule) -> Result<Self> {
        let mut name = [0 as c_char; 32];
        for (dst, src) in name.iter_mut().zip(b"rdma") {
            *dst = *src as c_char;
        }
        let class = KBox::pin(
            Opaque::new(ClassWithNetids {
                class: sys::xprt_class {
                    ident: IDENT,
                    setup: Some(xprt_setup),
                    owner: module.as_ptr().cast(),
                    name,
                    ..Default::default()
                },
                netid: [
                    c"rdma".as_char_ptr().cast(),
                    c"rdma6".as_char_ptr().cast(),
                    c"".as_char_ptr().cast(),
                ],
            }),
            GFP_KERNEL,
        )?;
        CLASS.store(class.get().cast(), Ordering::Release);
        // SAFETY: The class is pinned in the heap and stays registered
        // until `drop` unregisters it.
        kernel::error::to_result(unsafe { sys::xprt_register_transport(class.get().cast()) })?;
        Ok(Self { class })
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: The class was registered in `new`. Module references held
        // by live transports keep us from being dropped while one exists.
        unsafe { sys::xprt_unregister_transport(self.class.get().cast()) };
    }
}

/// Our transport, allocated by `xprt_alloc` (zeroed) with `struct
/// rpc_xprt` first.
///
/// # Invariants
///
/// `xprt` is a live `rpc_xprt` whose `ops` are ours. `ep` is only read or
/// changed with `XPRT_LOCKED` held (connect worker, `send_request`,
/// `close`, `destroy`); every other field is valid when zeroed, but for
/// `connect_work` and `gone_wq`, which `setup` initialises.
#[repr(C)]
pub(crate) struct RdmaXprt {
    xprt: Opaque<sys::rpc_xprt>,
    connect_work: Opaque<sys::delayed_work>,
    timeout: Opaque<sys::rpc_timeout>,
    ep: AtomicPtr<Ep>,
    /// A connection attempt failed or a connection was lost: back off.
    backoff: AtomicBool,
    /// A Reply arrived since the last connect: reset the backoff.
    had_reply: AtomicBool,
    stats: Stats,
    /// Settings from the module parameters, fixed at setup.
    cfg: Config,
    /// Generation of the last connection torn down: its QP is destroyed,
    /// so the peer can reach none of its MRs any more.
    gone_gen: AtomicU64,
    /// Woken when `gone_gen` moves. Initialised in `setup`.
    gone_wq: Opaque<sys::wait_queue_head>,
}

impl RdmaXprt {
    /// # Safety
    ///
    /// `xprt` must be a live transport created by our `setup`.
    unsafe fn from_raw<'a>(xprt: *mut sys::rpc_xprt) -> &'a Self {
        // SAFETY: `RdmaXprt` is `repr(C)` with the `rpc_xprt` first, and
        // `xprt_alloc` gave us `size_of::<RdmaXprt>()` zeroed bytes.
        unsafe { &*xprt.cast::<Self>() }
    }

    fn raw(&self) -> *mut sys::rpc_xprt {
        self.xprt.get()
    }

    /// The counters.
    pub(super) fn stats(&self) -> &Stats {
        &self.stats
    }

    pub(super) fn net(&self) -> *mut sys::net {
        // SAFETY: `xprt` is live; `xprt_net` is set by `xprt_alloc`.
        unsafe { (*self.raw()).xprt_net }
    }

    pub(super) fn dst_addr(&self) -> *const sys::sockaddr {
        // SAFETY: `xprt` is live.
        unsafe { (&raw const (*self.raw()).addr).cast() }
    }

    pub(super) fn resolve_timeout(&self) -> c_ulong {
        // A little over rdma_cm's own resolution timeout.
        hz().saturating_mul(c_ulong::from(crate::rdma::RESOLVE_TIMEOUT_MS / 1000 + 1))
    }

    /// How long to wait for rdma_cm's verdict on a connection attempt.
    ///
    /// rdma_cm retransmits the REQ by itself (about a minute in all) and
    /// then reports an error, and a peer that is slow to accept, for
    /// instance while it is still tearing down the connection we lost,
    /// answers a REQ it received long ago. Giving up earlier and starting
    /// over with a fresh REQ loses that, so like rpcrdma.ko we wait for the
    /// verdict; the cap only guards against a verdict that never comes.
    pub(super) fn connect_timeout(&self) -> c_ulong {
        // SAFETY: `xprt` is live; a racy read of a word is harmless here.
        let to = unsafe { (*self.raw()).connect_timeout };
        to.max(CONNECT_WAIT_CAP_SECS * hz())
    }

    /// The server address as printed in mountstats, for log messages.
    pub(super) fn peer(&self) -> &kernel::str::CStr {
        // SAFETY: `xprt` is live; the display strings are set in `setup`
        // and replaced only by `set_port`, before the first connect.
        let ptr = unsafe {
            (*self.raw()).address_strings[sys::rpc_display_format_t_RPC_DISPLAY_ADDR as usize]
        };
        if ptr.is_null() {
            return c"?";
        }
        // SAFETY: Display strings are NUL-terminated and live as long as
        // the transport.
        unsafe { kernel::str::CStr::from_char_ptr(ptr.cast()) }
    }

    /// Asks sunrpc to close the connection (through its autoclose work).
    pub(super) fn force_disconnect(&self) {
        // SAFETY: `xprt` is live.
        unsafe { sys::xprt_force_disconnect(self.raw()) };
    }

    fn connected(&self) -> bool {
        // SAFETY: `xprt` is live.
        unsafe { sys::rpcrdma_rs_xprt_connected(self.raw()) }
    }

    /// Whether sunrpc dropped the last reference to the transport:
    /// `xprt_destroy` then waits for `XPRT_LOCKED` and calls `destroy`.
    /// Nobody takes a reference from zero, so nothing will ever be sent on
    /// this transport again.
    fn dying(&self) -> bool {
        // SAFETY: `xprt` is live: `destroy` cannot run while the caller
        // holds the connect lock. The read is `kref_read`'s `READ_ONCE`.
        let refs = unsafe {
            core::ptr::read_volatile(&raw const (*self.raw()).kref.refcount.refs.counter)
        };
        refs == 0
    }

    /// # Safety
    ///
    /// The caller holds `XPRT_LOCKED`.
    unsafe fn ep(&self) -> Option<&Ep> {
        // SAFETY: With `XPRT_LOCKED` held nobody frees the connection.
        unsafe { self.ep.load(Ordering::Acquire).as_ref() }
    }

    /// Tears down the current connection, if any.
    ///
    /// # Safety
    ///
    /// The caller holds `XPRT_LOCKED` (or is `destroy`).
    unsafe fn teardown(&self) {
        let ep = self.ep.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if !ep.is_null() {
            // SAFETY: `ep` came from `KBox::into_raw` in the connect
            // worker and was just unpublished.
            let ep = unsafe { KBox::from_raw(ep) };
            let gen = ep.shared().gen;
            drop(ep);
            self.gone_gen.fetch_max(gen, Ordering::AcqRel);
            // SAFETY: The wait queue was initialised in `setup`.
            unsafe { sys::rpcrdma_rs_wake_up_all(self.gone_wq.get()) };
        }
    }

    /// Makes sure the peer can no longer reach memory registered on
    /// connection `gen`, for a request released before its Reply (an
    /// interrupted or timed-out RPC) whose pages are about to be reused.
    ///
    /// Tearing the connection down destroys its QP, after which none of
    /// its keys is usable; that costs a reconnect, but needs no hold on a
    /// connection that may be going away under us. Sleeps.
    fn fence_registered(&self, gen: u64) {
        if self.gone_gen.load(Ordering::Acquire) >= gen {
            return;
        }
        self.force_disconnect();
        // SAFETY: The wait queue was initialised in `setup`; `gone_gen` is
        // a u64 in memory that lives as long as the transport.
        let left = unsafe {
            sys::rpcrdma_rs_wait_until_gone(
                self.gone_wq.get(),
                self.gone_gen.as_ptr(),
                gen,
                FENCE_WAIT_SECS * hz(),
            )
        };
        if left == 0 {
            rwarn!(
                "connection to {} not torn down in {} s; freeing registered memory\n",
                self.peer(),
                FENCE_WAIT_SECS
            );
        }
    }

    fn update_cwnd(&self, grant: u32) {
        let xprt = self.raw();
        // SAFETY: `xprt` is live; `cwnd` is protected by `transport_lock`.
        unsafe {
            sys::rpcrdma_rs_spin_lock(&raw mut (*xprt).transport_lock);
            let cwnd = c_ulong::from(grant) << sys::RPC_CWNDSHIFT;
            if (*xprt).cwnd != cwnd {
                rdebug!("credits now {}\n", grant);
                (*xprt).cwnd = cwnd;
            }
            sys::rpcrdma_rs_spin_unlock(&raw mut (*xprt).transport_lock);
        }
    }

    fn reset_cwnd(&self) {
        let xprt = self.raw();
        // SAFETY: As for `update_cwnd`.
        unsafe {
            sys::rpcrdma_rs_spin_lock(&raw mut (*xprt).transport_lock);
            // `cong` is left alone: requests sent on the old connection
            // still hold their congestion slots and give them back when
            // they are released; zeroing it would make that underflow and
            // leave the transport congested for good.
            (*xprt).cwnd = c_ulong::from(1u32) << sys::RPC_CWNDSHIFT;
            sys::rpcrdma_rs_spin_unlock(&raw mut (*xprt).transport_lock);
        }
    }

    /// Handles one received message (Receive completion, process context):
    /// a Reply whose RPC holds MRs is finished by [`RdmaXprt::finish_reply`]
    /// once they are invalidated.
    pub(super) fn receive(
        &self,
        shared: &Shared,
        ctx: &RecvCtx,
        len: usize,
        invalidated: Option<u32>,
    ) -> Handled {
        let msg = ctx.msg(len);
        let Received::Reply {
            xid,
            credits,
            payload,
        } = classify_received(msg, &self.stats, self.cfg.slots)
        else {
            return Handled::Done;
        };
        self.had_reply.store(true, Ordering::Relaxed);
        self.update_cwnd(credits);
        let xprt = self.raw();
        // SAFETY: `xprt` is live; `xprt_lookup_rqst` requires `queue_lock`,
        // and pinning keeps the request alive after we drop it.
        let rqst = unsafe {
            sys::rpcrdma_rs_spin_lock(&raw mut (*xprt).queue_lock);
            let rqst = sys::xprt_lookup_rqst(xprt, xid);
            if !rqst.is_null() {
                sys::xprt_pin_rqst(rqst);
            }
            sys::rpcrdma_rs_spin_unlock(&raw mut (*xprt).queue_lock);
            rqst
        };
        let Some(rqst) = NonNull::new(rqst) else {
            rdebug!("reply for unknown xid {:#x}\n", u32::from_be(xid));
            return Handled::Done;
        };
        // SAFETY: The request is pinned, so its buffer (and state) stays.
        let st = unsafe { ReqState::of(rqst) };
        let pending = Pending {
            rqst: rqst.as_ptr(),
            len,
        };
        // Without LOCAL_INVs, which complete after the Send on the same
        // queue, a Reply may overtake its Call's Send completion.
        let wait_send = || {
            let seq = st.send_seq.load(Ordering::Relaxed);
            if seq != 0
                && st.gen.load(Ordering::Relaxed) == shared.gen
                && seq > shared.sends_completed()
            {
                bump(&self.stats.reply_waits_for_send, 1);
                return shared.defer_until_sent(ctx, seq, pending);
            }
            false
        };
        let mut mrs = [0u16; MAX_RPC_MRS];
        let n = st.mrs(shared.gen, &mut mrs);
        let mut list = mrs.get(..n).unwrap_or(&[]);
        let mut rest = [0u16; MAX_RPC_MRS];
        let pool = shared.pool();
        if let (Some(pool), Some(rkey), false) = (pool, invalidated, list.is_empty()) {
            let mut keys = [0u32; MAX_RPC_MRS];
            for (k, &i) in keys.iter_mut().zip(list) {
                *k = pool.rkey(i).unwrap_or(0);
            }
            match plan::remote_invalidation_ok(rkey, keys.get(..list.len()).unwrap_or(&[])) {
                Some(pos) => {
                    // The server invalidated it: nothing can reach it now.
                    if let Some(&i) = list.get(pos) {
                        pool.release(i, false);
                    }
                    let mut m = 0;
                    for (k, &i) in list.iter().enumerate() {
                        if k != pos {
                            if let Some(r) = rest.get_mut(m) {
                                *r = i;
                                m += 1;
                            }
                        }
                    }
                    st.set_mrs(rest.get(..m).unwrap_or(&[]));
                    list = rest.get(..m).unwrap_or(&[]);
                }
                None => {
                    rwarn!("server invalidated a key that is not the RPC's: closing\n");
                    bump(&self.stats.bad_remote_inv, 1);
                    bump(&self.stats.bad_reply_count, 1);
                    self.force_disconnect();
                    // SAFETY: Pinned; the RPC is retransmitted after the
                    // reconnect, and its MRs go with the connection.
                    unsafe { unpin(xprt, rqst) };
                    return Handled::Done;
                }
            }
        }
        // No MRs left to invalidate (any the server invalidated were
        // already taken off the request's list).
        let Some(pool) = pool.filter(|_| !list.is_empty()) else {
            if wait_send() {
                return Handled::Deferred;
            }
            // SAFETY: Pinned.
            unsafe { self.complete(rqst, payload, st) };
            return Handled::Done;
        };
        match pool.invalidate(shared, list, ctx, pending) {
            Ok(()) => {
                bump(&self.stats.local_inv_needed, list.len() as u64);
                Handled::Deferred
            }
            Err(_) => {
                // The QP is in error: nothing can reach the MRs through it
                // any more, but their state is unknown.
                self.force_disconnect();
                for &i in list {
                    pool.release(i, true);
                }
                bump(&self.stats.mrs_recycled, list.len() as u64);
                st.set_mrs(&[]);
                // SAFETY: Pinned.
                unsafe { self.complete(rqst, payload, st) };
                Handled::Done
            }
        }
    }

    /// Finishes a Reply whose RPC's MRs are now invalidated (`ok`) or
    /// flushed.
    pub(super) fn finish_reply(&self, shared: &Shared, ctx: &RecvCtx, pending: Pending, ok: bool) {
        let Some(rqst) = NonNull::new(pending.rqst) else {
            return;
        };
        // SAFETY: `receive` pinned the request before posting.
        let st = unsafe { ReqState::of(rqst) };
        let mut mrs = [0u16; MAX_RPC_MRS];
        let n = st.mrs(shared.gen, &mut mrs);
        if let Some(pool) = shared.pool() {
            for &i in mrs.get(..n).unwrap_or(&[]) {
                pool.release(i, !ok);
            }
        }
        if !ok {
            bump(&self.stats.mrs_recycled, n as u64);
        }
        st.set_mrs(&[]);
        let payload = match classify_received(ctx.msg(pending.len), &self.stats, self.cfg.slots) {
            Received::Reply { payload, .. } => payload,
            Received::Drop => Err(EIO),
        };
        // SAFETY: Pinned by `receive`.
        unsafe { self.complete(rqst, payload, st) };
    }

    /// Places a Reply in the request's receive buffer and completes it.
    ///
    /// # Safety
    ///
    /// `rqst` is pinned; this unpins it.
    unsafe fn complete(
        &self,
        rqst: NonNull<sys::rpc_rqst>,
        payload: Result<ReplyBody<'_>, Error>,
        st: &ReqState,
    ) {
        let status = match payload {
            Ok(body) => match plan::check_reply(body.nomsg, &body.lists, &st.offered()) {
                Ok(ReplyShape::Inline) => {
                    // SAFETY: The request is pinned, so its buffer stays.
                    unsafe { copy_to_rcv_buf(rqst, body.payload, &self.stats) }
                }
                Ok(ReplyShape::Write { written }) => {
                    bump(&self.stats.total_rdma_reply, u64::from(written));
                    // SAFETY: As above.
                    unsafe { write_chunk_fixup(rqst, body.payload, written, &self.stats) }
                }
                Ok(ReplyShape::Reply { written }) => {
                    bump(&self.stats.total_rdma_reply, u64::from(written));
                    c_int::try_from(written).unwrap_or(EIO.to_errno())
                }
                Err(err) => {
                    rdebug!("bad reply: {:?}\n", err);
                    bump(&self.stats.bad_reply_count, 1);
                    EIO.to_errno()
                }
            },
            Err(err) => err.to_errno(),
        };
        let xprt = self.raw();
        // SAFETY: The request is pinned; completing and unpinning need
        // `queue_lock`.
        unsafe {
            sys::rpcrdma_rs_spin_lock(&raw mut (*xprt).queue_lock);
            sys::xprt_complete_rqst((*rqst.as_ptr()).rq_task, status);
            sys::xprt_unpin_rqst(rqst.as_ptr());
            sys::rpcrdma_rs_spin_unlock(&raw mut (*xprt).queue_lock);
        }
    }
}

/// Unpins a request without completing it.
///
/// # Safety
///
/// `rqst` is pinned, on `xprt`.
unsafe fn unpin(xprt: *mut sys::rpc_xprt, rqst: NonNull<sys::rpc_rqst>) {
    // SAFETY: The caller's promise; unpinning needs `queue_lock`.
    unsafe {
        sys::rpcrdma_rs_spin_lock(&raw mut (*xprt).queue_lock);
        sys::xprt_unpin_rqst(rqst.as_ptr());
        sys::rpcrdma_rs_spin_unlock(&raw mut (*xprt).queue_lock);
    }
}

/// Transport state of one request, kept in front of its buffers (see
/// [`op_buf_alloc`]).
///
/// # Invariants
///
/// `mrs` is written by the sender (with `XPRT_LOCKED`) before it posts
/// and publishes `nmrs` with release; afterwards only by the Reply's
/// handlers, which run one after the other.
#[repr(C)]
pub(super) struct ReqState {
    /// Connection the MRs belong to.
    gen: AtomicU64,
    /// Number of the Call's Send on that connection.
    send_seq: AtomicU64,
    nmrs: AtomicU32,
    /// Write chunk bytes registered, `u32::MAX` for none.
    offered_write: AtomicU32,
    /// Reply chunk bytes registered, `u32::MAX` for none.
    offered_reply: AtomicU32,
    mrs: UnsafeCell<[u16; MAX_RPC_MRS]>,
}

// SAFETY: See the type invariants.
unsafe impl Sync for ReqState {}

/// Bytes in front of `rq_buffer`: the state, rounded up to 16.
const REQ_PREFIX: usize = (core::mem::size_of::<ReqState>() + 15) & !15;

impl ReqState {
    fn new() -> Self {
        Self {
            gen: AtomicU64::new(0),
            send_seq: AtomicU64::new(0),
            nmrs: AtomicU32::new(0),
            offered_write: AtomicU32::new(u32::MAX),
            offered_reply: AtomicU32::new(u32::MAX),
            mrs: UnsafeCell::new([0; MAX_RPC_MRS]),
        }
    }

    /// # Safety
    ///
    /// `rqst` is live and has buffers from [`op_buf_alloc`].
    unsafe fn of<'a>(rqst: NonNull<sys::rpc_rqst>) -> &'a Self {
        // SAFETY: `op_buf_alloc` put a `ReqState` `REQ_PREFIX` bytes before
        // `rq_buffer`.
        unsafe {
            &*(*rqst.as_ptr())
                .rq_buffer
                .cast::<u8>()
                .sub(REQ_PREFIX)
                .cast::<Self>()
        }
    }

    /// Copies the MRs held on connection `gen` into `out`; returns how many.
    fn mrs(&self, gen: u64, out: &mut [u16; MAX_RPC_MRS]) -> usize {
        let n = self.nmrs.load(Ordering::Acquire) as usize;
        if n == 0 || self.gen.load(Ordering::Relaxed) != gen {
            return 0;
        }
        // SAFETY: Published by the release store of `nmrs` (invariant).
        *out = unsafe { *self.mrs.get() };
        n.min(MAX_RPC_MRS)
    }

    /// Records the MRs now held (by the current owner, see invariants).
    fn set_mrs(&self, mrs: &[u16]) {
        let n = mrs.len().min(MAX_RPC_MRS);
        // SAFETY: Only the current owner calls this (type invariants).
        let dst = unsafe { &mut *self.mrs.get() };
        if let (Some(d), Some(s)) = (dst.get_mut(..n), mrs.get(..n)) {
            d.copy_from_slice(s);
        }
        self.nmrs.store(n as u32, Ordering::Release);
    }

    fn offered(&self) -> Offered {
        let get = |a: &AtomicU32| Some(a.load(Ordering::Relaxed)).filter(|&v| v != u32::MAX);
        Offered {
            write_chunk: get(&self.offered_write),
            reply_chunk: get(&self.offered_reply),
        }
    }
}

/// Lays out a Reply whose result data came in the Write chunk
/// ([`plan::write_fixup`]); returns its length.
///
/// # Safety
///
/// `rqst` must be pinned.
unsafe fn write_chunk_fixup(
    rqst: NonNull<sys::rpc_rqst>,
    payload: &[u8],
    written: u32,
    stats: &Stats,
) -> c_int {
    let r = rqst.as_ptr();
    // SAFETY: The caller keeps `rqst` alive; nobody else touches the
    // buffers of a request being completed.
    unsafe {
        let prv = &raw mut (*r).rq_private_buf;
        let rcv = &raw mut (*r).rq_rcv_buf;
        let head = u32::try_from((*prv).head[0].iov_len).unwrap_or(u32::MAX);
        let inline = u32::try_from(payload.len()).unwrap_or(u32::MAX);
        let f = plan::write_fixup(head, (*prv).page_len, inline, written);
        if let Some(h) = f.trim_head {
            let delta = head.saturating_sub(h);
            for b in [prv, rcv] {
                (*b).head[0].iov_len = h as usize;
                (*b).buflen = (*b).buflen.saturating_sub(delta);
            }
        }
        let (first, rest) = payload.split_at(f.head_copy.min(inline) as usize);
        if sys::rpcrdma_rs_write_xdr_buf(
            prv,
            0,
            first.as_ptr().cast_mut().cast(),
            first.len() as c_uint,
        ) != 0
        {
            return EIO.to_errno();
        }
        if !rest.is_empty() {
            let rc = sys::rpcrdma_rs_write_xdr_buf(
                prv,
                f.rest_offset,
                rest.as_ptr().cast_mut().cast(),
                rest.len() as c_uint,
            );
            if rc != 0 {
                return EIO.to_errno();
            }
            bump(&stats.fixup_copy_count, rest.len() as u64);
        }
        let room =
            ((*prv).head[0].iov_len + (*prv).page_len as usize + (*prv).tail[0].iov_len) as u64;
        c_int::try_from(u64::from(f.total).min(room)).unwrap_or(c_int::MAX)
    }
}

/// Copies a Reply into the request's private receive buffer, head then
/// pages then tail, as a byte stream transport does; returns the bytes
/// copied.
///
/// # Safety
///
/// `rqst` must be pinned (or otherwise kept alive).
unsafe fn copy_to_rcv_buf(rqst: NonNull<sys::rpc_rqst>, payload: &[u8], stats: &Stats) -> c_int {
    // SAFETY: The caller keeps `rqst` alive; the buffer layout is fixed
    // once the request is queued for receive.
    let buf = unsafe { &raw const (*rqst.as_ptr()).rq_private_buf };
    // SAFETY: `buf` is valid; reading the three lengths.
    let room =
        unsafe { (*buf).head[0].iov_len + (*buf).page_len as usize + (*buf).tail[0].iov_len };
    let len = payload.len().min(room);
    let Ok(len32) = c_uint::try_from(len) else {
        return EIO.to_errno();
    };
    // SAFETY: `len` fits the buffer's head, pages and tail; `payload` has
    // at least `len` bytes; the helper only reads from it.
    let rc =
        unsafe { sys::rpcrdma_rs_write_xdr_buf(buf, 0, payload.as_ptr().cast_mut().cast(), len32) };
    if rc != 0 {
        return EIO.to_errno();
    }
    // Bytes that landed past the head: what rpcrdma.ko's fixup copies.
    // SAFETY: `buf` is valid.
    let head = unsafe { (*buf).head[0].iov_len };
    bump(&stats.fixup_copy_count, len.saturating_sub(head) as u64);
    c_int::try_from(len).unwrap_or(c_int::MAX)
}

/// Fails `setup` with `err`, as an `ERR_PTR`.
fn err_ptr(err: Error) -> *mut sys::rpc_xprt {
    err.to_errno() as isize as *mut sys::rpc_xprt
}

fn this_module() -> *mut sys::module {
    <crate::RpcRdma as kernel::ModuleMetadata>::THIS_MODULE
        .as_ptr()
        .cast()
}

/// `xprt_class.setup`.
///
/// # Safety
///
/// Called by sunrpc with valid `args`.
unsafe extern "C" fn xprt_setup(args: *mut sys::xprt_create) -> *mut sys::rpc_xprt {
    // SAFETY: sunrpc passes valid arguments.
    let args = unsafe { &*args };
    if args.addrlen > core::mem::size_of::<sys::__kernel_sockaddr_storage>() {
        return err_ptr(EBADF);
    }
    // SAFETY: Our own module pointer.
    if !unsafe { sys::rpcrdma_rs_try_module_get(this_module()) } {
        return err_ptr(EIO);
    }
    let cfg = Config::from_params();
    // SAFETY: `args.net` is valid; sunrpc zero-allocates at least our size.
    let xprt = unsafe {
        sys::xprt_alloc(
            args.net,
            core::mem::size_of::<RdmaXprt>(),
            MIN_SLOTS,
            cfg.slots,
        )
    };
    if xprt.is_null() {
        // SAFETY: Balances the get above.
        unsafe { sys::rpcrdma_rs_module_put(this_module()) };
        return err_ptr(ENOMEM);
    }
    // SAFETY: `xprt` is fresh and ours alone; `args.dstaddr` holds
    // `args.addrlen` bytes.
    unsafe {
        (&raw mut (*xprt.cast::<RdmaXprt>()).cfg).write(cfg);
        let rx = RdmaXprt::from_raw(xprt);
        let hz = hz();
        let to = rx.timeout.get();
        (*to).to_initval = 60 * hz;
        (*to).to_maxval = 60 * hz;
        (*xprt).timeout = to;
        (*xprt).connect_timeout = (*to).to_initval;
        (*xprt).max_reconnect_timeout = (*to).to_maxval;
        (*xprt).bind_timeout = 60 * hz;
        (*xprt).reestablish_timeout = 0;
        (*xprt).idle_timeout = 5 * 60 * hz;
        (*xprt).ops = &OPS;
        (*xprt).prot = IPPROTO_TCP;
        (*xprt).xprt_class = CLASS.load(Ordering::Acquire);
        (*xprt).addrlen = args.addrlen;
        core::ptr::copy_nonoverlapping(
            args.dstaddr.cast::<u8>(),
            (&raw mut (*xprt).addr).cast::<u8>(),
            args.addrlen,
        );
        if addr_port(xprt) != 0 {
            sys::rpcrdma_rs_xprt_set_bound(xprt);
        }
        format_addresses(xprt);
        sys::rpcrdma_rs_init_delayed_work(rx.connect_work.get(), Some(connect_worker));
        sys::rpcrdma_rs_init_waitqueue_head(rx.gone_wq.get());
        (*xprt).max_payload = MAX_PAYLOAD;
        rdebug!("transport created\n");
    }
    xprt
}

/// The registered class, for `xprt->xprt_class` (`xprt_create` does not
/// carry it).
static CLASS: AtomicPtr<sys::xprt_class> = AtomicPtr::new(core::ptr::null_mut());

/// The port in `xprt->addr`, in host order.
///
/// # Safety
///
/// `xprt` must be live.
unsafe fn addr_port(xprt: *mut sys::rpc_xprt) -> u16 {
    // SAFETY: `sin_port` and `sin6_port` share offset 2 of the address.
    let bytes = unsafe { &*(&raw const (*xprt).addr).cast::<[u8; 4]>() };
    u16::from_be_bytes([bytes[2], bytes[3]])
}

/// Stores a formatted string as one of the transport's display strings.
///
/// # Safety
///
/// `xprt` must be live and not yet visible to other threads, or the
/// caller must hold `XPRT_LOCKED`.
unsafe fn set_display(xprt: *mut sys::rpc_xprt, which: u32, s: Option<CString>) {
    let ptr = match s {
        // SAFETY: `s` is NUL-terminated.
        Some(s) => unsafe { sys::rpcrdma_rs_kstrdup(s.as_char_ptr().cast()) },
        None => core::ptr::null_mut(),
    };
    // SAFETY: `which` is below RPC_DISPLAY_MAX; the old string, if any,
    // was allocated by us.
    unsafe {
        let slot = &raw mut (*xprt).address_strings[which as usize];
        sys::rpcrdma_rs_kfree((*slot).cast());
        *slot = ptr;
    }
}

/// Fills `xprt->address_strings` like `xprt_rdma_format_addresses`.
///
/// # Safety
///
/// `xprt` must be live and not yet visible to other threads.
unsafe fn format_addresses(xprt: *mut sys::rpc_xprt) {
    // SAFETY: `addr` is a sockaddr_storage of at least 28 bytes.
    let addr = unsafe { &*(&raw const (*xprt).addr).cast::<[u8; 28]>() };
    let family = u16::from_ne_bytes([addr[0], addr[1]]);
    let (hex, netid) = match family {
        AF_INET => {
            let a = u32::from_be_bytes([addr[4], addr[5], addr[6], addr[7]]);
            (CString::try_from_fmt(fmt!("{:08x}", a)).ok(), c"rdma")
        }
        AF_INET6 => {
            let a = u128::from_be_bytes(addr[8..24].try_into().unwrap_or([0; 16]));
            (CString::try_from_fmt(fmt!("{:032x}", a)).ok(), c"rdma6")
        }
        _ => {
            pr_err!("unrecognized address family\n");
            return;
        }
    };
    let mut buf = [0 as c_char; 128];
    // SAFETY: `addr` is a valid sockaddr; `buf` is writable for its size.
    let n = unsafe {
        sys::rpcrdma_rs_ntop(
            (&raw const (*xprt).addr).cast(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    let mut bytes = [0u8; 128];
    for (dst, src) in bytes.iter_mut().zip(buf.iter()) {
        *dst = *src as u8;
    }
    let printable = core::str::from_utf8(bytes.get(..n.min(127)).unwrap_or(&[])).unwrap_or("");
    // SAFETY: `xprt` is live and still private to us.
    unsafe {
        set_display(
            xprt,
            sys::rpc_display_format_t_RPC_DISPLAY_ADDR,
            CString::try_from_fmt(fmt!("{}", printable)).ok(),
        );
        set_display(xprt, sys::rpc_display_format_t_RPC_DISPLAY_HEX_ADDR, hex);
        (*xprt).address_strings[sys::rpc_display_format_t_RPC_DISPLAY_PROTO as usize] =
            c"rdma".as_char_ptr().cast();
        (*xprt).address_strings[sys::rpc_display_format_t_RPC_DISPLAY_NETID as usize] =
            netid.as_char_ptr().cast();
        format_port(xprt);
    }
}

/// # Safety
///
/// As for [`set_display`].
unsafe fn format_port(xprt: *mut sys::rpc_xprt) {
    // SAFETY: The caller guarantees `xprt` is live.
    let port = unsafe { addr_port(xprt) };
    // SAFETY: As above.
    unsafe {
        set_display(
            xprt,
            sys::rpc_display_format_t_RPC_DISPLAY_PORT,
            CString::try_from_fmt(fmt!("{}", port)).ok(),
        );
        set_display(
            xprt,
            sys::rpc_display_format_t_RPC_DISPLAY_HEX_PORT,
            CString::try_from_fmt(fmt!("{:4x}", port)).ok(),
        );
    }
}

/// Frees the display strings we allocated (not the constant PROTO and
/// NETID ones).
///
/// # Safety
///
/// `xprt` must be live and no longer used by anyone else.
unsafe fn free_addresses(xprt: *mut sys::rpc_xprt) {
    for which in [
        sys::rpc_display_format_t_RPC_DISPLAY_ADDR,
        sys::rpc_display_format_t_RPC_DISPLAY_PORT,
        sys::rpc_display_format_t_RPC_DISPLAY_HEX_ADDR,
        sys::rpc_display_format_t_RPC_DISPLAY_HEX_PORT,
    ] {
        // SAFETY: The caller owns `xprt`.
        unsafe { set_display(xprt, which, None) };
    }
}

/// The operations table.
static OPS: sys::rpc_xprt_ops = sys::rpc_xprt_ops {
    set_buffer_size: None,
    reserve_xprt: Some(sys::xprt_reserve_xprt_cong),
    release_xprt: Some(sys::xprt_release_xprt_cong),
    alloc_slot: Some(sys::xprt_alloc_slot),
    free_slot: Some(sys::xprt_free_slot),
    rpcbind: Some(sys::rpcb_getport_async),
    set_port: Some(op_set_port),
    connect: Some(op_connect),
    get_srcaddr: None,
    get_srcport: None,
    buf_alloc: Some(op_buf_alloc),
    buf_free: Some(op_buf_free),
    prepare_request: None,
    send_request: Some(op_send_request),
    abort_send_request: None,
    wait_for_reply_request: Some(sys::xprt_wait_for_reply_request_def),
    timer: Some(op_timer),
    release_request: Some(sys::xprt_release_rqst_cong),
    close: Some(op_close),
    destroy: Some(op_destroy),
    set_connect_timeout: Some(op_set_connect_timeout),
    print_stats: Some(op_print_stats),
    enable_swap: None,
    disable_swap: None,
    inject_disconnect: Some(op_inject_disconnect),
    bc_setup: Some(op_bc_setup),
    bc_maxpayload: Some(op_bc_maxpayload),
    bc_num_slots: Some(op_bc_num_slots),
    bc_free_rqst: None,
    bc_destroy: None,
};

/// Backchannel setup. The NFSv4.1 client requires the operation to
/// exist; backward-direction Calls are dropped (and counted) on receipt,
/// so there is nothing to preallocate.
///
/// # Safety
///
/// Called by sunrpc with a live transport.
unsafe extern "C" fn op_bc_setup(_xprt: *mut sys::rpc_xprt, _min_reqs: c_uint) -> c_int {
    0
}

/// Largest backward-direction message: one inline buffer less the
/// smallest transport header, as rpcrdma.ko computes it.
///
/// # Safety
///
/// Called by sunrpc with a live transport.
unsafe extern "C" fn op_bc_maxpayload(xprt: *mut sys::rpc_xprt) -> usize {
    // SAFETY: sunrpc passes a live transport of ours.
    let rx = unsafe { RdmaXprt::from_raw(xprt) };
    rx.cfg.inline_read.min(rx.cfg.inline_write) as usize - super::HDRLEN_MIN
}

/// Backward-direction slots offered in CREATE_SESSION: the minimum.
///
/// # Safety
///
/// Called by sunrpc with a live transport.
unsafe extern "C" fn op_bc_num_slots(_xprt: *mut sys::rpc_xprt) -> c_uint {
    1
}

/// Allocates the Call and Reply buffers of a request in one piece.
///
/// # Safety
///
/// Called by sunrpc with a live task that owns a request.
unsafe extern "C" fn op_buf_alloc(task: *mut sys::rpc_task) -> c_int {
    // SAFETY: sunrpc passes a task with a request.
    unsafe {
        let rqst = (*task).tk_rqstp;
        let call = (*rqst).rq_callsize;
        let Some(size) = call
            .checked_add((*rqst).rq_rcvsize)
            .and_then(|n| n.checked_add(REQ_PREFIX))
        else {
            return ENOMEM.to_errno();
        };
        let base = sys::rpcrdma_rs_task_alloc(size).cast::<u8>();
        if base.is_null() {
            return ENOMEM.to_errno();
        }
        // kmalloc memory is aligned for `ReqState`.
        base.cast::<ReqState>().write(ReqState::new());
        let buf = base.add(REQ_PREFIX);
        (*rqst).rq_buffer = buf.cast();
        (*rqst).rq_rbuffer = buf.add(call).cast();
    }
    0
}

/// Frees what [`op_buf_alloc`] allocated.
///
/// # Safety
///
/// Called by sunrpc with a live task whose request has buffers.
unsafe extern "C" fn op_buf_free(task: *mut sys::rpc_task) {
    // SAFETY: sunrpc passes a task whose `rq_buffer` came from us, the
    // request state in front of it.
    unsafe {
        let rqst = (*task).tk_rqstp;
        if (*rqst).rq_buffer.is_null() {
            return;
        }
        let st = ReqState::of(NonNull::new_unchecked(rqst));
        if st.nmrs.load(Ordering::Acquire) != 0 {
            // An RPC given up before its Reply, with memory still
            // registered: the server must no longer reach it once we
            // return and the pages go back to their owner.
            RdmaXprt::from_raw((*rqst).rq_xprt).fence_registered(st.gen.load(Ordering::Relaxed));
        }
        sys::rpcrdma_rs_kfree((*rqst).rq_buffer.cast::<u8>().sub(REQ_PREFIX).cast());
        (*rqst).rq_buffer = core::ptr::null_mut();
        (*rqst).rq_rbuffer = core::ptr::null_mut();
    }
}

/// Initial reconnect backoff, doubled per failure up to
/// `max_reconnect_timeout`.
fn init_reestablish() -> c_ulong {
    3 * hz()
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_set_port(xprt: *mut sys::rpc_xprt, port: c_ushort) {
    // SAFETY: sunrpc passes a live transport and holds it for rpcbind.
    unsafe {
        let bytes = (&raw mut (*xprt).addr).cast::<[u8; 4]>();
        let [hi, lo] = port.to_be_bytes();
        (*bytes)[2] = hi;
        (*bytes)[3] = lo;
        format_port(xprt);
    }
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_connect(xprt: *mut sys::rpc_xprt, task: *mut sys::rpc_task) {
    // SAFETY: sunrpc passes a live transport of ours.
    let rx = unsafe { RdmaXprt::from_raw(xprt) };
    // SAFETY: The task holds XPRT_LOCKED; the connect worker inherits it.
    let locked = unsafe { sys::xprt_lock_connect(xprt, task, xprt.cast()) };
    if !locked {
        pr_warn!("connect without the transport lock\n");
    }
    let mut delay: c_ulong = 0;
    // SAFETY: With XPRT_LOCKED held we own the reconnect state.
    unsafe {
        if rx.had_reply.swap(false, Ordering::Relaxed) {
            (*xprt).reestablish_timeout = 0;
        }
        if rx.backoff.load(Ordering::Relaxed) {
            delay = sys::xprt_reconnect_delay(xprt);
            sys::xprt_reconnect_backoff(xprt, init_reestablish());
        }
    }
    rdebug!("connect in {} jiffies\n", delay);
    // SAFETY: The work was initialised in setup.
    unsafe { sys::rpcrdma_rs_queue_delayed_work(rx.connect_work.get(), delay) };
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn connect_worker(work: *mut sys::work_struct) {
    // SAFETY: The work item is the `work` of our `connect_work`.
    let dwork = unsafe { kernel::container_of!(work, sys::delayed_work, work) };
    // SAFETY: `connect_work` is a field of a live `RdmaXprt`.
    let rx = unsafe {
        &*kernel::container_of!(
            dwork.cast::<Opaque<sys::delayed_work>>(),
            RdmaXprt,
            connect_work
        )
    };
    let xprt = rx.raw();
    // A connect that `op_connect` delayed (our backoff) holds XPRT_LOCKED
    // until it runs. When the RPC that asked for it gives up meanwhile
    // (past its major timeout) and its client is shut down, xprt_destroy
    // waits for that lock; connecting now would set up a connection that
    // nothing is ever sent on, torn down by `destroy` as soon as we unlock
    // (issue 11, defect 5). rpcrdma.ko reconnects without delay and has
    // no such window.
    if rx.dying() {
        rdebug!("transport being destroyed: no connect\n");
        // SAFETY: The connect lock is ours; release it as below.
        unsafe {
            sys::rpcrdma_rs_xprt_clear_connecting(xprt);
            sys::xprt_unlock_connect(xprt, xprt.cast());
            sys::xprt_wake_pending_tasks(xprt, ENOTCONN.to_errno());
        }
        return;
    }
    // SAFETY: The connect lock (XPRT_LOCKED) is ours until unlocked below.
    unsafe { rx.teardown() };
    // SAFETY: As above.
    unsafe { sys::rpcrdma_rs_xprt_clear_connected(xprt) };
    rx.reset_cwnd();
    let start = jiffies();
    let result = Ep::connect(rx, &rx.cfg);
    let took_ms = jiffies().wrapping_sub(start).saturating_mul(1000) / hz().max(1);
    // SAFETY: `xprt` is live; we still hold the connect lock.
    let status = unsafe {
        sys::rpcrdma_rs_xprt_clear_connecting(xprt);
        match result {
            Ok(ep) => {
                let ep_inline = ep.inline();
                rx.ep.store(KBox::into_raw(ep), Ordering::Release);
                rx.backoff.store(false, Ordering::Relaxed);
                (*xprt).connect_cookie = (*xprt).connect_cookie.wrapping_add(1);
                (*xprt).stat.connect_count += 1;
                (*xprt).stat.connect_time = (*xprt)
                    .stat
                    .connect_time
                    .wrapping_add(jiffies().wrapping_sub((*xprt).stat.connect_start) as u64);
                sys::rpcrdma_rs_xprt_set_connected(xprt);
                pr_info!(
                    "connected to {} (inline send {} recv {}) in {} ms\n",
                    rx.peer(),
                    ep_inline.send,
                    ep_inline.recv,
                    took_ms
                );
                EAGAIN.to_errno()
            }
            Err(err) => {
                pr_info!(
                    "connect to {} failed ({}) after {} ms\n",
                    rx.peer(),
                    err.to_errno(),
                    took_ms
                );
                rx.backoff.store(true, Ordering::Relaxed);
                err.to_errno()
            }
        }
    };
    // SAFETY: Releases the lock taken in `op_connect`, then wakes waiters.
    unsafe {
        sys::xprt_unlock_connect(xprt, xprt.cast());
        sys::xprt_wake_pending_tasks(xprt, status);
    }
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_send_request(rqst: *mut sys::rpc_rqst) -> c_int {
    // SAFETY: sunrpc passes a live request with XPRT_LOCKED held.
    let (xprt, rx) = unsafe {
        let xprt = (*rqst).rq_xprt;
        (xprt, RdmaXprt::from_raw(xprt))
    };
    if !rx.connected() {
        return ENOTCONN.to_errno();
    }
    // SAFETY: Live transport and request.
    if !unsafe { sys::xprt_request_get_cong(xprt, rqst) } {
        return EBADSLT.to_errno();
    }
    // SAFETY: XPRT_LOCKED is held by the caller.
    let Some(ep) = (unsafe { rx.ep() }) else {
        return ENOTCONN.to_errno();
    };
    // SAFETY: Live transport and request.
    let (xid, cookie, snd) = unsafe {
        (
            (*rqst).rq_xid,
            (*rqst).rq_connect_cookie,
            &raw const (*rqst).rq_snd_buf,
        )
    };
    // A retransmission on the same connection would upset the credit
    // accounting: reconnect instead, as rpcrdma.ko does.
    // SAFETY: Live transport.
    if cookie == unsafe { (*xprt).connect_cookie } {
        // SAFETY: XPRT_LOCKED is held.
        unsafe { op_close(xprt) };
        return ENOTCONN.to_errno();
    }
    // SAFETY: Reading the length of the send buffer.
    let snd_len = unsafe { (*snd).len } as usize;
    let inline_send = ep.inline().send as usize;
    let Some(pool) = ep.pool() else {
        return ENOTCONN.to_errno();
    };
    // SAFETY: The request has buffers from `op_buf_alloc`.
    let st = unsafe { ReqState::of(NonNull::new_unchecked(rqst)) };
    // MRs from an earlier connection went with it.
    st.set_mrs(&[]);
    st.offered_write.store(u32::MAX, Ordering::Relaxed);
    st.offered_reply.store(u32::MAX, Ordering::Relaxed);
    // SAFETY: Live request, XPRT_LOCKED held.
    let (rpc, call_buf, reply_buf) = unsafe { rpc_shape(rqst) };
    let mut conn = plan::Connection::new(ep.inline(), &ep.limits);
    // A Call within the inline threshold always fits the Send buffer, so
    // the SGE limit only decides whether its pages are mapped or copied
    // (`plan::send_layout`), never whether it goes inline.
    conn.send_sges = u32::MAX;
    let chosen = plan::plan(&rpc, &conn);
    // SAFETY: Live request.
    let rcv = unsafe { &raw mut (*rqst).rq_rcv_buf };
    // SAFETY: `rcv` is the request's receive buffer, ours to prepare.
    let sparse = unsafe { (*rcv).flags } & sys::XDRBUF_SPARSE_PAGES != 0;
    // SAFETY: As above; fills the holes of the page array.
    if sparse && unsafe { sys::rpcrdma_rs_alloc_sparse_pages(rcv) } != 0 {
        return ENOBUFS.to_errno();
    }
    let regs = plan::registrations(&chosen, &call_buf, &reply_buf);
    let mut held = Held::new();
    let mut reads = [ReadSegment::default(); 16];
    let mut writes = [Segment::default(); 16];
    let mut reply = [Segment::default(); 16];
    let mut segs = [Segment::default(); 16];
    let (mut nreads, mut nwrites, mut nreply) = (0usize, 0usize, 0usize);
    let stats = &rx.stats;
    // SAFETY: We hold XPRT_LOCKED, and this is the only reference to the
    // list while we do.
    let page_list = unsafe { ep.page_list() };
    let mut register = |buf, range: plan::Range, writing, out: &mut [Segment]| {
        // SAFETY: The buffers are the request's and stay until it is
        // released, which waits for the Reply (and so for the
        // invalidation) or a disconnect.
        unsafe {
            region(page_list, buf, range.offset, range.len)?;
            register_pages(pool, page_list, writing, out, &mut held)
        }
    };
    let registered = (|| -> Result {
        if let Some((position, range)) = regs.read {
            let (n, _) = register(snd, range, false, &mut segs)?;
            for (r, seg) in reads.iter_mut().zip(segs.iter().take(n)) {
                *r = ReadSegment {
                    position,
                    segment: *seg,
                };
            }
            nreads = n;
            bump(&stats.read_chunk_count, n as u64);
        }
        if let Some((range, pad)) = regs.write {
            let (mut n, mut bytes) = register(rcv, range, true, &mut writes)?;
            // Some servers want room for the XDR pad.
            if pad {
                let pad = ep.write_pad().ok_or(EIO)?;
                *writes.get_mut(n).ok_or(EMSGSIZE)? = Segment {
                    handle: pad.rkey,
                    length: pad.length,
                    offset: pad.iova,
                };
                n += 1;
                bytes = bytes.saturating_add(pad.length);
            }
            nwrites = n;
            // As in rpcrdma.ko: the bytes offered for the server to write,
            // Write and Reply chunks; Read chunks are not counted.
            bump(&stats.total_rdma_request, u64::from(bytes));
            st.offered_write.store(bytes, Ordering::Relaxed);
            bump(&stats.write_chunk_count, n as u64);
        }
        if let Some(range) = regs.reply {
            let (n, bytes) = register(rcv, range, true, &mut reply)?;
            nreply = n;
            bump(&stats.total_rdma_request, u64::from(bytes));
            st.offered_reply.store(bytes, Ordering::Relaxed);
            bump(&stats.reply_chunk_count, n as u64);
        }
        Ok(())
    })();
    if let Err(err) = registered {
        for &i in held.ids() {
            pool.release(i, false);
        }
        if err == ENOBUFS {
            return ENOBUFS.to_errno();
        }
        bump(&rx.stats.failed_marshal_count, 1);
        return EIO.to_errno();
    }
    let write_list: [&[Segment]; 1] = [writes.get(..nwrites).unwrap_or(&[])];
    let chunks = ChunkSlices {
        reads: reads.get(..nreads).unwrap_or(&[]),
        writes: if nwrites > 0 { &write_list } else { &[] },
        reply: (nreply > 0).then(|| reply.get(..nreply).unwrap_or(&[])),
    };
    let nomsg = chosen.call == CallPlan::PositionZero;
    if nomsg {
        bump(&rx.stats.nomsg_call_count, 1);
    }
    let mut layout = plan::send_layout(chosen.call, &call_buf, ep.limits.send_sges(), PAGE as u32);
    let mapped = layout.mapped.and_then(|r| {
        // SAFETY: The Call's pages stay until the request is released,
        // which waits for its Reply, and the Reply waits for this Send.
        unsafe { region(page_list, snd, r.offset, r.len) }.ok()?;
        // SAFETY: As above.
        unsafe { ep.map_pages(page_list) }.ok()
    });
    if layout.mapped.is_some() && mapped.is_none() {
        // Could not map: copy it all, which always fits.
        layout = plan::send_layout(chosen.call, &call_buf, 0, PAGE as u32);
    }
    st.gen.store(ep.shared().gen, Ordering::Relaxed);
    // Only a Reply to a Call sent from the RPC's own pages must wait for
    // the Send to complete (see `receive`).
    let wait_seq = if mapped.is_some() {
        ep.next_send_seq()
    } else {
        0
    };
    st.send_seq.store(wait_seq, Ordering::Relaxed);
    st.set_mrs(held.ids());
    let chain = pool.reg_chain(held.ids());
    let credits = rx.cfg.slots;
    let mapped_len = layout.mapped.map_or(0, |r| r.len as usize);
    // The Reply may complete the RPC before `send` returns: the round
    // trip starts now.
    // SAFETY: Live request, XPRT_LOCKED held.
    unsafe { (*rqst).rq_xtime = sys::ktime_get() };
    let sent = ep.send(chain, held.ids().len() as u32, mapped, |buf| {
        let hdr = encode_call_header(buf, xid, credits, nomsg, chunks)?;
        let mut at = hdr;
        // The mapped pages, if any, go between the two copied parts.
        let mut split = at;
        for (k, part) in layout.copy.iter().enumerate() {
            if part.len != 0 {
                let end = at.checked_add(part.len as usize)?;
                let dst = buf.get_mut(at..end)?;
                // SAFETY: `snd` describes the request's Call, stable while
                // XPRT_LOCKED is held; `dst` has room for `len` bytes.
                let rc = unsafe {
                    let dst = dst.as_mut_ptr().cast();
                    sys::rpcrdma_rs_read_xdr_buf(snd, part.offset, dst, part.len)
                };
                if rc != 0 {
                    return None;
                }
                at = end;
            }
            if k == 0 {
                split = at;
            }
        }
        if at.checked_add(mapped_len)? > inline_send {
            return None;
        }
        Some((if mapped_len > 0 { split } else { at }, at))
    });
    if sent.is_err() {
        st.set_mrs(&[]);
        if !matches!(sent, Err(SendError::Post)) {
            for &i in held.ids() {
                pool.release(i, false);
            }
        }
    }
    match sent {
        Ok(()) => {}
        Err(SendError::NoBuffer) => {
            bump(&rx.stats.empty_sendctx_q, 1);
            return ENOBUFS.to_errno();
        }
        Err(SendError::TooBig) => {
            bump(&rx.stats.failed_marshal_count, 1);
            rwarn!("call of {} bytes exceeds the inline threshold\n", snd_len);
            return EMSGSIZE.to_errno();
        }
        Err(SendError::Post) => {
            // SAFETY: XPRT_LOCKED is held.
            unsafe { op_close(xprt) };
            return ENOTCONN.to_errno();
        }
    }
    // Everything past the head sent inline was pulled up into the Send
    // buffer, unless the pages were mapped.
    if chosen.call == CallPlan::Inline && mapped_len == 0 {
        bump(
            &rx.stats.pullup_copy_count,
            snd_len.saturating_sub(call_buf.head as usize) as u64,
        );
    }
    // SAFETY: Live request and task.
    unsafe {
        (*rqst).rq_xmit_bytes_sent += snd_len;
        // A Call without Reply throws off the credit accounting.
        if !sys::rpcrdma_rs_reply_expected((*rqst).rq_task) {
            op_close(xprt);
            return ENOTCONN.to_errno();
        }
    }
    0
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_timer(xprt: *mut sys::rpc_xprt, _task: *mut sys::rpc_task) {
    // SAFETY: sunrpc passes a live transport.
    unsafe { sys::xprt_force_disconnect(xprt) };
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_close(xprt: *mut sys::rpc_xprt) {
    // SAFETY: sunrpc passes a live transport of ours and holds XPRT_LOCKED.
    let rx = unsafe { RdmaXprt::from_raw(xprt) };
    rdebug!("close\n");
    // SAFETY: XPRT_LOCKED is held.
    unsafe {
        if !rx.ep.load(Ordering::Acquire).is_null() {
            pr_info!("connection to {} closed\n", rx.peer());
            rx.backoff.store(true, Ordering::Relaxed);
        }
        rx.teardown();
        (*xprt).connect_cookie = (*xprt).connect_cookie.wrapping_add(1);
        sys::xprt_disconnect_done(xprt);
    }
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_destroy(xprt: *mut sys::rpc_xprt) {
    // SAFETY: sunrpc passes a live transport of ours; nothing else uses it.
    let rx = unsafe { RdmaXprt::from_raw(xprt) };
    rdebug!("destroy\n");
    // SAFETY: The work was initialised in setup; after it is cancelled and
    // the connection torn down, nothing refers to the transport.
    unsafe {
        sys::rpcrdma_rs_cancel_delayed_work_sync(rx.connect_work.get());
        rx.teardown();
        free_addresses(xprt);
        sys::xprt_free(xprt);
        sys::rpcrdma_rs_module_put(this_module());
    }
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_set_connect_timeout(
    xprt: *mut sys::rpc_xprt,
    connect_timeout: c_ulong,
    reconnect_timeout: c_ulong,
) {
    // SAFETY: sunrpc passes a live transport of ours; the timeouts are
    // protected by `transport_lock`.
    unsafe {
        let rx = RdmaXprt::from_raw(xprt);
        sys::rpcrdma_rs_spin_lock(&raw mut (*xprt).transport_lock);
        if connect_timeout < (*xprt).connect_timeout {
            let to = rx.timeout.get();
            let initval = connect_timeout.max(init_reestablish() << 1);
            (*to).to_initval = initval;
            (*to).to_maxval = initval;
            (*xprt).timeout = to;
            (*xprt).connect_timeout = connect_timeout;
        }
        if reconnect_timeout < (*xprt).max_reconnect_timeout {
            (*xprt).max_reconnect_timeout = reconnect_timeout;
        }
        sys::rpcrdma_rs_spin_unlock(&raw mut (*xprt).transport_lock);
    }
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_inject_disconnect(xprt: *mut sys::rpc_xprt) {
    // Through autoclose, which disconnects the QP with XPRT_LOCKED held, so
    // the connection cannot vanish under us.
    // SAFETY: sunrpc passes a live transport.
    unsafe { sys::xprt_force_disconnect(xprt) };
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn op_print_stats(xprt: *mut sys::rpc_xprt, seq: *mut sys::seq_file) {
    // SAFETY: sunrpc passes a live transport of ours and a seq_file owned by
    // this thread.
    let (rx, stat, last_used, m) = unsafe {
        (
            RdmaXprt::from_raw(xprt),
            &(*xprt).stat,
            (*xprt).last_used,
            kernel::seq_file::SeqFile::from_raw(seq.cast()),
        )
    };
    let hz = hz().max(1);
    let idle = if rx.connected() {
        (jiffies().wrapping_sub(last_used) as i64) / hz as i64
    } else {
        0
    };
    let s = &rx.stats;
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    kernel::seq_print!(
        m,
        "\txprt:\trdma {} {} {} {} {} {} {} {} {} {} ",
        0,
        stat.bind_count,
        stat.connect_count,
        stat.connect_time / hz as u64,
        idle,
        stat.sends,
        stat.recvs,
        stat.bad_xids,
        stat.req_u,
        stat.bklog_u
    );
    kernel::seq_print!(
        m,
        "{} {} {} {} {} {} {} {} {} {} {} ",
        get(&s.read_chunk_count),
        get(&s.write_chunk_count),
        get(&s.reply_chunk_count),
        get(&s.total_rdma_request),
        get(&s.total_rdma_reply),
        get(&s.pullup_copy_count),
        get(&s.fixup_copy_count),
        0,
        get(&s.failed_marshal_count),
        get(&s.bad_reply_count),
        get(&s.nomsg_call_count)
    );
    kernel::seq_print!(
        m,
        "{} {} {} {} {} {}\n",
        get(&s.mrs_recycled),
        get(&s.mrs_orphaned),
        get(&s.mrs_allocated),
        get(&s.local_inv_needed),
        get(&s.empty_sendctx_q),
        get(&s.reply_waits_for_send)
    );
}

/// MRs registered for one Call, in order.
struct Held {
    ids: [u16; MAX_RPC_MRS],
    n: usize,
}

impl Held {
    fn new() -> Self {
        Self {
            ids: [0; MAX_RPC_MRS],
            n: 0,
        }
    }

    fn ids(&self) -> &[u16] {
        self.ids.get(..self.n).unwrap_or(&[])
    }

    fn push(&mut self, i: u16) -> Result {
        let slot = self.ids.get_mut(self.n).ok_or(EMSGSIZE)?;
        *slot = i;
        self.n += 1;
        Ok(())
    }
}

/// What the planner needs to know of a request: its shape, and the parts
/// of its Call and Reply buffers.
///
/// # Safety
///
/// `rqst` is live and its buffers set up.
unsafe fn rpc_shape(rqst: *mut sys::rpc_rqst) -> (plan::Rpc, plan::CallBuf, plan::ReplyBuf) {
    // SAFETY: The caller's promise; `rq_cred` and its auth are live for a
    // request being sent.
    unsafe {
        let snd = &(*rqst).rq_snd_buf;
        let rcv = &(*rqst).rq_rcv_buf;
        let cred = (*rqst).rq_cred;
        let datatouch = !cred.is_null()
            && !(*cred).cr_auth.is_null()
            && (*(*cred).cr_auth).au_flags & (1 << sys::RPCAUTH_AUTH_DATATOUCH) != 0;
        let rpc = plan::Rpc {
            call_len: snd.len,
            call_page_len: snd.page_len,
            call_page_base: snd.page_base,
            call_ddp: snd.flags & sys::XDRBUF_WRITE != 0,
            reply_max: rcv.buflen,
            reply_nonpayload: (rcv.head[0].iov_len + rcv.tail[0].iov_len) as u32,
            reply_ddp: rcv.flags & sys::XDRBUF_READ != 0,
            ddp_allowed: !datatouch,
        };
        let call = plan::CallBuf {
            head: snd.head[0].iov_len as u32,
            page_base: snd.page_base,
            page_len: snd.page_len,
            tail: snd.tail[0].iov_len as u32,
        };
        let reply = plan::ReplyBuf {
            head: rcv.head[0].iov_len as u32,
            page_len: rcv.page_len,
            tail: rcv.tail[0].iov_len as u32,
        };
        (rpc, call, reply)
    }
}

const PAGE: usize = kernel::page::PAGE_SIZE;

/// Appends `len` bytes starting `pos` bytes into a run of pages, one
/// segment per page touched; `page(k)` is the run's `k`th page.
fn push_pages(
    out: &mut KVec<PageSeg>,
    mut pos: usize,
    mut len: usize,
    page: impl Fn(usize) -> *mut sys::page,
) -> Result {
    while len > 0 {
        let p = page(pos / PAGE);
        if p.is_null() {
            return Err(EIO);
        }
        let off = pos & (PAGE - 1);
        let n = (PAGE - off).min(len);
        out.push(
            PageSeg {
                page: p,
                offset: off as u32,
                len: n as u32,
            },
            GFP_NOWAIT,
        )
        .map_err(|_| ENOBUFS)?;
        pos += n;
        len -= n;
    }
    Ok(())
}

/// Fills `out` with the pages of `len` bytes at `offset` of `buf`: head,
/// page list, tail.
///
/// # Safety
///
/// `buf` is a live `xdr_buf` whose head and tail are kmalloc memory.
unsafe fn region(
    out: &mut KVec<PageSeg>,
    buf: *const sys::xdr_buf,
    offset: u32,
    len: u32,
) -> Result {
    out.clear();
    let mut offset = offset as usize;
    let mut left = len as usize;
    // SAFETY: The caller's promise.
    let b = unsafe { &*buf };
    for (base, vlen, in_pages) in [
        (b.head[0].iov_base.cast::<u8>(), b.head[0].iov_len, false),
        (core::ptr::null_mut(), b.page_len as usize, true),
        (b.tail[0].iov_base.cast::<u8>(), b.tail[0].iov_len, false),
    ] {
        if left == 0 {
            break;
        }
        if offset >= vlen {
            offset -= vlen;
            continue;
        }
        let n = (vlen - offset).min(left);
        if in_pages {
            push_pages(out, b.page_base as usize + offset, n, |k| {
                // SAFETY: `pages` covers `page_base + page_len` bytes, so
                // every index asked for is in the array.
                unsafe { *b.pages.add(k) }
            })?;
        } else {
            // Head and tail are directly mapped: page `k` of the run is the
            // one holding byte `k * PAGE` counted from `base`'s page.
            let start = base as usize + offset;
            let first = start & !(PAGE - 1);
            push_pages(out, start - first, n, |k| {
                // SAFETY: Every address asked for is within the head or
                // tail, kmalloc memory (the caller's promise).
                unsafe { sys::rpcrdma_rs_virt_to_page((first + k * PAGE) as *const c_void) }
            })?;
        }
        left -= n;
        offset = 0;
    }
    Ok(())
}

/// Registers the memory of `pages` on as many MRs as needed, writing one
/// segment each into `out`; returns the segments and bytes.
///
/// # Safety
///
/// The pages stay allocated until the MRs are released.
unsafe fn register_pages(
    pool: &MrPool,
    pages: &[PageSeg],
    writing: bool,
    out: &mut [Segment],
    held: &mut Held,
) -> Result<(usize, u32)> {
    let mut rest = pages;
    let mut n = 0usize;
    let mut bytes = 0u32;
    while !rest.is_empty() {
        let take = plan::mr_segments(
            rest.iter().map(|p| (p.offset, p.len)),
            pool.depth(),
            PAGE as u32,
        )
        .max(1)
        .min(rest.len());
        let (now, later) = rest.split_at(take);
        let slot = out.get_mut(n).ok_or(EMSGSIZE)?;
        // SAFETY: The caller's promise.
        let (i, reg) = unsafe { pool.register(now, writing)? };
        held.push(i).inspect_err(|_| pool.release(i, false))?;
        *slot = Segment {
            handle: reg.rkey,
            length: reg.length,
            offset: reg.iova,
        };
        bytes = bytes.saturating_add(reg.length);
        n += 1;
        rest = later;
    }
    Ok((n, bytes))
}
