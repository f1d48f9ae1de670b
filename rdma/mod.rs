// SPDX-License-Identifier: GPL-2.0

//! Safe RDMA abstractions over ib_core and rdma_cm.
//!
//! Each wrapper owns exactly one C object and releases it on drop; what a
//! C object depends on is held by reference count, so no drop order can
//! free it early: a QP holds its PD and CQs, an MR its PD, and a PD, CQ,
//! MR or DMA mapping its [`Device`], which holds the device's
//! registration. Completions are dispatched to [`CqHandler`]s through a
//! [`CqEntry`] embedded in the handler's own context; state that such
//! handlers hand to each other by completion order sits in an
//! [`ExclusiveCell`], which checks the hand-over. Together with the
//! sunrpc wrappers in `sunrpc/`, this is the only place for `unsafe` above
//! `sys`.

mod cell;
mod cm;
mod cq;
mod device;
mod dma;
mod endpoint;
mod frwr;
mod gate;
mod hold;
mod listen;
mod mr;
mod owner;
mod qp;
mod ring;
mod rw;
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) mod selftest;

pub(crate) use cell::{AtomicPair, ExclusiveCell};
pub(crate) use cm::{
    CmEvent, CmHandler, CmId, ConnParam, Dialing, LingeringIds, NetNs, QpCaps, RESOLVE_TIMEOUT_MS,
};
pub(crate) use cq::{Cq, CqEntry, CqHandler, HasCqEntry, Wc};
pub(crate) use device::{Device, Pd};
pub(crate) use dma::{DmaBuf, DmaDir, MappedPages, MAX_MAPPED_PAGES};
pub(crate) use endpoint::{
    Endpoint, EpOwner, EpSizes, Parked, PostError, Recv, RecvBuf, RecvKind, Retired, RwSet,
    SendBuf, SendKind, MAX_SENDS,
};
pub(crate) use frwr::{FrwrList, FrwrOwner, FrwrPool, PostedMrs, RemoteInv};
pub(crate) use gate::QpGate;
pub(crate) use hold::{HeldPages, HoldCount, PageHold};
pub(crate) use listen::{ConnRequest, ListenHandler, ListenSlot, Listener, PendingConn};
pub(crate) use mr::{Mr, PageSeg, Registered};
pub(crate) use owner::{owner, EpHome, EpSlot, ListenHome};
pub(crate) use qp::Qp;
pub(crate) use ring::{
    InvList, ParkedRecv, PostedList, RecvOwner, RecvRing, RecvToken, SendError, SendOwner,
    SendPosted, SendRing, MAX_INV_MRS,
};
pub(crate) use rw::{read_wrs, RwCtx, RwOp, RwSpares};
