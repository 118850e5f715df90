// SPDX-License-Identifier: Apache-2.0
//! Errors: codes and messages for missing, corrupt and mismatched files, and the Error type itself.
use ckpt::{Code, Error, Manager, ManagerOptions, Reader, Vars};

use crate::common::TempDir;

#[test]
fn a_missing_file_is_not_found_naming_the_path() {
    let dir = TempDir::new("missing");
    let path = dir.join("absent.npz");
    let e = Vars::read(&path).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("absent.npz"), "{e}");
    assert_eq!(Reader::open(&path).unwrap_err().code(), Code::NotFound);
    let mut vars = Vars::new().unwrap();
    assert_eq!(vars.restore(&path).unwrap_err().code(), Code::NotFound);
}

#[test]
fn a_flipped_byte_in_the_data_is_a_format_error_naming_file_and_member() {
    let dir = TempDir::new("corrupt");
    let path = dir.join("model.npz");
    let mut vars = Vars::new().unwrap();
    vars.add("w", &[256], &[0x5a5a_5a5au32; 256]).unwrap();
    vars.save(&path).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.windows(8).position(|w| w == [0x5a; 8]).unwrap() + 100;
    bytes[at] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();

    let e = Vars::read(&path).unwrap_err();
    assert_eq!(e.code(), Code::Format);
    assert!(e.message().contains("model.npz") && e.message().contains("w.npy"), "{e}");
    assert!(e.message().to_lowercase().contains("crc"), "{e}");
    let mut npz = Reader::open(&path).unwrap(); // headers are intact
    assert_eq!(npz.read::<u32>("w").unwrap_err().code(), Code::Format);
}

#[test]
fn a_mismatch_lists_every_missing_variable_and_leaves_the_arrays_untouched() {
    let dir = TempDir::new("mismatch");
    let path = dir.join("m.npz");
    let mut saved = Vars::new().unwrap();
    saved.add("w", &[2], &[1f32, 2.0]).unwrap();
    saved.add("b", &[3], &[1f32, 2.0, 3.0]).unwrap();
    saved.add("unused_on_disk", &[1], &[0u8]).unwrap();
    saved.save(&path).unwrap();

    let mut w = [9f32; 2];
    let mut b = [9f32; 2]; // the file's b has 3 items
    let mut alpha = [9i64];
    let mut beta = [9i64];
    {
        let mut vars = Vars::new().unwrap();
        vars.add_borrowed("w", &[2], &mut w).unwrap();
        vars.add_borrowed("b", &[2], &mut b).unwrap();
        vars.add_borrowed("alpha", &[], &mut alpha).unwrap();
        vars.add_borrowed("beta", &[], &mut beta).unwrap();
        let e = vars.restore(&path).unwrap_err();
        assert_eq!(e.code(), Code::Mismatch);
        for name in ["alpha", "beta", "'b'", "unused_on_disk"] {
            assert!(e.message().contains(name), "{name} not in: {e}");
        }
    }
    assert_eq!((w, b, alpha, beta), ([9.0; 2], [9.0; 2], [9], [9]));
}

#[test]
fn a_second_manager_of_this_process_takes_the_directory_over_and_the_first_one_is_busy() {
    let dir = TempDir::new("busy");
    let mut vars = Vars::new().unwrap();
    vars.add::<f32>("w", &[2], &[1.0, 2.0]).unwrap();
    let mut first = Manager::open(dir.path(), &ManagerOptions::new()).unwrap();
    first.save(&vars, 1).unwrap();
    let mut second = Manager::open(dir.path(), &ManagerOptions::new()).unwrap(); // opening locks nothing
    second.save(&vars, 2).unwrap();
    let e = first.save(&vars, 3).unwrap_err();
    assert_eq!(e.code(), Code::Busy);
    assert!(e.message().contains("another checkpoint manager of this process took the directory over"), "{e}");
    first.close().unwrap();
    second.save(&vars, 3).unwrap();
    second.close().unwrap();
}

#[test]
fn errors_carry_code_and_message_and_display_both() {
    let e = Error::new(Code::Io, "disk on fire");
    assert_eq!(e.to_string(), "disk on fire (storage failure)");
    assert_eq!(Error::new(Code::Busy, "").to_string(), "checkpoint directory is locked");
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(e.clone());
    assert_eq!(boxed.to_string(), e.to_string());
    for raw in -11..=-1 {
        assert_eq!(Code::from_raw(raw).raw(), raw);
        assert!(!matches!(Code::from_raw(raw), Code::Unknown(_)));
    }
    assert_eq!(Code::from_raw(-99), Code::Unknown(-99));
    assert_eq!(Code::Unknown(-99).description(), "unknown error code");
    assert_eq!(Code::Mismatch.description(), "variables missing or dtype/shape differ");
    // Through std::io::Error and back (what a Sink write error does).
    let io: std::io::Error = Error::new(Code::Format, "bad").into();
    assert_eq!(io.kind(), std::io::ErrorKind::InvalidData);
    assert_eq!(Error::from(io), Error::new(Code::Format, "bad"));
    let other = Error::from(std::io::Error::new(std::io::ErrorKind::Other, "plain"));
    assert_eq!((other.code(), other.message()), (Code::Io, "plain"));
}
