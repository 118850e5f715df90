// SPDX-License-Identifier: Apache-2.0
//! Incremental saves: chunk hashes, saves against a base, a manager's incremental saves and full_every.
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex};

use ckpt::{
    Code, Files, Manager, ManagerOptions, Options, Reader, StorageHandle, Vars, Writer, WriterKind, WriterOptions,
};

use crate::common::{numpy, TempDir};

const W_LEN: usize = 256 * 1024; // 1 MiB: 64 chunks

/// A model whose training step changed one element of `w`.
fn state(step: i64) -> Vars<'static> {
    let mut w: Vec<f32> = (0..W_LEN).map(|i| i as f32).collect();
    w[1000] = step as f32;
    let mut vars = Vars::new().unwrap();
    vars.add("w", &[W_LEN as i64], &w).unwrap();
    vars.add_scalar("step", step).unwrap();
    vars
}

fn bytes_of(files: &Files, path: impl AsRef<Path>) -> Vec<u8> {
    let mut bytes = Vec::new();
    files.open(path).unwrap().read_to_end(&mut bytes).unwrap();
    bytes
}

#[test]
fn chunk_hashes_are_a_member_numpy_lists_and_ckpt_hides() {
    let dir = TempDir::new("chunk-hashes");
    let path = dir.join("a.npz");
    state(1).save_with(&path, &Options::new().chunk_hashes(true)).unwrap();
    assert_eq!(Reader::open(&path).unwrap().names().collect::<Vec<_>>(), vec!["w", "step"]);
    assert_eq!(Vars::read(&path).unwrap().names().collect::<Vec<_>>(), vec!["w", "step"]);
    let python = match numpy() {
        Some(python) => python,
        None => return,
    };
    let code = "import sys, numpy as np; d = np.load(sys.argv[1]); \
                assert sorted(d.files) == ['__ckpt_chunks__', 'step', 'w'], d.files; \
                assert d['__ckpt_chunks__'].dtype == np.uint8 and d['w'][1000] == 1";
    let status = std::process::Command::new(python).args(["-c", code]).arg(&path).status().unwrap();
    assert!(status.success());
}

/// Saves state 1 with chunk hashes, then state 2 against it and in full: the same bytes, which read back as state 2.
fn check_a_save_against_a_base(files: &Files, dir: &Path, options: Options) {
    let (first, incremental, full) = (dir.join("1.npz"), dir.join("2.npz"), dir.join("full.npz"));
    state(1).save_with(&first, &options.clone().chunk_hashes(true)).unwrap();
    state(2).save_with(&incremental, &options.clone().base(&first)).unwrap();
    state(2).save_with(&full, &options.clone().chunk_hashes(true)).unwrap();
    assert!(bytes_of(files, &incremental) == bytes_of(files, &full), "the incremental file differs");
    let back = Vars::read_with(&incremental, &options).unwrap();
    assert_eq!(back.get::<f32>("w").unwrap()[1000], 2.0);
    assert_eq!(back.get::<f32>("w").unwrap()[W_LEN - 1], (W_LEN - 1) as f32);
    assert_eq!(back.get::<i64>("step").unwrap(), &[2]);
}

#[test]
fn a_save_against_a_base_is_the_bytes_of_a_full_save_on_disk() {
    // This test's filesystem may refuse clones: the save then writes what it would have shared.
    let dir = TempDir::new("base-disk");
    check_a_save_against_a_base(&Files::local(), dir.path(), Options::new());
}

#[test]
fn a_save_against_a_base_is_the_bytes_of_a_full_save_in_memory() {
    // The memory storage clones by copying: the shared chunks come from the base.
    let memory = StorageHandle::memory().unwrap();
    check_a_save_against_a_base(&Files::new(&memory), Path::new(""), Options::new().storage(memory.clone()));
}

#[test]
fn a_base_that_cannot_serve_makes_a_full_save() {
    let dir = TempDir::new("base-unusable");
    state(1).save(dir.join("plain.npz")).unwrap();
    state(2).save_with(dir.join("full.npz"), &Options::new().chunk_hashes(true)).unwrap();
    let full = std::fs::read(dir.join("full.npz")).unwrap();
    for base in ["missing.npz", "plain.npz"] {
        state(2).save_with(dir.join("b.npz"), &Options::new().base(dir.join(base))).unwrap();
        assert!(std::fs::read(dir.join("b.npz")).unwrap() == full, "against {base}");
    }
    let e = state(2).save_with(dir.join("b.npz"), &Options::new().base("a\0b")).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
}

#[test]
fn a_writer_saves_against_the_save_queued_before_it() {
    // The base is opened when the save runs: the save queued before it is in place by then.
    let dir = TempDir::new("writer-base");
    let mut writer = Writer::new(&WriterOptions::new(WriterKind::Queue).queue_depth(2).out_dir(dir.path())).unwrap();
    writer.save_vars("1.npz", &state(1), &Options::new().chunk_hashes(true)).unwrap();
    writer.save_vars("2.npz", &state(2), &Options::new().base(dir.join("1.npz"))).unwrap();
    writer.wait().unwrap();
    state(2).save_with(dir.join("full.npz"), &Options::new().chunk_hashes(true)).unwrap();
    assert!(std::fs::read(dir.join("2.npz")).unwrap() == std::fs::read(dir.join("full.npz")).unwrap());
    assert_eq!(Vars::read(dir.join("2.npz")).unwrap().get::<f32>("w").unwrap()[1000], 2.0);
}

/// Saves steps 1..=5 through a manager on the memory storage; returns the checkpoints whose saves the log says
/// shared chunks with an earlier one.
fn sharing_saves(options: ManagerOptions) -> Vec<i64> {
    let memory = StorageHandle::memory().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    let options = options.storage(memory).log(move |_, message| sink.lock().unwrap().push(message.to_string()));
    let mut m = Manager::open("run", &options).unwrap();
    for step in 1..=5 {
        m.save(&state(step), step).unwrap();
    }
    let mut w = vec![0f32; W_LEN];
    let mut step = [0i64];
    let mut vars = Vars::new().unwrap();
    vars.add_borrowed("w", &[W_LEN as i64], &mut w).unwrap();
    vars.add_borrowed("step", &[], &mut step).unwrap();
    assert_eq!(m.restore(&mut vars, None).unwrap(), 5);
    drop(vars);
    assert_eq!((w[1000], w[W_LEN - 1], step), (5.0, (W_LEN - 1) as f32, [5]));
    m.close().unwrap();
    let log = log.lock().unwrap();
    log.iter().filter(|m| m.contains(" shares ")).map(|m| m.split(' ').nth(1).unwrap().parse().unwrap()).collect()
}

#[test]
fn a_manager_saves_incrementally_unless_told_not_to_and_restores_either_way() {
    assert_eq!(sharing_saves(ManagerOptions::new()), vec![2, 3, 4, 5]);
    assert_eq!(sharing_saves(ManagerOptions::new().incremental(false)), Vec::<i64>::new());
}

#[test]
fn full_every_makes_every_nth_save_of_the_manager_share_nothing() {
    assert_eq!(sharing_saves(ManagerOptions::new().full_every(2)), vec![3, 5]);
    let dir = TempDir::new("full-every");
    let e = Manager::open(dir.path(), &ManagerOptions::new().full_every(-1)).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("full_every"), "{e}");
}
