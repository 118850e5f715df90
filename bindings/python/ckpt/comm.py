"""Communicators: how the processes of one job that save a sharded checkpoint together coordinate.

ckpt has no transport of its own. Subclass ``Comm`` and implement its collectives over whatever the job already
uses (torch.distributed, mpi4py, Gloo): ``get_rank()``, ``get_size()``, ``barrier()``, ``all_reduce(value, op)``
for an int (op "min", "max" or "sum"), ``broadcast(data, root)`` and ``all_gather(data)`` for bytes. ckpt calls
them from the thread that called it, in the same order on every rank, with small buffers only (statuses, names,
shapes), never array data. Pass the object as ``ckpt.Manager(..., comm=...)``.

    class TorchComm(ckpt.Comm):
        def get_rank(self): return dist.get_rank()
        ...
"""
import ctypes

from . import _native, errors
from ._native import lib

_OPS = {_native.REDUCE_MIN: "min", _native.REDUCE_MAX: "max", _native.REDUCE_SUM: "sum"}


class Comm(_native.Handle):
    """Base class of communicators (see the module's documentation). ``rank`` and ``size`` are what ckpt was told."""

    _release = "ckpt_comm_free"

    def __init__(self):
        self.error = None  # the last exception a collective met
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
        if rc != 0 and self.error is not None:
            raise errors.error_for(rc, "%s: %s" % (_native.message(), self.error))
        _native.check(rc)
        self.handle = h.value
        self.rank = lib.ckpt_comm_rank(self.handle)
        self.size = lib.ckpt_comm_size(self.handle)

    def take_error(self):
        """The exception the last failing collective met (once)."""
        e, self.error = self.error, None
        return e

    # What subclasses implement.
    def get_rank(self):
        raise NotImplementedError

    def get_size(self):
        raise NotImplementedError

    def barrier(self):
        raise NotImplementedError

    def all_reduce(self, value, op):
        raise NotImplementedError

    def broadcast(self, data, root):
        raise NotImplementedError

    def all_gather(self, data):
        raise NotImplementedError

    def _guarded(self, impl):
        def callback(payload, *args):
            try:
                impl(*args)
                return 0
            except BaseException as e:  # nothing may propagate into C
                self.error = e
                return errors.ERROR
        return callback

    # The C callbacks, in terms of the methods above.
    def _c_rank(self, out):
        out[0] = int(self.get_rank())

    def _c_size(self, out):
        out[0] = int(self.get_size())

    def _c_barrier(self):
        self.barrier()

    def _c_all_reduce_i64(self, value, op):
        value[0] = int(self.all_reduce(int(value[0]), _OPS[op]))

    def _c_broadcast(self, buf, size, root):
        data = bytes(self.broadcast(ctypes.string_at(buf, size), root))
        if len(data) != size:
            raise ValueError("broadcast returned %d bytes, not %d" % (len(data), size))
        ctypes.memmove(buf, data, size)

    def _c_all_gather(self, send, size, recv):
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

    def __init__(self, comm=None):
        from mpi4py import MPI
        self._mpi = MPI
        self._comm = (comm if comm is not None else MPI.COMM_WORLD).Dup()
        self._reduce = {"min": MPI.MIN, "max": MPI.MAX, "sum": MPI.SUM}
        super().__init__()

    def get_rank(self):
        return self._comm.Get_rank()

    def get_size(self):
        return self._comm.Get_size()

    def barrier(self):
        self._comm.Barrier()

    def all_reduce(self, value, op):
        return self._comm.allreduce(value, op=self._reduce[op])

    def broadcast(self, data, root):
        return self._comm.bcast(data, root=root)

    def all_gather(self, data):
        return self._comm.allgather(data)

    def close(self):
        """Releases ckpt's reference and frees the duplicated MPI communicator: close the managers that use it
        first (their collectives would fail from then on)."""
        super().close()
        comm, self._comm = self._comm, None
        if comm is not None and not self._mpi.Is_finalized():
            comm.Free()
