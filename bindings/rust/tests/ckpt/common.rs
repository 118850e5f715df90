// SPDX-License-Identifier: Apache-2.0
//! What the tests share: temporary directories, a collection of every dtype, numpy.
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use ckpt::{Bf16, Bool, Complex, Dtype, F8E4M3Fn, F8E4M3Fnuz, F8E5M2Fnuz, F8E8M0Fnu, Vars, F16, F8E5M2};

/// A fresh directory under cargo's per-target temporary directory, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("ckpt-{}-{n}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The names of the files in the directory, sorted.
    pub fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One array of every dtype ckpt has, with values that show byte order, signs and extremes.
pub fn every_dtype() -> Vars<'static> {
    let mut v = Vars::new().unwrap();
    v.add("bool", &[4], &[true, false, false, true]).unwrap();
    v.add("i8", &[3], &[i8::MIN, -1, i8::MAX]).unwrap();
    v.add("i16", &[3], &[i16::MIN, -2, i16::MAX]).unwrap();
    v.add("i32", &[2, 2], &[i32::MIN, -3, 0, i32::MAX]).unwrap();
    v.add("i64", &[3], &[i64::MIN, -4, i64::MAX]).unwrap();
    v.add("u8", &[3], &[0u8, 1, u8::MAX]).unwrap();
    v.add("u16", &[3], &[0u16, 0x1234, u16::MAX]).unwrap();
    v.add("u32", &[3], &[0u32, 0x1234_5678, u32::MAX]).unwrap();
    v.add("u64", &[3], &[0u64, 0x1234_5678_9abc_def0, u64::MAX]).unwrap();
    v.add("f16", &[3], &[F16(0x3c00), F16(0xc000), F16(0x7c00)]).unwrap();
    v.add("f32", &[2, 3], &[0.5f32, -1.0, 2.0, 3.25, -4.0, 0.001]).unwrap();
    v.add("f64", &[2], &[std::f64::consts::PI, -0.0]).unwrap();
    v.add("c64", &[2], &[Complex::new(1.0f32, -2.0), Complex::new(0.5, 0.25)]).unwrap();
    v.add("c128", &[1], &[Complex::new(-1.5f64, 1e300)]).unwrap();
    v.add_strings("unicode", &["été", "∂", ""]).unwrap();
    v.add_byte_strings("bytes", &[&b"ab"[..], b"\x00\xffc", b""]).unwrap();
    v.add_fixed("void", Dtype::Void, 3, &[2], &[1, 2, 3, 4, 5, 6]).unwrap();
    v.add("bf16", &[4], &[Bf16(0x3f80), Bf16(0xc000), Bf16(0x7f80), Bf16(0x0001)]).unwrap();
    v.add("e4m3fn", &[3], &[F8E4M3Fn(0x38), F8E4M3Fn(0xb8), F8E4M3Fn(0x7e)]).unwrap();
    v.add("e5m2", &[2], &[F8E5M2(0x3c), F8E5M2(0xfc)]).unwrap();
    v.add("e4m3fnuz", &[2], &[F8E4M3Fnuz(0x40), F8E4M3Fnuz(0x80)]).unwrap();
    v.add("e5m2fnuz", &[2], &[F8E5M2Fnuz(0x40), F8E5M2Fnuz(0x01)]).unwrap();
    v.add("e8m0fnu", &[2], &[F8E8M0Fnu(127), F8E8M0Fnu(0xff)]).unwrap();
    v.add("bools_raw", &[2], &[Bool(1), Bool(0)]).unwrap();
    v.add_scalar("scalar", 7i64).unwrap();
    v.add::<f32>("empty", &[0, 2], &[]).unwrap();
    v.set_metadata("step", "1200").unwrap();
    v.set_metadata("note", "été ∂").unwrap();
    v
}

/// Asserts that `got` holds exactly what [`every_dtype`] made: names in order, dtypes, shapes, values bit for
/// bit, metadata in order.
pub fn assert_every_dtype(got: &Vars<'_>) {
    let want = every_dtype();
    assert_eq!(got.names().collect::<Vec<_>>(), want.names().collect::<Vec<_>>());
    for name in want.names() {
        assert_eq!(got.dtype(name).unwrap(), want.dtype(name).unwrap(), "dtype of {name}");
        assert_eq!(got.shape(name).unwrap(), want.shape(name).unwrap(), "shape of {name}");
        assert_eq!(got.itemsize(name).unwrap(), want.itemsize(name).unwrap(), "itemsize of {name}");
        assert_eq!(got.bytes(name).unwrap(), want.bytes(name).unwrap(), "bytes of {name}");
    }
    assert_eq!(got.get::<bool>("bool").unwrap(), &[true, false, false, true]);
    assert_eq!(got.get::<i64>("i64").unwrap(), &[i64::MIN, -4, i64::MAX]);
    assert_eq!(got.get::<f32>("f32").unwrap(), &[0.5f32, -1.0, 2.0, 3.25, -4.0, 0.001]);
    assert_eq!(got.get::<f64>("f64").unwrap()[1].to_bits(), (-0.0f64).to_bits());
    assert_eq!(got.get::<Complex<f64>>("c128").unwrap(), &[Complex::new(-1.5, 1e300)]);
    assert_eq!(got.strings("unicode").unwrap(), vec!["été", "∂", ""]);
    assert_eq!(got.byte_strings("bytes").unwrap(), vec![b"ab".to_vec(), b"\x00\xffc".to_vec(), Vec::new()]);
    assert_eq!(got.get::<Bf16>("bf16").unwrap(), &[Bf16(0x3f80), Bf16(0xc000), Bf16(0x7f80), Bf16(0x0001)]);
    assert_eq!(got.get::<F8E8M0Fnu>("e8m0fnu").unwrap(), &[F8E8M0Fnu(127), F8E8M0Fnu(0xff)]);
    assert_eq!(got.get::<i64>("scalar").unwrap(), &[7]);
    assert_eq!(got.get::<f32>("empty").unwrap(), &[] as &[f32]);
    // A manager's saves add their own "ckpt." keys (index, time, version, metrics) after the caller's.
    let user: Vec<_> = got.metadata_iter().filter(|(k, _)| !k.starts_with("ckpt.")).collect();
    assert_eq!(user, vec![("step", "1200"), ("note", "été ∂")]);
}

/// Whether Debian's numpy is there to judge files.
pub fn numpy() -> Option<&'static str> {
    let python = "/usr/bin/python3";
    let ok = std::process::Command::new(python)
        .args(["-c", "import numpy"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        Some(python)
    } else {
        eprintln!("numpy not found at {python}: the check is skipped");
        None
    }
}

/// How many times `words` occur in `message`: a callback's own words reach the caller's error exactly once.
pub fn occurrences(message: &str, words: &str) -> usize {
    message.matches(words).count()
}
