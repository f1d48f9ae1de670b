// SPDX-License-Identifier: GPL-2.0

//! debugfs directories of read-only counters.

use core::ptr::NonNull;

use kernel::prelude::*;

use crate::sys;

/// A debugfs directory, removed with everything in it on drop.
///
/// # Invariants
///
/// `dir` is a directory this value created, or `None` (debugfs is off).
pub(crate) struct DebugDir {
    dir: Option<NonNull<sys::dentry>>,
}

// SAFETY: debugfs entries may be created and removed from any thread.
unsafe impl Send for DebugDir {}
// SAFETY: `&DebugDir` only creates entries, which debugfs serialises.
unsafe impl Sync for DebugDir {}

impl DebugDir {
    /// A directory `name` under `parent`, or at the debugfs root.
    pub(crate) fn new(name: &CStr, parent: Option<&DebugDir>) -> Self {
        let parent = parent
            .and_then(|p| p.dir)
            .map_or(core::ptr::null_mut(), NonNull::as_ptr);
        // SAFETY: `name` is a C string; `parent` is ours, or null.
        let dir = unsafe { sys::rpcrdma_rs_debugfs_dir(name.as_char_ptr().cast(), parent) };
        // INVARIANT: created here, or none.
        Self {
            dir: NonNull::new(dir),
        }
    }

    /// A read-only file `name` showing `*value`.
    ///
    /// # Safety
    ///
    /// `value` must stay valid until this directory is dropped.
    pub(crate) unsafe fn counter(&self, name: &CStr, value: *mut u64) {
        if let Some(dir) = self.dir {
            // SAFETY: `dir` is ours; `value` outlives it (caller).
            unsafe { sys::rpcrdma_rs_debugfs_u64(dir.as_ptr(), name.as_char_ptr().cast(), value) };
        }
    }
}

impl Drop for DebugDir {
    fn drop(&mut self) {
        if let Some(dir) = self.dir {
            // SAFETY: Created by `new`; removing waits for open files.
            unsafe { sys::rpcrdma_rs_debugfs_remove(dir.as_ptr()) };
        }
    }
}
