// SPDX-License-Identifier: GPL-2.0

//! DMA-mapped memory: long-lived inline buffers and per-Send page maps.

use core::ffi::c_ulong;

use kernel::prelude::*;

use super::{Device, HeldPages, PageHold, PageSeg};
use crate::sys;

/// Transfer direction of a [`DmaBuf`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum DmaDir {
    /// The device reads (Send buffers).
    ToDevice,
    /// The device writes (Receive buffers).
    FromDevice,
}

impl DmaDir {
    pub(super) fn raw(self) -> sys::dma_data_direction {
        match self {
            Self::ToDevice => sys::dma_data_direction_DMA_TO_DEVICE,
            Self::FromDevice => sys::dma_data_direction_DMA_FROM_DEVICE,
        }
    }
}

/// A kmalloc'ed buffer, DMA-mapped for one device for its whole life.
///
/// # Invariants
///
/// `mem` is never resized, so its address is stable; `addr` is its mapping
/// on `dev`, which stays registered while the buffer holds it.
pub(crate) struct DmaBuf {
    mem: KVec<u8>,
    pub(super) addr: u64,
    dev: Device,
    dir: DmaDir,
}

// SAFETY: The buffer is plain memory; the device is only used for DMA API
// calls, which any thread may make.
unsafe impl Send for DmaBuf {}
// SAFETY: `&DmaBuf` only reads.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    /// Allocates `len` zeroed bytes and maps them for `dev`.
    pub(crate) fn new(dev: &Device, len: usize, dir: DmaDir) -> Result<Self> {
        let mut mem = KVec::from_elem(0u8, len, GFP_KERNEL)?;
        // SAFETY: `dev` is live; `mem` is `len` bytes of kmalloc memory.
        let addr = unsafe {
            sys::rpcrdma_rs_dma_map_single(
                dev.as_ptr(),
                mem.as_mut_ptr().cast(),
                mem.len(),
                dir.raw(),
            )
        };
        // SAFETY: `dev` is live; `addr` came from the map call above.
        if unsafe { sys::rpcrdma_rs_dma_mapping_error(dev.as_ptr(), addr) } != 0 {
            return Err(EIO);
        }
        Ok(Self {
            mem,
            addr,
            dev: dev.clone(),
            dir,
        })
    }

    pub(super) fn len_u32(&self) -> u32 {
        u32::try_from(self.mem.len()).unwrap_or(u32::MAX)
    }

    /// Size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.mem.len()
    }

    /// An SGE over `len` bytes at `offset`, clamped to the buffer.
    pub(crate) fn sge(&self, offset: usize, len: usize, lkey: u32) -> sys::ib_sge {
        let offset = offset.min(self.mem.len());
        let len = len.min(self.mem.len() - offset);
        sys::ib_sge {
            addr: self.addr + offset as u64,
            length: u32::try_from(len).unwrap_or(0),
            lkey,
        }
    }

    /// Makes the first `len` bytes written by the device visible to the CPU.
    pub(crate) fn sync_for_cpu(&self, len: usize) {
        // SAFETY: `addr` maps `mem` on the live `dev`; `len` is clamped.
        unsafe {
            sys::rpcrdma_rs_dma_sync_for_cpu(
                self.dev.as_ptr(),
                self.addr,
                len.min(self.mem.len()),
                self.dir.raw(),
            )
        };
    }

    /// Hands the first `len` bytes written by the CPU to the device.
    pub(crate) fn sync_for_device(&self, len: usize) {
        // SAFETY: `addr` maps the whole buffer on the live `dev` (type
        // invariant), and the length is clamped to the buffer.
        unsafe {
            sys::rpcrdma_rs_dma_sync_for_device(
                self.dev.as_ptr(),
                self.addr,
                len.min(self.mem.len()),
                self.dir.raw(),
            )
        };
    }

    /// The contents.
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.mem
    }

    /// The contents, for the CPU to fill.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.mem
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: `addr` maps `mem` on the live `dev`; no work request uses
        // it any more (the owner drains the QP first).
        unsafe {
            sys::rpcrdma_rs_dma_unmap_single(
                self.dev.as_ptr(),
                self.addr,
                self.mem.len(),
                self.dir.raw(),
            )
        };
    }
}

/// Most pages one Send maps: a 64 KiB inline Call in 4 KiB pages, plus
/// one for an unaligned start.
pub(crate) const MAX_MAPPED_PAGES: usize = 17;

/// Pages of an RPC's `xdr_buf` DMA-mapped for one Send, unmapped on drop.
///
/// # Invariants
///
/// `maps[..n]` are live `DMA_TO_DEVICE` mappings on `dev` (set when `n` is
/// not zero), which stays registered while this value holds it.
pub(crate) struct MappedPages {
    dev: Option<Device>,
    maps: [(u64, u32); MAX_MAPPED_PAGES],
    n: usize,
    /// What keeps the pages of [`MappedPages::map_held`] allocated;
    /// dropped after they are unmapped.
    hold: Option<PageHold>,
}

// SAFETY: Mappings are plain numbers; the device is only used for DMA API
// calls, which any thread may make.
unsafe impl Send for MappedPages {}

impl MappedPages {
    /// Maps `segs` for the device to read.
    ///
    /// # Safety
    ///
    /// The pages stay allocated, and their contents unchanged, until the
    /// returned value is dropped.
    pub(crate) unsafe fn map(dev: &Device, segs: &[PageSeg]) -> Result<Self> {
        if segs.len() > MAX_MAPPED_PAGES {
            return Err(EMSGSIZE);
        }
        let mut out = Self {
            dev: Some(dev.clone()),
            maps: [(0, 0); MAX_MAPPED_PAGES],
            n: 0,
            hold: None,
        };
        for (slot, seg) in out.maps.iter_mut().zip(segs) {
            // SAFETY: `dev` is live; the page is allocated (caller's
            // promise) and `offset + len` stays within it.
            let addr = unsafe {
                sys::rpcrdma_rs_dma_map_page(
                    dev.as_ptr(),
                    seg.page,
                    c_ulong::from(seg.offset),
                    seg.len as usize,
                    DmaDir::ToDevice.raw(),
                )
            };
            // SAFETY: `dev` is live; `addr` came from the map call above.
            if unsafe { sys::rpcrdma_rs_dma_mapping_error(dev.as_ptr(), addr) } != 0 {
                // `out` unmaps what was mapped so far.
                return Err(EIO);
            }
            *slot = (addr, seg.len);
            out.n += 1;
        }
        Ok(out)
    }

    /// Maps `pages` for the device to read, keeping their hold until they
    /// are unmapped.
    pub(crate) fn map_held(dev: &Device, pages: HeldPages<'_>) -> Result<Self> {
        // SAFETY: The pages stay allocated, and unwritten by the CPU, while
        // their hold lives (type invariant of `HeldPages`), which the
        // mapping keeps until it is dropped, after unmapping them.
        let mut mapped = unsafe { Self::map(dev, pages.segs())? };
        mapped.hold = Some(pages.hold());
        Ok(mapped)
    }

    /// One SGE per mapped page.
    pub(crate) fn sges(&self, lkey: u32) -> impl Iterator<Item = sys::ib_sge> + '_ {
        self.maps
            .iter()
            .take(self.n)
            .map(move |&(addr, length)| sys::ib_sge { addr, length, lkey })
    }
}

impl Drop for MappedPages {
    fn drop(&mut self) {
        let Some(dev) = &self.dev else {
            return;
        };
        for &(addr, len) in self.maps.iter().take(self.n) {
            // SAFETY: A live mapping on the live `dev` (type invariant);
            // no work request uses it any more (the owner drops it after
            // the Send completed or was flushed).
            unsafe {
                sys::rpcrdma_rs_dma_unmap_page(
                    dev.as_ptr(),
                    addr,
                    len as usize,
                    DmaDir::ToDevice.raw(),
                )
            };
        }
    }
}
