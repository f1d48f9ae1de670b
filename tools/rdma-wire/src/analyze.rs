//! Turns RoCEv2 packets into RPC-over-RDMA messages: Sends reassembled per
//! (source, destination, QP) by PSN, decoded with the module's own
//! `rpcrdma-proto` decoders, and checked against the rules a capture lets
//! one decide. RDMA Writes and Read requests are matched against the chunks
//! the Calls advertised.
//!
//! A capture may begin in the middle of a connection: then a Reply whose
//! Call came earlier, or a Write into a chunk advertised earlier, is no
//! evidence of anything. Such findings are flagged only on connections
//! whose CM exchange (REQ and REP) the capture holds, or everywhere with
//! `strict`; otherwise they are counted as unverified.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::net::IpAddr;

use rpcrdma_proto::chunk::ChunkLists;
use rpcrdma_proto::error::DecodeError;
use rpcrdma_proto::header::{self, Header, MsgType};
use rpcrdma_proto::limits::Limits;
use rpcrdma_proto::pvt::PrivateData;
use rpcrdma_proto::{v1, v2};

use crate::packet::{op, Packet};

/// What the user told us about the capture.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Inline threshold to hold every message to where the capture holds
    /// no CM exchange to learn it from.
    pub inline: Option<u32>,
    /// Treat every connection as seen from its start.
    pub strict: bool,
}

/// The decoder's own bounds: wider than the module's local policy, since
/// this tool judges the RFC, not our configuration. Positions must still
/// be XDR-aligned (RFC 8166 §3.4.5).
const LIMITS: Limits = Limits {
    max_segments_per_chunk: 4096,
    max_chunks_per_list: 1024,
    max_total_bytes: u64::MAX,
    position_alignment: 4,
};

/// Largest Send we reassemble: RFC 8797 cannot express a receive buffer
/// above 256 KiB.
const MAX_SEND: usize = 1 << 20;
/// Most outstanding Calls remembered per connection.
const MAX_CALLS: usize = 1 << 16;

/// Counters over the whole capture, printed by `--summary`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Messages by "v1 MSG", "v2 NOMSG", ..., "undecodable".
    pub by_kind: BTreeMap<String, u64>,
    pub calls: u64,
    pub replies: u64,
    pub v1: u64,
    pub v2: u64,
    pub rdma_writes: u64,
    pub rdma_reads: u64,
    pub cm: u64,
    /// Messages (or RDMA operations) that broke a rule.
    pub flagged: u64,
    /// Replies, Writes and Reads that could not be matched because the
    /// capture began after their Call.
    pub unverified: u64,
    /// Packets whose message began before the capture did.
    pub partial: u64,
    pub retransmits: u64,
    /// RoCEv2 packets of transports or operations not followed (UC, UD
    /// other than CM, atomics, CNPs...).
    pub other_opcodes: u64,
    pub frames: u64,
    pub not_roce: u64,
}

impl Summary {
    /// The `--summary` line.
    pub fn line(&self) -> String {
        let mut s = format!(
            "summary: frames {} messages {} v1 {} v2 {} calls {} replies {} rdma_writes {} rdma_reads {} cm {} flagged {} unverified {} partial {} retransmits {} other_opcodes {} not_roce {}",
            self.frames,
            self.by_kind.values().sum::<u64>(),
            self.v1,
            self.v2,
            self.calls,
            self.replies,
            self.rdma_writes,
            self.rdma_reads,
            self.cm,
            self.flagged,
            self.unverified,
            self.partial,
            self.retransmits,
            self.other_opcodes,
            self.not_roce
        );
        for (kind, n) in &self.by_kind {
            let _ = write!(s, " [{kind}] {n}");
        }
        s
    }
}

type Flow = (IpAddr, IpAddr, u32);

/// A Send being reassembled.
struct Partial {
    ts: f64,
    next_psn: u32,
    buf: Vec<u8>,
    wire_len: usize,
    truncated: bool,
    packets: u32,
}

/// A connection whose CM exchange the capture holds.
struct CmConn {
    client: (IpAddr, u32),
    server: (IpAddr, u32),
    client_pvt: Option<PrivateData>,
    server_pvt: Option<PrivateData>,
}

/// How messages are grouped into connections.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Conn {
    /// Known from its CM exchange.
    Cm(usize),
    /// Only the two addresses are known (ordered).
    Ips(IpAddr, IpAddr),
}

/// One advertised segment of a Call: what the Responder may touch.
#[derive(Clone, Copy, Debug)]
struct Seg {
    handle: u32,
    offset: u64,
    len: u32,
}

impl Seg {
    fn covers(&self, rkey: u32, va: u64, len: u32) -> bool {
        let end = self.offset.saturating_add(u64::from(self.len));
        self.handle == rkey && va >= self.offset && va.saturating_add(u64::from(len)) <= end
    }
}

struct CallRec {
    /// Write list and Reply chunk segments: where the Responder may Write.
    sinks: Vec<Seg>,
    /// Read list segments: where it may Read.
    sources: Vec<Seg>,
    /// Version 2 `rdma_inv_handle`.
    inv_handle: Option<u32>,
}

#[derive(Default)]
struct ConnState {
    strict: bool,
    /// Outstanding Calls by (caller, XID).
    calls: HashMap<(IpAddr, u32), CallRec>,
    /// How many of them each caller has.
    outstanding: HashMap<IpAddr, usize>,
    /// The XIDs of the outstanding Calls advertising each (caller,
    /// handle): a Write or Read is checked against those alone.
    by_handle: HashMap<(IpAddr, u32), Vec<u32>>,
    /// Credits last granted to each Requester.
    granted: HashMap<IpAddr, u32>,
    /// Requesters whose first Call was seen, and those answered ERR_VERS
    /// (the version negotiation of draft-cel-nfsv4-rpcrdma-version-two).
    probed: HashSet<IpAddr>,
    refused: HashSet<IpAddr>,
}

impl ConnState {
    fn outstanding(&self, caller: IpAddr) -> usize {
        self.outstanding.get(&caller).copied().unwrap_or(0)
    }

    fn handles(rec: &CallRec) -> impl Iterator<Item = u32> + '_ {
        rec.sinks.iter().chain(rec.sources.iter()).map(|s| s.handle)
    }

    /// Records a Call (a retransmission replaces the first); `false` when
    /// the connection already holds too many.
    fn insert_call(&mut self, caller: IpAddr, xid: u32, rec: CallRec) -> bool {
        if self.calls.contains_key(&(caller, xid)) {
            self.remove_call(caller, xid);
        } else if self.calls.len() >= MAX_CALLS {
            return false;
        }
        let mut handles: Vec<u32> = Self::handles(&rec).collect();
        handles.sort_unstable();
        handles.dedup();
        for h in handles {
            self.by_handle.entry((caller, h)).or_default().push(xid);
        }
        let n = self.outstanding.entry(caller).or_default();
        *n = n.saturating_add(1);
        self.calls.insert((caller, xid), rec);
        true
    }

    fn remove_call(&mut self, caller: IpAddr, xid: u32) -> Option<CallRec> {
        let rec = self.calls.remove(&(caller, xid))?;
        for h in Self::handles(&rec) {
            if let Some(xids) = self.by_handle.get_mut(&(caller, h)) {
                xids.retain(|&x| x != xid);
                if xids.is_empty() {
                    self.by_handle.remove(&(caller, h));
                }
            }
        }
        if let Some(n) = self.outstanding.get_mut(&caller) {
            *n = n.saturating_sub(1);
        }
        Some(rec)
    }

    /// Whether an outstanding Call of `caller` advertised [va, va + len)
    /// under `rkey`: in its Write list or Reply chunk for a Write, in its
    /// Read list for a Read.
    fn covers(&self, caller: IpAddr, rkey: u32, va: u64, len: u32, write: bool) -> bool {
        let Some(xids) = self.by_handle.get(&(caller, rkey)) else {
            return false;
        };
        xids.iter()
            .filter_map(|x| self.calls.get(&(caller, *x)))
            .any(|c| {
                let segs = if write { &c.sinks } else { &c.sources };
                segs.iter().any(|s| s.covers(rkey, va, len))
            })
    }
}

/// The analysis of one capture.
pub struct Analyzer {
    opts: Options,
    t0: Option<f64>,
    partial: HashMap<Flow, Partial>,
    seen_starts: HashSet<(Flow, u32)>,
    cm_conns: Vec<CmConn>,
    endpoints: HashMap<(IpAddr, u32), usize>,
    pending_req: HashMap<(IpAddr, IpAddr, u32), (u32, Option<PrivateData>)>,
    conns: HashMap<Conn, ConnState>,
    /// One line per message, RDMA operation and CM message.
    pub lines: Vec<String>,
    pub summary: Summary,
}

fn proc_name(h: &Header<'_>) -> &'static str {
    match h {
        Header::V1(h) => match h.body {
            v1::Body::Msg(_) => "MSG",
            v1::Body::Nomsg(_) => "NOMSG",
            v1::Body::Error(_) => "ERROR",
        },
        Header::V2(h) => match h.body {
            v2::Body::Msg(_) => "MSG",
            v2::Body::Nomsg(_) => "NOMSG",
            v2::Body::Error(_) => "ERROR",
            v2::Body::Optional(_) => "OPTIONAL",
        },
    }
}

/// Segments of a chunk summary, `handle:length`, the first few of each.
fn segs_text<I: Iterator<Item = (u32, u32)>>(segs: I) -> String {
    let all: Vec<_> = segs.collect();
    let mut s = all
        .iter()
        .take(4)
        .map(|(h, l)| format!("{h:#x}:{l}"))
        .collect::<Vec<_>>()
        .join(",");
    if all.len() > 4 {
        let _ = write!(s, ",+{}", all.len().saturating_sub(4));
    }
    s
}

fn lists_text(lists: &ChunkLists<'_>) -> String {
    let mut s = String::new();
    if !lists.reads.is_empty() {
        let chunks: Vec<_> = lists
            .reads
            .chunks()
            .map(|c| {
                format!(
                    "pos {} {}",
                    c.position(),
                    segs_text(c.segments().map(|r| (r.segment.handle, r.segment.length)))
                )
            })
            .collect();
        let _ = write!(s, " read=[{}]", chunks.join("; "));
    }
    if !lists.writes.is_empty() {
        let chunks: Vec<_> = lists
            .writes
            .chunks()
            .map(|c| segs_text(c.segments().map(|g| (g.handle, g.length))))
            .collect();
        let _ = write!(s, " write=[{}]", chunks.join("; "));
    }
    if let Some(reply) = lists.reply {
        let _ = write!(
            s,
            " reply=[{}]",
            segs_text(reply.segments().map(|g| (g.handle, g.length)))
        );
    }
    s
}

fn sinks_of(lists: &ChunkLists<'_>) -> Vec<Seg> {
    let seg = |g: rpcrdma_proto::chunk::Segment| Seg {
        handle: g.handle,
        offset: g.offset,
        len: g.length,
    };
    let mut v: Vec<Seg> = lists
        .writes
        .chunks()
        .flat_map(|c| c.segments())
        .map(seg)
        .collect();
    if let Some(reply) = lists.reply {
        v.extend(reply.segments().map(seg));
    }
    v
}

fn sources_of(lists: &ChunkLists<'_>) -> Vec<Seg> {
    lists
        .reads
        .segments()
        .map(|r| Seg {
            handle: r.segment.handle,
            offset: r.segment.offset,
            len: r.segment.length,
        })
        .collect()
}

/// Whether `psn` comes before `next` in 24-bit PSN order.
fn psn_before(psn: u32, next: u32) -> bool {
    let d = next.wrapping_sub(psn) & 0x00ff_ffff;
    d != 0 && d < 0x0080_0000
}

impl Analyzer {
    pub fn new(opts: Options) -> Self {
        Self {
            opts,
            t0: None,
            partial: HashMap::new(),
            seen_starts: HashSet::new(),
            cm_conns: Vec::new(),
            endpoints: HashMap::new(),
            pending_req: HashMap::new(),
            conns: HashMap::new(),
            lines: Vec::new(),
            summary: Summary::default(),
        }
    }

    fn rel(&mut self, ts: f64) -> f64 {
        let t0 = *self.t0.get_or_insert(ts);
        ts - t0
    }

    /// A frame that is not a RoCEv2 packet we follow.
    pub fn skip(&mut self, ts: f64, why: crate::packet::Skip) {
        use crate::packet::Skip;
        self.summary.frames = self.summary.frames.saturating_add(1);
        match why {
            Skip::NotRoce => self.summary.not_roce = self.summary.not_roce.saturating_add(1),
            Skip::OtherOpcode => {
                self.summary.other_opcodes = self.summary.other_opcodes.saturating_add(1)
            }
            Skip::Malformed(what) => {
                let t = self.rel(ts);
                self.flag_line(format!("{t:.6} RoCEv2 packet malformed: {what}"));
            }
            Skip::Truncated => {
                let t = self.rel(ts);
                self.flag_line(format!("{t:.6} RoCEv2 packet truncated by the capture inside its headers: cannot check"));
            }
        }
    }

    fn flag_line(&mut self, line: String) {
        self.summary.flagged = self.summary.flagged.saturating_add(1);
        self.lines.push(format!("{line} !!"));
    }

    fn emit(&mut self, line: String, flags: &[String]) {
        if flags.is_empty() {
            self.lines.push(line);
        } else {
            self.summary.flagged = self.summary.flagged.saturating_add(1);
            self.lines.push(format!("{line} !! {}", flags.join("; ")));
        }
    }

    fn conn_of(&self, src: IpAddr, dst: IpAddr, dest_qp: u32) -> Conn {
        if let Some(&i) = self.endpoints.get(&(dst, dest_qp)) {
            if let Some(c) = self.cm_conns.get(i) {
                let peer = if c.client == (dst, dest_qp) {
                    c.server
                } else {
                    c.client
                };
                if peer.0 == src {
                    return Conn::Cm(i);
                }
            }
        }
        Conn::Ips(src.min(dst), src.max(dst))
    }

    /// The inline threshold for a message into `dst` on `conn`, if known.
    fn inline_limit(&self, conn: Conn, dst: IpAddr, vers: u32) -> Option<u32> {
        let default = if vers == v2::VERSION {
            v2::DEFAULT_INLINE
        } else {
            v1::DEFAULT_INLINE
        };
        match conn {
            Conn::Cm(i) => {
                let c = self.cm_conns.get(i)?;
                let (sender, receiver) = if c.client.0 == dst {
                    (c.server_pvt, c.client_pvt)
                } else {
                    (c.client_pvt, c.server_pvt)
                };
                // RFC 8797 §5.2: the smaller of the sender's send size and
                // the receiver's receive size; absent data counts as the
                // version's default. A version 2 receiver takes 4096 bytes
                // whatever it advertised (draft "Default Values").
                let recv = receiver
                    .map_or(default, |p| p.recv_size)
                    .max(if vers == v2::VERSION { default } else { 0 });
                Some(sender.map_or(default, |p| p.send_size).min(recv))
            }
            Conn::Ips(..) => self.opts.inline,
        }
    }

    fn state(&mut self, conn: Conn) -> &mut ConnState {
        state_of(&mut self.conns, self.opts.strict, conn)
    }

    /// One RoCEv2 packet.
    pub fn packet(&mut self, p: &Packet<'_>) {
        self.summary.frames = self.summary.frames.saturating_add(1);
        let flow = (p.src, p.dst, p.dest_qp);
        match p.opcode {
            op::UD_SEND_ONLY | op::UD_SEND_ONLY_IMM if p.dest_qp == 1 => self.cm(p),
            op::SEND_FIRST | op::SEND_ONLY | op::SEND_ONLY_IMM | op::SEND_ONLY_INV => {
                if !self.seen_starts.insert((flow, p.psn)) {
                    self.summary.retransmits = self.summary.retransmits.saturating_add(1);
                    return;
                }
                if let Some(old) = self.partial.remove(&flow) {
                    let t = self.rel(old.ts);
                    self.flag_line(format!(
                        "{t:.6} {}->{} qp {:#x} Send of {} packets never completed (packets lost or reordered)",
                        p.src, p.dst, p.dest_qp, old.packets
                    ));
                }
                let part = Partial {
                    ts: p.ts,
                    next_psn: p.psn.wrapping_add(1) & 0x00ff_ffff,
                    buf: p.payload.to_vec(),
                    wire_len: p.payload_len,
                    truncated: p.truncated(),
                    packets: 1,
                };
                if p.opcode == op::SEND_FIRST {
                    self.partial.insert(flow, part);
                } else {
                    self.send_done(flow, part, p.ieth);
                }
            }
            op::SEND_MIDDLE | op::SEND_LAST | op::SEND_LAST_IMM | op::SEND_LAST_INV => {
                let Some(mut part) = self.partial.remove(&flow) else {
                    if self.seen_starts.contains(&(flow, p.psn)) {
                        self.summary.retransmits = self.summary.retransmits.saturating_add(1);
                    } else {
                        self.summary.partial = self.summary.partial.saturating_add(1);
                    }
                    return;
                };
                if psn_before(p.psn, part.next_psn) {
                    self.summary.retransmits = self.summary.retransmits.saturating_add(1);
                    self.partial.insert(flow, part);
                    return;
                }
                if p.psn != part.next_psn {
                    let t = self.rel(part.ts);
                    self.flag_line(format!(
                        "{t:.6} {}->{} qp {:#x} Send missing packets: PSN {:#x} after {:#x}",
                        p.src, p.dst, p.dest_qp, p.psn, part.next_psn
                    ));
                    return;
                }
                part.next_psn = p.psn.wrapping_add(1) & 0x00ff_ffff;
                part.packets = part.packets.saturating_add(1);
                part.wire_len = part.wire_len.saturating_add(p.payload_len);
                part.truncated |= p.truncated();
                if part.wire_len > MAX_SEND {
                    let t = self.rel(part.ts);
                    self.flag_line(format!(
                        "{t:.6} {}->{} qp {:#x} Send longer than {MAX_SEND} bytes: no receive buffer is that large",
                        p.src, p.dst, p.dest_qp
                    ));
                    return;
                }
                part.buf.extend_from_slice(p.payload);
                if p.opcode == op::SEND_MIDDLE {
                    self.partial.insert(flow, part);
                } else {
                    self.send_done(flow, part, p.ieth);
                }
            }
            op::WRITE_FIRST | op::WRITE_ONLY | op::WRITE_ONLY_IMM | op::READ_REQUEST => {
                if !self.seen_starts.insert((flow, p.psn)) {
                    self.summary.retransmits = self.summary.retransmits.saturating_add(1);
                    return;
                }
                if let Some(reth) = p.reth {
                    self.rdma_op(p, reth);
                }
            }
            _ => {}
        }
        // Bound memory on long captures; a retransmit that old is moot.
        if self.seen_starts.len() > 1 << 20 {
            self.seen_starts.clear();
        }
    }

    fn rdma_op(&mut self, p: &Packet<'_>, reth: crate::packet::Reth) {
        let write = p.opcode != op::READ_REQUEST;
        let name = if write {
            self.summary.rdma_writes = self.summary.rdma_writes.saturating_add(1);
            "RDMA_WRITE"
        } else {
            self.summary.rdma_reads = self.summary.rdma_reads.saturating_add(1);
            "RDMA_READ"
        };
        let t = self.rel(p.ts);
        let line = format!(
            "{t:.6} {}->{} qp {:#x} {name} rkey {:#x} va {:#x} len {}",
            p.src, p.dst, p.dest_qp, reth.rkey, reth.va, reth.len
        );
        let conn = self.conn_of(p.src, p.dst, p.dest_qp);
        // The Responder (src) touches memory of the Requester (dst).
        let st = self.state(conn);
        let covered = st.covers(p.dst, reth.rkey, reth.va, reth.len, write);
        let strict = st.strict;
        let mut flags = Vec::new();
        if !covered {
            if strict {
                flags.push(format!(
                    "{name} to rkey {:#x} [{:#x}, +{}) that no outstanding Call from {} advertised",
                    reth.rkey, reth.va, reth.len, p.dst
                ));
            } else {
                self.summary.unverified = self.summary.unverified.saturating_add(1);
            }
        }
        self.emit(line, &flags);
    }

    /// A CM MAD (UD Send to QP1): REQ and REP tie the two QPs of a
    /// connection together and carry the RFC 8797 private data.
    fn cm(&mut self, p: &Packet<'_>) {
        let mad = p.payload;
        let be32 = |at: usize| -> Option<u32> {
            Some(u32::from_be_bytes(
                mad.get(at..at.checked_add(4)?)?.try_into().ok()?,
            ))
        };
        // MAD header: class 0x07 (CM), attribute ID at 16.
        if mad.get(1) != Some(&0x07) {
            return;
        }
        let Some(attr) = be32(16).map(|w| w >> 16) else {
            return;
        };
        // CM message fields start after the 24-byte MAD header
        // (include/rdma/ibta_vol1_c12.h); a CMA REQ's private data starts
        // with a 36-byte cma_hdr before the ULP's.
        const HDR: usize = 24;
        let t = self.rel(p.ts);
        match attr {
            0x0010 => {
                let (Some(comm), Some(qpn)) = (be32(HDR), be32(HDR + 32)) else {
                    return;
                };
                let qpn = qpn >> 8;
                let pvt = mad.get(HDR + 140 + 36..).and_then(PrivateData::parse);
                self.summary.cm = self.summary.cm.saturating_add(1);
                self.lines.push(format!(
                    "{t:.6} {}->{} CM REQ qp {qpn:#x} {}",
                    p.src,
                    p.dst,
                    pvt_text(pvt)
                ));
                if self.pending_req.len() < MAX_CALLS {
                    self.pending_req.insert((p.src, p.dst, comm), (qpn, pvt));
                }
            }
            0x0013 => {
                let (Some(qpn), Some(remote_comm)) = (be32(HDR + 12), be32(HDR + 4)) else {
                    return;
                };
                let qpn = qpn >> 8;
                let pvt = mad.get(HDR + 36..).and_then(PrivateData::parse);
                self.summary.cm = self.summary.cm.saturating_add(1);
                self.lines.push(format!(
                    "{t:.6} {}->{} CM REP qp {qpn:#x} {}",
                    p.src,
                    p.dst,
                    pvt_text(pvt)
                ));
                // A REP goes from the server to the client.
                if let Some((cqpn, cpvt)) = self.pending_req.remove(&(p.dst, p.src, remote_comm)) {
                    let i = self.cm_conns.len();
                    self.cm_conns.push(CmConn {
                        client: (p.dst, cqpn),
                        server: (p.src, qpn),
                        client_pvt: cpvt,
                        server_pvt: pvt,
                    });
                    self.endpoints.insert((p.dst, cqpn), i);
                    self.endpoints.insert((p.src, qpn), i);
                }
            }
            _ => {}
        }
    }

    fn send_done(&mut self, flow: Flow, part: Partial, inv: Option<u32>) {
        let (src, dst, dest_qp) = flow;
        let t = self.rel(part.ts);
        let conn = self.conn_of(src, dst, dest_qp);
        let captured = part.buf.len();
        // A message the capture cut is decoded at its wire length, the
        // missing bytes as zeros, so that positions and lengths are judged
        // against the real payload; the result only counts if the header
        // and the RPC prefix were captured whole.
        let padded;
        let buf = if part.truncated {
            let mut p = part.buf.clone();
            p.resize(part.wire_len.min(MAX_SEND), 0);
            padded = p;
            padded.as_slice()
        } else {
            part.buf.as_slice()
        };
        let mut flags = Vec::new();
        let mut line = format!("{t:.6} {src}->{dst} qp {dest_qp:#x}");
        if part.packets > 1 {
            let _ = write!(line, " ({} packets)", part.packets);
        }
        let header = header::decode(buf, &LIMITS).map_err(Some).and_then(|h| {
            let prefix = if proc_name(&h) == "MSG" { 8 } else { 0 };
            if part.truncated && h.header_len().saturating_add(prefix) > captured {
                Err(None)
            } else {
                Ok(h)
            }
        });
        let h = match header {
            Ok(h) => h,
            Err(e) => {
                bump(&mut self.summary.by_kind, "undecodable".into());
                let fixed = header::peek_fixed(buf);
                if let Some(f) = fixed {
                    let _ = write!(
                        line,
                        " v{} xid {:#010x} credits {}",
                        f.vers, f.xid, f.credits
                    );
                }
                let _ = write!(line, " len {}", part.wire_len);
                if part.truncated {
                    flags.push(format!(
                        "capture truncated ({captured} of {} bytes): cannot decode{}",
                        part.wire_len,
                        e.map(|e| format!(" ({e})")).unwrap_or_default()
                    ));
                } else if let Some(DecodeError::BadVersion { vers }) = e {
                    flags.push(format!("unknown RPC-over-RDMA version {vers}"));
                } else if e == Some(DecodeError::MalformedError) {
                    let code = word_at(buf, 16);
                    flags.push(match code {
                        Some(c) => format!("RDMA_ERROR with unknown code {c} or a short body"),
                        None => "RDMA_ERROR without an error code".into(),
                    });
                } else if let Some(e) = e {
                    flags.push(format!("malformed header: {e}"));
                }
                // An RDMA_ERROR may answer it: remember it as a Call.
                if let Some(f) = fixed {
                    let st = self.state(conn);
                    if !st.calls.contains_key(&(dst, f.xid)) {
                        let rec = CallRec {
                            sinks: Vec::new(),
                            sources: Vec::new(),
                            inv_handle: None,
                        };
                        st.insert_call(src, f.xid, rec);
                    }
                }
                self.emit(line, &flags);
                return;
            }
        };
        let fixed = h.fixed();
        let proc = proc_name(&h);
        bump(&mut self.summary.by_kind, format!("v{} {proc}", fixed.vers));
        if fixed.vers == v2::VERSION {
            self.summary.v2 = self.summary.v2.saturating_add(1);
        } else {
            self.summary.v1 = self.summary.v1.saturating_add(1);
        }
        let (lists, v2dir, inv_handle): (Option<ChunkLists<'_>>, Option<MsgType>, Option<u32>) =
            match &h {
                Header::V1(h) => match h.body {
                    v1::Body::Msg(l) | v1::Body::Nomsg(l) => (Some(l), None, None),
                    v1::Body::Error(_) => (None, None, None),
                },
                Header::V2(h) => match h.body {
                    v2::Body::Msg(c) | v2::Body::Nomsg(c) => {
                        (Some(c.lists), Some(c.direction), Some(c.inv_handle))
                    }
                    v2::Body::Error(_) => (None, None, None),
                    v2::Body::Optional(o) => (None, Some(o.direction), None),
                },
            };
        let is_error = proc == "ERROR";
        let st = self.state(conn);
        let answers_call = st.calls.contains_key(&(dst, fixed.xid));
        // Direction: the RPC message says it for RDMA_MSG; version 2 says
        // it in the header; an error answers a Call; a version 1 NOMSG is
        // a Reply if it answers a Call we saw, a Call if it has a Read
        // list (a Long Call), else a Long Reply.
        let msg_type = if is_error {
            MsgType::Reply
        } else if let Some(d) = v2dir {
            d
        } else if proc == "MSG" {
            h.payload()
                .get(4..)
                .and_then(|b| word_at(b, 0))
                .and_then(MsgType::from_u32)
                .unwrap_or(MsgType::Call)
        } else if answers_call || lists.is_some_and(|l| l.reads.is_empty()) {
            MsgType::Reply
        } else {
            MsgType::Call
        };
        let inline = part.wire_len.saturating_sub(h.header_len());
        let _ = write!(
            line,
            " v{} {proc} {} xid {:#010x} credits {}",
            fixed.vers,
            if msg_type == MsgType::Call {
                "call"
            } else {
                "reply"
            },
            fixed.xid,
            fixed.credits
        );
        if let Some(l) = &lists {
            line.push_str(&lists_text(l));
        }
        if let Some(hd) = inv_handle.filter(|&x| x != 0) {
            let _ = write!(line, " inv_handle {hd:#x}");
        }
        match &h {
            Header::V1(v1::Header {
                body: v1::Body::Error(e),
                ..
            }) => {
                let _ = write!(line, " error {e:?}");
            }
            Header::V2(v2::Header {
                body: v2::Body::Error(e),
                ..
            }) => {
                let _ = write!(line, " error {e:?}");
            }
            _ => {}
        }
        let _ = write!(line, " inline {inline} len {}", part.wire_len);
        if let Some(rkey) = inv {
            let _ = write!(line, " send-invalidate {rkey:#x}");
        }
        if part.truncated {
            let _ = write!(line, " (captured {captured} of {} bytes)", part.wire_len);
        }

        if let Some(limit) = self.inline_limit(conn, dst, fixed.vers) {
            if part.wire_len > usize::try_from(limit).unwrap_or(usize::MAX) {
                flags.push(format!(
                    "{} byte message exceeds the {limit} byte inline threshold into {dst}",
                    part.wire_len
                ));
            }
        }
        let peer_takes_inv = match conn {
            Conn::Cm(i) => self.cm_conns.get(i).map(|c| {
                let receiver = if c.client.0 == dst {
                    c.client_pvt
                } else {
                    c.server_pvt
                };
                receiver.is_some_and(|p| p.remote_invalidate)
            }),
            Conn::Ips(..) => None,
        };
        let st = state_of(&mut self.conns, self.opts.strict, conn);
        let strict = st.strict;
        let summary = &mut self.summary;
        match msg_type {
            MsgType::Call => {
                if inv.is_some() {
                    flags.push("a Call sent with Send With Invalidate".into());
                }
                // Version negotiation: the first Call of a connection whose
                // start was captured is the probe, within version 1's
                // threshold; after ERR_VERS the Requester speaks a version
                // the Responder named.
                let first = st.probed.insert(src) && matches!(conn, Conn::Cm(_));
                let probe_max = usize::try_from(v1::DEFAULT_INLINE).unwrap_or(usize::MAX);
                if first && fixed.vers == v2::VERSION && part.wire_len > probe_max {
                    flags.push(format!(
                        "version 2 probe of {} bytes exceeds version 1's {probe_max}-byte threshold",
                        part.wire_len
                    ));
                }
                if fixed.vers == v2::VERSION && st.refused.contains(&src) {
                    flags.push("a version 2 Call after ERR_VERS on this connection".into());
                }
                summary.calls = summary.calls.saturating_add(1);
                let rec = CallRec {
                    sinks: lists.as_ref().map(sinks_of).unwrap_or_default(),
                    sources: lists.as_ref().map(sources_of).unwrap_or_default(),
                    inv_handle,
                };
                st.insert_call(src, fixed.xid, rec);
                if strict {
                    // RFC 8166 §3.3.1: no more unanswered Calls than the
                    // last grant, and one before the first Reply.
                    let granted = st.granted.get(&src).copied().unwrap_or(1);
                    let n = st.outstanding(src);
                    if n > usize::try_from(granted).unwrap_or(usize::MAX) {
                        flags.push(format!("{n} Calls outstanding, {granted} credits granted"));
                    }
                }
            }
            MsgType::Reply => {
                summary.replies = summary.replies.saturating_add(1);
                let err_vers = match &h {
                    Header::V1(h) => matches!(h.body, v1::Body::Error(v1::RdmaError::Vers { .. })),
                    Header::V2(h) => matches!(h.body, v2::Body::Error(v2::RdmaError::Vers { .. })),
                };
                if err_vers {
                    st.refused.insert(dst);
                }
                if !is_error && fixed.credits == 0 {
                    flags.push("Reply grants 0 credits (RFC 8166 §3.3.1)".into());
                }
                if fixed.credits > 0 {
                    st.granted.insert(dst, fixed.credits);
                }
                match st.remove_call(dst, fixed.xid) {
                    Some(call) => {
                        if let Some(l) = &lists {
                            let stray: Vec<_> = sinks_of(l)
                                .into_iter()
                                .filter(|s| !call.sinks.iter().any(|c| c.handle == s.handle))
                                .map(|s| format!("{:#x}", s.handle))
                                .collect();
                            if !stray.is_empty() {
                                flags.push(format!(
                                    "Reply's Write list or Reply chunk names handles the Call did not advertise: {}",
                                    stray.join(",")
                                ));
                            }
                        }
                        if let Some(rkey) = inv {
                            match call.inv_handle {
                                Some(0) => flags.push(
                                    "Send With Invalidate though the Call's rdma_inv_handle is zero".into(),
                                ),
                                Some(hd) if hd != rkey => flags.push(format!(
                                    "Send With Invalidate of {rkey:#x}, the Call's rdma_inv_handle is {hd:#x}"
                                )),
                                Some(_) => {}
                                None => {
                                    let known = call
                                        .sinks
                                        .iter()
                                        .chain(call.sources.iter())
                                        .any(|s| s.handle == rkey);
                                    if !known {
                                        flags.push(format!(
                                            "Send With Invalidate of {rkey:#x}, a handle the Call did not advertise"
                                        ));
                                    }
                                }
                            }
                        }
                    }
                    None if strict => {
                        flags.push(format!("Reply's XID {:#010x} matches no Call", fixed.xid));
                    }
                    None => summary.unverified = summary.unverified.saturating_add(1),
                }
                if inv.is_some() && peer_takes_inv == Some(false) {
                    flags.push(format!(
                        "Send With Invalidate to {dst}, which did not offer to take it (RFC 8797)"
                    ));
                }
            }
        }
        self.emit(line, &flags);
    }

    /// Sends still being reassembled at the end of the capture: cut by
    /// its end, not broken.
    pub fn finish(&mut self) {
        let n = u64::try_from(self.partial.len()).unwrap_or(u64::MAX);
        self.summary.partial = self.summary.partial.saturating_add(n);
        self.partial.clear();
    }
}

fn state_of(conns: &mut HashMap<Conn, ConnState>, strict: bool, conn: Conn) -> &mut ConnState {
    let strict = strict || matches!(conn, Conn::Cm(_));
    conns.entry(conn).or_insert_with(|| ConnState {
        strict,
        ..ConnState::default()
    })
}

fn bump(map: &mut BTreeMap<String, u64>, key: String) {
    let n = map.entry(key).or_default();
    *n = n.saturating_add(1);
}

fn word_at(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(
        buf.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn pvt_text(p: Option<PrivateData>) -> String {
    match p {
        Some(p) => format!(
            "rpcrdma private data: send {} recv {}{}",
            p.send_size,
            p.recv_size,
            if p.remote_invalidate {
                " remote-invalidate"
            } else {
                ""
            }
        ),
        None => "no rpcrdma private data".into(),
    }
}
