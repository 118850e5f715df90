// SPDX-License-Identifier: Apache-2.0
//! Reader::map: views of a file's arrays without a copy, borrowed from the file.
use ckpt::{Code, Compression, Layout, Options, Reader};

use crate::common::{every_dtype, TempDir};

#[test]
fn views_hold_what_reads_give_for_every_dtype_layout_and_compression() {
    let dir = TempDir::new("npz-map");
    for layout in [Layout::Plain, Layout::Objax] {
        for compression in [Compression::Store, Compression::Deflate] {
            let path = dir.join("f.npz");
            every_dtype().save_with(&path, &Options::new().layout(layout).compression(compression)).unwrap();
            let mut reader = Reader::open(&path).unwrap();
            let names: Vec<String> = reader.names().map(String::from).collect();
            let read: Vec<Vec<u8>> = names.iter().map(|n| reader.read_bytes(n).unwrap()).collect();
            let npz = Reader::open(&path).unwrap();
            let views: Vec<&[u8]> = names.iter().map(|n| npz.map_bytes(n).unwrap()).collect();
            for ((name, view), bytes) in names.iter().zip(&views).zip(&read) {
                assert_eq!(view, bytes, "{name}");
                assert_eq!(npz.map_bytes(name).unwrap().as_ptr(), view.as_ptr(), "{name}: the same view each time");
            }
        }
    }
}

#[test]
fn typed_views_check_the_dtype() {
    let dir = TempDir::new("npz-map-typed");
    let path = dir.join("f.npz");
    every_dtype().save(&path).unwrap();
    let npz = Reader::open(&path).unwrap();
    assert_eq!(npz.map::<f32>("f32").unwrap(), &[0.5, -1.0, 2.0, 3.25, -4.0, 0.001]);
    assert_eq!(npz.map::<i64>("scalar").unwrap(), &[7]);
    assert_eq!(npz.map::<f64>("f32").unwrap_err().code(), Code::Mismatch);
    assert_eq!(npz.map_bytes("nope").unwrap_err().code(), Code::NotFound);
}

#[test]
fn a_corrupt_member_fails_its_map_with_a_format_error() {
    let dir = TempDir::new("npz-map-crc");
    let path = dir.join("f.npz");
    every_dtype().save(&path).unwrap();
    let at = Reader::open(&path).unwrap().member_info("f32").unwrap().data_offset as usize;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[at + 1] ^= 0x10;
    std::fs::write(&path, bytes).unwrap();
    let npz = Reader::open(&path).unwrap();
    let err = npz.map_bytes("f32").unwrap_err();
    assert_eq!(err.code(), Code::Format);
    assert!(err.message().contains("member 'f32.npy'") && err.message().contains("CRC-32 mismatch"), "{err}");

    let unverified = Reader::open_with(&path, &Options::new().map_unverified(true)).unwrap();
    let view = unverified.map::<f32>("f32").unwrap();
    assert_eq!(view.len(), 6);
    assert_ne!(view[0], 0.5, "the corrupt bytes, as they are");
}

#[test]
fn map_vars_gives_every_array_copy_on_write_and_leaves_the_file_alone() {
    let dir = TempDir::new("npz-map-vars");
    let path = dir.join("f.npz");
    every_dtype().save(&path).unwrap();
    let before = std::fs::read(&path).unwrap();
    assert_eq!(Reader::open(&path).unwrap().map_vars().unwrap_err().code(), Code::InvalidArgument);

    let mut npz = Reader::open_with(&path, &Options::new().map_writable(true)).unwrap();
    let want: Vec<f32> = npz.map::<f32>("f32").unwrap().to_vec();
    {
        let mut vars = npz.map_vars().unwrap();
        assert_eq!(vars.get::<f32>("f32").unwrap(), &want[..]);
        assert_eq!(vars.get::<i64>("scalar").unwrap(), &[7]);
        vars.get_mut::<f32>("f32").unwrap()[0] = 99.0;
    }
    assert_eq!(npz.map::<f32>("f32").unwrap()[0], 99.0); // this process sees its write
    assert_eq!(std::fs::read(&path).unwrap(), before); // the file does not
    assert_eq!(Reader::open(&path).unwrap().map::<f32>("f32").unwrap(), &want[..]);
}
