//! RDMA segments and the chunk lists that carry them (RFC 8166 §3.4, §4.1).
//!
//! Decoding validates a list once, against [`Limits`], and then hands out
//! views that borrow the receive buffer: [`ReadList`], [`WriteList`] and
//! [`WriteChunk`] iterate over the wire bytes without copying them. The
//! views can only be built by the decoder, or from where the decoder found
//! them ([`ListsAt`]), so their contents have already passed every check;
//! their iterators still stop, rather than panic, should the bytes ever
//! disagree. Encoding takes plain slices ([`ChunkSlices`]).
//!
//! Version 2 reuses the same XDR for its lists, so both versions share this
//! code.

use super::error::{DecodeError, EncodeError};
use super::limits::Limits;
use super::xdr::{self, Reader, Writer};

/// Octets of one encoded plain segment: handle, length, 64-bit offset.
const SEGMENT_LEN: usize = 16;
/// Octets of one Read list entry: discriminator, position, segment.
const READ_ENTRY_LEN: usize = 24;

/// A plain RDMA segment: one registered, contiguous memory region
/// (RFC 8166 §3.4.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Segment {
    /// Steering tag (R_key) of the registration.
    pub handle: u32,
    /// Length of the region in octets.
    pub length: u32,
    /// Offset or address of the region's first octet.
    pub offset: u64,
}

impl Segment {
    /// Decodes a segment from its 16 wire bytes.
    fn from_wire(wire: &[u8]) -> Option<Self> {
        Some(Self {
            handle: xdr::u32_at(wire, 0)?,
            length: xdr::u32_at(wire, 4)?,
            offset: xdr::u64_at(wire, 8)?,
        })
    }

    fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        w.u32(self.handle)?;
        w.u32(self.length)?;
        w.u64(self.offset)
    }
}

/// An RDMA read segment: a plain segment plus the position in the unreduced
/// Payload stream where its data belongs (RFC 8166 §3.4.5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReadSegment {
    /// Byte offset of the Read chunk in the Payload stream; 0 for a
    /// Position Zero Read chunk carrying the whole RPC message.
    pub position: u32,
    /// The memory region to read from.
    pub segment: Segment,
}

impl ReadSegment {
    /// Decodes one Read list entry, discriminator included.
    fn from_entry(entry: &[u8]) -> Option<Self> {
        Some(Self {
            position: xdr::u32_at(entry, 4)?,
            segment: Segment::from_wire(entry.get(8..)?)?,
        })
    }
}

/// Iterator over the plain segments of a [`WriteChunk`].
#[derive(Clone, Debug)]
pub struct Segments<'a>(&'a [u8]);

impl Iterator for Segments<'_> {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        let (entry, rest) = self.0.split_first_chunk::<SEGMENT_LEN>()?;
        self.0 = rest;
        Segment::from_wire(entry)
    }

    // By hand rather than ChunksExact's: its runtime divisor leaves a
    // division-by-zero panic path that 7.3's objtool flags.
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.0.len() / SEGMENT_LEN;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Segments<'_> {}

/// A counted array of plain segments, borrowed from the wire: one Write
/// chunk, or the Reply chunk (RFC 8166 §3.4.6, §3.5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteChunk<'a> {
    /// The segments' wire bytes, a multiple of 16 long (count excluded).
    wire: &'a [u8],
}

impl<'a> WriteChunk<'a> {
    /// Number of segments.
    pub fn len(&self) -> usize {
        self.wire.len() / SEGMENT_LEN
    }

    /// Whether this is an empty Write chunk (zero segments).
    pub fn is_empty(&self) -> bool {
        self.wire.is_empty()
    }

    /// The segments, in array order.
    pub fn segments(&self) -> Segments<'a> {
        Segments(self.wire)
    }

    /// Sum of the segment lengths; cannot overflow `u64`.
    pub fn total_length(&self) -> u64 {
        self.segments()
            .map(|s| u64::from(s.length))
            .fold(0, u64::saturating_add)
    }
}

/// Iterator over the segments of a [`ReadChunk`] or a whole [`ReadList`].
#[derive(Clone, Debug)]
pub struct ReadSegments<'a> {
    /// The list entries not yet looked at.
    wire: &'a [u8],
    /// Only the entries at this position (one chunk), or all.
    position: Option<u32>,
}

impl Iterator for ReadSegments<'_> {
    type Item = ReadSegment;

    fn next(&mut self) -> Option<ReadSegment> {
        loop {
            let (entry, rest) = self.wire.split_first_chunk::<READ_ENTRY_LEN>()?;
            self.wire = rest;
            let segment = ReadSegment::from_entry(entry)?;
            match self.position {
                Some(p) if p != segment.position => {}
                _ => return Some(segment),
            }
        }
    }

    // See Segments::size_hint.
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.wire.len() / READ_ENTRY_LEN;
        match self.position {
            None => (n, Some(n)),
            Some(_) => (0, Some(n)),
        }
    }
}

/// One Read chunk: the Read list entries sharing one position, in list
/// order (RFC 8166 §3.4.5). They need not be adjacent in the list: as
/// rpcrdma.ko's `pcl_alloc_read` ("The list might not be in order by
/// position"), a position's segments are joined wherever they appear.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadChunk<'a> {
    position: u32,
    /// The whole list's entries, discriminators included.
    wire: &'a [u8],
}

impl<'a> ReadChunk<'a> {
    /// Where the chunk's data is inserted into the Payload stream.
    pub fn position(&self) -> u32 {
        self.position
    }

    /// Number of segments (at least one).
    pub fn len(&self) -> usize {
        self.segments().count()
    }

    /// Always false: a Read chunk has one or more segments.
    pub fn is_empty(&self) -> bool {
        self.segments().next().is_none()
    }

    /// The chunk's segments, in list order.
    pub fn segments(&self) -> ReadSegments<'a> {
        ReadSegments {
            wire: self.wire,
            position: Some(self.position),
        }
    }

    /// Sum of the segment lengths.
    pub fn total_length(&self) -> u64 {
        self.segments()
            .map(|s| u64::from(s.segment.length))
            .fold(0, u64::saturating_add)
    }
}

/// Iterator over the Read chunks of a [`ReadList`], by increasing
/// position whatever the list's order. Each step looks through the whole
/// list, which decoding bounds.
#[derive(Clone, Debug)]
pub struct ReadChunks<'a> {
    wire: &'a [u8],
    /// The lowest position not yet handed out; `None` once past the last.
    floor: Option<u32>,
}

impl<'a> Iterator for ReadChunks<'a> {
    type Item = ReadChunk<'a>;

    fn next(&mut self) -> Option<ReadChunk<'a>> {
        let floor = self.floor?;
        let all = ReadSegments {
            wire: self.wire,
            position: None,
        };
        let position = all.map(|s| s.position).filter(|&p| p >= floor).min();
        self.floor = position.and_then(|p| p.checked_add(1));
        Some(ReadChunk {
            position: position?,
            wire: self.wire,
        })
    }
}

/// The Read list of a header, borrowed from the wire (RFC 8166 §4.3.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadList<'a> {
    /// All entries, discriminators included, terminator excluded.
    wire: &'a [u8],
    chunks: u32,
}

impl<'a> ReadList<'a> {
    /// Whether the list has no segment.
    pub fn is_empty(&self) -> bool {
        self.wire.is_empty()
    }

    /// Number of Read chunks (distinct positions).
    pub fn chunk_count(&self) -> u32 {
        self.chunks
    }

    /// Number of Read segments over all chunks.
    pub fn segment_count(&self) -> usize {
        self.wire.len() / READ_ENTRY_LEN
    }

    /// Every Read segment, in list order.
    pub fn segments(&self) -> ReadSegments<'a> {
        ReadSegments {
            wire: self.wire,
            position: None,
        }
    }

    /// The Read chunks, by increasing position.
    pub fn chunks(&self) -> ReadChunks<'a> {
        ReadChunks {
            wire: self.wire,
            floor: Some(0),
        }
    }

    /// The Position Zero Read chunk of a Long Call, if any (RFC 8166 §3.5.3).
    pub fn position_zero(&self) -> Option<ReadChunk<'a>> {
        self.chunks().next().filter(|c| c.position() == 0)
    }
}

/// Iterator over the Write chunks of a [`WriteList`].
#[derive(Clone, Debug)]
pub struct WriteChunks<'a> {
    reader: Reader<'a>,
}

impl<'a> Iterator for WriteChunks<'a> {
    type Item = WriteChunk<'a>;

    fn next(&mut self) -> Option<WriteChunk<'a>> {
        self.reader.u32()?;
        let count = usize::try_from(self.reader.u32()?).ok()?;
        let wire = self.reader.take(count.checked_mul(SEGMENT_LEN)?)?;
        Some(WriteChunk { wire })
    }
}

/// The Write list of a header, borrowed from the wire (RFC 8166 §4.3.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteList<'a> {
    /// All entries (discriminator, count, segments), terminator excluded.
    wire: &'a [u8],
    chunks: u32,
}

impl<'a> WriteList<'a> {
    /// Whether the list has no Write chunk.
    pub fn is_empty(&self) -> bool {
        self.chunks == 0
    }

    /// Number of Write chunks.
    pub fn chunk_count(&self) -> u32 {
        self.chunks
    }

    /// The Write chunks, in list order.
    pub fn chunks(&self) -> WriteChunks<'a> {
        WriteChunks {
            reader: Reader::new(self.wire),
        }
    }
}

/// The three chunk lists of an RDMA_MSG or RDMA_NOMSG header, as decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkLists<'a> {
    /// Read list: argument data the Responder pulls (Calls only).
    pub reads: ReadList<'a>,
    /// Write list: room for result data the Responder pushes.
    pub writes: WriteList<'a>,
    /// Reply chunk: room for a Long Reply.
    pub reply: Option<WriteChunk<'a>>,
}

impl<'a> ChunkLists<'a> {
    /// Whether all three lists are empty.
    pub fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.writes.is_empty() && self.reply.is_none()
    }

    /// The handle a Responder may invalidate with Send With Invalidate:
    /// the only distinct handle in the header, as rpcrdma.ko's
    /// `svc_rdma_get_inv_rkey` chooses it. `None` if there are none or
    /// several.
    pub fn sole_handle(&self) -> Option<u32> {
        // Loops rather than chained iterators: this runs for every Reply.
        let mut sole = None;
        let mut same = |handle: u32| *sole.get_or_insert(handle) == handle;
        for s in self.reads.segments() {
            if !same(s.segment.handle) {
                return None;
            }
        }
        for chunk in self.writes.chunks().chain(self.reply) {
            for s in chunk.segments() {
                if !same(s.handle) {
                    return None;
                }
            }
        }
        sole
    }

    /// Whether `handle` is one of the lists' segment handles.
    pub fn has_handle(&self, handle: u32) -> bool {
        self.reads.segments().any(|s| s.segment.handle == handle)
            || self
                .writes
                .chunks()
                .chain(self.reply)
                .any(|c| c.segments().any(|s| s.handle == handle))
    }

    /// Decodes the three lists, enforcing `limits` (the byte limit over
    /// the Read list alone).
    pub(crate) fn decode(r: &mut Reader<'a>, limits: &Limits) -> Result<Self, DecodeError> {
        let mut budget = Budget { limits, bytes: 0 };
        Ok(Self {
            reads: decode_read_list(r, &mut budget)?,
            writes: decode_write_list(r, &mut budget)?,
            reply: decode_reply_chunk(r, &mut budget)?,
        })
    }

    /// Checks Read chunk positions the way rpcrdma.ko's
    /// `pcl_check_read_chunk_positions` does: positions count the unreduced
    /// Payload stream (RFC 8166 §3.4.5), so after removing the lengths of
    /// the chunks before it (rounded up to XDR units), each chunk must land within the inline payload
    /// of `inline_len` bytes, or within the Position Zero Read chunk when
    /// there is one; and no chunk may overlap the next.
    pub(crate) fn check_positions(&self, inline_len: usize) -> Result<(), DecodeError> {
        let mut chunks = self.reads.chunks().peekable();
        let bound = match chunks.next_if(|c| c.position() == 0) {
            Some(call) => call.total_length(),
            None => u64::try_from(inline_len).unwrap_or(u64::MAX),
        };
        let mut reduced = 0u64;
        let mut prev_end = 0u64;
        for chunk in chunks {
            let position = u64::from(chunk.position());
            if position < prev_end {
                return Err(DecodeError::OverlappingReadChunks);
            }
            if position.saturating_sub(reduced) > bound {
                return Err(DecodeError::PositionBeyondPayload);
            }
            let length = chunk.total_length();
            // The chunk took its XDR roundup out of the stream with it
            // (RFC 8166 §3.4.4.4); rpcrdma.ko subtracts the bare length,
            // which refuses a chunk placed right after an unaligned one.
            reduced = reduced.saturating_add(length.saturating_add(3) & !3);
            prev_end = position.saturating_add(length);
        }
        Ok(())
    }
}

/// Where a run of bytes lies in a message: `start..start + len`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    start: u32,
    len: u32,
}

impl Span {
    /// Where `part`, a subslice of `msg`, lies in it; `None` if it lies
    /// elsewhere. An empty part lies anywhere.
    pub(crate) fn of(msg: &[u8], part: &[u8]) -> Option<Self> {
        if part.is_empty() {
            return Some(Self::default());
        }
        // Addresses, not pointers: only compared and subtracted, and the
        // result is checked against `msg` before anything is read.
        let start = (part.as_ptr() as usize).checked_sub(msg.as_ptr() as usize)?;
        let end = start.checked_add(part.len())?;
        if end > msg.len() {
            return None;
        }
        Some(Self {
            start: u32::try_from(start).ok()?,
            len: u32::try_from(part.len()).ok()?,
        })
    }

    /// The bytes of `msg` it covers, if `msg` is long enough.
    pub(crate) fn of_msg<'a>(&self, msg: &'a [u8]) -> Option<&'a [u8]> {
        let start = usize::try_from(self.start).ok()?;
        let end = start.checked_add(usize::try_from(self.len).ok()?)?;
        msg.get(start..end)
    }
}

/// Where the three chunk lists of a decoded header lie in its message:
/// [`ChunkLists`] without the borrow, to be kept while the message stays
/// put and turned back into the same views ([`ListsAt::lists`]) rather
/// than decoded and checked again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ListsAt {
    reads: Span,
    read_chunks: u32,
    writes: Span,
    write_chunks: u32,
    reply: Option<Span>,
}

impl ListsAt {
    /// Where `lists`, decoded from `msg`, lie in it; `None` if they were
    /// decoded from another buffer.
    pub fn of(msg: &[u8], lists: &ChunkLists<'_>) -> Option<Self> {
        Some(Self {
            reads: Span::of(msg, lists.reads.wire)?,
            read_chunks: lists.reads.chunks,
            writes: Span::of(msg, lists.writes.wire)?,
            write_chunks: lists.writes.chunks,
            reply: match lists.reply {
                Some(chunk) => Some(Span::of(msg, chunk.wire)?),
                None => None,
            },
        })
    }

    /// The views [`ListsAt::of`] located, over `msg`, which must be the
    /// message they were decoded from, unchanged: they are not checked
    /// again. Other bytes give views of those bytes, never a panic, and
    /// `None` if `msg` is too short for them.
    pub fn lists<'a>(&self, msg: &'a [u8]) -> Option<ChunkLists<'a>> {
        Some(ChunkLists {
            reads: ReadList {
                wire: self.reads.of_msg(msg)?,
                chunks: self.read_chunks,
            },
            writes: WriteList {
                wire: self.writes.of_msg(msg)?,
                chunks: self.write_chunks,
            },
            reply: match self.reply {
                Some(span) => Some(WriteChunk {
                    wire: span.of_msg(msg)?,
                }),
                None => None,
            },
        })
    }
}

/// The three chunk lists of a header to be encoded, borrowed from the
/// caller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkSlices<'s> {
    /// Read segments in list order; consecutive entries with equal
    /// positions form one Read chunk.
    pub reads: &'s [ReadSegment],
    /// Write chunks, each an array of segments.
    pub writes: &'s [&'s [Segment]],
    /// The Reply chunk, if any.
    pub reply: Option<&'s [Segment]>,
}

impl ChunkSlices<'_> {
    /// No chunks at all: a short message (RFC 8166 §3.5.1).
    pub const NONE: ChunkSlices<'static> = ChunkSlices {
        reads: &[],
        writes: &[],
        reply: None,
    };

    /// Appends the Read list, Write list and Reply chunk.
    pub(crate) fn encode(&self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        for read in self.reads {
            w.bool(true)?;
            w.u32(read.position)?;
            read.segment.encode(w)?;
        }
        w.bool(false)?;
        for chunk in self.writes {
            w.bool(true)?;
            encode_segment_array(w, chunk)?;
        }
        w.bool(false)?;
        match self.reply {
            Some(chunk) => {
                w.bool(true)?;
                encode_segment_array(w, chunk)
            }
            None => w.bool(false),
        }
    }
}

fn encode_segment_array(w: &mut Writer<'_>, segments: &[Segment]) -> Result<(), EncodeError> {
    w.count(segments.len())?;
    segments.iter().try_for_each(|s| s.encode(w))
}

/// Running total of the bytes a header's segments describe.
struct Budget<'l> {
    limits: &'l Limits,
    bytes: u64,
}

impl Budget<'_> {
    fn charge(&mut self, length: u32) -> Result<(), DecodeError> {
        self.bytes = self
            .bytes
            .checked_add(u64::from(length))
            .filter(|&total| total <= self.limits.max_total_bytes)
            .ok_or(DecodeError::TooManyBytes)?;
        Ok(())
    }
}

/// Reads an optional-data discriminator ("is there another entry?").
fn present(r: &mut Reader<'_>) -> Result<bool, DecodeError> {
    r.bool()
        .ok_or(DecodeError::Truncated)?
        .map_err(|value| DecodeError::BadDiscriminator { value })
}

fn decode_read_list<'a>(
    r: &mut Reader<'a>,
    budget: &mut Budget<'_>,
) -> Result<ReadList<'a>, DecodeError> {
    let limits = budget.limits;
    let start = r.rest();
    let mut entries = 0usize;
    while present(r)? {
        let position = r.u32().ok_or(DecodeError::Truncated)?;
        let segment = Segment::from_wire(r.take(SEGMENT_LEN).ok_or(DecodeError::Truncated)?)
            .ok_or(DecodeError::Truncated)?;
        if position.checked_rem(limits.position_alignment).unwrap_or(0) != 0 {
            return Err(DecodeError::MisalignedPosition { position });
        }
        budget.charge(segment.length)?;
        entries = entries.saturating_add(1);
    }
    let wire = entries
        .checked_mul(READ_ENTRY_LEN)
        .and_then(|len| start.get(..len))
        .ok_or(DecodeError::Truncated)?;
    // In any order (RFC 8166 does not order the list): chunk by chunk,
    // each a pass over the entries, stopping one chunk past the limit.
    let mut list = ReadList { wire, chunks: 0 };
    for chunk in list.chunks() {
        list.chunks = list.chunks.saturating_add(1);
        if list.chunks > limits.max_chunks_per_list {
            return Err(DecodeError::TooManyChunks);
        }
        let most = usize::try_from(limits.max_segments_per_chunk).unwrap_or(usize::MAX);
        if chunk.segments().nth(most).is_some() {
            return Err(DecodeError::TooManySegments);
        }
    }
    Ok(list)
}

/// Steps `r` over the three chunk lists by their XDR alone, with no
/// limit or position checked: where the RPC message of a header that
/// failed [`ChunkLists::decode`] would start. `None` if the lists are
/// truncated or a discriminator is not a `bool`.
pub(crate) fn skip_lists(r: &mut Reader<'_>) -> Option<()> {
    let more = |r: &mut Reader<'_>| r.bool()?.ok();
    while more(r)? {
        r.take(xdr::UNIT.checked_add(SEGMENT_LEN)?)?;
    }
    let array = |r: &mut Reader<'_>| {
        let count = usize::try_from(r.u32()?).ok()?;
        r.take(count.checked_mul(SEGMENT_LEN)?).map(drop)
    };
    while more(r)? {
        array(r)?;
    }
    if more(r)? {
        array(r)?;
    }
    Some(())
}

/// Decodes a counted segment array after its discriminator.
fn decode_segment_array<'a>(
    r: &mut Reader<'a>,
    budget: &mut Budget<'_>,
) -> Result<WriteChunk<'a>, DecodeError> {
    let count = r.u32().ok_or(DecodeError::Truncated)?;
    if count > budget.limits.max_segments_per_chunk {
        return Err(DecodeError::TooManySegments);
    }
    let wire = usize::try_from(count)
        .ok()
        .and_then(|count| count.checked_mul(SEGMENT_LEN))
        .and_then(|len| r.take(len))
        .ok_or(DecodeError::Truncated)?;
    // Not charged to the byte budget: a Write or Reply chunk is the
    // peer's memory, into which a Responder writes no more than its Reply,
    // and whose written lengths a Requester checks against what it
    // registered (`plan::check_reply`).
    Ok(WriteChunk { wire })
}

fn decode_write_list<'a>(
    r: &mut Reader<'a>,
    budget: &mut Budget<'_>,
) -> Result<WriteList<'a>, DecodeError> {
    let start = r.rest();
    let begin = r.position();
    let mut chunks = 0u32;
    while present(r)? {
        chunks = chunks.saturating_add(1);
        if chunks > budget.limits.max_chunks_per_list {
            return Err(DecodeError::TooManyChunks);
        }
        decode_segment_array(r, budget)?;
    }
    // Everything consumed but the terminating discriminator.
    let wire = r
        .position()
        .checked_sub(begin)
        .and_then(|len| len.checked_sub(xdr::UNIT))
        .and_then(|len| start.get(..len))
        .ok_or(DecodeError::Truncated)?;
    Ok(WriteList { wire, chunks })
}

fn decode_reply_chunk<'a>(
    r: &mut Reader<'a>,
    budget: &mut Budget<'_>,
) -> Result<Option<WriteChunk<'a>>, DecodeError> {
    if present(r)? {
        decode_segment_array(r, budget).map(Some)
    } else {
        Ok(None)
    }
}
