// SPDX-License-Identifier: Apache-2.0
//! Communicators and row splits.
use ckpt::{Code, Comm, CommHandle, Reduce, Vars};

/// A world of `size` ranks seen from `rank`, whose collectives see only this rank (enough for a world of one).
pub(crate) struct Fixed {
    rank: i32,
    size: i32,
}

pub(crate) const SOLO: Fixed = Fixed { rank: 0, size: 1 };

impl Comm for Fixed {
    fn rank(&self) -> i32 {
        self.rank
    }
    fn size(&self) -> i32 {
        self.size
    }
    fn barrier(&mut self) -> ckpt::Result<()> {
        Ok(())
    }
    fn all_reduce(&mut self, value: i64, _op: Reduce) -> ckpt::Result<i64> {
        Ok(value)
    }
    fn broadcast(&mut self, _buf: &mut [u8], _root: i32) -> ckpt::Result<()> {
        Ok(())
    }
    fn all_gather(&mut self, send: &[u8], recv: &mut [u8]) -> ckpt::Result<()> {
        recv[..send.len()].copy_from_slice(send);
        Ok(())
    }
}

/// One rank whose every collective fails, saying which.
struct Broken;

impl Comm for Broken {
    fn rank(&self) -> i32 {
        0
    }
    fn size(&self) -> i32 {
        1
    }
    fn barrier(&mut self) -> ckpt::Result<()> {
        Err(ckpt::Error::new(Code::Io, "barrier: the interconnect is down"))
    }
    fn all_reduce(&mut self, _value: i64, _op: Reduce) -> ckpt::Result<i64> {
        Err(ckpt::Error::new(Code::Io, "all_reduce: the interconnect is down"))
    }
    fn broadcast(&mut self, _buf: &mut [u8], _root: i32) -> ckpt::Result<()> {
        Err(ckpt::Error::new(Code::Io, "broadcast: the interconnect is down"))
    }
    fn all_gather(&mut self, _send: &[u8], _recv: &mut [u8]) -> ckpt::Result<()> {
        Err(ckpt::Error::new(Code::Io, "all_gather: the interconnect is down"))
    }
}

#[test]
fn a_communicator_method_error_gives_the_call_its_message_once() {
    let dir = crate::common::TempDir::new("broken-comm");
    let comm = CommHandle::new(Broken).unwrap();
    let e = ckpt::Manager::open(dir.path(), &ckpt::ManagerOptions::new().comm(comm)).unwrap_err();
    assert_eq!(e.code(), Code::Io, "{e}");
    assert_eq!(e.message(), "communicator callback 'all_reduce_i64' failed: all_reduce: the interconnect is down");
    assert_eq!(crate::common::occurrences(e.message(), "the interconnect is down"), 1, "{e}");
}

#[test]
fn a_communicator_reports_the_rank_and_size_its_methods_gave() {
    let comm = CommHandle::new(SOLO).unwrap();
    assert_eq!((comm.rank(), comm.size()), (0, 1));
    let copy = comm.clone();
    drop(comm);
    assert_eq!(copy.size(), 1);
}

#[test]
fn a_rank_outside_the_world_is_refused() {
    let e = CommHandle::new(Fixed { rank: 3, size: 2 }).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("rank 3 of 2"), "{}", e.message());
}

#[test]
fn a_variable_is_marked_as_rows_of_a_global_array_and_back() {
    let mut vars = Vars::new().unwrap();
    vars.add::<f32>("emb", &[2, 3], &[0.0; 6]).unwrap();
    assert_eq!(vars.rows("emb").unwrap(), None);
    vars.set_rows("emb", Some((4, 10))).unwrap();
    assert_eq!(vars.rows("emb").unwrap(), Some((4, 10)));
    let e = vars.set_rows("emb", Some((9, 10))).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("not within [0, 10)"), "{}", e.message());
    vars.set_rows("emb", None).unwrap();
    assert_eq!(vars.rows("emb").unwrap(), None);
}

#[test]
fn a_manager_with_a_communicator_saves_a_sharded_step_that_a_step_reads() {
    let dir = crate::common::TempDir::new("sharded");
    let comm = CommHandle::new(SOLO).unwrap();
    let mut manager = ckpt::Manager::open(dir.path(), &ckpt::ManagerOptions::new().comm(comm)).unwrap();
    let mut vars = Vars::new().unwrap();
    let emb: Vec<f32> = (0..12).map(|x| x as f32).collect();
    vars.add::<f32>("emb", &[4, 3], &emb).unwrap();
    vars.set_rows("emb", Some((0, 4))).unwrap();
    manager.save(&vars, 5).unwrap();
    assert_eq!(manager.list().unwrap(), vec![5]);
    drop(manager);

    let mut step = ckpt::Step::open(dir.path().join("ckpt/0000000005")).unwrap();
    assert_eq!((step.index(), step.world_size(), step.len()), (5, 1, 1));
    assert_eq!(step.shard(0), Some("shard-00000-of-00001.npz"));
    assert_eq!(step.shard(1), None);
    assert_eq!(step.names().collect::<Vec<_>>(), vec!["emb"]);
    assert_eq!(step.dtype("emb").unwrap(), ckpt::Dtype::Float32);
    assert_eq!((step.itemsize("emb").unwrap(), step.nbytes("emb").unwrap(), step.pieces("emb").unwrap()), (4, 48, 1));
    assert_eq!(step.shape("emb").unwrap(), &[4, 3]);
    assert_eq!(step.metadata("ckpt.index"), Some("5"));
    assert!(step.metadata_iter().any(|(k, _)| k == "ckpt.saved_at"));
    let rows = step.read_rows_bytes("emb", 1, 2).unwrap();
    let want: Vec<u8> = emb[3..9].iter().flat_map(|x| x.to_ne_bytes()).collect();
    assert_eq!(rows, want);
    assert!(!step.is_empty());
}
