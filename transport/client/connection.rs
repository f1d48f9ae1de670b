// SPDX-License-Identifier: GPL-2.0

//! One RDMA connection of a client transport: CM id, PD, CQs, QP, the
//! Receive buffers (a [`RecvRing`] owned by a [`Receiver`]) and the Send
//! buffers (a [`SendRing`] owned by a [`Sender`]), and the transport's
//! hold on its current connection (install, tear down, close). What the
//! buffers' completions do is `receive`'s and `send`'s.
//!
//! A connection is built by the connect worker and torn down by `close` or
//! `destroy`, all of which run with `XPRT_LOCKED` held, so at most one
//! thread owns an [`Ep`]. Completion and CM handlers see only the parts
//! they need through shared references: [`Shared`], the rings and their
//! owners, whose mutable state is atomic, or handed over by completion
//! ordering in an [`ExclusiveCell`] that checks the hand-over. Posted work
//! is owned by the rings and the MR pool, which drain the QP before they
//! free anything.

use kernel::error::to_result;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed, Release};
use kernel::sync::{new_condvar, new_spinlock, Arc, CondVar, CondVarTimeoutResult, SpinLock};

use super::marshal::CallScratch;
use super::placement::Verdict;
use super::state::{RdmaXprt, XprtState};
use super::Config;
use crate::params;
use crate::proto::backchannel;
use crate::proto::plan::{self, DeviceLimits};
use crate::proto::pvt::{self, InlineThresholds, PrivateData};
use crate::proto::queue::{self, SendSignals};
use crate::rdma::{
    AtomicPair, CmEvent, CmHandler, CmId, ConnParam, Cq, ExclusiveCell, FrwrList, FrwrOwner,
    FrwrPool, InvList, ParkedRecv, Pd, PostedList, PostedMrs, QpCaps, RecvRing, Registered,
    RemoteInv, SendRing, Wc, MAX_MAPPED_PAGES,
};
use crate::sunrpc::{trace, PageList, PinnedRqst, SockAddr, XprtLocked, XprtRef};
use crate::sys;

/// Receive buffers: one per credit we ask for, one per backchannel slot
/// (RFC 8167 §2.2.1: a backward Call must always find one), a quarter
/// more because a buffer is reposted only after its Reply's RPC
/// completed, and a new Call may go out (and its Reply come back) in
/// between, and one batch that waits to be reposted.
pub(super) fn recvs(cfg: &Config) -> u32 {
    backchannel::client_receive_buffers(cfg.slots + cfg.slots / 4, backchannel::CLIENT_SLOTS)
        + queue::recv_batch(cfg.slots)
}

/// Send buffers per connection. Sends complete in order on an RC QP, so
/// the pool is a ring; twice the slot count makes it run dry only when
/// Send completions lag a whole window behind. [`BC_SENDS`] more are kept
/// for backchannel Replies: forward Calls never take the last ones.
pub(super) fn sends(cfg: &Config) -> u32 {
    cfg.slots * 2 + BC_SENDS
}

/// Send buffers only backchannel Replies may take: one per slot.
pub(super) const BC_SENDS: u32 = backchannel::CLIENT_SLOTS;

/// Unique number of each connection, so that a request can tell whether
/// the MRs it remembers belong to the current one.
static GENERATION: Atomic<u64> = Atomic::new(1);

/// Connection status values kept in [`Shared::status`].
const PENDING: i32 = 0;

const ESTABLISHED: i32 = 1;

/// What the CM and completion handlers share with the connection owner.
#[pin_data]
pub(crate) struct Shared {
    /// The transport that owns this connection.
    xprt: XprtRef<XprtState>,
    /// CM events seen, for the connect worker to wait on.
    #[pin]
    events: SpinLock<u64>,
    #[pin]
    event_cv: CondVar,
    /// Result of address or route resolution.
    async_rc: Atomic<i32>,
    /// [`PENDING`], [`ESTABLISHED`] or a negative errno.
    status: Atomic<i32>,
    /// Established, and the CM has not reported its end yet (written only
    /// by the CM handler): whether the id must linger ([`CmId::linger`]).
    cm_up: Atomic<bool>,
    /// Negotiated inline thresholds, version 1's then version 2's, which
    /// apply once the connection settles on version 2: each (send,
    /// receive), read together for every Call.
    inline: AtomicPair,
    inline_v2: AtomicPair,
    /// This connection's number (see [`GENERATION`]).
    pub(crate) gen: u64,
    /// Number of the last Send known complete (successfully or flushed):
    /// Sends complete in order, and most are unsignalled, so this moves
    /// in steps, at each signalled or failed Send.
    pub(super) sends_done: Atomic<u64>,
    /// Replies waiting for their Call's Send to complete.
    pub(super) waiters: Atomic<u32>,
    /// What we advertise in the private data.
    ours: InlineThresholds,
}

/// The connection's FRWR MRs; their failures close the connection.
pub(crate) type MrPool = FrwrPool<Shared>;

impl FrwrOwner for Shared {
    fn mr_failed(&self, wc: &Wc<'_>) {
        self.wr_failed("memory registration", wc);
    }
}

impl Shared {
    fn new(xprt: &RdmaXprt, cfg: &Config) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                xprt: xprt.new_ref(),
                events <- new_spinlock!(0, "rpcrdma_rs_cm_events"),
                event_cv <- new_condvar!("rpcrdma_rs_cm_event"),
                async_rc: Atomic::new(0),
                status: Atomic::new(PENDING),
                cm_up: Atomic::new(false),
                inline: AtomicPair::new(pvt::MIN_SIZE, pvt::MIN_SIZE),
                inline_v2: AtomicPair::new(pvt::MIN_SIZE, pvt::MIN_SIZE),
                gen: GENERATION.fetch_add(1, Relaxed),
                sends_done: Atomic::new(0),
                waiters: Atomic::new(0),
                ours: InlineThresholds {
                    send: cfg.inline_write,
                    recv: cfg.inline_read,
                },
            }),
            GFP_KERNEL,
        )
    }

    pub(crate) fn xprt(&self) -> &RdmaXprt {
        &self.xprt
    }

    /// The number of CM events so far: [`Shared::wait`] for the next.
    fn events_seen(&self) -> u64 {
        *self.events.lock()
    }

    /// A CM event the connect worker may be waiting for.
    fn wake(&self) {
        *self.events.lock() += 1;
        self.event_cv.notify_all();
    }

    /// Waits, at most `timeout` jiffies, for a CM event after the first
    /// `seen`.
    fn wait(&self, seen: u64, timeout: core::ffi::c_ulong) -> Result {
        let mut left =
            kernel::time::Jiffies::try_from(timeout).unwrap_or(kernel::time::Jiffies::MAX);
        let mut events = self.events.lock();
        while *events == seen {
            match self.event_cv.wait_interruptible_timeout(&mut events, left) {
                CondVarTimeoutResult::Timeout => return Err(ETIMEDOUT),
                CondVarTimeoutResult::Signal { .. } => return Err(EINTR),
                CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
            }
        }
        Ok(())
    }

    /// The negotiated version 1 inline thresholds.
    pub(crate) fn inline(&self) -> InlineThresholds {
        let (send, recv) = self.inline.load(Acquire);
        InlineThresholds { send, recv }
    }

    /// The negotiated inline thresholds of version 2.
    pub(crate) fn inline_v2(&self) -> InlineThresholds {
        let (send, recv) = self.inline_v2.load(Acquire);
        InlineThresholds { send, recv }
    }
}

impl CmHandler for Shared {
    fn device_removal(&self, dev: &CStr, peer: &SockAddr) {
        trace::xprtrdma_device_removal(dev, peer);
    }

    fn qp_event(event: u32, dev: &CStr, _peer: &SockAddr) {
        // rpcrdma.ko only traces these. A fatal one also moves the QP to
        // the error state, whose flushes end the connection
        // (`Shared::wr_failed`); said here so that the cause shows.
        if !matches!(
            event,
            sys::ib_event_type_IB_EVENT_COMM_EST
                | sys::ib_event_type_IB_EVENT_SQ_DRAINED
                | sys::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED
        ) {
            rinfo!("QP event {} on {}\n", event, dev);
        }
    }

    fn event(&self, event: CmEvent) {
        rdebug!("cm event {:?}\n", event);
        match event {
            CmEvent::AddrResolved | CmEvent::RouteResolved => {
                self.async_rc.store(0, Release);
                self.wake();
            }
            CmEvent::AddrError => {
                self.async_rc.store(EPROTO.to_errno(), Release);
                self.wake();
            }
            CmEvent::RouteError => {
                self.async_rc.store(ENETUNREACH.to_errno(), Release);
                self.wake();
            }
            CmEvent::Established { private, len } => {
                let negotiated = pvt::negotiate(self.ours, private.get(..len).unwrap_or(&[]));
                let (v1, v2) = (negotiated.inline, negotiated.inline_v2);
                self.inline.store(v1.send, v1.recv, Release);
                self.inline_v2.store(v2.send, v2.recv, Release);
                self.xprt().bc.connected(negotiated.inline);
                rdebug!(
                    "connected, inline send {} recv {} (version 2: {} {})\n",
                    negotiated.inline.send,
                    negotiated.inline.recv,
                    negotiated.inline_v2.send,
                    negotiated.inline_v2.recv
                );
                self.cm_up.store(true, Release);
                self.status.store(ESTABLISHED, Release);
                self.wake();
            }
            CmEvent::ConnectError => self.fail(ENOTCONN),
            CmEvent::Unreachable => self.fail(ENETUNREACH),
            CmEvent::Rejected { stale: true } => self.fail(ENOTCONN),
            CmEvent::Rejected { stale: false } => self.fail(ECONNREFUSED),
            CmEvent::Disconnected => {
                self.cm_up.store(false, Release);
                self.fail(ECONNABORTED)
            }
            CmEvent::DeviceRemoval => {
                self.cm_up.store(false, Release);
                self.fail(ENODEV)
            }
            CmEvent::AddrChange => self.fail(ENODEV),
            CmEvent::Other(_) => {}
        }
    }
}

impl Shared {
    /// A work request of the connection (`what`) failed or was flushed:
    /// its QP is in the error state and carries nothing more, whether or
    /// not an error completion said why. Often none does (rxe: a Send it
    /// cannot hand to the network moves the QP to the error state and is
    /// flushed with the rest; an RDMA Write of the server that breaks an
    /// rkey rule completes no Receive), and then flushes are all we see:
    /// ignoring them kept the connection up, its Calls posted into a dead
    /// QP, until their RPCs timed out 60 s later (the soak's stalls, about
    /// half a second into a server link outage). As rpcrdma.ko
    /// (`rpcrdma_flush_disconnect`): once per connection, and only while
    /// it is up, since our own teardown marks it down before it drains
    /// the QP.
    pub(super) fn wr_failed(&self, what: &str, wc: &Wc<'_>) {
        let flushed = wc.flushed();
        if !flushed {
            rwarn!("{} failed, status {}\n", what, wc.status());
        }
        let was_up = self
            .status
            .cmpxchg(ESTABLISHED, ECONNABORTED.to_errno(), Full)
            .is_ok();
        if was_up && flushed {
            rinfo!(
                "connection to {} lost: its QP is in the error state, no error completion said why\n",
                self.xprt().peer()
            );
        }
        if was_up || !flushed {
            self.xprt().force_disconnect();
        }
    }

    /// Records a connection failure; a live connection is closed through
    /// sunrpc's autoclose.
    fn fail(&self, err: Error) {
        let was = self.status.xchg(err.to_errno(), Full);
        if was == ESTABLISHED {
            rdebug!("connection lost ({})\n", err.to_errno());
            self.xprt().force_disconnect();
        }
        self.wake();
    }
}

/// A connection, owned by whoever holds `XPRT_LOCKED`.
///
/// [`Ep::drop`] closes the QP's gate (which drains it: no completion
/// handler runs afterwards) and destroys the QP, then frees the CQs, the
/// buffers and MRs, the PD, the CM id (which waits for its event
/// handler), and last what the handlers share. The rings and the MR pool
/// close the gate themselves before they free anything, whatever drops
/// them.
pub(crate) struct Ep {
    send_cq: Option<Arc<Cq>>,
    recv_cq: Option<Arc<Cq>>,
    rx: Option<Arc<RecvRing<Receiver>>>,
    pub(super) tx: Option<Arc<SendRing<Sender>>>,
    /// What a Call is marshalled in: the page list of the memory it
    /// registers or maps, rebuilt for each region, and its chunk lists'
    /// segments, and which Sends are signalled; the sender's
    /// (`XPRT_LOCKED`), in one cell, borrowed once per Send. Sized at connect for the
    /// largest payload, so that marshalling allocates nothing.
    pub(super) scratch: ExclusiveCell<CallScratch>,
    pub(super) pool: Option<Arc<MrPool>>,
    pd: Option<Arc<Pd>>,
    pub(super) id: Option<CmId<Shared>>,
    /// The device's registration limits.
    pub(crate) limits: DeviceLimits,
    /// The Write chunk pad: an MR over 64 bytes the pool keeps, registered for the whole
    /// connection, offered as the last segment of a Write chunk whose
    /// length is not a multiple of four (`re_write_pad_mr`).
    write_pad: Option<(PostedMrs<1>, Registered)>,
    /// The device, for mapping the pages of large inline Calls.
    pub(super) dev: Option<crate::rdma::Device>,
    pub(super) shared: Arc<Shared>,
}

impl Ep {
    /// Connects `xprt` to its server address. Blocks; runs in the connect
    /// worker.
    pub(crate) fn connect(xprt: &RdmaXprt, cfg: &Config) -> Result<KBox<Ep>> {
        let shared = Shared::new(xprt, cfg)?;
        let mut ep = KBox::new(
            Ep {
                send_cq: None,
                recv_cq: None,
                rx: None,
                tx: None,
                scratch: ExclusiveCell::new(CallScratch::new(PageList::with_capacity(0)?)),
                pool: None,
                pd: None,
                id: None,
                limits: DeviceLimits {
                    max_fast_reg_page_list_len: 1,
                    max_sge_rd: 1,
                    max_send_sge: 1,
                    page_size: kernel::page::PAGE_SIZE as u32,
                },
                dev: None,
                write_pad: None,
                shared,
            },
            GFP_KERNEL,
        )?;
        let ep_ref: &mut Ep = &mut ep;
        let sref = ep_ref.shared.clone();
        let id = CmId::new_shared(xprt.xprt().net_ns().ok_or(EINVAL)?, sref.clone())?;
        let id = &*ep_ref.id.insert(id);
        let timeout = xprt.resolve_timeout();

        let seen = ep_ref.shared.events_seen();
        id.resolve(&xprt.xprt().dst_sockaddr())?;
        ep_ref.shared.wait(seen, timeout)?;
        to_result(ep_ref.shared.async_rc.load(Acquire))?;

        let seen = ep_ref.shared.events_seen();
        id.resolve_route()?;
        ep_ref.shared.wait(seen, timeout)?;
        to_result(ep_ref.shared.async_rc.load(Acquire))?;

        let dev = id.device()?;
        let limits = DeviceLimits {
            max_fast_reg_page_list_len: dev.max_fast_reg_page_list_len(),
            max_sge_rd: dev.max_sge_rd(),
            max_send_sge: dev.max_send_sge(),
            page_size: kernel::page::PAGE_SIZE as u32,
        };
        if limits.max_fast_reg_page_list_len == 0 {
            pr_warn!("device cannot do fast registration\n");
            return Err(EOPNOTSUPP);
        }
        ep_ref.limits = limits;
        // MRs per RPC: a Read, a Write and a Reply chunk at most, each of
        // `max_rdma_segs` segments; a connection keeps enough for every
        // slot to need about a chunk and a half.
        let segs = limits.max_rdma_segs().max(1);
        let nmrs = (cfg.slots.saturating_mul(segs.saturating_add(2))).min(4096);
        // A chunk's pages, plus the head and tail pages around them.
        let list = segs.saturating_mul(limits.max_fr_depth()).saturating_add(4);
        ep_ref.scratch.get_mut().pages = PageList::with_capacity(list as usize)?;
        let max_wr = dev.max_qp_wr().min(dev.max_cqe());
        // Send queue: every Send may come with a REG_MR per MR, and a
        // LOCAL_INV per MR follows its Reply. One extra each for ib_drain_qp.
        let want_send = sends(cfg).saturating_add(nmrs.saturating_mul(2));
        let send_wr = want_send.min(max_wr.saturating_sub(1)) + 1;
        let recv_wr = recvs(cfg).min(max_wr.saturating_sub(1)) + 1;
        // Each object goes into the connection as soon as it exists, so
        // that an error from here on releases it through `Ep::drop`, in
        // teardown order; the QP holds its PD and CQs, and each MR its PD,
        // so none of them can be freed under a user.
        let pd = ep_ref.pd.insert(Pd::new(&dev)?).clone();
        let send_cq = ep_ref.send_cq.insert(Cq::new(&dev, send_wr)?).clone();
        let recv_cq = ep_ref.recv_cq.insert(Cq::new(&dev, recv_wr)?).clone();
        // A quarter of the Send Queue may wait for a signalled completion.
        ep_ref.scratch.get_mut().signals =
            SendSignals::new(queue::send_batch(cfg.slots), send_wr / 4);
        ep_ref.dev = Some(dev.clone());
        let lkey = pd.local_dma_lkey();
        let id = ep_ref.id.as_mut().ok_or(ENOTCONN)?;
        let caps = QpCaps {
            send_wr,
            recv_wr,
            send_sge: limits.send_sges().min(MAX_MAPPED_PAGES as u32 + 2),
            rdma_ctxs: 0,
        };
        id.create_qp(&pd, &send_cq, &recv_cq, &caps)?;
        let gate = id.gate().cloned().ok_or(ENOTCONN)?;
        if params::injected(params::FAULT_MR_POOL) {
            rdebug!("fault injection: failing MR pool allocation\n");
            return Err(ENOMEM);
        }
        let pool = MrPool::new_shared(
            sref.clone(),
            gate.clone(),
            &pd,
            &dev,
            limits.max_fr_depth(),
            nmrs as usize,
        )?;
        let pool = ep_ref.pool.insert(Arc::new(pool, GFP_KERNEL)?);
        xprt.stats().mrs_allocated.add(u64::from(nmrs));
        let pool = pool.clone();

        let receiver = Receiver {
            shared: sref.clone(),
            pool,
        };
        let rx = ep_ref.rx.insert(RecvRing::new(
            receiver,
            gate.clone(),
            &dev,
            recv_wr - 1,
            cfg.inline_read as usize,
            lkey,
            queue::recv_batch(cfg.slots),
            RecvState::new,
        )?);
        let sender = Sender {
            shared: sref.clone(),
            rx: rx.clone(),
        };
        let rx = rx.clone();
        ep_ref.tx = Some(SendRing::new(
            sender,
            gate,
            &dev,
            sends(cfg),
            cfg.inline_write as usize,
            lkey,
        )?);
        // Every buffer starts idle; one chain posts them all.
        rx.post_all()?;

        let private = PrivateData {
            remote_invalidate: true,
            send_size: cfg.inline_write,
            recv_size: cfg.inline_read,
        }
        .encode();
        let responder_resources = u8::try_from(dev.max_qp_rd_atom()).unwrap_or(u8::MAX);
        // Like rpcrdma.ko: offer RDMA Read but never initiate, few
        // retries so a dead peer is noticed, and no RNR retries because
        // credits make RNR impossible.
        let mut param = ConnParam::new(&private, responder_resources, 0, 6, 0);
        let seen = ep_ref.shared.events_seen();
        let Some(id) = ep.id.as_ref() else {
            return Err(ENOTCONN);
        };
        id.connect(&mut param)?;
        ep.shared.wait(seen, xprt.connect_timeout())?;
        let status = ep.shared.status.load(Acquire);
        if status != ESTABLISHED {
            to_result(status)?;
            return Err(ENOTCONN);
        }
        if let Some(id) = ep.id.as_ref() {
            let (neg, limits) = (ep.shared.inline(), &ep.limits);
            let calc = || {
                let c = plan::Connection::new(neg, limits);
                (c.max_inline_send, c.max_inline_recv)
            };
            trace::xprtrdma_inline_thresh((neg.send, neg.recv), calc, id.src_addr(), id.dst_addr());
        }
        ep.register_write_pad()?;
        Ok(ep)
    }

    /// Registers the Write chunk pad (`frwr_wp_create`), once the QP can
    /// send.
    fn register_write_pad(&mut self) -> Result {
        let pool = self.pool.as_deref().ok_or(ENOTCONN)?;
        // The pool keeps the buffer as long as the MR may be used.
        let (mr, reg) = pool.register_owned(KVec::from_elem(0u8, 64, GFP_KERNEL)?, 4, true)?;
        // As rpcrdma.ko's frwr_wp_create: an MR of no request.
        trace::xprtrdma_mr(trace::MrEvent::FastReg, || None, || Some(reg));
        let mut one = FrwrList::new();
        if let Err(mr) = one.push(mr) {
            pool.release(mr, false);
            return Err(EINVAL);
        }
        let (posted, res) = pool.post_reg(one);
        self.write_pad = Some((posted, reg));
        res
    }

    /// The Write chunk pad segment.
    pub(crate) fn write_pad(&self) -> Option<Registered> {
        self.write_pad.as_ref().map(|(_, reg)| *reg)
    }

    /// The negotiated version 1 inline thresholds.
    pub(crate) fn inline(&self) -> InlineThresholds {
        self.shared.inline()
    }

    /// The negotiated version 2 inline thresholds.
    pub(crate) fn inline_v2(&self) -> InlineThresholds {
        self.shared.inline_v2()
    }

    /// The Receive ring.
    pub(super) fn recv_ring(&self) -> Option<&RecvRing<Receiver>> {
        self.rx.as_deref()
    }

    /// The MR pool.
    pub(crate) fn pool(&self) -> Option<&MrPool> {
        self.pool.as_deref()
    }

    /// What the handlers share.
    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }
}

impl Drop for Ep {
    fn drop(&mut self) {
        // Our own disconnect must not schedule another close.
        self.shared.status.store(ECONNABORTED.to_errno(), Release);
        if let Some(id) = self.id.as_mut() {
            id.disconnect();
            // Close the gate and flush every posted Receive and Send:
            // afterwards nothing is posted, no buffer is in use by the
            // device and no handler runs.
            id.drain_qp();
            id.destroy_qp();
        }
        // Explicit order, whatever the field order: freeing a CQ waits for
        // its polling work, so no completion handler runs afterwards; then
        // the buffers and MRs go (an MR still registered for an RPC that
        // got no Reply is orphaned: its QP is gone, so nobody can reach
        // its pages any more), the PD, and the CM id (which waits for its
        // event handler); `shared` is dropped with the fields, last.
        drop(self.send_cq.take());
        drop(self.recv_cq.take());
        // The Send ring holds the Receive ring: it goes first.
        drop(self.tx.take());
        drop(self.rx.take());
        if let Some(pool) = self.pool.take() {
            if let Some((mrs, _)) = self.write_pad.take() {
                // The QP is drained: the pad's REG_MR is done.
                pool.reclaim(mrs);
            }
            self.shared
                .xprt()
                .stats()
                .mrs_orphaned
                .add(pool.in_use() as u64);
            drop(pool);
        }
        drop(self.pd.take());
        // An established connection's DREQ may still be on its way.
        if let Some(id) = self.id.take() {
            id.linger(|shared| shared.cm_up.load(Acquire));
        }
        rdebug!("connection torn down\n");
    }
}

/// A Reply held between its Receive completion and the completion of the
/// LOCAL_INVs of its RPC's MRs (or of its Call's Send).
pub(crate) struct Pending {
    /// The request, pinned.
    pub(crate) rqst: PinnedRqst,
    /// The Reply as checked on arrival, or what the RPC does instead.
    pub(crate) reply: Verdict,
    /// The Receive buffer holding it, while it waits for a Send or for
    /// the sender.
    pub(crate) buf: Option<ParkedRecv>,
    /// The credits it grants, applied once it is taken for its Call's.
    pub(crate) credits: u32,
    /// The key the server invalidated with it, if any.
    pub(crate) inv: Option<RemoteInv>,
}

/// What the connection keeps with each Receive buffer.
///
/// # Invariants
///
/// `pending` is filled by the holder of this buffer's token (its Receive
/// completion, or the sender finishing a Reply left to it) and emptied,
/// after it posted LOCAL_INVs, by their completion, or after it published
/// `wait_seq`, by whoever resets `wait_seq` to zero (its cell checks that
/// they take turns).
pub(crate) struct RecvState {
    pub(super) pending: ExclusiveCell<Option<Pending>>,
    /// Number of the Send this buffer's Reply waits for; 0 for none.
    pub(super) wait_seq: Atomic<u64>,
}

impl RecvState {
    fn new() -> Self {
        Self {
            pending: ExclusiveCell::new(None),
            wait_seq: Atomic::new(0),
        }
    }
}

/// The owner of the Receive ring: what its completions need.
pub(crate) struct Receiver {
    pub(super) shared: Arc<Shared>,
    /// The connection's MRs, for invalidating a Reply's.
    pub(super) pool: Arc<MrPool>,
}

/// The owner of the Send ring: its completions finish the Replies that
/// wait for them.
pub(crate) struct Sender {
    pub(super) shared: Arc<Shared>,
    pub(super) rx: Arc<RecvRing<Receiver>>,
}

/// The MRs of one RPC.
pub(crate) type RpcMrs = InvList;

/// The MRs of one RPC, their REG_MRs posted.
pub(crate) type RpcPosted = PostedList;

impl RdmaXprt {
    /// The current connection, which only the `XPRT_LOCKED` holder may
    /// use or replace.
    pub(super) fn ep<'a>(&'a self, locked: &'a XprtLocked<'_>) -> Option<&'a Ep> {
        self.conn(locked)
    }

    /// Tears down the current connection, if any.
    pub(super) fn teardown(&self, locked: &mut XprtLocked<'_>) {
        if let Some(ep) = self.replace_conn(locked, None) {
            let gen = ep.shared().gen;
            let status = ep.shared().status.load(Relaxed);
            drop(ep);
            // rc is what the teardown's rdma_disconnect gives: always 0 here.
            self.trace_connect(true, 0, if status == ESTABLISHED { 1 } else { status });
            // Generations only grow, and only the XPRT_LOCKED holder
            // tears down: a plain store is the maximum.
            self.gone_gen.store(gen, Release);
            self.wake_fence();
        }
    }

    /// Closes the connection: `close`, and the sender when the connection
    /// cannot carry a Call.
    pub(super) fn close(&self, locked: &mut XprtLocked<'_>) {
        rdebug!("close\n");
        if self.ep(locked).is_some() {
            rdebug!("connection to {} closed\n", self.peer());
            self.backoff.store(true, Relaxed);
        }
        self.teardown(locked);
        locked.disconnect_done();
    }
}
