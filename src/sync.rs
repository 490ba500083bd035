//! Taking a lock whatever happened to its last holder.
//!
//! A panic while a lock is held is a bug, and must not take every later
//! request down with it: r8s's locks guard data that is whole between
//! statements (versions are swapped in, maps updated in one call), so the
//! data is used as the panicking thread left it. Every lock in r8s is taken
//! through these two traits instead of recovering at each call site.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// [`Mutex::lock`], recovering from poison.
pub trait MutexExt<T> {
    /// The guard, poisoned or not.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T> MutexExt<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// [`RwLock::read`] and [`RwLock::write`], recovering from poison.
pub trait RwLockExt<T> {
    /// A read guard, poisoned or not.
    fn reading(&self) -> RwLockReadGuard<'_, T>;
    /// A write guard, poisoned or not.
    fn writing(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T> RwLockExt<T> for RwLock<T> {
    fn reading(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(|p| p.into_inner())
    }

    fn writing(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(|p| p.into_inner())
    }
}
