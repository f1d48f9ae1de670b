//! From a captured frame to an InfiniBand packet: Ethernet (or Linux
//! cooked capture, or raw IP), IPv4 or IPv6, UDP to port 4791 (RoCEv2),
//! then the Base Transport Header and the extended headers the opcode
//! brings (IBA vol. 1, ch. 9; RoCEv2 annex A17).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The RoCEv2 UDP destination port.
pub const ROCEV2_PORT: u16 = 4791;

/// Base Transport Header opcodes this tool names (RC and UD).
pub mod op {
    pub const SEND_FIRST: u8 = 0x00;
    pub const SEND_MIDDLE: u8 = 0x01;
    pub const SEND_LAST: u8 = 0x02;
    pub const SEND_LAST_IMM: u8 = 0x03;
    pub const SEND_ONLY: u8 = 0x04;
    pub const SEND_ONLY_IMM: u8 = 0x05;
    pub const WRITE_FIRST: u8 = 0x06;
    pub const WRITE_MIDDLE: u8 = 0x07;
    pub const WRITE_LAST: u8 = 0x08;
    pub const WRITE_LAST_IMM: u8 = 0x09;
    pub const WRITE_ONLY: u8 = 0x0a;
    pub const WRITE_ONLY_IMM: u8 = 0x0b;
    pub const READ_REQUEST: u8 = 0x0c;
    pub const READ_RESP_FIRST: u8 = 0x0d;
    pub const READ_RESP_MIDDLE: u8 = 0x0e;
    pub const READ_RESP_LAST: u8 = 0x0f;
    pub const READ_RESP_ONLY: u8 = 0x10;
    pub const ACK: u8 = 0x11;
    pub const ATOMIC_ACK: u8 = 0x12;
    pub const CMP_SWAP: u8 = 0x13;
    pub const FETCH_ADD: u8 = 0x14;
    pub const SEND_LAST_INV: u8 = 0x16;
    pub const SEND_ONLY_INV: u8 = 0x17;
    pub const UD_SEND_ONLY: u8 = 0x64;
    pub const UD_SEND_ONLY_IMM: u8 = 0x65;
}

/// RDMA Extended Transport Header: the target of a Write or Read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reth {
    pub va: u64,
    pub rkey: u32,
    pub len: u32,
}

/// One RoCEv2 packet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Packet<'a> {
    pub ts: f64,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub opcode: u8,
    pub dest_qp: u32,
    pub psn: u32,
    pub reth: Option<Reth>,
    /// IETH: the R_Key a Send With Invalidate invalidates.
    pub ieth: Option<u32>,
    /// DETH source QP, for UD packets (CM MADs to QP1).
    pub deth_src_qp: Option<u32>,
    /// The payload bytes captured.
    pub payload: &'a [u8],
    /// The payload's length on the wire (from the UDP length).
    pub payload_len: usize,
}

impl Packet<'_> {
    /// Whether the capture holds fewer payload bytes than the wire had.
    pub fn truncated(&self) -> bool {
        self.payload.len() < self.payload_len
    }
}

/// What became of a frame that is not a usable RoCEv2 packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Not IP, not UDP, not port 4791, or an IP fragment: not ours.
    NotRoce,
    /// A RoCEv2 opcode this tool does not follow.
    OtherOpcode,
    /// Addressed to port 4791 but too short or inconsistent to parse.
    Malformed(&'static str),
    /// The capture cut the packet inside its headers.
    Truncated,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn be64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// The IP datagram inside a frame of `linktype`, with its EtherType.
fn link(linktype: u32, data: &[u8]) -> Option<(u16, &[u8])> {
    match linktype {
        // Ethernet, with up to two VLAN tags.
        1 => {
            let mut at = 12usize;
            let mut ethertype = be16(data, at)?;
            let mut tags = 0u8;
            while matches!(ethertype, 0x8100 | 0x88a8) && tags < 2 {
                at = at.checked_add(4)?;
                ethertype = be16(data, at)?;
                tags = tags.saturating_add(1);
            }
            Some((ethertype, data.get(at.checked_add(2)?..)?))
        }
        // Linux cooked capture (tcpdump -i any), v1 and v2.
        113 => Some((be16(data, 14)?, data.get(16..)?)),
        276 => Some((be16(data, 0)?, data.get(20..)?)),
        // Raw IP.
        12 | 101 => match data.first()? >> 4 {
            4 => Some((0x0800, data)),
            6 => Some((0x86dd, data)),
            _ => None,
        },
        228 => Some((0x0800, data)),
        229 => Some((0x86dd, data)),
        _ => None,
    }
}

/// The UDP datagram: addresses, the captured UDP bytes.
fn ip(ethertype: u16, data: &[u8]) -> Option<(IpAddr, IpAddr, &[u8])> {
    match ethertype {
        0x0800 => {
            let ihl = usize::from(data.first()? & 0x0f).checked_mul(4)?;
            let frag = be16(data, 6)?;
            // Fragments (MF set or an offset) carry no whole UDP header.
            if data.first()? >> 4 != 4 || ihl < 20 || frag & 0x3fff != 0 || *data.get(9)? != 17 {
                return None;
            }
            let src: [u8; 4] = data.get(12..16)?.try_into().ok()?;
            let dst: [u8; 4] = data.get(16..20)?.try_into().ok()?;
            Some((
                Ipv4Addr::from(src).into(),
                Ipv4Addr::from(dst).into(),
                data.get(ihl..)?,
            ))
        }
        0x86dd => {
            let src: [u8; 16] = data.get(8..24)?.try_into().ok()?;
            let dst: [u8; 16] = data.get(24..40)?.try_into().ok()?;
            let mut next = *data.get(6)?;
            let mut at = 40usize;
            // Hop-by-hop, routing and destination options; never fragments.
            for _ in 0..8 {
                match next {
                    17 => {
                        return Some((
                            Ipv6Addr::from(src).into(),
                            Ipv6Addr::from(dst).into(),
                            data.get(at..)?,
                        ))
                    }
                    0 | 43 | 60 => {
                        next = *data.get(at)?;
                        let len = usize::from(*data.get(at.checked_add(1)?)?)
                            .checked_add(1)?
                            .checked_mul(8)?;
                        at = at.checked_add(len)?;
                    }
                    _ => return None,
                }
            }
            None
        }
        _ => None,
    }
}

/// Bytes of extended headers after the BTH for `opcode`, with the offsets
/// of the RETH, IETH and DETH where it has one; `None` for opcodes this
/// tool does not follow (UC, RD, XRC, atomics write...).
/// Extended header bytes, and where the RETH, IETH and DETH start.
type Layout = (usize, Option<usize>, Option<usize>, Option<usize>);

fn ext_layout(opcode: u8) -> Option<Layout> {
    use op::*;
    // (length, RETH at, IETH at, DETH at)
    Some(match opcode {
        SEND_FIRST | SEND_MIDDLE | SEND_LAST | SEND_ONLY | WRITE_MIDDLE | WRITE_LAST
        | READ_RESP_MIDDLE => (0, None, None, None),
        SEND_LAST_IMM | SEND_ONLY_IMM | WRITE_LAST_IMM => (4, None, None, None),
        WRITE_FIRST | WRITE_ONLY | READ_REQUEST => (16, Some(0), None, None),
        WRITE_ONLY_IMM => (20, Some(0), None, None),
        READ_RESP_FIRST | READ_RESP_LAST | READ_RESP_ONLY | ACK => (4, None, None, None),
        ATOMIC_ACK => (12, None, None, None),
        CMP_SWAP | FETCH_ADD => (28, None, None, None),
        SEND_LAST_INV | SEND_ONLY_INV => (4, None, Some(0), None),
        UD_SEND_ONLY => (8, None, None, Some(0)),
        UD_SEND_ONLY_IMM => (12, None, None, Some(0)),
        _ => return None,
    })
}

/// Parses one frame.
pub fn parse(ts: f64, linktype: u32, data: &[u8]) -> Result<Packet<'_>, Skip> {
    let (ethertype, l3) = link(linktype, data).ok_or(Skip::NotRoce)?;
    let (src, dst, udp) = ip(ethertype, l3).ok_or(Skip::NotRoce)?;
    if be16(udp, 2).ok_or(Skip::NotRoce)? != ROCEV2_PORT {
        return Err(Skip::NotRoce);
    }
    let udp_len = usize::from(be16(udp, 4).ok_or(Skip::Truncated)?);
    // UDP header, BTH, then ICRC at the end.
    let bth = udp.get(8..).ok_or(Skip::Truncated)?;
    let opcode = *bth.first().ok_or(Skip::Truncated)?;
    let pad = usize::from((bth.get(1).ok_or(Skip::Truncated)? >> 4) & 3);
    let dest_qp = be32(bth, 4).ok_or(Skip::Truncated)? & 0x00ff_ffff;
    let psn = be32(bth, 8).ok_or(Skip::Truncated)? & 0x00ff_ffff;
    let (ext_len, reth_at, ieth_at, deth_at) = ext_layout(opcode).ok_or(Skip::OtherOpcode)?;
    let ext = bth.get(12..).ok_or(Skip::Truncated)?;
    let reth = match reth_at {
        Some(at) => Some(Reth {
            va: be64(ext, at).ok_or(Skip::Truncated)?,
            rkey: be32(ext, at.saturating_add(8)).ok_or(Skip::Truncated)?,
            len: be32(ext, at.saturating_add(12)).ok_or(Skip::Truncated)?,
        }),
        None => None,
    };
    let ieth = match ieth_at {
        Some(at) => Some(be32(ext, at).ok_or(Skip::Truncated)?),
        None => None,
    };
    let deth_src_qp = match deth_at {
        Some(at) => Some(be32(ext, at.saturating_add(4)).ok_or(Skip::Truncated)? & 0x00ff_ffff),
        None => None,
    };
    let payload_len = udp_len
        .checked_sub(8 + 12 + 4)
        .and_then(|n| n.checked_sub(ext_len))
        .and_then(|n| n.checked_sub(pad))
        .ok_or(Skip::Malformed("UDP length shorter than the IB headers"))?;
    let captured = ext.get(ext_len..).ok_or(Skip::Truncated)?;
    let payload = captured
        .get(..payload_len.min(captured.len()))
        .unwrap_or_default();
    Ok(Packet {
        ts,
        src,
        dst,
        opcode,
        dest_qp,
        psn,
        reth,
        ieth,
        deth_src_qp,
        payload,
        payload_len,
    })
}
