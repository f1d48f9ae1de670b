// SPDX-License-Identifier: GPL-2.0

//! `struct rpc_xprt`.

use core::ffi::{c_int, c_ulong};
use core::marker::PhantomData;

use kernel::prelude::*;
use kernel::types::Opaque;

use crate::sys;

/// `HZ`.
pub(crate) fn hz() -> c_ulong {
    // SAFETY: Reads a constant.
    unsafe { sys::rpcrdma_rs_hz() }
}

/// The jiffies counter.
pub(crate) fn jiffies() -> c_ulong {
    // SAFETY: Reads the jiffies counter.
    unsafe { sys::rpcrdma_rs_jiffies() }
}

/// A `struct rpc_xprt`, borrowed.
///
/// # Invariants
///
/// A `&Xprt` points to a live `rpc_xprt` for its whole lifetime.
#[repr(transparent)]
pub(crate) struct Xprt(Opaque<sys::rpc_xprt>);

impl Xprt {
    /// # Safety
    ///
    /// `ptr` must point to a live `rpc_xprt` for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut sys::rpc_xprt) -> &'a Self {
        // SAFETY: `Xprt` is a transparent wrapper; the caller guarantees
        // the transport lives for `'a`.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The raw pointer, for sunrpc calls not wrapped here.
    pub(crate) fn as_ptr(&self) -> *mut sys::rpc_xprt {
        self.0.get()
    }

    /// The transport's network namespace.
    pub(crate) fn net(&self) -> *mut sys::net {
        // SAFETY: Live by the type invariant; `xprt_net` is set by
        // `xprt_alloc` and never changes.
        unsafe { (*self.as_ptr()).xprt_net }
    }

    /// The transport's network namespace, for rdma_cm.
    pub(crate) fn net_ns(&self) -> Option<crate::rdma::NetNs<'_>> {
        // SAFETY: `xprt_net` holds the reference `xprt_alloc` took until
        // `xprt_free`, so it lives as long as the transport, which lives
        // for the borrow (type invariant).
        unsafe { crate::rdma::NetNs::from_raw(self.net()) }
    }

    /// The server's address, copied: `set_port` may change it.
    pub(crate) fn dst_sockaddr(&self) -> super::SockAddr {
        // SAFETY: Live by the type invariant; a racy copy, as sunrpc's own
        // readers make, of plain bytes.
        super::SockAddr::from_storage(unsafe {
            core::ptr::read_volatile(&raw const (*self.as_ptr()).addr)
        })
    }

    /// `connect_timeout`, read without `transport_lock`: a word that only
    /// `set_connect_timeout` lowers.
    pub(crate) fn connect_timeout(&self) -> c_ulong {
        // SAFETY: Live by the type invariant; a racy read of an aligned
        // word is what sunrpc itself does (`xprt_reconnect_delay`).
        unsafe { core::ptr::read_volatile(&raw const (*self.as_ptr()).connect_timeout) }
    }

    /// The server's address (or, if `port`, its port) as sunrpc prints
    /// it, for the trace events.
    pub(crate) fn display_cstr(&self, port: bool) -> &kernel::str::CStr {
        let which = if port {
            sys::rpc_display_format_t_RPC_DISPLAY_PORT
        } else {
            sys::rpc_display_format_t_RPC_DISPLAY_ADDR
        };
        // SAFETY: As in `display_addr`.
        let ptr = unsafe { (*self.as_ptr()).address_strings[which as usize] };
        if ptr.is_null() {
            return c"?";
        }
        // SAFETY: As in `display_addr`.
        unsafe { kernel::str::CStr::from_char_ptr(ptr.cast()) }
    }

    /// The server address as printed in mountstats, for log messages.
    pub(crate) fn display_addr(&self) -> &str {
        // SAFETY: Live by the type invariant; the display strings are set
        // in `setup` and replaced only by `set_port`, before the first
        // connect.
        let ptr = unsafe {
            (*self.as_ptr()).address_strings[sys::rpc_display_format_t_RPC_DISPLAY_ADDR as usize]
        };
        if ptr.is_null() {
            return "?";
        }
        // SAFETY: Display strings are NUL-terminated and live as long as
        // the transport.
        let s = unsafe { kernel::str::CStr::from_char_ptr(ptr.cast()) };
        s.to_str().unwrap_or("?")
    }

    /// Asks sunrpc to close the connection (through its autoclose work,
    /// which takes `XPRT_LOCKED`).
    pub(crate) fn force_disconnect(&self) {
        // SAFETY: Live by the type invariant.
        unsafe { sys::xprt_force_disconnect(self.as_ptr()) };
    }

    /// `XPRT_CONNECTED`.
    pub(crate) fn connected(&self) -> bool {
        // SAFETY: Live by the type invariant.
        unsafe { sys::rpcrdma_rs_xprt_connected(self.as_ptr()) }
    }

    /// When the transport was last used, in jiffies.
    pub(crate) fn last_used(&self) -> c_ulong {
        // SAFETY: Live by the type invariant; a racy read of a word, as
        // `xs_tcp_print_stats` does.
        unsafe { core::ptr::read_volatile(&raw const (*self.as_ptr()).last_used) }
    }

    /// sunrpc's generic counters, for mountstats (read without a lock, as
    /// every transport's `print_stats` does).
    pub(crate) fn stat(&self) -> sys::rpc_xprt__bindgen_ty_1 {
        // SAFETY: Live by the type invariant; a racy copy of counters.
        unsafe { core::ptr::read_volatile(&raw const (*self.as_ptr()).stat) }
    }

    /// Takes `transport_lock`.
    pub(crate) fn lock_transport(&self) -> TransportLock<'_> {
        // SAFETY: Live by the type invariant; released by the guard.
        unsafe { sys::rpcrdma_rs_spin_lock(&raw mut (*self.as_ptr()).transport_lock) };
        // INVARIANT: the lock is held.
        TransportLock {
            xprt: self,
            _not_send: PhantomData,
        }
    }

    /// Wakes the tasks waiting for a connection, with `status`.
    pub(crate) fn wake_pending_tasks(&self, status: c_int) {
        // SAFETY: Live by the type invariant.
        unsafe { sys::xprt_wake_pending_tasks(self.as_ptr(), status) };
    }
}

/// `xprt->transport_lock`, held until dropped.
///
/// # Invariants
///
/// The lock of `xprt` is held by this thread while the guard exists.
pub(crate) struct TransportLock<'a> {
    xprt: &'a Xprt,
    /// Spinlocks are released where they were taken.
    _not_send: PhantomData<*mut ()>,
}

impl TransportLock<'_> {
    fn raw(&self) -> *mut sys::rpc_xprt {
        self.xprt.as_ptr()
    }

    /// The congestion window.
    pub(crate) fn cwnd(&self) -> c_ulong {
        // SAFETY: `cwnd` is protected by the lock we hold.
        unsafe { (*self.raw()).cwnd }
    }

    /// Sets the congestion window. `cong` is left alone: requests sent
    /// before still hold their slots and give them back when released.
    pub(crate) fn set_cwnd(&mut self, cwnd: c_ulong) {
        // SAFETY: `cwnd` is protected by the lock we hold (type invariant).
        unsafe { (*self.raw()).cwnd = cwnd };
    }

    /// Lowers the connect timeout to `connect_timeout`, with the RPC
    /// timeout `to` starting at `initval`, and the reconnect ceiling to
    /// `reconnect_timeout`; neither is ever raised.
    ///
    /// # Safety
    ///
    /// `to` must stay valid as long as the transport (it is the
    /// transport's own).
    pub(crate) unsafe fn lower_timeouts(
        &mut self,
        to: &Opaque<sys::rpc_timeout>,
        initval: c_ulong,
        connect_timeout: c_ulong,
        reconnect_timeout: c_ulong,
    ) {
        let xprt = self.raw();
        // SAFETY: The fields are protected by the lock we hold; `to`
        // outlives the transport by the caller's promise.
        unsafe {
            if connect_timeout < (*xprt).connect_timeout {
                let t = to.get();
                (*t).to_initval = initval;
                (*t).to_maxval = initval;
                (*xprt).timeout = t;
                (*xprt).connect_timeout = connect_timeout;
            }
            if reconnect_timeout < (*xprt).max_reconnect_timeout {
                (*xprt).max_reconnect_timeout = reconnect_timeout;
            }
        }
    }
}

impl Drop for TransportLock<'_> {
    fn drop(&mut self) {
        // SAFETY: Held by the type invariant.
        unsafe { sys::rpcrdma_rs_spin_unlock(&raw mut (*self.raw()).transport_lock) };
    }
}

/// Proof that this thread holds `XPRT_LOCKED` of an [`Xprt`]: the right to
/// connect, send, close and own the connection.
///
/// # Invariants
///
/// `XPRT_LOCKED` of `xprt` is held (or the transport is being destroyed
/// and nothing else uses it) for `'a`.
pub(crate) struct XprtLocked<'a> {
    xprt: &'a Xprt,
    _not_send: PhantomData<*mut ()>,
}

impl<'a> XprtLocked<'a> {
    /// # Safety
    ///
    /// The caller holds `XPRT_LOCKED` of `xprt` for `'a` (a task that
    /// sunrpc let in, the connect worker it handed the lock to, or
    /// `destroy`, when nobody else can reach the transport).
    pub(crate) unsafe fn assume(xprt: &'a Xprt) -> Self {
        // INVARIANT: the caller's promise.
        Self {
            xprt,
            _not_send: PhantomData,
        }
    }

    /// The locked transport.
    pub(crate) fn xprt(&self) -> &'a Xprt {
        self.xprt
    }

    fn raw(&self) -> *mut sys::rpc_xprt {
        self.xprt.as_ptr()
    }

    /// Sets `XPRT_CONNECTED`, counts the connect and its duration, and
    /// starts a new connection cookie.
    pub(crate) fn connected(&self) {
        let xprt = self.raw();
        // SAFETY: The connection state and its counters belong to the
        // `XPRT_LOCKED` holder (type invariant).
        unsafe {
            (*xprt).connect_cookie = (*xprt).connect_cookie.wrapping_add(1);
            (*xprt).stat.connect_count += 1;
            let took = jiffies().wrapping_sub((*xprt).stat.connect_start);
            (*xprt).stat.connect_time = (*xprt).stat.connect_time.wrapping_add(took as u64);
            sys::rpcrdma_rs_xprt_set_connected(xprt);
        }
    }

    /// Whether sunrpc dropped the last reference to the transport:
    /// `xprt_destroy` then waits for `XPRT_LOCKED` and calls `destroy`, and
    /// nothing will be sent on it again (nobody takes a reference from
    /// zero).
    pub(crate) fn dying(&self) -> bool {
        // SAFETY: Live: `destroy` cannot run while `XPRT_LOCKED` is held
        // (type invariant). The read is `kref_read`'s `READ_ONCE`.
        let refs = unsafe {
            core::ptr::read_volatile(&raw const (*self.raw()).kref.refcount.refs.counter)
        };
        refs == 0
    }

    /// Clears `XPRT_CONNECTED`.
    pub(crate) fn clear_connected(&self) {
        // SAFETY: The connection state belongs to the `XPRT_LOCKED` holder
        // (type invariant).
        unsafe { sys::rpcrdma_rs_xprt_clear_connected(self.raw()) };
    }

    /// Clears `XPRT_CONNECTING`: the attempt has its outcome.
    pub(crate) fn clear_connecting(&self) {
        // SAFETY: The connection state belongs to the `XPRT_LOCKED` holder
        // (type invariant).
        unsafe { sys::rpcrdma_rs_xprt_clear_connecting(self.raw()) };
    }

    /// The current connection cookie.
    pub(crate) fn connect_cookie(&self) -> u32 {
        // SAFETY: The connection state belongs to the `XPRT_LOCKED` holder
        // (type invariant).
        unsafe { (*self.raw()).connect_cookie }
    }

    /// The connection is gone: a new cookie, and sunrpc is told.
    pub(crate) fn disconnect_done(&self) {
        let xprt = self.raw();
        // SAFETY: The connection state belongs to the `XPRT_LOCKED` holder
        // (type invariant).
        unsafe {
            (*xprt).connect_cookie = (*xprt).connect_cookie.wrapping_add(1);
            sys::xprt_disconnect_done(xprt);
        }
    }

    /// Forgets the reconnect backoff: the last connection worked.
    pub(crate) fn reset_backoff(&self) {
        // SAFETY: The connection state belongs to the `XPRT_LOCKED` holder
        // (type invariant).
        unsafe { (*self.raw()).reestablish_timeout = 0 };
    }

    /// The delay before the next attempt; doubles the backoff from
    /// `initial` up to the transport's ceiling.
    pub(crate) fn backoff(&self, initial: c_ulong) -> c_ulong {
        // SAFETY: The connection state belongs to the `XPRT_LOCKED` holder
        // (type invariant).
        unsafe {
            let delay = sys::xprt_reconnect_delay(self.raw());
            sys::xprt_reconnect_backoff(self.raw(), initial);
            delay
        }
    }
}
