// SPDX-License-Identifier: Apache-2.0
//! Writer: saves of closures and collections, in the caller's thread and in the background.
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use ckpt::{Code, Error, Options, Vars, Writer, WriterKind, WriterOptions};

use crate::common::{occurrences, TempDir};

#[test]
fn a_save_writes_what_the_closure_writes_atomically() {
    let dir = TempDir::new("writer-save");
    let mut w = Writer::new(&WriterOptions::new(WriterKind::Simple).out_dir(dir.path())).unwrap();
    w.save("a.bin", |sink| {
        sink.write_all(b"hello ")?;
        write!(sink, "{}", 42)?;
        Ok(())
    })
    .unwrap();
    assert_eq!(std::fs::read(dir.join("a.bin")).unwrap(), b"hello 42");
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    w.save_in(&sub, "b.bin", |sink| sink.write_bytes(b"b")).unwrap();
    w.append(Some(&sub), "b.bin", |sink| sink.write_bytes(b"c")).unwrap();
    assert_eq!(std::fs::read(sub.join("b.bin")).unwrap(), b"bc");
    let e = w.save_in(dir.join("absent"), "c.bin", |_| Ok(())).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    w.finalize().unwrap();
    w.finalize().unwrap();
    assert_eq!(w.save("late.bin", |_| Ok(())).unwrap_err().code(), Code::InvalidArgument);
}

#[test]
fn a_failing_save_closure_leaves_the_target_untouched() {
    let dir = TempDir::new("writer-fail");
    std::fs::write(dir.join("model.bin"), b"previous").unwrap();
    let mut w = Writer::new(&WriterOptions::new(WriterKind::Simple).out_dir(dir.path())).unwrap();
    let e = w
        .save("model.bin", |sink| {
            sink.write_bytes(b"half of the new")?;
            Err(Error::new(Code::Io, "the training state could not be serialised"))
        })
        .unwrap_err();
    assert_eq!(e.code(), Code::Io);
    let target = dir.join("model.bin");
    assert_eq!(
        e.message(),
        format!("{}: the save function failed: the training state could not be serialised", target.display())
    );
    assert_eq!(std::fs::read(dir.join("model.bin")).unwrap(), b"previous");
    assert_eq!(dir.files(), vec!["model.bin"], "no temporary file is left");

    let e = w.save("model.bin", |_| panic!("bug in the save closure")).unwrap_err();
    assert_eq!(e.code(), Code::Internal);
    assert_eq!(e.message(), format!("{}: the save function failed: the save closure panicked", target.display()));
    assert_eq!(std::fs::read(dir.join("model.bin")).unwrap(), b"previous");
}

#[test]
fn background_errors_surface_at_wait_and_at_finalize_exactly_once() {
    for kind in [WriterKind::Thread, WriterKind::Queue] {
        let dir = TempDir::new("writer-background");
        std::fs::write(dir.join("bad.bin"), b"old").unwrap();
        let mut w = Writer::new(&WriterOptions::new(kind).queue_depth(3).out_dir(dir.path())).unwrap();
        w.save("ok.bin", |sink| sink.write_bytes(b"1")).unwrap();
        w.save("bad.bin", |_| Err(Error::new(Code::Format, "no such layer"))).unwrap();
        let e = w.wait().unwrap_err();
        assert_eq!(e.code(), Code::Format, "{kind:?}");
        let bad = dir.join("bad.bin");
        assert_eq!(e.message(), format!("{}: the save function failed: no such layer", bad.display()), "{kind:?}");
        w.wait().unwrap(); // reported once
        assert_eq!(std::fs::read(dir.join("ok.bin")).unwrap(), b"1");
        assert_eq!(std::fs::read(dir.join("bad.bin")).unwrap(), b"old", "the failed save left the target alone");

        w.save("bad2.bin", |_| Err(Error::new(Code::Mismatch, "second"))).unwrap();
        let e = w.finalize().unwrap_err();
        assert_eq!(e.code(), Code::Mismatch, "{kind:?}");
        assert!(e.message().ends_with("bad2.bin: the save function failed: second"), "{e}");
        assert_eq!(occurrences(e.message(), "second"), 1, "{e}");
        w.finalize().unwrap();
        assert_eq!(dir.files(), vec!["bad.bin", "ok.bin"], "no temporary file is left");
    }
}

#[test]
fn a_background_save_of_a_collection_snapshots_it() {
    let dir = TempDir::new("writer-vars");
    let mut w = Writer::new(&WriterOptions::new(WriterKind::Queue).queue_depth(2).out_dir(dir.path())).unwrap();
    let mut data = vec![1f32; 1024];
    {
        let mut vars = Vars::new().unwrap();
        vars.add_borrowed("w", &[1024], &mut data).unwrap();
        for i in 0..4 {
            vars.get_mut::<f32>("w").unwrap()[0] = i as f32;
            w.save_vars(&format!("{i}.npz"), &vars, &Options::new()).unwrap();
            vars.get_mut::<f32>("w").unwrap().iter_mut().for_each(|x| *x = -7.0);
        }
        let sub = dir.join("sub");
        std::fs::create_dir(&sub).unwrap();
        w.save_vars_in(&sub, "s.npz", &vars, &Options::new()).unwrap();
        w.wait().unwrap();
    }
    for i in 0..4 {
        let got = Vars::read(dir.join(&format!("{i}.npz"))).unwrap();
        let w = got.get::<f32>("w").unwrap();
        let rest = if i == 0 { 1.0 } else { -7.0 };
        assert_eq!((w[0], w[1], w[1023]), (i as f32, rest, rest), "save {i} holds the values of its call");
    }
    assert_eq!(Vars::read(dir.join("sub/s.npz")).unwrap().get::<f32>("w").unwrap()[5], -7.0);
    w.finalize().unwrap();
}

#[test]
fn a_save_without_a_copy_reads_the_live_collection() {
    let dir = TempDir::new("writer-no-copy");
    let mut w = Writer::new(&WriterOptions::new(WriterKind::Thread).out_dir(dir.path())).unwrap();
    let mut vars = Vars::new().unwrap();
    vars.add("w", &[2], &[3i16, 4]).unwrap();
    // SAFETY: vars stays alive and unchanged until the wait below.
    unsafe { w.save_vars_no_copy(None, "n.npz", &vars, &Options::new()).unwrap() };
    w.wait().unwrap();
    assert_eq!(Vars::read(dir.join("n.npz")).unwrap().get::<i16>("w").unwrap(), &[3, 4]);
}

/// What an after_save closure saw: the path, the file's content then, and the thread it ran on.
type Seen = (PathBuf, Vec<u8>, thread::ThreadId);

#[test]
fn after_save_sees_each_saved_file_in_place_on_the_thread_that_saved() {
    for kind in [WriterKind::Simple, WriterKind::Thread, WriterKind::Queue] {
        let dir = TempDir::new("writer-after-save");
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let record = Arc::clone(&seen);
        let options = WriterOptions::new(kind).queue_depth(2).out_dir(dir.path()).after_save(move |path| {
            let content = std::fs::read(path).map_err(|e| Error::new(Code::Io, e.to_string()))?;
            record.lock().unwrap().push((path.to_path_buf(), content, thread::current().id()));
            Ok(())
        });
        let mut w = Writer::new(&options).unwrap();
        w.save("a.bin", |sink| sink.write_bytes(b"first")).unwrap();
        let mut vars = Vars::new().unwrap();
        vars.add("x", &[2], &[7i32, -8]).unwrap();
        w.save_vars("v.npz", &vars, &Options::new()).unwrap();
        w.wait().unwrap(); // the closure ran before wait returned
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2, "{kind:?}");
        assert_eq!((seen[0].0.as_path(), seen[0].1.as_slice()), (dir.join("a.bin").as_path(), &b"first"[..]));
        assert_eq!(seen[1].0, dir.join("v.npz"));
        assert_eq!(seen[1].1, std::fs::read(dir.join("v.npz")).unwrap(), "{kind:?}: the whole file was in place");
        assert_eq!(Vars::read(dir.join("v.npz")).unwrap().get::<i32>("x").unwrap(), &[7, -8]);
        let here = thread::current().id();
        for (_, _, on) in seen.iter() {
            assert_eq!(*on == here, kind == WriterKind::Simple, "{kind:?}");
        }
        drop(seen);
        w.finalize().unwrap();
    }
}

#[test]
fn an_after_save_error_is_that_saves_error_reported_once() {
    for kind in [WriterKind::Simple, WriterKind::Thread, WriterKind::Queue] {
        let dir = TempDir::new("writer-after-save-error");
        let calls = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&calls);
        let options = WriterOptions::new(kind).out_dir(dir.path()).after_save(move |_| {
            match count.fetch_add(1, Ordering::SeqCst) {
                0 => Err(Error::new(Code::Io, "cannot remove old snapshots")),
                1 => panic!("a bug in the retention"),
                _ => Ok(()),
            }
        });
        let mut w = Writer::new(&options).unwrap();
        let a = dir.join("a.bin");
        let e = w.save("a.bin", |sink| sink.write_bytes(b"a")).and_then(|_| w.wait()).unwrap_err();
        assert_eq!(e.code(), Code::Io, "{kind:?}");
        assert_eq!(
            e.message(),
            format!("{}: the after_save callback failed: cannot remove old snapshots", a.display())
        );
        assert_eq!(std::fs::read(&a).unwrap(), b"a", "{kind:?}: the file stays");
        let e = w.save("b.bin", |sink| sink.write_bytes(b"b")).and_then(|_| w.wait()).unwrap_err();
        assert_eq!(e.code(), Code::Internal, "{kind:?}");
        let b = dir.join("b.bin");
        assert_eq!(
            e.message(),
            format!("{}: the after_save callback failed: the after_save closure panicked", b.display())
        );
        w.save("c.bin", |sink| sink.write_bytes(b"c")).unwrap();
        w.finalize().unwrap(); // each error was reported once
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(dir.files(), vec!["a.bin", "b.bin", "c.bin"]);
    }
}
