// SPDX-License-Identifier: Apache-2.0
//! Handles move to other threads (Send); saves run from spawned threads.
use ckpt::{Manager, ManagerOptions, Reader, StorageHandle, Vars, Writer, WriterKind, WriterOptions};

use crate::common::TempDir;

fn is_send<T: Send>() {}
fn is_send_sync<T: Send + Sync>() {}

#[test]
fn handles_are_send_and_storages_are_shared() {
    is_send::<Vars<'static>>();
    is_send::<Reader>();
    is_send::<Manager>();
    is_send::<Writer>();
    is_send_sync::<StorageHandle>();
    is_send_sync::<ckpt::Error>();
}

#[test]
fn a_manager_and_its_variables_save_from_a_spawned_thread() {
    let dir = TempDir::new("threads");
    let mut m = Manager::open(dir.path(), &ManagerOptions::new()).unwrap();
    let mut vars = Vars::new().unwrap();
    vars.add("w", &[2], &[1.0f32, 2.0]).unwrap();
    let (m, vars) = std::thread::spawn(move || {
        m.save(&vars, 1).unwrap();
        (m, vars)
    })
    .join()
    .unwrap();
    assert_eq!(m.list().unwrap(), vec![1]);
    drop(vars);

    // Borrowed arrays go along into scoped threads; one manager per thread, each in its own directory.
    let mut a = [0i32; 4];
    let mut b = [0i32; 4];
    std::thread::scope(|s| {
        for (i, data) in [&mut a, &mut b].into_iter().enumerate() {
            let logdir = dir.join(&format!("run{i}"));
            s.spawn(move || {
                let mut vars = Vars::new().unwrap();
                vars.add_borrowed("x", &[4], data).unwrap();
                vars.get_mut::<i32>("x").unwrap().iter_mut().for_each(|x| *x = i as i32 + 10);
                let mut m = Manager::open(&logdir, &ManagerOptions::new()).unwrap();
                m.save(&vars, 5).unwrap();
                m.close().unwrap();
            });
        }
    });
    assert_eq!((a, b), ([10; 4], [11; 4]));
    let (run1, _) = Manager::open(dir.join("run1"), &ManagerOptions::new()).unwrap().read(None).unwrap();
    assert_eq!(run1.get::<i32>("x").unwrap(), &[11; 4]);

    let mut w = Writer::new(&WriterOptions::new(WriterKind::Thread).out_dir(dir.path())).unwrap();
    w.save("t.bin", |sink| sink.write_bytes(b"x")).unwrap();
    std::thread::spawn(move || w.finalize()).join().unwrap().unwrap();
    m.close().unwrap();
}
