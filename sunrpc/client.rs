// SPDX-License-Identifier: GPL-2.0

//! The C side of an RPC client transport class, in one place: the
//! class's `setup`, every `rpc_xprt_ops` entry point, the `container_of`
//! from `rpc_xprt` to our transport, and the objects the transport keeps
//! in sunrpc's allocation (connect work, timeouts, request slots,
//! backchannel requests, the current connection).
//!
//! A transport implements the safe trait [`ClientTransport`] on its own
//! state `T`; [`ClientClass::register`] registers the class, and sunrpc
//! then sees a [`ClientXprt<T>`]: an `rpc_xprt` with `T` behind it, as
//! rpcrdma.ko's `rpcrdma_xprt` embeds its `rpc_xprt`. Like binder's
//! C entry points, the `unsafe extern "C"` functions here are the only
//! ones; each turns its raw arguments into typed borrows at once and
//! calls the trait.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_uint, c_ulong, c_ushort};
use core::marker::PhantomData;
use core::ptr::NonNull;

use kernel::prelude::*;
use kernel::seq_file::SeqFile;
use kernel::sync::atomic::{Acquire, Atomic, Release};
use kernel::sync::{new_condvar, new_spinlock, CondVar, SpinLock};
use kernel::types::Opaque;

use super::addr::{addr_port, format_addresses, format_port, free_addresses};
use super::slots::{alloc_slot, buf_alloc, buf_free, free_slot, Slot, SlotOwner};
use super::{
    BcPool, DelayedWork, HasDelayedWork, PinnedRqst, SendRqst, SlotPool, Xprt, XprtClass,
    XprtLocked,
};
use crate::rdma::{HeldPages, PageHold, PageSeg};
use crate::sys;

/// `IPPROTO_TCP`: `xprt->prot` names the address family's TCP for the
/// benefit of side protocols, as rpcrdma.ko does.
const IPPROTO_TCP: i32 = 6;

/// The RPC timeouts a transport starts with, in jiffies.
#[derive(Clone, Copy)]
pub(crate) struct Timeouts {
    /// The RPC timeout (`to_initval` and `to_maxval`), and the initial
    /// connect timeout.
    pub(crate) rpc: c_ulong,
    /// The ceiling of the reconnect backoff.
    pub(crate) max_reconnect: c_ulong,
    /// `bind_timeout`.
    pub(crate) bind: c_ulong,
    /// `idle_timeout`.
    pub(crate) idle: c_ulong,
}

/// A client transport's own behaviour, called by the entry points of
/// this module. Every method is safe: what they receive is typed and
/// borrowed for the call.
pub(crate) trait ClientTransport: Sized + Send + Sync + 'static {
    /// What the transport keeps per request, in the request's slot.
    type State: Default + Send + Sync;
    /// One connection, owned by the `XPRT_LOCKED` holder (see
    /// [`ClientXprt::conn`]).
    type Conn: Send + Sync;
    /// Settings read once, when a transport is set up.
    type Config: Copy;

    /// Largest RPC payload (`xprt->max_payload`).
    const MAX_PAYLOAD: usize;

    /// Where the registered class is kept, for `xprt->xprt_class`.
    fn class() -> &'static ClassCell;
    /// The settings for a new transport.
    fn config() -> Self::Config;
    /// Request slots of a new transport.
    fn max_slots(cfg: &Self::Config) -> u32;
    /// Initial timeouts of a new transport.
    fn timeouts() -> Timeouts;
    /// Initialises the transport's state in place.
    fn init(cfg: Self::Config) -> impl PinInit<Self>;

    /// A request got its buffers, `grown` bytes of them new.
    fn buffers_ready(this: &ClientXprt<Self>, state: &Self::State, grown: usize);
    /// A request's buffers go back to its slot: wait until nothing can
    /// reach them. Sleeps. The glue then waits for the holds on its pages.
    fn buffers_released(this: &ClientXprt<Self>, state: &Self::State);
    /// The holds on a released request's pages have not gone for a while:
    /// make them go.
    fn buffers_stuck(this: &ClientXprt<Self>, state: &Self::State);

    /// `send_request` of a forward Call.
    fn send_request(
        this: &ClientXprt<Self>,
        call: &ForwardCall<'_, Self::State>,
        locked: &mut XprtLocked<'_>,
    ) -> c_int;
    /// `send_request` of the Reply to a backward Call.
    fn send_backward(
        this: &ClientXprt<Self>,
        rqst: &SendRqst<'_>,
        locked: &XprtLocked<'_>,
    ) -> c_int;
    /// `connect`: the delay before the connect worker runs.
    fn connect(this: &ClientXprt<Self>, locked: &XprtLocked<'_>) -> c_ulong;
    /// The connect worker, holding `XPRT_LOCKED` for the whole call; its
    /// result wakes the tasks waiting for the connection.
    fn connect_worker(this: &ClientXprt<Self>, locked: &mut XprtLocked<'_>) -> c_int;
    /// `close`.
    fn close(this: &ClientXprt<Self>, locked: &mut XprtLocked<'_>);
    /// `destroy`, before the transport's objects go: tear down.
    fn destroy(this: &ClientXprt<Self>, locked: &mut XprtLocked<'_>);
    /// `set_connect_timeout`.
    fn set_connect_timeout(this: &ClientXprt<Self>, connect: c_ulong, reconnect: c_ulong);
    /// `print_stats`.
    fn print_stats(this: &ClientXprt<Self>, m: &SeqFile);
    /// `bc_setup` for `reqs` requests, after they are allocated.
    fn bc_setup(this: &ClientXprt<Self>, reqs: c_uint);
    /// `bc_maxpayload`.
    fn bc_max_payload(this: &ClientXprt<Self>) -> usize;
    /// `bc_num_slots`.
    fn bc_num_slots(this: &ClientXprt<Self>) -> c_uint;
}

/// Where a transport type keeps its registered class: set only by
/// [`ClientClass::register`].
///
/// # Invariants
///
/// Null, or the class of a live [`ClientClass`].
pub(crate) struct ClassCell(Atomic<*mut sys::xprt_class>);

impl ClassCell {
    /// No class yet.
    pub(crate) const fn new() -> Self {
        Self(Atomic::new(core::ptr::null_mut()))
    }
}

/// A registered client transport class of `T`; unregistered on drop.
pub(crate) struct ClientClass<T: ClientTransport> {
    class: Option<XprtClass>,
    _t: PhantomData<T>,
}

impl<T: ClientTransport> ClientClass<T> {
    /// Registers class `name` with transport `ident`, known by `netids`.
    pub(crate) fn register(
        module: &'static ThisModule,
        name: &str,
        ident: i32,
        netids: &[&'static CStr],
    ) -> Result<Self> {
        let class = XprtClass::register(module, name, ident, setup::<T>, netids, |class| {
            // INVARIANT: the class lives as long as the returned value.
            T::class().0.store(class, Release)
        })?;
        Ok(Self {
            class: Some(class),
            _t: PhantomData,
        })
    }
}

impl<T: ClientTransport> Drop for ClientClass<T> {
    fn drop(&mut self) {
        // Unregistered first: `setup` no longer runs.
        drop(self.class.take());
        // INVARIANT: the class is gone.
        T::class().0.store(core::ptr::null_mut(), Release);
    }
}

/// A client transport: sunrpc's `rpc_xprt` and, behind it, what this
/// module keeps for the transport and the transport's own state `T`
/// (reached through `Deref`).
///
/// # Invariants
///
/// Every `rpc_xprt` whose ops are [`ClientXprt::<T>::OPS`] is the first
/// field of a `ClientXprt<T>`: [`setup`] is the only place that installs
/// them, in memory that `xprt_alloc` allocated for `size_of::<Self>()`
/// bytes, after it initialised every field. The transport lives until
/// sunrpc calls `destroy`, which frees it once no [`XprtRef`] is left
/// (`refs`). `conn` is only used by the holder of `XPRT_LOCKED`.
#[repr(C)]
pub(crate) struct ClientXprt<T: ClientTransport> {
    rpc: Xprt,
    connect_work: DelayedWork<Self>,
    rpc_timeout: Opaque<sys::rpc_timeout>,
    slot_pool: SlotPool<T::State>,
    bc_rqsts: BcPool,
    conn_slot: UnsafeCell<Option<KBox<T::Conn>>>,
    /// Live [`XprtRef`]s.
    refs: SpinLock<u64>,
    refs_gone: CondVar,
    state: T,
}

// SAFETY: The `rpc_xprt` is only used through sunrpc's functions, which
// serialise themselves, and through `Xprt`, whose accessors are safe from
// any thread; `conn` is used only by the `XPRT_LOCKED` holder (type
// invariant), which sunrpc hands from thread to thread with full
// ordering; every other field is `Sync`, and `T::Conn` is `Send + Sync`.
unsafe impl<T: ClientTransport> Sync for ClientXprt<T> {}
// SAFETY: As above; the transport may be destroyed from any thread.
unsafe impl<T: ClientTransport> Send for ClientXprt<T> {}

impl<T: ClientTransport> core::ops::Deref for ClientXprt<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.state
    }
}

impl<T: ClientTransport> ClientXprt<T> {
    /// The transport of `xprt`.
    ///
    /// # Safety
    ///
    /// `xprt` is live for `'a`, and its ops are `Self::OPS`.
    unsafe fn from_raw<'a>(xprt: *mut sys::rpc_xprt) -> &'a Self {
        // SAFETY: By the type invariant an `rpc_xprt` with our ops is the
        // first field of a `repr(C)` `Self`, initialised by `setup`; the
        // caller keeps it live for `'a`.
        unsafe { &*xprt.cast::<Self>() }
    }

    /// The sunrpc transport.
    pub(crate) fn xprt(&self) -> &Xprt {
        &self.rpc
    }

    /// The backchannel requests.
    pub(crate) fn bc_pool(&self) -> &BcPool {
        &self.bc_rqsts
    }

    /// The current connection, which only the `XPRT_LOCKED` holder may
    /// use or replace: borrowed from the proof, so that it cannot be used
    /// across [`ClientXprt::replace_conn`].
    pub(crate) fn conn<'a>(&'a self, locked: &'a XprtLocked<'_>) -> Option<&'a T::Conn> {
        if !core::ptr::eq(locked.xprt(), &self.rpc) {
            return None;
        }
        // SAFETY: We hold `XPRT_LOCKED` of this transport (the proof is
        // for it); only its holder changes `conn` (type invariant), and
        // only through `replace_conn`, which needs the proof mutably.
        unsafe { (*self.conn_slot.get()).as_deref() }
    }

    /// Installs `new` as the current connection and returns the old one.
    /// A proof for another transport changes nothing and gives `new` back.
    pub(crate) fn replace_conn(
        &self,
        locked: &mut XprtLocked<'_>,
        new: Option<KBox<T::Conn>>,
    ) -> Option<KBox<T::Conn>> {
        if !core::ptr::eq(locked.xprt(), &self.rpc) {
            return new;
        }
        // SAFETY: As in `conn`; the mutable borrow of the proof ends every
        // borrow `conn` gave out.
        unsafe { core::mem::replace(&mut *self.conn_slot.get(), new) }
    }

    /// A counted reference to the transport, for the objects of its
    /// connections (completion and CM handlers): `destroy` waits for the
    /// last one before it frees the transport.
    pub(crate) fn new_ref(&self) -> XprtRef<T> {
        *self.refs.lock() += 1;
        // INVARIANT: counted just now.
        XprtRef {
            ptr: NonNull::from(self),
        }
    }

    /// Finds the request waiting for the Reply `xid` (as on the wire),
    /// pinned, with the transport's state for it.
    pub(crate) fn lookup(&self, xid: u32) -> Option<(PinnedRqst, &T::State)> {
        let rqst = self.rpc.lookup_pinned(xid)?;
        // SAFETY: The requests waiting for a Reply are forward requests,
        // and every forward request of a transport with our ops is a slot
        // of its pool (`alloc_slot`); slots are freed only by `destroy`,
        // so the state lives as long as `self`.
        let slot = unsafe { Slot::<T::State>::of(rqst.as_ptr()) };
        Some((rqst, slot.state()))
    }

    /// Lowers the connect timeout to `connect_timeout`, with the RPC
    /// timeout starting at `initval`, and the reconnect ceiling to
    /// `reconnect_timeout`; neither is ever raised.
    pub(crate) fn lower_timeouts(
        &self,
        initval: c_ulong,
        connect_timeout: c_ulong,
        reconnect_timeout: c_ulong,
    ) {
        let mut lock = self.rpc.lock_transport();
        // SAFETY: `timeout` is the transport's own, and lives as long as
        // the transport.
        unsafe {
            lock.lower_timeouts(
                &self.rpc_timeout,
                initval,
                connect_timeout,
                reconnect_timeout,
            )
        };
    }

    /// Publishes `value`, which must be part of this transport, read-only
    /// as `name` in the transport's sunrpc debugfs directory; anything
    /// else is refused.
    pub(crate) fn debugfs_u64(&self, name: &CStr, value: &Atomic<u64>) {
        let start = core::ptr::from_ref(self) as usize;
        let end = start + core::mem::size_of::<Self>();
        let at = value.as_ptr() as usize;
        if at < start || at + core::mem::size_of::<u64>() > end {
            pr_warn!("debugfs value outside its transport refused\n");
            return;
        }
        // SAFETY: `value` lies within this transport, which sunrpc frees
        // (in `destroy`) only after it removed the debugfs directory.
        unsafe { self.rpc.debugfs_u64(name, value.as_ptr()) };
    }

    /// The operations table: the entry points below.
    const OPS: sys::rpc_xprt_ops = sys::rpc_xprt_ops {
        set_buffer_size: None,
        reserve_xprt: Some(sys::xprt_reserve_xprt_cong),
        release_xprt: Some(sys::xprt_release_xprt_cong),
        alloc_slot: Some(alloc_slot::<Self>),
        free_slot: Some(free_slot::<Self>),
        rpcbind: Some(sys::rpcb_getport_async),
        set_port: Some(op_set_port),
        connect: Some(op_connect::<T>),
        get_srcaddr: None,
        get_srcport: None,
        buf_alloc: Some(buf_alloc::<Self>),
        buf_free: Some(buf_free::<Self>),
        prepare_request: None,
        send_request: Some(op_send_request::<T>),
        abort_send_request: None,
        wait_for_reply_request: Some(sys::xprt_wait_for_reply_request_def),
        timer: Some(op_force_disconnect_timer),
        release_request: Some(sys::xprt_release_rqst_cong),
        close: Some(op_close::<T>),
        destroy: Some(op_destroy::<T>),
        set_connect_timeout: Some(op_set_connect_timeout::<T>),
        print_stats: Some(op_print_stats::<T>),
        enable_swap: None,
        disable_swap: None,
        inject_disconnect: Some(op_force_disconnect),
        bc_setup: Some(op_bc_setup::<T>),
        bc_maxpayload: Some(op_bc_maxpayload::<T>),
        bc_num_slots: Some(op_bc_num_slots::<T>),
        bc_free_rqst: Some(op_bc_free_rqst::<T>),
        bc_destroy: Some(op_bc_destroy),
    };
}

/// A counted reference to a [`ClientXprt`], for objects that live no
/// longer than a connection but are reached from completion and CM
/// handlers, which have no borrow of the transport.
///
/// # Invariants
///
/// `ptr` is a live transport, and this value is counted in its `refs`:
/// `destroy` frees the transport only when they are at zero.
pub(crate) struct XprtRef<T: ClientTransport> {
    ptr: NonNull<ClientXprt<T>>,
}

// SAFETY: Only gives `&ClientXprt<T>`, which is `Sync`; the count is
// under its lock.
unsafe impl<T: ClientTransport> Send for XprtRef<T> {}
// SAFETY: As above.
unsafe impl<T: ClientTransport> Sync for XprtRef<T> {}

impl<T: ClientTransport> core::ops::Deref for XprtRef<T> {
    type Target = ClientXprt<T>;

    fn deref(&self) -> &ClientXprt<T> {
        // SAFETY: Live while this reference is counted (type invariant).
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: ClientTransport> Clone for XprtRef<T> {
    fn clone(&self) -> Self {
        self.new_ref()
    }
}

impl<T: ClientTransport> Drop for XprtRef<T> {
    fn drop(&mut self) {
        let x: &ClientXprt<T> = self;
        let mut refs = x.refs.lock();
        *refs -= 1;
        if *refs == 0 {
            x.refs_gone.notify_all();
        }
        // The last touch of the transport is this unlock: `destroy` frees
        // it only after it took the lock and found no reference left.
        drop(refs);
    }
}

// SAFETY: `connect_work` is a `DelayedWork<Self>` field at this offset;
// `destroy` cancels it synchronously before the transport is freed.
unsafe impl<T: ClientTransport> HasDelayedWork for ClientXprt<T> {
    const OFFSET: usize = core::mem::offset_of!(Self, connect_work);

    /// The connect worker: `connect` handed it `XPRT_LOCKED`.
    fn run(&self) {
        let status = {
            // SAFETY: `op_connect` handed `XPRT_LOCKED` to this work
            // (`xprt_lock_connect`) and dropped its own proof before it
            // queued it; it is ours until unlocked below.
            let mut locked = unsafe { XprtLocked::assume(&self.rpc) };
            T::connect_worker(self, &mut locked)
        };
        let xprt = self.rpc.as_ptr();
        // SAFETY: Releases the lock `op_connect` took for this work, with
        // the same cookie; the proof above is gone.
        unsafe { sys::xprt_unlock_connect(xprt, xprt.cast()) };
        self.rpc.wake_pending_tasks(status);
    }
}

// SAFETY: `ClientXprt` is `repr(C)` with its `rpc_xprt` first, allocated by
// `xprt_alloc` for its size in `setup`, which initialises `slots` before
// it installs `OPS`, whose slot and buffer operations are the four of
// `slots` for `Self`.
unsafe impl<T: ClientTransport> SlotOwner for ClientXprt<T> {
    type State = T::State;

    fn slots(&self) -> &SlotPool<T::State> {
        &self.slot_pool
    }

    fn buffers_ready(&self, st: &T::State, grown: usize) {
        T::buffers_ready(self, st, grown)
    }

    fn buffers_released(&self, st: &T::State) {
        T::buffers_released(self, st)
    }

    fn buffers_stuck(&self, st: &T::State) {
        T::buffers_stuck(self, st)
    }
}

/// A forward Call in `send_request`: the request, the transport's state
/// for it, and a hold on its pages for as long as the call lasts, from
/// which [`ForwardCall::pages`] gives pages that are safe to map and
/// register.
///
/// # Invariants
///
/// `slot` is the slot of `rqst`, a forward request whose buffers are
/// allocated; `hold` counts on the slot's holds.
pub(crate) struct ForwardCall<'a, S> {
    rqst: SendRqst<'a>,
    slot: &'a Slot<S>,
    hold: PageHold,
}

impl<'a, S> core::ops::Deref for ForwardCall<'a, S> {
    type Target = SendRqst<'a>;

    fn deref(&self) -> &SendRqst<'a> {
        &self.rqst
    }
}

/// Which buffer of a request.
#[derive(Clone, Copy)]
pub(crate) enum Buf {
    /// The Call (`rq_snd_buf`).
    Call,
    /// Where the Reply goes (`rq_rcv_buf`).
    Reply,
}

/// A list of pages filled by [`ForwardCall::pages`], kept to be refilled.
pub(crate) struct PageList(KVec<PageSeg>);

impl PageList {
    /// An empty list with room for `n` pages.
    pub(crate) fn with_capacity(n: usize) -> Result<Self> {
        Ok(Self(KVec::with_capacity(n, GFP_KERNEL)?))
    }
}

impl<'a, S> ForwardCall<'a, S> {
    /// The transport's state for the request.
    pub(crate) fn state(&self) -> &'a S {
        self.slot.state()
    }

    /// The pages holding `len` bytes at `offset` of `buf`, filled into
    /// `list`, under the call's hold.
    pub(crate) fn pages<'b>(
        &'b self,
        buf: Buf,
        offset: u32,
        len: u32,
        list: &'b mut PageList,
    ) -> Result<HeldPages<'b>> {
        let xdr = match buf {
            Buf::Call => self.rqst.snd_buf(),
            Buf::Reply => self.rqst.rcv_buf(),
        };
        xdr.page_segs(&mut list.0, offset, len)?;
        // SAFETY: The pages are the request's: its head and tail in the
        // slot's buffer, which goes only after `buf_free`, and its page
        // array, which the RPC's owner keeps until the RPC is released,
        // after `buf_free`; and `buf_free` waits until the slot's holds,
        // on which `self.hold` counts (type invariant), are zero. The CPU
        // does not write a Call being sent, nor a Reply buffer before the
        // Reply, whose MRs are released before it is placed.
        Ok(unsafe { HeldPages::new(&list.0, &self.hold) })
    }
}

fn this_module() -> *mut sys::module {
    <crate::RpcRdma as kernel::ModuleMetadata>::THIS_MODULE
        .as_ptr()
        .cast()
}

/// Fails `setup` with `err`, as an `ERR_PTR`.
fn err_ptr(err: Error) -> *mut sys::rpc_xprt {
    err.to_errno() as isize as *mut sys::rpc_xprt
}

/// `xprt_class.setup`: allocates and initialises a [`ClientXprt<T>`].
///
/// # Safety
///
/// Called by sunrpc with valid `args`.
unsafe extern "C" fn setup<T: ClientTransport>(args: *mut sys::xprt_create) -> *mut sys::rpc_xprt {
    // SAFETY: sunrpc passes valid arguments.
    let args = unsafe { &*args };
    if args.addrlen > core::mem::size_of::<sys::__kernel_sockaddr_storage>() {
        return err_ptr(EBADF);
    }
    // SAFETY: Our own module; the reference is dropped by `destroy`.
    if !unsafe { sys::rpcrdma_rs_try_module_get(this_module()) } {
        return err_ptr(EIO);
    }
    let cfg = T::config();
    // SAFETY: `args.net` is valid; sunrpc zero-allocates our size, and
    // kmalloc aligns it for us (checked below).
    let xprt = unsafe {
        sys::xprt_alloc(
            args.net,
            core::mem::size_of::<ClientXprt<T>>(),
            // None preallocated by sunrpc: the slots are our own.
            0,
            T::max_slots(&cfg),
        )
    };
    if xprt.is_null() {
        // SAFETY: Balances the get above.
        unsafe { sys::rpcrdma_rs_module_put(this_module()) };
        return err_ptr(ENOMEM);
    }
    const { assert!(core::mem::align_of::<ClientXprt<T>>() <= 8) };
    let this = xprt.cast::<ClientXprt<T>>();
    let to = ClientXprt::<T>::timeouts_of(this);
    let t = T::timeouts();
    // SAFETY: `xprt` is fresh and ours alone (nothing has seen it yet),
    // `size_of::<ClientXprt<T>>()` bytes with the `rpc_xprt` that
    // `xprt_alloc` initialised first; every other field is initialised
    // here, in place, before `ops` is set. `args.dstaddr` holds
    // `args.addrlen` bytes, which fit `addr` (checked above).
    unsafe {
        (*to).to_initval = t.rpc;
        (*to).to_maxval = t.rpc;
        (*xprt).timeout = to;
        (*xprt).connect_timeout = t.rpc;
        (*xprt).max_reconnect_timeout = t.max_reconnect;
        (*xprt).bind_timeout = t.bind;
        (*xprt).reestablish_timeout = 0;
        (*xprt).idle_timeout = t.idle;
        (*xprt).prot = IPPROTO_TCP;
        (*xprt).xprt_class = T::class().0.load(Acquire);
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
        (*xprt).max_payload = T::MAX_PAYLOAD;
        // None of the initialisers fails.
        let _ = DelayedWork::new().__init(&raw mut (*this).connect_work);
        let _ = SlotPool::new(T::max_slots(&cfg)).__init(&raw mut (*this).slot_pool);
        (&raw mut (*this).bc_rqsts).write(BcPool::new());
        (&raw mut (*this).conn_slot).write(UnsafeCell::new(None));
        let _ = new_spinlock!(0u64, "rpcrdma_rs_xprt_refs").__init(&raw mut (*this).refs);
        let _ = new_condvar!("rpcrdma_rs_xprt_refs").__init(&raw mut (*this).refs_gone);
        let _ = T::init(cfg).__init(&raw mut (*this).state);
        // INVARIANT: every field is initialised: the ops are ours now.
        (*xprt).ops = &ClientXprt::<T>::OPS;
    }
    rdebug!("transport created\n");
    xprt
}

impl<T: ClientTransport> ClientXprt<T> {
    /// The transport's `rpc_timeout`, from a pointer to the transport.
    fn timeouts_of(this: *mut Self) -> *mut sys::rpc_timeout {
        // SAFETY: Only the field's address is taken, not dereferenced.
        Opaque::cast_into(unsafe { &raw const (*this).rpc_timeout })
    }
}

/// `set_port`: rpcbind found the port.
///
/// # Safety
///
/// Called by sunrpc with a live transport, which rpcbind holds.
unsafe extern "C" fn op_set_port(xprt: *mut sys::rpc_xprt, port: c_ushort) {
    // SAFETY: sunrpc passes a live transport; `sin_port` and `sin6_port`
    // share bytes 2 and 3 of the address; the display strings are
    // replaced under rpcbind's serialisation, before the first connect.
    unsafe {
        let bytes = (&raw mut (*xprt).addr).cast::<[u8; 4]>();
        let [hi, lo] = port.to_be_bytes();
        (*bytes)[2] = hi;
        (*bytes)[3] = lo;
        format_port(xprt);
    }
}

/// `connect`, by a task that holds `XPRT_LOCKED`: hands the lock to the
/// connect worker and queues it.
///
/// # Safety
///
/// Called by sunrpc with a live transport of ours and a task holding its
/// `XPRT_LOCKED`.
unsafe extern "C" fn op_connect<T: ClientTransport>(
    xprt: *mut sys::rpc_xprt,
    task: *mut sys::rpc_task,
) {
    // SAFETY: A live transport whose ops are ours.
    let this = unsafe { ClientXprt::<T>::from_raw(xprt) };
    // SAFETY: The task holds XPRT_LOCKED; the connect worker inherits it,
    // with the transport as its cookie.
    if !unsafe { sys::xprt_lock_connect(xprt, task, xprt.cast()) } {
        pr_warn!("connect without the transport lock\n");
    }
    let delay = {
        // SAFETY: The task holds XPRT_LOCKED until the worker is queued;
        // this proof is dropped before that.
        let locked = unsafe { XprtLocked::assume(&this.rpc) };
        T::connect(this, &locked)
    };
    this.connect_work.queue(delay);
}

/// `send_request`.
///
/// # Safety
///
/// Called by sunrpc with a request of a live transport of ours, its
/// buffers set up (by our `buf_alloc`, or the backchannel pool), and
/// `XPRT_LOCKED` held.
unsafe extern "C" fn op_send_request<T: ClientTransport>(rqst: *mut sys::rpc_rqst) -> c_int {
    let Some(raw) = NonNull::new(rqst) else {
        return EINVAL.to_errno();
    };
    // SAFETY: The caller's promise.
    let rqst = unsafe { SendRqst::from_raw(rqst) };
    // SAFETY: The request is on one of our transports, live while it is.
    let this = unsafe { ClientXprt::<T>::from_raw(rqst.xprt().as_ptr()) };
    // SAFETY: sunrpc sends with XPRT_LOCKED held.
    let mut locked = unsafe { XprtLocked::assume(&this.rpc) };
    // SAFETY: A live request.
    if unsafe { super::slots::backchannel(raw) } {
        return T::send_backward(this, &rqst, &locked);
    }

    // SAFETY: Not a backchannel request, so a forward request of a
    // transport with our ops: a slot of its pool, which lives as long as
    // the transport.
    let slot = unsafe { Slot::<T::State>::of(raw) };
    // SAFETY: The slot's holds live as long as the slot, which is not
    // freed nor given up (`buf_free`) before they are zero, and the
    // request's buffers stay until `buf_free` returns.
    let hold = unsafe { PageHold::new(slot.holds()) };
    // INVARIANT: the slot of `rqst`, with its buffers; `hold` counts on it.
    let call = ForwardCall { rqst, slot, hold };
    T::send_request(this, &call, &mut locked)
}

/// `timer`: a Reply timed out; the connection is reset, as rpcrdma.ko
/// does.
///
/// # Safety
///
/// Called by sunrpc with a live transport.
unsafe extern "C" fn op_force_disconnect_timer(
    xprt: *mut sys::rpc_xprt,
    _task: *mut sys::rpc_task,
) {
    // SAFETY: A live transport.
    unsafe { Xprt::from_raw(xprt) }.force_disconnect();
}

/// `inject_disconnect`: through autoclose, which disconnects with
/// `XPRT_LOCKED` held, so the connection cannot vanish under anyone.
///
/// # Safety
///
/// Called by sunrpc with a live transport.
unsafe extern "C" fn op_force_disconnect(xprt: *mut sys::rpc_xprt) {
    // SAFETY: A live transport.
    let xprt = unsafe { Xprt::from_raw(xprt) };
    super::trace::xprtrdma_op_inject_dsc(xprt);
    xprt.force_disconnect();
}

/// `close`.
///
/// # Safety
///
/// Called by sunrpc with a live transport of ours, `XPRT_LOCKED` held.
unsafe extern "C" fn op_close<T: ClientTransport>(xprt: *mut sys::rpc_xprt) {
    // SAFETY: A live transport whose ops are ours.
    let this = unsafe { ClientXprt::<T>::from_raw(xprt) };
    // SAFETY: sunrpc calls `close` with XPRT_LOCKED held.
    let mut locked = unsafe { XprtLocked::assume(&this.rpc) };
    T::close(this, &mut locked);
}

/// `destroy`: the last reference is gone.
///
/// # Safety
///
/// Called by sunrpc once, with a live transport of ours that nothing else
/// uses any more (it holds `XPRT_LOCKED`).
unsafe extern "C" fn op_destroy<T: ClientTransport>(xprt: *mut sys::rpc_xprt) {
    // SAFETY: A live transport whose ops are ours.
    let this = unsafe { ClientXprt::<T>::from_raw(xprt) };
    rdebug!("destroy\n");
    this.connect_work.cancel_sync();
    {
        // SAFETY: With the connect worker gone and sunrpc destroying the
        // transport, nothing else can reach it.
        let mut locked = unsafe { XprtLocked::assume(&this.rpc) };
        T::destroy(this, &mut locked);
        drop(this.replace_conn(&mut locked, None));
    }
    // Every request is released by now (each held a reference).
    this.slot_pool.free_all();
    // SAFETY: So is every backchannel request (each one sunrpc owned held
    // a reference), and nothing else uses the transport any more.
    unsafe { this.bc_rqsts.free_all() };
    {
        let mut refs = this.refs.lock();
        while *refs != 0 {
            this.refs_gone.wait(&mut refs);
        }
    }
    let inner = (&raw const this.state).cast_mut();
    // SAFETY: No reference to the transport is left (the connection is
    // gone, `refs` is zero): the state is dropped once, then the memory
    // goes with the transport, and the module reference `setup` took.
    unsafe {
        core::ptr::drop_in_place(inner);
        free_addresses(xprt);
        sys::xprt_free(xprt);
        sys::rpcrdma_rs_module_put(this_module());
    }
}

/// `set_connect_timeout`.
///
/// # Safety
///
/// Called by sunrpc with a live transport of ours.
unsafe extern "C" fn op_set_connect_timeout<T: ClientTransport>(
    xprt: *mut sys::rpc_xprt,
    connect_timeout: c_ulong,
    reconnect_timeout: c_ulong,
) {
    // SAFETY: A live transport whose ops are ours.
    let this = unsafe { ClientXprt::<T>::from_raw(xprt) };
    T::set_connect_timeout(this, connect_timeout, reconnect_timeout);
}

/// `print_stats`.
///
/// # Safety
///
/// Called by sunrpc with a live transport of ours and a `seq_file` this
/// thread writes.
unsafe extern "C" fn op_print_stats<T: ClientTransport>(
    xprt: *mut sys::rpc_xprt,
    seq: *mut sys::seq_file,
) {
    // SAFETY: The caller's promise.
    let (this, m) = unsafe {
        (
            ClientXprt::<T>::from_raw(xprt),
            SeqFile::from_raw(seq.cast()),
        )
    };
    T::print_stats(this, m);
}

/// `bc_setup`: allocates the backchannel requests (process context, once
/// per session).
///
/// # Safety
///
/// Called by sunrpc with a live transport of ours.
unsafe extern "C" fn op_bc_setup<T: ClientTransport>(
    xprt: *mut sys::rpc_xprt,
    min_reqs: c_uint,
) -> c_int {
    // SAFETY: A live transport whose ops are ours.
    let this = unsafe { ClientXprt::<T>::from_raw(xprt) };
    if let Err(err) = this.bc_rqsts.setup() {
        return err.to_errno();
    }
    T::bc_setup(this, min_reqs);
    0
}

/// `bc_maxpayload`.
///
/// # Safety
///
/// Called by sunrpc with a live transport of ours.
unsafe extern "C" fn op_bc_maxpayload<T: ClientTransport>(xprt: *mut sys::rpc_xprt) -> usize {
    // SAFETY: A live transport whose ops are ours.
    T::bc_max_payload(unsafe { ClientXprt::<T>::from_raw(xprt) })
}

/// `bc_num_slots`.
///
/// # Safety
///
/// Called by sunrpc with a live transport of ours.
unsafe extern "C" fn op_bc_num_slots<T: ClientTransport>(xprt: *mut sys::rpc_xprt) -> c_uint {
    // SAFETY: A live transport whose ops are ours.
    T::bc_num_slots(unsafe { ClientXprt::<T>::from_raw(xprt) })
}

/// `bc_free_rqst`: sunrpc is done with a backchannel request; back to the
/// pool, and the transport reference `xprt_enqueue_bc_request` took is
/// dropped.
///
/// # Safety
///
/// Called by sunrpc with a backchannel request of one of our transports,
/// which nobody uses any more.
unsafe extern "C" fn op_bc_free_rqst<T: ClientTransport>(rqst: *mut sys::rpc_rqst) {
    // SAFETY: A backchannel request given back by sunrpc; its transport
    // has our ops and lives (the request holds a reference to it).
    unsafe { BcPool::free_rqst(rqst, |xprt| &ClientXprt::<T>::from_raw(xprt).bc_rqsts) };
}

/// `bc_destroy`: a session's backchannel goes. The requests stay with the
/// transport (one in use may come back later), which frees them.
///
/// # Safety
///
/// Called by sunrpc with a live transport.
unsafe extern "C" fn op_bc_destroy(_xprt: *mut sys::rpc_xprt, _max_reqs: c_uint) {}
