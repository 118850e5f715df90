// SPDX-License-Identifier: Apache-2.0
//! Files: any file of a storage — the local filesystem and the library's memory storage — listed, stat'ed, read
//! and removed.
use std::io::{Read, Seek, SeekFrom};
use std::time::{Duration, SystemTime};

use ckpt::{Code, Files, Options, StorageHandle, Vars};

use crate::common::TempDir;

fn model() -> Vars<'static> {
    let mut v = Vars::new().unwrap();
    v.add("w", &[4], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    v
}

fn check(files: &Files, root: &str, options: &Options) {
    files.make_dirs(format!("{root}/sub")).unwrap();
    model().save_with(format!("{root}/a.npz"), options).unwrap();
    model().save_with(format!("{root}/sub/b.npz"), options).unwrap();

    assert_eq!(files.list(root).unwrap(), vec!["a.npz".to_string(), "sub/".to_string()]);
    let a = files.stat(format!("{root}/a.npz")).unwrap().expect("a.npz is there");
    assert!(!a.is_dir && a.size > 100);
    let age = SystemTime::now().duration_since(a.modified.expect("the storage knows when")).unwrap();
    assert!(age < Duration::from_secs(300), "modified {age:?} ago");
    assert!(files.stat(format!("{root}/sub")).unwrap().unwrap().is_dir);
    assert_eq!(files.stat(format!("{root}/missing")).unwrap(), None);

    let mut f = files.open(format!("{root}/a.npz")).unwrap();
    assert_eq!(f.size(), a.size);
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).unwrap();
    assert_eq!(bytes.len() as u64, a.size);
    assert_eq!(&bytes[..2], b"PK");
    f.seek(SeekFrom::End(-3)).unwrap();
    let mut tail = [0u8; 8];
    assert_eq!(f.read(&mut tail).unwrap(), 3);
    assert_eq!(&tail[..3], &bytes[bytes.len() - 3..]);
    assert_eq!(f.read_at(a.size, &mut tail).unwrap(), 0);

    let missing = files.open(format!("{root}/missing")).unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    assert!(missing.message().contains("missing"), "{}", missing.message());
    let full = files.remove(format!("{root}/sub"), false).unwrap_err();
    assert_eq!(full.code(), Code::Exists);
    assert!(full.message().contains("not empty"), "{}", full.message());
    files.remove(format!("{root}/sub"), true).unwrap();
    files.remove(format!("{root}/a.npz"), false).unwrap();
    assert!(files.list(root).unwrap().is_empty());
}

#[test]
fn files_of_the_local_filesystem_are_listed_stated_read_and_removed() {
    let dir = TempDir::new("files");
    let root = dir.join("run");
    check(&Files::local(), root.to_str().unwrap(), &Options::new());
    // A file written whole shares no blocks (tmpfs cannot tell); a missing one is an error.
    let file = dir.join("whole.bin");
    std::fs::write(&file, b"bytes").unwrap();
    assert!(matches!(Files::local().shared_bytes(&file).unwrap(), None | Some(0)));
    assert!(Files::local().shared_bytes(dir.join("missing.npz")).is_err());
}

#[test]
fn files_of_the_memory_storage_are_listed_stated_read_and_removed() {
    let memory = StorageHandle::memory().unwrap();
    check(&Files::new(&memory), "run", &Options::new().storage(memory.clone()));
    Files::new(&memory).make_dirs("m").unwrap();
    model().save_with("m/a.npz", &Options::new().storage(memory.clone())).unwrap();
    assert_eq!(Files::new(&memory).shared_bytes("m/a.npz").unwrap(), None, "memory cannot tell");
    assert!(!std::path::Path::new("run").exists(), "nothing went to the filesystem");
}
