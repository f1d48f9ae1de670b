// SPDX-License-Identifier: GPL-2.0

//! The device a CM id resolved to, and protection domains on it.

use core::ptr::NonNull;

use kernel::error::from_err_ptr;
use kernel::prelude::*;
use kernel::sync::Arc;

use crate::sys;

/// An `ib_device`, borrowed from a CM id that outlives this value.
///
/// # Invariants
///
/// `ptr` is a live `ib_device`.
#[derive(Clone, Copy)]
pub(crate) struct Device {
    pub(super) ptr: NonNull<sys::ib_device>,
}

impl Device {
    fn attrs(&self) -> &sys::ib_device_attr {
        // SAFETY: `ptr` is live by the type invariant; attrs are constant
        // once the device is registered.
        unsafe { &(*self.ptr.as_ptr()).attrs }
    }

    /// Largest number of work requests per queue.
    pub(crate) fn max_qp_wr(&self) -> u32 {
        self.attrs().max_qp_wr
    }

    /// Largest number of incoming RDMA Reads.
    pub(crate) fn max_qp_rd_atom(&self) -> u32 {
        self.attrs().max_qp_rd_atom
    }

    /// Largest CQ.
    pub(crate) fn max_cqe(&self) -> u32 {
        self.attrs().max_cqe
    }

    /// Pages one fast-registration MR can map.
    pub(crate) fn max_fast_reg_page_list_len(&self) -> u32 {
        self.attrs().max_fast_reg_page_list_len
    }

    /// Largest scatter/gather list of an RDMA Read.
    pub(crate) fn max_sge_rd(&self) -> u32 {
        self.attrs().max_sge_rd
    }

    /// Largest Send scatter/gather list.
    pub(crate) fn max_send_sge(&self) -> u32 {
        self.attrs().max_send_sge
    }
}

/// A protection domain.
///
/// # Invariants
///
/// `ptr` is a live PD allocated by [`Pd::new`].
pub(crate) struct Pd {
    pub(super) ptr: NonNull<sys::ib_pd>,
}

// SAFETY: PDs may be used and freed from any thread.
unsafe impl Send for Pd {}
// SAFETY: `&Pd` only reads the constant lkey.
unsafe impl Sync for Pd {}

impl Pd {
    /// Allocates a PD on `dev`, shared by the QP and the MRs made on it.
    pub(crate) fn new(dev: &Device) -> Result<Arc<Self>> {
        // SAFETY: `dev.ptr` is live.
        let ptr = from_err_ptr(unsafe { sys::rpcrdma_rs_alloc_pd(dev.ptr.as_ptr(), 0) })?;
        Ok(Arc::new(
            Self {
                ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
            },
            GFP_KERNEL,
        )?)
    }

    /// The lkey covering all DMA-mapped memory.
    pub(crate) fn local_dma_lkey(&self) -> u32 {
        // SAFETY: `ptr` is live; the lkey is constant.
        unsafe { (*self.ptr.as_ptr()).local_dma_lkey }
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: `ptr` is live and owned; its users (QP, MRs) each hold
        // a reference, so they are all gone.
        unsafe { sys::rpcrdma_rs_dealloc_pd(self.ptr.as_ptr()) };
    }
}
