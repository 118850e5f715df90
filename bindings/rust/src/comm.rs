// SPDX-License-Identifier: Apache-2.0
//! Communicators: how the processes of one job that save a sharded checkpoint together coordinate
//! (`ckpt_comm_ops`). ckpt has no transport of its own: implement [`Comm`] over the one the job uses (MPI,
//! NCCL, Gloo), or take libckpt_mpi's through [`CommHandle::from_raw`].
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::storage::guarded;
use crate::sys;

/// The reductions of [`Comm::all_reduce`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    Min,
    Max,
    Sum,
}

/// The collectives ckpt needs. Every method but `rank` and `size` is collective: ckpt makes the same calls in
/// the same order on every rank, from the thread that called it, with small buffers (statuses, names, shapes).
/// An `Err` (or a panic, caught) fails the ckpt call that made the call.
pub trait Comm: Send {
    /// This process's rank, in `0..size()`.
    fn rank(&self) -> i32;
    /// The number of ranks.
    fn size(&self) -> i32;
    /// Returns once every rank has called it.
    fn barrier(&mut self) -> Result<()>;
    /// The minimum, maximum or sum of every rank's `value`.
    fn all_reduce(&mut self, value: i64, op: Reduce) -> Result<i64>;
    /// Replaces `buf` on every rank with rank `root`'s bytes (every rank passes the same length).
    fn broadcast(&mut self, buf: &mut [u8], root: i32) -> Result<()>;
    /// `recv[r * send.len()..][..send.len()]` gets rank r's `send` (every rank passes the same length).
    fn all_gather(&mut self, send: &[u8], recv: &mut [u8]) -> Result<()>;
}

struct RawComm(NonNull<sys::ckpt_comm>);

// SAFETY: the library's communicator is used by one thread at a time (the calling thread of each ckpt call);
// the handle is only passed to calls.
unsafe impl Send for RawComm {}
unsafe impl Sync for RawComm {}

impl Drop for RawComm {
    fn drop(&mut self) {
        // SAFETY: this handle's reference, released once; managers keep their own.
        unsafe { sys::ckpt_comm_free(self.0.as_ptr()) }
    }
}

/// A reference to a ckpt communicator, for [`ManagerOptions`](crate::ManagerOptions). Cloning is cheap.
#[derive(Clone)]
pub struct CommHandle {
    raw: Arc<RawComm>,
}

impl CommHandle {
    /// A communicator made of `comm`'s methods (`ckpt_comm_new`). The library owns it from now on.
    pub fn new<C: Comm + 'static>(comm: C) -> Result<CommHandle> {
        let payload = Box::into_raw(Box::new(Box::new(comm) as Box<dyn Comm>));
        let ops = sys::ckpt_comm_ops {
            version: sys::CKPT_COMM_OPS_VERSION,
            payload: payload.cast(),
            rank: Some(rank),
            size: Some(size),
            barrier: Some(barrier),
            all_reduce_i64: Some(all_reduce_i64),
            broadcast: Some(broadcast),
            all_gather: Some(all_gather),
            destroy: Some(destroy),
        };
        let mut raw = ptr::null_mut();
        // SAFETY: a complete table; the library copies it and keeps the payload once it succeeds.
        let rc = unsafe { sys::ckpt_comm_new(&mut raw, &ops) };
        if rc != sys::CKPT_OK {
            let error = Error::last(rc);
            // SAFETY: on failure destroy is not called: the payload is still ours (ckpt.h).
            drop(unsafe { Box::from_raw(payload) });
            return Err(error);
        }
        // SAFETY: CKPT_OK gives a valid handle that is now ours.
        Ok(unsafe { CommHandle::from_raw(raw) })
    }

    /// Takes ownership of a communicator made elsewhere (libckpt_mpi's `ckpt_mpi_comm_new`).
    ///
    /// # Safety
    /// `raw` is a valid `ckpt_comm*` whose reference the caller gives up.
    pub unsafe fn from_raw(raw: *mut sys::ckpt_comm) -> CommHandle {
        let raw = NonNull::new(raw).expect("a NULL ckpt_comm");
        CommHandle { raw: Arc::new(RawComm(raw)) }
    }

    /// This process's rank, as the library was told.
    pub fn rank(&self) -> i32 {
        // SAFETY: a valid handle.
        unsafe { sys::ckpt_comm_rank(self.as_ptr()) }
    }

    /// The number of ranks.
    pub fn size(&self) -> i32 {
        // SAFETY: a valid handle.
        unsafe { sys::ckpt_comm_size(self.as_ptr()) }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::ckpt_comm {
        self.raw.0.as_ptr()
    }
}

impl std::fmt::Debug for CommHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CommHandle(rank {} of {})", self.rank(), self.size())
    }
}

// --------------------------------------------------------------------------------- the callbacks (C → Rust)

/// # Safety
/// `payload` is the pointer made by `new`, alive until `destroy`.
unsafe fn comm<'c>(payload: *mut c_void) -> &'c mut dyn Comm {
    &mut **(payload as *mut Box<dyn Comm>)
}

unsafe extern "C" fn rank(payload: *mut c_void, out: *mut i32) -> c_int {
    guarded(|| {
        *out = comm(payload).rank();
        Ok(())
    })
}

unsafe extern "C" fn size(payload: *mut c_void, out: *mut i32) -> c_int {
    guarded(|| {
        *out = comm(payload).size();
        Ok(())
    })
}

unsafe extern "C" fn barrier(payload: *mut c_void) -> c_int {
    guarded(|| comm(payload).barrier())
}

unsafe extern "C" fn all_reduce_i64(payload: *mut c_void, value: *mut i64, op: u32) -> c_int {
    guarded(|| {
        let op = match op {
            sys::CKPT_REDUCE_MIN => Reduce::Min,
            sys::CKPT_REDUCE_MAX => Reduce::Max,
            sys::CKPT_REDUCE_SUM => Reduce::Sum,
            _ => return Err(Error::invalid(format!("all_reduce: unknown reduction {op}"))),
        };
        *value = comm(payload).all_reduce(*value, op)?;
        Ok(())
    })
}

unsafe extern "C" fn broadcast(payload: *mut c_void, buf: *mut c_void, size: usize, root: i32) -> c_int {
    guarded(|| {
        let buf: &mut [u8] = if size == 0 { &mut [] } else { std::slice::from_raw_parts_mut(buf.cast(), size) };
        comm(payload).broadcast(buf, root)
    })
}

unsafe extern "C" fn all_gather(payload: *mut c_void, send: *const c_void, size: usize, recv: *mut c_void) -> c_int {
    guarded(|| {
        let c = comm(payload);
        let total = size * c.size().max(0) as usize;
        let send: &[u8] = if size == 0 { &[] } else { std::slice::from_raw_parts(send.cast(), size) };
        let recv: &mut [u8] = if total == 0 { &mut [] } else { std::slice::from_raw_parts_mut(recv.cast(), total) };
        c.all_gather(send, recv)
    })
}

unsafe extern "C" fn destroy(payload: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(payload as *mut Box<dyn Comm>))));
}
