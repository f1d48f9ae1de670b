// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers over the sunrpc client objects the transport works on:
//! the `rpc_xprt` ([`Xprt`]), requests being sent and requests pinned
//! for their Reply ([`SendRqst`], [`PinnedRqst`]) with their `xdr_buf`s, its `transport_lock` ([`TransportLock`], an
//! RAII guard) and the proof that the caller holds `XPRT_LOCKED`
//! ([`XprtLocked`]), which the connection owner's state requires, and
//! request slots kept for the transport's life ([`SlotPool`]), and the
//! backchannel's requests ([`BcPool`]), and the generic glue of a client
//! transport class ([`ClientXprt`], [`ClientTransport`]): every C entry
//! point of `rpc_xprt_ops`, so that the transport implements a safe trait;
//! on the server side the nfsd transport's ops ([`SvcTransport`]) and the
//! backchannel of its connections ([`BackchannelOwner`], [`BcClass`]).
//! Like `rdma/`, this is where `unsafe` lives; `transport/` calls it.

mod addr;
mod backchannel;
mod class;
mod client;
mod debugfs;
mod rqst;
mod slots;
mod svc;
mod svc_backchannel;
mod sysctl;
pub(crate) mod trace;
mod wait;
mod xprt;

pub(crate) use addr::{format_addresses, free_addresses};
pub(crate) use backchannel::{BcPool, BC_BUF};
pub(crate) use class::XprtClass;
pub(crate) use client::{
    Buf, ClassCell, ClientClass, ClientTransport, ClientXprt, ForwardCall, PageList, Timeouts,
    XprtRef,
};
pub(crate) use debugfs::{Counter, CounterDir, RootDir, RootGuard};
pub(crate) use rqst::{PinnedRqst, SendRqst};
pub(crate) use slots::{SlotPool, HOLD_WARN_SECS};
pub(crate) use svc::{
    discard, impl_svc_object, new_object, Ctxt, HeldBytes, Net, PageRefs, Serv, SockAddr, SvcClass,
    SvcObject, SvcRqst, SvcTransport, SvcXprt, XptFlag,
};
pub(crate) use svc_backchannel::{BackchannelOwner, BcClass};
pub(crate) use sysctl::{SvcStat, Sysctls};
pub(crate) use wait::{DelayedWork, HasDelayedWork, WaitQueue};
pub(crate) use xprt::{hz, jiffies, Xprt, XprtLocked};
