# SPDX-License-Identifier: Apache-2.0
"""Communicators: how the processes of one job that save a sharded checkpoint together coordinate.

ckpt has no transport of its own. ``ckpt.TorchComm()`` runs its collectives over a torch.distributed process group
(a DDP or FSDP job: no MPI needed), ``ckpt.MPIComm()`` over mpi4py; for anything else, subclass ``Comm`` and
implement ``get_rank()``, ``get_size()``, ``barrier()``, ``all_reduce(value, op)`` for an int (op "min", "max" or
"sum"), ``broadcast(data, root)`` and ``all_gather(data)`` for bytes. ckpt calls them from the thread that called
it, in the same order on every rank, with small buffers only (statuses, names, shapes), never array data. Pass the
object as ``ckpt.Manager(..., comm=...)``.

A method that raises fails the ckpt call that made it: the exception's text is in the error's message and the
exception is its ``__cause__``. What the other ranks then see is the transport's business (they usually fail
in a collective of their own, or time out).
"""
import ctypes
import struct
from typing import Callable, List, Optional, Sequence

from . import _native, errors
from ._native import lib

_OPS = {_native.REDUCE_MIN: "min", _native.REDUCE_MAX: "max", _native.REDUCE_SUM: "sum"}


class Comm(_native.Handle):
    """Base class of communicators (see the module's documentation). ``rank`` and ``size`` are what ckpt was told
    when the communicator was made; ``close()`` (or leaving a ``with`` block) releases ckpt's reference."""

    _release = "ckpt_comm_free"

    def __init__(self) -> None:
        """Builds the C callback table over this object's methods and asks them for the rank and size (so a
        subclass sets up its transport before calling ``super().__init__()``)."""
        self.error: Optional[BaseException] = None  # the last exception a collective met
        ops = _native.CommOps()
        ops.version = _native.COMM_OPS_VERSION
        self._callbacks = []
        for name, proto in _native.COMM_CALLBACKS:
            impl = getattr(self, "_c_" + name, None)
            if impl is None:
                continue
            cb = proto(self._guarded(impl))
            self._callbacks.append(cb)  # ctypes callbacks must outlive every use of the communicator
            setattr(ops, name, cb)
        h = _native.out()
        rc = lib.ckpt_comm_new(ctypes.byref(h), ctypes.byref(ops))
        if rc != 0:
            cause = self.take_error()
            err = errors.error_for(rc, _native.message())
            if cause is not None:
                raise err from cause
            raise err
        self.handle = h.value
        self.rank: int = lib.ckpt_comm_rank(self.handle)
        self.size: int = lib.ckpt_comm_size(self.handle)

    def take_error(self) -> Optional[BaseException]:
        """The exception the last failing collective met, or None; forgotten once taken."""
        e, self.error = self.error, None
        return e

    def _agree(self, failed: Optional[BaseException], what: str) -> None:
        """Collective, in step with the library's own agreement: every rank passes what it met preparing its part of
        a call (None: success). Returns on every rank when every rank succeeded; otherwise raises on every rank
        the same CkptError, with the code of the lowest failing rank and "<what> failed on rank R of N: <its
        message>" (the exception itself is the ``__cause__`` on that rank)."""
        size = self.size
        lowest = int(self.all_reduce(self.rank if failed is not None else size, "min"))
        if lowest >= size:
            return
        failures = int(self.all_reduce(1 if failed is not None else 0, "sum"))
        code, message = errors.ERROR, b""
        if self.rank == lowest:
            if isinstance(failed, errors.CkptError):
                code, text = failed.code, failed.message
            else:
                text = "%s: %s" % (type(failed).__name__, failed)
            message = text.encode("utf-8", "replace")
        header = bytes(self.broadcast(struct.pack("<qQ", code, len(message)), lowest))
        code, length = struct.unpack("<qQ", header)
        message = bytes(self.broadcast(message if self.rank == lowest else bytes(length), lowest)) if length else b""
        more = ", and on %d more" % (failures - 1) if failures > 1 else ""
        err = errors.error_for(code if code < 0 else errors.ERROR, "%s failed on rank %d of %d%s: %s" % (
            what, lowest, size, more, message.decode("utf-8", "replace")))
        if failed is not None:
            raise err from failed
        raise err

    # What subclasses implement.
    def get_rank(self) -> int:
        """This process's rank, in [0, get_size())."""
        raise NotImplementedError

    def get_size(self) -> int:
        """The number of ranks."""
        raise NotImplementedError

    def barrier(self) -> None:
        """Returns once every rank has called it."""
        raise NotImplementedError

    def all_reduce(self, value: int, op: str) -> int:
        """The minimum ("min"), maximum ("max") or sum ("sum") of every rank's `value` (a signed 64-bit int)."""
        raise NotImplementedError

    def broadcast(self, data: bytes, root: int) -> bytes:
        """Rank `root`'s `data` (every rank passes as many bytes)."""
        raise NotImplementedError

    def all_gather(self, data: bytes) -> Sequence[bytes]:
        """Every rank's `data`, indexed by rank (every rank passes as many bytes)."""
        raise NotImplementedError

    def _guarded(self, impl: Callable) -> Callable:
        def callback(payload, *args):
            try:
                impl(*args)
                return 0
            except BaseException as e:  # nothing may propagate into C: its words go into the error instead
                self.error = e
                _native.set_message(e)
                return e.code if isinstance(e, errors.CkptError) else errors.ERROR
        return callback

    # The C callbacks, in terms of the methods above.
    def _c_rank(self, out) -> None:
        out[0] = int(self.get_rank())

    def _c_size(self, out) -> None:
        out[0] = int(self.get_size())

    def _c_barrier(self) -> None:
        self.barrier()

    def _c_all_reduce_i64(self, value, op) -> None:
        value[0] = int(self.all_reduce(int(value[0]), _OPS[op]))

    def _c_broadcast(self, buf, size, root) -> None:
        data = bytes(self.broadcast(ctypes.string_at(buf, size), root))
        if len(data) != size:
            raise ValueError("broadcast returned %d bytes, not %d" % (len(data), size))
        ctypes.memmove(buf, data, size)

    def _c_all_gather(self, send, size, recv) -> None:
        parts = [bytes(p) for p in self.all_gather(ctypes.string_at(send, size))]
        if len(parts) != self.size or any(len(p) != size for p in parts):
            raise ValueError("all_gather returned %d parts of sizes %s, not %d of %d bytes"
                             % (len(parts), [len(p) for p in parts], self.size, size))
        ctypes.memmove(recv, b"".join(parts), size * self.size)


class MPIComm(Comm):
    """A communicator over an mpi4py communicator (``mpi4py.MPI.COMM_WORLD`` by default), for a job launched with
    mpirun: ``ckpt.Manager(logdir, comm=ckpt.MPIComm())``. It duplicates the communicator, so ckpt's collectives
    never mix with the program's own messages; ``close()`` it after the managers that use it are closed and before
    ``MPI.Finalize``. mpi4py is imported only when one is made (Debian: python3-mpi4py)."""

    def __init__(self, comm=None) -> None:
        """Duplicates `comm` (an ``mpi4py.MPI.Comm``; None: ``COMM_WORLD``). Collective over its ranks."""
        from mpi4py import MPI
        self._mpi = MPI
        self._comm = (comm if comm is not None else MPI.COMM_WORLD).Dup()
        self._reduce = {"min": MPI.MIN, "max": MPI.MAX, "sum": MPI.SUM}
        super().__init__()

    def get_rank(self) -> int:
        """This process's rank in the communicator."""
        return self._comm.Get_rank()

    def get_size(self) -> int:
        """The communicator's size."""
        return self._comm.Get_size()

    def barrier(self) -> None:
        """MPI_Barrier."""
        self._comm.Barrier()

    def all_reduce(self, value: int, op: str) -> int:
        """MPI_Allreduce of one int with MPI_MIN, MPI_MAX or MPI_SUM."""
        return self._comm.allreduce(value, op=self._reduce[op])

    def broadcast(self, data: bytes, root: int) -> bytes:
        """Root's bytes, through mpi4py's bcast."""
        return self._comm.bcast(data, root=root)

    def all_gather(self, data: bytes) -> List[bytes]:
        """Every rank's bytes, through mpi4py's allgather."""
        return self._comm.allgather(data)

    def close(self) -> None:
        """Releases ckpt's reference and frees the duplicated MPI communicator: close the managers that use it
        first (their collectives would fail from then on)."""
        super().close()
        comm, self._comm = self._comm, None
        if comm is not None and not self._mpi.Is_finalized():
            comm.Free()


class TorchComm(Comm):
    """A communicator over a torch.distributed process group, for a DDP or FSDP job (torchrun, or
    ``torch.multiprocessing`` with ``init_process_group``): ``ckpt.Manager(logdir, comm=ckpt.TorchComm())``. No MPI
    is needed. `group` is the process group (None: the default one, which must be initialized); ranks are the
    group's. The collectives run on small uint8/int64 tensors with whatever backend the group has: gloo on the CPU,
    and for NCCL on the current CUDA device (``torch.cuda.set_device`` first). ckpt's collectives go through the
    group itself, in the program's order on the calling thread: make every rank call ckpt at the same point, as
    any collective. ``close()`` it after the managers that use it and before ``destroy_process_group``. torch is
    imported only when one is made."""

    def __init__(self, group=None) -> None:
        """Binds to `group` (None: the default process group). Not itself a collective."""
        import torch
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("ckpt.TorchComm needs an initialized torch.distributed process group "
                               "(torch.distributed.init_process_group)")
        self._torch, self._dist, self._group = torch, dist, group
        backend = str(dist.get_backend(group)).lower()
        self._device = (torch.device("cuda", torch.cuda.current_device()) if backend == "nccl"
                        else torch.device("cpu"))
        self._reduce = {"min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX, "sum": dist.ReduceOp.SUM}
        super().__init__()

    def get_rank(self) -> int:
        """This process's rank in the group."""
        return self._dist.get_rank(self._group)

    def get_size(self) -> int:
        """The group's size."""
        return self._dist.get_world_size(self._group)

    def barrier(self) -> None:
        """torch.distributed.barrier over the group."""
        self._dist.barrier(group=self._group)

    def all_reduce(self, value: int, op: str) -> int:
        """torch.distributed.all_reduce of a one-element int64 tensor."""
        t = self._torch.tensor([value], dtype=self._torch.int64, device=self._device)
        self._dist.all_reduce(t, op=self._reduce[op], group=self._group)
        return int(t.item())

    def broadcast(self, data: bytes, root: int) -> bytes:
        """torch.distributed.broadcast of a uint8 tensor from the group's rank `root`."""
        t = self._bytes_tensor(data)
        self._dist.broadcast(t, src=self._global_rank(root), group=self._group)
        return t.cpu().numpy().tobytes()

    def all_gather(self, data: bytes) -> List[bytes]:
        """torch.distributed.all_gather of a uint8 tensor from every rank of the group."""
        t = self._bytes_tensor(data)
        parts = [self._torch.empty_like(t) for _ in range(self.size)]
        self._dist.all_gather(parts, t, group=self._group)
        return [p.cpu().numpy().tobytes() for p in parts]

    def _bytes_tensor(self, data: bytes):
        return self._torch.frombuffer(bytearray(data), dtype=self._torch.uint8).to(self._device)

    def _global_rank(self, group_rank: int) -> int:
        # broadcast names its source by its rank in the default group.
        if self._group is None:
            return group_rank
        get = getattr(self._dist, "get_global_rank", None)
        if get is None:  # torch before 2.0
            from torch.distributed import distributed_c10d
            get = distributed_c10d._get_global_rank
        return get(self._group, group_rank)
