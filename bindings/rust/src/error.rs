// SPDX-License-Identifier: Apache-2.0
//! Errors: every fallible call returns `Result<T, Error>`, where the error carries ckpt's code and the detailed
//! message `ckpt_error_message()` gave for the failing call.
use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_int;

use crate::sys;

/// A ckpt status code (`CKPT_E*` in ckpt.h). The values are fixed forever; codes a newer library adds arrive as
/// `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// `CKPT_ERROR`: an unexpected internal failure (also what a panicking callback becomes).
    Internal,
    /// `CKPT_EINVAL`: an invalid argument.
    InvalidArgument,
    /// `CKPT_ENOTFOUND`: no such variable, file or checkpoint.
    NotFound,
    /// `CKPT_EFORMAT`: a malformed or corrupt file (zip structure, npy header, sizes, CRC).
    Format,
    /// `CKPT_EIO`: the storage failed; the message carries the OS error.
    Io,
    /// `CKPT_ENOMEM`: out of memory.
    OutOfMemory,
    /// `CKPT_EMISMATCH`: a restore found variables missing, or of another dtype or shape.
    Mismatch,
    /// `CKPT_EUNSUPPORTED`: valid NumPy content ckpt does not handle (object or structured dtypes).
    Unsupported,
    /// `CKPT_EBUSY`: the checkpoint directory is locked by another manager.
    Busy,
    /// `CKPT_EEXIST`: the name is already present.
    Exists,
    /// `CKPT_EBUFS`: a buffer was too small.
    BufferTooSmall,
    /// A negative code this binding does not know.
    Unknown(i32),
}

impl Code {
    /// The code for a raw negative value.
    pub fn from_raw(code: i32) -> Code {
        match code {
            sys::CKPT_ERROR => Code::Internal,
            sys::CKPT_EINVAL => Code::InvalidArgument,
            sys::CKPT_ENOTFOUND => Code::NotFound,
            sys::CKPT_EFORMAT => Code::Format,
            sys::CKPT_EIO => Code::Io,
            sys::CKPT_ENOMEM => Code::OutOfMemory,
            sys::CKPT_EMISMATCH => Code::Mismatch,
            sys::CKPT_EUNSUPPORTED => Code::Unsupported,
            sys::CKPT_EBUSY => Code::Busy,
            sys::CKPT_EEXIST => Code::Exists,
            sys::CKPT_EBUFS => Code::BufferTooSmall,
            other => Code::Unknown(other),
        }
    }

    /// The raw value (`CKPT_EIO` is -5).
    pub fn raw(self) -> i32 {
        match self {
            Code::Internal => sys::CKPT_ERROR,
            Code::InvalidArgument => sys::CKPT_EINVAL,
            Code::NotFound => sys::CKPT_ENOTFOUND,
            Code::Format => sys::CKPT_EFORMAT,
            Code::Io => sys::CKPT_EIO,
            Code::OutOfMemory => sys::CKPT_ENOMEM,
            Code::Mismatch => sys::CKPT_EMISMATCH,
            Code::Unsupported => sys::CKPT_EUNSUPPORTED,
            Code::Busy => sys::CKPT_EBUSY,
            Code::Exists => sys::CKPT_EEXIST,
            Code::BufferTooSmall => sys::CKPT_EBUFS,
            Code::Unknown(code) => code,
        }
    }

    /// The library's static text for the code (`ckpt_strerror`), e.g. "invalid argument".
    pub fn description(self) -> &'static str {
        // SAFETY: ckpt_strerror returns static text for every value.
        unsafe { static_str(sys::ckpt_strerror(self.raw() as c_int)) }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

/// A failed ckpt call: its code and the message saying which file, member or variable, and what went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    code: Code,
    message: String,
}

/// `std::result::Result` with ckpt's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error of `code` with `message`: what a [`Storage`](crate::Storage) callback or a
    /// [`Writer`](crate::Writer) save closure returns to fail the operation with that code.
    pub fn new(code: Code, message: impl Into<String>) -> Error {
        Error { code, message: message.into() }
    }

    /// The code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The detailed message (`ckpt_error_message()` of the failing call, or the binding's own).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error of the ckpt call that just returned `rc` on this thread.
    pub(crate) fn last(rc: c_int) -> Error {
        // SAFETY: ckpt_error_message returns a NUL-terminated string valid until this thread's next failing call;
        // it is copied at once.
        let message = unsafe { CStr::from_ptr(sys::ckpt_error_message()) }.to_string_lossy().into_owned();
        Error { code: Code::from_raw(rc), message }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::new(Code::InvalidArgument, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.code)
        } else {
            write!(f, "{} ({})", self.message, self.code)
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    /// Recovers the ckpt error a [`Sink`](crate::Sink) write failed with; any other I/O error becomes
    /// [`Code::Io`].
    fn from(e: std::io::Error) -> Error {
        let message = e.to_string();
        match e.into_inner().map(|inner| inner.downcast::<Error>()) {
            Some(Ok(ckpt_error)) => *ckpt_error,
            _ => Error::new(Code::Io, message),
        }
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        let kind = match e.code {
            Code::NotFound => std::io::ErrorKind::NotFound,
            Code::Exists => std::io::ErrorKind::AlreadyExists,
            Code::InvalidArgument => std::io::ErrorKind::InvalidInput,
            Code::Format => std::io::ErrorKind::InvalidData,
            _ => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, e)
    }
}

/// Turns a ckpt return code into a `Result`.
pub(crate) fn check(rc: c_int) -> Result<()> {
    if rc == sys::CKPT_OK {
        Ok(())
    } else {
        Err(Error::last(rc))
    }
}

/// A static C string from the library as `&'static str` ("" for NULL).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string in static storage.
pub(crate) unsafe fn static_str(p: *const std::os::raw::c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    CStr::from_ptr(p).to_str().unwrap_or("")
}
