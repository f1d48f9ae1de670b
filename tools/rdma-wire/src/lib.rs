//! `rdma-wire`: reads a capture of RoCEv2 traffic and prints one line per
//! RPC-over-RDMA message (versions 1 and 2, decoded by the module's own
//! `rpcrdma-proto`), per RDMA Write or Read and per CM REQ/REP, flagging
//! what breaks RFC 8166, RFC 8797 or the version 2 draft.

pub mod analyze;
pub mod packet;
pub mod pcap;

pub use analyze::{Analyzer, Options, Summary};

/// Decodes a whole capture file.
pub fn analyze(file: &[u8], opts: Options) -> Result<Analyzer, pcap::PcapError> {
    let frames = pcap::frames(file)?;
    let mut a = Analyzer::new(opts);
    for f in &frames {
        match packet::parse(f.ts, f.linktype, f.data) {
            Ok(p) => a.packet(&p),
            Err(why) => a.skip(f.ts, why),
        }
    }
    a.finish();
    Ok(a)
}
