// SPDX-License-Identifier: GPL-2.0

//! RDMA Read and Write through ib_core's rdma_rw contexts: they pick
//! between SGE lists and memory registration for the device, and build the
//! work requests (`drivers/infiniband/core/rw.c`).

use core::marker::PhantomData;
use core::ptr::NonNull;

use kernel::prelude::*;
use kernel::types::Opaque;

use super::{Device, DmaDir, PageSeg, Qp};
use crate::sys;

/// Send Queue entries an RDMA Read of `pages` pages takes at most on `dev`'s
/// `port`, gathering up to `sges` pages per work request when it needs no
/// registration, as rdma_rw builds it: on iWARP the Read's sink must be
/// registered (remote write access), so each MR's worth of pages is a
/// LOCAL_INV, a REG_MR and the Read; elsewhere a Read gathers up to
/// `max_sge_rd` pages. A device that registers large Reads for speed
/// (`max_sgl_rd`) takes the larger of the two.
pub(crate) fn read_wrs(dev: &Device, port: u32, pages: u32, sges: u32) -> u32 {
    // SAFETY: The device is registered while `dev` holds it.
    let mrs = unsafe { sys::rdma_rw_mr_factor(dev.as_ptr(), port, pages) };
    let registered = mrs.saturating_mul(3);
    if dev.is_iwarp(port) {
        return registered;
    }
    let gathered = pages.div_ceil(sges.min(dev.max_sge_rd()).max(1));
    if dev.max_sgl_rd() != 0 {
        gathered.max(registered)
    } else {
        gathered
    }
}

/// What an [`RwCtx`] does with the peer's memory.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum RwOp {
    /// RDMA Read: the peer's memory into our pages.
    Read,
    /// RDMA Write: our pages into the peer's memory.
    Write,
}

impl RwOp {
    fn dir(self) -> DmaDir {
        match self {
            Self::Read => DmaDir::FromDevice,
            Self::Write => DmaDir::ToDevice,
        }
    }
}

/// One RDMA Read or Write between local pages and one remote segment: an
/// initialised `rdma_rw_ctx`, its scatterlist and the DMA mapping of the
/// pages, all released on drop, or by [`RwCtx::recycle`], which keeps the
/// memory for the next context.
///
/// # Invariants
///
/// `mem` is `Some` until the value is recycled or dropped; while it is,
/// its `ctx` was initialised by `rdma_rw_ctx_init` on `qp` and `port` over
/// the `sg_len` entries at [`sg_ptr`], DMA-mapped in `op`'s direction;
/// `qp` outlives this value (the contract of [`RwCtx::on_qp`]). The context
/// is boxed because it points into itself (its single work request at its
/// SGE). `big_sg` is `None` when the entries fit in `mem.sg`: not an
/// empty `KVec`, whose drop still calls the allocator, once per context.
pub(crate) struct RwCtx {
    mem: Option<KBox<RwMem>>,
    big_sg: Option<KVec<sys::scatterlist>>,
    sg_len: u32,
    qp: Qp,
    port: u32,
    op: RwOp,
    wrs: u32,
    _not_sync: PhantomData<*const ()>,
}

/// Scatterlist entries kept beside the context, in its one allocation: a
/// small READ payload, a Reply chunk or a short Read chunk touches one or
/// two pages, and a Reply with a Write then needs no other allocation.
const INLINE_SGES: usize = 2;

/// The context and, for a short list, its scatterlist.
struct RwMem {
    ctx: Opaque<sys::rdma_rw_ctx>,
    sg: [sys::scatterlist; INLINE_SGES],
}

/// Memory of released contexts, kept by their owner (a Send buffer, a
/// Receive buffer's Reads) for the next ones, so that the Reply or Call
/// after the first allocates none: svcrdma keeps its rw contexts on a free
/// list too. It holds at most the room given to [`RwSpares::with_room`]
/// and allocates nothing after that.
pub(crate) struct RwSpares {
    free: KVec<KBox<RwMem>>,
}

impl RwSpares {
    /// Room for `n` spares.
    pub(crate) fn with_room(n: usize) -> Result<Self> {
        Ok(Self {
            free: KVec::with_capacity(n, GFP_KERNEL)?,
        })
    }

    /// Spares held now.
    pub(crate) fn len(&self) -> usize {
        self.free.len()
    }

    fn take(&mut self) -> Result<KBox<RwMem>> {
        match self.free.pop() {
            Some(mem) => Ok(mem),
            None => Ok(KBox::new(
                RwMem {
                    ctx: Opaque::zeroed(),
                    sg: [sys::scatterlist::default(); INLINE_SGES],
                },
                GFP_KERNEL,
            )?),
        }
    }

    /// Releases every context of `ctxs`, in order, keeping their memory.
    pub(crate) fn reclaim(&mut self, ctxs: &mut KVec<RwCtx>) {
        for ctx in ctxs.drain_all() {
            ctx.recycle(self);
        }
    }

    fn keep(&mut self, mem: KBox<RwMem>) {
        // Past the room, the memory is freed.
        let _ = self.free.push_within_capacity(mem);
    }
}

/// A context's scatterlist: beside it in `mem`, or `big` for a long one.
/// One place decides, so that the list the context was initialised over
/// is the one it is destroyed with.
fn sg_ptr(mem: &mut RwMem, big: &mut Option<KVec<sys::scatterlist>>) -> *mut sys::scatterlist {
    match big {
        Some(big) => big.as_mut_ptr(),
        None => mem.sg.as_mut_ptr(),
    }
}

// SAFETY: The context and its mapping may be used and released from any
// thread; `&mut self` serialises posting.
unsafe impl Send for RwCtx {}

impl RwCtx {
    /// Prepares `op` between `segs` (in order, without gaps) and the
    /// peer's `len` bytes at `remote_addr` under `rkey`, on `qp` and its
    /// `port`. The length is that of `segs`. Its memory comes from
    /// `spares` when one is there.
    ///
    /// # Safety
    ///
    /// The pages of `segs` must stay allocated until the returned value
    /// is dropped or recycled, and the CPU must not touch their bytes
    /// while its work requests are posted and not completed (or
    /// flushed); `qp` must be a live QP created with room for rdma_rw
    /// contexts (see [`QpCaps::rdma_ctxs`](super::QpCaps)), which
    /// outlives the returned value. Bytes the CPU writes after this call,
    /// or reads before the value is dropped or recycled, may differ from
    /// the device's where DMA is not coherent.
    pub(crate) unsafe fn on_qp(
        spares: &mut RwSpares,
        qp: NonNull<sys::ib_qp>,
        port: u32,
        segs: &[PageSeg],
        remote_addr: u64,
        rkey: u32,
        op: RwOp,
    ) -> Result<Self> {
        let qp = Qp { ptr: qp };
        if segs.is_empty() {
            return Err(EINVAL);
        }
        let n = u32::try_from(segs.len()).map_err(|_| EINVAL)?;
        let mut mem = spares.take()?;
        let mut big_sg = if segs.len() > INLINE_SGES {
            Some(KVec::from_elem(
                sys::scatterlist::default(),
                segs.len(),
                GFP_KERNEL,
            )?)
        } else {
            None
        };
        // Stays where it is when both move into `Self`: it is in the box
        // or in the vector's heap buffer.
        let sgp = sg_ptr(&mut mem, &mut big_sg);
        // SAFETY: `sgp` has `n` entries; the pages are live by the
        // caller's guarantee.
        unsafe {
            sys::rpcrdma_rs_sg_init_table(sgp, n);
            for (i, seg) in segs.iter().enumerate() {
                sys::rpcrdma_rs_sg_set_page(sgp.add(i), seg.page, seg.len, seg.offset);
            }
        }
        // SAFETY: The context is writable and stays at its address
        // (boxed); `qp` is live; `sgp` holds `n` entries over live pages.
        // rdma_rw sets every field it later reads, so a recycled context
        // needs no clearing. On error the context maps nothing.
        let rc = unsafe {
            sys::rdma_rw_ctx_init(
                mem.ctx.get(),
                qp.as_ptr(),
                port,
                sgp,
                n,
                0,
                remote_addr,
                rkey,
                op.dir().raw(),
            )
        };
        if rc < 0 {
            spares.keep(mem);
            return Err(Error::from_errno(rc));
        }
        // INVARIANT: initialised over the `n` entries at `sgp`, which
        // `sg_ptr` finds again, on the QP of `id`.
        Ok(Self {
            mem: Some(mem),
            big_sg,
            sg_len: n,
            qp,
            port,
            op,
            wrs: rc.unsigned_abs(),
            _not_sync: PhantomData,
        })
    }

    /// Send Queue entries the context posts: its RDMA Reads or Writes,
    /// and on a device that needs them (iWARP Reads) the memory
    /// registrations and invalidations rdma_rw adds, which
    /// `rdma_rw_ctx_init` counts in.
    pub(crate) fn wr_count(&self) -> u32 {
        self.wrs
    }

    /// Send Queue entries of `ctxs` together.
    pub(crate) fn total_wrs(ctxs: &[RwCtx]) -> u32 {
        ctxs.iter()
            .fold(0u32, |acc, c| acc.saturating_add(c.wr_count()))
    }

    /// The context's work requests, the last signalled on `cqe`: the
    /// first of them, to post (or to link others before). One that fails
    /// completes with no handler and flushes the rest.
    ///
    /// # Safety
    ///
    /// Once posted, `self` and `cqe` must stay valid and unchanged until
    /// that completion ran or the QP was drained.
    pub(super) unsafe fn signalled_wrs(
        &mut self,
        cqe: *mut sys::ib_cqe,
    ) -> Result<NonNull<sys::ib_send_wr>> {
        let ctx = self.mem.as_ref().ok_or(EINVAL)?.ctx.get();
        // SAFETY: `ctx` is initialised on the live `qp` (type invariant);
        // without a chain, rdma_rw signals its last work request on `cqe`
        // and returns its first.
        let first = unsafe {
            sys::rdma_rw_ctx_wrs(ctx, self.qp.as_ptr(), self.port, cqe, core::ptr::null_mut())
        };
        NonNull::new(first).ok_or(EINVAL)
    }

    /// Links the context's work requests, unsignalled, in front of
    /// `next`, and returns the first of them: posted with `next`'s chain,
    /// they complete with the signalled work request that ends it. One
    /// that fails completes with no handler and flushes the rest.
    ///
    /// # Safety
    ///
    /// `next` must stay a valid work request until the chain is posted.
    /// Once posted, `self` must not be dropped, linked or posted again
    /// until a later signalled work request completed (successfully or
    /// flushed) or the QP was drained.
    pub(crate) unsafe fn link_before(
        &mut self,
        next: NonNull<sys::ib_send_wr>,
    ) -> NonNull<sys::ib_send_wr> {
        let Some(mem) = self.mem.as_ref() else {
            return next;
        };
        // SAFETY: `ctx` is initialised on the live `qp` (type invariant);
        // with a chain to link to, rdma_rw sets no completion and returns
        // its first work request, which is never null.
        let first = unsafe {
            sys::rdma_rw_ctx_wrs(
                mem.ctx.get(),
                self.qp.as_ptr(),
                self.port,
                core::ptr::null_mut(),
                next.as_ptr(),
            )
        };
        NonNull::new(first).unwrap_or(next)
    }

    /// Releases the context, as dropping it does, and keeps its memory in
    /// `spares` for the next one.
    fn recycle(mut self, spares: &mut RwSpares) {
        if let Some(mem) = self.release() {
            spares.keep(mem);
        }
    }

    /// Unmaps the pages and destroys the context; its memory, once.
    fn release(&mut self) -> Option<KBox<RwMem>> {
        let mut mem = self.mem.take()?;
        let sg = sg_ptr(&mut mem, &mut self.big_sg);
        // SAFETY: The context is initialised over the `sg_len` entries at
        // `sg` on the live `qp` (type invariant) and not posted (`post`'s
        // contract); `mem` is gone from `self`, so this runs once.
        // Unmapping makes an RDMA Read's bytes visible to the CPU.
        unsafe {
            sys::rdma_rw_ctx_destroy(
                mem.ctx.get(),
                self.qp.as_ptr(),
                self.port,
                sg,
                self.sg_len,
                self.op.dir().raw(),
            )
        };
        Some(mem)
    }
}

impl Drop for RwCtx {
    fn drop(&mut self) {
        drop(self.release());
    }
}
