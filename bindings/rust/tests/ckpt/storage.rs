// SPDX-License-Identifier: Apache-2.0
//! Storages: the library's in-memory one, and one written in Rust (a HashMap) plugged in through the callback
//! table, used by Vars, a manager and a writer.
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use ckpt::{
    Code, CommHandle, Directories, Error, InputFile, Manager, ManagerOptions, Options, OutputFile, Result, Storage,
    StorageHandle, Vars, Writer, WriterKind, WriterOptions,
};

use crate::common::{assert_every_dtype, every_dtype, occurrences};

#[derive(Default)]
struct Files {
    files: HashMap<String, Arc<Vec<u8>>>,
    dirs: BTreeSet<String>,
}

/// Files in a map, shared with the test that made it; fails writes of paths containing `fail_write`.
#[derive(Clone, Default)]
struct MapStorage {
    state: Arc<Mutex<Files>>,
    fail_write: Option<&'static str>,
    panic_on_list: bool,
    /// What free_space reports (None: cannot tell), and the directories it was asked about.
    free: Arc<Mutex<Option<u64>>>,
    asked: Arc<Mutex<Vec<String>>>,
    /// Directories listed and removed, never renamed (as in an object store); files only when false.
    prefixes: bool,
}

impl MapStorage {
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.state.lock().unwrap().files.keys().cloned().collect();
        names.sort();
        names
    }
    fn bytes(&self, path: &str) -> Vec<u8> {
        self.state.lock().unwrap().files[path].to_vec()
    }
}

fn parent(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

struct MapFile {
    path: String,
    bytes: Vec<u8>,
    storage: MapStorage,
}

impl OutputFile for MapFile {
    fn write(&mut self, data: &[u8]) -> Result<()> {
        if let Some(bad) = self.storage.fail_write {
            if self.path.contains(bad) {
                return Err(Error::new(Code::Io, "the bucket is full"));
            }
        }
        self.bytes.extend_from_slice(data);
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
    fn close(self: Box<Self>) -> Result<()> {
        let MapFile { path, bytes, storage } = *self;
        storage.state.lock().unwrap().files.insert(path, Arc::new(bytes));
        Ok(())
    }
}

struct MapInput(Arc<Vec<u8>>);

impl InputFile for MapInput {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_at(&mut self, offset: u64, dst: &mut [u8]) -> Result<usize> {
        let start = (offset as usize).min(self.0.len());
        let n = dst.len().min(self.0.len() - start);
        dst[..n].copy_from_slice(&self.0[start..start + n]);
        Ok(n)
    }
}

impl Storage for MapStorage {
    fn make_dirs(&self, dir: &str) -> Result<()> {
        let mut state = self.state.lock().unwrap();
        let mut at = dir;
        while !at.is_empty() {
            state.dirs.insert(at.to_string());
            at = parent(at);
        }
        Ok(())
    }
    fn create(&self, path: &str) -> Result<Box<dyn OutputFile>> {
        let mut state = self.state.lock().unwrap();
        let dir = parent(path);
        if !dir.is_empty() && dir != "." && !state.dirs.contains(dir) {
            return Err(Error::new(Code::NotFound, format!("{dir}: no such directory")));
        }
        if state.files.contains_key(path) {
            return Err(Error::new(Code::Exists, path));
        }
        state.files.insert(path.to_string(), Arc::new(Vec::new()));
        Ok(Box::new(MapFile { path: path.to_string(), bytes: Vec::new(), storage: self.clone() }))
    }
    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let mut state = self.state.lock().unwrap();
        let bytes = state.files.remove(from).ok_or_else(|| Error::new(Code::NotFound, from))?;
        state.files.insert(to.to_string(), bytes);
        Ok(())
    }
    fn remove(&self, path: &str) -> Result<()> {
        self.state.lock().unwrap().files.remove(path).map(|_| ()).ok_or_else(|| Error::new(Code::NotFound, path))
    }
    fn list(&self, dir: &str) -> Result<Vec<String>> {
        if self.panic_on_list {
            panic!("list is broken");
        }
        let state = self.state.lock().unwrap();
        if !state.dirs.contains(dir) {
            return Err(Error::new(Code::NotFound, dir));
        }
        Ok(state.files.keys().filter(|p| parent(p) == dir).map(|p| p[dir.len() + 1..].to_string()).collect())
    }
    fn open_read(&self, path: &str) -> Result<Box<dyn InputFile>> {
        let state = self.state.lock().unwrap();
        let bytes = state.files.get(path).ok_or_else(|| Error::new(Code::NotFound, format!("{path}: no such file")))?;
        Ok(Box::new(MapInput(bytes.clone())))
    }
    fn free_space(&self, dir: &str) -> Result<Option<u64>> {
        self.asked.lock().unwrap().push(dir.to_string());
        Ok(*self.free.lock().unwrap())
    }
    fn directories(&self) -> Directories {
        if self.prefixes {
            Directories::Prefixes
        } else {
            Directories::None
        }
    }
    fn list_dirs(&self, dir: &str) -> Result<Vec<String>> {
        let state = self.state.lock().unwrap();
        Ok(state.dirs.iter().filter(|d| parent(d) == dir).map(|d| d[dir.len() + 1..].to_string()).collect())
    }
    fn remove_dir(&self, dir: &str) -> Result<()> {
        let mut state = self.state.lock().unwrap();
        if state.files.keys().any(|p| parent(p) == dir) {
            return Err(Error::new(Code::Io, format!("{dir}: not empty")));
        }
        state.dirs.remove(dir);
        Ok(())
    }
}

#[test]
fn a_rust_storage_without_directory_renames_holds_sharded_steps_committed_by_their_manifest() {
    let storage = MapStorage { prefixes: true, ..MapStorage::default() };
    let options = ManagerOptions::new().storage(StorageHandle::new(storage.clone()).unwrap());
    let mut manager =
        Manager::open("bucket", &options.clone().comm(CommHandle::new(crate::comm::SOLO).unwrap())).unwrap();
    let emb: Vec<f32> = (0..6).map(|x| x as f32).collect();
    let mut vars = Vars::new().unwrap();
    vars.add::<f32>("emb", &[3, 2], &emb).unwrap();
    manager.save(&vars, 3).unwrap();
    drop(manager);
    let names = storage.names();
    assert!(names.contains(&"bucket/ckpt/0000000003/manifest.json".to_string()), "{names:?}");
    assert!(names.contains(&"bucket/ckpt/0000000003/shard-00000-of-00001.npz".to_string()), "{names:?}");
    // Shards without a manifest (a save cut short) are no checkpoint, and the next manager's first save removes
    // them (reading removes nothing).
    {
        let mut state = storage.state.lock().unwrap();
        let shard = state.files["bucket/ckpt/0000000003/shard-00000-of-00001.npz"].clone();
        state.dirs.insert("bucket/ckpt/0000000004".to_string());
        state.files.insert("bucket/ckpt/0000000004/shard-00000-of-00001.npz".to_string(), shard);
    }
    let mut manager = Manager::open("bucket", &options).unwrap();
    assert_eq!(manager.list().unwrap(), vec![3]);
    let (back, index) = manager.read(None).unwrap();
    assert_eq!(index, 3);
    assert_eq!(back.get::<f32>("emb").unwrap(), &emb[..]);
    assert!(storage.names().iter().any(|n| n.starts_with("bucket/ckpt/0000000004")));
    manager.save(&back, 5).unwrap();
    assert!(!storage.names().iter().any(|n| n.starts_with("bucket/ckpt/0000000004")));
    assert!(!storage.state.lock().unwrap().dirs.contains("bucket/ckpt/0000000004"));
}

#[test]
fn a_rust_storage_holds_what_vars_a_manager_and_a_writer_save() {
    let map = MapStorage::default();
    let handle = StorageHandle::new(map.clone()).unwrap();

    // Vars through Options.
    let npz = Options::new().storage(handle.clone());
    every_dtype().save_with("model.npz", &npz).unwrap();
    assert_every_dtype(&Vars::read_with("model.npz", &npz).unwrap());
    let e = Vars::read_with("absent.npz", &npz).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    let mut npz_file = ckpt::Reader::open_with("model.npz", &npz).unwrap();
    assert_eq!(npz_file.read::<i64>("scalar").unwrap(), vec![7]);
    drop(npz_file);

    // A manager: numbered files, retention, restore.
    let mut m = Manager::open("runs/a", &ManagerOptions::new().keep(2).storage(handle.clone())).unwrap();
    for idx in 1..=3 {
        let mut vars = Vars::new().unwrap();
        vars.add_scalar("step", idx).unwrap();
        m.save(&vars, idx).unwrap();
    }
    assert_eq!(m.list().unwrap(), vec![2, 3]);
    let mut step = [0i64];
    let mut vars = Vars::new().unwrap();
    vars.add_borrowed("step", &[], &mut step).unwrap();
    assert_eq!(m.restore(&mut vars, None).unwrap(), 3);
    drop(vars);
    assert_eq!(step, [3]);
    m.close().unwrap();

    // A background writer.
    let mut w = Writer::new(&WriterOptions::new(WriterKind::Queue).storage(handle.clone()).out_dir("runs/a")).unwrap();
    w.save("notes.txt", |sink| sink.write_bytes(b"resumed at 3")).unwrap();
    let mut vars = Vars::new().unwrap();
    vars.add("x", &[2], &[1u8, 2]).unwrap();
    w.save_vars("x.npz", &vars, &Options::new()).unwrap();
    w.finalize().unwrap();

    assert_eq!(
        map.names(),
        vec![
            "model.npz",
            "runs/a/ckpt/0000000002.npz",
            "runs/a/ckpt/0000000003.npz",
            "runs/a/notes.txt",
            "runs/a/x.npz"
        ]
    );
    assert_eq!(map.bytes("runs/a/notes.txt"), b"resumed at 3");
    let bytes = map.bytes("runs/a/x.npz");
    assert_eq!(Vars::read_memory(&bytes, &Options::new()).unwrap().get::<u8>("x").unwrap(), &[1, 2]);

    // The library drops the storage when the last user lets it go.
    assert_eq!(Arc::strong_count(&map.state), 2);
    drop((handle, npz, w));
    assert_eq!(Arc::strong_count(&map.state), 1);
}

#[test]
fn a_failing_or_panicking_storage_fails_the_call_with_its_code() {
    let map = MapStorage { fail_write: Some("model.npz"), panic_on_list: true, ..MapStorage::default() };
    let handle = StorageHandle::new(map.clone()).unwrap();
    let npz = Options::new().storage(handle.clone());
    let mut vars = Vars::new().unwrap();
    vars.add("w", &[2], &[1f64, 2.0]).unwrap();
    vars.save_with("other.npz", &npz).unwrap();
    let e = vars.save_with("model.npz", &npz).unwrap_err();
    assert_eq!(e.code(), Code::Io);
    assert!(e.message().contains("write"), "the message names the operation: {e}");
    assert_eq!(map.names(), vec!["other.npz"], "the failed save left no file behind");

    let e = Manager::open("runs/b", &ManagerOptions::new().storage(handle)).and_then(|m| m.list()).unwrap_err();
    assert_eq!(e.code(), Code::Internal, "a panic becomes CKPT_ERROR: {e}");
    assert!(e.message().ends_with("storage callback 'list' failed: the callback panicked"), "{e}");
}

#[test]
fn a_storage_method_error_gives_the_call_its_message_once() {
    let map = MapStorage { fail_write: Some("model"), ..MapStorage::default() };
    let handle = StorageHandle::new(map.clone()).unwrap();
    let mut vars = Vars::new().unwrap();
    vars.add("w", &[2], &[1f64, 2.0]).unwrap();
    let e = vars.save_with("model.npz", &Options::new().storage(handle.clone())).unwrap_err();
    assert_eq!(e.code(), Code::Io);
    assert!(e.message().ends_with("storage callback 'write' failed: the bucket is full"), "{e}");
    assert_eq!(occurrences(e.message(), "the bucket is full"), 1, "{e}");

    // A save closure that hands on the sink's error: the storage's words, not the closure's, and once.
    let mut w = Writer::new(&WriterOptions::new(WriterKind::Thread).storage(handle)).unwrap();
    w.save("model.bin", |sink| sink.write_bytes(b"weights")).unwrap();
    let e = w.wait().unwrap_err();
    assert_eq!(e.code(), Code::Io);
    assert!(e.message().ends_with("storage callback 'write' failed: the bucket is full"), "{e}");
    assert_eq!(occurrences(e.message(), "the bucket is full"), 1, "{e}");
    assert!(!e.message().contains("the save function"), "{e}");
    w.finalize().unwrap();
}

#[test]
fn the_memory_storage_serves_a_manager() {
    let memory = StorageHandle::memory().unwrap();
    let mut m = Manager::open("logs", &ManagerOptions::new().storage(memory.clone())).unwrap();
    m.save(&every_dtype(), 7).unwrap();
    assert_every_dtype(&m.read(None).unwrap().0);
    // Within the process a second manager on the same directory takes it over at its first save.
    let mut second = Manager::open("logs", &ManagerOptions::new().storage(memory.clone())).unwrap();
    second.save(&every_dtype(), 7).unwrap();
    assert_eq!(m.save(&every_dtype(), 8).unwrap_err().code(), Code::Busy);
    m.close().unwrap();
    second.close().unwrap();
    let path = "logs/ckpt/0000000007.npz";
    assert_every_dtype(&Vars::read_with(path, &Options::new().storage(memory)).unwrap());
    assert!(!std::path::Path::new(path).exists(), "nothing went to the filesystem");
}

fn model(value: f32) -> Vars<'static> {
    let mut v = Vars::new().unwrap();
    v.add("w", &[64], &[value; 64]).unwrap();
    v
}

#[test]
fn a_storage_reporting_too_little_space_fails_the_save_and_keeps_the_previous_checkpoint() {
    let map = MapStorage::default();
    let mut m = Manager::open("run", &ManagerOptions::new().storage(StorageHandle::new(map.clone()).unwrap())).unwrap();
    m.save(&model(1.0), 1).unwrap(); // None: the medium cannot tell, no check
    *map.free.lock().unwrap() = Some(100);
    let e = m.save(&model(2.0), 2).unwrap_err();
    assert_eq!(e.code(), Code::Io);
    assert!(e.message().contains("run/ckpt/0000000002.npz: not enough space for checkpoint 2: it needs up to"), "{e}");
    assert!(e.message().contains("and 100 bytes is free"), "{e}");
    assert_eq!(map.asked.lock().unwrap().last().map(String::as_str), Some("run/ckpt"));
    assert_eq!(m.list().unwrap(), vec![1]);
    assert_eq!(map.names(), vec!["run/ckpt/0000000001.npz"], "no temporary left behind");
    let mut back = model(0.0);
    assert_eq!(m.restore(&mut back, None).unwrap(), 1);
    assert_eq!(back.get::<f32>("w").unwrap(), &[1.0; 64]);
    m.close().unwrap();
}

#[test]
fn a_storage_reporting_enough_space_saves_and_one_running_low_warns() {
    let map = MapStorage { free: Arc::new(Mutex::new(Some(1 << 40))), ..MapStorage::default() };
    let warnings = Arc::new(Mutex::new(Vec::new()));
    let seen = warnings.clone();
    let options =
        ManagerOptions::new().storage(StorageHandle::new(map.clone()).unwrap()).keep(5).log(move |level, message| {
            if level == ckpt::LogLevel::Warning {
                seen.lock().unwrap().push(message.to_string());
            }
        });
    let mut m = Manager::open("run", &options).unwrap();
    m.save(&model(1.0), 1).unwrap();
    assert!(warnings.lock().unwrap().is_empty());
    *map.free.lock().unwrap() = Some(2000); // room for this save, not for the four more keep(5) will accumulate
    m.save(&model(2.0), 2).unwrap();
    assert_eq!(m.list().unwrap(), vec![1, 2]);
    m.close().unwrap();
    let warnings = warnings.lock().unwrap();
    assert!(warnings.iter().any(|w| w.starts_with("run/ckpt: 2000 bytes free, less than the")), "{warnings:?}");
}
