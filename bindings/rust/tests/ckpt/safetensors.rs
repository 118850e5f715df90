// SPDX-License-Identifier: Apache-2.0
//! safetensors files: the same Vars and Reader calls as for .npz, the format told by the path or the option on
//! saving and by the content on reading.
use ckpt::{Code, Format, Options, Reader, Vars};

use crate::common::{every_dtype, TempDir};

/// every_dtype() less the arrays safetensors has no type for.
/// (Sources: the collection keeps no second copy of the bytes; compare with every_dtype()'s own.)
fn safetensors_dtypes() -> Vars<'static> {
    let all = every_dtype();
    let mut v = Vars::new().unwrap();
    for name in all.names().filter(|n| !["c128", "unicode", "bytes", "void"].contains(n)) {
        let bytes = all.bytes(name).unwrap().to_vec();
        let source = move |offset: u64, dst: &mut [u8]| {
            let at = offset as usize;
            dst.copy_from_slice(&bytes[at..at + dst.len()]);
            Ok(())
        };
        v.add_source(name, all.dtype(name).unwrap(), 0, all.shape(name).unwrap(), source).unwrap();
    }
    for (key, value) in all.metadata_iter() {
        v.set_metadata(key, value).unwrap();
    }
    v
}

#[test]
fn a_path_ending_in_safetensors_is_saved_as_safetensors_and_read_back_bit_for_bit() {
    let dir = TempDir::new("st-roundtrip");
    let path = dir.join("model.safetensors");
    let want = safetensors_dtypes();
    want.save(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes[8], b'{');
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    assert_eq!(n % 8, 0);

    let got = Vars::read(&path).unwrap();
    let all = every_dtype();
    assert_eq!(got.names().collect::<Vec<_>>(), want.names().collect::<Vec<_>>());
    for name in want.names() {
        assert_eq!(got.dtype(name).unwrap(), want.dtype(name).unwrap(), "{name}");
        assert_eq!(got.shape(name).unwrap(), want.shape(name).unwrap(), "{name}");
        assert_eq!(got.bytes(name).unwrap(), all.bytes(name).unwrap(), "{name}");
    }
    assert_eq!(got.metadata("step"), Some("1200"));
    assert_eq!(got.metadata("note"), Some("été ∂"));

    let npz = Reader::open(&path).unwrap();
    assert_eq!(npz.format(), Format::Safetensors);
    for name in want.names() {
        let info = npz.member_info(name).unwrap();
        assert_eq!(info.data_offset % npz.itemsize(name).unwrap() as u64, 0, "{name} is aligned to its item size");
    }
}

#[test]
fn the_option_overrides_the_name_and_a_reader_can_require_one_format() {
    let dir = TempDir::new("st-format");
    let path = dir.join("weights.bin");
    let v = safetensors_dtypes();
    v.save_with(&path, &Options::new().format(Format::Safetensors)).unwrap();
    assert_eq!(Reader::open(&path).unwrap().format(), Format::Safetensors);
    let err = Vars::read_with(&path, &Options::new().format(Format::Npz)).unwrap_err();
    assert_eq!(err.code(), Code::Format);
    assert!(err.message().contains("not a npz file"), "{}", err.message());
    let npz_path = dir.join("weights.npz");
    v.save(&npz_path).unwrap();
    assert_eq!(Reader::open(&npz_path).unwrap().format(), Format::Npz);
}

#[test]
fn arrays_safetensors_cannot_hold_are_refused_before_anything_is_written() {
    let dir = TempDir::new("st-refused");
    let path = dir.join("bad.safetensors");
    let err = every_dtype().save(&path).unwrap_err();
    assert_eq!(err.code(), Code::Unsupported);
    assert!(err.message().contains("array 'c128': safetensors has no complex128 type"), "{}", err.message());
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "nothing was left behind");
}

#[test]
fn a_sharded_save_is_read_back_as_one_checkpoint_from_its_index_or_its_folder() {
    let dir = TempDir::new("st-sharded");
    let path = dir.join("model.safetensors");
    let v = safetensors_dtypes();
    v.save_with(&path, &Options::new().max_shard_bytes(16)).unwrap();
    let index = std::fs::read_to_string(dir.join("model.safetensors.index.json")).unwrap();
    assert!(index.contains("\"weight_map\""), "{index}");
    assert!(!path.exists(), "sharded: no single file");
    let all = every_dtype();
    for source in [dir.join("model.safetensors.index.json"), dir.path().to_path_buf()] {
        let got = Vars::read(&source).unwrap();
        assert_eq!(got.len(), v.len());
        for name in v.names() {
            assert_eq!(got.bytes(name).unwrap(), all.bytes(name).unwrap(), "{name}");
        }
    }
}
