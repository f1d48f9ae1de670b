//! Capture files: classic pcap (either byte order, micro- or nanosecond
//! timestamps) and pcapng (section, interface, enhanced and simple packet
//! blocks). Every length read from the file is checked against what is
//! left of it before use.

use std::fmt;

/// One captured frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frame<'a> {
    /// Seconds since the epoch, with the file's resolution.
    pub ts: f64,
    /// Link-layer header type (LINKTYPE_*).
    pub linktype: u32,
    /// The captured bytes (perhaps fewer than the frame had on the wire).
    pub data: &'a [u8],
    /// The frame's length on the wire.
    pub orig_len: usize,
}

/// Why a capture file could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PcapError {
    /// Neither a pcap nor a pcapng magic number.
    UnknownFormat,
    /// The file ends inside a header or a record.
    Truncated {
        /// Offset of the record that is cut.
        offset: usize,
    },
    /// A length field that cannot be right.
    BadLength {
        /// Offset of the record.
        offset: usize,
    },
    /// A pcapng packet names an interface never described.
    UnknownInterface {
        /// Offset of the block.
        offset: usize,
    },
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownFormat => write!(f, "not a pcap or pcapng file"),
            Self::Truncated { offset } => {
                write!(f, "file truncated in the record at offset {offset}")
            }
            Self::BadLength { offset } => {
                write!(f, "impossible length in the record at offset {offset}")
            }
            Self::UnknownInterface { offset } => {
                write!(
                    f,
                    "packet block at offset {offset} names an undescribed interface"
                )
            }
        }
    }
}

/// Largest frame we accept: pcap's own maximum snapshot length is 256 KiB.
const MAX_FRAME: usize = 16 << 20;

#[derive(Clone, Copy)]
enum Order {
    Big,
    Little,
}

fn u16_at(buf: &[u8], at: usize, order: Order) -> Option<u16> {
    let b: [u8; 2] = buf.get(at..at.checked_add(2)?)?.try_into().ok()?;
    Some(match order {
        Order::Big => u16::from_be_bytes(b),
        Order::Little => u16::from_le_bytes(b),
    })
}

fn u32_at(buf: &[u8], at: usize, order: Order) -> Option<u32> {
    let b: [u8; 4] = buf.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(match order {
        Order::Big => u32::from_be_bytes(b),
        Order::Little => u32::from_le_bytes(b),
    })
}

fn usize_of(v: u32) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// Reads every frame of a pcap or pcapng file.
pub fn frames(file: &[u8]) -> Result<Vec<Frame<'_>>, PcapError> {
    let magic_le = u32_at(file, 0, Order::Little).ok_or(PcapError::UnknownFormat)?;
    match magic_le {
        0xa1b2_c3d4 => classic(file, Order::Little, 1e-6),
        0xa1b2_3c4d => classic(file, Order::Little, 1e-9),
        0xd4c3_b2a1 => classic(file, Order::Big, 1e-6),
        0x4d3c_b2a1 => classic(file, Order::Big, 1e-9),
        0x0a0d_0d0a => pcapng(file),
        _ => Err(PcapError::UnknownFormat),
    }
}

fn classic(file: &[u8], order: Order, unit: f64) -> Result<Vec<Frame<'_>>, PcapError> {
    let linktype = u32_at(file, 20, order).ok_or(PcapError::Truncated { offset: 0 })? & 0x0fff_ffff;
    let mut out = Vec::new();
    let mut at = 24usize;
    while at < file.len() {
        let rec = file.get(at..).unwrap_or_default();
        let field = |i| u32_at(rec, i, order).ok_or(PcapError::Truncated { offset: at });
        let (sec, frac, incl, orig) = (field(0)?, field(4)?, field(8)?, field(12)?);
        let incl = usize_of(incl);
        if incl > MAX_FRAME {
            return Err(PcapError::BadLength { offset: at });
        }
        let data = rec
            .get(16..16usize.saturating_add(incl))
            .ok_or(PcapError::Truncated { offset: at })?;
        out.push(Frame {
            ts: f64::from(sec) + f64::from(frac) * unit,
            linktype,
            data,
            orig_len: usize_of(orig).max(incl),
        });
        at = at.saturating_add(16).saturating_add(incl);
    }
    Ok(out)
}

/// An interface of a pcapng section: its link type and time unit.
#[derive(Clone, Copy)]
struct Interface {
    linktype: u32,
    unit: f64,
}

fn pcapng(file: &[u8]) -> Result<Vec<Frame<'_>>, PcapError> {
    let mut out = Vec::new();
    let mut order = Order::Little;
    let mut ifaces: Vec<Interface> = Vec::new();
    let mut at = 0usize;
    while at < file.len() {
        let block = file.get(at..).unwrap_or_default();
        let btype_le =
            u32_at(block, 0, Order::Little).ok_or(PcapError::Truncated { offset: at })?;
        if btype_le == 0x0a0d_0d0a {
            // A section header sets the byte order of what follows.
            order = match u32_at(block, 8, Order::Little) {
                Some(0x1a2b_3c4d) => Order::Little,
                Some(0x4d3c_2b1a) => Order::Big,
                _ => return Err(PcapError::UnknownFormat),
            };
            ifaces.clear();
        }
        let btype = u32_at(block, 0, order).ok_or(PcapError::Truncated { offset: at })?;
        let total = usize_of(u32_at(block, 4, order).ok_or(PcapError::Truncated { offset: at })?);
        if total < 12 || total % 4 != 0 || total > MAX_FRAME.saturating_add(64) {
            return Err(PcapError::BadLength { offset: at });
        }
        let block = block
            .get(..total)
            .ok_or(PcapError::Truncated { offset: at })?;
        // The body, between the two copies of the total length.
        let body = block.get(8..total.saturating_sub(4)).unwrap_or_default();
        let bad = PcapError::BadLength { offset: at };
        match btype {
            1 => {
                let linktype = u32::from(u16_at(body, 0, order).ok_or(bad)?);
                ifaces.push(Interface {
                    linktype,
                    unit: if_tsresol(body.get(8..).unwrap_or_default(), order),
                });
            }
            6 => {
                let field = |i| u32_at(body, i, order).ok_or(PcapError::BadLength { offset: at });
                let (iface, hi, lo, cap, orig) =
                    (field(0)?, field(4)?, field(8)?, field(12)?, field(16)?);
                let iface = *ifaces
                    .get(usize_of(iface))
                    .ok_or(PcapError::UnknownInterface { offset: at })?;
                let data = body
                    .get(20..20usize.saturating_add(usize_of(cap)))
                    .ok_or(PcapError::BadLength { offset: at })?;
                let ticks = (u64::from(hi) << 32) | u64::from(lo);
                out.push(Frame {
                    // Precision loss past 2^53 ticks is fine for a timestamp.
                    #[allow(clippy::cast_precision_loss)]
                    ts: ticks as f64 * iface.unit,
                    linktype: iface.linktype,
                    data,
                    orig_len: usize_of(orig).max(data.len()),
                });
            }
            3 => {
                let iface = *ifaces
                    .first()
                    .ok_or(PcapError::UnknownInterface { offset: at })?;
                let orig = usize_of(u32_at(body, 0, order).ok_or(bad)?);
                let rest = body.get(4..).unwrap_or_default();
                let data = rest.get(..orig.min(rest.len())).unwrap_or_default();
                out.push(Frame {
                    ts: 0.0,
                    linktype: iface.linktype,
                    data,
                    orig_len: orig.max(data.len()),
                });
            }
            _ => {}
        }
        at = at.saturating_add(total);
    }
    Ok(out)
}

/// The time unit of an interface from its options (if_tsresol, code 9):
/// microseconds unless it says otherwise.
fn if_tsresol(mut opts: &[u8], order: Order) -> f64 {
    while let (Some(code), Some(len)) = (u16_at(opts, 0, order), u16_at(opts, 2, order)) {
        let len = usize::from(len);
        if code == 0 {
            break;
        }
        if code == 9 {
            if let Some(&v) = opts.get(4) {
                let exp = 0i32.saturating_sub(i32::from(v & 0x7f).min(63));
                return if v & 0x80 == 0 {
                    10f64.powi(exp)
                } else {
                    2f64.powi(exp)
                };
            }
        }
        let padded = len.saturating_add(3) & !3;
        opts = opts
            .get(4usize.saturating_add(padded)..)
            .unwrap_or_default();
    }
    1e-6
}
