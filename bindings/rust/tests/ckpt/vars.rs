// SPDX-License-Identifier: Apache-2.0
//! Vars: building collections, typed read-back, metadata, files round trips, restore in place.
use ckpt::{Bool, Code, Compression, Dtype, Layout, Options, Vars};

use crate::common::{assert_every_dtype, every_dtype, numpy, TempDir};

#[test]
fn every_dtype_and_the_metadata_round_trip_in_both_layouts_stored_and_deflated() {
    let dir = TempDir::new("round-trip");
    let vars = every_dtype();
    let cases = [
        ("plain.npz", Layout::Plain, Compression::Store),
        ("objax.npz", Layout::Objax, Compression::Store),
        ("plain-deflate.npz", Layout::Plain, Compression::Deflate),
        ("objax-deflate.npz", Layout::Objax, Compression::Deflate),
    ];
    for (file, layout, compression) in cases {
        let path = dir.join(file);
        vars.save_with(&path, &Options::new().layout(layout).compression(compression).level(9)).unwrap();
        assert_every_dtype(&Vars::read(&path).unwrap());
        // A layout asked for on reading is checked.
        let other = if layout == Layout::Plain { Layout::Objax } else { Layout::Plain };
        if other == Layout::Objax {
            let e = Vars::read_with(&path, &Options::new().layout(other)).unwrap_err();
            assert_eq!(e.code(), Code::Format, "{e}");
        }
    }
    // Deflate shrinks what compresses.
    let mut big = Vars::new().unwrap();
    big.add("zeros", &[4096], &[0f32; 4096]).unwrap();
    big.save_with(dir.join("s.npz"), &Options::new()).unwrap();
    big.save_with(dir.join("d.npz"), &Options::new().compression(Compression::Deflate)).unwrap();
    let stored = std::fs::metadata(dir.join("s.npz")).unwrap().len();
    let deflated = std::fs::metadata(dir.join("d.npz")).unwrap().len();
    assert!(deflated * 10 < stored, "deflated {deflated} bytes, stored {stored}");
}

#[test]
fn a_file_in_memory_reads_as_the_file_does() {
    let dir = TempDir::new("memory");
    every_dtype().save(dir.join("m.npz")).unwrap();
    let bytes = std::fs::read(dir.join("m.npz")).unwrap();
    assert_every_dtype(&Vars::read_memory(&bytes, &Options::new()).unwrap());
    let e = Vars::read_memory(&bytes[..bytes.len() - 1], &Options::new()).unwrap_err();
    assert_eq!(e.code(), Code::Format);
    assert!(e.message().contains("<memory>"), "{e}");
}

#[test]
fn numpy_reads_every_dtype_and_the_metadata() {
    let python = match numpy() {
        Some(p) => p,
        None => return,
    };
    let dir = TempDir::new("numpy");
    let path = dir.join("n.npz");
    every_dtype().save(&path).unwrap();
    let script = r#"
import json, sys, numpy as np
d = np.load(sys.argv[1])
assert d["f32"].dtype == np.float32 and d["f32"].shape == (2, 3), d["f32"]
assert d["f32"].tobytes() == np.array([0.5, -1.0, 2.0, 3.25, -4.0, 0.001], np.float32).tobytes()
assert d["i64"].tolist() == [-2**63, -4, 2**63 - 1]
assert d["bool"].tolist() == [True, False, False, True]
assert d["c64"].tolist() == [1 - 2j, 0.5 + 0.25j]
assert d["unicode"].tolist() == ["été", "∂", ""], d["unicode"]
assert d["bytes"].tolist() == [b"ab", b"\x00\xffc", b""]
assert d["bf16"].dtype == np.dtype("V2") and d["bf16"].view("<u2").tolist() == [0x3f80, 0xc000, 0x7f80, 1]
assert d["e4m3fn"].dtype == np.dtype("V1") and d["e4m3fn"].view("u1").tolist() == [0x38, 0xb8, 0x7e]
assert int(d["scalar"]) == 7 and d["scalar"].shape == ()
assert d["empty"].shape == (0, 2)
meta = json.loads(str(d["__ckpt_metadata__"]))
assert meta["metadata"] == {"step": "1200", "note": "été ∂"}, meta
assert list(meta["metadata"]) == ["step", "note"]
assert meta["dtypes"]["bf16"] == "bfloat16" and meta["dtypes"]["e8m0fnu"] == "float8_e8m0fnu", meta
print("ok")
"#;
    let out = std::process::Command::new(python).args(["-c", script]).arg(&path).output().unwrap();
    assert!(out.status.success(), "numpy said:\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
}

#[test]
fn restore_in_place_writes_into_the_borrowed_slices() {
    let dir = TempDir::new("in-place");
    let path = dir.join("model.npz");
    let mut saved = Vars::new().unwrap();
    saved.add("w", &[2, 2], &[1.5f32, -2.0, 3.0, 4.25]).unwrap();
    saved.add_scalar("step", 42i64).unwrap();
    saved.add("mask", &[3], &[Bool(1), Bool(0), Bool(1)]).unwrap();
    saved.add_strings("tags", &["a", "bc"]).unwrap();
    saved.set_metadata("epoch", "3").unwrap();
    saved.save(&path).unwrap();

    let mut w = [0f32; 4];
    let mut step = [0i64];
    let mut mask = [Bool(0); 3];
    let mut tags = [0u8; 16];
    {
        let mut vars = Vars::new().unwrap();
        vars.add_borrowed("w", &[2, 2], &mut w).unwrap();
        vars.add_borrowed("step", &[], &mut step).unwrap();
        vars.add_borrowed("mask", &[3], &mut mask).unwrap();
        vars.add_fixed_borrowed("tags", Dtype::Unicode, 8, &[2], &mut tags).unwrap();
        vars.set_metadata("stale", "x").unwrap();
        vars.restore(&path).unwrap();
        // Through the collection while it lives: the slices themselves.
        assert_eq!(vars.get::<f32>("w").unwrap(), &[1.5, -2.0, 3.0, 4.25]);
        assert_eq!(vars.strings("tags").unwrap(), vec!["a", "bc"]);
        // The file's metadata replaced the collection's.
        assert_eq!(vars.metadata_iter().collect::<Vec<_>>(), vec![("epoch", "3")]);
        // Changes through the collection are what the next save writes.
        vars.get_mut::<i64>("step").unwrap()[0] += 1;
        vars.save(dir.join("next.npz")).unwrap();
    }
    assert_eq!(w, [1.5, -2.0, 3.0, 4.25]);
    assert_eq!(step, [43]);
    assert_eq!(mask, [Bool(1), Bool(0), Bool(1)]);
    assert_eq!(&tags[..8], &[b'a', 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(Vars::read(dir.join("next.npz")).unwrap().get::<i64>("step").unwrap(), &[43]);
}

#[test]
fn a_renamer_maps_names_on_disk_to_the_collections() {
    let dir = TempDir::new("rename");
    let path = dir.join("r.npz");
    let mut saved = Vars::new().unwrap();
    saved.add("model.w", &[2], &[1i32, 2]).unwrap();
    saved.add("model.a_very_long_name_that_needs_more_than_the_first_buffer_of_the_library", &[1], &[3i32]).unwrap();
    saved.save(&path).unwrap();

    let long = "x".repeat(300);
    let long_name = long.clone();
    let options = Options::new().rename(move |name| {
        if name.starts_with("model.a_very") {
            Some(long_name.clone())
        } else {
            name.strip_prefix("model.").map(String::from)
        }
    });
    let mut vars = Vars::new().unwrap();
    vars.add_zeroed("w", Dtype::Int32, &[2]).unwrap();
    vars.add_zeroed(&long, Dtype::Int32, &[1]).unwrap();
    vars.restore_with(&path, &options).unwrap();
    assert_eq!(vars.get::<i32>("w").unwrap(), &[1, 2]);
    assert_eq!(vars.get::<i32>(&long).unwrap(), &[3]);

    // A panicking renamer fails the restore; the panic does not cross into the library.
    let options = Options::new().rename(|_| panic!("renamer bug"));
    let e = vars.restore_with(&path, &options).unwrap_err();
    assert_eq!(e.code(), Code::Internal, "{e}");
    assert!(e.message().contains("the renamer refused 'model.w': it panicked"), "{e}");

    // An empty new name is refused, and the error says so.
    let options = Options::new().rename(|_| Some(String::new()));
    let e = vars.restore_with(&path, &options).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("the renamer refused 'model.w': it gave an empty name for 'model.w'"), "{e}");
}

#[test]
fn progress_reaches_the_total() {
    let dir = TempDir::new("progress");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let options = Options::new().progress(move |done, total| log.lock().unwrap().push((done, total)));
    let mut vars = Vars::new().unwrap();
    vars.add("a", &[1000], &[1u64; 1000]).unwrap();
    vars.save_with(dir.join("p.npz"), &options).unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.last(), Some(&(8000, 8000)));
    assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0));
}

#[test]
fn typed_reads_check_the_dtype_and_the_values() {
    let mut vars = Vars::new().unwrap();
    vars.add("w", &[2], &[1f32, 2.0]).unwrap();
    vars.add("mask", &[2], &[Bool(1), Bool(2)]).unwrap();
    let e = vars.get::<i32>("w").unwrap_err();
    assert_eq!(e.code(), Code::Mismatch);
    assert_eq!(e.message(), "variable 'w' is float32, not int32");
    assert_eq!(vars.get::<ckpt::Bool>("mask").unwrap(), &[Bool(1), Bool(2)]);
    // A byte other than 0 or 1 is no Rust bool.
    let e = vars.get::<bool>("mask").unwrap_err();
    assert_eq!(e.code(), Code::Format);
    let e = vars.get::<f32>("nope").unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("nope"), "{e}");
    assert_eq!(vars.strings("w").unwrap_err().code(), Code::Mismatch);
}

#[test]
fn adding_checks_names_shapes_and_lengths() {
    let mut vars = Vars::new().unwrap();
    let e = vars.add("w", &[2, 3], &[1f32; 5]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(e.message(), "variable 'w': shape [2, 3] holds 6 items, the data 5");
    assert_eq!(vars.add("w", &[-1], &[1f32]).unwrap_err().code(), Code::InvalidArgument);
    assert_eq!(vars.add("a\0b", &[1], &[1f32]).unwrap_err().code(), Code::InvalidArgument);
    assert_eq!(vars.add("", &[1], &[1f32]).unwrap_err().code(), Code::InvalidArgument);
    assert_eq!(vars.add("__ckpt_metadata__", &[1], &[1f32]).unwrap_err().code(), Code::InvalidArgument);
    vars.add("w", &[1], &[1f32]).unwrap();
    let e = vars.add("w", &[1], &[2f32]).unwrap_err();
    assert_eq!(e.code(), Code::Exists, "{e}");
    assert_eq!(vars.add_zeroed("s", Dtype::Unicode, &[1]).unwrap_err().code(), Code::InvalidArgument);
    assert_eq!(vars.add_fixed("s", Dtype::Float32, 4, &[1], &[0; 4]).unwrap_err().code(), Code::InvalidArgument);
    assert_eq!(vars.add_fixed("s", Dtype::Unicode, 3, &[1], &[0; 3]).unwrap_err().code(), Code::InvalidArgument);
    assert_eq!(vars.len(), 1);
    assert_eq!(vars.names().collect::<Vec<_>>(), vec!["w"]);
    assert_eq!(vars.index_of("w").unwrap(), 0);
    assert!(vars.contains("w") && !vars.contains("v"));
    assert_eq!(vars.name(1), None);
    assert_eq!(vars.nbytes("w").unwrap(), 4);
    assert_eq!(format!("{vars:?}"), r#"{"w": float32[1]}"#);
}

#[test]
fn metadata_is_set_replaced_in_place_and_removed() {
    let mut vars = Vars::new().unwrap();
    vars.set_metadata("a", "1").unwrap();
    vars.set_metadata("b", "2").unwrap();
    vars.set_metadata("a", "3").unwrap();
    assert_eq!(vars.metadata_iter().collect::<Vec<_>>(), vec![("a", "3"), ("b", "2")]);
    assert_eq!(vars.metadata("a"), Some("3"));
    assert_eq!(vars.metadata("c"), None);
    vars.remove_metadata("a").unwrap();
    vars.remove_metadata("absent").unwrap();
    assert_eq!(vars.metadata_len(), 1);
    assert_eq!(vars.set_metadata("", "x").unwrap_err().code(), Code::InvalidArgument);
}

#[test]
fn dtypes_name_and_size_themselves() {
    assert_eq!(Dtype::Float32.name(), "float32");
    assert_eq!(Dtype::Bfloat16.name(), "bfloat16");
    assert_eq!(Dtype::Float8E4M3Fn.name(), "float8_e4m3fn");
    assert_eq!(Dtype::Void.name(), "void");
    assert_eq!(Dtype::Complex128.size(), 16);
    assert_eq!(Dtype::Bfloat16.size(), 2);
    assert_eq!(Dtype::Unicode.size(), 0);
    for code in 1..=23 {
        assert_eq!(Dtype::from_code(code).unwrap().code(), code);
    }
    assert_eq!(Dtype::from_code(24), None);
    assert_eq!(ckpt::Bf16::from_f32(1.0), ckpt::Bf16(0x3f80));
    assert_eq!(ckpt::Bf16::from_f32(-2.0).to_f32(), -2.0);
    assert_eq!(ckpt::Bf16::from_f32(1.0 + 1.0 / 256.0), ckpt::Bf16(0x3f80)); // a tie goes to even
    assert!(ckpt::version().starts_with(&format!("{}.", ckpt::version_number() / 10000)));
}

#[test]
fn a_source_is_saved_as_the_array_it_reads_and_its_error_fails_the_save() {
    let dir = TempDir::new("source");
    let values: Vec<u8> = (0..(3usize << 20)).map(|i| (i % 251) as u8).collect();
    for compression in [Compression::Store, Compression::Deflate] {
        let mut vars = Vars::new().unwrap();
        let bytes = values.clone();
        vars.add_source("w", Dtype::Uint8, 0, &[values.len() as i64], move |offset, dst| {
            let at = offset as usize;
            dst.copy_from_slice(&bytes[at..at + dst.len()]);
            Ok(())
        })
        .unwrap();
        assert!(vars.is_source(0));
        // A source holds no bytes to look at: an error, never a slice over nothing.
        assert_eq!(vars.bytes("w").unwrap_err().code(), Code::InvalidArgument);
        assert_eq!(vars.get::<u8>("w").unwrap_err().code(), Code::InvalidArgument);
        let path = dir.join("s.npz");
        vars.save_with(&path, &Options::new().compression(compression)).unwrap();
        assert_eq!(Vars::read(&path).unwrap().get::<u8>("w").unwrap(), &values[..]);
    }
    let mut failing = Vars::new().unwrap();
    failing
        .add_source("w", Dtype::Uint8, 0, &[1 << 20], |_, _| Err(ckpt::Error::new(Code::Io, "the disk went away")))
        .unwrap();
    let e = failing.save_with(dir.join("s.npz"), &Options::new()).unwrap_err();
    assert_eq!(e.code(), Code::Io, "{e}");
    assert!(e.to_string().contains("the disk went away"), "{e}");
    assert_eq!(Vars::read(dir.join("s.npz")).unwrap().get::<u8>("w").unwrap(), &values[..]);
}
