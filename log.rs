// SPDX-License-Identifier: GPL-2.0

//! Logging the way an administrator expects from a kernel transport:
//! debug messages behind dynamic debug (`echo 'module rpcrdma_rs +p' >
//! /sys/kernel/debug/dynamic_debug/control`), and one rate limit for the
//! warnings a peer can provoke.
//!
//! `kernel::pr_debug!` is compiled out unless `CONFIG_RUST_DEBUG_ASSERTIONS`
//! is set and is not wired to dynamic debug, hence [`rdebug!`]. Messages
//! are formatted on the stack: they may be issued under a spinlock.

use core::fmt;

use crate::sys;

/// Whether the module's dynamic debug call site is enabled.
pub(crate) fn debug_enabled() -> bool {
    // SAFETY: Reads a static-key backed descriptor; no preconditions.
    unsafe { sys::rpcrdma_rs_debug_enabled() }
}

/// Longest debug message; longer ones are cut.
const DEBUG_MSG_MAX: usize = 160;

/// A message formatted on the stack, so that debug messages work in any
/// context, spinlocks held included.
struct StackMsg {
    buf: [u8; DEBUG_MSG_MAX],
    len: usize,
}

impl fmt::Write for StackMsg {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Keep the last byte for the NUL.
        let room = DEBUG_MSG_MAX - 1 - self.len;
        let take = s.len().min(room);
        if let (Some(dst), Some(src)) = (
            self.buf.get_mut(self.len..self.len + take),
            s.as_bytes().get(..take),
        ) {
            dst.copy_from_slice(src);
            self.len += take;
        }
        Ok(())
    }
}

/// Prints `args` at `KERN_DEBUG`. Callers check [`debug_enabled`] first
/// (the [`rdebug!`] macro does), so nothing is formatted while it is off.
pub(crate) fn debug(args: fmt::Arguments<'_>) {
    let mut msg = StackMsg {
        buf: [0; DEBUG_MSG_MAX],
        len: 0,
    };
    let _ = fmt::Write::write_fmt(&mut msg, args);
    // SAFETY: `buf` is NUL-terminated: `write_str` never fills the last
    // byte, which starts out zero.
    unsafe { sys::rpcrdma_rs_debug(msg.buf.as_ptr().cast()) };
}

/// Whether a peer-provoked warning may be printed now.
pub(crate) fn warn_allowed() -> bool {
    // SAFETY: The helper only touches its own static ratelimit state.
    unsafe { sys::rpcrdma_rs_warn_ratelimit() }
}

/// `pr_debug!` through dynamic debug: free while disabled.
macro_rules! rdebug {
    ($($arg:tt)*) => {
        if $crate::log::debug_enabled() {
            $crate::log::debug(::core::format_args!($($arg)*));
        }
    };
}

/// `pr_warn!`, rate limited across the module.
macro_rules! rwarn {
    ($($arg:tt)*) => {
        if $crate::log::warn_allowed() {
            ::kernel::pr_warn!($($arg)*);
        }
    };
}

/// `pr_info!`, under the same rate limit: for events a peer can repeat.
macro_rules! rinfo {
    ($($arg:tt)*) => {
        if $crate::log::warn_allowed() {
            ::kernel::pr_info!($($arg)*);
        }
    };
}
