//! XDR primitives (RFC 4506): big-endian 4-byte units over borrowed buffers.
//!
//! [`Reader`] never panics: every access is bounds-checked and returns
//! `None` when the buffer is too short. [`Writer`] reports
//! [`EncodeError::BufferTooSmall`] instead of writing past the end.

use super::error::EncodeError;

/// Size of one XDR unit in octets.
pub(crate) const UNIT: usize = 4;

/// Forward-only cursor over a received buffer.
#[derive(Clone, Debug)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
    /// Length of the whole buffer: what is consumed is the difference.
    len: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading at the first byte of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self {
            rest: buf,
            len: buf.len(),
        }
    }

    /// Number of bytes consumed so far.
    pub(crate) fn position(&self) -> usize {
        // `rest` is a tail of the buffer: never longer than it.
        self.len.saturating_sub(self.rest.len())
    }

    /// The bytes not yet consumed.
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// Consumes `len` bytes and returns them.
    pub(crate) fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.rest.split_at_checked(len)?;
        self.rest = tail;
        Some(head)
    }

    /// Decodes one unsigned 32-bit integer.
    pub(crate) fn u32(&mut self) -> Option<u32> {
        let (word, tail) = self.rest.split_first_chunk::<UNIT>()?;
        self.rest = tail;
        Some(u32::from_be_bytes(*word))
    }

    /// Decodes an XDR `bool` or optional-data discriminator, which must be
    /// zero or one.
    pub(crate) fn bool(&mut self) -> Option<Result<bool, u32>> {
        Some(match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(other),
        })
    }

    /// Decodes a variable-length opaque, skipping its roundup padding.
    pub(crate) fn opaque(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.u32()?).ok()?;
        let data = self.take(len)?;
        self.take(pad(len))?;
        Some(data)
    }
}

/// Reads the big-endian `u32` at byte `offset` of `buf`, if present.
pub(crate) fn u32_at(buf: &[u8], offset: usize) -> Option<u32> {
    let (_, tail) = buf.split_at_checked(offset)?;
    let (word, _) = tail.split_first_chunk::<UNIT>()?;
    Some(u32::from_be_bytes(*word))
}

/// Reads the big-endian `u64` at byte `offset` of `buf`, if present.
pub(crate) fn u64_at(buf: &[u8], offset: usize) -> Option<u64> {
    let (_, tail) = buf.split_at_checked(offset)?;
    let (word, _) = tail.split_first_chunk::<8>()?;
    Some(u64::from_be_bytes(*word))
}

/// Number of zero bytes that round `len` up to a multiple of [`UNIT`].
pub(crate) fn pad(len: usize) -> usize {
    len.wrapping_neg() % UNIT
}

/// Cursor that appends XDR units to a caller-provided send buffer.
#[derive(Debug)]
pub(crate) struct Writer<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> Writer<'a> {
    /// Starts writing at the first byte of `buf`.
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, len: 0 }
    }

    /// Number of bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Appends raw bytes.
    pub(crate) fn bytes(&mut self, bytes: &[u8]) -> Result<(), EncodeError> {
        let end = self
            .len
            .checked_add(bytes.len())
            .ok_or(EncodeError::BufferTooSmall)?;
        let dst = self
            .buf
            .get_mut(self.len..end)
            .ok_or(EncodeError::BufferTooSmall)?;
        dst.copy_from_slice(bytes);
        self.len = end;
        Ok(())
    }

    /// Appends `N` bytes: a word without the general path's slicing.
    fn array<const N: usize>(&mut self, bytes: [u8; N]) -> Result<(), EncodeError> {
        let dst = self
            .buf
            .get_mut(self.len..)
            .and_then(|rest| rest.first_chunk_mut::<N>())
            .ok_or(EncodeError::BufferTooSmall)?;
        *dst = bytes;
        // Within `buf`, so no overflow.
        self.len = self.len.saturating_add(N);
        Ok(())
    }

    /// Appends one unsigned 32-bit integer.
    pub(crate) fn u32(&mut self, value: u32) -> Result<(), EncodeError> {
        self.array(value.to_be_bytes())
    }

    /// Appends one unsigned 64-bit integer (XDR `unsigned hyper`).
    pub(crate) fn u64(&mut self, value: u64) -> Result<(), EncodeError> {
        self.array(value.to_be_bytes())
    }

    /// Appends an XDR `bool` or optional-data discriminator.
    pub(crate) fn bool(&mut self, value: bool) -> Result<(), EncodeError> {
        self.u32(u32::from(value))
    }

    /// Appends a count that must fit the 32-bit XDR length field.
    pub(crate) fn count(&mut self, count: usize) -> Result<(), EncodeError> {
        self.u32(u32::try_from(count).map_err(|_| EncodeError::TooLong)?)
    }

    /// Appends a variable-length opaque with its roundup padding.
    pub(crate) fn opaque(&mut self, data: &[u8]) -> Result<(), EncodeError> {
        self.count(data.len())?;
        self.bytes(data)?;
        let zeros = [0; UNIT];
        self.bytes(zeros.get(..pad(data.len())).unwrap_or_default())
    }
}
