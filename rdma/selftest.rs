// SPDX-License-Identifier: GPL-2.0

//! Loopback checks of the listener, of [`Endpoint`] and of rdma_rw on a
//! local soft-RoCE device, run by KUnit: a client endpoint connects to a
//! [`Listener`] on the `kunit_addr` module parameter's address, whose
//! request the server defers and accepts onto its own endpoint, with
//! private data both ways. The client registers a page and Sends; with
//! that Receive the server RDMA-Reads the page (two Reads in one chain),
//! then RDMA-Writes another pattern into it, posted with a Send, whose
//! arrival must find the Write's data in place; once the endpoints are
//! shut down, a Receive posted is refused (their QPs' gates are closed); a
//! second listener rejects its request.
//!
//! Every check returns an error instead of asserting, so that everything
//! is torn down (in order) whatever fails: a KUnit assertion would end the
//! test thread and leak live ids.

use kernel::prelude::*;
use kernel::sync::{new_condvar, new_mutex, CondVar, CondVarTimeoutResult, Mutex, SetOnce};
use kernel::time::msecs_to_jiffies;

use super::{
    owner, CmEvent, CmHandler, ConnParam, ConnRequest, CqEntry, CqHandler, Dialing, Endpoint,
    EpOwner, EpSizes, ListenHandler, ListenSlot, Listener, Mr, Parked, Pd, PendingConn, RecvBuf,
    RecvKind, Registered, Retired, SendKind, Wc,
};
use crate::sunrpc::{Net, PageRefs, SockAddr};
use crate::sys;

/// What a failed check says.
pub(crate) type Check<T = ()> = core::result::Result<T, &'static str>;

const ACCEPT_PORT: u16 = 20050;
const REJECT_PORT: u16 = 20051;
const REBIND_PORT: u16 = 20052;
/// Longest wait for one event or completion.
const TIMEOUT_MS: u32 = 10_000;
/// Bytes moved each way.
const LEN: usize = 1024;
const CLIENT_PVT: &[u8] = b"rpcrdma_rs client";
/// Eight bytes: what [`CmEvent::Established`] keeps.
const SERVER_PVT: &[u8; 8] = b"rs-srv-1";
const REJECT_PVT: &[u8] = b"no thanks";
/// What the client Sends once its page is registered.
const CLIENT_MSG: &[u8] = b"read me";
/// What the server Sends after its RDMA Write.
const SEND_MSG: &[u8] = b"write done";

const EV_ADDR: u32 = 1 << 0;
const EV_ROUTE: u32 = 1 << 1;
const EV_ESTABLISHED: u32 = 1 << 2;
const EV_REJECTED: u32 = 1 << 3;
const EV_DISCONNECTED: u32 = 1 << 4;
const EV_ERROR: u32 = 1 << 5;

/// The server's endpoint: one Receive, and one Send with room for its
/// Write; two rdma_rw contexts (the Reads) at once.
const SERVER_SIZES: EpSizes = EpSizes {
    recvs: 1,
    recv_len: 64,
    sends: 1,
    send_len: 64,
    send_extra: 4,
    rw_ctxs: 2,
    send_sge: 1,
};

/// The client's: one Receive, one Send, and room for a REG_MR.
const CLIENT_SIZES: EpSizes = EpSizes {
    recvs: 1,
    recv_len: 64,
    sends: 1,
    send_len: 64,
    send_extra: 2,
    rw_ctxs: 0,
    send_sge: 1,
};

/// What one side has seen, on its [`Board`].
#[derive(Default)]
struct Seen {
    /// CM events, as `EV_*` bits.
    events: u32,
    /// The private data of ESTABLISHED.
    private: [u8; 8],
    /// A completed Receive, and a Receive buffer whose Reads completed,
    /// each with whether it succeeded.
    recv: Option<(Parked<RecvKind>, bool)>,
    reads: Option<(Parked<RecvKind>, bool)>,
    /// Whether the last Send, and the last REG_MR, succeeded.
    sent: Option<bool>,
    reg: Option<bool>,
}

/// What a listener has seen, on its [`Board`].
#[derive(Default)]
struct Requests {
    /// Connection requests, and whether the last began with
    /// [`CLIENT_PVT`].
    requests: u32,
    private_ok: bool,
    /// A request deferred, for the test thread to accept.
    pending: Option<PendingConn>,
}

/// What a handler saw, waited for on a condition variable.
#[pin_data]
struct Board<S> {
    #[pin]
    seen: Mutex<S>,
    #[pin]
    cv: CondVar,
}

impl<S: Default + Unpin> Board<S> {
    fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            seen <- new_mutex!(S::default(), "rpcrdma_rs_kunit_seen"),
            cv <- new_condvar!("rpcrdma_rs_kunit_cv"),
        })
    }

    /// Changes what was seen and wakes the waiter.
    fn note(&self, f: impl FnOnce(&mut S)) {
        f(&mut self.seen.lock());
        self.cv.notify_all();
    }

    /// Waits until `ready` says yes, at most [`TIMEOUT_MS`]; `what` names
    /// the wait in the failure.
    fn wait<T>(
        &self,
        what: &'static str,
        mut ready: impl FnMut(&mut S) -> Option<Check<T>>,
    ) -> Check<T> {
        let mut left = msecs_to_jiffies(TIMEOUT_MS);
        let mut seen = self.seen.lock();
        loop {
            if let Some(res) = ready(&mut seen) {
                return res;
            }
            match self.cv.wait_interruptible_timeout(&mut seen, left) {
                CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                CondVarTimeoutResult::Timeout => {
                    pr_err!("kunit: timed out: {what}\n");
                    return Err("timed out");
                }
                CondVarTimeoutResult::Signal { .. } => return Err("interrupted"),
            }
        }
    }
}

owner! {
    /// One side of a connection: its endpoint (first, [`owner!`]) and
    /// what its handlers saw.
    #[pin_data]
    struct Peer {
        endpoint ep;
        /// Where the client's REG_MRs complete.
        reg_cqe: CqEntry<Peer>,
        #[pin]
        board: Board<Seen>,
    }
}

crate::impl_has_cq_entry!(Peer, 0, reg_cqe);

impl Peer {
    fn new() -> Check<Pin<KBox<Self>>> {
        KBox::pin_init(
            pin_init!(Self {
                ep: SetOnce::new(),
                reg_cqe: CqEntry::new(),
                board <- Board::new(),
            }),
            GFP_KERNEL,
        )
        .map_err(|_| "no memory")
    }

    /// Waits for the CM event `want`; fails early on an error event it
    /// did not want.
    fn wait_event(&self, want: u32, what: &'static str) -> Check {
        self.board.wait(what, |s| {
            if s.events & want != 0 {
                Some(Ok(()))
            } else if s.events & (EV_ERROR | EV_REJECTED) & !want != 0 {
                Some(Err(what))
            } else {
                None
            }
        })
    }

    /// Waits for a completion that `take` finds; it must be a success.
    fn wait_ok<T>(
        &self,
        what: &'static str,
        mut take: impl FnMut(&mut Seen) -> Option<(T, bool)>,
    ) -> Check<T> {
        self.board.wait(what, |s| {
            take(s).map(|(v, ok)| if ok { Ok(v) } else { Err(what) })
        })
    }

    fn ep(&self) -> Check<&Endpoint<Self>> {
        self.ep.as_ref().ok_or("no endpoint")
    }

    fn saw(&self, bit: u32) -> bool {
        self.board.seen.lock().events & bit != 0
    }
}

impl CmHandler for Peer {
    fn event(&self, event: CmEvent) {
        let bit = match event {
            CmEvent::AddrResolved => EV_ADDR,
            CmEvent::RouteResolved => EV_ROUTE,
            CmEvent::Established { private, .. } => {
                self.board.note(|s| s.private = private);
                EV_ESTABLISHED
            }
            CmEvent::Rejected { .. } => EV_REJECTED,
            CmEvent::Disconnected => EV_DISCONNECTED,
            CmEvent::Other(_) | CmEvent::AddrChange => return,
            _ => EV_ERROR,
        };
        self.board.note(|s| s.events |= bit);
    }
}

owner! {
    /// The server's listener (first, [`owner!`]), in an owner of its own:
    /// one holding an endpoint too could reach either from the other's
    /// handlers while it is dropped.
    #[pin_data]
    struct Lobby {
        listener listener;
        /// Whether connection requests are deferred to be accepted, or
        /// rejected.
        accept: bool,
        #[pin]
        board: Board<Requests>,
    }
}

impl Lobby {
    fn new(accept: bool) -> Check<Pin<KBox<Self>>> {
        KBox::pin_init(
            pin_init!(Self {
                listener <- ListenSlot::new(),
                accept,
                board <- Board::new(),
            }),
            GFP_KERNEL,
        )
        .map_err(|_| "no memory")
    }

    /// Whether one request came, with the client's private data.
    fn one_request(&self) -> Check {
        let s = self.board.seen.lock();
        if s.requests != 1 || !s.private_ok {
            return Err("server: request or its private data missing");
        }
        Ok(())
    }
}

impl ListenHandler for Lobby {
    fn connect_request(&self, req: ConnRequest<'_>) {
        let ok = req.private().starts_with(CLIENT_PVT);
        self.board.note(|s| {
            s.requests += 1;
            s.private_ok = ok;
        });
        if !self.accept {
            req.reject(REJECT_PVT);
            return;
        }
        // A second request is rejected: `keep` gives it back.
        req.defer(|pending| {
            let mut s = self.board.seen.lock();
            if s.pending.is_some() || s.requests > 1 {
                return Err(pending);
            }
            s.pending = Some(pending);
            Ok(())
        });
        self.board.cv.notify_all();
    }
}

impl EpOwner for Peer {
    type RecvState = ();
    type SendState = ();

    fn received(&self, buf: RecvBuf<'_, Self>, wc: &Wc<'_>) {
        let p = buf.park();
        self.board.note(|s| s.recv = Some((p, wc.ok())));
    }

    fn reads_done(&self, buf: RecvBuf<'_, Self>, wc: &Wc<'_>) {
        let p = buf.park();
        self.board.note(|s| s.reads = Some((p, wc.ok())));
    }

    fn sent(&self, bufs: Retired<'_, Self>, wc: &Wc<'_>) {
        // The buffers stay with the endpoint: one Send each way is all.
        for mut buf in bufs {
            buf.writes().release();
        }
        self.board.note(|s| s.sent = Some(wc.ok()));
    }
}

impl CqHandler for Peer {
    fn done(&self, wc: &Wc<'_>) {
        self.board.note(|s| s.reg = Some(wc.ok()));
    }
}

/// Bytes that differ from their neighbours and from those 256 bytes
/// away: a piece moved to the wrong offset shows.
fn read_pattern(i: usize) -> u8 {
    (i as u8).wrapping_mul(7).wrapping_add(1) ^ ((i >> 8) as u8).wrapping_mul(0x35)
}

fn write_pattern(i: usize) -> u8 {
    !(i as u8) ^ 0x5a ^ ((i >> 8) as u8).wrapping_mul(0x1d)
}

fn pattern(f: fn(usize) -> u8) -> [u8; LEN] {
    let mut buf = [0u8; LEN];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = f(i);
    }
    buf
}

/// Whether the first [`LEN`] bytes of `pages` are `f(i)`.
fn matches(pages: &PageRefs, f: fn(usize) -> u8) -> Check<bool> {
    let mut buf = [0u8; LEN];
    pages.copy_out(0, &mut buf).map_err(|_| "read pages")?;
    Ok(buf == pattern(f))
}

/// The address from `kunit_addr` with `port`, or `None` when unset.
fn test_addr(port: u16) -> Option<SockAddr> {
    let mut ss = sys::__kernel_sockaddr_storage::default();
    // SAFETY: `ss` is writable, and larger than the `sockaddr_in` the
    // helper fills.
    let rc = unsafe { sys::rpcrdma_rs_kunit_addr(core::ptr::from_mut(&mut ss).cast(), port) };
    (rc == 0).then(|| SockAddr::from_storage(ss))
}

/// Whether the suite can run: `kunit_addr` is set.
pub(crate) fn configured() -> bool {
    let ok = test_addr(ACCEPT_PORT).is_some();
    if !ok {
        pr_info!("kunit: rxe loopback checks skipped (no kunit_addr)\n");
    }
    ok
}

/// Resolves `addr` for `client`, builds its endpoint on the device found
/// and starts connecting, with [`CLIENT_PVT`]: the Send tokens.
fn dial(client: Pin<&Peer>, addr: &SockAddr) -> Check<KVec<Parked<SendKind>>> {
    let dialing =
        Dialing::new(Net::init(), client.get_ref(), addr).map_err(|_| "client: resolve_addr")?;
    client.wait_event(EV_ADDR, "client: address resolution")?;
    let id = dialing.id();
    id.resolve_route().map_err(|_| "client: resolve_route")?;
    client.wait_event(EV_ROUTE, "client: route resolution")?;
    let dev = id.device().map_err(|_| "client: no device")?;
    let pd = Pd::new(&dev).map_err(|_| "client: pd")?;
    let (ep, _, sends) = Endpoint::new(&dev, pd, CLIENT_SIZES).map_err(|_| "client: endpoint")?;
    if !client.ep.populate(ep) {
        return Err("client: endpoint twice");
    }
    let mut param = ConnParam::new(CLIENT_PVT, 4, 0, 6, 0);
    Endpoint::connect(client, dialing, &mut param).map_err(|_| "client: connect")?;
    Ok(sends)
}

/// Registers the first [`LEN`] bytes of `pages` in a new MR of the
/// client's, kept in `mrs`, for the peer to read or write (`writing`),
/// and waits for the registration to complete.
fn register(
    client: &Peer,
    pages: &PageRefs,
    mrs: &mut KVec<Mr>,
    writing: bool,
) -> Check<Registered> {
    let ep = client.ep()?;
    let gate = ep.id().and_then(|id| id.gate()).ok_or("client: no QP")?;
    let mut segs = KVec::new();
    pages
        .segs(&mut segs, 0, LEN)
        .map_err(|_| "client: no page")?;
    let mut mr = Mr::new(ep.pd(), ep.device(), 1).map_err(|_| "client: MR")?;
    // SAFETY: The pages outlive the MR: the caller declares them before
    // `mrs`, whose MRs go once the client's QP is drained, so the peer
    // cannot use the key afterwards. The CPU reaches the pages only while
    // no Read or Write of them is outstanding.
    let reg = unsafe { mr.map(&segs, writing) }.map_err(|_| "client: map MR")?;
    let mut wr = sys::ib_reg_wr::default();
    mr.reg_wr(&mut wr, writing, client.reg_cqe.as_ptr());
    wr.wr.send_flags = sys::ib_send_flags_IB_SEND_SIGNALED;
    mrs.push(mr, GFP_KERNEL).map_err(|_| "client: no memory")?;
    // SAFETY: One valid work request, consumed by the post, that
    // completes on `reg_cqe`, in `client`, which outlives its endpoint and
    // so every completion of the QP; the MR stays in `mrs` until the QP is
    // drained.
    let posted = unsafe { gate.post_send(&wr.wr) };
    let res = posted.map_err(|_| "client: post REG_MR").and_then(|()| {
        client.wait_ok("client: REG_MR failed", |s| s.reg.take().map(|ok| ((), ok)))
    });
    if res.is_err() {
        ep.shutdown();
    }
    res.map(|()| reg)
}

/// Posts a Send of `msg` on `peer`'s endpoint and waits for it.
fn send(peer: &Peer, sends: &mut KVec<Parked<SendKind>>, msg: &[u8]) -> Check {
    let ep = peer.ep()?;
    let p = sends.pop().ok_or("no Send buffer")?;
    let mut buf = ep.send(p).ok_or("stray Send buffer")?;
    buf.buf()
        .get_mut(..msg.len())
        .ok_or("Send buffer too small")?
        .copy_from_slice(msg);
    ep.post_send(buf, msg.len(), None, |_| true)
        .map_err(|_| "post Send")?;
    peer.wait_ok("Send failed", |s| s.sent.take().map(|ok| ((), ok)))
}

/// Listens, connects, accepts with private data, then the server
/// RDMA-Reads the client's page and RDMA-Writes another pattern into it,
/// in one post with a Send the client receives.
pub(crate) fn accept_read_write() -> Check {
    let addr = test_addr(ACCEPT_PORT).ok_or("no kunit_addr")?;
    // Declared first, dropped last: the page outlives the MRs, and they
    // the endpoints' QPs.
    let mut page = PageRefs::new();
    let mut mrs = KVec::new();
    let lobby = Lobby::new(true)?;
    let server = Peer::new()?;
    let client = Peer::new()?;
    Listener::start(lobby.as_ref(), Net::init(), &addr, 4).map_err(|_| "listen")?;
    let (mut res, last) = match exchange(
        &lobby,
        server.as_ref(),
        client.as_ref(),
        &addr,
        &mut page,
        &mut mrs,
    ) {
        Ok(last) => (Ok(()), Some(last)),
        Err(e) => (Err(e), None),
    };
    // Teardown, whatever happened: the client's DREQ reaches the server,
    // whose own disconnect answers it with the DREP the client waits for.
    if client.saw(EV_ESTABLISHED) && server.saw(EV_ESTABLISHED) {
        if let Some(id) = client.ep.as_ref().and_then(|ep| ep.id()) {
            id.disconnect();
        }
        let down = server.wait_event(EV_DISCONNECTED, "server: no DISCONNECTED");
        if let Some(id) = server.ep.as_ref().and_then(|ep| ep.id()) {
            id.disconnect();
        }
        let down = down.and(client.wait_event(EV_DISCONNECTED, "client: no DISCONNECTED"));
        res = res.and(down);
    }
    // Draining the client's QP and dropping its MRs (DMA-unmapping the
    // page) makes the server's Write visible to the CPU on any device.
    for peer in [&client, &server] {
        if let Some(ep) = peer.ep.as_ref() {
            ep.shutdown();
        }
    }
    if let (Some(last), Ok(ep)) = (last, client.ep()) {
        res = res.and(refused_after_shutdown(ep, last));
    }
    mrs.clear();
    if res.is_ok() && !matches(&page, write_pattern)? {
        res = Err("client: RDMA Write left the wrong bytes");
    }
    res
}

/// A Receive posted after [`Endpoint::shutdown`] must be refused: the
/// QP's gate is closed, so nothing reaches the drained QP, whose
/// completion would come after the endpoint freed the buffer.
fn refused_after_shutdown(ep: &Endpoint<Peer>, p: Parked<RecvKind>) -> Check {
    let buf = ep.recv(p).ok_or("client: stray Receive")?;
    match ep.post_recvs(core::iter::once(buf)) {
        Err(e) if e == ESHUTDOWN => Ok(()),
        Err(_) => Err("client: a Receive after shutdown failed, not with ESHUTDOWN"),
        Ok(()) => Err("client: a Receive was posted after shutdown"),
    }
}

/// The exchange of [`accept_read_write`]: the client's last Receive
/// buffer, parked.
fn exchange(
    lobby: &Lobby,
    server: Pin<&Peer>,
    client: Pin<&Peer>,
    addr: &SockAddr,
    page: &mut PageRefs,
    mrs: &mut KVec<Mr>,
) -> Check<Parked<RecvKind>> {
    let mut client_sends = dial(client, addr)?;
    // The request, deferred by the listener, accepted from here.
    let pending = lobby
        .board
        .wait("server: no request", |s| s.pending.take().map(Ok))?;
    let dev = pending.device().map_err(|_| "server: no device")?;
    let pd = Pd::new(&dev).map_err(|_| "server: pd")?;
    let (ep, _, mut server_sends) =
        Endpoint::new(&dev, pd, SERVER_SIZES).map_err(|_| "server: endpoint")?;
    if !server.ep.populate(ep) {
        return Err("server: endpoint twice");
    }
    let mut param = ConnParam::new(SERVER_PVT, pending.initiator_depth().min(4), 4, 6, 0);
    Endpoint::accept(server, pending, &mut param).map_err(|_| "server: accept")?;
    client.wait_event(EV_ESTABLISHED, "client: not established")?;
    server.wait_event(EV_ESTABLISHED, "server: not established")?;
    if client.board.seen.lock().private != *SERVER_PVT {
        return Err("client: wrong private data in ESTABLISHED");
    }
    lobby.one_request()?;
    let sep = server.ep()?;
    let cep = client.ep()?;

    // RDMA Read of the client's page, which a Send of the client's
    // announces (a Call with Read chunks).
    page.alloc(1).map_err(|_| "client: no page")?;
    page.copy_in(0, &pattern(read_pattern))
        .map_err(|_| "client: write page")?;
    let reg = register(&client, page, mrs, false)?;
    send(&client, &mut client_sends, CLIENT_MSG)?;
    let p = server.wait_ok("server: Receive failed", |s| s.recv.take())?;
    let mut buf = sep.recv(p).ok_or("server: stray Receive")?;
    let room = {
        let (bytes, (), mut reads) = buf.reads().map_err(|_| "server: no QP")?;
        if bytes != CLIENT_MSG {
            return Err("server: the client's Send brought the wrong bytes");
        }
        reads.pages().alloc(1).map_err(|_| "server: no page")?;
        // Two Reads, one per half of the page, chained in one post with
        // only the last signalled (a Call's Read chunks): its completion
        // must find both halves in place.
        let half = LEN / 2;
        reads
            .add(0, half, reg.iova, reg.rkey)
            .map_err(|_| "server: rdma_rw_ctx_init (Read)")?;
        reads
            .add(half, LEN - half, reg.iova + half as u64, reg.rkey)
            .map_err(|_| "server: rdma_rw_ctx_init (Read)")?;
        reads.room()
    };
    if buf.parts().2.wrs() < 2 {
        return Err("server: Read contexts without work requests");
    }
    if sep.post_reads(buf, room).is_err() {
        return Err("server: post Reads");
    }
    let p = server.wait_ok("server: RDMA Read failed", |s| s.reads.take())?;
    let mut buf = sep.recv(p).ok_or("server: stray Reads")?;
    let (_, (), rw) = buf.parts();
    // Unmapped, the Read's data is the CPU's; the contexts' memory stays
    // for the next Reads, as a connection reuses it.
    rw.unmap();
    if rw.spares() != 2 {
        return Err("server: recycled Read contexts not kept");
    }
    if !matches(rw.pages(), read_pattern)? {
        return Err("server: RDMA Read brought the wrong bytes");
    }

    // RDMA Write of another pattern into it, posted unsignalled in front
    // of a Send: only the Send completes, and the client's Receive of it
    // comes after the Write's data (a Reply's Write chunk and the Reply
    // itself).
    let reg = register(&client, page, mrs, true)?;
    let p = server_sends.pop().ok_or("server: no Send buffer")?;
    let mut sbuf = sep.send(p).ok_or("server: stray Send buffer")?;
    let w = sbuf.writes().pages();
    w.alloc(1).map_err(|_| "server: no page")?;
    w.copy_in(0, &pattern(write_pattern))
        .map_err(|_| "server: write page")?;
    sbuf.add_write(0, LEN, reg.iova, reg.rkey)
        .map_err(|_| "server: rdma_rw_ctx_init (Write)")?;
    if sbuf.writes().wrs() == 0 {
        return Err("server: Write context without work requests");
    }
    sbuf.buf()
        .get_mut(..SEND_MSG.len())
        .ok_or("server: Send buffer too small")?
        .copy_from_slice(SEND_MSG);
    sep.post_send(sbuf, SEND_MSG.len(), None, |_| true)
        .map_err(|_| "server: post Write and Send")?;
    server.wait_ok("server: Write and Send failed", |s| {
        s.sent.take().map(|ok| ((), ok))
    })?;
    let p = client.wait_ok("client: Receive failed", |s| s.recv.take())?;
    let buf = cep.recv(p).ok_or("client: stray Receive")?;
    if buf.bytes() != SEND_MSG {
        return Err("client: the Send after the Write brought the wrong bytes");
    }
    // rxe moves the bytes with the CPU (virtual DMA): the Write's data is
    // in place when its Send arrives, before the MR is unmapped.
    if !matches(page, write_pattern)? {
        return Err("client: the Send arrived before the Write's data");
    }
    Ok(buf.park())
}

/// A listener that rejects: the client sees REJECTED.
pub(crate) fn reject() -> Check {
    rejecting_listener(REJECT_PORT, false)
}

/// A listener that listened again on a new id ([`Listener::rebind`], what
/// an address change asks for) takes requests on the same address; the
/// old id is gone, or the new one could not have bound it.
pub(crate) fn rebind() -> Check {
    rejecting_listener(REBIND_PORT, true)
}

/// A rejecting listener on `port`, listening again first if `rebind`,
/// receives one request, and its client sees REJECTED.
fn rejecting_listener(port: u16, rebind: bool) -> Check {
    let addr = test_addr(port).ok_or("no kunit_addr")?;
    let lobby = Lobby::new(false)?;
    let client = Peer::new()?;
    Listener::start(lobby.as_ref(), Net::init(), &addr, 4).map_err(|_| "listen")?;
    if rebind {
        Listener::rebind(lobby.as_ref(), Net::init()).map_err(|_| "listen again")?;
    }
    let res = dial(client.as_ref(), &addr)
        .and_then(|_| client.wait_event(EV_REJECTED, "client: not rejected"));
    if let Some(ep) = client.ep.as_ref() {
        ep.shutdown();
    }
    res?;
    lobby.one_request()
}
