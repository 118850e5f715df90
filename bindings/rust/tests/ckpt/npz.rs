// SPDX-License-Identifier: Apache-2.0
//! Reader: lazy reads of one file.
use ckpt::{Bf16, Code, Dtype, Layout, Options, Reader, Vars};

use crate::common::{every_dtype, TempDir};

#[test]
fn an_opened_file_shows_names_dtypes_shapes_and_metadata_before_any_read() {
    let dir = TempDir::new("npz-open");
    for layout in [Layout::Plain, Layout::Objax] {
        let path = dir.join("f.npz");
        every_dtype().save_with(&path, &Options::new().layout(layout)).unwrap();
        let npz = Reader::open(&path).unwrap();
        let want = every_dtype();
        assert_eq!(npz.len(), want.len());
        assert_eq!(npz.names().collect::<Vec<_>>(), want.names().collect::<Vec<_>>());
        for name in want.names() {
            assert_eq!(npz.dtype(name).unwrap(), want.dtype(name).unwrap(), "{name}");
            assert_eq!(npz.shape(name).unwrap(), want.shape(name).unwrap(), "{name}");
            assert_eq!(npz.itemsize(name).unwrap(), want.itemsize(name).unwrap(), "{name}");
            assert_eq!(npz.nbytes(name).unwrap(), want.nbytes(name).unwrap(), "{name}");
        }
        assert_eq!(npz.metadata("note"), Some("été ∂"));
        assert_eq!(npz.metadata_iter().collect::<Vec<_>>(), vec![("step", "1200"), ("note", "été ∂")]);
        assert_eq!(npz.metadata_len(), 2);
    }
}

#[test]
fn arrays_are_read_one_at_a_time_into_slices_or_vectors() {
    let dir = TempDir::new("npz-read");
    let path = dir.join("f.npz");
    every_dtype().save(&path).unwrap();
    let mut npz = Reader::open(&path).unwrap();

    let mut w = [0f32; 6];
    npz.read_into("f32", &mut w).unwrap();
    assert_eq!(w, [0.5, -1.0, 2.0, 3.25, -4.0, 0.001]);
    assert_eq!(npz.read::<Bf16>("bf16").unwrap(), vec![Bf16(0x3f80), Bf16(0xc000), Bf16(0x7f80), Bf16(0x0001)]);
    assert_eq!(npz.read::<bool>("bool").unwrap(), vec![true, false, false, true]);
    assert_eq!(npz.read::<i64>("scalar").unwrap(), vec![7]);
    assert_eq!(npz.read::<f32>("empty").unwrap(), Vec::<f32>::new());
    assert_eq!(npz.read_strings("unicode").unwrap(), vec!["été", "∂", ""]);
    assert_eq!(npz.read_byte_strings("bytes").unwrap()[1], b"\x00\xffc".to_vec());
    assert_eq!(npz.read_bytes("void").unwrap(), vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(npz.dtype("void").unwrap(), Dtype::Void);

    // A slice of another dtype, one too small, a name not there.
    let e = npz.read_into("f32", &mut [0i32; 6]).unwrap_err();
    assert_eq!(e.code(), Code::Mismatch);
    assert_eq!(e.message(), "array 'f32' is float32, not int32");
    let e = npz.read_into("f32", &mut [0f32; 5]).unwrap_err();
    assert_eq!(e.code(), Code::BufferTooSmall, "{e}");
    let e = npz.read::<f32>("nope").unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().ends_with("f.npz: no array 'nope'"), "{e}");
    // Reading everything still gives what was saved.
    crate::common::assert_every_dtype(&Vars::read(&path).unwrap());
}

#[test]
fn member_info_tells_how_the_file_holds_each_array() {
    let dir = TempDir::new("member-info");
    let path = dir.path().join("m.npz");
    let mut vars = Vars::new().unwrap();
    let w: Vec<f32> = (0..64).map(|i| i as f32).collect();
    vars.add("w", &[64], &w).unwrap();
    for (compression, expect_offset) in [(ckpt::Compression::Store, true), (ckpt::Compression::Deflate, false)] {
        vars.save_with(&path, &Options::new().layout(Layout::Objax).compression(compression)).unwrap();
        let npz = Reader::open(&path).unwrap();
        assert_eq!(npz.layout(), Layout::Objax);
        let info = npz.member_info("w").unwrap();
        assert_eq!(info.member, "0.npy");
        assert_eq!(info.compression, compression);
        assert!(info.stored_bytes > 0);
        let bytes = std::fs::read(&path).unwrap();
        if expect_offset {
            let at = info.data_offset as usize;
            assert_eq!(at % 64, 0);
            let raw: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
            assert_eq!(&bytes[at..at + 256], &raw[..]);
            assert_eq!(info.stored_bytes, 128 + 256); // numpy's 128-byte npy header, then the data
        } else {
            assert_eq!(info.data_offset, 0);
        }
        assert_eq!((info.byte_order, info.fortran_order), ('<', false));
        assert_eq!(npz.file_size(), std::fs::metadata(&path).unwrap().len());
        assert_eq!(npz.member_info("nope").unwrap_err().code(), Code::NotFound);
    }
}

#[test]
fn member_info_tells_the_byte_order_and_memory_order_numpy_wrote() {
    let python = match crate::common::numpy() {
        Some(python) => python,
        None => return,
    };
    let dir = TempDir::new("member-order");
    let path = dir.path().join("o.npz");
    let code = "import sys, numpy as np; c = np.arange(6.0).reshape(2, 3); \
                np.savez(sys.argv[1], big=np.asfortranarray(c.astype('>f8')), flags=np.ones(2, bool))";
    let status = std::process::Command::new(python).args(["-c", code]).arg(&path).status().unwrap();
    assert!(status.success());
    let npz = Reader::open(&path).unwrap();
    let big = npz.member_info("big").unwrap();
    assert_eq!((big.byte_order, big.fortran_order), ('>', true));
    let flags = npz.member_info("flags").unwrap();
    assert_eq!((flags.byte_order, flags.fortran_order), ('|', false));
}

#[test]
fn ranges_of_an_array_read_piece_by_piece_equal_a_whole_read() {
    let dir = TempDir::new("npz-range");
    for compression in [ckpt::Compression::Store, ckpt::Compression::Deflate] {
        let path = dir.join("r.npz");
        let mut vars = Vars::new().unwrap();
        let values: Vec<f32> = (0..10000).map(|k| k as f32 * 0.25).collect();
        vars.add("x", &[100, 100], &values).unwrap();
        vars.save_with(&path, &Options::new().compression(compression)).unwrap();
        let mut npz = Reader::open(&path).unwrap();
        let mut got = vec![0f32; 10000];
        for (k, piece) in got.chunks_mut(3000).enumerate() {
            npz.read_range_into("x", k * 3000, piece).unwrap();
        }
        assert_eq!(got, values);
        let mut two = [0f32; 2];
        npz.read_range_into("x", 41, &mut two).unwrap();
        assert_eq!(two, [10.25, 10.5]);
        let e = npz.read_range_into("x", 9999, &mut two).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        assert!(e.message().contains("past the end of array 'x'"), "{e}");
        let e = npz.read_range_into("x", 0, &mut [0i32; 2]).unwrap_err();
        assert_eq!(e.code(), Code::Mismatch);
    }
}

#[test]
fn the_earlier_c_names_sys_declares_are_the_same_functions() {
    // A program written against 0.10's ckpt.h calls ckpt_npz_*: through sys.rs, it sees what Reader sees.
    let dir = TempDir::new("earlier-names");
    let path = dir.join("f.npz");
    every_dtype().save(&path).unwrap();
    let reader = Reader::open(&path).unwrap();
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let mut raw = std::ptr::null_mut();
    // SAFETY: a valid path and out pointer; the handle is closed below and used only in between.
    unsafe {
        assert_eq!(ckpt::sys::ckpt_npz_open(&mut raw, c_path.as_ptr(), std::ptr::null()), 0);
        assert_eq!(ckpt::sys::ckpt_npz_count(raw), reader.len());
        assert_eq!(ckpt::sys::ckpt_npz_count(raw), ckpt::sys::ckpt_reader_count(raw));
        assert_eq!(ckpt::sys::ckpt_npz_file_size(raw), ckpt::sys::ckpt_reader_file_size(raw));
        ckpt::sys::ckpt_npz_close(raw);
    }
}
