// SPDX-License-Identifier: GPL-2.0

//! debugfs directories of read-only counters.

use core::ptr::NonNull;

use kernel::prelude::*;
use kernel::sync::atomic::{Acquire, Atomic, Relaxed, Release};
use kernel::sync::Arc;

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
    unsafe fn counter(&self, name: &CStr, value: *mut u64) {
        if let Some(dir) = self.dir {
            // SAFETY: `dir` is ours; `value` outlives it (caller).
            unsafe { sys::rpcrdma_rs_debugfs_u64(dir.as_ptr(), name.as_char_ptr().cast(), value) };
        }
    }

    /// A read-only file `name` showing a counter that lives for ever.
    pub(crate) fn static_counter(&self, name: &CStr, value: &'static Counter) {
        // SAFETY: `'static` outlives the directory.
        unsafe { self.counter(name, value.as_ptr()) };
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

/// Where a counter lies in a set of counters `T`.
pub(crate) type CounterField<T> = fn(&T) -> &Counter;

/// An event counter. Relaxed: it orders nothing.
pub(crate) struct Counter(Atomic<u64>);

impl Default for Counter {
    fn default() -> Self {
        Self(Atomic::new(0))
    }
}

impl Counter {
    /// A counter at zero.
    pub(crate) const fn new() -> Self {
        Self(Atomic::new(0))
    }

    /// Adds `by`.
    pub(crate) fn add(&self, by: u64) {
        self.0.add(by, Relaxed);
    }

    /// Adds one; the count before.
    pub(crate) fn inc(&self) -> u64 {
        self.0.fetch_add(1, Relaxed)
    }

    /// The count so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }

    /// The counter's word, for debugfs to read.
    pub(crate) fn as_ptr(&self) -> *mut u64 {
        self.0.as_ptr()
    }

    /// The counter's atomic, for debugfs to read.
    pub(crate) fn atomic(&self) -> &Atomic<u64> {
        &self.0
    }
}

/// A debugfs directory showing counters it keeps alive.
///
/// # Invariants
///
/// `dir`'s files read counters of `counters`; `dir` is declared first,
/// so removed (which waits for open files) before the counters may go.
pub(crate) struct CounterDir<T: Send + Sync + 'static> {
    _dir: DebugDir,
    _counters: Arc<T>,
}

/// The module's top directory of one transport, under which each of its
/// objects shows its counters: a `static`, set while the module is loaded.
///
/// # Invariants
///
/// `dir` is null, or the directory of the [`RootGuard`] that set it,
/// which clears it before the directory goes.
pub(crate) struct RootDir {
    dir: Atomic<*mut sys::dentry>,
}

// SAFETY: Only an atomic pointer to a debugfs dentry, which debugfs lets
// any thread create entries under.
unsafe impl Sync for RootDir {}

/// Keeps a [`RootDir`] set; clears it and removes the directory on drop.
pub(crate) struct RootGuard {
    root: &'static RootDir,
    _dir: DebugDir,
}

impl RootDir {
    /// Not set.
    pub(crate) const fn new() -> Self {
        Self {
            dir: Atomic::new(core::ptr::null_mut()),
        }
    }

    /// Creates directory `name` at the debugfs root and sets it, showing
    /// `statics`, until the guard is dropped.
    pub(crate) fn install(
        &'static self,
        name: &CStr,
        statics: &[(&CStr, &'static Counter)],
    ) -> RootGuard {
        let dir = DebugDir::new(name, None);
        for (name, counter) in statics {
            dir.static_counter(name, counter);
        }
        // INVARIANT: the guard's directory.
        self.dir.store(
            dir.dir.map_or(core::ptr::null_mut(), NonNull::as_ptr),
            Release,
        );
        RootGuard {
            root: self,
            _dir: dir,
        }
    }

    /// A directory `name` in the root showing `files` of `counters`, if
    /// the root is set (and debugfs on).
    pub(crate) fn counters<T: Send + Sync + 'static>(
        &self,
        name: &CStr,
        counters: Arc<T>,
        files: &[(&'static CStr, CounterField<T>)],
    ) -> Option<CounterDir<T>> {
        let parent = NonNull::new(self.dir.load(Acquire))?;
        // SAFETY: `name` is a C string; `parent` is the installed root,
        // which is removed only after every object of the transport went
        // (each holds a module reference, and the guard drops at unload).
        let dir =
            unsafe { sys::rpcrdma_rs_debugfs_dir(name.as_char_ptr().cast(), parent.as_ptr()) };
        // INVARIANT: created here.
        let dir = DebugDir {
            dir: NonNull::new(dir),
        };
        for (name, field) in files {
            // SAFETY: `counters` is kept with the directory, which goes
            // first (type invariant of `CounterDir`).
            unsafe { dir.counter(name, field(&counters).as_ptr()) };
        }
        Some(CounterDir {
            _dir: dir,
            _counters: counters,
        })
    }
}

impl Drop for RootGuard {
    fn drop(&mut self) {
        self.root.dir.store(core::ptr::null_mut(), Release);
    }
}
