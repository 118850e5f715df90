//! ckpt: machine-learning training checkpoints as NumPy `.npz` files — the Rust binding of libckpt.

mod dtype;
mod error;
pub mod sys;

pub use dtype::{Bf16, Bool, Complex, Dtype, Element, F16, F8E4M3Fn, F8E4M3Fnuz, F8E5M2, F8E5M2Fnuz, F8E8M0Fnu, Pod};
pub use error::{Code, Error, Result};
