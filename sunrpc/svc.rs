// SPDX-License-Identifier: GPL-2.0

//! The sunrpc server side: an `svc_xprt_class` whose `svc_xprt_ops` call
//! a safe [`SvcTransport`], the transports' embedded `struct svc_xprt`
//! ([`SvcXprt`]), and the request an nfsd thread is receiving or
//! answering ([`SvcRqst`]).
//!
//! A server transport object is a `#[repr(C)]` struct that begins with an
//! [`SvcXprt`] ([`SvcObject`]). It is boxed and initialised here, owned by
//! sunrpc's reference count (`xpt_ref`) once published, and dropped by
//! `xpo_free`. Listeners and connections are two types; the ops tell them
//! apart by `XPT_LISTENER`.

use core::any::TypeId;
use core::ffi::{c_int, c_uint, c_void};
use core::marker::PhantomData;
use core::ptr::NonNull;

use kernel::alloc::flags::__GFP_ZERO;
use kernel::page::{Page, PAGE_SIZE};
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Release};
use kernel::sync::SetOnce;
use kernel::types::Opaque;

use super::rqst::XdrBuf;
use super::xprt::Xprt;
use crate::rdma::PageSeg;
use crate::sys;

/// `IPPROTO_MAX`: what svcrdma reports as `rq_prot`, which is neither TCP
/// nor UDP.
const IPPROTO_MAX: u32 = 263;

/// The `xpt_flags` bits a transport sets, clears or tests.
#[derive(Clone, Copy)]
pub(crate) enum XptFlag {
    /// A connection request waits on a listener.
    Conn,
    /// Close the transport (deferred to an nfsd thread).
    Close,
    /// Received messages wait.
    Data,
    /// Closed for good.
    Dead,
    /// A listening endpoint.
    Listener,
    /// The transport does its own flow control (NFSv4 requires it).
    CongCtrl,
}

impl XptFlag {
    fn bit(self) -> c_uint {
        (match self {
            Self::Conn => sys::XPT_CONN,
            Self::Close => sys::XPT_CLOSE,
            Self::Data => sys::XPT_DATA,
            Self::Dead => sys::XPT_DEAD,
            Self::Listener => sys::XPT_LISTENER,
            Self::CongCtrl => sys::XPT_CONG_CTRL,
        }) as c_uint
    }
}

/// A `struct svc_xprt` embedded first in a transport object.
///
/// # Invariants
///
/// Once [`SvcXprt::init`] ran, the `svc_xprt` is initialised and lives as
/// long as the object around it; every method other than `init` is only
/// used after that.
#[repr(transparent)]
pub(crate) struct SvcXprt(Opaque<sys::svc_xprt>);

// SAFETY: sunrpc uses an `svc_xprt` from any thread; its flags are atomic
// and its other fields are written under its own locks.
unsafe impl Send for SvcXprt {}
// SAFETY: As above.
unsafe impl Sync for SvcXprt {}

impl SvcXprt {
    /// An uninitialised `svc_xprt`, for [`new_object`] to initialise.
    pub(crate) fn new() -> Self {
        Self(Opaque::zeroed())
    }

    fn as_ptr(&self) -> *mut sys::svc_xprt {
        self.0.get()
    }

    /// # Safety
    ///
    /// `ptr` is an initialised `svc_xprt` that stays alive for `'a`.
    unsafe fn from_raw<'a>(ptr: *mut sys::svc_xprt) -> &'a Self {
        // SAFETY: Transparent wrapper; the caller's promise.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Sets `flag`.
    pub(crate) fn set(&self, flag: XptFlag) {
        // SAFETY: Initialised (type invariant); an atomic bit operation.
        unsafe { sys::rpcrdma_rs_svc_xprt_set_flag(self.as_ptr(), flag.bit()) }
    }

    /// Clears `flag`.
    pub(crate) fn clear(&self, flag: XptFlag) {
        // SAFETY: As for `set`.
        unsafe { sys::rpcrdma_rs_svc_xprt_clear_flag(self.as_ptr(), flag.bit()) }
    }

    /// Whether `flag` is set.
    pub(crate) fn test(&self, flag: XptFlag) -> bool {
        // SAFETY: As for `set`.
        unsafe { sys::rpcrdma_rs_svc_xprt_test_flag(self.as_ptr(), flag.bit()) }
    }

    /// Closing or closed (`svc_xprt_is_dead`).
    pub(crate) fn is_dead(&self) -> bool {
        self.test(XptFlag::Dead) || self.test(XptFlag::Close)
    }

    /// Has an nfsd thread look at the transport, if it is ready for one.
    pub(crate) fn enqueue(&self) {
        // SAFETY: Initialised (type invariant).
        unsafe { sys::svc_xprt_enqueue(self.as_ptr()) }
    }

    /// Releases `XPT_BUSY` after taking one message, so that another
    /// thread may take the next (`svc_xprt_received`).
    pub(crate) fn received(&self) {
        // SAFETY: Initialised (type invariant); sunrpc checks XPT_BUSY.
        unsafe { sys::svc_xprt_received(self.as_ptr()) }
    }

    /// Marks the transport for closing by an nfsd thread: the only way to
    /// close from completion and CM handlers.
    pub(crate) fn deferred_close(&self) {
        // SAFETY: Initialised (type invariant).
        unsafe { sys::svc_xprt_deferred_close(self.as_ptr()) }
    }

    /// The local address, from `sa` (IPv4 or IPv6; others are ignored).
    pub(crate) fn set_local_addr(&self, sa: &SockAddr) {
        if matches!(sa.family(), AF_INET | AF_INET6) {
            // SAFETY: A socket address of its family's full size (a
            // storage holds any).
            unsafe { self.set_local(sa.as_ptr()) };
        }
    }

    /// The peer's address, from `sa`, with port 0.
    pub(crate) fn set_remote_addr(&self, sa: &SockAddr) {
        if matches!(sa.family(), AF_INET | AF_INET6) {
            // SAFETY: As for `set_local_addr`.
            unsafe { self.set_remote(sa.as_ptr()) };
        }
    }

    /// The local address, from `sa`.
    ///
    /// # Safety
    ///
    /// `sa` is a valid IPv4 or IPv6 socket address.
    unsafe fn set_local(&self, sa: *const sys::sockaddr) {
        // SAFETY: Initialised (type invariant); `sa` valid (caller).
        unsafe { sys::rpcrdma_rs_svc_xprt_set_local(self.as_ptr(), sa) }
    }

    /// The peer's address, from `sa`, with port 0.
    ///
    /// # Safety
    ///
    /// As for [`SvcXprt::set_local`].
    unsafe fn set_remote(&self, sa: *const sys::sockaddr) {
        // SAFETY: Initialised (type invariant); `sa` valid (caller).
        unsafe { sys::rpcrdma_rs_svc_xprt_set_remote(self.as_ptr(), sa) }
    }

    /// Closes the transport now (`svc_xprt_close`): from an nfsd thread
    /// or rpciod, never from a completion or CM handler.
    pub(crate) fn close(&self) {
        // SAFETY: Initialised (type invariant).
        unsafe { sys::svc_xprt_close(self.as_ptr()) }
    }

    /// The backchannel nfsd set up on this connection, if any.
    pub(crate) fn bc_xprt(&self) -> Option<&Xprt> {
        // SAFETY: Initialised (type invariant). Once set, `xpt_bc_xprt`
        // holds a reference that the `svc_xprt` drops only when freed.
        let bc = unsafe { (*self.as_ptr()).xpt_bc_xprt };
        // SAFETY: Live as long as `self`, as above.
        (!bc.is_null()).then(|| unsafe { Xprt::from_raw(bc) })
    }

    /// The peer's address as text (`xpt_remotebuf`), or "listener".
    pub(crate) fn remote(&self) -> &CStr {
        // SAFETY: Initialised (type invariant): `xpt_remotebuf` always
        // holds a NUL-terminated string (svc_xprt_init, set_remote), and
        // lives as long as `self`.
        unsafe { CStr::from_char_ptr((*self.as_ptr()).xpt_remotebuf.as_ptr().cast()) }
    }

    /// The network namespace.
    pub(crate) fn net(&self) -> Net {
        // SAFETY: Initialised (type invariant): `xpt_net` holds a
        // reference for the transport's life.
        Net(unsafe { (*self.as_ptr()).xpt_net })
    }

    /// The service the transport belongs to.
    pub(crate) fn serv(&self) -> Serv {
        // SAFETY: Initialised (type invariant); never changes.
        Serv(unsafe { (*self.as_ptr()).xpt_server })
    }
}

/// A socket address: from sunrpc, copied, or borrowed from rdma_cm.
#[repr(transparent)]
pub(crate) struct SockAddr(sys::__kernel_sockaddr_storage);

impl SockAddr {
    /// The address stored at `p`.
    ///
    /// # Safety
    ///
    /// `p` points to a socket address storage that stays valid, and
    /// unchanged, for `'a`.
    pub(crate) unsafe fn from_raw<'a>(p: *const sys::__kernel_sockaddr_storage) -> &'a Self {
        // SAFETY: `repr(transparent)`; valid for `'a` (caller).
        unsafe { &*p.cast::<Self>() }
    }

    /// The address in `storage`.
    pub(crate) fn from_storage(storage: sys::__kernel_sockaddr_storage) -> Self {
        Self(storage)
    }

    /// `AF_INET`, `AF_INET6`, ...
    pub(crate) fn family(&self) -> u16 {
        // SAFETY: Both members of the union are plain data over the same
        // bytes; the family is the first field of every socket address.
        unsafe { self.0.__bindgen_anon_1.__bindgen_anon_1.ss_family }
    }

    pub(crate) fn as_ptr(&self) -> *const sys::sockaddr {
        (&raw const self.0).cast()
    }
}

/// A network namespace, passed through to rdma_cm.
///
/// # Invariants
///
/// A live `struct net`: a transport's, which lives as long as the
/// transport, or the initial namespace, which lives forever.
#[derive(Clone, Copy)]
pub(crate) struct Net(*mut sys::net);

impl Net {
    /// The initial network namespace.
    pub(crate) fn init() -> Self {
        // SAFETY: Returns the address of `init_net`, a static.
        let net = unsafe { sys::rpcrdma_rs_init_net() };
        // INVARIANT: `init_net` is never freed.
        Self(net)
    }

    pub(crate) fn as_ptr(self) -> *mut sys::net {
        self.0
    }
}

/// An RPC service (`struct svc_serv`), passed through to new transports.
#[derive(Clone, Copy)]
pub(crate) struct Serv(*mut sys::svc_serv);

/// A transport object: `#[repr(C)]`, with an [`SvcXprt`] first.
///
/// # Safety
///
/// `Self` is `#[repr(C)]` and its first field is the [`SvcXprt`] that
/// [`SvcObject::xprt`] returns.
pub(crate) unsafe trait SvcObject: Sized + Send + Sync + 'static {
    /// The embedded `svc_xprt`.
    fn xprt(&self) -> &SvcXprt;
}

/// `AF_INET` and `AF_INET6`.
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// Implements [`SvcObject`] for a `#[repr(C)]` struct whose first field,
/// `$field`, is its [`SvcXprt`]; the compiler checks the offset.
macro_rules! impl_svc_object {
    ($ty:ty, $field:ident) => {
        const _: () = assert!(core::mem::offset_of!($ty, $field) == 0);
        // SAFETY: `$field` is a `SvcXprt` (the function below only
        // compiles so) at offset 0 (asserted above) of a `repr(C)` struct
        // (the caller's attribute; the offset is what the casts rely on).
        #[allow(unsafe_code)]
        unsafe impl $crate::sunrpc::SvcObject for $ty {
            fn xprt(&self) -> &$crate::sunrpc::SvcXprt {
                &self.$field
            }
        }
    };
}
pub(crate) use impl_svc_object;

/// The class registered by [`SvcClass::register`], for `svc_xprt_init`.
static CLASS: Atomic<*mut sys::svc_xprt_class> = Atomic::new(core::ptr::null_mut());

/// The object types of the transport registered by
/// [`SvcClass::register`].
///
/// # Invariants
///
/// Once set, every `svc_xprt` whose `xpt_class` is [`CLASS`] is the first
/// field of a `listener` object if `XPT_LISTENER` is set, else of a `conn`
/// object: [`new_object`] makes no other (and sets `XPT_LISTENER` before
/// sunrpc sees the object). Set once per module load, before [`CLASS`].
static KINDS: SetOnce<Kinds> = SetOnce::new();

/// The `TypeId`s of a transport's listener and connection types.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Kinds {
    listener: TypeId,
    conn: TypeId,
}

/// Allocates a transport object and initialises its `svc_xprt` for
/// `serv` in `net`: one reference, `XPT_BUSY` set (sunrpc clears it when
/// it takes the transport), flow controlled, and a `listener` or not.
/// `T` must be the registered transport's listener type (`listener`) or
/// connection type (not): `EINVAL` otherwise.
pub(crate) fn new_object<T: SvcObject>(
    init: impl PinInit<T, Error>,
    serv: Serv,
    net: Net,
    listener: bool,
) -> Result<Pin<KBox<T>>> {
    let kinds = KINDS.as_ref().ok_or(ENODEV)?;
    let kind = if listener { kinds.listener } else { kinds.conn };
    if kind != TypeId::of::<T>() {
        return Err(EINVAL);
    }
    let class = CLASS.load(Acquire);
    if class.is_null() {
        return Err(ENODEV);
    }
    let obj = KBox::pin_init(init, GFP_KERNEL)?;
    // SAFETY: The box is at its final address and not shared yet; the
    // class is registered (it is cleared only after unregistering, when
    // no transport can be created); `serv` and `net` came from sunrpc.
    unsafe { sys::svc_xprt_init(net.0, class, obj.xprt().as_ptr(), serv.0) };
    // INVARIANT: initialised.
    obj.xprt().set(XptFlag::CongCtrl);
    if listener {
        // INVARIANT (`KINDS`): a `listener` object, so marked before
        // anyone else sees it; `xpo_free` tells the two kinds apart by
        // this flag.
        obj.xprt().set(XptFlag::Listener);
    }
    Ok(obj)
}

/// Hands a transport object to sunrpc, which frees it through `xpo_free`
/// when its last reference goes.
pub(crate) fn publish<T: SvcObject>(obj: Pin<KBox<T>>) -> NonNull<sys::svc_xprt> {
    // SAFETY: Ownership moves to sunrpc's reference count; `xpo_free`
    // rebuilds the box with the same type (see `op_free`).
    let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(obj) });
    // SAFETY: `raw` is valid; `SvcObject` puts the `svc_xprt` first.
    NonNull::from(unsafe { (*raw).xprt() }).cast()
}

/// The connection object `xprt` is the first field of, if `xprt` is a
/// connection of our registered class and `C` that class's connection
/// type.
///
/// # Safety
///
/// `xprt` is an initialised `svc_xprt` (of any class) that stays alive for
/// `'a`.
pub(super) unsafe fn conn_of<'a, C: SvcObject>(xprt: *mut sys::svc_xprt) -> Option<&'a C> {
    let kinds = KINDS.as_ref()?;
    let ours = CLASS.load(Acquire);
    if ours.is_null() || kinds.conn != TypeId::of::<C>() {
        return None;
    }
    // SAFETY: `xprt` is initialised and alive for `'a` (the caller's
    // promise), and its class never changes after `svc_xprt_init`. If it
    // is of our class and not a listener, then by the invariant of `KINDS`
    // it is the first field of a connection object of the registered type,
    // `C` (compared above), which `SvcObject` makes `#[repr(C)]` with its
    // `SvcXprt` first, and which lives as long as its `svc_xprt`.
    unsafe {
        let ours = core::ptr::eq((*xprt).xpt_class, ours);
        (ours && !SvcXprt::from_raw(xprt).test(XptFlag::Listener)).then(|| &*xprt.cast::<C>())
    }
}

/// Drops a connection that sunrpc never took: through `svc_xprt_put`,
/// which releases what `svc_xprt_init` took (and a module reference,
/// taken here for it).
pub(crate) fn discard<T: SvcObject>(obj: Pin<KBox<T>>) {
    let raw = publish(obj);
    // SAFETY: Our own module, which is loaded while we run.
    unsafe { sys::rpcrdma_rs_module_get(this_module()) };
    // SAFETY: The only reference, taken by `svc_xprt_init`.
    unsafe { sys::svc_xprt_put(raw.as_ptr()) };
}

pub(super) fn this_module() -> *mut sys::module {
    <crate::RpcRdma as kernel::ModuleMetadata>::THIS_MODULE
        .as_ptr()
        .cast()
}

/// The per-request transport context (`rq_xprt_ctxt`): what a request
/// holds of the transport until `xpo_release_ctxt` (a Receive buffer).
///
/// # Invariants
///
/// Stands for the ownership of what it was made from
/// ([`Ctxt::from_raw`]'s contract): neither `Clone` nor `Copy`, and moved,
/// never copied, between the request, sunrpc (which moves it to a deferred
/// request, or passes it to `xpo_release_ctxt` once) and the transport.
#[repr(transparent)]
#[derive(PartialEq, Eq)]
pub(crate) struct Ctxt(core::num::NonZeroUsize);

impl Ctxt {
    /// A context standing for what `raw` names.
    ///
    /// # Safety
    ///
    /// `raw` is the only handle of what it names: it was consumed to make
    /// it, and no other `Ctxt` of it exists.
    pub(crate) unsafe fn from_raw(raw: core::num::NonZeroUsize) -> Self {
        // INVARIANT: unique by the caller's promise.
        Self(raw)
    }

    /// Gives the ownership up as a number.
    pub(crate) fn into_raw(self) -> core::num::NonZeroUsize {
        self.0
    }

    /// The number, for a borrowed look.
    pub(crate) fn raw(&self) -> core::num::NonZeroUsize {
        self.0
    }
}

/// Memory a transport lends a request as its Call, together with the
/// ownership that keeps it there.
///
/// # Safety
///
/// The bytes [`HeldBytes::bytes`] returns stay valid and unchanged until
/// the [`Ctxt`] that [`HeldBytes::into_ctxt`] makes is given back to the
/// transport (`xpo_release_ctxt`) and turned into ownership again.
pub(crate) unsafe trait HeldBytes {
    /// The bytes.
    fn bytes(&self) -> &[u8];
    /// The ownership, as a request context.
    fn into_ctxt(self) -> Ctxt;
}

/// An nfsd thread's request, borrowed for one `xpo_recvfrom`,
/// `xpo_sendto` or `xpo_result_payload` call.
///
/// # Invariants
///
/// `ptr` is the live `svc_rqst` of the calling thread, which nobody else
/// touches during the call; its `rq_pages` holds `rq_maxpages` allocated
/// pages.
pub(crate) struct SvcRqst<'a> {
    ptr: NonNull<sys::svc_rqst>,
    _call: PhantomData<&'a mut sys::svc_rqst>,
}

impl SvcRqst<'_> {
    fn raw(&self) -> &sys::svc_rqst {
        // SAFETY: Live and ours for the call (type invariant).
        unsafe { self.ptr.as_ref() }
    }

    fn raw_mut(&mut self) -> &mut sys::svc_rqst {
        // SAFETY: Live and ours alone for the call (type invariant).
        unsafe { self.ptr.as_mut() }
    }

    /// The transport context set by [`SvcRqst::set_ctxt`], borrowed with
    /// the request.
    pub(crate) fn ctxt_mut(&mut self) -> Option<&mut Ctxt> {
        let field: *mut *mut c_void = &raw mut self.raw_mut().rq_xprt_ctxt;
        // SAFETY: `Option<Ctxt>` has the layout of a `usize` (a
        // `repr(transparent)` `NonZeroUsize`, null for `None`), as a
        // pointer has; the field only ever holds a context we set
        // (`set_ctxt`) or null, and the request is ours for the call.
        unsafe { (*field.cast::<Option<Ctxt>>()).as_mut() }
    }

    /// Takes the transport context out of the request, for the caller to
    /// give back with [`SvcRqst::set_ctxt`].
    pub(crate) fn take_ctxt(&mut self) -> Option<Ctxt> {
        let slot = &mut self.raw_mut().rq_xprt_ctxt;
        let raw = core::mem::replace(slot, core::ptr::null_mut());
        let raw = core::num::NonZeroUsize::new(raw as usize)?;
        // SAFETY: The field held a context we set (or null), which it
        // gives up: moved, not copied.
        Some(unsafe { Ctxt::from_raw(raw) })
    }

    /// Sets the context that `xpo_release_ctxt` gets back. The request
    /// had none (sunrpc clears it when it releases one).
    pub(crate) fn set_ctxt(&mut self, ctxt: Ctxt) {
        let slot = &mut self.raw_mut().rq_xprt_ctxt;
        if !slot.is_null() {
            // Kept, not released: leaking the old one is safe, its owner
            // never gets it back.
            pr_warn!("rpcrdma_rs: a request held two transport contexts\n");
        }
        *slot = ctxt.into_raw().get() as *mut c_void;
    }

    /// Hands the request the Call in `held`'s `range`, in place: `rq_arg`
    /// points into its bytes, and the request holds it as its context
    /// until `xpo_release_ctxt` gives it back, so the bytes stay.
    pub(crate) fn set_arg_held(
        &mut self,
        held: impl HeldBytes,
        range: core::ops::Range<usize>,
    ) -> Result {
        let bytes = held.bytes().get(range).ok_or(EMSGSIZE)?;
        let (base, len) = (bytes.as_ptr(), bytes.len());
        let len32 = u32::try_from(len).map_err(|_| EMSGSIZE)?;
        self.set_ctxt(held.into_ctxt());
        let arg = &mut self.raw_mut().rq_arg;
        // INVARIANT: the bytes stay, unchanged, while the request holds
        // the context (`HeldBytes`).
        arg.head[0].iov_base = base.cast_mut().cast();
        arg.head[0].iov_len = len;
        arg.tail[0].iov_base = core::ptr::null_mut();
        arg.tail[0].iov_len = 0;
        arg.page_len = 0;
        arg.page_base = 0;
        arg.buflen = len32;
        arg.len = len32;
        Ok(())
    }

    /// Bytes the Call pages hold.
    pub(crate) fn arg_room(&self) -> usize {
        (self.raw().rq_maxpages as usize).saturating_mul(PAGE_SIZE)
    }

    /// The Call is the first `len` bytes of the request's pages (which
    /// [`SvcRqst::arg_write`] and RDMA Reads filled): the first page as
    /// the head, the rest as the page list.
    pub(crate) fn set_arg_pages(&mut self, len: usize) -> Result {
        if len > self.arg_room() {
            return Err(EMSGSIZE);
        }
        let head = len.min(PAGE_SIZE);
        let first = self.arg_page(0)?;
        let r = self.raw_mut();
        // SAFETY: `rq_pages` has `rq_maxpages` > 1 entries (type invariant).
        let rest = unsafe { r.rq_pages.add(1) };
        let arg = &mut r.rq_arg;
        // SAFETY: An allocated page (type invariant), directly mapped.
        arg.head[0].iov_base = unsafe { sys::rpcrdma_rs_page_address(first) };
        arg.head[0].iov_len = head;
        arg.pages = rest;
        arg.page_base = 0;
        arg.page_len = (len - head) as u32;
        arg.tail[0].iov_base = core::ptr::null_mut();
        arg.tail[0].iov_len = 0;
        arg.buflen = len as u32;
        arg.len = len as u32;
        Ok(())
    }

    /// Entry `i` of `rq_pages`, the request's pages.
    fn page_slot(&mut self, i: usize) -> Result<&mut *mut sys::page> {
        let r = self.raw_mut();
        if i >= r.rq_maxpages as usize {
            return Err(EMSGSIZE);
        }
        // SAFETY: `i < rq_maxpages`, within `rq_pages` (type invariant);
        // the request, and so its page array, is ours alone for the call,
        // which `&mut self` borrows.
        Ok(unsafe { &mut *r.rq_pages.add(i) })
    }

    fn arg_page(&mut self, i: usize) -> Result<*mut sys::page> {
        let page = *self.page_slot(i)?;
        if page.is_null() {
            return Err(ENOMEM);
        }
        Ok(page)
    }

    /// Copies `src` into the request's pages at byte `dest`.
    pub(crate) fn arg_write(&mut self, dest: usize, src: &[u8]) -> Result {
        self.arg_fill(dest, src.len(), |off, dst| {
            dst.copy_from_slice(&src[off..off + dst.len()])
        })
    }

    /// Zeroes `len` bytes of the request's pages at byte `dest`.
    pub(crate) fn arg_zero(&mut self, dest: usize, len: usize) -> Result {
        self.arg_fill(dest, len, |_, dst| dst.fill(0))
    }

    fn arg_fill(&mut self, dest: usize, len: usize, mut f: impl FnMut(usize, &mut [u8])) -> Result {
        let end = dest.checked_add(len).ok_or(EMSGSIZE)?;
        if end > self.arg_room() {
            return Err(EMSGSIZE);
        }
        let mut done = 0;
        while done < len {
            let pos = dest + done;
            let page = self.arg_page(pos / PAGE_SIZE)?;
            let off = pos % PAGE_SIZE;
            let n = (PAGE_SIZE - off).min(len - done);
            // SAFETY: The page is allocated and directly mapped, and ours
            // for the call (type invariant); `off + n` is within it.
            let dst = unsafe {
                let base = sys::rpcrdma_rs_page_address(page).cast::<u8>();
                core::slice::from_raw_parts_mut(base.add(off), n)
            };
            f(done, dst);
            done += n;
        }
        Ok(())
    }

    /// Takes the first `n` Call pages off the request, into `into`, for
    /// RDMA Reads that outlive this call. sunrpc allocates fresh ones in
    /// their place before the thread's next request (`rq_pages_nfree`),
    /// and does not put these.
    pub(crate) fn take_arg_pages(&mut self, n: usize, into: &mut PageRefs) -> Result {
        let r = self.raw_mut();
        if n > r.rq_maxpages as usize {
            return Err(EMSGSIZE);
        }
        into.pages.reserve(n, GFP_KERNEL)?;
        // INVARIANT: pages of sunrpc's, which others may reach.
        into.shared = true;
        // sunrpc fills the empty entries among the first `rq_pages_nfree`,
        // however far the loop gets.
        r.rq_pages_nfree = r.rq_pages_nfree.max(n as u64);
        for i in 0..n {
            let slot = self.page_slot(i)?;
            let page = NonNull::new(*slot).ok_or(ENOMEM)?;
            // Cannot fail: reserved above.
            if into.pages.push_within_capacity(page).is_ok() {
                *slot = core::ptr::null_mut();
            }
        }
        Ok(())
    }

    /// Puts the pages of `from` in place of the request's first Call
    /// pages, whose references `from` then drops: the Call assembled in
    /// them by RDMA Reads becomes this request's.
    pub(crate) fn put_arg_pages(&mut self, from: &mut PageRefs) -> Result {
        let r = self.raw_mut();
        let n = from.pages.len();
        if n > r.rq_maxpages as usize {
            return Err(EMSGSIZE);
        }
        // INVARIANT: it holds the request's pages below, until released.
        from.shared = true;
        let mut kept = 0;
        for i in 0..n {
            let ours = from.pages[i];
            let slot = self.page_slot(i)?;
            let old = core::mem::replace(slot, ours.as_ptr());
            // INVARIANT: `from` gives up `ours` to the request and holds
            // the request's page instead (`kept <= i`: no entry yet to
            // be read is overwritten).
            if let Some(old) = NonNull::new(old) {
                from.pages[kept] = old;
                kept += 1;
            }
        }
        from.pages.truncate(kept);
        from.release();
        Ok(())
    }

    /// The Reply nfsd built.
    pub(crate) fn res(&self) -> &XdrBuf {
        // SAFETY: `rq_res` is live for the call (type invariant); its head
        // and tail lie in the directly mapped pages of `rq_respages`, its
        // page list covers `page_base + page_len` bytes, and nobody
        // changes it while the transport sends it.
        unsafe { XdrBuf::from_raw(&raw const self.raw().rq_res) }
    }

    /// A Call was received: its addresses are the transport's, it came
    /// over RDMA (`rq_prot` is neither TCP nor UDP), and the peer's port
    /// is irrelevant (`RQ_SECURE`).
    pub(crate) fn received_on(&mut self, xprt: &SvcXprt) {
        self.raw_mut().rq_prot = IPPROTO_MAX;
        // SAFETY: Both live; the request is ours for the call.
        unsafe {
            sys::svc_xprt_copy_addrs(self.ptr.as_ptr(), xprt.as_ptr());
            sys::rpcrdma_rs_svc_rqst_set_secure(self.ptr.as_ptr());
        }
    }

    /// Takes the Reply's pages off the request, into `into`, for RDMA
    /// Writes that outlive this call: sunrpc neither releases nor reuses
    /// them (it allocates fresh ones where it finds a hole, as it does
    /// after svcrdma's sendto). The Reply is left empty, so that nothing
    /// reads the pages through the request any more.
    pub(crate) fn take_reply_pages(&mut self, into: &mut PageRefs) -> Result {
        let r = self.raw_mut();
        // SAFETY: Both point into `rq_pages`, `rq_respages` first.
        let n = unsafe { r.rq_next_page.offset_from(r.rq_respages) };
        let n = usize::try_from(n).map_err(|_| EINVAL)?;
        into.pages.reserve(n, GFP_KERNEL)?;
        // INVARIANT: the Reply's pages may be the page cache's.
        into.shared = true;
        for i in 0..n {
            // SAFETY: `i` is below `rq_next_page`, within `rq_pages`.
            let slot = unsafe { &mut *r.rq_respages.add(i) };
            if let Some(page) = NonNull::new(*slot) {
                // Cannot fail: reserved above.
                if into.pages.push_within_capacity(page).is_ok() {
                    *slot = core::ptr::null_mut();
                }
            }
        }
        let res = &mut r.rq_res;
        res.head[0].iov_len = 0;
        res.tail[0].iov_len = 0;
        res.page_len = 0;
        res.len = 0;
        Ok(())
    }

    /// No reply pages are in use yet (a zero count makes releasing them
    /// a no-op if receiving fails).
    pub(crate) fn reset_reply_pages(&mut self) {
        let r = self.raw_mut();
        r.rq_next_page = r.rq_respages;
    }
}

/// References to pages taken off a request ([`SvcRqst::take_reply_pages`]),
/// or allocated here ([`PageRefs::alloc`]), put when released or dropped.
/// The vector keeps its room, so a connection's Send contexts reuse it
/// without allocating.
///
/// # Invariants
///
/// Each entry holds one reference to its page. Unless `shared`, every
/// page was allocated by [`PageRefs::alloc`], is directly mapped, and
/// nobody else holds a reference to it.
pub(crate) struct PageRefs {
    pages: KVec<NonNull<sys::page>>,
    shared: bool,
}

impl PageRefs {
    /// Holds no page.
    pub(crate) const fn new() -> Self {
        Self {
            pages: KVec::new(),
            shared: false,
        }
    }

    /// Appends `n` pages, zeroed, allocated for this value alone: the CPU
    /// reaches their bytes through [`PageRefs::copy_in`] and
    /// [`PageRefs::copy_out`].
    pub(crate) fn alloc(&mut self, n: usize) -> Result {
        self.pages.reserve(n, GFP_KERNEL)?;
        for _ in 0..n {
            let page = Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?;
            // The allocation's one reference, which `release` puts.
            let page = core::mem::ManuallyDrop::new(page);
            let ptr = NonNull::new(page.as_ptr().cast::<sys::page>()).ok_or(ENOMEM)?;
            // INVARIANT: one reference each, nobody else's; a GFP_KERNEL
            // page is directly mapped. Cannot fail: reserved above.
            let _ = self.pages.push_within_capacity(ptr);
        }
        Ok(())
    }

    /// The byte range of page `i` from `off` of up to `len` bytes, for
    /// [`PageRefs::copy_in`] and [`PageRefs::copy_out`]: only pages that
    /// [`PageRefs::alloc`] made, which nobody else reaches.
    fn own_bytes(&self, pos: usize, len: usize) -> Result<(*mut u8, usize)> {
        if self.shared {
            return Err(EPERM);
        }
        let page = self.pages.get(pos / PAGE_SIZE).ok_or(EMSGSIZE)?;
        let off = pos % PAGE_SIZE;
        // SAFETY: A directly mapped page we hold (type invariant).
        let base = unsafe { sys::rpcrdma_rs_page_address(page.as_ptr()) }.cast::<u8>();
        Ok((base.wrapping_add(off), (PAGE_SIZE - off).min(len)))
    }

    /// Copies `src` into the pages at byte `dest`. Only for pages this
    /// value allocated ([`PageRefs::alloc`]); `EPERM` for others.
    pub(crate) fn copy_in(&mut self, dest: usize, src: &[u8]) -> Result {
        let mut done = 0;
        while done < src.len() {
            let (p, n) = self.own_bytes(dest + done, src.len() - done)?;
            // SAFETY: `n` bytes at `p` lie in one of our pages, which no
            // one else holds (`own_bytes`); `&mut self` is unique. The
            // device reaches them only through an rdma_rw context posted
            // with the token of the endpoint buffer holding them, and
            // nothing reaches this value meanwhile.
            unsafe { core::ptr::copy_nonoverlapping(src[done..].as_ptr(), p, n) };
            done += n;
        }
        Ok(())
    }

    /// Copies the pages' bytes at byte `src` into `dst`; as
    /// [`PageRefs::copy_in`].
    pub(crate) fn copy_out(&self, src: usize, dst: &mut [u8]) -> Result {
        let mut done = 0;
        while done < dst.len() {
            let (p, n) = self.own_bytes(src + done, dst.len() - done)?;
            // SAFETY: As for `copy_in`; only `&mut self` writes them.
            unsafe { core::ptr::copy_nonoverlapping(p, dst[done..].as_mut_ptr(), n) };
            done += n;
        }
        Ok(())
    }

    /// Pages held.
    pub(crate) fn len(&self) -> usize {
        self.pages.len()
    }

    /// Appends to `out` the page pieces of `len` bytes at byte `dest` of
    /// the pages held, in order.
    pub(crate) fn segs(&self, out: &mut KVec<PageSeg>, dest: usize, len: usize) -> Result {
        let end = dest.checked_add(len).ok_or(EMSGSIZE)?;
        let mut pos = dest;
        while pos < end {
            let off = pos % PAGE_SIZE;
            let n = (PAGE_SIZE - off).min(end - pos);
            let page = self.pages.get(pos / PAGE_SIZE).ok_or(EMSGSIZE)?;
            out.push(
                PageSeg {
                    page: page.as_ptr(),
                    offset: off as u32,
                    len: n as u32,
                },
                GFP_KERNEL,
            )?;
            pos += n;
        }
        Ok(())
    }

    /// Puts every reference held.
    pub(crate) fn release(&mut self) {
        if self.pages.is_empty() {
            return;
        }
        let n = c_int::try_from(self.pages.len()).unwrap_or(c_int::MAX);
        // SAFETY: `n` entries, each a page reference we own (type
        // invariant), given up here: the vector forgets them next.
        unsafe { sys::rpcrdma_rs_release_pages(self.pages.as_mut_ptr().cast(), n) };
        self.pages.clear();
        self.shared = false;
    }
}

impl Drop for PageRefs {
    fn drop(&mut self) {
        self.release();
    }
}

// SAFETY: Page references may be put from any thread.
unsafe impl Send for PageRefs {}

/// The server transport, as the `svc_xprt_ops` see it.
pub(crate) trait SvcTransport: 'static {
    /// A listening endpoint.
    type Listener: SvcObject;
    /// A connection.
    type Conn: SvcObject;

    /// `xpo_create`: a listener on `addr` (IPv4 or IPv6).
    fn create(serv: Serv, net: Net, addr: &SockAddr) -> Result<Pin<KBox<Self::Listener>>>;
    /// `xpo_accept`: the next connection the listener took, if any.
    fn accept(listener: Pin<&Self::Listener>) -> Option<Pin<KBox<Self::Conn>>>;
    /// `xpo_has_wspace`.
    fn has_wspace(conn: &Self::Conn) -> bool;
    /// `xpo_recvfrom`: the length of a Call now in `rq_arg`, or 0.
    fn recvfrom(conn: &Self::Conn, rqst: &mut SvcRqst<'_>) -> i32;
    /// `xpo_sendto`.
    fn sendto(conn: &Self::Conn, rqst: &mut SvcRqst<'_>) -> i32;
    /// `xpo_result_payload`: `len` bytes at `offset` of the Reply are a
    /// data item that may go in a Write chunk.
    fn result_payload(conn: &Self::Conn, rqst: &mut SvcRqst<'_>, offset: u32, len: u32) -> i32;
    /// `xpo_release_ctxt`: the context a request held (maybe from a
    /// deferred request, after its thread moved on).
    fn release_ctxt(conn: &Self::Conn, ctxt: Ctxt);
    /// `xpo_detach` of a connection: disconnect and wake waiters.
    fn detach(conn: &Self::Conn);
    /// `xpo_detach` of a listener.
    fn detach_listener(listener: &Self::Listener);
}

/// A registered `svc_xprt_class`; unregistered on drop.
///
/// # Invariants
///
/// `class` is registered with sunrpc while this value exists, and
/// [`CLASS`] points to it.
pub(crate) struct SvcClass {
    class: Pin<KBox<Opaque<sys::svc_xprt_class>>>,
}

// SAFETY: Once registered the class is only read by sunrpc, under its own
// lock.
unsafe impl Send for SvcClass {}
// SAFETY: `&SvcClass` allows nothing.
unsafe impl Sync for SvcClass {}

impl SvcClass {
    /// Registers class `name` for `T`; fails with `EEXIST` when another
    /// module (rpcrdma.ko) has it.
    pub(crate) fn register<T: SvcTransport>(
        name: &'static CStr,
        module: &'static ThisModule,
        ident: i32,
        max_payload: u32,
    ) -> Result<Self> {
        let kinds = Kinds {
            listener: TypeId::of::<T::Listener>(),
            conn: TypeId::of::<T::Conn>(),
        };
        // One transport per module: a second registration must be of the
        // same types, or `KINDS` would lie about the first's objects.
        if !KINDS.populate(kinds) && KINDS.as_ref() != Some(&kinds) {
            return Err(EBUSY);
        }
        let class = KBox::pin(
            Opaque::new(sys::svc_xprt_class {
                xcl_name: name.as_char_ptr().cast(),
                xcl_owner: module.as_ptr().cast(),
                xcl_ops: ops::<T>(),
                xcl_max_payload: max_payload,
                xcl_ident: ident,
                ..Default::default()
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: The class is pinned in the heap and stays registered
        // until `drop`; its list head is initialised by sunrpc.
        kernel::error::to_result(unsafe { sys::svc_reg_xprt_class(class.get()) })?;
        // INVARIANT: registered; published for `new_object`.
        CLASS.store(class.get(), Release);
        Ok(Self { class })
    }
}

impl Drop for SvcClass {
    fn drop(&mut self) {
        // SAFETY: Registered in `register`. Every transport holds a module
        // reference, so none exists any more.
        unsafe { sys::svc_unreg_xprt_class(self.class.get()) };
        CLASS.store(core::ptr::null_mut(), Release);
    }
}

fn ops<T: SvcTransport>() -> &'static sys::svc_xprt_ops {
    struct Table<T>(PhantomData<T>);
    impl<T: SvcTransport> Table<T> {
        const OPS: sys::svc_xprt_ops = sys::svc_xprt_ops {
            xpo_create: Some(op_create::<T>),
            xpo_accept: Some(op_accept::<T>),
            xpo_has_wspace: Some(op_has_wspace::<T>),
            xpo_recvfrom: Some(op_recvfrom::<T>),
            xpo_sendto: Some(op_sendto::<T>),
            xpo_result_payload: Some(op_result_payload::<T>),
            xpo_release_ctxt: Some(op_release_ctxt::<T>),
            xpo_detach: Some(op_detach::<T>),
            xpo_free: Some(op_free::<T>),
            xpo_kill_temp_xprt: Some(op_kill_temp_xprt),
            xpo_handshake: None,
        };
    }
    &Table::<T>::OPS
}

/// # Safety
///
/// `xprt` is a live connection of class `T` (not a listener).
unsafe fn conn<'a, T: SvcTransport>(xprt: *mut sys::svc_xprt) -> &'a T::Conn {
    // SAFETY: A connection of our class is the first field of a
    // `T::Conn` (invariant of `KINDS`, set for `T` by `SvcClass::register`;
    // `SvcObject` puts the `svc_xprt` first), alive while sunrpc calls us
    // with it.
    unsafe { &*xprt.cast::<T::Conn>() }
}

/// # Safety
///
/// `rqstp` is the calling nfsd thread's request, on a connection of
/// class `T`.
unsafe fn rqst_conn<'a, T: SvcTransport>(rqstp: *mut sys::svc_rqst) -> (&'a T::Conn, SvcRqst<'a>) {
    // SAFETY: The caller's promise; the request holds the transport.
    let conn = unsafe { conn::<T>((*rqstp).rq_xprt) };
    // INVARIANT: the thread's own request, for this call.
    let rqst = SvcRqst {
        // SAFETY: sunrpc never passes a null request.
        ptr: unsafe { NonNull::new_unchecked(rqstp) },
        _call: PhantomData,
    };
    (conn, rqst)
}

/// `xpo_create`.
///
/// # Safety
///
/// Called by sunrpc with a live service and namespace and a socket
/// address of `len` bytes.
unsafe extern "C" fn op_create<T: SvcTransport>(
    serv: *mut sys::svc_serv,
    net: *mut sys::net,
    sa: *mut sys::sockaddr,
    len: c_int,
    _flags: c_int,
) -> *mut sys::svc_xprt {
    let mut addr = SockAddr(sys::__kernel_sockaddr_storage::default());
    let len = usize::try_from(len).unwrap_or(0);
    if len > core::mem::size_of_val(&addr) || len < core::mem::size_of::<sys::sockaddr>() {
        return EINVAL.to_ptr();
    }
    // SAFETY: `sa` holds `len` bytes, which fit in `addr`.
    unsafe { core::ptr::copy_nonoverlapping(sa.cast::<u8>(), (&raw mut addr.0).cast::<u8>(), len) };
    match T::create(Serv(serv), Net(net), &addr) {
        Ok(listener) => publish(listener).as_ptr(),
        Err(e) => e.to_ptr(),
    }
}

/// `xpo_accept`.
///
/// # Safety
///
/// Called by sunrpc with a live listener of class `T`.
unsafe extern "C" fn op_accept<T: SvcTransport>(xprt: *mut sys::svc_xprt) -> *mut sys::svc_xprt {
    // SAFETY: A listener of class `T`, alive for the call, and pinned:
    // `publish` took it from a `Pin<KBox>`, and `op_free` frees it.
    let listener = unsafe { Pin::new_unchecked(&*xprt.cast::<T::Listener>()) };
    match T::accept(listener) {
        Some(conn) => publish(conn).as_ptr(),
        None => core::ptr::null_mut(),
    }
}

/// `xpo_has_wspace`.
///
/// # Safety
///
/// Called by sunrpc with a live transport of class `T`.
unsafe extern "C" fn op_has_wspace<T: SvcTransport>(xprt: *mut sys::svc_xprt) -> c_int {
    // SAFETY: Live and initialised for the call.
    match unsafe { conn_of::<T::Conn>(xprt) } {
        Some(conn) => c_int::from(T::has_wspace(conn)),
        // A listener.
        None => 1,
    }
}

/// `xpo_recvfrom`.
///
/// # Safety
///
/// Called by an nfsd thread with its request on a connection of class `T`.
unsafe extern "C" fn op_recvfrom<T: SvcTransport>(rqstp: *mut sys::svc_rqst) -> c_int {
    // SAFETY: The caller's promise.
    let (conn, mut rqst) = unsafe { rqst_conn::<T>(rqstp) };
    T::recvfrom(conn, &mut rqst)
}

/// `xpo_sendto`.
///
/// # Safety
///
/// As for [`op_recvfrom`].
unsafe extern "C" fn op_sendto<T: SvcTransport>(rqstp: *mut sys::svc_rqst) -> c_int {
    // SAFETY: The caller's promise.
    let (conn, mut rqst) = unsafe { rqst_conn::<T>(rqstp) };
    T::sendto(conn, &mut rqst)
}

/// `xpo_result_payload`.
///
/// # Safety
///
/// As for [`op_recvfrom`].
unsafe extern "C" fn op_result_payload<T: SvcTransport>(
    rqstp: *mut sys::svc_rqst,
    offset: c_uint,
    len: c_uint,
) -> c_int {
    // SAFETY: The caller's promise.
    let (conn, mut rqst) = unsafe { rqst_conn::<T>(rqstp) };
    T::result_payload(conn, &mut rqst, offset, len)
}

/// `xpo_release_ctxt`.
///
/// # Safety
///
/// Called by sunrpc with a live connection of class `T` and a context
/// that a request on it held.
unsafe extern "C" fn op_release_ctxt<T: SvcTransport>(xprt: *mut sys::svc_xprt, ctxt: *mut c_void) {
    if let Some(raw) = core::num::NonZeroUsize::new(ctxt as usize) {
        // SAFETY: sunrpc gives back, once, a context a request held: one
        // we set (`SvcRqst::set_ctxt`), moved out of the request.
        let ctxt = unsafe { Ctxt::from_raw(raw) };
        // SAFETY: Only connections receive, so only they have contexts.
        T::release_ctxt(unsafe { conn::<T>(xprt) }, ctxt);
    }
}

/// `xpo_detach`.
///
/// # Safety
///
/// Called by sunrpc with a live transport of class `T`.
unsafe extern "C" fn op_detach<T: SvcTransport>(xprt: *mut sys::svc_xprt) {
    // SAFETY: Live for the call.
    if unsafe { SvcXprt::from_raw(xprt) }.test(XptFlag::Listener) {
        // SAFETY: A listener of class `T`.
        T::detach_listener(unsafe { &*xprt.cast::<T::Listener>() });
    } else {
        // SAFETY: A connection of class `T`.
        T::detach(unsafe { conn::<T>(xprt) });
    }
}

/// `xpo_free`: the last reference went; drop the object.
///
/// # Safety
///
/// Called by sunrpc once, with a transport of class `T` published by
/// [`publish`], which nothing uses any more.
unsafe extern "C" fn op_free<T: SvcTransport>(xprt: *mut sys::svc_xprt) {
    // SAFETY: Live until dropped below.
    let listener = unsafe { SvcXprt::from_raw(xprt) }.test(XptFlag::Listener);
    // SAFETY: `publish` leaked a box of this type, which nothing else
    // holds now (the caller's promise).
    unsafe {
        if listener {
            drop(KBox::from_raw(xprt.cast::<T::Listener>()));
        } else {
            drop(KBox::from_raw(xprt.cast::<T::Conn>()));
        }
    }
}

/// `xpo_kill_temp_xprt`: nothing to do before closing a connection
/// (svcrdma has no more); sunrpc calls it unconditionally.
///
/// # Safety
///
/// None: the argument is not used.
unsafe extern "C" fn op_kill_temp_xprt(_xprt: *mut sys::svc_xprt) {}
