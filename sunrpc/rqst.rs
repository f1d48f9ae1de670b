// SPDX-License-Identifier: GPL-2.0

//! `struct rpc_rqst` and its `xdr_buf`s: a request being sent
//! ([`SendRqst`]), a request found by its XID and pinned for its Reply
//! ([`PinnedRqst`]), and the buffers both describe ([`XdrBuf`]).

use core::ffi::{c_int, c_uint, c_void};
use core::ptr::NonNull;

use kernel::prelude::*;
use kernel::types::Opaque;

use super::Xprt;
use crate::rdma::PageSeg;
use crate::sys;

const PAGE: usize = kernel::page::PAGE_SIZE;

/// An `xdr_buf` of a request, borrowed.
///
/// # Invariants
///
/// A `&XdrBuf` points to a live `xdr_buf` of a request whose head and
/// tail lie in kmalloc memory (the request's `rq_buffer`, which
/// `buf_alloc` allocates, or for a backchannel request the pages of its
/// [`super::BcPool`] slot), and whose page array covers `page_base +
/// page_len` bytes. Its owner does not change it while borrowed, but for
/// the Reply placement, which owns the receive buffers of a pinned
/// request.
#[repr(transparent)]
pub(crate) struct XdrBuf(Opaque<sys::xdr_buf>);

impl XdrBuf {
    /// # Safety
    ///
    /// `buf` satisfies the type invariant for `'a`.
    pub(super) unsafe fn from_raw<'a>(buf: *const sys::xdr_buf) -> &'a Self {
        // SAFETY: Transparent wrapper; the caller's promise.
        unsafe { &*buf.cast::<Self>() }
    }

    fn raw(&self) -> &sys::xdr_buf {
        // SAFETY: Live by the type invariant; read while nobody changes it.
        unsafe { &*self.0.get() }
    }

    /// Bytes of the message.
    pub(crate) fn len(&self) -> u32 {
        self.raw().len
    }

    /// Room for a message: head, pages and tail.
    pub(crate) fn buflen(&self) -> u32 {
        self.raw().buflen
    }

    pub(crate) fn head_len(&self) -> u32 {
        self.raw().head[0].iov_len as u32
    }

    pub(crate) fn page_base(&self) -> u32 {
        self.raw().page_base
    }

    pub(crate) fn page_len(&self) -> u32 {
        self.raw().page_len
    }

    pub(crate) fn tail_len(&self) -> u32 {
        self.raw().tail[0].iov_len as u32
    }

    /// `XDRBUF_*` flags.
    pub(crate) fn flags(&self) -> u32 {
        self.raw().flags
    }

    /// Head, pages and tail: what a Reply may fill.
    pub(crate) fn room(&self) -> u64 {
        let b = self.raw();
        (b.head[0].iov_len + b.page_len as usize + b.tail[0].iov_len) as u64
    }

    /// Copies `dst.len()` bytes from `offset` of the message.
    pub(crate) fn read(&self, offset: u32, dst: &mut [u8]) -> Result {
        let len = c_uint::try_from(dst.len()).map_err(|_| EINVAL)?;
        // SAFETY: Live by the type invariant; `dst` is writable for `len`
        // bytes; the helper fails rather than read past the buffer.
        let rc = unsafe {
            sys::rpcrdma_rs_read_xdr_buf(self.0.get(), offset, dst.as_mut_ptr().cast(), len)
        };
        kernel::error::to_result(rc)
    }

    /// Fills `out` with the page pieces holding `len` bytes at `offset`:
    /// head, page list, tail; one piece per page touched.
    pub(crate) fn page_segs(&self, out: &mut KVec<PageSeg>, offset: u32, len: u32) -> Result {
        out.clear();
        let b = self.raw();
        let mut offset = offset as usize;
        let mut left = len as usize;
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
                    // SAFETY: `pages` covers `page_base + page_len` bytes
                    // (type invariant), so every index asked for is in it.
                    unsafe { *b.pages.add(k) }
                })?;
            } else {
                // Head and tail are directly mapped: page `k` of the run is
                // the one holding byte `k * PAGE` counted from `base`'s page.
                let start = base as usize + offset;
                let first = start & !(PAGE - 1);
                push_pages(out, start - first, n, |k| {
                    // SAFETY: Every address asked for is within the head or
                    // tail, kmalloc memory (type invariant).
                    unsafe { sys::rpcrdma_rs_virt_to_page((first + k * PAGE) as *const c_void) }
                })?;
            }
            left -= n;
            offset = 0;
        }
        Ok(())
    }
}

/// Appends `len` bytes starting `pos` bytes into a run of pages, one
/// piece per page touched; `page(k)` is the run's `k`th page.
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

/// A request handed to `send_request`.
///
/// # Invariants
///
/// The request is live, its buffers set up, and the caller holds
/// `XPRT_LOCKED`: nobody else changes the request while it is borrowed.
pub(crate) struct SendRqst<'a> {
    rqst: &'a Opaque<sys::rpc_rqst>,
}

impl<'a> SendRqst<'a> {
    /// # Safety
    ///
    /// `rqst` is a request in `send_request` (live, buffers allocated by
    /// our `buf_alloc` or, for a backchannel Reply, by its
    /// [`super::BcPool`], `XPRT_LOCKED` held) for `'a`.
    pub(crate) unsafe fn from_raw(rqst: *mut sys::rpc_rqst) -> Self {
        Self {
            // SAFETY: The caller's promise.
            rqst: unsafe { &*rqst.cast::<Opaque<sys::rpc_rqst>>() },
        }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::rpc_rqst {
        self.rqst.get()
    }

    fn raw(&self) -> &sys::rpc_rqst {
        // SAFETY: Live and not changed by others (type invariant).
        unsafe { &*self.rqst.get() }
    }

    /// The transport.
    pub(crate) fn xprt(&self) -> &'a Xprt {
        // SAFETY: A live request's transport outlives it.
        unsafe { Xprt::from_raw((*self.rqst.get()).rq_xprt) }
    }

    /// The XID as on the wire.
    pub(crate) fn xid(&self) -> u32 {
        self.raw().rq_xid
    }

    /// The request's task and XID, for the trace events.
    pub(crate) fn trace_task(&self) -> super::trace::Task {
        // SAFETY: Live (type invariant).
        unsafe { trace_task(self.rqst.get()) }
    }

    /// The connection cookie of the last transmission.
    pub(crate) fn connect_cookie(&self) -> u32 {
        self.raw().rq_connect_cookie
    }

    /// The Call.
    pub(crate) fn snd_buf(&self) -> &'a XdrBuf {
        // SAFETY: The request's send buffer (type invariant).
        unsafe { XdrBuf::from_raw(&raw const (*self.rqst.get()).rq_snd_buf) }
    }

    /// Where the Reply goes.
    pub(crate) fn rcv_buf(&self) -> &'a XdrBuf {
        // SAFETY: The request's receive buffer (type invariant).
        unsafe { XdrBuf::from_raw(&raw const (*self.rqst.get()).rq_rcv_buf) }
    }

    /// Whether the credential allows the data to be placed directly (not
    /// an auth flavour that touches the data, such as krb5i).
    pub(crate) fn ddp_allowed(&self) -> bool {
        let cred = self.raw().rq_cred;
        // SAFETY: `rq_cred` and its auth are live for a request being
        // sent; checked for null first.
        let datatouch = unsafe {
            !cred.is_null()
                && !(*cred).cr_auth.is_null()
                && (*(*cred).cr_auth).au_flags & (1 << sys::RPCAUTH_AUTH_DATATOUCH) != 0
        };
        !datatouch
    }

    /// Fills the holes of a sparse receive page array.
    pub(crate) fn prepare_rcv_pages(&self) -> Result {
        if self.rcv_buf().flags() & sys::XDRBUF_SPARSE_PAGES == 0 {
            return Ok(());
        }
        // SAFETY: The receive buffer is ours to prepare (type invariant).
        let rc =
            unsafe { sys::rpcrdma_rs_alloc_sparse_pages(&raw mut (*self.rqst.get()).rq_rcv_buf) };
        if rc != 0 {
            return Err(ENOBUFS);
        }
        Ok(())
    }

    /// Takes a congestion slot; false when the window is full.
    pub(crate) fn get_cong(&self) -> bool {
        // SAFETY: Live transport and request.
        unsafe { sys::xprt_request_get_cong(self.xprt().as_ptr(), self.as_ptr()) }
    }

    /// The round trip starts now.
    pub(crate) fn stamp_xmit(&self) {
        // SAFETY: Ours while sending (type invariant).
        unsafe { (*self.rqst.get()).rq_xtime = sys::ktime_get() };
    }

    /// Accounts `bytes` sent.
    pub(crate) fn add_bytes_sent(&self, bytes: usize) {
        // SAFETY: The request is ours while it is being sent (type
        // invariant).
        unsafe { (*self.rqst.get()).rq_xmit_bytes_sent += bytes };
    }

    /// Whether the Call expects a Reply.
    pub(crate) fn reply_expected(&self) -> bool {
        // SAFETY: A request being sent has a live task.
        unsafe { sys::rpcrdma_rs_reply_expected(self.raw().rq_task) }
    }
}

/// A request found by its XID and pinned for its Reply: it stays
/// allocated, with its buffers, until [`PinnedRqst::complete`]; dropping
/// it unpins it without completing it (sunrpc then retransmits or
/// releases the RPC).
///
/// # Invariants
///
/// `rqst` is pinned (`xprt_pin_rqst`), once, on behalf of this value; the
/// receive buffers are ours to fill until it is completed or unpinned.
pub(crate) struct PinnedRqst {
    rqst: NonNull<sys::rpc_rqst>,
}

// SAFETY: A pinned request may be completed or unpinned from any thread.
unsafe impl Send for PinnedRqst {}

impl Xprt {
    /// Finds the request waiting for the Reply `xid` (as on the wire) and
    /// pins it.
    pub(crate) fn lookup_pinned(&self, xid: u32) -> Option<PinnedRqst> {
        let queue = self.lock_queue();
        // SAFETY: `xprt_lookup_rqst` requires `queue_lock`, which we hold;
        // pinning keeps the request after we drop it.
        let rqst = unsafe {
            let rqst = sys::xprt_lookup_rqst(queue.xprt.as_ptr(), xid);
            if !rqst.is_null() {
                sys::xprt_pin_rqst(rqst);
            }
            rqst
        };
        drop(queue);
        // INVARIANT: pinned just now, for the returned value.
        NonNull::new(rqst).map(|rqst| PinnedRqst { rqst })
    }

    /// Takes `queue_lock`.
    fn lock_queue(&self) -> QueueLock<'_> {
        // SAFETY: Live by the type invariant; released by the guard.
        unsafe { sys::rpcrdma_rs_spin_lock(&raw mut (*self.as_ptr()).queue_lock) };
        // INVARIANT: the lock is held.
        QueueLock {
            xprt: self,
            _not_send: core::marker::PhantomData,
        }
    }
}

/// `xprt->queue_lock`, which guards the requests waiting for Replies,
/// held until dropped.
///
/// # Invariants
///
/// The lock of `xprt` is held by this thread while the guard exists.
struct QueueLock<'a> {
    xprt: &'a Xprt,
    /// Spinlocks are released where they were taken.
    _not_send: core::marker::PhantomData<*mut ()>,
}

impl Drop for QueueLock<'_> {
    fn drop(&mut self) {
        // SAFETY: Held by the type invariant.
        unsafe { sys::rpcrdma_rs_spin_unlock(&raw mut (*self.xprt.as_ptr()).queue_lock) };
    }
}

impl PinnedRqst {
    pub(crate) fn as_ptr(&self) -> NonNull<sys::rpc_rqst> {
        self.rqst
    }

    fn xprt(&self) -> *mut sys::rpc_xprt {
        // SAFETY: Pinned, so live; a request's transport outlives it.
        unsafe { (*self.rqst.as_ptr()).rq_xprt }
    }

    /// The request's task and XID, for the trace events.
    pub(crate) fn trace_task(&self) -> super::trace::Task {
        // SAFETY: Pinned, so live.
        unsafe { trace_task(self.rqst.as_ptr()) }
    }

    /// The buffer the Reply is copied into.
    pub(crate) fn private_buf(&self) -> &XdrBuf {
        // SAFETY: Pinned; its receive buffers are ours (type invariant).
        unsafe { XdrBuf::from_raw(&raw const (*self.rqst.as_ptr()).rq_private_buf) }
    }

    /// Copies `src` to `offset` of the private receive buffer.
    pub(crate) fn write(&mut self, offset: u32, src: &[u8]) -> Result {
        let len = c_uint::try_from(src.len()).map_err(|_| EINVAL)?;
        // SAFETY: Pinned; the receive buffers are ours (type invariant);
        // the helper only reads `len` bytes of `src` and fails rather than
        // write past the buffer.
        let rc = unsafe {
            sys::rpcrdma_rs_write_xdr_buf(
                &raw const (*self.rqst.as_ptr()).rq_private_buf,
                offset,
                src.as_ptr().cast_mut().cast(),
                len,
            )
        };
        kernel::error::to_result(rc)
    }

    /// Shortens the head of both receive buffers to `head` bytes (the
    /// Write chunk's data went to the pages directly).
    pub(crate) fn trim_head(&mut self, head: u32) {
        let r = self.rqst.as_ptr();
        // SAFETY: Pinned; the receive buffers are ours (type invariant).
        unsafe {
            for b in [&raw mut (*r).rq_private_buf, &raw mut (*r).rq_rcv_buf] {
                let delta = ((*b).head[0].iov_len as u32).saturating_sub(head);
                (*b).head[0].iov_len = head as usize;
                (*b).buflen = (*b).buflen.saturating_sub(delta);
            }
        }
    }

    /// Completes the RPC with the bytes of its Reply, or fails it with an
    /// errno, and unpins it. A failure goes to the task's status and the
    /// Reply counts as empty, as `rpcrdma_complete_rqst` does: a negative
    /// byte count would be taken for a garbled Reply and the Call sent
    /// again.
    pub(crate) fn complete(self, result: Result<u32>) {
        let this = core::mem::ManuallyDrop::new(self);
        let xprt = this.xprt();
        let copied = match result {
            Ok(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
            Err(_) => 0,
        };
        // SAFETY: Pinned, so the request and its transport are live.
        let queue = unsafe { Xprt::from_raw(xprt) }.lock_queue();
        // SAFETY: Pinned (type invariant); completing and unpinning need
        // `queue_lock`, which we hold; the pin is given up here, once. A
        // pinned request has a live task.
        unsafe {
            let task = (*this.rqst.as_ptr()).rq_task;
            if let Err(err) = result {
                (*task).tk_status = err.to_errno();
            }
            sys::xprt_complete_rqst(task, copied);
            sys::xprt_unpin_rqst(this.rqst.as_ptr());
        }
        drop(queue);
    }
}

impl PinnedRqst {
    /// Completes the RPC so that sunrpc sends it again, with the same XID,
    /// on this same connection: for the version 2 probe a server refused
    /// with ERR_VERS, which never ran it.
    ///
    /// sunrpc encodes a sent NFSv4 Call again only after a disconnect
    /// (`xprt_request_need_retransmit` compares connect cookies), so the
    /// request's cookie is made stale; EAGAIN (or, once the sender reset
    /// it, the empty Reply) takes the task back to `call_encode`. The
    /// sender records the cookie after `send_request` returns, then
    /// clears `RPC_TASK_NEED_XMIT` under `queue_lock`: a Reply that
    /// overtook it waits for that (briefly), so that the stale cookie is
    /// not overwritten, which would cost a reconnect.
    pub(crate) fn complete_resend(self) {
        const TRIES: u32 = 100;
        let this = core::mem::ManuallyDrop::new(self);
        let xprt = this.xprt();
        let rqst = this.rqst.as_ptr();
        for tried in 1..=TRIES {
            // SAFETY: Pinned, so the request and its transport are live.
            let queue = unsafe { Xprt::from_raw(xprt) }.lock_queue();
            // SAFETY: Pinned (type invariant): the request and its task
            // are live. `tk_runstate` is only changed by atomic bit
            // operations; a racy read of it is what `test_bit` does.
            let sending = unsafe {
                let task = (*rqst).rq_task;
                let state = core::ptr::read_volatile(&raw const (*task).tk_runstate);
                state & (1 << sys::RPC_TASK_NEED_XMIT) != 0
            };
            if !sending || tried == TRIES {
                // SAFETY: Pinned (type invariant); the cookie is the
                // sender's, which is done with it (above); completing and
                // unpinning need `queue_lock`, which we hold; the pin is
                // given up here, once.
                unsafe {
                    let cookie = core::ptr::read_volatile(&raw const (*xprt).connect_cookie);
                    (*rqst).rq_connect_cookie = cookie.wrapping_sub(1);
                    let task = (*rqst).rq_task;
                    (*task).tk_status = EAGAIN.to_errno();
                    sys::xprt_complete_rqst(task, 0);
                    sys::xprt_unpin_rqst(rqst);
                }
                drop(queue);
                return;
            }
            drop(queue);
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
        }
    }
}

impl Drop for PinnedRqst {
    fn drop(&mut self) {
        // SAFETY: Pinned, so the request and its transport are live.
        let _queue = unsafe { Xprt::from_raw(self.xprt()) }.lock_queue();
        // SAFETY: Pinned (type invariant); unpinning needs `queue_lock`,
        // which we hold.
        unsafe { sys::xprt_unpin_rqst(self.rqst.as_ptr()) };
    }
}

/// What the trace events report of `rqst`'s task: its `tk_pid`, its
/// client's `cl_clid` (`u32::MAX` without one, as rpcrdma.ko's -1), the XID
/// in host order.
///
/// # Safety
///
/// `rqst` is live.
unsafe fn trace_task(rqst: *const sys::rpc_rqst) -> super::trace::Task {
    // SAFETY: The caller's promise; a request being sent or awaiting its
    // Reply has its task, and the task its client if it has one.
    unsafe {
        let task = (*rqst).rq_task;
        let (task_id, client_id) = if task.is_null() {
            (0, u32::MAX)
        } else {
            let clnt = (*task).tk_client;
            let client_id = if clnt.is_null() {
                u32::MAX
            } else {
                (*clnt).cl_clid
            };
            (u32::from((*task).tk_pid), client_id)
        };
        super::trace::Task {
            task_id,
            client_id,
            xid: u32::from_be((*rqst).rq_xid),
        }
    }
}
