// SPDX-License-Identifier: GPL-2.0

//! One RDMA connection of a client transport: CM id, PD, CQs, QP, the
//! posted Receive buffers and the pool of Send buffers.
//!
//! A connection is built by the connect worker and torn down by `close` or
//! `destroy`, all of which run with `XPRT_LOCKED` held, so at most one
//! thread owns an [`Ep`]. Completion and CM handlers see only the parts
//! they need through shared references: [`Shared`], [`RecvCtx`] and
//! [`SendCtx`], whose mutable state is atomic or handed over by
//! completion ordering.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use kernel::error::to_result;
use kernel::prelude::*;
use kernel::types::Opaque;

use super::{RdmaXprt, INLINE_SIZE, MAX_SLOTS};
use crate::proto::pvt::{self, InlineThresholds, PrivateData};
use crate::rdma::{CmEvent, CmHandler, CmId, ConnParam, Cq, DmaBuf, DmaDir, Pd, Qp, QpAttr, Wc};
use crate::sys;

/// Receives kept posted: one per credit we ask for, plus two for
/// backward-direction Calls (which we drop).
pub(crate) const RECVS: u32 = MAX_SLOTS + 2;
/// Send buffers per connection. Sends complete in order on an RC QP, so
/// the pool is a ring; twice the slot count makes it run dry only when
/// Send completions lag a whole window behind.
pub(crate) const SENDS: u32 = MAX_SLOTS * 2;

/// Connection status values kept in [`Shared::status`].
const PENDING: i32 = 0;
const ESTABLISHED: i32 = 1;

/// What the CM and completion handlers share with the connection owner.
///
/// # Invariants
///
/// `xprt` is the transport that owns this connection; it outlives the
/// connection, which is torn down before the transport is freed.
pub(crate) struct Shared {
    xprt: *const RdmaXprt,
    done: Opaque<sys::completion>,
    /// Result of address or route resolution.
    async_rc: AtomicI32,
    /// [`PENDING`], [`ESTABLISHED`] or a negative errno.
    status: AtomicI32,
    /// The QP, once created; for reposting Receives.
    qp: AtomicPtr<sys::ib_qp>,
    lkey: AtomicU32,
    /// Set before the QP is drained: Receives are not reposted.
    draining: AtomicBool,
    /// Negotiated inline thresholds.
    inline_send: AtomicU32,
    inline_recv: AtomicU32,
}

// SAFETY: All mutable state is atomic or a C completion, which is
// thread-safe; `xprt` is only used for `&RdmaXprt`, which is `Sync`.
unsafe impl Send for Shared {}
// SAFETY: See above.
unsafe impl Sync for Shared {}

impl Shared {
    fn new(xprt: &RdmaXprt) -> Result<KBox<Self>> {
        let shared = KBox::new(
            Self {
                xprt,
                done: Opaque::uninit(),
                async_rc: AtomicI32::new(0),
                status: AtomicI32::new(PENDING),
                qp: AtomicPtr::new(core::ptr::null_mut()),
                lkey: AtomicU32::new(0),
                draining: AtomicBool::new(false),
                inline_send: AtomicU32::new(pvt::MIN_SIZE),
                inline_recv: AtomicU32::new(pvt::MIN_SIZE),
            },
            GFP_KERNEL,
        )?;
        // SAFETY: `done` is valid memory inside a box that is never moved
        // out of, so the completion's wait list stays in place.
        unsafe { sys::rpcrdma_rs_init_completion(shared.done.get()) };
        Ok(shared)
    }

    fn xprt(&self) -> &RdmaXprt {
        // SAFETY: By the type invariant `xprt` outlives us.
        unsafe { &*self.xprt }
    }

    fn rearm(&self) {
        // SAFETY: `done` was initialised in `new`.
        unsafe { sys::rpcrdma_rs_reinit_completion(self.done.get()) };
    }

    fn wake(&self) {
        // SAFETY: `done` was initialised in `new`.
        unsafe { sys::rpcrdma_rs_complete(self.done.get()) };
    }

    /// Waits for the next wake-up, at most `timeout` jiffies.
    fn wait(&self, timeout: core::ffi::c_ulong) -> Result {
        // SAFETY: `done` was initialised in `new`.
        let rc = unsafe { sys::rpcrdma_rs_wait_completion(self.done.get(), timeout) };
        match rc {
            0 => Err(ETIMEDOUT),
            rc if rc < 0 => Err(EINTR),
            _ => Ok(()),
        }
    }

    /// The negotiated inline thresholds.
    pub(crate) fn inline(&self) -> InlineThresholds {
        InlineThresholds {
            send: self.inline_send.load(Ordering::Acquire),
            recv: self.inline_recv.load(Ordering::Acquire),
        }
    }
}

/// Our RFC 8797 advertisement: what we send and can receive inline.
pub(crate) const OURS: InlineThresholds = InlineThresholds {
    send: INLINE_SIZE as u32,
    recv: INLINE_SIZE as u32,
};

impl CmHandler for Shared {
    fn event(&self, event: CmEvent) {
        rdebug!("cm event {:?}\n", event);
        match event {
            CmEvent::AddrResolved | CmEvent::RouteResolved => {
                self.async_rc.store(0, Ordering::Release);
                self.wake();
            }
            CmEvent::AddrError => {
                self.async_rc.store(EPROTO.to_errno(), Ordering::Release);
                self.wake();
            }
            CmEvent::RouteError => {
                self.async_rc
                    .store(ENETUNREACH.to_errno(), Ordering::Release);
                self.wake();
            }
            CmEvent::Established { private, len } => {
                let negotiated = pvt::negotiate(OURS, private.get(..len).unwrap_or(&[]));
                self.inline_send
                    .store(negotiated.inline.send, Ordering::Release);
                self.inline_recv
                    .store(negotiated.inline.recv, Ordering::Release);
                rdebug!(
                    "connected, inline send {} recv {}\n",
                    negotiated.inline.send,
                    negotiated.inline.recv
                );
                self.status.store(ESTABLISHED, Ordering::Release);
                self.wake();
            }
            CmEvent::ConnectError => self.fail(ENOTCONN),
            CmEvent::Unreachable => self.fail(ENETUNREACH),
            CmEvent::Rejected { stale: true } => self.fail(ENOTCONN),
            CmEvent::Rejected { stale: false } => self.fail(ECONNREFUSED),
            CmEvent::Disconnected => self.fail(ECONNABORTED),
            CmEvent::DeviceRemoval | CmEvent::AddrChange => self.fail(ENODEV),
            CmEvent::Other(_) => {}
        }
    }
}

impl Shared {
    /// Records a connection failure; a live connection is closed through
    /// sunrpc's autoclose.
    fn fail(&self, err: Error) {
        let was = self.status.swap(err.to_errno(), Ordering::AcqRel);
        if was == ESTABLISHED {
            rdebug!("connection lost ({})\n", err.to_errno());
            self.xprt().force_disconnect();
        }
        self.wake();
    }
}

/// A posted Receive buffer.
pub(crate) struct RecvCtx {
    cqe: Opaque<sys::ib_cqe>,
    buf: DmaBuf,
    shared: *const Shared,
}

impl RecvCtx {
    fn new(shared: &Shared, dev: &crate::rdma::Device) -> Result<Self> {
        Ok(Self {
            cqe: Opaque::new(sys::ib_cqe {
                done: Some(recv_done),
            }),
            buf: DmaBuf::new(dev, INLINE_SIZE, DmaDir::FromDevice)?,
            shared,
        })
    }

    /// Posts this buffer on `qp`.
    fn post(&self, qp: &Qp, lkey: u32) -> Result {
        self.buf.sync_for_device(self.buf.len());
        // SAFETY: The context lives in the connection's `rx` vector, which
        // is neither resized nor freed before the QP is drained.
        unsafe { qp.post_recv(self.cqe.get(), &self.buf, lkey) }
    }
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn recv_done(_cq: *mut sys::ib_cq, wc: *mut sys::ib_wc) {
    // SAFETY: ib_core passes a valid completion for the call.
    let wc = unsafe { Wc::from_raw(wc) };
    // SAFETY: We post Receives only with the `cqe` of a `RecvCtx`, which
    // stays valid until the QP is drained.
    let ctx =
        unsafe { &*kernel::container_of!(wc.cqe().cast::<Opaque<sys::ib_cqe>>(), RecvCtx, cqe) };
    // SAFETY: `shared` outlives every context of its connection.
    let shared = unsafe { &*ctx.shared };
    let xprt = shared.xprt();
    if !wc.ok() {
        if !wc.flushed() {
            rwarn!("receive failed, status {}\n", wc.status());
            xprt.force_disconnect();
        }
        return;
    }
    let len = wc.byte_len().min(ctx.buf.len());
    ctx.buf.sync_for_cpu(len);
    xprt.receive(
        ctx.buf.as_slice().get(..len).unwrap_or(&[]),
        shared.inline().recv,
    );
    if shared.draining.load(Ordering::Acquire) {
        return;
    }
    // SAFETY: The QP pointer is set before any Receive is posted and the QP
    // is destroyed only after draining, i.e. after this handler returns.
    let Some(qp) = (unsafe { Qp::from_ptr(shared.qp.load(Ordering::Acquire)) }) else {
        return;
    };
    if ctx.post(&qp, shared.lkey.load(Ordering::Relaxed)).is_err() {
        xprt.force_disconnect();
    }
}

/// A Send buffer of the ring.
///
/// # Invariants
///
/// `buf` is only accessed by the thread that set `busy` (the sender, which
/// holds `XPRT_LOCKED`) until the Send completes.
pub(crate) struct SendCtx {
    cqe: Opaque<sys::ib_cqe>,
    buf: UnsafeCell<DmaBuf>,
    busy: AtomicBool,
    shared: *const Shared,
}

impl SendCtx {
    fn new(shared: &Shared, dev: &crate::rdma::Device) -> Result<Self> {
        Ok(Self {
            cqe: Opaque::new(sys::ib_cqe {
                done: Some(send_done),
            }),
            buf: UnsafeCell::new(DmaBuf::new(dev, INLINE_SIZE, DmaDir::ToDevice)?),
            busy: AtomicBool::new(false),
            shared,
        })
    }
}

/// Entry point called by C.
///
/// # Safety
///
/// Only called by the C side, with the arguments its contract promises.
unsafe extern "C" fn send_done(_cq: *mut sys::ib_cq, wc: *mut sys::ib_wc) {
    // SAFETY: ib_core passes a valid completion for the call.
    let wc = unsafe { Wc::from_raw(wc) };
    // SAFETY: We post Sends only with the `cqe` of a `SendCtx`, which stays
    // valid until the QP is drained.
    let ctx =
        unsafe { &*kernel::container_of!(wc.cqe().cast::<Opaque<sys::ib_cqe>>(), SendCtx, cqe) };
    ctx.busy.store(false, Ordering::Release);
    if !wc.ok() && !wc.flushed() {
        rwarn!("send failed, status {}\n", wc.status());
        // SAFETY: `shared` outlives every context of its connection.
        unsafe { &*ctx.shared }.xprt().force_disconnect();
    }
}

/// A connection, owned by whoever holds `XPRT_LOCKED`.
///
/// Fields drop in declaration order after [`Ep::drop`] has drained and
/// destroyed the QP: first the CQs (freeing a CQ waits for its polling
/// work, so no completion handler runs afterwards, not even for a Receive
/// reposted while the QP was draining), then the buffers, the PD, the CM
/// id (which waits for its event handler), and last what the handlers
/// share.
pub(crate) struct Ep {
    send_cq: Option<Cq>,
    recv_cq: Option<Cq>,
    rx: KVec<RecvCtx>,
    tx: KVec<SendCtx>,
    tx_next: AtomicUsize,
    pd: Option<Pd>,
    id: Option<CmId<Shared>>,
    shared: KBox<Shared>,
}

/// Result of trying to marshal and Send one RPC Call.
pub(crate) enum SendError {
    /// No Send buffer free.
    NoBuffer,
    /// The message does not fit the inline threshold.
    TooBig,
    /// Posting failed: the connection is unusable.
    Post,
}

impl Ep {
    /// Connects `xprt` to its server address. Blocks; runs in the connect
    /// worker.
    pub(crate) fn connect(xprt: &RdmaXprt) -> Result<KBox<Ep>> {
        let shared = Shared::new(xprt)?;
        let mut ep = KBox::new(
            Ep {
                send_cq: None,
                recv_cq: None,
                rx: KVec::new(),
                tx: KVec::new(),
                tx_next: AtomicUsize::new(0),
                pd: None,
                id: None,
                shared,
            },
            GFP_KERNEL,
        )?;
        let ep_ref: &mut Ep = &mut ep;
        let shared: *const Shared = &*ep_ref.shared;
        // SAFETY: The net is the transport's, which outlives it; `shared`
        // is boxed and dropped after the id (field order of `Ep`).
        let id = unsafe { CmId::new(xprt.net(), shared)? };
        let id = ep_ref.id.insert(id);
        let timeout = xprt.resolve_timeout();

        ep_ref.shared.rearm();
        // SAFETY: The transport's address is a valid sockaddr.
        unsafe { id.resolve_addr(xprt.dst_addr())? };
        ep_ref.shared.wait(timeout)?;
        to_result(ep_ref.shared.async_rc.load(Ordering::Acquire))?;

        ep_ref.shared.rearm();
        id.resolve_route()?;
        ep_ref.shared.wait(timeout)?;
        to_result(ep_ref.shared.async_rc.load(Ordering::Acquire))?;

        let dev = id.device()?;
        let max_wr = dev.max_qp_wr().min(dev.max_cqe());
        // One extra each for ib_drain_qp.
        let send_wr = SENDS.min(max_wr.saturating_sub(1)) + 1;
        let recv_wr = RECVS.min(max_wr.saturating_sub(1)) + 1;
        let pd = Pd::new(&dev)?;
        let send_cq = Cq::new(&dev, send_wr)?;
        let recv_cq = Cq::new(&dev, recv_wr)?;
        let mut attr = QpAttr::rc(&send_cq, &recv_cq, send_wr, recv_wr);
        let lkey = pd.local_dma_lkey();
        id.create_qp(&pd, &mut attr)?;
        let qp = id.qp().ok_or(ENOTCONN)?;
        ep_ref.pd = Some(pd);
        ep_ref.send_cq = Some(send_cq);
        ep_ref.recv_cq = Some(recv_cq);

        // Buffers: the vectors are sized once and never grow afterwards, so
        // the contexts' addresses are stable while work requests use them.
        let nrecv = (recv_wr - 1) as usize;
        let nsend = (send_wr - 1) as usize;
        let mut rx = KVec::with_capacity(nrecv, GFP_KERNEL)?;
        for _ in 0..nrecv {
            rx.push(RecvCtx::new(&ep_ref.shared, &dev)?, GFP_KERNEL)?;
        }
        let mut tx = KVec::with_capacity(nsend, GFP_KERNEL)?;
        for _ in 0..nsend {
            tx.push(SendCtx::new(&ep_ref.shared, &dev)?, GFP_KERNEL)?;
        }
        ep_ref.rx = rx;
        ep_ref.tx = tx;
        ep_ref.shared.lkey.store(lkey, Ordering::Relaxed);
        ep_ref.shared.qp.store(qp.as_ptr(), Ordering::Release);
        for ctx in ep_ref.rx.iter() {
            ctx.post(&qp, lkey)?;
        }

        let private = PrivateData {
            remote_invalidate: false,
            send_size: OURS.send,
            recv_size: OURS.recv,
        }
        .encode();
        let responder_resources = u8::try_from(dev.max_qp_rd_atom()).unwrap_or(u8::MAX);
        // Like rpcrdma.ko: offer RDMA Read but never initiate, few
        // retries so a dead peer is noticed, and no RNR retries because
        // credits make RNR impossible.
        let mut param = ConnParam::new(&private, responder_resources, 0, 6, 0);
        ep_ref.shared.rearm();
        let Some(id) = ep.id.as_ref() else {
            return Err(ENOTCONN);
        };
        id.connect(&mut param)?;
        ep.shared.wait(xprt.connect_timeout())?;
        let status = ep.shared.status.load(Ordering::Acquire);
        if status != ESTABLISHED {
            to_result(status)?;
            return Err(ENOTCONN);
        }
        Ok(ep)
    }

    /// The negotiated inline thresholds.
    pub(crate) fn inline(&self) -> InlineThresholds {
        self.shared.inline()
    }

    /// Fills the next free Send buffer with `fill` and posts it.
    /// `fill` returns the number of bytes to send, or `None` if the message
    /// does not fit.
    pub(crate) fn send(
        &self,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<(), SendError> {
        let n = self.tx.len();
        if n == 0 {
            return Err(SendError::Post);
        }
        let idx = self.tx_next.load(Ordering::Relaxed) % n;
        let ctx = self.tx.get(idx).ok_or(SendError::Post)?;
        if ctx.busy.swap(true, Ordering::Acquire) {
            return Err(SendError::NoBuffer);
        }
        // SAFETY: `busy` was clear and we set it: by the type invariant of
        // `SendCtx` we have exclusive use of the buffer until its Send
        // completes.
        let buf = unsafe { &mut *ctx.buf.get() };
        let Some(len) = fill(buf.as_mut_slice()) else {
            ctx.busy.store(false, Ordering::Release);
            return Err(SendError::TooBig);
        };
        buf.sync_for_device(len);
        let qp = self
            .id
            .as_ref()
            .and_then(|id| id.qp())
            .ok_or(SendError::Post)?;
        let len = u32::try_from(len).map_err(|_| SendError::TooBig)?;
        // SAFETY: The context and its buffer live until the QP is drained;
        // the buffer is not touched again until `busy` is cleared by the
        // Send completion.
        let posted = unsafe {
            qp.post_send(
                ctx.cqe.get(),
                buf,
                len,
                self.shared.lkey.load(Ordering::Relaxed),
            )
        };
        if posted.is_err() {
            ctx.busy.store(false, Ordering::Release);
            return Err(SendError::Post);
        }
        self.tx_next.store(idx + 1, Ordering::Relaxed);
        Ok(())
    }
}

impl Drop for Ep {
    fn drop(&mut self) {
        self.shared.draining.store(true, Ordering::Release);
        // Our own disconnect must not schedule another close.
        self.shared
            .status
            .store(ECONNABORTED.to_errno(), Ordering::Release);
        if let Some(id) = self.id.as_mut() {
            id.disconnect();
            // Flush every posted Receive and Send: afterwards no buffer is
            // in use by the device and no handler runs.
            id.drain_qp();
            id.destroy_qp();
        }
        // Explicit order, whatever the field order: freeing a CQ waits for
        // its polling work, so no completion handler runs afterwards; then
        // the buffers go, the PD, and the CM id (which waits for its event
        // handler); `shared` is dropped with the fields, last.
        drop(self.send_cq.take());
        drop(self.recv_cq.take());
        drop(core::mem::take(&mut self.rx));
        drop(core::mem::take(&mut self.tx));
        drop(self.pd.take());
        drop(self.id.take());
        rdebug!("connection torn down\n");
    }
}
