// SPDX-License-Identifier: Apache-2.0
//! S3 (the `s3` feature) against a real server: storages made of `S3Options` and of `s3://` URLs, `s3://` paths
//! with the default storage, a manager's retention on a bucket, multipart uploads, and the errors of a missing
//! bucket and of options that cannot work.
//!
//! Run under `tests/s3/s3_env.py`, which starts the server and exports `AWS_ENDPOINT_URL`, the credentials and
//! `CKPT_S3_TEST_BUCKET` (a bucket that exists): the `rust_s3` test of bindings/rust/CMakeLists.txt does.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ckpt::{checkpoint_idx, Code, Manager, ManagerOptions, Options, Reader, S3Options, StorageHandle, Vars};

use crate::common::{assert_every_dtype, every_dtype};

fn env(name: &str) -> String {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{name} is not set: run these tests under tests/s3/s3_env.py"),
    }
}

fn bucket() -> String {
    env("CKPT_S3_TEST_BUCKET")
}

/// A key prefix no other test (of this run or an earlier one on the same server) uses.
fn unique(name: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("rust-{}-{}-{name}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

fn state(step: i64) -> Vars<'static> {
    let mut vars = Vars::new().unwrap();
    vars.add("w", &[2, 2], &[step as f32, 0.25, -0.5, 1e-3]).unwrap();
    vars.add_scalar("step", step).unwrap();
    vars
}

#[test]
fn a_storage_of_s3_options_saves_and_reads_under_its_prefix() {
    let prefix = unique("options");
    // Given in code rather than taken from the environment (which names the same server).
    let options = S3Options::new()
        .bucket(&bucket())
        .prefix(&prefix)
        .endpoint_url(&env("AWS_ENDPOINT_URL"))
        .credentials(&env("AWS_ACCESS_KEY_ID"), &env("AWS_SECRET_ACCESS_KEY"));
    let npz = Options::new().storage(StorageHandle::s3(&options).unwrap());

    every_dtype().save_with("model.npz", &npz).unwrap();
    assert_every_dtype(&Vars::read_with("model.npz", &npz).unwrap());
    let mut into = every_dtype();
    into.get_mut::<f32>("f32").unwrap()[0] = 99.0;
    into.restore_with("model.npz", &npz).unwrap();
    assert_every_dtype(&into);
    let mut file = Reader::open_with("model.npz", &npz).unwrap();
    assert_eq!(file.read::<i64>("i64").unwrap(), vec![i64::MIN, -4, i64::MAX]);

    // The object is at <prefix>/model.npz of the bucket: the default storage finds it by its URL.
    assert_every_dtype(&Vars::read(format!("s3://{}/{prefix}/model.npz", bucket())).unwrap());

    let e = Vars::read_with("absent.npz", &npz).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    assert!(e.message().contains(&format!("{prefix}/absent.npz")), "{e}");
}

#[test]
fn s3_paths_work_with_the_default_storage_and_s3_url_splits_a_url() {
    let key = format!("{}/x.npz", unique("url"));
    let url = format!("s3://{}/{key}", bucket());
    every_dtype().save(&url).unwrap();
    assert_every_dtype(&Vars::read(&url).unwrap());

    let (storage, path) = StorageHandle::s3_url(&url).unwrap();
    assert_eq!(path, key);
    assert_every_dtype(&Vars::read_with(&path, &Options::new().storage(storage)).unwrap());
    assert_eq!(StorageHandle::s3_url(&format!("s3://{}", bucket())).unwrap().1, "");
    assert_eq!(StorageHandle::s3_url(&format!("s3://{}/", bucket())).unwrap().1, "");

    // Options other than the bucket and prefix configure it.
    let options = S3Options::new().endpoint_url(&env("AWS_ENDPOINT_URL")).max_attempts(1);
    let (storage, path) = StorageHandle::s3_url_with(&url, &options).unwrap();
    assert_eq!(path, key);
    assert_every_dtype(&Vars::read_with(&path, &Options::new().storage(storage)).unwrap());
}

#[test]
fn a_manager_over_s3_keeps_the_newest_and_resumes_from_the_latest() {
    let logdir = format!("s3://{}/{}", bucket(), unique("manager"));
    let options = ManagerOptions::new().keep(2);
    let mut m = Manager::open(&logdir, &options).unwrap();
    assert_eq!(m.list().unwrap(), Vec::<i64>::new());
    for idx in 1..=4 {
        m.save(&state(idx), idx).unwrap();
    }
    assert_eq!(m.list().unwrap(), vec![3, 4]);
    assert_eq!(checkpoint_idx(m.path(4).unwrap()), Some(4));
    m.close().unwrap();

    // What retention removed is gone from the bucket, and what it kept is there, for a reader that is not the
    // manager.
    let e = Vars::read(format!("{logdir}/ckpt/0000000002.npz")).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    assert_eq!(Vars::read(format!("{logdir}/ckpt/0000000003.npz")).unwrap().get::<i64>("step").unwrap(), &[3]);

    // A new manager (a restarted job) lists the bucket and resumes from the newest, in place.
    let mut m = Manager::open(&logdir, &options).unwrap();
    assert_eq!(m.latest().unwrap(), Some(4));
    let mut w = [0f32; 4];
    let mut step = [0i64];
    let mut vars = Vars::new().unwrap();
    vars.add_borrowed("w", &[2, 2], &mut w).unwrap();
    vars.add_borrowed("step", &[], &mut step).unwrap();
    assert_eq!(m.restore(&mut vars, None).unwrap(), 4);
    drop(vars);
    assert_eq!(w, [4.0, 0.25, -0.5, 1e-3]);
    assert_eq!(step, [4]);
    m.close().unwrap();
}

#[test]
fn an_array_larger_than_part_size_goes_up_in_parts_and_comes_back_bit_for_bit() {
    let options = S3Options::new().bucket(&bucket()).prefix(&unique("multipart")).part_size(5 << 20).parallelism(3);
    let npz = Options::new().storage(StorageHandle::s3(&options).unwrap());
    // 11 MiB and a bit: three parts, the last one short.
    let big: Vec<u64> = (0..(11u64 << 20) / 8 + 777).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
    let mut vars = Vars::new().unwrap();
    vars.add("big", &[big.len() as i64], &big).unwrap();
    vars.save_with("big.npz", &npz).unwrap();
    let back = Vars::read_with("big.npz", &npz).unwrap();
    assert_eq!(back.shape("big").unwrap(), &[big.len() as i64]);
    assert!(back.get::<u64>("big").unwrap() == &big[..], "the 11 MiB array differs after the round trip");
}

#[test]
fn a_bucket_that_does_not_exist_is_not_found_naming_it() {
    let missing = format!("ckpt-missing-{}", std::process::id());

    let storage = StorageHandle::s3(&S3Options::new().bucket(&missing).max_attempts(1)).unwrap(); // nothing sent yet
    let npz = Options::new().storage(storage);
    let e = state(1).save_with("x.npz", &npz).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    assert!(e.message().contains(&missing), "{e}");
    let e = Vars::read_with("x.npz", &npz).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    assert!(e.message().contains(&missing), "{e}");

    let e = Vars::read(format!("s3://{missing}/x.npz")).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    assert!(e.message().contains(&missing), "{e}");

    // As the manager opens (it lists its directory) or at its first save.
    let e = Manager::open(format!("s3://{missing}/run"), &ManagerOptions::new())
        .and_then(|mut m| m.save(&state(1), 1))
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    assert!(e.message().contains(&missing), "{e}");
}

#[test]
fn options_that_cannot_work_are_refused_naming_the_field() {
    let b = S3Options::new().bucket("bkt");
    let e = StorageHandle::s3(&b.clone().parallelism(0)).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(e.message(), "S3Options::parallelism is 0: give a positive value, or leave it unset for the default");
    let e = StorageHandle::s3(&b.clone().stall_timeout(Duration::ZERO)).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().starts_with("S3Options::stall_timeout is 0ns"), "{e}");
    let e = StorageHandle::s3(&b.clone().connect_timeout(Duration::from_secs(50 * 86400))).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    // A positive duration under a millisecond is one millisecond, not the default.
    StorageHandle::s3(&b.clone().connect_timeout(Duration::from_micros(10))).unwrap();
    let e = StorageHandle::s3(&b.clone().endpoint_url("http://a\0b")).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("S3Options::endpoint_url"), "{e}");

    // libckpt_s3's own checks.
    let e = StorageHandle::s3(&b.clone().part_size(1 << 20)).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("part_size 1048576 is below S3's 5 MiB minimum part"), "{e}");
    let e = StorageHandle::s3(&S3Options::new()).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("bucket"), "{e}");
    let e = StorageHandle::s3(&b.clone().credentials("AK", "")).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");

    // s3_url_with: the URL gives the bucket and key; a bad URL is named.
    let e = StorageHandle::s3_url_with("s3://b/k", &S3Options::new().prefix("elsewhere")).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("leave S3Options::bucket and prefix unset"), "{e}");
    for bad in ["s3://", "s3:///key", "http://host/bucket/key", "bucket/key"] {
        let e = StorageHandle::s3_url(bad).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{bad}: {e}");
        assert!(e.message().contains(bad), "{bad}: {e}");
    }

    // The secrets stay out of Debug.
    let shown = format!("{:?}", S3Options::new().credentials("AKID", "SECRET").session_token("TOKEN"));
    assert!(shown.contains("AKID") && !shown.contains("SECRET") && !shown.contains("TOKEN"), "{shown}");
}

#[test]
fn options_given_in_code_win_over_the_environment() {
    // The environment names the test server; an endpoint where nothing listens must be the one used, and a
    // single attempt made.
    let options = S3Options::new()
        .bucket(&bucket())
        .endpoint_url("http://127.0.0.1:9")
        .max_attempts(1)
        .connect_timeout(Duration::from_secs(2));
    let npz = Options::new().storage(StorageHandle::s3(&options).unwrap());
    let e = state(1).save_with(format!("{}.npz", unique("endpoint")), &npz).unwrap_err();
    assert_eq!(e.code(), Code::Io, "{e}");
    assert!(e.message().contains("Couldn't connect to server (gave up after 1 attempt in "), "{e}");
}
