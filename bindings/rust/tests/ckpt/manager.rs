// SPDX-License-Identifier: Apache-2.0
//! Manager: numbered checkpoints, retention, restore of the latest good one, logging, background saves.
use std::sync::{Arc, Mutex};

use ckpt::{checkpoint_idx, Code, Layout, LogLevel, Manager, ManagerOptions, Options, StaleTemporary, Vars};

use crate::common::TempDir;

fn state(step: i64) -> Vars<'static> {
    let mut vars = Vars::new().unwrap();
    vars.add("w", &[3], &[step as f32, 1.0, 2.0]).unwrap();
    vars.add_scalar("step", step).unwrap();
    vars.set_metadata("step", &step.to_string()).unwrap();
    vars
}

#[test]
fn saves_are_numbered_files_retention_keeps_the_newest_by_number() {
    let dir = TempDir::new("retention");
    let mut m = Manager::open(dir.path(), &ManagerOptions::new().keep(2).keep_every(5)).unwrap();
    assert_eq!(m.list().unwrap(), Vec::<i64>::new());
    assert_eq!(m.latest().unwrap(), None);
    for idx in [1, 5, 9, 10, 11] {
        m.save(&state(idx), idx).unwrap();
    }
    assert_eq!(m.list().unwrap(), vec![5, 10, 11]);
    assert_eq!(m.latest().unwrap(), Some(11));
    let path = m.path(10).unwrap();
    assert_eq!(path, dir.path().join("ckpt/0000000010.npz"));
    assert!(path.exists());
    assert_eq!(checkpoint_idx(&path), Some(10));
    assert_eq!(checkpoint_idx("ckpt/10.npz"), None);
    assert_eq!(checkpoint_idx("00000000042.npz"), None); // an extra leading zero
    assert_eq!(checkpoint_idx("12345678901.npz"), Some(12_345_678_901));
    assert_eq!(m.path(-3).unwrap_err().code(), Code::InvalidArgument);
    m.close().unwrap();
}

#[test]
fn restore_takes_the_latest_or_the_index_asked_for_and_read_gives_a_new_collection() {
    let dir = TempDir::new("restore");
    let mut m = Manager::open(dir.path(), &ManagerOptions::new().subdir("")).unwrap();
    let mut w = [0f32; 3];
    let mut step = [0i64];
    let mut vars = Vars::new().unwrap();
    vars.add_borrowed("w", &[3], &mut w).unwrap();
    vars.add_borrowed("step", &[], &mut step).unwrap();
    let e = m.restore(&mut vars, None).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");

    m.save(&state(100), 100).unwrap();
    m.save(&state(200), 200).unwrap();
    assert!(dir.join("0000000200.npz").exists(), "subdir \"\" is the logdir itself");
    assert_eq!(m.restore(&mut vars, None).unwrap(), 200);
    assert_eq!(vars.metadata("step"), Some("200"));
    assert_eq!(m.restore(&mut vars, Some(100)).unwrap(), 100);
    assert_eq!(vars.get::<f32>("w").unwrap(), &[100.0, 1.0, 2.0]);
    assert_eq!(m.restore(&mut vars, Some(150)).unwrap_err().code(), Code::NotFound);

    let (read, idx) = m.read(None).unwrap();
    assert_eq!(idx, 200);
    assert_eq!(read.get::<i64>("step").unwrap(), &[200]);
    assert_eq!(read.metadata("step"), Some("200"));
    drop(vars);
    assert_eq!(step, [100]);
    m.close().unwrap();
}

#[test]
fn a_corrupt_newest_checkpoint_is_skipped_with_a_warning_unless_fallback_is_off() {
    let dir = TempDir::new("fallback");
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    let options =
        ManagerOptions::new().log(move |level, message| sink.lock().unwrap().push((level, message.to_string())));
    let mut m = Manager::open(dir.path(), &options).unwrap();
    m.save(&state(1), 1).unwrap();
    m.save(&state(2), 2).unwrap();
    let newest = m.path(2).unwrap();
    let mut bytes = std::fs::read(&newest).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    bytes.truncate(n - 4);
    std::fs::write(&newest, bytes).unwrap();

    let mut vars = state(0);
    assert_eq!(m.restore(&mut vars, None).unwrap(), 1);
    assert_eq!(vars.get::<i64>("step").unwrap(), &[1]);
    {
        let log = log.lock().unwrap();
        assert!(
            log.iter().any(|(level, msg)| *level == LogLevel::Warning && msg.contains("0000000002.npz")),
            "{log:?}"
        );
        assert!(log.iter().any(|(level, _)| *level == LogLevel::Info), "{log:?}");
    }
    m.close().unwrap();

    let mut strict = Manager::open(dir.path(), &ManagerOptions::new().fallback(false)).unwrap();
    let e = strict.restore(&mut vars, None).unwrap_err();
    assert_eq!(e.code(), Code::Format, "{e}");
    assert!(e.message().contains("0000000002.npz"), "{e}");
}

#[test]
fn asynchronous_saves_copy_first_and_land_by_wait_and_close() {
    let dir = TempDir::new("async");
    let options =
        ManagerOptions::new().asynchronous(true).queue_depth(2).keep(0).npz(Options::new().layout(Layout::Objax));
    let mut m = Manager::open(dir.path(), &options).unwrap();
    let mut w = [0f32; 3];
    {
        let mut vars = Vars::new().unwrap();
        vars.add_borrowed("w", &[3], &mut w).unwrap();
        for idx in 0..5 {
            vars.get_mut::<f32>("w").unwrap()[0] = idx as f32;
            m.save(&vars, idx).unwrap();
            // The save copied the arrays: changing them now does not change the checkpoint.
            vars.get_mut::<f32>("w").unwrap()[0] = -1.0;
        }
    }
    m.wait().unwrap();
    assert_eq!(m.list().unwrap(), vec![0, 1, 2, 3, 4]);
    for idx in 0..5 {
        let (vars, _) = m.read(Some(idx)).unwrap();
        assert_eq!(vars.get::<f32>("w").unwrap()[0], idx as f32);
    }
    let names = ckpt::Reader::open(m.path(4).unwrap()).unwrap();
    assert_eq!(names.names().collect::<Vec<_>>(), vec!["w"]);
    let objax = std::fs::read(m.path(4).unwrap()).unwrap();
    assert!(objax.windows(9).any(|w| w == b"names.npy"), "the npz options' layout is the saves'");
    m.close().unwrap();
}

#[test]
fn options_the_library_refuses_come_back_as_errors() {
    let dir = TempDir::new("bad-options");
    let e = Manager::open(dir.path(), &ManagerOptions::new().keep_every(-1)).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    let e = Manager::open(dir.join("absent"), &ManagerOptions::new().make_dir(false)).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    let e = Manager::open(dir.path(), &ManagerOptions::new().npz(Options::new().level(12))).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    let mut m = Manager::open(dir.path(), &ManagerOptions::new()).unwrap();
    assert_eq!(m.save(&state(1), -5).unwrap_err().code(), Code::InvalidArgument);
}

#[test]
fn a_read_only_manager_reads_a_directory_another_manager_holds() {
    let dir = TempDir::new("read-only");
    let mut owner = Manager::open(dir.path(), &ManagerOptions::new()).unwrap();
    owner.save(&state(3), 3).unwrap();
    let mut reader = Manager::open(dir.path(), &ManagerOptions::new().read_only(true)).unwrap();
    assert_eq!(reader.list().unwrap(), vec![3]);
    let mut vars = state(0);
    assert_eq!(reader.restore(&mut vars, None).unwrap(), 3);
    assert_eq!(vars.metadata("step"), Some("3"));
    let e = reader.save(&state(4), 4).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("read-only"), "{}", e.message());
    reader.close().unwrap();
    owner.close().unwrap();
    let missing = dir.path().join("missing");
    let e = Manager::open(&missing, &ManagerOptions::new().read_only(true)).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(!missing.exists());
}

#[test]
fn metrics_are_recorded_and_the_best_and_the_latest_are_kept_across_a_restart() {
    let dir = TempDir::new("policies");
    let options = ManagerOptions::new().keep(1).keep_best(2).best_metric("loss", ckpt::BestMode::Min);
    {
        let mut m = Manager::open(dir.path(), &options).unwrap();
        assert_eq!(m.best().unwrap(), None);
        for (idx, loss) in [(10, 0.5), (20, 0.2), (30, 0.9), (40, 0.8)] {
            m.save_metrics(&state(idx), idx, &[("loss", loss), ("acc", 1.0 - loss)]).unwrap();
        }
        m.save_metrics(&state(45), 45, &[("loss", f64::NAN)]).unwrap(); // never the best
        assert_eq!(m.list().unwrap(), vec![10, 20, 45]);
        assert_eq!(m.metric(20, "loss").unwrap(), Some(0.2));
        assert_eq!(m.metric(20, "missing").unwrap(), None);
        let (read, _) = m.read(Some(20)).unwrap();
        assert_eq!(read.metadata("ckpt.index"), Some("20"));
        assert_eq!(read.metadata("ckpt.metric.loss"), Some("0.2"));
        assert_eq!(
            m.save_metrics(&state(50), 50, &[("loss", 1.0), ("loss", 2.0)]).unwrap_err().code(),
            Code::InvalidArgument
        );
        m.close().unwrap();
    }
    let mut m = Manager::open(dir.path(), &options).unwrap();
    assert_eq!(m.best().unwrap(), Some(20));
    m.save(&state(50), 50).unwrap(); // no metric: kept as the newest only
    assert_eq!(m.list().unwrap(), vec![10, 20, 50]);
    let mut vars = state(0);
    assert_eq!(m.restore(&mut vars, None).unwrap(), 50);
}

/// The indices on disk, the latest, the best, and the latest's loss.
type Summary = (Vec<i64>, Option<i64>, Option<i64>, Option<f64>);

/// What a report is given: the manager, not the right to change it.
fn summary(m: &Manager) -> ckpt::Result<Summary> {
    let latest = m.latest()?;
    let best = m.best()?;
    let loss = match latest {
        Some(idx) => m.metric(idx, "loss")?,
        None => None,
    };
    Ok((m.list()?, latest, best, loss))
}

#[test]
fn queries_take_a_shared_reference_and_answer_none_where_nothing_is_there() {
    let dir = TempDir::new("queries");
    let options = ManagerOptions::new().best_metric("loss", ckpt::BestMode::Min);
    let mut m = Manager::open(dir.path(), &options).unwrap();
    assert_eq!(summary(&m).unwrap(), (vec![], None, None, None));
    m.save_metrics(&state(1), 1, &[("loss", 0.25)]).unwrap();
    m.save(&state(2), 2).unwrap();
    assert_eq!(summary(&m).unwrap(), (vec![1, 2], Some(2), Some(1), None));
    assert_eq!(m.metric(1, "loss").unwrap(), Some(0.25));
    assert_eq!(m.metric(7, "loss").unwrap(), None, "no checkpoint 7");
    assert_eq!(m.path(7).unwrap(), dir.path().join("ckpt/0000000007.npz"), "a path whether it exists or not");
    m.close().unwrap();
}

#[test]
fn queries_still_fail_for_what_is_not_an_absence() {
    let dir = TempDir::new("query-errors");
    let m = Manager::open(dir.path(), &ManagerOptions::new()).unwrap();
    let e = m.best().unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "no best_metric set: {e}");
    assert_eq!(m.metric(-1, "loss").unwrap_err().code(), Code::InvalidArgument);
    let e = m.metric(1, "lo\0ss").unwrap_err();
    assert_eq!((e.code(), e.message()), (Code::InvalidArgument, "metric name \"lo\\0ss\" holds a NUL byte"));
}

#[test]
fn should_save_every_n_steps_and_after_a_request() {
    let dir = TempDir::new("should-save");
    let mut m = Manager::open(dir.path(), &ManagerOptions::new().save_every_steps(10)).unwrap();
    let due: Vec<i64> = (1..=30).filter(|&s| m.should_save(s).unwrap()).collect();
    assert_eq!(due, vec![10, 20, 30]);
    m.request_save();
    assert!(m.should_save(3).unwrap());
    assert!(!m.should_save(3).unwrap());
    assert_eq!(m.should_save(-1).unwrap_err().code(), Code::InvalidArgument);
    drop(m);
    let opened = Manager::open(dir.path(), &ManagerOptions::new().save_every_seconds(3600).keep_seconds(60));
    assert!(!opened.unwrap().should_save(1).unwrap());
}

#[test]
fn clean_removes_what_interrupted_saves_left_and_a_dry_run_only_finds_it() {
    let dir = TempDir::new("clean");
    let mut m = Manager::open(dir.path(), &ManagerOptions::new()).unwrap();
    m.save(&state(1), 1).unwrap();
    let ckpt_dir = dir.path().join("ckpt");
    let file = ckpt_dir.join(".model.npz.tmp-AbC123");
    std::fs::write(&file, b"half a save").unwrap();
    let step = ckpt_dir.join(".0000000002.tmp-zZ09yY");
    std::fs::create_dir(&step).unwrap();
    std::fs::write(ckpt_dir.join("notes.txt"), b"mine").unwrap();
    let mut expected = vec![
        StaleTemporary { path: step.clone(), is_dir: true, upload: false },
        StaleTemporary { path: file.clone(), is_dir: false, upload: false },
    ];
    expected.sort_by(|a, b| a.path.cmp(&b.path));
    let sorted = |mut v: Vec<StaleTemporary>| {
        v.sort_by(|a, b| a.path.cmp(&b.path));
        v
    };
    assert_eq!(sorted(m.clean(true).unwrap()), expected);
    assert!(file.exists() && step.exists());
    assert_eq!(sorted(m.clean(false).unwrap()), expected);
    assert!(!file.exists() && !step.exists());
    assert_eq!(m.clean(false).unwrap(), vec![]);
    assert_eq!(std::fs::read(ckpt_dir.join("notes.txt")).unwrap(), b"mine");
    assert_eq!(m.list().unwrap(), vec![1]);
    // A read-only manager cannot clean; its dry run only reads (no lock file is made), and is refused while another
    // manager holds the directory, as a clean is.
    let mut reader = Manager::open(dir.path(), &ManagerOptions::new().read_only(true)).unwrap();
    let e = reader.clean(false).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("read-only"), "{}", e.message());
    assert_eq!(reader.clean(true).unwrap_err().code(), Code::Busy);
    drop(m);
    std::fs::write(&file, b"half a save").unwrap();
    assert_eq!(reader.clean(true).unwrap(), vec![StaleTemporary { path: file.clone(), is_dir: false, upload: false }]);
    assert!(file.exists());
}
