// SPDX-License-Identifier: GPL-2.0

//! Fast-registration (FRWR) memory regions.

use core::ptr::NonNull;

use kernel::error::from_err_ptr;
use kernel::prelude::*;
use kernel::sync::Arc;

use super::{Device, DmaDir, Pd};
use crate::sunrpc::trace;
use crate::sys;

/// One piece of memory to register: part of a single page.
#[derive(Clone, Copy)]
pub(crate) struct PageSeg {
    /// The page.
    pub(crate) page: *mut sys::page,
    /// Offset of the first byte in the page.
    pub(crate) offset: u32,
    /// Bytes, at most to the end of the page.
    pub(crate) len: u32,
}

// SAFETY: A page pointer is plain data here: it is only dereferenced by
// the `unsafe` functions that map or register it, whose callers vouch for
// the page; moving or sharing the number between threads is harmless.
unsafe impl Send for PageSeg {}
// SAFETY: As above.
unsafe impl Sync for PageSeg {}

/// What a registration gives the peer to address: one RDMA segment.
#[derive(Clone, Copy)]
pub(crate) struct Registered {
    /// Steering tag.
    pub(crate) rkey: u32,
    /// Bytes mapped.
    pub(crate) length: u32,
    /// I/O virtual address of the first byte.
    pub(crate) iova: u64,
    /// The MR's restrack id, for the trace events.
    pub(crate) mr_id: u32,
    /// DMA-mapped scatterlist entries.
    pub(crate) nents: i32,
    /// The DMA direction (`enum dma_data_direction`).
    pub(crate) dir: u32,
}

/// A fast-registration (FRWR) memory region and its scatterlist.
///
/// # Invariants
///
/// `ptr` is a live `IB_MR_TYPE_MEM_REG` MR of `_pd` on `dev` with room for
/// `sg.len()` pages; when `mapped` is non-zero, the first `nsg` entries of
/// `sg` are DMA-mapped on `dev` in direction `dir` (`mapped` entries after
/// coalescing), and `reg` is what that mapping gave the peer. `dev` stays
/// registered while the MR holds it.
pub(crate) struct Mr {
    ptr: NonNull<sys::ib_mr>,
    _pd: Arc<Pd>,
    dev: Device,
    sg: KVec<sys::scatterlist>,
    nsg: i32,
    mapped: i32,
    dir: DmaDir,
    reg: Option<Registered>,
}

// SAFETY: The MR and its scatterlist may be used from any thread; the owner
// serialises access (`&mut self` for every change).
unsafe impl Send for Mr {}
// SAFETY: `&Mr` only reads the keys.
unsafe impl Sync for Mr {}

impl Mr {
    /// Allocates an MR of `depth` pages on `pd`.
    pub(crate) fn new(pd: &Arc<Pd>, dev: &Device, depth: u32) -> Result<Self> {
        let depth_usize = usize::try_from(depth).map_err(|_| EINVAL)?;
        let sg = KVec::from_elem(sys::scatterlist::default(), depth_usize, GFP_KERNEL)?;
        // SAFETY: `pd` is live.
        let ptr = from_err_ptr(unsafe {
            sys::ib_alloc_mr(pd.ptr.as_ptr(), sys::ib_mr_type_IB_MR_TYPE_MEM_REG, depth)
        })
        .inspect_err(|&e| trace::xprtrdma_frwr_alloc(e))?;
        Ok(Self {
            ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
            _pd: pd.clone(),
            dev: dev.clone(),
            sg,
            nsg: 0,
            mapped: 0,
            dir: DmaDir::ToDevice,
            reg: None,
        })
    }

    /// The MR's restrack id, as the trace events name it.
    pub(super) fn id(&self) -> u32 {
        // SAFETY: `ptr` is live.
        unsafe { (*self.ptr.as_ptr()).res.id }
    }

    /// The DMA address of the scatterlist's first entry, for the trace
    /// events.
    fn first_dma_addr(&self) -> u64 {
        self.sg.first().map_or(0, |sg| sg.dma_address)
    }

    /// What the current mapping gives the peer, if mapped.
    pub(crate) fn registered(&self) -> Option<Registered> {
        self.reg
    }

    /// The current R_key.
    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: `ptr` is live.
        unsafe { (*self.ptr.as_ptr()).rkey }
    }

    /// DMA-maps `segs` (at most [`Mr::depth`] of them, without gaps between
    /// pages) and maps them into the MR's page list under a fresh key. The
    /// registration takes effect when the work request from
    /// [`Mr::reg_wr`] executes.
    ///
    /// # Safety
    ///
    /// The pages of `segs` must stay allocated until [`Mr::unmap`] (or the
    /// drop of the MR), and the peer must not be able to use the key
    /// afterwards (the MR is invalidated, or the QP is gone, before that).
    pub(crate) unsafe fn map(&mut self, segs: &[PageSeg], writing: bool) -> Result<Registered> {
        if self.mapped != 0 || segs.is_empty() || segs.len() > self.sg.len() {
            return Err(EINVAL);
        }
        let n = i32::try_from(segs.len()).map_err(|_| EINVAL)?;
        let sg = self.sg.as_mut_ptr();
        self.dir = if writing {
            DmaDir::FromDevice
        } else {
            DmaDir::ToDevice
        };
        // SAFETY: `sg` has at least `n` entries; the pages are live by the
        // caller's promise; `dev` is live.
        let mapped = unsafe {
            sys::rpcrdma_rs_sg_init_table(sg, n as u32);
            for (i, seg) in segs.iter().enumerate() {
                sys::rpcrdma_rs_sg_set_page(sg.add(i), seg.page, seg.len, seg.offset);
            }
            sys::rpcrdma_rs_dma_map_sg(self.dev.as_ptr(), sg, n, self.dir.raw())
        };
        if mapped <= 0 {
            trace::xprtrdma_frwr_sgerr(self.id(), self.first_dma_addr(), self.dir.raw(), n);
            return Err(EIO);
        }
        self.nsg = n;
        self.mapped = mapped;
        // SAFETY: `ptr` is live; `sg` holds `mapped` DMA-mapped entries.
        let done = unsafe {
            sys::ib_map_mr_sg(
                self.ptr.as_ptr(),
                sg,
                mapped,
                core::ptr::null_mut(),
                kernel::page::PAGE_SIZE as u32,
            )
        };
        if done != mapped {
            trace::xprtrdma_frwr_maperr(self.id(), self.first_dma_addr(), self.dir.raw(), done, n);
            self.unmap();
            return Err(EIO);
        }
        let key = (self.rkey() & 0xff) as u8;
        // SAFETY: `ptr` is live and not registered (the previous
        // registration was invalidated before the MR was freed for reuse).
        unsafe { sys::rpcrdma_rs_update_fast_reg_key(self.ptr.as_ptr(), key.wrapping_add(1)) };
        // SAFETY: `ptr` is live.
        let (length, iova, mr_id) = unsafe {
            let mr = self.ptr.as_ptr();
            ((*mr).length, (*mr).iova, (*mr).res.id)
        };
        let reg = Registered {
            rkey: self.rkey(),
            length: u32::try_from(length).map_err(|_| EIO)?,
            iova,
            mr_id,
            nents: mapped,
            dir: self.dir.raw(),
        };
        self.reg = Some(reg);
        Ok(reg)
    }

    /// Fills `wr` with the REG_MR work request of the current mapping,
    /// completing on `cqe` (unsignalled: only an error reports).
    pub(super) fn reg_wr(&self, wr: &mut sys::ib_reg_wr, writing: bool, cqe: *mut sys::ib_cqe) {
        let access = if writing {
            sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE | sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE
        } else {
            sys::ib_access_flags_IB_ACCESS_REMOTE_READ
        };
        *wr = sys::ib_reg_wr {
            wr: sys::ib_send_wr {
                opcode: sys::ib_wr_opcode_IB_WR_REG_MR,
                ..Default::default()
            },
            mr: self.ptr.as_ptr(),
            key: self.rkey(),
            access: access as i32,
        };
        wr.wr.__bindgen_anon_1.wr_cqe = cqe;
    }

    /// Fills `wr` with a LOCAL_INV of the current key, completing on `cqe`.
    pub(super) fn inv_wr(&self, wr: &mut sys::ib_send_wr, cqe: *mut sys::ib_cqe, signalled: bool) {
        *wr = sys::ib_send_wr {
            opcode: sys::ib_wr_opcode_IB_WR_LOCAL_INV,
            send_flags: if signalled {
                sys::ib_send_flags_IB_SEND_SIGNALED
            } else {
                0
            },
            ..Default::default()
        };
        wr.__bindgen_anon_1.wr_cqe = cqe;
        wr.ex.invalidate_rkey = self.rkey();
    }

    /// DMA-unmaps the pages of the last [`Mr::map`], if any. The MR must
    /// be invalidated (or its QP gone) first, and no REG_MR of it
    /// outstanding: only the pool ([`super::FrwrPool::release`], whose
    /// types see to that) and the selftest call this.
    pub(super) fn unmap(&mut self) {
        if self.mapped == 0 {
            return;
        }
        trace::xprtrdma_mr_unmap(|| self.reg);
        // SAFETY: By the type invariant the first `nsg` entries are mapped
        // on the live `dev` in `dir`.
        unsafe {
            sys::rpcrdma_rs_dma_unmap_sg(
                self.dev.as_ptr(),
                self.sg.as_mut_ptr(),
                self.nsg,
                self.dir.raw(),
            )
        };
        self.mapped = 0;
        self.nsg = 0;
        self.reg = None;
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        let (id, reg) = (self.id(), self.reg);
        self.unmap();
        // SAFETY: `ptr` is live and owned; its QP is destroyed.
        let rc = unsafe { sys::rpcrdma_rs_dereg_mr(self.ptr.as_ptr()) };
        if rc != 0 {
            trace::xprtrdma_frwr_dereg(id, reg, rc);
        }
    }
}
