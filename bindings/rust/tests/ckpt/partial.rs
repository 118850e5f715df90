// SPDX-License-Identifier: Apache-2.0
//! Partial restores (Options::partial, Vars::restored) and the manager's staging budget (max_staging_bytes).
use std::path::PathBuf;

use ckpt::{Code, Manager, ManagerOptions, Options, Vars};

use crate::common::TempDir;

fn old_model() -> Vars<'static> {
    let mut v = Vars::new().unwrap();
    v.add("w", &[2, 3], &[0f32, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    v.add("b", &[2], &[1.5f64, 2.5]).unwrap();
    v
}

/// The old model plus a variable the old file lacks, each holding values no restore would write.
fn grown_model() -> Vars<'static> {
    let mut v = Vars::new().unwrap();
    v.add("w", &[2, 3], &[-1f32; 6]).unwrap();
    v.add("b", &[2], &[-1f64; 2]).unwrap();
    v.add("extra", &[4], &[7i32; 4]).unwrap();
    v
}

/// A directory holding old.npz, saved from the old model.
fn old_file(name: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new(name);
    let path = dir.join("old.npz");
    old_model().save(&path).unwrap();
    (dir, path)
}

#[test]
fn a_partial_restore_fills_what_the_file_has_and_leaves_the_rest() {
    let (_dir, path) = old_file("partial");
    let mut target = grown_model();
    assert!(!target.restored(0), "nothing is restored before a restore");
    target.restore_with(&path, &Options::new().partial(true)).unwrap();
    assert_eq!(target.get::<f32>("w").unwrap(), &[0f32, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(target.get::<f64>("b").unwrap(), &[1.5, 2.5]);
    assert_eq!(target.get::<i32>("extra").unwrap(), &[7; 4], "left untouched");
    assert_eq!((0..4).map(|i| target.restored(i)).collect::<Vec<_>>(), vec![true, true, false, false]);
}

#[test]
fn restores_stay_strict_by_default_and_partial_ones_still_check_shapes() {
    let (_dir, path) = old_file("strict");
    let mut target = grown_model();
    let e = target.restore(&path).unwrap_err();
    assert_eq!(e.code(), Code::Mismatch);
    assert!(e.message().contains("old.npz: cannot restore; missing from the file: 'extra'"), "{e}");
    assert_eq!(target.get::<f32>("w").unwrap(), &[-1f32; 6], "nothing changed");
    assert!(!target.restored(0) && !target.restored(2));

    let mut reshaped = Vars::new().unwrap();
    reshaped.add("w", &[3, 2], &[0f32; 6]).unwrap();
    reshaped.add("extra", &[1], &[0f64]).unwrap();
    let e = reshaped.restore_with(&path, &Options::new().partial(true)).unwrap_err();
    assert_eq!(e.code(), Code::Mismatch);
    assert!(
        e.message().contains("dtype or shape differ: 'w' is float32 (3, 2) in the collection but float32 (2, 3)"),
        "{e}"
    );
    assert!(!e.message().contains("missing"), "{e}");
    assert!(!reshaped.restored(0));
}

#[test]
fn a_restore_into_borrowed_arrays_leaves_the_missing_ones_as_they_were() {
    let (_dir, path) = old_file("borrowed");
    let mut w = [9f32; 6];
    let mut extra = [7i32; 4];
    {
        let mut v = Vars::new().unwrap();
        v.add_borrowed("w", &[2, 3], &mut w).unwrap();
        v.add_borrowed("extra", &[4], &mut extra).unwrap();
        v.restore_with(&path, &Options::new().partial(true)).unwrap();
        assert!(v.restored(0) && !v.restored(1) && !v.restored(2));
    }
    assert_eq!(w, [0f32, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(extra, [7; 4]);
}

#[test]
fn a_partial_manager_resumes_a_grown_model_from_an_older_checkpoint() {
    let dir = TempDir::new("manager-partial");
    let mut m = Manager::open(dir.path(), &ManagerOptions::new()).unwrap();
    m.save(&old_model(), 3).unwrap();
    let e = m.restore(&mut grown_model(), None).unwrap_err();
    assert_eq!(e.code(), Code::Mismatch);
    m.close().unwrap();

    let options = ManagerOptions::new().npz(Options::new().partial(true));
    let mut m = Manager::open(dir.path(), &options).unwrap();
    let mut target = grown_model();
    assert_eq!(m.restore(&mut target, None).unwrap(), 3);
    assert_eq!(target.get::<f64>("b").unwrap(), &[1.5, 2.5]);
    assert_eq!(target.get::<i32>("extra").unwrap(), &[7; 4]);
    assert!(target.restored(1) && !target.restored(2));
    m.close().unwrap();
}

#[test]
fn saves_round_trip_under_staging_budgets_smaller_and_larger_than_them() {
    for budget in [64u64, 1 << 20] {
        let dir = TempDir::new("staging");
        let options = ManagerOptions::new().asynchronous(true).max_staging_bytes(budget).keep(3);
        let mut m = Manager::open(dir.path(), &options).unwrap();
        let mut data: Vec<f64> = (0..10_000).map(f64::from).collect(); // 80 kB
        for step in 1..=3i64 {
            let mut v = Vars::new().unwrap();
            v.add("w", &[10_000], &data).unwrap();
            v.add_scalar("step", step).unwrap();
            m.save(&v, step).unwrap();
            drop(v); // copied, or already written: the collection may go
            data.iter_mut().for_each(|x| *x += 1.0);
        }
        m.wait().unwrap();
        for step in 1..=3i64 {
            let (back, idx) = m.read(Some(step)).unwrap();
            assert_eq!(idx, step);
            assert_eq!(back.get::<i64>("step").unwrap(), &[step]);
            let w = back.get::<f64>("w").unwrap();
            assert!(w.iter().enumerate().all(|(i, x)| *x == (i as i64 + step - 1) as f64), "budget {budget}");
        }
        m.close().unwrap();
    }
}
