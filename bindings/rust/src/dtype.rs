// SPDX-License-Identifier: Apache-2.0
//! Dtypes, and the Rust types whose slices hold arrays of them.
use std::fmt;

use crate::error::static_str;
use crate::sys;

/// An array's element type (`CKPT_BOOL` … `CKPT_VOID` in ckpt.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    Float16,
    Float32,
    Float64,
    Complex64,
    Complex128,
    /// numpy `<U<n>`: n UTF-32 code units per item (itemsize 4n).
    Unicode,
    /// numpy `|S<n>`: n bytes per item.
    Bytes,
    Bfloat16,
    Float8E4M3Fn,
    Float8E5M2,
    Float8E4M3Fnuz,
    Float8E5M2Fnuz,
    Float8E8M0Fnu,
    /// numpy `|V<n>`: n raw bytes per item.
    Void,
}

impl Dtype {
    /// The dtype of a ckpt.h value; `None` for values that are not dtypes (or that a newer library added).
    pub fn from_code(code: u32) -> Option<Dtype> {
        Some(match code {
            sys::CKPT_BOOL => Dtype::Bool,
            sys::CKPT_INT8 => Dtype::Int8,
            sys::CKPT_INT16 => Dtype::Int16,
            sys::CKPT_INT32 => Dtype::Int32,
            sys::CKPT_INT64 => Dtype::Int64,
            sys::CKPT_UINT8 => Dtype::Uint8,
            sys::CKPT_UINT16 => Dtype::Uint16,
            sys::CKPT_UINT32 => Dtype::Uint32,
            sys::CKPT_UINT64 => Dtype::Uint64,
            sys::CKPT_FLOAT16 => Dtype::Float16,
            sys::CKPT_FLOAT32 => Dtype::Float32,
            sys::CKPT_FLOAT64 => Dtype::Float64,
            sys::CKPT_COMPLEX64 => Dtype::Complex64,
            sys::CKPT_COMPLEX128 => Dtype::Complex128,
            sys::CKPT_UNICODE => Dtype::Unicode,
            sys::CKPT_BYTES => Dtype::Bytes,
            sys::CKPT_BFLOAT16 => Dtype::Bfloat16,
            sys::CKPT_FLOAT8_E4M3FN => Dtype::Float8E4M3Fn,
            sys::CKPT_FLOAT8_E5M2 => Dtype::Float8E5M2,
            sys::CKPT_FLOAT8_E4M3FNUZ => Dtype::Float8E4M3Fnuz,
            sys::CKPT_FLOAT8_E5M2FNUZ => Dtype::Float8E5M2Fnuz,
            sys::CKPT_FLOAT8_E8M0FNU => Dtype::Float8E8M0Fnu,
            sys::CKPT_VOID => Dtype::Void,
            _ => return None,
        })
    }

    /// The ckpt.h value (`CKPT_FLOAT32` is 11).
    pub fn code(self) -> u32 {
        match self {
            Dtype::Bool => sys::CKPT_BOOL,
            Dtype::Int8 => sys::CKPT_INT8,
            Dtype::Int16 => sys::CKPT_INT16,
            Dtype::Int32 => sys::CKPT_INT32,
            Dtype::Int64 => sys::CKPT_INT64,
            Dtype::Uint8 => sys::CKPT_UINT8,
            Dtype::Uint16 => sys::CKPT_UINT16,
            Dtype::Uint32 => sys::CKPT_UINT32,
            Dtype::Uint64 => sys::CKPT_UINT64,
            Dtype::Float16 => sys::CKPT_FLOAT16,
            Dtype::Float32 => sys::CKPT_FLOAT32,
            Dtype::Float64 => sys::CKPT_FLOAT64,
            Dtype::Complex64 => sys::CKPT_COMPLEX64,
            Dtype::Complex128 => sys::CKPT_COMPLEX128,
            Dtype::Unicode => sys::CKPT_UNICODE,
            Dtype::Bytes => sys::CKPT_BYTES,
            Dtype::Bfloat16 => sys::CKPT_BFLOAT16,
            Dtype::Float8E4M3Fn => sys::CKPT_FLOAT8_E4M3FN,
            Dtype::Float8E5M2 => sys::CKPT_FLOAT8_E5M2,
            Dtype::Float8E4M3Fnuz => sys::CKPT_FLOAT8_E4M3FNUZ,
            Dtype::Float8E5M2Fnuz => sys::CKPT_FLOAT8_E5M2FNUZ,
            Dtype::Float8E8M0Fnu => sys::CKPT_FLOAT8_E8M0FNU,
            Dtype::Void => sys::CKPT_VOID,
        }
    }

    /// The library's name for it (`ckpt_dtype_name`): "float32", "bfloat16", "float8_e4m3fn", "void", …
    pub fn name(self) -> &'static str {
        // SAFETY: ckpt_dtype_name returns static text (or NULL, for values that are not dtypes).
        unsafe { static_str(sys::ckpt_dtype_name(self.code())) }
    }

    /// Bytes per item (`ckpt_dtype_size`); 0 for Unicode, Bytes and Void, whose itemsize is per array.
    pub fn size(self) -> usize {
        // SAFETY: a pure function of its argument.
        unsafe { sys::ckpt_dtype_size(self.code()) }
    }

    /// Whether items have a fixed width set per array (Unicode, Bytes, Void) rather than by the dtype.
    pub fn is_fixed_width(self) -> bool {
        matches!(self, Dtype::Unicode | Dtype::Bytes | Dtype::Void)
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type whose values are the items of one numeric ckpt dtype, laid out as ckpt lays them out (native
/// byte order). Implemented for `bool`, the integers, `f32`, `f64`, [`Complex`] of `f32`/`f64`, and one
/// `#[repr(transparent)]` newtype per dtype Rust has no type for ([`F16`], [`Bf16`], the float8 types).
pub trait Element: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The dtype of arrays of this type.
    const DTYPE: Dtype;

    /// Whether `bytes` (a whole number of items) holds only valid values of this type. Every bit pattern is
    /// valid except for `bool` (0 or 1).
    #[doc(hidden)]
    fn valid_bytes(_bytes: &[u8]) -> bool {
        true
    }
}

/// An [`Element`] every bit pattern of which is a valid value: all of them but `bool` (use [`Bool`] for a
/// boolean array that ckpt may write into). Only these can back borrowed arrays or receive reads in place,
/// because the library writes raw bytes from the file into them.
pub trait Pod: Element {}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: Dtype = Dtype::$d;
        }
        impl Pod for $t {}
    )*};
}

element! {
    i8 => Int8, i16 => Int16, i32 => Int32, i64 => Int64,
    u8 => Uint8, u16 => Uint16, u32 => Uint32, u64 => Uint64,
    f32 => Float32, f64 => Float64,
    Complex<f32> => Complex64, Complex<f64> => Complex128,
    Bool => Bool, F16 => Float16, Bf16 => Bfloat16,
    F8E4M3Fn => Float8E4M3Fn, F8E5M2 => Float8E5M2, F8E4M3Fnuz => Float8E4M3Fnuz,
    F8E5M2Fnuz => Float8E5M2Fnuz, F8E8M0Fnu => Float8E8M0Fnu,
}

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: Dtype = Dtype::Bool;
    fn valid_bytes(bytes: &[u8]) -> bool {
        bytes.iter().all(|&b| b <= 1)
    }
}

/// A complex number as numpy's complex64 (`Complex<f32>`) and complex128 (`Complex<f64>`) store it: real
/// part, then imaginary part.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Complex<T> {
    pub re: T,
    pub im: T,
}

impl<T> Complex<T> {
    pub fn new(re: T, im: T) -> Complex<T> {
        Complex { re, im }
    }
}

/// A `bool` item as its byte: numpy's `|b1`, for borrowed arrays and reads in place, which may receive any
/// byte from a file. Nonzero is true.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Bool(pub u8);

impl From<bool> for Bool {
    fn from(b: bool) -> Bool {
        Bool(b as u8)
    }
}

impl From<Bool> for bool {
    fn from(b: Bool) -> bool {
        b.0 != 0
    }
}

macro_rules! raw_bits {
    ($($(#[$doc:meta])* $name:ident($bits:ty);)*) => {$(
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $name(pub $bits);

        impl $name {
            /// The value with these raw bits.
            pub fn from_bits(bits: $bits) -> $name {
                $name(bits)
            }
            /// The raw bits.
            pub fn to_bits(self) -> $bits {
                self.0
            }
        }
    )*};
}

raw_bits! {
    /// IEEE binary16 (numpy float16), as raw bits.
    F16(u16);
    /// bfloat16 (ml_dtypes, torch): 1 sign, 8 exponent, 7 mantissa bits, as raw bits.
    Bf16(u16);
    /// ml_dtypes float8_e4m3fn (torch float8_e4m3fn), as raw bits.
    F8E4M3Fn(u8);
    /// ml_dtypes float8_e5m2 (torch float8_e5m2), as raw bits.
    F8E5M2(u8);
    /// ml_dtypes float8_e4m3fnuz, as raw bits.
    F8E4M3Fnuz(u8);
    /// ml_dtypes float8_e5m2fnuz, as raw bits.
    F8E5M2Fnuz(u8);
    /// ml_dtypes float8_e8m0fnu: a power-of-two scale, as raw bits.
    F8E8M0Fnu(u8);
}

impl Bf16 {
    /// The bfloat16 nearest to `x` (ties to even; NaN stays NaN).
    pub fn from_f32(x: f32) -> Bf16 {
        let bits = x.to_bits();
        if x.is_nan() {
            return Bf16(((bits >> 16) as u16) | 0x0040);
        }
        let round = 0x7fff + ((bits >> 16) & 1);
        Bf16((bits.wrapping_add(round) >> 16) as u16)
    }

    /// The value as an `f32` (exact: bfloat16 is the top half of a float32).
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}
