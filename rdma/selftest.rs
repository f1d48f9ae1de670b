// SPDX-License-Identifier: GPL-2.0

//! Loopback checks of the listener and of rdma_rw on a local soft-RoCE
//! device, run by KUnit: a client id connects to a [`Listener`] on the
//! `kunit_addr` module parameter's address; the server RDMA-Reads a
//! buffer the client registered (two Reads in one chain), then RDMA-Writes another pattern into it
//! in one post with a Send, whose arrival must find the Write's data in
//! place; a second listener rejects its request.
//!
//! Every check returns an error instead of asserting, so that everything
//! is torn down (in order) whatever fails: a KUnit assertion would end the
//! test thread and leak live ids.

use kernel::page::{Page, PAGE_SIZE};
use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Full, Relaxed, Release};
use kernel::sync::SetOnce;
use kernel::types::Opaque;

use super::{
    CmEvent, CmHandler, CmId, ConnParam, ConnRequest, Cq, CqEntry, CqHandler, DmaBuf, DmaDir,
    ListenHandler, Listener, Mr, PageSeg, Pd, QpCaps, QpInit, RecvWr, RwCtx, RwOp, RwSpares,
    SendChain, Wc,
};
use crate::sys;

/// What a failed check says.
pub(crate) type Check<T = ()> = core::result::Result<T, &'static str>;

const ACCEPT_PORT: u16 = 20050;
const REJECT_PORT: u16 = 20051;
/// Longest wait for one event or completion.
const TIMEOUT_SECS: u64 = 10;
/// Bytes moved each way.
const LEN: usize = 1024;
const CLIENT_PVT: &[u8] = b"rpcrdma_rs client";
/// Eight bytes: what [`CmEvent::Established`] keeps.
const SERVER_PVT: &[u8; 8] = b"rs-srv-1";
const REJECT_PVT: &[u8] = b"no thanks";
/// What the server Sends after its RDMA Write.
const SEND_MSG: &[u8] = b"write done";

const EV_ADDR: u32 = 1 << 0;
const EV_ROUTE: u32 = 1 << 1;
const EV_ESTABLISHED: u32 = 1 << 2;
const EV_REJECTED: u32 = 1 << 3;
const EV_DISCONNECTED: u32 = 1 << 4;
const EV_ERROR: u32 = 1 << 5;

/// A C completion counting wake-ups, waited on with a deadline
/// (`kernel::sync::Completion` has no timed wait).
///
/// # Invariants
///
/// `c` is initialised by [`Waker::init`] before any other use, and never
/// moves after (its owner is boxed).
struct Waker {
    c: Opaque<sys::completion>,
}

// SAFETY: A kernel completion may be completed and waited on from any
// thread; it is only initialised before being shared.
unsafe impl Send for Waker {}
// SAFETY: As above.
unsafe impl Sync for Waker {}

impl Waker {
    fn new() -> Self {
        Self {
            c: Opaque::uninit(),
        }
    }

    /// # Safety
    ///
    /// `self` must not move any more, and nobody may use it yet.
    unsafe fn init(&self) {
        // SAFETY: Valid memory at its final address (caller).
        unsafe { sys::rpcrdma_rs_init_completion(self.c.get()) };
    }

    fn wake(&self) {
        // SAFETY: Initialised (type invariant).
        unsafe { sys::rpcrdma_rs_complete(self.c.get()) };
    }

    /// Waits until `ready` says yes, at most [`TIMEOUT_SECS`]; `what`
    /// names the wait in the failure.
    fn wait_until(&self, what: &'static str, mut ready: impl FnMut() -> Option<Check>) -> Check {
        // SAFETY: Plain reads of kernel globals.
        let (start, hz) = unsafe { (sys::rpcrdma_rs_jiffies(), sys::rpcrdma_rs_hz()) };
        let limit = hz.saturating_mul(TIMEOUT_SECS);
        loop {
            if let Some(res) = ready() {
                return res;
            }
            // SAFETY: As above.
            let spent = unsafe { sys::rpcrdma_rs_jiffies() }.wrapping_sub(start);
            if spent >= limit {
                pr_err!("kunit: timed out: {what}\n");
                return Err("timed out");
            }
            // SAFETY: Initialised (type invariant).
            if unsafe { sys::rpcrdma_rs_wait_completion(self.c.get(), limit - spent) } < 0 {
                return Err("interrupted");
            }
        }
    }
}

/// Records the CM events of one id.
struct Events {
    seen: Atomic<u32>,
    /// The private data of ESTABLISHED, little-endian.
    private: Atomic<u64>,
    waker: Waker,
}

impl Events {
    fn new() -> Self {
        Self {
            seen: Atomic::new(0),
            private: Atomic::new(0),
            waker: Waker::new(),
        }
    }

    fn note(&self, bit: u32) {
        let mut old = self.seen.load(Relaxed);
        while let Err(cur) = self.seen.cmpxchg(old, old | bit, Full) {
            old = cur;
        }
        self.waker.wake();
    }

    /// Waits for `want`; fails early on an error event it did not want.
    fn wait(&self, want: u32, what: &'static str) -> Check {
        self.waker.wait_until(what, || {
            let seen = self.seen.load(Acquire);
            if seen & want != 0 {
                Some(Ok(()))
            } else if seen & (EV_ERROR | EV_REJECTED) & !want != 0 {
                Some(Err(what))
            } else {
                None
            }
        })
    }
}

impl CmHandler for Events {
    fn event(&self, event: CmEvent) {
        let bit = match event {
            CmEvent::AddrResolved => EV_ADDR,
            CmEvent::RouteResolved => EV_ROUTE,
            CmEvent::Established { private, .. } => {
                self.private.store(u64::from_le_bytes(private), Relaxed);
                EV_ESTABLISHED
            }
            CmEvent::Rejected { .. } => EV_REJECTED,
            CmEvent::Disconnected => EV_DISCONNECTED,
            CmEvent::Other(_) | CmEvent::AddrChange => return,
            _ => EV_ERROR,
        };
        self.note(bit);
    }
}

/// Waits for the completions of one context's work requests.
struct WcWaiter {
    cqe: CqEntry<Self>,
    /// The last status, plus one; zero while none is pending.
    status: Atomic<u32>,
    /// The last completion's byte count (a Receive's).
    len: Atomic<u32>,
    waker: Waker,
}

crate::impl_has_cq_entry!(WcWaiter, 0, cqe);

impl WcWaiter {
    fn new() -> Self {
        Self {
            cqe: CqEntry::new(),
            status: Atomic::new(0),
            len: Atomic::new(0),
            waker: Waker::new(),
        }
    }

    /// Waits for the next completion; it must be a success.
    fn wait(&self, what: &'static str) -> Check {
        self.waker
            .wait_until(what, || match self.status.xchg(0, Full) {
                0 => None,
                1 => Some(Ok(())),
                _ => Some(Err(what)),
            })
    }
}

impl CqHandler for WcWaiter {
    fn done(&self, wc: &Wc<'_>) {
        self.len
            .store(u32::try_from(wc.byte_len()).unwrap_or(u32::MAX), Relaxed);
        self.status.store(wc.status().saturating_add(1), Release);
        self.waker.wake();
    }
}

/// The passive side: a listener's handler, and what it accepted.
struct Server {
    accept: bool,
    /// The accepted child id; dropped before the handlers below.
    child: SetOnce<CmId<Events>>,
    events: Events,
    wc: WcWaiter,
    /// The accepted connection's PD's local DMA lkey.
    lkey: Atomic<u32>,
    requests: Atomic<u32>,
    /// Whether the request's private data began with [`CLIENT_PVT`].
    private_ok: Atomic<bool>,
}

impl Server {
    fn new(accept: bool) -> Check<KBox<Self>> {
        let this = KBox::new(
            Self {
                accept,
                child: SetOnce::new(),
                events: Events::new(),
                wc: WcWaiter::new(),
                lkey: Atomic::new(0),
                requests: Atomic::new(0),
                private_ok: Atomic::new(false),
            },
            GFP_KERNEL,
        )
        .map_err(|_| "server: no memory")?;
        // SAFETY: Boxed, so at their final addresses; not shared yet.
        unsafe {
            this.events.waker.init();
            this.wc.waker.init();
        }
        Ok(this)
    }

    fn accept(&self, req: ConnRequest<'_>) -> Result {
        let dev = req.device()?;
        let pd = Pd::new(&dev)?;
        let cq = Cq::new(&dev, 16)?;
        self.lkey.store(pd.local_dma_lkey(), Relaxed);
        let caps = QpCaps {
            send_wr: 4,
            recv_wr: 2,
            send_sge: 1,
            rdma_ctxs: 2,
        };
        // Our RDMA Reads at once: what the client takes; theirs: what
        // they want.
        let depth = req.responder_resources().clamp(1, 4);
        let resources = req.initiator_depth().min(4);
        let mut param = ConnParam::new(SERVER_PVT, resources, depth, 6, 0);
        // SAFETY: `events` lives in `self`, which outlives `child` (it is
        // dropped first); the id is stored, so not dropped in this callback.
        let id = unsafe {
            req.accept(
                &self.events,
                QpInit {
                    pd: &pd,
                    send_cq: &cq,
                    recv_cq: &cq,
                    caps,
                },
                &mut param,
                |_| Ok(()),
            )?
        };
        // Requests to one listener are serialised, and a second one is
        // rejected before accepting: `child` is empty, so this cannot
        // fail (and drop the id in its own callback).
        let _ = self.child.populate(id);
        Ok(())
    }
}

impl ListenHandler for Server {
    fn connect_request(&self, req: ConnRequest<'_>) {
        self.requests.fetch_add(1, Relaxed);
        let ok = req.private().starts_with(CLIENT_PVT);
        self.private_ok.store(ok, Relaxed);
        if !self.accept || self.child.as_ref().is_some() {
            req.reject(REJECT_PVT);
        } else if let Err(e) = self.accept(req) {
            pr_err!("kunit: accept failed: {e:?}\n");
        }
        self.events.waker.wake();
    }
}

/// The active side.
struct Client {
    /// Memory regions, over pages that outlive the client.
    mrs: KVec<Mr>,
    /// A Receive buffer, posted by [`Client::post_recv`].
    recv: Option<(DmaBuf, RecvWr)>,
    /// Its completion.
    rwc: WcWaiter,
    lkey: u32,
    id: Option<CmId<Events>>,
    events: Events,
    wc: WcWaiter,
}

impl Client {
    /// Connects to `addr`; `Ok` once ESTABLISHED, or REJECTED when
    /// `expect_reject`.
    fn connect(
        net: *mut sys::net,
        addr: &sys::sockaddr_in,
        expect_reject: bool,
    ) -> Check<KBox<Self>> {
        let mut this = KBox::new(
            Self {
                mrs: KVec::new(),
                recv: None,
                rwc: WcWaiter::new(),
                lkey: 0,
                id: None,
                events: Events::new(),
                wc: WcWaiter::new(),
            },
            GFP_KERNEL,
        )
        .map_err(|_| "client: no memory")?;
        // SAFETY: Boxed, so at their final addresses; not shared yet.
        unsafe {
            this.events.waker.init();
            this.wc.waker.init();
            this.rwc.waker.init();
        }
        // SAFETY: `net` is init_net; `events` outlives the id (declared
        // after it, and the client is boxed).
        let id = unsafe { CmId::new(net, &this.events) }.map_err(|_| "client: create id")?;
        let id = this.id.insert(id);
        // SAFETY: `addr` is a valid sockaddr_in.
        unsafe { id.resolve_addr(core::ptr::from_ref(addr).cast()) }
            .map_err(|_| "client: resolve_addr")?;
        this.events.wait(EV_ADDR, "client: address resolution")?;
        let id = this.id.as_mut().ok_or("client: no id")?;
        id.resolve_route().map_err(|_| "client: resolve_route")?;
        this.events.wait(EV_ROUTE, "client: route resolution")?;
        let id = this.id.as_mut().ok_or("client: no id")?;
        let dev = id.device().map_err(|_| "client: no device")?;
        let pd = Pd::new(&dev).map_err(|_| "client: PD")?;
        let cq = Cq::new(&dev, 16).map_err(|_| "client: CQ")?;
        let lkey = pd.local_dma_lkey();
        let caps = QpCaps {
            send_wr: 4,
            recv_wr: 2,
            send_sge: 1,
            rdma_ctxs: 0,
        };
        id.create_qp(&pd, &cq, &cq, &caps)
            .map_err(|_| "client: QP")?;
        for _ in 0..2 {
            let mr = Mr::new(&pd, &dev, 1).map_err(|_| "client: MR")?;
            this.mrs
                .push(mr, GFP_KERNEL)
                .map_err(|_| "client: no memory")?;
        }
        this.lkey = lkey;
        let id = this.id.as_ref().ok_or("client: no id")?;
        let mut param = ConnParam::new(CLIENT_PVT, 4, 0, 6, 0);
        id.connect(&mut param).map_err(|_| "client: connect")?;
        if expect_reject {
            this.events.wait(EV_REJECTED, "client: not rejected")?;
        } else {
            this.events
                .wait(EV_ESTABLISHED, "client: not established")?;
        }
        Ok(this)
    }

    /// Registers all of `page` in MR `i` (0: the peer reads, 1: it writes)
    /// and waits for the registration to complete.
    ///
    /// # Safety
    ///
    /// `page` must outlive the client.
    unsafe fn register(&mut self, i: usize, page: &Page) -> Check<super::Registered> {
        let writing = i == 1;
        let mr = self.mrs.get_mut(i).ok_or("client: no MR")?;
        let seg = PageSeg {
            page: page.as_ptr().cast(),
            offset: 0,
            len: LEN as u32,
        };
        // SAFETY: The page outlives the client, which drops its MRs; the
        // QP is drained before that, so the peer cannot use the key after.
        let reg = unsafe { mr.map(&[seg], writing) }.map_err(|_| "client: map MR")?;
        let mut wr = sys::ib_reg_wr::default();
        mr.reg_wr(&mut wr, writing, self.wc.cqe.as_ptr());
        wr.wr.send_flags = sys::ib_send_flags_IB_SEND_SIGNALED;
        let qp = self
            .id
            .as_ref()
            .and_then(|id| id.qp())
            .ok_or("client: no QP")?;
        let mut chain = SendChain::new();
        // SAFETY: A single valid WR, on our stack until the call returns
        // (the device copies posted WRs); its `wr_cqe` is in `self`, which
        // the completion precedes (waited for below, or drained at
        // teardown).
        unsafe {
            chain.push(&mut wr.wr);
            qp.post_send_chain(&chain)
        }
        .map_err(|_| "client: post REG_MR")?;
        self.wc.wait("client: REG_MR failed")?;
        Ok(reg)
    }

    /// Posts a Receive of up to [`LEN`] bytes, completing on `rwc`.
    fn post_recv(&mut self) -> Check {
        let id = self.id.as_ref().ok_or("client: no id")?;
        let qp = id.qp().ok_or("client: no QP")?;
        let dev = id.device().map_err(|_| "client: no device")?;
        let buf = DmaBuf::new(&dev, LEN, DmaDir::FromDevice).map_err(|_| "client: buffer")?;
        let wr = RecvWr::new(&buf, self.lkey);
        let (_, wr) = self.recv.insert((buf, wr));
        // SAFETY: The buffer is ours and not posted; it and `wr` stay in
        // `self.recv` (boxed client), and `rwc` in `self`, until the
        // Receive completes or `teardown` drained the QP.
        unsafe {
            let first = wr.link(self.rwc.cqe.as_ptr(), core::ptr::null_mut());
            qp.post_recv_chain(first)
        }
        .map_err(|_| "client: post Receive")
    }

    /// The bytes the completed Receive brought.
    fn received(&self) -> Check<KVec<u8>> {
        let (buf, _) = self.recv.as_ref().ok_or("client: no Receive")?;
        let len = (self.rwc.len.load(Relaxed) as usize).min(buf.len());
        buf.sync_for_cpu(len);
        let mut out = KVec::new();
        out.extend_from_slice(&buf.as_slice()[..len], GFP_KERNEL)
            .map_err(|_| "client: no memory")?;
        Ok(out)
    }

    fn teardown(&mut self) {
        if let Some(id) = self.id.as_mut() {
            id.drain_qp();
        }
        // Buffers and MRs before the id: they use its device.
        self.recv = None;
        self.mrs.clear();
        self.id = None;
    }
}

/// Fills `page`'s first [`LEN`] bytes with `f(i)`.
fn fill(page: &Page, f: impl Fn(usize) -> u8) -> Check {
    let mut buf = [0u8; LEN];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = f(i);
    }
    // SAFETY: `buf` holds `LEN` bytes; no DMA touches the page now.
    unsafe { page.write_raw(buf.as_ptr(), 0, LEN) }.map_err(|_| "write page")
}

/// Whether `page`'s first [`LEN`] bytes are `f(i)`.
fn matches(page: &Page, f: impl Fn(usize) -> u8) -> Check<bool> {
    let mut buf = [0u8; LEN];
    // SAFETY: `buf` holds `LEN` bytes; no DMA touches the page now.
    unsafe { page.read_raw(buf.as_mut_ptr(), 0, LEN) }.map_err(|_| "read page")?;
    Ok(buf.iter().enumerate().all(|(i, &b)| b == f(i)))
}

fn alloc_page() -> Check<Page> {
    let page = Page::alloc_page(GFP_KERNEL).map_err(|_| "no page")?;
    // SAFETY: The page is ours; `LEN` fits in it.
    unsafe { page.fill_zero_raw(0, PAGE_SIZE) }.map_err(|_| "zero page")?;
    Ok(page)
}

fn read_pattern(i: usize) -> u8 {
    (i as u8).wrapping_mul(7).wrapping_add(1)
}

fn write_pattern(i: usize) -> u8 {
    !(i as u8) ^ 0x5a
}

/// The address from `kunit_addr` with `port`, or `None` when unset.
fn test_addr(port: u16) -> Option<sys::sockaddr_in> {
    let mut sin = sys::sockaddr_in::default();
    // SAFETY: `sin` is a valid sockaddr_in to fill.
    (unsafe { sys::rpcrdma_rs_kunit_addr(&mut sin, port) } == 0).then_some(sin)
}

/// Whether the suite can run: `kunit_addr` is set.
pub(crate) fn configured() -> bool {
    let ok = test_addr(ACCEPT_PORT).is_some();
    if !ok {
        pr_info!("kunit: rxe loopback checks skipped (no kunit_addr)\n");
    }
    ok
}

/// Listens, connects, accepts with private data, then the server
/// RDMA-Reads the client's buffer and RDMA-Writes another pattern into it,
/// in one post with a Send the client receives.
pub(crate) fn accept_read_write() -> Check {
    let sin = test_addr(ACCEPT_PORT).ok_or("no kunit_addr")?;
    // SAFETY: init_net lives forever.
    let net = unsafe { sys::rpcrdma_rs_init_net() };
    // Declared first, dropped last: the pages outlive the MRs and contexts.
    let client_page = alloc_page()?;
    let server_page = alloc_page()?;
    let server = Server::new(true)?;
    // SAFETY: `server` outlives the listener (declared before it); `sin`
    // is a valid address.
    let listener = unsafe { Listener::new(net, &*server, core::ptr::from_ref(&sin).cast(), 4) }
        .map_err(|_| "listen")?;
    let mut client = Client::connect(net, &sin, false)?;
    let mut res = exchange(&server, &mut client, &client_page, &server_page);
    // Teardown, whatever happened: disconnect, drain, then drop in order.
    if let Some(id) = client.id.as_ref() {
        // The DREQ reaches the server, whose own disconnect answers it
        // with the DREP the client waits for.
        id.disconnect();
        let down = server
            .events
            .wait(EV_DISCONNECTED, "server: no DISCONNECTED");
        if let Some(child) = server.child.as_ref() {
            child.disconnect();
        }
        let down = down.and(
            client
                .events
                .wait(EV_DISCONNECTED, "client: no DISCONNECTED"),
        );
        res = res.and(down);
    }
    // Draining the client's QP and dropping its MRs (DMA unmapping the
    // page) makes the server's Write visible to the CPU.
    client.teardown();
    if let Some(child) = server.child.as_ref() {
        child.drain_qp();
    }
    if res.is_ok() && !matches(&client_page, write_pattern)? {
        res = Err("client: RDMA Write left the wrong bytes");
    }
    drop(client);
    drop(listener);
    drop(server);
    res
}

fn exchange(server: &Server, client: &mut Client, client_page: &Page, server_page: &Page) -> Check {
    if client.events.private.load(Relaxed) != u64::from_le_bytes(*SERVER_PVT) {
        return Err("client: wrong private data in ESTABLISHED");
    }
    if server.requests.load(Relaxed) != 1 || !server.private_ok.load(Relaxed) {
        return Err("server: request or its private data missing");
    }
    server
        .events
        .wait(EV_ESTABLISHED, "server: not established")?;
    let child = server.child.as_ref().ok_or("server: nothing accepted")?;

    // RDMA Read of the client's buffer.
    fill(client_page, read_pattern)?;
    // SAFETY: `client_page` outlives `client` (caller's declaration order).
    let reg = unsafe { client.register(0, client_page) }?;
    let seg = PageSeg {
        page: server_page.as_ptr().cast(),
        offset: 0,
        len: LEN as u32,
    };
    // The Reads' memory serves the Write after them, as a connection's
    // contexts reuse theirs.
    let mut spares = RwSpares::with_room(2).map_err(|_| "server: no memory")?;
    {
        // Two Reads, one per half of the buffer, chained in one post with
        // only the last signalled (a Call's Read chunks): its completion
        // must find both halves in place.
        let half = (LEN / 2) as u32;
        let mut ctxs = KVec::new();
        for (offset, len) in [(0, half), (half, LEN as u32 - half)] {
            let part = PageSeg { offset, len, ..seg };
            let remote = reg.iova + u64::from(offset);
            // SAFETY: `server_page` outlives the contexts, and is not
            // touched until they are dropped; the child's QP outlives
            // them too.
            let ctx =
                unsafe { RwCtx::new(&mut spares, child, &[part], remote, reg.rkey, RwOp::Read) }
                    .map_err(|_| "server: rdma_rw_ctx_init (Read)")?;
            if ctx.wr_count() == 0 {
                return Err("server: Read context without work requests");
            }
            ctxs.push(ctx, GFP_KERNEL)
                .map_err(|_| "server: no memory")?;
        }
        // SAFETY: Both on the child's QP; they and `server.wc` stay until
        // the completion, waited for below (or drained before they go).
        let chain = unsafe { RwCtx::chain(&mut ctxs, &server.wc.cqe) }.ok_or("server: no chain")?;
        // SAFETY: As above.
        unsafe { chain.post() }.map_err(|_| "server: post Reads")?;
        settle(child, server.wc.wait("server: RDMA Read failed"))?;
        spares.reclaim(&mut ctxs);
        if spares.len() != 2 {
            return Err("server: recycled Read contexts not kept");
        }
    }
    if !matches(server_page, read_pattern)? {
        return Err("server: RDMA Read brought the wrong bytes");
    }

    // RDMA Write of another pattern into it, linked unsignalled in front
    // of a Send, in one post: only the Send completes, and the client's
    // Receive of it comes after the Write's data (a Reply's Write chunk
    // and the Reply itself).
    fill(server_page, write_pattern)?;
    // SAFETY: As above.
    let reg = unsafe { client.register(1, client_page) }?;
    client.post_recv()?;
    let dev = child.device().map_err(|_| "server: no device")?;
    let mut msg =
        DmaBuf::new(&dev, SEND_MSG.len(), DmaDir::ToDevice).map_err(|_| "server: Send buffer")?;
    msg.as_mut_slice()
        .get_mut(..SEND_MSG.len())
        .ok_or("server: Send buffer too small")?
        .copy_from_slice(SEND_MSG);
    msg.sync_for_device(SEND_MSG.len());
    let mut sge = [msg.sge(0, SEND_MSG.len(), server.lkey.load(Relaxed))];
    {
        let qp = child.qp().ok_or("server: no QP")?;
        let mut ctxs = KVec::new();
        // SAFETY: As above.
        let ctx =
            unsafe { RwCtx::new(&mut spares, child, &[seg], reg.iova, reg.rkey, RwOp::Write) }
                .map_err(|_| "server: rdma_rw_ctx_init (Write)")?;
        if spares.len() != 1 {
            return Err("server: Write context not made from a recycled one");
        }
        ctxs.push(ctx, GFP_KERNEL)
            .map_err(|_| "server: no memory")?;
        // SAFETY: The context, `msg` and `server.wc` stay until the Send
        // completed, waited for below (or drained by `settle` before they
        // go).
        unsafe {
            qp.post_send_after_rw(
                server.wc.cqe.as_ptr(),
                &mut sge,
                ctxs.as_mut_slice(),
                None,
                true,
            )
        }
        .map_err(|_| "server: post Write and Send")?;
        settle(child, server.wc.wait("server: Write and Send failed"))?;
    }
    let id = client.id.as_ref().ok_or("client: no id")?;
    settle(id, client.rwc.wait("client: Receive failed"))?;
    if client.received()?.as_slice() != SEND_MSG {
        return Err("client: the Send after the Write brought the wrong bytes");
    }
    // The Write completed, so the responder placed the data; the caller
    // checks it once the client's MR is unmapped.
    Ok(())
}

/// Passes `waited` on; on failure first drains `id`'s QP, so that a work
/// request still posted completes before its context is dropped.
fn settle(id: &CmId<Events>, waited: Check) -> Check {
    if waited.is_err() {
        id.drain_qp();
    }
    waited
}

/// A listener that rejects: the client sees REJECTED.
pub(crate) fn reject() -> Check {
    let sin = test_addr(REJECT_PORT).ok_or("no kunit_addr")?;
    // SAFETY: init_net lives forever.
    let net = unsafe { sys::rpcrdma_rs_init_net() };
    let server = Server::new(false)?;
    // SAFETY: `server` outlives the listener; `sin` is a valid address.
    let listener = unsafe { Listener::new(net, &*server, core::ptr::from_ref(&sin).cast(), 4) }
        .map_err(|_| "listen")?;
    let res = Client::connect(net, &sin, true).map(|mut client| client.teardown());
    let seen = server.requests.load(Relaxed) == 1 && server.private_ok.load(Relaxed);
    drop(listener);
    drop(server);
    res?;
    if !seen {
        return Err("server: request or its private data missing");
    }
    Ok(())
}

const _: () = assert!(LEN <= PAGE_SIZE);
