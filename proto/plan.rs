//! Chunk planning: how to convey a Call and its Reply (RFC 8166 §3.5).
//!
//! The rules are those of rpcrdma.ko's `rpcrdma_marshal_req`:
//!
//! - Reply: inline if the largest possible Reply fits the receive inline
//!   threshold (`rpcrdma_results_inline`); else a Write chunk for a
//!   DDP-eligible result whose other parts fit inline
//!   (`rpcrdma_nonpayload_inline`); else a Reply chunk (Long Reply).
//! - Call: inline (RDMA_MSG) if it fits the send inline threshold and the
//!   device's Send SGEs (`rpcrdma_args_inline`); else a Read chunk for a
//!   DDP-eligible argument; else a Position Zero Read chunk (RDMA_NOMSG,
//!   Long Call).
//!
//! "Fits" leaves room for the largest transport header the connection can
//! produce, so the planner works before any memory is registered.
//!
//! The Responder's side, which of the offered chunks a Reply uses, is
//! [`super::responder::plan_reply`].

use super::pvt::InlineThresholds;
use super::v1;
use core::num::NonZeroU64;

/// Octets of the smallest header: fixed fields and three empty lists
/// (`RPCRDMA_HDRLEN_MIN`).
const HDRLEN_MIN: u32 = 28;
/// Octets of one Read list entry (discriminator, position, segment).
const READ_ENTRY: u32 = 24;
/// Octets of one plain segment.
const SEGMENT: u32 = 16;
/// Send SGEs an inline Call needs besides its pages: header, head, tail
/// (`RPCRDMA_MIN_SEND_SGES`).
const MIN_SEND_SGES: u32 = 3;
/// Largest inline threshold rpcrdma.ko supports (`RPCRDMA_MAX_INLINE`).
const MAX_INLINE: u32 = 65536;
/// Most segments one header carries per list (`RPCRDMA_MAX_HDR_SEGS`).
const MAX_HDR_SEGS: u32 = 16;
/// Largest payload a chunk is sized for (1 MiB, as `RPCRDMA_MAX_DATA_SEGS`).
const MAX_PAYLOAD: u32 = 1 << 20;

/// `n / d` rounded up, a zero `d` counting as one. Dividing by a `NonZero`
/// leaves no division-by-zero panic path in the object code (which objtool
/// in 7.3 would not know to be noreturn).
fn div_ceil(n: u64, d: u64) -> u64 {
    let d = NonZeroU64::new(d).unwrap_or(NonZeroU64::MIN);
    (n / d).saturating_add(u64::from(n % d != 0))
}

/// [`div_ceil`] for `u32`.
fn div_ceil_u32(n: u32, d: u32) -> u32 {
    u32::try_from(div_ceil(u64::from(n), u64::from(d))).unwrap_or(u32::MAX)
}

/// The RDMA device's memory registration and Send limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceLimits {
    /// `ib_device_attr.max_fast_reg_page_list_len`: pages per FRWR MR.
    pub max_fast_reg_page_list_len: u32,
    /// `ib_device_attr.max_sge_rd`.
    pub max_sge_rd: u32,
    /// `ib_device_attr.max_send_sge`.
    pub max_send_sge: u32,
    /// The kernel's `PAGE_SIZE`.
    pub page_size: u32,
}

impl DeviceLimits {
    /// Pages in a 1 MiB payload plus one for misalignment
    /// (`RPCRDMA_MAX_DATA_SEGS`).
    pub fn max_data_segs(&self) -> u32 {
        MAX_PAYLOAD
            .checked_div(self.page_size)
            .unwrap_or(0)
            .saturating_add(1)
    }

    /// Pages one MR maps (`re_max_fr_depth` in `frwr_query_device`),
    /// including its quirk: devices with many read SGEs perform best with
    /// that many pages per MR.
    pub fn max_fr_depth(&self) -> u32 {
        let depth = if self.max_sge_rd > MAX_HDR_SEGS {
            self.max_sge_rd
        } else {
            self.max_fast_reg_page_list_len
        };
        depth.clamp(1, self.max_data_segs().max(1))
    }

    /// Segments a header may carry in one chunk (`re_max_rdma_segs`):
    /// enough MRs for a 1 MiB payload, plus head and tail, at most 16.
    pub fn max_rdma_segs(&self) -> u32 {
        div_ceil_u32(self.max_data_segs(), self.max_fr_depth())
            .saturating_add(2)
            .min(MAX_HDR_SEGS)
    }

    /// Send SGEs usable per Send, capped like `frwr_query_device` at what
    /// a 64 KiB inline message can need.
    pub fn send_sges(&self) -> u32 {
        let page_sges = MAX_INLINE.checked_div(self.page_size).unwrap_or(0);
        self.max_send_sge.min(page_sges.saturating_add(3))
    }

    /// Segments (MRs) needed to register `len` bytes starting `offset`
    /// bytes into a page: one per `max_fr_depth` pages.
    pub fn segments_for(&self, offset: u32, len: u32) -> u32 {
        let page = u64::from(self.page_size.max(1));
        let span = u64::from(offset)
            .checked_rem(page)
            .unwrap_or(0)
            .saturating_add(u64::from(len));
        let pages = div_ceil(span, page);
        let mrs = div_ceil(pages, u64::from(self.max_fr_depth()));
        u32::try_from(mrs).unwrap_or(u32::MAX)
    }
}

/// Largest Call header: a full Read list of `maxsegs` entries, an empty
/// Write list and a one-segment Reply chunk
/// (`rpcrdma_max_call_header_size`).
fn max_call_header(maxsegs: u32) -> u32 {
    maxsegs
        .saturating_mul(READ_ENTRY)
        .saturating_add(HDRLEN_MIN + 4 + SEGMENT + 4)
}

/// Largest Reply header: one Write chunk of `maxsegs` segments
/// (`rpcrdma_max_reply_header_size`).
fn max_reply_header(maxsegs: u32) -> u32 {
    maxsegs
        .saturating_mul(SEGMENT)
        .saturating_add(HDRLEN_MIN + 4 + 4)
}

/// Per-connection limits the planner applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Connection {
    /// Largest RPC Call that may go inline (`re_max_inline_send`).
    pub max_inline_send: u32,
    /// Largest RPC Reply that may come back inline (`re_max_inline_recv`).
    pub max_inline_recv: u32,
    /// Send SGEs per Send.
    pub send_sges: u32,
    /// The kernel's `PAGE_SIZE`.
    pub page_size: u32,
}

impl Connection {
    /// Derives the limits from the negotiated thresholds and the device,
    /// as `rpcrdma_set_max_header_sizes` does.
    pub fn new(inline: InlineThresholds, device: &DeviceLimits) -> Self {
        let maxsegs = device.max_rdma_segs();
        Self {
            max_inline_send: inline.send.saturating_sub(max_call_header(maxsegs)),
            max_inline_recv: inline.recv.saturating_sub(max_reply_header(maxsegs)),
            send_sges: device.send_sges(),
            page_size: device.page_size,
        }
    }
}

/// The shape of one RPC, as the transport sees its `xdr_buf`s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Rpc {
    /// Length of the whole Call message (`rq_snd_buf.len`).
    pub call_len: u32,
    /// Bytes of the Call in its page list (`rq_snd_buf.page_len`).
    pub call_page_len: u32,
    /// Offset of the Call's page data (`rq_snd_buf.page_base`).
    pub call_page_base: u32,
    /// The Call's page data is a DDP-eligible argument (`XDRBUF_WRITE`,
    /// e.g. NFS WRITE).
    pub call_ddp: bool,
    /// Largest possible Reply (`rq_rcv_buf.buflen`).
    pub reply_max: u32,
    /// Reply bytes outside its page list (head plus tail).
    pub reply_nonpayload: u32,
    /// The Reply's page data is a DDP-eligible result (`XDRBUF_READ`, e.g.
    /// NFS READ).
    pub reply_ddp: bool,
    /// Direct data placement is allowed: false when RPCSEC_GSS integrity
    /// or privacy must see every byte (`RPCAUTH_AUTH_DATATOUCH`).
    pub ddp_allowed: bool,
}

/// How the Call travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallPlan {
    /// RDMA_MSG, whole Call in the Send.
    Inline,
    /// RDMA_MSG, page data in a Read chunk at its position.
    ReadChunk,
    /// RDMA_NOMSG, whole Call in a Position Zero Read chunk.
    PositionZero,
}

/// How the Reply is to come back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReplyPlan {
    /// Entirely in the Responder's Send.
    Inline,
    /// Result data pushed into a Write chunk, the rest inline.
    WriteChunk,
    /// Whole Reply pushed into a Reply chunk.
    ReplyChunk,
}

/// The planner's decision for one RPC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Plan {
    /// For the Call.
    pub call: CallPlan,
    /// For the Reply.
    pub reply: ReplyPlan,
}

impl Plan {
    /// The version 1 `rdma_proc` of the Call.
    pub fn proc(&self) -> u32 {
        match self.call {
            CallPlan::PositionZero => v1::proc::NOMSG,
            CallPlan::Inline | CallPlan::ReadChunk => v1::proc::MSG,
        }
    }
}

/// Chooses how to convey `rpc` on `conn`.
pub fn plan(rpc: &Rpc, conn: &Connection) -> Plan {
    let reply = if rpc.reply_max <= conn.max_inline_recv {
        ReplyPlan::Inline
    } else if rpc.ddp_allowed && rpc.reply_ddp && rpc.reply_nonpayload < conn.max_inline_recv {
        ReplyPlan::WriteChunk
    } else {
        ReplyPlan::ReplyChunk
    };
    let call = if args_inline(rpc, conn) {
        CallPlan::Inline
    } else if rpc.ddp_allowed && rpc.call_ddp {
        CallPlan::ReadChunk
    } else {
        CallPlan::PositionZero
    };
    Plan { call, reply }
}

/// Whether the Call fits one Send: its length, and one SGE per page its
/// page list touches besides header, head and tail.
fn args_inline(rpc: &Rpc, conn: &Connection) -> bool {
    if rpc.call_len > conn.max_inline_send {
        return false;
    }
    rpc.call_page_len == 0
        || pages_fit_sges(
            rpc.call_page_base,
            rpc.call_page_len,
            conn.page_size,
            conn.send_sges,
        )
}

/// Whether `len` bytes of page data starting `base` bytes into a page,
/// one SGE per page, fit `send_sges` with header, head and tail.
fn pages_fit_sges(base: u32, len: u32, page_size: u32, send_sges: u32) -> bool {
    let page = u64::from(page_size.max(1));
    let offset = u64::from(base).checked_rem(page).unwrap_or(0);
    let pages = div_ceil(offset.saturating_add(u64::from(len)), page);
    pages.saturating_add(u64::from(MIN_SEND_SGES)) <= u64::from(send_sges)
}

/// Pages one MR may cover next: how many of `segs` (each `(offset in its
/// page, length)`, in order) one FRWR registration of at most `depth`
/// pages takes, as rpcrdma.ko's `frwr_map` decides. An MR's pages must
/// be contiguous in its I/O virtual space, so a registration ends at the
/// first segment that does not start a page, or after one that does not
/// end a page. Each segment is expected to lie within one page. Returns
/// at least one while `segs` is not empty.
pub fn mr_segments(
    segs: impl IntoIterator<Item = (u32, u32)>,
    depth: u32,
    page_size: u32,
) -> usize {
    let page = page_size.max(1);
    let depth = usize::try_from(depth.max(1)).unwrap_or(usize::MAX);
    let mut taken = 0usize;
    for (offset, len) in segs {
        if taken >= depth {
            break;
        }
        if taken > 0 && offset != 0 {
            break;
        }
        taken = taken.saturating_add(1);
        let end = u64::from(offset).saturating_add(u64::from(len));
        if end.checked_rem(u64::from(page)).unwrap_or(0) != 0 {
            break;
        }
    }
    taken
}

/// What the Requester offered for one RPC's Reply, to check the Reply
/// against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Offered {
    /// Bytes registered for the Write chunk (payload plus any XDR pad
    /// segment), if one was sent.
    pub write_chunk: Option<u32>,
    /// Bytes registered for the Reply chunk, if one was sent.
    pub reply_chunk: Option<u32>,
}

/// What a Requester does with an RPC answered RDMA2_ERR_CANT_REPLY
/// (draft-cel-nfsv4-rpcrdma-version-two-02, "Transport Errors": "the
/// Requester may retry with the same XID and larger reply resources").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CantReply {
    /// Send the RPC again, same XID, offering its whole receive buffer
    /// as a Reply chunk: the most Reply room it has.
    ResendWithReplyChunk,
    /// Fail the RPC with EIO.
    Fail,
}

/// Decides what to do after RDMA2_ERR_CANT_REPLY naming segment
/// `segment_index` (one-based over the Write list, then the Reply chunk)
/// and `length_needed` bytes for it, to a Call that offered `offered`
/// for a Reply of at most `reply_max` bytes.
///
/// Only an error that says how much is needed is acted on: zeros mean
/// the Responder could not tell, and a retry could fail the same way.
/// The retry offers a Reply chunk over the whole receive buffer, so a
/// Call that already offered one has nothing larger to give, which also
/// ends the retries; and no segment can be given more than `reply_max`.
pub fn on_cant_reply(
    segment_index: u32,
    length_needed: u32,
    offered: &Offered,
    reply_max: u32,
) -> CantReply {
    let says_how_much = segment_index != 0 && length_needed != 0;
    if says_how_much && offered.reply_chunk.is_none() && length_needed <= reply_max {
        CantReply::ResendWithReplyChunk
    } else {
        CantReply::Fail
    }
}

/// `plan` with its Reply to come back in a Reply chunk, as a Call retried
/// after RDMA2_ERR_CANT_REPLY ([`CantReply::ResendWithReplyChunk`]) is
/// planned.
pub fn with_reply_chunk(plan: Plan) -> Plan {
    Plan {
        reply: ReplyPlan::ReplyChunk,
        ..plan
    }
}

/// How a received Reply is laid out, once checked against [`Offered`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReplyShape {
    /// RDMA_MSG, all of it inline.
    Inline,
    /// RDMA_MSG whose result data the Responder wrote into our Write
    /// chunk: `written` bytes (already bounded by what we registered).
    Write {
        /// Bytes written, the sum of the returned segment lengths.
        written: u32,
    },
    /// RDMA_NOMSG: the whole Reply is in our Reply chunk, `written` bytes.
    Reply {
        /// Bytes written into the Reply chunk.
        written: u32,
    },
}

/// A Reply that cannot be accepted: drop it, count it, fail the RPC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BadReply {
    /// More than one Write chunk, or a Read list in a Reply.
    UnexpectedList,
    /// A Write chunk or Reply chunk we did not offer.
    NotOffered,
    /// The Responder claims to have written more than we registered.
    TooLong,
    /// RDMA_NOMSG without a Reply chunk, with nothing written to it, or
    /// with a Write list too.
    BadNomsg,
}

/// Sum of segment lengths, `None` past `u32::MAX`.
fn written(chunk: &super::chunk::WriteChunk<'_>) -> Option<u32> {
    u32::try_from(chunk.total_length()).ok()
}

/// Checks the chunk lists of a Reply against what we offered
/// (`rpcrdma_decode_msg` and `rpcrdma_decode_nomsg`, plus bounds rpcrdma.ko
/// does not check: a written length beyond the registration is refused).
pub fn check_reply(
    nomsg: bool,
    lists: &super::chunk::ChunkLists<'_>,
    offered: &Offered,
) -> Result<ReplyShape, BadReply> {
    if !lists.reads.is_empty() || lists.writes.chunk_count() > 1 {
        return Err(BadReply::UnexpectedList);
    }
    let write = lists.writes.chunks().next();
    if nomsg {
        let (Some(reply), None) = (lists.reply, write) else {
            return Err(BadReply::BadNomsg);
        };
        let room = offered.reply_chunk.ok_or(BadReply::NotOffered)?;
        let written = written(&reply).ok_or(BadReply::TooLong)?;
        if written > room {
            return Err(BadReply::TooLong);
        }
        // The whole Reply travels in the chunk: an empty one is no Reply.
        if written == 0 {
            return Err(BadReply::BadNomsg);
        }
        return Ok(ReplyShape::Reply { written });
    }
    // A server may return the Reply chunk it did not use with nothing
    // written to it, as rpcrdma.ko accepts; data in it is a protocol error.
    if lists.reply.is_some_and(|reply| written(&reply) != Some(0)) {
        return Err(BadReply::UnexpectedList);
    }
    match write {
        None => Ok(ReplyShape::Inline),
        Some(chunk) => {
            let room = offered.write_chunk.ok_or(BadReply::NotOffered)?;
            let written = written(&chunk).ok_or(BadReply::TooLong)?;
            if written > room {
                return Err(BadReply::TooLong);
            }
            Ok(ReplyShape::Write { written })
        }
    }
}

/// Where the inline part of a Reply that used a Write chunk goes in the
/// receive `xdr_buf` (`rpcrdma_inline_fixup`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WriteFixup {
    /// The head shrinks to this length, so that the directly placed data
    /// follows the inline part at once (both `rq_rcv_buf` and
    /// `rq_private_buf`); `None` leaves it.
    pub trim_head: Option<u32>,
    /// Inline bytes copied to the start of the buffer.
    pub head_copy: u32,
    /// Offset in the buffer of the inline bytes after the head: past the
    /// written data and its XDR pad.
    pub rest_offset: u32,
    /// The Reply's length in the buffer.
    pub total: u32,
}

/// Lays out a Reply of `inline_len` inline bytes and `written` bytes in
/// the Write chunk into a receive buffer whose head is `head_len` long and
/// whose page list holds `page_len` bytes. The data written stays where it
/// landed, at the start of the page list; `written` is trimmed to
/// `page_len` (what the Responder wrote past it went into the pad).
pub fn write_fixup(head_len: u32, page_len: u32, inline_len: u32, written: u32) -> WriteFixup {
    let data = written.min(page_len);
    let padded = data.saturating_add(3) & !3;
    let trim_head = (written > 0 && inline_len < head_len).then_some(inline_len);
    let head_copy = inline_len.min(head_len);
    let head_after = trim_head.unwrap_or(head_len);
    let rest = inline_len.saturating_sub(head_copy);
    let rest_offset = head_after.saturating_add(padded);
    WriteFixup {
        trim_head,
        head_copy,
        rest_offset,
        // Like rpcrdma.ko, the length counts the data's XDR pad.
        total: if rest == 0 {
            head_copy.saturating_add(padded)
        } else {
            rest_offset.saturating_add(rest)
        },
    }
}

/// Whether the R_key a Responder invalidated with Send With Invalidate is
/// one of the `ours` this RPC registered (RFC 8166 §3.3.4): its position. Any other key
/// is a protocol violation: the connection is closed.
pub fn remote_invalidation_ok(rkey: u32, ours: impl IntoIterator<Item = u32>) -> Option<usize> {
    ours.into_iter().position(|k| k == rkey)
}

/// Page data below this size is copied into the Send buffer with the rest
/// of an inline Call; from this size on it is DMA-mapped page by page.
/// Copying a few hundred bytes costs less than mapping a page, and a
/// mapped Send must be signalled and its Reply held until the Send
/// completed, because the HCA may still read the RPC's pages.
pub const PULLUP_MAX: u32 = 1024;

/// A byte range of a Call's `xdr_buf`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Range {
    /// Offset from the start of the Call.
    pub offset: u32,
    /// Length in bytes.
    pub len: u32,
}

/// The parts of a Call's `xdr_buf`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CallBuf {
    /// Bytes in the head.
    pub head: u32,
    /// Offset of the page data in its first page.
    pub page_base: u32,
    /// Bytes in the page list.
    pub page_len: u32,
    /// Bytes in the tail.
    pub tail: u32,
}

/// What a Call's Send carries after the transport header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SendLayout {
    /// Copied into the Send buffer, one after the other, behind the
    /// header.
    pub copy: [Range; 2],
    /// Page data sent from the RPC's pages, mapped page by page: one SGE
    /// each, between `copy[0]` and `copy[1]`.
    pub mapped: Option<Range>,
}

/// Lays out the Send of a Call planned as `call` (`rpcrdma_prepare_send_sges`).
///
/// - Inline: the whole Call; its page data mapped when it is at least
///   [`PULLUP_MAX`] bytes and the pages, with header, head and tail, fit
///   `send_sges`; otherwise everything copied (`rpcrdma_noch_pullup`).
/// - Read chunk: head and tail; the page data goes by RDMA Read, and so
///   does its XDR pad, which starts the tail (`rpcrdma_prepare_readch`).
/// - Position Zero: nothing; the whole Call goes by RDMA Read.
pub fn send_layout(call: CallPlan, buf: &CallBuf, send_sges: u32, page_size: u32) -> SendLayout {
    let head = Range {
        offset: 0,
        len: buf.head,
    };
    let after_pages = buf.head.saturating_add(buf.page_len);
    match call {
        CallPlan::Inline => {
            if buf.page_len >= PULLUP_MAX
                && pages_fit_sges(buf.page_base, buf.page_len, page_size, send_sges)
            {
                SendLayout {
                    copy: [
                        head,
                        Range {
                            offset: after_pages,
                            len: buf.tail,
                        },
                    ],
                    mapped: Some(Range {
                        offset: buf.head,
                        len: buf.page_len,
                    }),
                }
            } else {
                let all = after_pages.saturating_add(buf.tail);
                SendLayout {
                    copy: [
                        Range {
                            offset: 0,
                            len: all,
                        },
                        Range::default(),
                    ],
                    mapped: None,
                }
            }
        }
        CallPlan::ReadChunk => {
            // Operations after the data are XDR-aligned, so what is not a
            // multiple of four at the start of the tail is the pad.
            let pad = buf.tail & 3;
            let tail = if buf.tail > 3 {
                Range {
                    offset: after_pages.saturating_add(pad),
                    len: buf.tail.saturating_sub(pad),
                }
            } else {
                Range::default()
            };
            SendLayout {
                copy: [head, tail],
                mapped: None,
            }
        }
        CallPlan::PositionZero => SendLayout::default(),
    }
}

/// The parts of a Reply's receive `xdr_buf`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReplyBuf {
    /// Bytes in the head.
    pub head: u32,
    /// Bytes in the page list.
    pub page_len: u32,
    /// Bytes in the tail.
    pub tail: u32,
}

/// The memory to register for one RPC's chunks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Registrations {
    /// Read chunk: its XDR position and the range of the Call it carries.
    pub read: Option<(u32, Range)>,
    /// Write chunk: the range of the Reply buffer the result lands in, and
    /// whether to offer the connection's pad segment after it, for the
    /// XDR pad of a result that is not a multiple of four long
    /// (`rpcrdma_encode_write_list`).
    pub write: Option<(Range, bool)>,
    /// Reply chunk: the range of the Reply buffer.
    pub reply: Option<Range>,
}

/// Which parts of `call` and `reply` the chunks of `plan` carry
/// (`rpcrdma_encode_read_list`, `_write_list`, `_reply_chunk`).
pub fn registrations(plan: &Plan, call: &CallBuf, reply: &ReplyBuf) -> Registrations {
    let call_len = call
        .head
        .saturating_add(call.page_len)
        .saturating_add(call.tail);
    let read = match plan.call {
        CallPlan::Inline => None,
        CallPlan::ReadChunk => Some((
            call.head,
            Range {
                offset: call.head,
                len: call.page_len,
            },
        )),
        CallPlan::PositionZero => Some((
            0,
            Range {
                offset: 0,
                len: call_len,
            },
        )),
    };
    let (write, reply_chunk) = match plan.reply {
        ReplyPlan::Inline => (None, None),
        ReplyPlan::WriteChunk => (
            Some((
                Range {
                    offset: reply.head,
                    len: reply.page_len,
                },
                reply.page_len & 3 != 0,
            )),
            None,
        ),
        ReplyPlan::ReplyChunk => (
            None,
            Some(Range {
                offset: 0,
                len: reply
                    .head
                    .saturating_add(reply.page_len)
                    .saturating_add(reply.tail),
            }),
        ),
    };
    Registrations {
        read,
        write,
        reply: reply_chunk,
    }
}
