// SPDX-License-Identifier: GPL-2.0

//! Completion queues and work completions.

use core::marker::PhantomData;
use core::ptr::NonNull;

use kernel::error::from_err_ptr;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

use super::Device;
use crate::sys;

/// A completion queue polled from the `ib_comp_wq` workqueue: completion
/// callbacks run in process context.
///
/// # Invariants
///
/// `ptr` is a live CQ allocated by [`Cq::new`] on `_dev`, which it keeps
/// registered until the CQ is freed.
pub(crate) struct Cq {
    pub(super) ptr: NonNull<sys::ib_cq>,
    _dev: Device,
}

// SAFETY: CQs may be used and freed from any thread.
unsafe impl Send for Cq {}
// SAFETY: `&Cq` allows no operation.
unsafe impl Sync for Cq {}

impl Cq {
    /// Allocates a CQ of `entries` on `dev`.
    pub(crate) fn new(dev: &Device, entries: u32) -> Result<Arc<Self>> {
        // SAFETY: `dev` is registered while we hold it.
        let ptr = from_err_ptr(unsafe {
            sys::rpcrdma_rs_alloc_cq(
                dev.as_ptr(),
                core::ptr::null_mut(),
                i32::try_from(entries).map_err(|_| EINVAL)?,
                sys::ib_poll_context_IB_POLL_WORKQUEUE,
            )
        })?;
        Ok(Arc::new(
            Self {
                ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
                _dev: dev.clone(),
            },
            GFP_KERNEL,
        )?)
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: `ptr` is live and owned; its QP holds a reference, so it
        // is destroyed. This waits for the polling work to finish.
        unsafe { sys::ib_free_cq(self.ptr.as_ptr()) };
    }
}

/// A work completion, borrowed for the duration of a done callback.
pub(crate) struct Wc<'a>(&'a sys::ib_wc);

impl<'a> Wc<'a> {
    /// # Safety
    ///
    /// `wc` must be valid for `'a`.
    pub(crate) unsafe fn from_raw(wc: *const sys::ib_wc) -> Self {
        // SAFETY: The caller guarantees validity.
        Self(unsafe { &*wc })
    }

    /// The `ib_cqe` of the completed work request.
    pub(crate) fn cqe(&self) -> *mut sys::ib_cqe {
        // SAFETY: We always post with `wr_cqe`, so that is the active member.
        unsafe { self.0.__bindgen_anon_1.wr_cqe }
    }

    /// Whether the work request succeeded.
    pub(crate) fn ok(&self) -> bool {
        self.0.status == sys::ib_wc_status_IB_WC_SUCCESS
    }

    /// Whether the work request was flushed by a QP going to error.
    pub(crate) fn flushed(&self) -> bool {
        self.0.status == sys::ib_wc_status_IB_WC_WR_FLUSH_ERR
    }

    /// The raw status, for logging.
    pub(crate) fn status(&self) -> u32 {
        self.0.status
    }

    /// The vendor's error code of a failed work request.
    pub(crate) fn vendor_err(&self) -> u32 {
        self.0.vendor_err
    }

    /// The restrack id of the CQ this completion came from: the QP's
    /// Receive CQ if `recv`, else its Send CQ (rpcrdma.ko's `cq_id`).
    pub(crate) fn cq_id(&self, recv: bool) -> u32 {
        let qp = self.0.qp;
        if qp.is_null() {
            return 0;
        }
        // SAFETY: A completion's QP is live while its CQ is polled, and
        // keeps its CQs.
        unsafe { super::qp::cq_id(if recv { (*qp).recv_cq } else { (*qp).send_cq }) }
    }

    /// Bytes received.
    pub(crate) fn byte_len(&self) -> usize {
        self.0.byte_len as usize
    }

    /// The R_key the peer invalidated with Send With Invalidate, if this
    /// is a successful Receive that says so.
    pub(crate) fn invalidated(&self) -> Option<super::RemoteInv> {
        if !self.ok() || self.0.wc_flags & (sys::ib_wc_flags_IB_WC_WITH_INVALIDATE as i32) == 0 {
            return None;
        }
        // SAFETY: With IB_WC_WITH_INVALIDATE set, `invalidate_rkey` is the
        // active member of the union.
        Some(super::RemoteInv::new(unsafe { self.0.ex.invalidate_rkey }))
    }
}

/// A context that receives the completions of the work requests it posts,
/// through a [`CqEntry<Self, ID>`] it embeds. `ID` tells several entries
/// of one context apart.
pub(crate) trait CqHandler<const ID: u64 = 0>: HasCqEntry<ID> + Sync {
    /// One completion (success, error or flush) of a work request posted
    /// with this context's entry. Runs in process context, from the CQ's
    /// polling work.
    fn done(&self, wc: &Wc<'_>);
}

/// Where a context embeds its [`CqEntry`]. Implement it with
/// [`impl_has_cq_entry!`](crate::impl_has_cq_entry).
///
/// # Safety
///
/// `OFFSET` is the byte offset of a `CqEntry<Self, ID>` field in `Self`.
pub(crate) unsafe trait HasCqEntry<const ID: u64 = 0> {
    /// The field's offset.
    const OFFSET: usize;
}

/// Implements [`HasCqEntry`] for a field of a struct: `impl<..> Type<..>`
/// first for a generic one.
#[macro_export]
macro_rules! impl_has_cq_entry {
    (impl<$($g:ident: $bound:path),*> $ty:ty, $id:expr, $field:ident) => {
        // SAFETY: `OFFSET` is the offset of `$field`, whose type the
        // assertion below checks.
        unsafe impl<$($g: $bound),*> $crate::rdma::HasCqEntry<{ $id }> for $ty {
            const OFFSET: usize = {
                #[allow(dead_code)]
                fn check<$($g: $bound),*>(c: &$ty) -> &$crate::rdma::CqEntry<$ty, { $id }> {
                    &c.$field
                }
                core::mem::offset_of!($ty, $field)
            };
        }
    };
    ($ty:ty, $id:literal, $field:ident) => {
        // SAFETY: `OFFSET` is the offset of `$field`, whose type the
        // assertion below checks.
        unsafe impl $crate::rdma::HasCqEntry<$id> for $ty {
            const OFFSET: usize = {
                #[allow(dead_code)]
                fn check(c: &$ty) -> &$crate::rdma::CqEntry<$ty, $id> {
                    &c.$field
                }
                core::mem::offset_of!($ty, $field)
            };
        }
    };
}

/// An `ib_cqe` whose completions go to `T`'s [`CqHandler::done`].
///
/// # Invariants
///
/// `cqe.done` is [`CqEntry::dispatch`] for `T`, and the entry lives at
/// offset `T::OFFSET` of a `T` (it is only created by `new`, and only
/// handed to the device by reference into that `T`).
#[repr(transparent)]
pub(crate) struct CqEntry<T, const ID: u64 = 0> {
    cqe: Opaque<sys::ib_cqe>,
    _ctx: PhantomData<T>,
}

// SAFETY: The `ib_cqe` is written only by `new`; through `&CqEntry` it is
// only read (by ib_core, for `done`), from any thread.
unsafe impl<T, const ID: u64> Sync for CqEntry<T, ID> {}
// SAFETY: As above; the entry holds no `T`, only its type.
unsafe impl<T, const ID: u64> Send for CqEntry<T, ID> {}

impl<T: CqHandler<ID>, const ID: u64> CqEntry<T, ID> {
    /// An entry that dispatches to `T`.
    pub(crate) fn new() -> Self {
        Self {
            cqe: Opaque::new(sys::ib_cqe {
                done: Some(Self::dispatch),
            }),
            _ctx: PhantomData,
        }
    }

    /// The `wr_cqe` to post with.
    pub(crate) fn as_ptr(&self) -> *mut sys::ib_cqe {
        self.cqe.get()
    }

    /// # Safety
    ///
    /// Called by the CQ's polling with a completion whose `wr_cqe` is the
    /// entry of a `T` that is still alive (posting requires it).
    unsafe extern "C" fn dispatch(_cq: *mut sys::ib_cq, wc: *mut sys::ib_wc) {
        // SAFETY: ib_core passes a completion valid for this call.
        let wc = unsafe { Wc::from_raw(wc) };
        // SAFETY: The completion was posted with this entry (only this
        // function is its `done`), which sits at `T::OFFSET` of a live
        // `T` by the type invariant and the posting contract.
        let ctx = unsafe { &*wc.cqe().cast::<u8>().sub(T::OFFSET).cast::<T>() };
        ctx.done(&wc);
    }
}
