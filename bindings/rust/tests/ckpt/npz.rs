//! Npz: lazy reads of one file.
use ckpt::{Bf16, Code, Dtype, Layout, Npz, NpzOptions, Vars};

use crate::common::{every_dtype, TempDir};

#[test]
fn an_opened_file_shows_names_dtypes_shapes_and_metadata_before_any_read() {
    let dir = TempDir::new("npz-open");
    for layout in [Layout::Plain, Layout::Objax] {
        let path = dir.join("f.npz");
        every_dtype().save_with(&path, &NpzOptions::new().layout(layout)).unwrap();
        let npz = Npz::open(&path).unwrap();
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
    let mut npz = Npz::open(&path).unwrap();

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
    assert_eq!(e.message(), "no array 'nope' in the file");
    // Reading everything still gives what was saved.
    crate::common::assert_every_dtype(&Vars::read(&path).unwrap());
}
