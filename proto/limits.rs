//! Bounds on what a peer may ask of us in one transport header.
//!
//! RFC 8166 puts no limit on chunk sizes or counts (§3.4.4); every limit
//! here is a local policy that keeps a hostile header from making us
//! register, read or write unbounded amounts of memory. A header that
//! exceeds one is refused with ERR_CHUNK.

/// Limits applied while decoding peer chunk lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most segments in one Read chunk, Write chunk or Reply chunk.
    pub max_segments_per_chunk: u32,
    /// Most chunks in the Read list or in the Write list.
    pub max_chunks_per_list: u32,
    /// Most bytes the Read list of one header may describe together: what
    /// a Responder pulls into its own memory. Write and Reply chunks are
    /// the peer's memory, of which a Responder writes only its Reply and
    /// whose written lengths a Requester checks against its registration:
    /// they count against no byte limit.
    pub max_total_bytes: u64,
    /// Required alignment of Read segment positions; XDR requires 4
    /// (RFC 8166 §3.4.5). Zero or one disables the check.
    pub position_alignment: u32,
}

impl Limits {
    /// Defaults sized after rpcrdma.ko: a 1 MiB payload in 4 KiB pages plus
    /// head, tail and page-boundary segments (`RPCRDMA_MAX_SEGS` = 260),
    /// `RPCRDMA_MAX_HDR_SEGS` (16) chunks per list, and 16 MiB of Read
    /// chunks.
    pub const DEFAULT: Limits = Limits {
        max_segments_per_chunk: 260,
        max_chunks_per_list: 16,
        max_total_bytes: 16 << 20,
        position_alignment: 4,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}
