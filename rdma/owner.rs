// SPDX-License-Identifier: GPL-2.0

//! Objects that rdma_cm and the completion queues call back into.
//!
//! An [`Endpoint`] or a [`Listener`](super::Listener) lives inside the
//! object its callbacks reach (its owner), and hands that object's
//! address to C: as the CM id's context and as the target of every
//! completion. That
//! address must stay valid until the last callback has returned, which
//! takes three things no comment can promise:
//!
//! - the owner never moves once the address was taken: [`Endpoint::accept`],
//!   [`Endpoint::connect`] and [`Listener::start`](super::Listener::start)
//!   take it pinned, and it is not [`Unpin`], so the pin holds until it
//!   is dropped;
//! - nothing of the owner that a callback reaches is dropped while one can
//!   run: the endpoint or listener is dropped first (its drop stops the
//!   callbacks and waits for a running one), before every other field;
//!   and the owner has no [`Drop`] of its own, which would run before
//!   any field's;
//! - the endpoint or listener is the owner's own field, not one of some
//!   other object's, which could be dropped, or moved, on its own.
//!
//! [`owner!`] declares the owner's struct with those fields first, checks
//! the rest at compile time, and is the only implementation of [`EpHome`]
//! and [`ListenHome`]: the rules are properties of the types.

use kernel::sync::SetOnce;

use super::{Endpoint, EpOwner, ListenHandler, ListenSlot};

/// Where an [`EpHome`] keeps its [`Endpoint`]: set once.
pub(crate) type EpSlot<T> = SetOnce<Endpoint<T>>;

/// An object that holds its [`Endpoint`] as [`owner!`] lays it out.
///
/// # Safety
///
/// Implemented by [`owner!`] only. [`EpHome::endpoint`] returns a field of
/// `self`, declared before every other field but a header of a type
/// without drop glue; `Self` implements neither [`Drop`] nor [`Unpin`].
pub(crate) unsafe trait EpHome: Sized + Sync + 'static {
    /// Where the owner keeps its endpoint.
    fn endpoint(&self) -> &EpSlot<Self>
    where
        Self: EpOwner;
}

/// An object that holds its [`Listener`](super::Listener) as [`owner!`]
/// lays it out.
///
/// # Safety
///
/// As for [`EpHome`], with [`ListenHome::listener`].
pub(crate) unsafe trait ListenHome: Sized + Sync + 'static {
    /// Where the owner keeps its listener.
    fn listener(&self) -> &ListenSlot<Self>
    where
        Self: ListenHandler;
}

/// Declares the owner of an [`Endpoint`] or of a
/// [`Listener`](super::Listener) (one of the two: each one's callbacks
/// could reach the other while it is dropped): a struct whose first field
/// is that (after an optional header), and which implements [`EpHome`] or
/// [`ListenHome`].
///
/// ```ignore
/// crate::rdma::owner! {
///     /// A connection: `xprt` first (a `repr(C)` sunrpc object).
///     #[repr(C)]
///     #[pin_data]
///     pub(crate) struct SvcConn(xprt: SvcXprt) {
///         endpoint ep;
///         #[pin]
///         ready: SpinLock<Incoming>,
///         // ...
///     }
/// }
/// ```
///
/// The fields are declared, and so dropped, in this order: the header (a
/// type without drop glue, which dropping leaves as it was), the endpoint
/// (its drop stops calling the owner, waiting for a running callback,
/// before it frees anything) or the listener (its drop destroys the id,
/// waiting for a running request), then the rest. So nothing a callback
/// reaches has been dropped while one can still run.
///
/// Rejected at compile time, each of which would break that:
///
/// ```compile_fail
/// crate::rdma::owner! { struct Conn(head: KVec<u8>) { endpoint ep; } }
/// // error: the header has drop glue (`needs_drop`).
/// ```
///
/// ```compile_fail
/// crate::rdma::owner! { struct Conn { endpoint ep; #[pin] lock: SpinLock<()>, } }
/// impl Drop for Conn { fn drop(&mut self) {} }
/// // error: conflicting implementations of `MustNotImplDrop`: a `Drop`
/// // would run before the endpoint's, with callbacks still running.
/// ```
///
/// ```compile_fail
/// crate::rdma::owner! { struct Conn { endpoint ep; state: u32, } }
/// // error: type annotations needed (`AmbiguousIfUnpin`): `Conn` is
/// // `Unpin`, so `Pin<&Conn>` would not keep it from moving.
/// ```
///
/// The owner cannot move once [`Endpoint::accept`], [`Endpoint::connect`]
/// or [`Listener::start`](super::Listener::start) took its address: they
/// take `Pin<&Self>`, which for a type that is not `Unpin` only a pinned
/// (boxed, or `pin_init`ed) owner gives.
macro_rules! owner {
    (@emit [$($attr:tt)*] [$($vis:tt)*] $name:ident [$($hvis:vis $head:ident : $hty:ty)?]
     [$($fattr:tt)*] $field:ident $slot:ident $home:ident $method:ident $bound:ident;
     $($body:tt)*) => {
        $($attr)*
        $($vis)* struct $name {
            $($hvis $head: $hty,)?
            $($fattr)*
            $field: $crate::rdma::$slot<$name>,
            $($body)*
        }

        // The header is dropped first, while callbacks may still reach it.
        $(const _: () = assert!(!::core::mem::needs_drop::<$hty>());)?

        // No `Drop`: it would run before the endpoint's (as pin-init does).
        const _: () = {
            #[allow(dead_code)]
            trait MustNotImplDrop {}
            #[allow(drop_bounds)]
            impl<T: ::core::ops::Drop + ?Sized> MustNotImplDrop for T {}
            impl MustNotImplDrop for $name {}
        };

        // Not `Unpin`: a pinned owner stays where it is until dropped.
        const _: fn() = || {
            trait AmbiguousIfUnpin<A> {
                fn some_item() {}
            }
            impl<T: ?Sized> AmbiguousIfUnpin<()> for T {}
            #[allow(dead_code)]
            struct Invalid;
            impl<T: ?Sized + ::core::marker::Unpin> AmbiguousIfUnpin<Invalid> for T {}
            let _ = <$name as AmbiguousIfUnpin<_>>::some_item;
        };

        // SAFETY: `$field` is a field of `Self`, declared before all
        // others but the header, which has no drop glue (asserted above);
        // `Self` implements neither `Drop` nor `Unpin` (asserted above).
        #[allow(unsafe_code)]
        unsafe impl $crate::rdma::$home for $name {
            fn $method(&self) -> &$crate::rdma::$slot<Self>
            where
                Self: $crate::rdma::$bound,
            {
                &self.$field
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident $(($hvis:vis $head:ident : $hty:ty))? {
            endpoint $field:ident;
            $($body:tt)*
        }
    ) => {
        $crate::rdma::owner!(@emit [$(#[$meta])*] [$vis] $name [$($hvis $head: $hty)?]
            [] $field EpSlot EpHome endpoint EpOwner;
            $($body)*);
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident $(($hvis:vis $head:ident : $hty:ty))? {
            listener $field:ident;
            $($body:tt)*
        }
    ) => {
        $crate::rdma::owner!(@emit [$(#[$meta])*] [$vis] $name [$($hvis $head: $hty)?]
            [#[pin]] $field ListenSlot ListenHome listener ListenHandler;
            $($body)*);
    };
}
pub(crate) use owner;
