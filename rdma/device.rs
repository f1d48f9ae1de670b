// SPDX-License-Identifier: GPL-2.0

//! The device a CM id resolved to, and protection domains on it.

use core::ptr::NonNull;

use kernel::error::from_err_ptr;
use kernel::prelude::*;
use kernel::str::{CStr, CStrExt};
use kernel::sync::Arc;

use crate::sys;

/// An `ib_device` with a registration reference held: the device cannot
/// finish unregistering while this value (or a clone) exists. Whatever
/// maps memory for the device, or was made on it, keeps one.
///
/// # Invariants
///
/// `ptr` is an `ib_device` on which this value holds one reference taken
/// with `ib_device_try_get`.
pub(crate) struct Device {
    ptr: NonNull<sys::ib_device>,
}

// SAFETY: The reference may be taken and dropped on any thread; `&Device`
// only reads constant attributes.
unsafe impl Send for Device {}
// SAFETY: As above.
unsafe impl Sync for Device {}

impl Device {
    /// Takes a reference on `dev`; `ENODEV` if it is unregistering.
    ///
    /// # Safety
    ///
    /// `dev` must point to an `ib_device` that stays allocated for the
    /// duration of the call (one a live CM id is bound to).
    pub(super) unsafe fn get(dev: *mut sys::ib_device) -> Result<Self> {
        let ptr = NonNull::new(dev).ok_or(ENODEV)?;
        // SAFETY: `dev` is allocated (caller's promise).
        if !unsafe { sys::rpcrdma_rs_device_try_get(ptr.as_ptr()) } {
            return Err(ENODEV);
        }
        // INVARIANT: the reference was just taken.
        Ok(Self { ptr })
    }

    /// The raw device, valid while `self` is.
    pub(super) fn as_ptr(&self) -> *mut sys::ib_device {
        self.ptr.as_ptr()
    }

    /// The device's name (`rxe0` ...), for the trace events.
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: The device is live while we hold our reference (type
        // invariant); `name` is a NUL-terminated array in it, changed only
        // by a rename under the device's locks, which keeps it terminated.
        unsafe { CStr::from_char_ptr((*self.ptr.as_ptr()).name.as_ptr().cast()) }
    }
}

impl Clone for Device {
    fn clone(&self) -> Self {
        // SAFETY: We hold a reference (type invariant), so the count is
        // not zero and the increment cannot fail.
        let taken = unsafe { sys::rpcrdma_rs_device_try_get(self.ptr.as_ptr()) };
        debug_assert!(taken);
        // INVARIANT: a reference of its own.
        Self { ptr: self.ptr }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: Our reference (type invariant), dropped once.
        unsafe { sys::ib_device_put(self.ptr.as_ptr()) };
    }
}

impl Device {
    fn attrs(&self) -> &sys::ib_device_attr {
        // SAFETY: Registered while we hold our reference (type
        // invariant); attrs are constant once the device is registered.
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

    /// Largest number of outgoing RDMA Reads (our initiator depth).
    pub(crate) fn max_qp_init_rd_atom(&self) -> u32 {
        self.attrs().max_qp_init_rd_atom
    }

    /// Whether the device can Send With Invalidate (the memory management
    /// extensions), as svcrdma checks before it uses it.
    pub(crate) fn can_send_with_inv(&self) -> bool {
        self.attrs().device_cap_flags & sys::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS != 0
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

    /// Pages above which rdma_rw registers an RDMA Read's sink rather
    /// than gathering it (0: never, but on iWARP).
    pub(crate) fn max_sgl_rd(&self) -> u32 {
        self.attrs().max_sgl_rd
    }

    /// Largest Send scatter/gather list.
    pub(crate) fn max_send_sge(&self) -> u32 {
        self.attrs().max_send_sge
    }

    /// Whether `port` speaks iWARP: an RDMA Read's sink must then be
    /// registered with remote write access, and connections are set up
    /// through MPA over TCP.
    pub(crate) fn is_iwarp(&self, port: u32) -> bool {
        // SAFETY: The device is registered while we hold it; the helper
        // checks `port` before it indexes the device's ports.
        unsafe { sys::rpcrdma_rs_protocol_iwarp(self.as_ptr(), port) }
    }
}

/// A protection domain.
///
/// # Invariants
///
/// `ptr` is a live PD allocated by [`Pd::new`] on `_dev`, which it keeps
/// registered until the PD is freed.
pub(crate) struct Pd {
    pub(super) ptr: NonNull<sys::ib_pd>,
    _dev: Device,
}

// SAFETY: PDs may be used and freed from any thread.
unsafe impl Send for Pd {}
// SAFETY: `&Pd` only reads the constant lkey.
unsafe impl Sync for Pd {}

impl Pd {
    /// Allocates a PD on `dev`, shared by the QP and the MRs made on it.
    pub(crate) fn new(dev: &Device) -> Result<Arc<Self>> {
        // SAFETY: `dev` is registered while we hold it.
        let ptr = from_err_ptr(unsafe { sys::rpcrdma_rs_alloc_pd(dev.as_ptr(), 0) })?;
        Ok(Arc::new(
            Self {
                ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
                _dev: dev.clone(),
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
