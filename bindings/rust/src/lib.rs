// SPDX-License-Identifier: Apache-2.0
//! ckpt: machine-learning training checkpoints as NumPy `.npz` and safetensors files — the Rust binding of libckpt.
//!
//! A [`Vars`] is a checkpoint's content: named n-dimensional arrays, copied or borrowed from the program, and
//! string metadata. Save it to a file numpy reads ([`Vars::save`]), read one back ([`Vars::read`], or lazily
//! with [`Reader`]), or restore it in place ([`Vars::restore`]). A [`Manager`] keeps numbered checkpoints in a
//! directory and resumes from the latest good one; a [`Writer`] saves in the background; a [`Storage`] puts the
//! files anywhere.
//!
//! ```no_run
//! # fn main() -> ckpt::Result<()> {
//! let mut w = vec![0.5f32; 6];
//! let mut step = [0i64];
//! let mut vars = ckpt::Vars::new()?;
//! vars.add_borrowed("w", &[2, 3], &mut w)?;        // no copy: saves read w, restores write it
//! vars.add_borrowed("step", &[], &mut step)?;
//!
//! let mut manager = ckpt::Manager::open("runs/exp1", &ckpt::ManagerOptions::new().keep(3))?;
//! let start = match manager.restore(&mut vars, None) {
//!     Ok(idx) => idx,
//!     Err(e) if e.code() == ckpt::Code::NotFound => 0,   // nothing saved yet
//!     Err(e) => return Err(e),
//! };
//! for i in start..100 {
//!     vars.get_mut::<f32>("w")?[0] += 1.0;              // train
//!     vars.get_mut::<i64>("step")?[0] = i + 1;
//!     if (i + 1) % 10 == 0 {
//!         manager.save(&vars, i + 1)?;
//!     }
//! }
//! manager.close()?;
//! drop(vars);
//! println!("w[0] = {}", w[0]);                          // the borrow is over: w is the program's again
//! # Ok(())
//! # }
//! ```
//!
//! Paths may be `s3://bucket/key` URLs: libckpt keeps those files on S3-compatible object storage (loading
//! libckpt_s3, configured from the environment as the AWS tools are), with nothing to do in Rust. The `s3`
//! feature adds `StorageHandle::s3` and `S3Options` for a configuration chosen in the program; it links
//! libckpt_s3.
//!
//! Every fallible call returns [`Result`]; an [`Error`] carries ckpt's [`Code`] and the library's message
//! naming the file, member or variable. `include/ckpt/ckpt.h` is the reference for what each call does;
//! `docs/rust.md` describes this binding's ownership, lifetime and threading rules.
//!
//! A borrowed collection cannot outlive its slices, and the slices are reached only through it while it lives:
//!
//! ```compile_fail,E0597
//! let mut vars = ckpt::Vars::new().unwrap();
//! {
//!     let mut w = vec![0f32; 4];
//!     vars.add_borrowed("w", &[4], &mut w).unwrap();
//! } // `w` is dropped here while `vars` still borrows it
//! vars.save("x.npz").unwrap();
//! ```
//!
//! ```compile_fail,E0499
//! let mut w = vec![0f32; 4];
//! let mut vars = ckpt::Vars::new().unwrap();
//! vars.add_borrowed("w", &[4], &mut w).unwrap();
//! w[0] = 1.0; // `w` is mutably borrowed by `vars`
//! vars.save("x.npz").unwrap();
//! ```
//!
//! Handles move between threads (`Send`) but are not shared (`!Sync`): ckpt.h lets each handle be used by
//! one thread at a time.
//!
//! ```compile_fail,E0277
//! fn shared<T: Sync>(_: &T) {}
//! shared(&ckpt::Vars::new().unwrap());
//! ```
//!
//! A manager's queries (`latest`, `list`, `path`, `best`, `metric`) take `&self`; that never lets two threads
//! into one handle, since a `&Manager` cannot cross to another thread either:
//!
//! ```compile_fail,E0277
//! fn shared<T: Sync>(_: &T) {}
//! shared(&ckpt::Manager::open("runs/exp1", &ckpt::ManagerOptions::new()).unwrap());
//! ```

mod comm;
mod dtype;
mod error;
mod files;
mod items;
mod manager;
mod options;
mod reader;
#[cfg(feature = "s3")]
mod s3;
mod step;
mod storage;
/// The raw declarations of ckpt.h, which the safe API wraps: for the crate's own tests, not for programs.
#[doc(hidden)]
pub mod sys;
mod tree;
mod util;
mod vars;
mod writer;

pub use comm::{Comm, CommHandle, Reduce};
pub use dtype::{Bf16, Bool, Complex, Dtype, Element, F8E4M3Fn, F8E4M3Fnuz, F8E5M2Fnuz, F8E8M0Fnu, Pod, F16, F8E5M2};
pub use error::{Code, Error, Result};
pub use files::{File, FileInfo, Files};
pub use manager::{checkpoint_idx, BestMode, LogLevel, Manager, ManagerOptions, StaleTemporary};
pub use options::{Compression, Format, Layout, Options};
pub use reader::{MemberInfo, Reader};
#[cfg(feature = "s3")]
pub use s3::{S3Addressing, S3Options};
pub use step::Step;
pub use storage::{Directories, InputFile, OutputFile, Storage, StorageHandle};
pub use tree::{tree_escape, tree_unescape, Key, Node, Tree, TREE_KEY};
pub use vars::Vars;
pub use writer::{Sink, Writer, WriterKind, WriterOptions};

/// [`Reader`] under its name before 0.11, when ckpt read `.npz` files only.
pub type Npz = Reader;
/// [`Options`] under its name before 0.11, when ckpt wrote `.npz` files only.
pub type NpzOptions = Options;

/// The version of the library loaded at run time, "MAJOR.MINOR.PATCH" (`ckpt_version_string`).
pub fn version() -> &'static str {
    // SAFETY: static storage.
    unsafe { error::static_str(sys::ckpt_version_string()) }
}

/// MAJOR*10000 + MINOR*100 + PATCH of the library loaded at run time (`ckpt_version_number`).
pub fn version_number() -> u32 {
    // SAFETY: no arguments, no state.
    unsafe { sys::ckpt_version_number() }
}
